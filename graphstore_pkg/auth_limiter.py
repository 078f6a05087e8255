"""Failed token attempts limited per peer: after a burst of failures, the peer is refused for a cool-down.

A peer is an IP address (the port changes with every connection, an attacker's too). Within one
window of ``cooldown_s`` seconds, ``burst`` failed attempts (a missing or wrong token) are answered as
usual; the next one blocks the peer, and every call it makes, with the right token or not, is refused
RESOURCE_EXHAUSTED until ``cooldown_s`` has passed. So a token cannot be guessed faster than ``burst``
tries per cool-down. The table is bounded (the oldest peers are forgotten first).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

# Peers remembered at once; beyond this the least recently seen is forgotten.
MAX_PEERS = 10_000


def peer_host(peer: str) -> str:
    """The host part of a gRPC peer string (``ipv4:127.0.0.1:5555`` -> ``127.0.0.1``,
    ``ipv6:[::1]:5555`` -> ``::1``); other forms (``unix:...``) are kept whole."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or rest
    if kind == "ipv6":
        host = rest.rpartition(":")[0] or rest
        return host.strip("[]")
    return peer


@dataclass
class _PeerRecord:
    window_start: float
    failures: int = 0
    blocked_until: float = 0.0


class AuthFailureLimiter:
    """Counts failed token attempts per peer host and blocks a host that exceeded its burst.

    Args:
        burst: failures allowed per window.
        cooldown_s: the window's length and how long a host stays blocked.
        clock: the monotonic clock (tests pass a fake one).
    """

    def __init__(self, burst: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if burst < 1 or not cooldown_s > 0:
            raise ValueError(f"burst must be >= 1 and cooldown_s > 0, got {burst} and {cooldown_s}")
        self.burst = int(burst)
        self.cooldown_s = float(cooldown_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._peers: OrderedDict[str, _PeerRecord] = OrderedDict()

    def blocked_for(self, peer: str) -> float:
        """Seconds ``peer``'s host stays blocked (0: not blocked)."""
        host = peer_host(peer)
        with self._lock:
            record = self._peers.get(host)
            if record is None:
                return 0.0
            return max(record.blocked_until - self._clock(), 0.0)

    def failed(self, peer: str) -> float:
        """Count a failed attempt of ``peer``; returns how long its host is now blocked (0: not)."""
        host = peer_host(peer)
        now = self._clock()
        with self._lock:
            record = self._peers.get(host)
            if record is None or now - record.window_start > self.cooldown_s:
                blocked_until = record.blocked_until if record is not None else 0.0
                record = _PeerRecord(window_start=now, blocked_until=blocked_until)
            self._peers[host] = record
            self._peers.move_to_end(host)
            while len(self._peers) > MAX_PEERS:
                self._peers.popitem(last=False)
            record.failures += 1
            if record.failures > self.burst:
                record.blocked_until = now + self.cooldown_s
                record.failures = 0
                record.window_start = now
            return max(record.blocked_until - now, 0.0)
