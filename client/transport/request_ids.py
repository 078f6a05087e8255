"""Request IDs of one client: its client ID and a sequence number per server.

Every mutating request (Push, PushGrad, Init, Delete, Checkpoint, Restore; one per chunk of a split
call) is stamped once, when it is built; every retry sends the same bytes, so the server applies it at
most once and answers a replay with its first answer (``server/durability/replay_window.py``).
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import uuid
from typing import Any


def new_client_id() -> str:
    """A client ID unique per process and call: host, process ID and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class RequestIds:
    """Numbers the mutating requests one client sends to one server.

    Args:
        client: the client's ID (None: a new one, see :func:`new_client_id`).
    """

    def __init__(self, client: str | None = None) -> None:
        self.client = client or new_client_id()
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def stamp(self, request: Any) -> Any:
        """Give ``request`` (a message with a ``request_id`` field) the next ID; returns it.

        A forked child gets a client ID of its own at its first request: it must never send the numbers
        its parent sends.
        """
        with self._lock:
            if os.getpid() != self._pid:
                self.client, self._numbers, self._pid = new_client_id(), itertools.count(1), os.getpid()
            seq = next(self._numbers)
        request.request_id.client = self.client
        request.request_id.seq = seq
        return request
