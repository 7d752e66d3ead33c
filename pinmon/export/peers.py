"""Who is at the other end of a connection to the exporter, as the kernel says, and whether it has gone.

The server shares its queue of requests between peers (``request_queue``), so that one peer's flood
cannot push out another's scrape. A peer is the user that owns the client's socket when that socket
is on this machine (a loopback connection, or one to a local address): one ``NETLINK_SOCK_DIAG``
query for that exact socket gives its uid. Any other client is its address. ``SO_PEERCRED`` would be
simpler but answers only for Unix sockets (on TCP it reads uid -1).

The same query tells when the client has already closed its socket: the kernel keeps it, orphaned
(no inode), until the connection ends. Nobody will read a response then, so the server does not
render one. A client that only shut its sending side (``nc -N``) still owns its socket and is
served. Where the query gets no answer (a remote client, no sock_diag, a seccomp filter), the
address is the peer and the client counts as present.
"""
from __future__ import annotations

import ipaddress
import socket
import struct
from collections.abc import Hashable
from typing import NamedTuple

# A client's address as accept() gives it: (host, port) for IPv4, (host, port, flowinfo, scope id) for IPv6.
Address = tuple[str, int] | tuple[str, int, int, int]

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
_NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
_REQUEST = struct.Struct("=BBBBI")      # inet_diag_req_v2: family, protocol, ext, pad, states
_SOCKID_TAIL = struct.Struct("=III")    # inet_diag_sockid after the addresses: interface, cookie[2]
_NO_COOKIE = 0xFFFFFFFF
_ALL_STATES = 0xFFFFFFFF
# inet_diag_msg: family, state, timer, retrans (4 bytes), sockid (48), expires, rqueue, wqueue (12),
# then uid and inode.
_UID_INODE = struct.Struct("=II")
_UID_OFFSET = 4 + 48 + 12


class PeerSocket(NamedTuple):
    """The client's own socket, as this machine's kernel keeps it."""
    uid: int
    closed: bool  # its owner closed it (orphaned: no inode); a response would go unread


def _endpoint(address: Address) -> tuple[int, bytes, int, int]:
    """(family, address as 16 bytes, port, scope) of a socket address; a v4-mapped IPv6 address as IPv4,
    which is what the client's own socket is."""
    host, port = address[0], address[1]
    ip = ipaddress.ip_address(host.split("%", 1)[0])
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.version == 4:
        return socket.AF_INET, ip.packed.ljust(16, b"\0"), port, 0
    scope = address[3] if len(address) > 3 else 0
    return socket.AF_INET6, ip.packed, port, scope


def client_socket(conn: socket.socket, address: Address) -> PeerSocket | None:
    """The socket of the client at ``address`` connected to ``conn``, if this machine holds it; None
    when the kernel gives no answer."""
    try:
        family, peer, peer_port, scope = _endpoint(address)
        my_family, me, my_port, _ = _endpoint(conn.getsockname())
        if my_family != family:
            return None
        # The client's socket: its source is the peer's address, its destination ours.
        sockid = struct.pack("!HH", peer_port, my_port) + peer + me + _SOCKID_TAIL.pack(scope, _NO_COOKIE, _NO_COOKIE)
        body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES) + sockid
        message = _NLMSG_HEADER.pack(_NLMSG_HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + body
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
            nl.send(message)
            # The kernel answers a lookup of one socket while handling the request: it is there now.
            reply = nl.recv(1024, socket.MSG_DONTWAIT)
    except (OSError, ValueError, IndexError, TypeError, struct.error):
        return None
    if len(reply) < _NLMSG_HEADER.size + _UID_OFFSET + _UID_INODE.size:
        return None  # an error message (no such socket here, no sock_diag) is shorter
    _length, kind, _flags, _seq, _port = _NLMSG_HEADER.unpack_from(reply)
    if kind != SOCK_DIAG_BY_FAMILY:
        return None
    uid, inode = _UID_INODE.unpack_from(reply, _NLMSG_HEADER.size + _UID_OFFSET)
    return PeerSocket(uid=uid, closed=inode == 0)


def peer_key(address: Address, local: PeerSocket | None) -> Hashable:
    """Whose request this is, for sharing the queue: ("uid", N) for a client on this machine, else
    ("address", ADDRESS) (a v4-mapped address as IPv4)."""
    if local is not None and not local.closed:
        return ("uid", local.uid)
    try:
        ip = ipaddress.ip_address(str(address[0]).split("%", 1)[0])
        if ip.version == 6 and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return ("address", str(ip))
    except (ValueError, IndexError, TypeError):
        return ("address", str(address)[:64])


def gone(conn: socket.socket, address: Address) -> bool:
    """Whether nobody will read a response on ``conn``: the connection was reset, or the client sent
    its end of stream (all it sent already read) and the kernel shows its socket closed."""
    try:
        if conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b"":
            return False  # more bytes (a pipelined request): someone is there
    except (BlockingIOError, InterruptedError):
        return False  # nothing to read and no end of stream: the usual case, no query
    except OSError:
        return True
    local = client_socket(conn, address)
    return local is not None and local.closed
