"""The in-process tracer's reports as the collector reads them: the directories and files
(``reader``), the checks of one report and its figures (``report_checks``, ``cupti_fields``), which
reports join the scan's rows (``join``: CUDA processes only), and what a report may put in a process
row (``bounds``: held bytes between what the kernel shows and what it backs; ``rates``: within the GPU
links). The format both sides share is
``pinmon.report_format``; the writer's side is ``pinmon.trace.report_file``, never imported here."""
