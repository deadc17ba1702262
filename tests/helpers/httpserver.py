"""A tiny HTTP endpoint on 127.0.0.1 for handler tests and the retry-storm drill.

Routes: ``/status/<code>`` answers that code; ``/flaky`` answers 503 until ``recover_at``
(monotonic seconds) and 200 after. Every request is recorded with its time, path, body and
``Idempotency-Key`` header.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Listener(ThreadingHTTPServer):
    # A herd of retries connects at once: the default backlog of 5 would drop SYNs, and the
    # kernel's retransmit backoff would turn that into client timeouts.
    request_queue_size = 1024


@dataclass
class Hit:
    at: float  # time.time()
    path: str
    body: Any
    key: str | None
    status: int


@dataclass
class Endpoint:
    url: str
    recover_at: float = 0.0
    hits: list[Hit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, path: str) -> int:
        if path.startswith("/status/"):
            return int(path.rsplit("/", 1)[1])
        if path == "/flaky":
            return 503 if time.monotonic() < self.recover_at else 200
        return 404


@contextmanager
def serve() -> Iterator[Endpoint]:
    endpoint = Endpoint(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            status = endpoint.answer(self.path)
            with endpoint.lock:
                endpoint.hits.append(
                    Hit(
                        time.time(),
                        self.path,
                        json.loads(raw) if raw else None,
                        self.headers.get("Idempotency-Key"),
                        status,
                    )
                )
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet

    server = Listener(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    endpoint.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()
