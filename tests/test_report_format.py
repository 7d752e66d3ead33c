"""The report format both the tracer and the collectors use: names round-trip, temporaries are told
apart, and the writer's module takes its rules from here (one definition)."""
from pinmon import report_format as F
from pinmon.trace import report_file


def test_names():
    assert F.report_pid_text(F.report_name(4242)) == "4242"
    for name in ("4242.json.tmp", "4242.jsonx", "4242", ".4242.json", "42.42.json"):
        assert F.report_pid_text(name) is None, name
    assert F.is_temp_name(F.temp_name(4242, "ab12")) and not F.is_temp_name(F.report_name(4242))
    assert F.tmp_dir(1000, "/x") == "/x/pinmon-1000"


def test_the_writer_uses_the_shared_rules():
    assert report_file.TRACE_SCHEMA is F.TRACE_SCHEMA and report_file.check_dir is F.check_dir
    assert report_file.runtime_dir is F.runtime_dir and report_file.proc_start_ticks is F.proc_start_ticks
