"""A TCP proxy between a gRPC client and one server that can lose a call's answer after the server sent it.

:class:`FaultProxy` forwards bytes both ways. Armed with :meth:`FaultProxy.drop_answers`, it reads the
server's HTTP/2 frames and holds back the frames of calls (streams other than 0); when an answer arrives
(a DATA frame: the answer's message, sent once the server has applied the request, on a unary call or
on a long-lived call stream; or HEADERS with END_STREAM, the trailers of a call answered without a
message) it throws the held frames away and closes both connections. The client sees the connection
break (UNAVAILABLE) without the answer, exactly as when a network drops between the server's answer and
the client. Frames of stream 0 (SETTINGS, PING, WINDOW_UPDATE) pass at once, so the connection stays
healthy until then.

Threads only, no process: :meth:`FaultProxy.close` ends every socket and thread.
"""

from __future__ import annotations

import socket
import threading

_FRAME_HEADER = 9
_DATA = 0x0
_HEADERS = 0x1
_END_STREAM = 0x1


class FaultProxy:
    """Listen on a free loopback port and forward every connection to ``target`` (``host:port``)."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host.strip("[]"), int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._skip = 0  # answers to let through before dropping
        self._drop = 0  # answers still to drop
        self.dropped = 0
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._start(self._accept_loop)

    def drop_answers(self, count: int = 1, skip: int = 0) -> None:
        """Let ``skip`` answers through, then lose the next ``count`` (each drop breaks its connection)."""
        with self._lock:
            self._skip, self._drop = skip, count

    def disarm(self) -> None:
        """Forward everything again."""
        self.drop_answers(0)

    def close(self) -> None:
        """Close the listener and every connection; wait for the threads."""
        self._closed = True
        _close(self._listener)  # shutdown wakes the blocked accept()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _close(sock)
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._target, timeout=5)
                server.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._sockets += [client, server]
            self._start(self._pump_requests, client, server)
            self._start(self._pump_answers, server, client)

    def _pump_requests(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while data := client.recv(65536):
                server.sendall(data)
        except OSError:
            pass
        _close(client)
        _close(server)

    def _armed(self) -> bool:
        with self._lock:
            return self._drop > 0

    def _answer_complete(self) -> bool:
        """A call's answer went by while armed: True when this answer is to be dropped."""
        with self._lock:
            if self._skip > 0:
                self._skip -= 1
                return False
            self._drop -= 1
            self.dropped += 1
            return True

    def _pump_answers(self, server: socket.socket, client: socket.socket) -> None:
        buffer = b""
        held: list[bytes] = []  # frames of calls held back while armed
        try:
            while data := server.recv(65536):
                buffer += data
                out: list[bytes] = []
                while len(buffer) >= _FRAME_HEADER:
                    length = int.from_bytes(buffer[:3], "big")
                    if len(buffer) < _FRAME_HEADER + length:
                        break
                    frame, buffer = buffer[: _FRAME_HEADER + length], buffer[_FRAME_HEADER + length :]
                    kind, flags = frame[3], frame[4]
                    stream = int.from_bytes(frame[5:9], "big") & 0x7FFFFFFF
                    if stream == 0 or not (self._armed() or held):
                        out.append(frame)
                        continue
                    held.append(frame)
                    if kind == _DATA or (kind == _HEADERS and flags & _END_STREAM):
                        if self._answer_complete():
                            raise ConnectionAbortedError("answer dropped")
                        out += held
                        held = []
                if out:
                    client.sendall(b"".join(out))
        except OSError:
            pass
        _close(server)
        _close(client)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
