"""The real app (``run_app``: its signal handlers) on whatever terminal this runs
on, fed by the test fakes, writing what reaches it to a log: one line per key, paste and resize, and
the native id of the driver's input thread.

Usage: python tests/tui/pty_app.py LOG   (run by tests/tui/test_pty_session.py on a pseudo-terminal)
"""
from __future__ import annotations

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from textual import events

from pinmon.tui import app as app_module
from tests.tui.fakes import FakeSource, fake_advisor


def main(log_path: str) -> int:
    log = open(log_path, "a", buffering=1)

    class LoggedApp(app_module.PinmonApp):
        CSS_PATH = os.path.join(os.path.dirname(app_module.__file__), app_module.PinmonApp.CSS_PATH)

        def on_mount(self) -> None:
            super().on_mount()
            for thread in threading.enumerate():  # the driver's, started before the app mounts
                if thread.name == "textual-input":
                    log.write(f"input_thread {thread.native_id}\n")
            log.write("mounted\n")

        async def on_event(self, event) -> None:
            # A key reaches the app twice (on its way to the focused widget, and bubbling back up):
            # logged once, by the time the event was made.
            stamp = (type(event).__name__, getattr(event, "time", None))
            if stamp in self.logged:
                await super().on_event(event)
                return
            self.logged.add(stamp)
            if isinstance(event, events.Key):
                log.write(f"key {event.key}\n")
            elif isinstance(event, events.Paste):
                log.write(f"paste {event.text!r}\n")
            elif isinstance(event, events.Resize):
                log.write(f"resize {event.size.width}x{event.size.height}\n")
            await super().on_event(event)

    LoggedApp.logged = set()
    app_module.PinmonApp = LoggedApp  # run_app builds the app by this name
    code = app_module.run_app(FakeSource(), fake_advisor, probe_every_s=None, recorder_factory=lambda: None)
    log.write(f"exit {code}\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
