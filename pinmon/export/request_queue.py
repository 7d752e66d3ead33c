"""Complete requests waiting for a worker, shared fairly between peers.

One queue per peer (``peers.peer_key``: the client's uid on this machine, else its address), taken
in turn, so a peer with a thousand requests waiting delays another's next one by at most one
request per worker. Within a peer the newest request goes first and, past ``max_per_peer``, its
oldest is dropped: under a flood the requests still worth answering are the recent ones (a client
gives up after its timeout). Past ``max_total`` over all peers, the oldest request of the peer with
the most waiting is dropped, never the only request of a quiet peer. Dropped items go back to the
caller, which closes their connections.
"""
from __future__ import annotations

import collections
import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

Item = TypeVar("Item")


class FairQueue(Generic[Item]):
    """put(peer, item) from the server's loop; get() from its workers; close() to stop them."""

    def __init__(self, max_total: int, max_per_peer: int) -> None:
        self.max_total = max(1, max_total)
        self.max_per_peer = max(1, max_per_peer)
        self._peers: collections.OrderedDict[Hashable, collections.deque[Item]] = collections.OrderedDict()
        self._total = 0
        self._closed = False
        self._cond = threading.Condition()

    def __len__(self) -> int:
        return self._total

    def peers(self) -> int:
        return len(self._peers)

    def put(self, peer: Hashable, item: Item) -> list[Item]:
        """Queue ``item`` for ``peer``; returns the items dropped to make room (``item`` itself when
        the queue is closed)."""
        with self._cond:
            if self._closed:
                return [item]
            waiting = self._peers.get(peer)
            if waiting is None:
                waiting = self._peers[peer] = collections.deque()
            waiting.append(item)
            self._total += 1
            dropped: list[Item] = []
            if len(waiting) > self.max_per_peer:
                dropped.append(self._pop_oldest(peer))
            if self._total > self.max_total:
                busiest = max(self._peers, key=lambda k: len(self._peers[k]))
                dropped.append(self._pop_oldest(busiest))
            self._cond.notify()
            return dropped

    def _pop_oldest(self, peer: Hashable) -> Item:
        waiting = self._peers[peer]
        item = waiting.popleft()
        self._total -= 1
        if not waiting:
            del self._peers[peer]
        return item

    def get(self, timeout_s: float | None = None) -> Item | None:
        """The next peer's newest item; None once closed (or after ``timeout_s`` with nothing)."""
        with self._cond:
            while not self._peers and not self._closed:
                if not self._cond.wait(timeout_s):
                    return None
            if self._closed:
                return None
            peer, waiting = next(iter(self._peers.items()))
            item = waiting.pop()
            self._total -= 1
            if waiting:
                self._peers.move_to_end(peer)  # its next request waits for the other peers' turns
            else:
                del self._peers[peer]
            return item

    def close(self) -> list[Item]:
        """Stop: workers waiting in get() return None; returns what was still queued."""
        with self._cond:
            self._closed = True
            left = [item for waiting in self._peers.values() for item in waiting]
            self._peers.clear()
            self._total = 0
            self._cond.notify_all()
            return left
