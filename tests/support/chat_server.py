"""A local OpenAI-compatible ``/v1/chat/completions`` for tests: fixed reply, optional delay, and a record
of the Authorization headers it received."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer:
    """``url`` of a running server answering ``reply`` after ``delay_s``; ``auth`` lists the headers seen."""

    def __init__(self, reply: str = "[]", delay_s: float = 0.0):
        self.reply, self.delay_s, self.auth = reply, delay_s, []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.auth.append(self.headers.get("Authorization"))
                time.sleep(owner.delay_s)
                body = json.dumps(
                    {
                        "choices": [
                            {"message": {"role": "assistant", "content": owner.reply}, "finish_reason": "stop"}
                        ],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 1},
                    }
                ).encode()
                with contextlib.suppress(OSError):  # the client may have given up (timeout tests)
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._srv.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}"

    @contextlib.contextmanager
    def running(self) -> Iterator[ChatServer]:
        t = threading.Thread(target=self._srv.serve_forever, daemon=True)
        t.start()
        try:
            yield self
        finally:
            self._srv.shutdown()
            self._srv.server_close()
