"""The bounds on everything pinmon takes from outside: command-line figures, the config file,
recordings, snapshot files and saved maps files. One table, so the command line, the config file and
the readers refuse the same things with the same numbers.

Why these figures:

- Times. An interval or window under 10 ms would make a busy loop of the collector; over an hour,
  a tool that refreshes is no longer watching. A quick probe takes about a second, so probes are at
  least 1 s and at most a day apart. A recording session is bounded at 366 days; replay speed is a
  factor from 1/1000 to 1000.
- Sizes. 1 EiB is far above any host's RAM, and well inside a signed 64-bit integer, so every byte
  figure fits the exporter's and JSON readers' integers.
- Files. A config file is a few hundred bytes (1 MiB cap). /proc/PID/maps has at most
  ``vm.max_map_count`` (65,530 by default) lines of ~100 bytes: 6.5 MB; the 64 MiB cap leaves room
  for a raised count. A snapshot line holds at most ``MAX_GPUS`` GPUs and ``MAX_PROCESSES``
  processes; a process row with a long command line is ~1 KiB, so ``MAX_LINE_BYTES`` is 64 MiB. A
  recording holds at most ``MAX_RECORDING_LINES`` lines (blank ones count): 115 days at one snapshot
  a second.
- Snapshots. A real server has at most a few dozen GPUs;
  256 leaves margin (a CUDA device index, probe --gpu, is below it too). 65,536 processes with CUDA mappings is well above what a box runs. Snapshot
  times lie between the Unix epoch and the end of year 9999 (what a calendar can print).
- Counts. A pid is at most the kernel's PID_MAX_LIMIT (4M). The exporter gives at most 1000 processes
  series of their own: each is a handful of series per scrape, and Prometheus's cost grows with them.
- Attach. A window of 0.1 s holds a pump or two of events; over an hour the probes stay in other
  people's processes longer than a look needs. ``pinmon attach`` takes at most 256 pids (each adds
  its threads to the kernel's event filter and a maps file pinmon re-reads); attaching "every CUDA
  process" takes the lowest 64 pids, the rest left out with a notice.

Nesting needs no figure: a snapshot is at most 5 levels deep, and a JSON or TOML document nested past
the parser's recursion limit is refused as such (the readers catch ``RecursionError``).

- Parse cost. JSON's objects cost Python far more than their bytes: a 60 MiB line of ``{},`` is 20
  million dicts, 1.6 GB. So a recording line or snapshot document is counted before it is parsed:
  at most ``MAX_JSON_CONTAINERS`` objects and lists (16 for each of ``MAX_PROCESSES`` processes; a
  process row has a handful) and ``MAX_JSON_VALUES`` values (64 each; a row has about 35).
"""
from __future__ import annotations

MIN_INTERVAL_S = 0.01
MAX_INTERVAL_S = 3600.0          # --interval, record/export --interval, config `interval`
MAX_WINDOW_S = 3600.0            # check --window
MIN_PROBE_EVERY_S = 1.0          # --probe-every: a quick probe itself takes about a second
MAX_PROBE_EVERY_S = 86400.0
MAX_DURATION_S = 366 * 86400.0   # record --duration, --oom-lookback
DEFAULT_OOM_LOOKBACK_S = 86400.0  # --oom-lookback, config `oom_lookback`: OOM kills of the last day
MIN_SPEED = 0.001                # replay/demo/export --speed: a factor, not seconds
MAX_SPEED = 1000.0

MAX_SIZE_BYTES = 1 << 60         # any byte figure: --max-pinned, config sizes, snapshot fields
MAX_COUNT = (1 << 63) - 1        # any other integer in a snapshot (counters, pids)
MAX_PID = 1 << 22                # --pid: the kernel's largest pid_max
MAX_TOP_PROCESSES = 1000         # export --top-processes
DEFAULT_TOP_PROCESSES = 10       # export --top-processes: rows with their own series, the rest as "other"
MIN_ATTACH_S = 0.1               # pinmon attach --seconds, the config's attach_window
MAX_ATTACH_S = 3600.0
DEFAULT_ATTACH_WINDOW_S = 10.0   # the app's attach key: one window on one process
MAX_ATTACH_PIDS = 256            # pinmon attach PID ...
MAX_ATTACH_EVERY = 64            # processes kept attached when no pid is named

MAX_CONFIG_BYTES = 1 << 20
MAX_MAPS_BYTES = 64 << 20
MAX_SNAPSHOT_FILE_BYTES = 64 << 20  # a whole-document snapshot (check --json output)
MAX_LINE_BYTES = 64 << 20        # one line of a recording
MAX_JSON_CONTAINERS = 1 << 20    # objects and lists in one recording line or snapshot document
MAX_JSON_VALUES = 1 << 22        # values (separators) in one recording line or snapshot document
MAX_RECORDING_LINES = 10_000_000

MAX_GPUS = 256
MAX_PROCESSES = 65_536
MAX_LIST_ITEMS = 65_536          # any other list in a snapshot (notices, probe measurements)
MAX_EPOCH_S = 253_402_300_799.0  # 9999-12-31 23:59:59 UTC
