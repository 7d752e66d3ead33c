/* A CUDA driver API program for pinmon attach's benchmarks, with no CUDA header: it dlopens
 * libcuda.so.1 and declares the few prototypes it calls. Modes:
 *
 *   paced SECONDS OUT.json   every 40 ms (25 rounds a second, a deadline schedule): 8 MiB host to
 *                            device and device to host from pinned (cuMemHostAlloc) and from pageable
 *                            (malloc) memory, 8 MiB device to host into write-combined memory
 *                            (cuMemHostAlloc WRITECOMBINED, 16 MiB), and a 2D copy (1 MiB x 8 rows) from
 *                            pinned memory; every 0.5 s a pinned allocation of 3 MiB + 4 KiB freed at
 *                            once and a registration of 2 MiB of pageable memory unregistered at once.
 *                            Prints "ready" once warmed up, then writes each round's and each
 *                            allocation's CLOCK_MONOTONIC start time and the sizes to OUT.json.
 *   rate CALLS_PER_S SECONDS tiny copies (4 bytes, host to device, async) at a rate, then exits.
 *   tight N SIZE             N back-to-back async host-to-device copies of SIZE bytes from pinned
 *                            memory; prints the time per call (ns).
 *   loop SECONDS SIZE        synchronous pinned host-to-device copies of SIZE bytes, back to back, for
 *                            SECONDS; prints copies per second.
 *   aloop SECONDS SIZE       asynchronous pinned host-to-device copies of SIZE bytes on a stream of their
 *                            own, the stream synchronised every 64 copies (as PyTorch's non_blocking
 *                            copies and CuPy's streams are used), for SECONDS; prints copies per second.
 * tight, loop and aloop print "ready" once warmed up and start when a line comes on standard input.
 *
 * --standin before the mode: the stand-in libcuda of pinmon's tests (no context, a made-up device
 * pointer). Build: gcc -O2 -o paced_driver paced_driver.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef enum { MT_HOST = 1, MT_DEVICE = 2 } CUmemorytype;
typedef struct {
    size_t srcXInBytes, srcY; CUmemorytype srcMemoryType; const void *srcHost; CUdeviceptr srcDevice;
    void *srcArray; size_t srcPitch;
    size_t dstXInBytes, dstY; CUmemorytype dstMemoryType; void *dstHost; CUdeviceptr dstDevice;
    void *dstArray; size_t dstPitch;
    size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;

#define MIB (1u << 20)
#define COPY (8 * MIB)
#define WC_BYTES (16 * MIB)
#define ALLOC_BYTES (3 * MIB + 4096)
#define REG_BYTES (2 * MIB)
#define MAX_ROUNDS 100000

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(CUdevice *, int);
static CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*cuCtxSetCurrent)(CUcontext);
static CUresult (*cuCtxSynchronize)(void);
static CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
static CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
static CUresult (*cuMemFreeHost)(void *);
static CUresult (*cuMemHostRegister_v2)(void *, size_t, unsigned);
static CUresult (*cuMemHostUnregister)(void *);
static CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void *, size_t);
static CUresult (*cuMemcpyDtoH_v2)(void *, CUdeviceptr, size_t);
static CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*cuMemcpy2D_v2)(const CUDA_MEMCPY2D *);
static CUresult (*cuStreamCreate)(CUstream *, unsigned);
static CUresult (*cuStreamSynchronize)(CUstream);

static int standin;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_until(double t) {
    double d = t - now();
    if (d <= 0) return;
    struct timespec ts = { (time_t)d, (long)((d - (time_t)d) * 1e9) };
    nanosleep(&ts, NULL);
}

static void check(CUresult r, const char *what) {
    if (r != 0) { fprintf(stderr, "%s: CUresult %d\n", what, r); exit(2); }
}

#define LOAD(h, name) do { *(void **)&name = dlsym(h, #name); } while (0)

static CUdeviceptr setup(size_t device_bytes) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror()); exit(2); }
    LOAD(h, cuInit); LOAD(h, cuDeviceGet); LOAD(h, cuDevicePrimaryCtxRetain); LOAD(h, cuCtxSetCurrent);
    LOAD(h, cuCtxSynchronize); LOAD(h, cuMemAlloc_v2); LOAD(h, cuMemHostAlloc); LOAD(h, cuMemFreeHost);
    LOAD(h, cuMemHostRegister_v2); LOAD(h, cuMemHostUnregister); LOAD(h, cuMemcpyHtoD_v2);
    LOAD(h, cuMemcpyDtoH_v2); LOAD(h, cuMemcpyHtoDAsync_v2); LOAD(h, cuMemcpy2D_v2);
    LOAD(h, cuStreamCreate); LOAD(h, cuStreamSynchronize);   /* the stand-in has neither: not called there */
    if (!cuMemHostAlloc || !cuMemcpyHtoD_v2 || !cuMemcpyDtoH_v2 || !cuMemcpyHtoDAsync_v2 || !cuMemcpy2D_v2) {
        fprintf(stderr, "libcuda.so.1 lacks a function this program calls\n"); exit(2);
    }
    if (standin) return 0x100000;
    CUdevice dev; CUcontext ctx; CUdeviceptr d;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    check(cuMemAlloc_v2(&d, device_bytes), "cuMemAlloc_v2");
    return d;
}

