"""The recent mutating requests of each client and their answers, so that a replay is never applied twice.

Every mutating request carries a request ID (client, sequence number). :class:`ReplayWindow` remembers,
per client, the last ``per_client`` IDs it saw with the bytes of their encoded answers:

- a new ID is *claimed*: the caller applies the request and then :meth:`~ReplayWindow.finish` es the
  claim with the answer (or :meth:`~ReplayWindow.abandon` s it when the request failed and changed
  nothing, so that a retry applies it);
- a replay of a finished ID gets the first answer back, without applying anything;
- a replay that arrives while the first copy is still being applied (a client that gave up waiting and
  retried) waits for the first copy and gets its answer;
- a replay older than the window (its sequence number at or below the highest one evicted for that
  client) is refused with :class:`~graphstore.errors.StaleRequestError` naming the client and the
  number: the server cannot tell whether it was applied, and it never applies twice.

At most ``max_clients`` clients are remembered (the least recently heard from is forgotten first). The
window is saved beside a checkpoint and rebuilt from the write-ahead log (:meth:`dump` / :meth:`load`),
so it survives a restart.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from graphstore.errors import StaleRequestError

DEFAULT_PER_CLIENT = 128
DEFAULT_MAX_CLIENTS = 1024
_FORMAT = "graphstore-replay-window-1"


@dataclass
class Claim:
    """One request ID in the window: being applied (``done`` unset) or answered.

    Attributes:
        client: the client's ID.
        seq: the request's sequence number.
        answer: the encoded answer once finished.
        token: what the durability layer needs to know before this answer may leave (see
            :mod:`~graphstore.server.durability.write_path`); None once durable.
        replay: True when this claim was answered before (the caller must not apply it again).
    """

    client: str
    seq: int
    answer: bytes = b""
    token: Any = None
    replay: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    abandoned: bool = False


@dataclass
class _ClientWindow:
    floor: int = 0  # the highest sequence number evicted: anything at or below it unseen is stale
    claims: OrderedDict[int, Claim] = field(default_factory=OrderedDict)


class ReplayWindow:
    """Bounded per-client memory of request IDs and answers (see the module docstring).

    Args:
        per_client: answers kept per client.
        max_clients: clients remembered.

    Raises:
        ValueError: a bound below 1.
    """

    def __init__(self, per_client: int = DEFAULT_PER_CLIENT, max_clients: int = DEFAULT_MAX_CLIENTS) -> None:
        if per_client < 1:
            raise ValueError(f"per_client must be >= 1, got {per_client}")
        if max_clients < 1:
            raise ValueError(f"max_clients must be >= 1, got {max_clients}")
        self.per_client = per_client
        self.max_clients = max_clients
        self._clients: OrderedDict[str, _ClientWindow] = OrderedDict()
        self._lock = threading.Lock()
        self.replays = 0  # replays answered from the window

    def claim(self, client: str, seq: int, timeout: float | None = None) -> Claim:
        """Claim request ``(client, seq)`` or get its first answer.

        Args:
            client: the client's ID (non-empty).
            seq: the request's sequence number (>= 1).
            timeout: how long a replay may wait for a first copy still being applied (None: no bound).

        Returns:
            A new claim (``replay`` False: apply the request, then :meth:`finish` or :meth:`abandon`), or
            the finished claim of the first copy (``replay`` True: answer with its ``answer``).

        Raises:
            ValueError: an empty client or a sequence number below 1.
            StaleRequestError: a replay older than the window.
            TimeoutError: the first copy was still being applied after ``timeout`` seconds.
        """
        if not client:
            raise ValueError("request_id.client: must not be empty")
        if seq < 1:
            raise ValueError(f"request_id.seq: must be >= 1, got {seq}")
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                window = self._window_of(client)
                existing = window.claims.get(seq)
                if existing is None:
                    if seq <= window.floor:
                        raise StaleRequestError(
                            f"request_id: request {seq} of client {client!r} is older than this "
                            f"server's replay window (it remembers the last {self.per_client} requests "
                            f"of each client; numbers up to {window.floor} were forgotten), so it may "
                            "have been applied already; it was not applied again"
                        )
                    fresh = Claim(client, seq)
                    window.claims[seq] = fresh
                    self._evict(window)
                    return fresh
            remaining = None if end is None else max(end - time.monotonic(), 0.0)
            if not existing.done.wait(remaining):
                raise TimeoutError(
                    f"request_id: request {seq} of client {client!r} is still being applied (a retry "
                    f"arrived while the first copy runs); gave up waiting after {timeout} s"
                )
            if not existing.abandoned:
                with self._lock:
                    self.replays += 1
                replayed = Claim(client, seq, existing.answer, existing.token, replay=True)
                replayed.done.set()
                return replayed
            # The first copy failed without applying anything: claim it afresh.

    def finish(self, claim: Claim, answer: bytes, token: Any = None) -> None:
        """Record the answer of an applied request; replays get it from now on.

        Args:
            claim: a claim returned new by :meth:`claim`.
            answer: the encoded answer.
            token: the durability token of the write (see :mod:`~graphstore.server.durability.write_path`).
        """
        claim.answer = bytes(answer)
        claim.token = token
        claim.done.set()

    def abandon(self, claim: Claim) -> None:
        """Forget a claim whose request failed without changing anything (a retry applies it)."""
        with self._lock:
            window = self._clients.get(claim.client)
            if window is not None and window.claims.get(claim.seq) is claim:
                del window.claims[claim.seq]
        claim.abandoned = True
        claim.done.set()

    def record(self, client: str, seq: int, answer: bytes) -> None:
        """Enter a finished request (replaying the write-ahead log); one already known or older than
        the window is left as it is.

        Raises:
            ValueError: an empty client or a sequence number below 1.
        """
        try:
            claim = self.claim(client, seq)
        except StaleRequestError:
            return
        if not claim.replay:
            self.finish(claim, answer)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(w.claims) for w in self._clients.values())

    def _window_of(self, client: str) -> _ClientWindow:
        window = self._clients.get(client)
        if window is None:
            window = self._clients[client] = _ClientWindow()
            while len(self._clients) > self.max_clients:
                self._clients.popitem(last=False)
        else:
            self._clients.move_to_end(client)
        return window

    def _evict(self, window: _ClientWindow) -> None:
        while len(window.claims) > self.per_client:
            oldest = next(iter(window.claims.values()))
            if not oldest.done.is_set():
                break  # never forget a request still being applied
            del window.claims[oldest.seq]
            window.floor = max(window.floor, oldest.seq)

    # -- persistence -----------------------------------------------------------------------------

    def dump(self) -> bytes:
        """The window's finished answers and floors, as bytes for a checkpoint (claims being applied
        are left out: they are not in the state being saved)."""
        with self._lock:
            clients = {
                client: {
                    "floor": window.floor,
                    "answers": [
                        [seq, base64.b64encode(claim.answer).decode("ascii")]
                        for seq, claim in window.claims.items()
                        if claim.done.is_set() and not claim.abandoned
                    ],
                }
                for client, window in self._clients.items()
            }
        return json.dumps({"format": _FORMAT, "clients": clients}, separators=(",", ":")).encode()

    def load(self, data: bytes) -> None:
        """Replace the window's content with what :meth:`dump` wrote.

        Raises:
            ValueError: bytes that :meth:`dump` did not write.
        """
        try:
            document = json.loads(data)
            if document.get("format") != _FORMAT:
                raise ValueError(f"format {document.get('format')!r}")
            clients: OrderedDict[str, _ClientWindow] = OrderedDict()
            for client, saved in document["clients"].items():
                window = _ClientWindow(floor=int(saved["floor"]))
                for seq, answer in saved["answers"]:
                    claim = Claim(client, int(seq), base64.b64decode(answer))
                    claim.done.set()
                    window.claims[int(seq)] = claim
                clients[client] = window
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"replay window: unreadable saved window: {exc}") from None
        with self._lock:
            self._clients = clients
