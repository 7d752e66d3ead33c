"""The exporter's connections at the socket level: closing them the right way, TLS handshake steps,
the plain answer to plain HTTP on the TLS port, and whether a client has gone.

``server.MetricsServer``'s loop calls these; none of them blocks (the sockets are non-blocking) and
none raises for what a client does.
"""
from __future__ import annotations

import os
import selectors
import socket
import ssl
import struct

from .peers import Address, gone

# Not yet: the socket (or, with TLS, the record layer) has nothing now.
NOT_NOW = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
# The answer to a plain HTTP request on the TLS port, sent in plain text.
_PLAIN_TO_TLS_BODY = b"this exporter speaks TLS: use https://\n"
PLAIN_TO_TLS = (b"HTTP/1.0 400 Bad Request\r\nServer: pinmon\r\nContent-Type: text/plain\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_PLAIN_TO_TLS_BODY), _PLAIN_TO_TLS_BODY))
HANDSHAKE_DONE = 0
HANDSHAKE_FAILED = -1
HANDSHAKE_PLAIN_HTTP = -2


def handshake_step(conn: ssl.SSLSocket) -> int:
    """One step of a server-side TLS handshake: ``HANDSHAKE_DONE``; ``selectors.EVENT_READ`` or
    ``EVENT_WRITE`` (what to wait for before the next step); ``HANDSHAKE_PLAIN_HTTP`` (the client sent
    a plain HTTP request) or ``HANDSHAKE_FAILED``."""
    try:
        conn.do_handshake()
    except ssl.SSLWantReadError:
        return selectors.EVENT_READ
    except ssl.SSLWantWriteError:
        return selectors.EVENT_WRITE
    except ssl.SSLError as e:
        return HANDSHAKE_PLAIN_HTTP if e.reason == "HTTP_REQUEST" else HANDSHAKE_FAILED
    except (OSError, ValueError):
        return HANDSHAKE_FAILED
    return HANDSHAKE_DONE


def close_quietly(conn: socket.socket) -> None:
    """Close, whatever state the socket is in."""
    try:
        conn.close()
    except OSError:
        pass


def gone_or_unknown(conn: socket.socket, address: Address) -> bool:
    """``peers.gone``, and False where it cannot tell."""
    try:
        return gone(conn, address)
    except Exception:
        return False


def answer_plain(conn: socket.socket, response: bytes) -> None:
    """Write ``response`` in plain text on a TLS connection whose handshake failed, and close: what the
    client sent is read away first, so the close is a FIN the client can read the answer before, not
    a reset."""
    fd = conn.fileno()
    try:
        for _ in range(16):
            if not os.read(fd, 65536):
                break
    except OSError:
        pass
    try:
        os.write(fd, response)  # a few dozen bytes: the socket takes them at once
    except OSError:
        pass
    _finish_plain(conn)


def _finish_plain(conn: socket.socket) -> None:
    try:
        socket.socket.shutdown(conn, socket.SHUT_WR)  # the TCP side only: no TLS was agreed
    except OSError:
        pass
    close_quietly(conn)


def abort(conn: socket.socket) -> None:
    """Close a connection whose response will not be finished: a reset, so the kernel drops what it
    still holds for a client that does not read, and the client cannot take a cut body for a whole one."""
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    close_quietly(conn)


def finish(conn: socket.socket) -> None:
    """Close after a whole response: TLS's close_notify where there is TLS, then FIN, so the client
    reads it all before the end."""
    if isinstance(conn, ssl.SSLSocket):
        try:
            conn.unwrap()  # sends close_notify; the client's own is not waited for
        except (OSError, ValueError):
            pass
    try:
        conn.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    close_quietly(conn)