static void sync(void) { if (!standin) check(cuCtxSynchronize(), "cuCtxSynchronize"); }

static void *host_alloc(size_t n, unsigned flags) {
    void *p = NULL;
    check(cuMemHostAlloc(&p, n, flags), "cuMemHostAlloc");
    memset(p, 1, n);
    return p;
}

static int paced(double seconds, const char *out) {
    CUdeviceptr d = setup(2 * COPY);
    void *pinned = host_alloc(COPY, 0), *wc = host_alloc(WC_BYTES, 4);
    char *pageable = malloc(COPY), *reg = mmap(NULL, REG_BYTES, PROT_READ | PROT_WRITE,
                                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(pageable, 1, COPY); memset(reg, 1, REG_BYTES);
    CUDA_MEMCPY2D c2 = {0};
    c2.srcMemoryType = MT_HOST; c2.srcHost = pinned; c2.srcPitch = MIB;
    c2.dstMemoryType = MT_DEVICE; c2.dstDevice = d + COPY; c2.dstPitch = MIB;
    c2.WidthInBytes = MIB; c2.Height = 8;
    static double rounds[MAX_ROUNDS], allocs[MAX_ROUNDS];
    int nr = 0, na = 0;
    for (int i = 0; i < 5; i++) {  /* warm-up */
        check(cuMemcpyHtoD_v2(d, pinned, COPY), "warm");
        check(cuMemcpyDtoH_v2(pinned, d, COPY), "warm");
    }
    sync();
    printf("ready\n"); fflush(stdout);
    double t0 = now(), next_alloc = t0;
    for (int i = 0; nr < MAX_ROUNDS; i++) {
        double due = t0 + i * 0.04;
        if (due - t0 >= seconds) break;
        sleep_until(due);
        rounds[nr++] = now();
        check(cuMemcpyHtoD_v2(d, pinned, COPY), "h2d pinned");
        check(cuMemcpyDtoH_v2(pinned, d, COPY), "d2h pinned");
        check(cuMemcpyHtoD_v2(d, pageable, COPY), "h2d pageable");
        check(cuMemcpyDtoH_v2(pageable, d, COPY), "d2h pageable");
        check(cuMemcpyDtoH_v2(wc, d, COPY), "d2h write-combined");
        check(cuMemcpy2D_v2(&c2), "2d h2d pinned");
        if (now() >= next_alloc && na < MAX_ROUNDS) {
            allocs[na++] = now();
            void *p = NULL;
            check(cuMemHostAlloc(&p, ALLOC_BYTES, 0), "cuMemHostAlloc cycle");
            check(cuMemFreeHost(p), "cuMemFreeHost cycle");
            check(cuMemHostRegister_v2(reg, REG_BYTES, 0), "cuMemHostRegister_v2 cycle");
            check(cuMemHostUnregister(reg), "cuMemHostUnregister cycle");
            next_alloc += 0.5;
        }
    }
    sync();
    FILE *f = fopen(out, "w");
    if (!f) { perror(out); return 2; }
    fprintf(f, "{\"copy_bytes\": %u, \"copy2d_bytes\": %u, \"alloc_bytes\": %u, \"register_bytes\": %u, "
               "\"streams\": [[\"h2d\", \"pinned\"], [\"d2h\", \"pinned\"], [\"h2d\", \"pageable\"], "
               "[\"d2h\", \"pageable\"], [\"d2h\", \"write_combined\"]], \"rounds\": [",
            COPY, 8 * MIB, ALLOC_BYTES, REG_BYTES);
    for (int i = 0; i < nr; i++) fprintf(f, "%s%.9f", i ? "," : "", rounds[i]);
    fprintf(f, "], \"allocs\": [");
    for (int i = 0; i < na; i++) fprintf(f, "%s%.9f", i ? "," : "", allocs[i]);
    fprintf(f, "]}\n");
    fclose(f);
    return 0;
}

static int rate(double per_s, double seconds) {
    CUdeviceptr d = setup(MIB);
    void *pinned = host_alloc(4096, 0);
    printf("ready\n"); fflush(stdout);
    double t0 = now();
    long n = (long)(per_s * seconds);
    for (long i = 0; i < n; i++) {
        sleep_until(t0 + i / per_s);
        check(cuMemcpyHtoDAsync_v2(d, pinned, 4, 0), "tiny");
    }
    sync();
    printf("{\"calls\": %ld, \"seconds\": %.6f}\n", n, now() - t0);
    return 0;
}

static void wait_for_go(void) {
    char line[16];
    printf("ready\n"); fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) exit(2);
}

