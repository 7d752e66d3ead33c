"""A few representative cells of the NVML fault matrix (tests/collect/nvml/nvml_matrix.py) in the
terminal app: it keeps running and shows the value as unknown ("n/a") with a notice naming the error;
a lost GPU is a lost GPU and a ``gpu-lost`` finding.
"""
from __future__ import annotations

import pytest

from pinmon.advise import advise
from tests.collect.nvml.nvml_matrix import inject_of, make_fake
from tests.fakes.fake_pynvml import _ERROR_TEXT, ERRORS
from tests.fakes.fake_sysfs import nvidia_gpus

pytestmark = pytest.mark.hardening

TUI_CELLS = [
    ("nvmlDeviceGetMemoryInfo", "gpu_lost", "mid-run"),
    ("nvmlGpmSampleGet", "timeout", "mid-run"),
    ("nvmlDeviceGetFieldValues", "unknown", "always"),
    ("nvmlInit", "library_not_found", "always"),
    ("nvmlDeviceGetCurrPcieLinkGeneration", "not_supported", "always"),
    ("nvmlDeviceGetComputeRunningProcesses", "timeout", "mid-run"),
]


@pytest.mark.parametrize("function, error, mode", TUI_CELLS)
async def test_tui(function, error, mode, tmp_path):
    from pinmon.collect.live import LiveCollector
    from pinmon.tui.app import PinmonApp
    from pinmon.tui.widgets.notices import NoticeBar
    from tests.tui.util import screen_text, text_of

    fake = make_fake()
    gpu = inject_of(function)
    if mode == "always":
        fake.fail(function, error, gpu=gpu)
    (tmp_path / "proc").mkdir()
    col = LiveCollector(nvml=fake, proc_root=str(tmp_path / "proc"),
                        sysfs_root=nvidia_gpus(str(tmp_path / "sys"), 3))
    app = PinmonApp(col, lambda h: advise(h), start_polling=False, probe_every_s=None)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            app.apply_snapshot(col.snapshot())
            await pilot.pause()
            if mode == "mid-run":
                fake.fail(function, error, gpu=gpu)
            for _ in range(2):
                app.apply_snapshot(col.snapshot())
                await pilot.pause()
            screen = screen_text(app)
            # The bar shows the first notice and "+N more" (all of them behind `n`): any of them.
            shown = app.session.latest.notices + tuple(n for g in app.session.latest.gpus for n in g.notices)
            notices = text_of(app.query_one(NoticeBar)) + " ".join(shown)
            assert app.is_running
    finally:
        col.close()
    if error == "gpu_lost":
        assert app.session.latest.gpus[1].lost and any(f.rule == "gpu-lost" for f in app.session.findings)
        assert "fell off the bus" in notices or "fell off the bus" in screen
    elif function == "nvmlInit":
        assert "no NVIDIA GPU monitoring" in notices + screen
    elif error == "not_supported":
        assert app.session.latest.gpus[1].link.gen is None and ("n/a" in screen or "Gen?" in screen)
    else:
        assert _ERROR_TEXT[ERRORS[error]] in notices + screen
