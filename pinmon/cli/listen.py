"""Where the exporter listens: the default address and the parser of ``HOST:PORT`` / ``[V6]:PORT``.

Apart from the exporter (``pinmon.export``), so that reading the command line loads neither the server nor
prometheus_client (``pinmon export --listen`` is checked before anything is bound).
"""
from __future__ import annotations

import ipaddress

# Loopback only: a scrape from another host needs an address given on purpose.
DEFAULT_LISTEN = "127.0.0.1:9477"


def parse_listen(text: str) -> tuple[str, int]:
    """'HOST:PORT' or '[V6]:PORT' -> (host, port); ValueError with a one-line reason."""
    text = text.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"expected [IPV6]:PORT, got {text!r}")
        port_text = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"not an IPv6 address: {host!r}") from None
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep or not host:
            raise ValueError(f"expected HOST:PORT (e.g. 127.0.0.1:9477), got {text!r}")
        if ":" in host:
            raise ValueError(f"write an IPv6 address in brackets, e.g. [::1]:9477, got {text!r}")
    # Port 0 asks the kernel for a free port (the chosen one is printed): handy for tests.
    if not port_text.isdigit() or not (0 <= int(port_text) < 65536):
        raise ValueError(f"port must be 0-65535, got {port_text!r}")
    return host, int(port_text)
