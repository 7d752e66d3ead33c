"""Hardening tests: fault injection, fuzzing, bad input, security. Markers are registered here."""


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz: long hypothesis runs (>= 10,000 examples each); part of the"
                                       " default run, `-m 'not fuzz'` skips them")
