"""The exporter's TLS settings: a server context from a certificate, its key and, to require client
certificates, the CA that signs them.

The metrics name users, command lines and pods: off the box they go over TLS (``pinmon export
--tls-cert FILE --tls-key FILE``), and with ``--tls-client-ca FILE`` only a client holding a
certificate that CA signed (Prometheus's ``tls_config`` ``cert_file``) gets them. TLS 1.2 at least,
no renegotiation. Every file must be a regular file (a FIFO would block the start), and every
problem is a ``TlsError`` with one line naming the file: no certificate in it, a key that does not
match, a key under a passphrase (pinmon never prompts for one: it runs unattended).
"""
from __future__ import annotations

import ssl
from typing import NoReturn

from ..recording.infile import InputError, open_regular


class TlsError(ValueError):
    """A certificate, key or CA file pinmon cannot serve TLS with; the message is one line."""


class _Encrypted(Exception):
    """Raised by the passphrase callback: OpenSSL asks for one only for an encrypted key."""


def _no_passphrase() -> NoReturn:
    raise _Encrypted


def _regular(path: str, what: str) -> None:
    try:
        open_regular(path).close()
    except InputError as e:
        raise TlsError(f"{what} {e}") from None


def _openssl_reason(e: ssl.SSLError) -> str:
    return str(e.reason or e.strerror or e).lower().replace("_", " ")


def server_context(cert_file: str, key_file: str | None = None, client_ca_file: str | None = None) -> ssl.SSLContext:
    """A TLS server context serving ``cert_file`` (its chain, PEM) with ``key_file`` (PEM; None: the
    key is in ``cert_file``); with ``client_ca_file``, clients must show a certificate it signed."""
    key_file = key_file or cert_file
    _regular(cert_file, "--tls-cert")
    _regular(key_file, "--tls-key")
    if client_ca_file:
        _regular(client_ca_file, "--tls-client-ca")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= getattr(ssl, "OP_NO_RENEGOTIATION", 0)
    try:  # the certificate on its own first, so a bad one is named as such
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=cert_file)
    except (ssl.SSLError, OSError, ValueError) as e:
        raise TlsError(f"--tls-cert {cert_file}: no PEM certificate in it ({_reason(e)})") from None
    try:
        ctx.load_cert_chain(cert_file, key_file, password=_no_passphrase)
    except _Encrypted:
        raise TlsError(f"--tls-key {key_file}: the key is encrypted; pinmon needs it unencrypted (it "
                       f"never prompts for a passphrase), readable by its user only") from None
    except ssl.SSLError as e:
        if e.reason == "KEY_VALUES_MISMATCH":
            raise TlsError(f"--tls-key {key_file}: not the key of the certificate in {cert_file}") from None
        raise TlsError(f"--tls-key {key_file}: no PEM private key in it ({_reason(e)})") from None
    except (OSError, ValueError) as e:
        raise TlsError(f"--tls-key {key_file}: cannot read it ({_reason(e)})") from None
    if client_ca_file:
        try:
            ctx.load_verify_locations(cafile=client_ca_file)
        except (ssl.SSLError, OSError, ValueError) as e:
            raise TlsError(f"--tls-client-ca {client_ca_file}: no PEM CA certificate in it ({_reason(e)})") from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _reason(e: BaseException) -> str:
    if isinstance(e, ssl.SSLError):
        return _openssl_reason(e)
    if isinstance(e, OSError):
        return e.strerror or str(e)
    return " ".join(str(e).split())
