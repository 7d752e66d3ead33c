"""Every finding a rule reports in these tests must carry a severity the rule declares, so the
severities the registry publishes (``--help``, README, the exporter's per-rule series) stay true."""
import pytest

from pinmon.advise.rule import Rule

_finding = Rule._finding


def _declared_severity_only(self, found, subject):
    assert found.severity in self.severities, (
        f"rule {self.id} reported severity {found.severity!r}, it declares {self.severities}")
    return _finding(self, found, subject)


@pytest.fixture(autouse=True)
def declared_severities(monkeypatch):
    monkeypatch.setattr(Rule, "_finding", _declared_severity_only)
