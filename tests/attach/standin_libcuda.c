/* A stand-in libcuda.so.1 for pinmon's attach tests: the driver API's copy and pinned-memory entry
 * points with their real names and signatures (declared here from the CUDA driver API's documented
 * prototypes; no CUDA header is used), doing nothing. The host allocations map shared anonymous
 * memory, which /proc/PID/maps shows as "/dev/zero (deleted)" like CUDA's pinned buffers, so that an
 * allocation seen during an attach has a mapping to find; cuMemFreeHost unmaps it.
 *
 * Built by tests/attach/standin.py: gcc -shared -fPIC -O1 -fno-ipa-icf -o libcuda.so.1 standin_libcuda.c */
#include <stddef.h>
#include <sys/mman.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned int CUdeviceptr_v1;
typedef void *CUarray;
typedef void *CUcontext;
typedef void *CUstream;
typedef void CUmemcpyAttributes;
typedef void CUDA_MEMCPY3D_BATCH_OP;

typedef enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2, CU_MEMORYTYPE_ARRAY = 3,
               CU_MEMORYTYPE_UNIFIED = 4 } CUmemorytype;

typedef struct {
    size_t srcXInBytes, srcY; CUmemorytype srcMemoryType; const void *srcHost; CUdeviceptr srcDevice;
    CUarray srcArray; size_t srcPitch;
    size_t dstXInBytes, dstY; CUmemorytype dstMemoryType; void *dstHost; CUdeviceptr dstDevice;
    CUarray dstArray; size_t dstPitch;
    size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;

typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD; CUmemorytype srcMemoryType; const void *srcHost;
    CUdeviceptr srcDevice; CUarray srcArray; void *reserved0; size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD; CUmemorytype dstMemoryType; void *dstHost;
    CUdeviceptr dstDevice; CUarray dstArray; void *reserved1; size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;

typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD; CUmemorytype srcMemoryType; const void *srcHost;
    CUdeviceptr srcDevice; CUarray srcArray; CUcontext srcContext; size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD; CUmemorytype dstMemoryType; void *dstHost;
    CUdeviceptr dstDevice; CUarray dstArray; CUcontext dstContext; size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D_PEER;

typedef struct {
    unsigned int srcXInBytes, srcY; CUmemorytype srcMemoryType; const void *srcHost;
    CUdeviceptr_v1 srcDevice; CUarray srcArray; unsigned int srcPitch;
    unsigned int dstXInBytes, dstY; CUmemorytype dstMemoryType; void *dstHost;
    CUdeviceptr_v1 dstDevice; CUarray dstArray; unsigned int dstPitch;
    unsigned int WidthInBytes, Height;
} CUDA_MEMCPY2D_v1;

typedef struct {
    unsigned int srcXInBytes, srcY, srcZ, srcLOD; CUmemorytype srcMemoryType; const void *srcHost;
    CUdeviceptr_v1 srcDevice; CUarray srcArray; void *reserved0; unsigned int srcPitch, srcHeight;
    unsigned int dstXInBytes, dstY, dstZ, dstLOD; CUmemorytype dstMemoryType; void *dstHost;
    CUdeviceptr_v1 dstDevice; CUarray dstArray; void *reserved1; unsigned int dstPitch, dstHeight;
    unsigned int WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D_v1;

#define API __attribute__((visibility("default"), noinline))
/* Each body hands its arguments to an empty asm: the calls and their arguments stay as written. Built
 * with -fno-ipa-icf, so that no two functions share an address. */
#define KEEP(x) __asm__ volatile("" : : "g"(x) : "memory")

/* one way, _v2 and their per-thread twins */
API CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { KEEP(d); KEEP(h); KEEP(n); return 0; }
API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *h, size_t n) { KEEP(d); KEEP(h); KEEP(n); return 0; }
API CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { KEEP(h); KEEP(d); KEEP(n); return 0; }
API CUresult cuMemcpyDtoH_v2_ptds(void *h, CUdeviceptr d, size_t n) { KEEP(h); KEEP(d); KEEP(n); return 0; }
API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, CUstream s) { KEEP(d); KEEP(h); KEEP(n); KEEP(s); return 0; }
API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *h, size_t n, CUstream s) { KEEP(d); KEEP(h); KEEP(n); KEEP(s); return 0; }
API CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, CUstream s) { KEEP(h); KEEP(d); KEEP(n); KEEP(s); return 0; }
API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *h, CUdeviceptr d, size_t n, CUstream s) { KEEP(h); KEEP(d); KEEP(n); KEEP(s); return 0; }
API CUresult cuMemcpyHtoA_v2(CUarray a, size_t off, const void *h, size_t n) { KEEP(a); KEEP(off); KEEP(h); KEEP(n); return 0; }
API CUresult cuMemcpyHtoA_v2_ptds(CUarray a, size_t off, const void *h, size_t n) { KEEP(a); KEEP(off); KEEP(h); KEEP(n); return 0; }
API CUresult cuMemcpyAtoH_v2(void *h, CUarray a, size_t off, size_t n) { KEEP(h); KEEP(a); KEEP(off); KEEP(n); return 0; }
API CUresult cuMemcpyAtoH_v2_ptds(void *h, CUarray a, size_t off, size_t n) { KEEP(h); KEEP(a); KEEP(off); KEEP(n); return 0; }
API CUresult cuMemcpyHtoAAsync_v2(CUarray a, size_t off, const void *h, size_t n, CUstream s) { KEEP(a); KEEP(off); KEEP(h); KEEP(n); KEEP(s); return 0; }
API CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray a, size_t off, const void *h, size_t n, CUstream s) { KEEP(a); KEEP(off); KEEP(h); KEEP(n); KEEP(s); return 0; }
API CUresult cuMemcpyAtoHAsync_v2(void *h, CUarray a, size_t off, size_t n, CUstream s) { KEEP(h); KEEP(a); KEEP(off); KEEP(n); KEEP(s); return 0; }
API CUresult cuMemcpyAtoHAsync_v2_ptsz(void *h, CUarray a, size_t off, size_t n, CUstream s) { KEEP(h); KEEP(a); KEEP(off); KEEP(n); KEEP(s); return 0; }

