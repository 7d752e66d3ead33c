"""Per-process pinned memory from /proc: the scan of every process (``scan``), the estimate from one
``/proc/PID/maps`` (``procmaps``), whether a mapping is the kernel object its path names
(``kernel_objects``), the cap by what a process has resident (``resident``), ``VmLck`` (``locked``)."""
