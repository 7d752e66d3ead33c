"""The export tests' view of the exporter: its text rendered from snapshots and parsed back into
samples, and recordings written as ``pinmon record`` writes them."""
from prometheus_client.parser import text_string_to_metric_families

from pinmon.export import ExportState, build_registry, metrics_text
from pinmon.units import GIB
from tests import factories as make


def render(snapshots=(), findings=(), top=10, state=None):
    state = state or ExportState()
    for s in snapshots:
        state.add_snapshot(s)
    state.set_findings(findings)
    return metrics_text(build_registry(state, top))


def samples(text):
    """{(sample name, frozenset of labels): value} and the set of metric (family) names."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"duplicate series {key}"
            out[key] = s.value
    return out


def value(text, metric, **labels):
    found = [v for (n, labs), v in samples(text).items()
             if n == metric and all(dict(labs).get(k) == str(w) for k, w in labels.items())]
    assert len(found) <= 1, (metric, labels, found)
    return found[0] if found else None


def names(text):
    return {n for n, _ in samples(text)}


def write_recording(path, snaps):
    """A recording as ``pinmon record`` writes it (JSON lines; gzip for .gz)."""
    from pinmon.recording import Recorder

    with Recorder(str(path)) as rec:
        for s in snaps:
            rec.write(s)
    return str(path)


def recording_snapshots(n=3):
    """Three 1 s snapshots with growing traffic, a critical pinned share on the last one."""
    out = []
    for i in range(n):
        pinned = (10 + 25 * i) * GIB
        hog = make.process(7, "hog", user="bob", pinned_bytes=pinned)
        out.append(make.full_snapshot(time=2000.0 + i, gpus=[make.full_gpu(rx=(i + 1) * 10 ** 9, tx=(i + 1) * 10 ** 8)],
                                      pinned_bytes_est=pinned, processes=make.full_processes(2) + (hog,)))
    return out
