"""A local server that accepts connections and never answers (or answers a stream's first token and then stalls):
the LLM server the bounded-exit tests (issue 36, item 6) run against."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

_CHUNK = b'data: {"choices": [{"delta": {"content": "Hel"}}]}\n\n'
FIRST_TOKEN = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    + f"{len(_CHUNK):x}\r\n".encode()
    + _CHUNK
    + b"\r\n"
)


class SilentServer:
    """``url`` of a server on 127.0.0.1; ``accepted`` counts connections. With ``first_token``, each connection
    gets the headers and one stream chunk after its request arrives, then nothing more."""

    def __init__(self, first_token: bool = False):
        self.first_token = first_token
        self.accepted = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._conns: list[socket.socket] = []
        self._stop = threading.Event()
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self._conns.append(conn)  # kept open, never closed until the end: the client must give up itself
            if self.first_token:
                with contextlib.suppress(OSError):
                    conn.settimeout(5)
                    conn.recv(65536)
                    conn.sendall(FIRST_TOKEN)

    @contextlib.contextmanager
    def running(self) -> Iterator[SilentServer]:
        t = threading.Thread(target=self._serve, daemon=True)
        t.start()
        try:
            yield self
        finally:
            self._stop.set()
            t.join(timeout=5)
            for c in self._conns:
                c.close()
            self._sock.close()