static int tight(long n, size_t size) {
    CUdeviceptr d = setup(size > MIB ? size : MIB);
    void *pinned = host_alloc(size, 0);
    for (int i = 0; i < 1000; i++) check(cuMemcpyHtoDAsync_v2(d, pinned, size, 0), "warm");
    sync();
    wait_for_go();
    double t0 = now();
    for (long i = 0; i < n; i++) check(cuMemcpyHtoDAsync_v2(d, pinned, size, 0), "tight");
    double t1 = now();
    sync();
    printf("{\"calls\": %ld, \"ns_per_call\": %.1f}\n", n, (t1 - t0) * 1e9 / n);
    return 0;
}

static int loop(double seconds, size_t size) {
    CUdeviceptr d = setup(size);
    void *pinned = host_alloc(size, 0);
    for (int i = 0; i < 20; i++) check(cuMemcpyHtoD_v2(d, pinned, size), "warm");
    wait_for_go();
    long n = 0;
    double t0 = now();
    while (now() - t0 < seconds) { check(cuMemcpyHtoD_v2(d, pinned, size), "loop"); n++; }
    double t1 = now();
    printf("{\"copies\": %ld, \"seconds\": %.6f, \"copies_per_s\": %.3f}\n", n, t1 - t0, n / (t1 - t0));
    return 0;
}

#define SYNC_EVERY 64
#define CU_STREAM_NON_BLOCKING 1

static void stream_sync(CUstream s) { if (!standin) check(cuStreamSynchronize(s), "cuStreamSynchronize"); }

static int aloop(double seconds, size_t size) {
    CUdeviceptr d = setup(size);
    void *pinned = host_alloc(size, 0);
    CUstream s = 0;
    if (!standin) {
        if (!cuStreamCreate || !cuStreamSynchronize) { fprintf(stderr, "libcuda.so.1 lacks streams\n"); exit(2); }
        check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    }
    for (int i = 0; i < SYNC_EVERY; i++) check(cuMemcpyHtoDAsync_v2(d, pinned, size, s), "warm");
    stream_sync(s);
    wait_for_go();
    long n = 0;
    double t0 = now();
    while (now() - t0 < seconds) {
        for (int i = 0; i < SYNC_EVERY; i++) check(cuMemcpyHtoDAsync_v2(d, pinned, size, s), "aloop");
        stream_sync(s);
        n += SYNC_EVERY;
    }
    double t1 = now();
    printf("{\"copies\": %ld, \"seconds\": %.6f, \"copies_per_s\": %.3f}\n", n, t1 - t0, n / (t1 - t0));
    return 0;
}

int main(int argc, char **argv) {
    int a = 1;
    if (a < argc && !strcmp(argv[a], "--standin")) { standin = 1; a++; }
    if (a + 2 < argc && !strcmp(argv[a], "paced")) return paced(atof(argv[a + 1]), argv[a + 2]);
    if (a + 2 < argc && !strcmp(argv[a], "rate")) return rate(atof(argv[a + 1]), atof(argv[a + 2]));
    if (a + 2 < argc && !strcmp(argv[a], "tight")) return tight(atol(argv[a + 1]), (size_t)atol(argv[a + 2]));
    if (a + 2 < argc && !strcmp(argv[a], "loop")) return loop(atof(argv[a + 1]), (size_t)atol(argv[a + 2]));
    if (a + 2 < argc && !strcmp(argv[a], "aloop")) return aloop(atof(argv[a + 1]), (size_t)atol(argv[a + 2]));
    fprintf(stderr, "usage: %s [--standin] paced SECONDS OUT.json | rate PER_S SECONDS | tight N SIZE | loop SECONDS SIZE"
                    " | aloop SECONDS SIZE\n", argv[0]);
    return 2;
}