/* legacy one way (32-bit sizes and device pointers) */
API CUresult cuMemcpyHtoD(CUdeviceptr_v1 d, const void *h, unsigned int n) { KEEP(d); KEEP(h); KEEP(n); return 0; }
API CUresult cuMemcpyDtoH(void *h, CUdeviceptr_v1 d, unsigned int n) { KEEP(h); KEEP(d); KEEP(n); return 0; }
API CUresult cuMemcpyHtoDAsync(CUdeviceptr_v1 d, const void *h, unsigned int n, CUstream s) { KEEP(d); KEEP(h); KEEP(n); KEEP(s); return 0; }
API CUresult cuMemcpyDtoHAsync(void *h, CUdeviceptr_v1 d, unsigned int n, CUstream s) { KEEP(h); KEEP(d); KEEP(n); KEEP(s); return 0; }
API CUresult cuMemcpyHtoA(CUarray a, unsigned int off, const void *h, unsigned int n) { KEEP(a); KEEP(off); KEEP(h); KEEP(n); return 0; }
API CUresult cuMemcpyAtoH(void *h, CUarray a, unsigned int off, unsigned int n) { KEEP(h); KEEP(a); KEEP(off); KEEP(n); return 0; }
API CUresult cuMemcpyHtoAAsync(CUarray a, unsigned int off, const void *h, unsigned int n, CUstream s) { KEEP(a); KEEP(off); KEEP(h); KEEP(n); KEEP(s); return 0; }
API CUresult cuMemcpyAtoHAsync(void *h, CUarray a, unsigned int off, unsigned int n, CUstream s) { KEEP(h); KEEP(a); KEEP(off); KEEP(n); KEEP(s); return 0; }

