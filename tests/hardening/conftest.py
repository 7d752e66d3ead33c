"""Hardening tests: fault injection, fuzzing, bad input, security. Markers are registered here."""


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz: hypothesis runs of the parsers (the profile's examples: 300,"
                                       " 10,000 under --hypothesis-profile full); `-m 'not fuzz'` skips them")
