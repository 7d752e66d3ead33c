"""The in-process tracer's reports as the collector reads them: the directories and files
(``reader``), the checks of one report and its figures (``report_checks``, ``cupti_fields``), and what
a report may put in a process row (``bounds``). The writer's side is ``pinmon.trace.report_file``."""