/* device or array on both sides */
API CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { KEEP(d); KEEP(s); KEEP(n); return 0; }
API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { KEEP(d); KEEP(s); KEEP(n); return 0; }
API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { KEEP(d); KEEP(s); KEEP(n); KEEP(st); return 0; }
API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { KEEP(d); KEEP(s); KEEP(n); KEEP(st); return 0; }
API CUresult cuMemcpyDtoA_v2(CUarray a, size_t off, CUdeviceptr s, size_t n) { KEEP(a); KEEP(off); KEEP(s); KEEP(n); return 0; }
API CUresult cuMemcpyDtoA_v2_ptds(CUarray a, size_t off, CUdeviceptr s, size_t n) { KEEP(a); KEEP(off); KEEP(s); KEEP(n); return 0; }
API CUresult cuMemcpyAtoD_v2(CUdeviceptr d, CUarray a, size_t off, size_t n) { KEEP(d); KEEP(a); KEEP(off); KEEP(n); return 0; }
API CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr d, CUarray a, size_t off, size_t n) { KEEP(d); KEEP(a); KEEP(off); KEEP(n); return 0; }
API CUresult cuMemcpyAtoA_v2(CUarray d, size_t doff, CUarray s, size_t soff, size_t n) { KEEP(d); KEEP(doff); KEEP(s); KEEP(soff); KEEP(n); return 0; }
API CUresult cuMemcpyAtoA_v2_ptds(CUarray d, size_t doff, CUarray s, size_t soff, size_t n) { KEEP(d); KEEP(doff); KEEP(s); KEEP(soff); KEEP(n); return 0; }
API CUresult cuMemcpyDtoD(CUdeviceptr_v1 d, CUdeviceptr_v1 s, unsigned int n) { KEEP(d); KEEP(s); KEEP(n); return 0; }
API CUresult cuMemcpyDtoDAsync(CUdeviceptr_v1 d, CUdeviceptr_v1 s, unsigned int n, CUstream st) { KEEP(d); KEEP(s); KEEP(n); KEEP(st); return 0; }
API CUresult cuMemcpyDtoA(CUarray a, unsigned int off, CUdeviceptr_v1 s, unsigned int n) { KEEP(a); KEEP(off); KEEP(s); KEEP(n); return 0; }
API CUresult cuMemcpyAtoD(CUdeviceptr_v1 d, CUarray a, unsigned int off, unsigned int n) { KEEP(d); KEEP(a); KEEP(off); KEEP(n); return 0; }
API CUresult cuMemcpyAtoA(CUarray d, unsigned int doff, CUarray s, unsigned int soff, unsigned int n) { KEEP(d); KEEP(doff); KEEP(s); KEEP(soff); KEEP(n); return 0; }

/* the way from the pointers */
API CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) { KEEP(d); KEEP(s); KEEP(n); return 0; }
API CUresult cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { KEEP(d); KEEP(s); KEEP(n); return 0; }
API CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { KEEP(d); KEEP(s); KEEP(n); KEEP(st); return 0; }
API CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { KEEP(d); KEEP(s); KEEP(n); KEEP(st); return 0; }
API CUresult cuMemcpyWithAttributesAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUmemcpyAttributes *a, CUstream st) { KEEP(d); KEEP(s); KEEP(n); KEEP(a); KEEP(st); return 0; }
API CUresult cuMemcpyWithAttributesAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUmemcpyAttributes *a, CUstream st) { KEEP(d); KEEP(s); KEEP(n); KEEP(a); KEEP(st); return 0; }

/* peer */
API CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) { KEEP(d); KEEP(dc); KEEP(s); KEEP(sc); KEEP(n); return 0; }
API CUresult cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) { KEEP(d); KEEP(dc); KEEP(s); KEEP(sc); KEEP(n); return 0; }
API CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st) { KEEP(d); KEEP(dc); KEEP(s); KEEP(sc); KEEP(n); KEEP(st); return 0; }
API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st) { KEEP(d); KEEP(dc); KEEP(s); KEEP(sc); KEEP(n); KEEP(st); return 0; }

