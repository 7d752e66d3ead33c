"""The in-process tracer's reports as the collector reads them: the directories and files
(``reader``), the checks of one report and its figures (``report_checks``, ``cupti_fields``), and what
a report may put in a process row (``bounds``). The format both sides share is
``pinmon.report_format``; the writer's side is ``pinmon.trace.report_file``, never imported here."""