/* descriptors */
API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p) { KEEP(p); return 0; }
API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p) { KEEP(p); return 0; }
API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p) { KEEP(p); return 0; }
API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p) { KEEP(p); return 0; }
API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream s) { KEEP(p); KEEP(s); return 0; }
API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream s) { KEEP(p); KEEP(s); return 0; }
API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *p) { KEEP(p); return 0; }
API CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *p) { KEEP(p); return 0; }
API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream s) { KEEP(p); KEEP(s); return 0; }
API CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *p, CUstream s) { KEEP(p); KEEP(s); return 0; }
API CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *p) { KEEP(p); return 0; }
API CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *p) { KEEP(p); return 0; }
API CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *p, CUstream s) { KEEP(p); KEEP(s); return 0; }
API CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *p, CUstream s) { KEEP(p); KEEP(s); return 0; }
API CUresult cuMemcpy2D(const CUDA_MEMCPY2D_v1 *p) { KEEP(p); return 0; }
API CUresult cuMemcpy2DUnaligned(const CUDA_MEMCPY2D_v1 *p) { KEEP(p); return 0; }
API CUresult cuMemcpy2DAsync(const CUDA_MEMCPY2D_v1 *p, CUstream s) { KEEP(p); KEEP(s); return 0; }
API CUresult cuMemcpy3D(const CUDA_MEMCPY3D_v1 *p) { KEEP(p); return 0; }
API CUresult cuMemcpy3DAsync(const CUDA_MEMCPY3D_v1 *p, CUstream s) { KEEP(p); KEEP(s); return 0; }

/* batches (CUDA 12.8 and 13 forms) */
API CUresult cuMemcpyBatchAsync(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count, CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *fail, CUstream st) { KEEP(d); KEEP(s); KEEP(n); KEEP(count); KEEP(a); KEEP(ai); KEEP(na); KEEP(fail); KEEP(st); return 0; }
API CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count, CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *fail, CUstream st) { KEEP(d); KEEP(s); KEEP(n); KEEP(count); KEEP(a); KEEP(ai); KEEP(na); KEEP(fail); KEEP(st); return 0; }
API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count, CUmemcpyAttributes *a, size_t *ai, size_t na, CUstream st) { KEEP(d); KEEP(s); KEEP(n); KEEP(count); KEEP(a); KEEP(ai); KEEP(na); KEEP(st); return 0; }
API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count, CUmemcpyAttributes *a, size_t *ai, size_t na, CUstream st) { KEEP(d); KEEP(s); KEEP(n); KEEP(count); KEEP(a); KEEP(ai); KEEP(na); KEEP(st); return 0; }
API CUresult cuMemcpy3DBatchAsync(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail, unsigned long long f, CUstream st) { KEEP(n); KEEP(ops); KEEP(fail); KEEP(f); KEEP(st); return 0; }
API CUresult cuMemcpy3DBatchAsync_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail, unsigned long long f, CUstream st) { KEEP(n); KEEP(ops); KEEP(fail); KEEP(f); KEEP(st); return 0; }
API CUresult cuMemcpy3DBatchAsync_v2(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long f, CUstream st) { KEEP(n); KEEP(ops); KEEP(f); KEEP(st); return 0; }
API CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long f, CUstream st) { KEEP(n); KEEP(ops); KEEP(f); KEEP(st); return 0; }
API CUresult cuMemcpy3DWithAttributesAsync(CUDA_MEMCPY3D_BATCH_OP *op, unsigned long long f, CUstream st) { KEEP(op); KEEP(f); KEEP(st); return 0; }
API CUresult cuMemcpy3DWithAttributesAsync_ptsz(CUDA_MEMCPY3D_BATCH_OP *op, unsigned long long f, CUstream st) { KEEP(op); KEEP(f); KEEP(st); return 0; }

/* pinned host memory */
#define MAX_ALLOCS 256
static struct { void *p; size_t n; } allocs[MAX_ALLOCS];

static CUresult host_alloc(void **pp, size_t n) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (!allocs[i].p) { allocs[i].p = p; allocs[i].n = n; break; }
    *pp = p;
    return 0;
}
API CUresult cuMemHostAlloc(void **pp, size_t n, unsigned int flags) { KEEP(flags); return host_alloc(pp, n); }
API CUresult cuMemAllocHost_v2(void **pp, size_t n) { return host_alloc(pp, n); }
API CUresult cuMemAllocHost(void **pp, unsigned int n) { return host_alloc(pp, n); }
API CUresult cuMemFreeHost(void *p) {
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (allocs[i].p == p) { munmap(p, allocs[i].n); allocs[i].p = NULL; return 0; }
    return 1; /* CUDA_ERROR_INVALID_VALUE */
}
API CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) { KEEP(p); KEEP(n); KEEP(flags); return 0; }
API CUresult cuMemHostRegister(void *p, size_t n, unsigned int flags) { KEEP(p); KEEP(n); KEEP(flags); return 0; }
API CUresult cuMemHostUnregister(void *p) { KEEP(p); return 0; }
