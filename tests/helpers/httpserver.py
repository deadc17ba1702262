"""A tiny HTTP endpoint on 127.0.0.1 for handler tests and the retry-storm drill.

Routes: ``/status/<code>`` answers that code; ``/flaky`` answers 503 until ``recover_at``
(monotonic seconds) and 200 after, or, after ``storm_until_all_seen``, 503 until every expected
key has been answered 503 once and a further storm has passed. Every request is recorded with its
time, path, body and ``Idempotency-Key`` header.
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
    storm_keys: set[str] = field(default_factory=set)
    storm_seconds: float = 0.0

    def storm_until_all_seen(self, keys: set[str], seconds: float) -> None:
        """Answer /flaky with 503 until every key in ``keys`` has been answered once, then
        for ``seconds`` more: every client meets the storm however late it arrives."""
        self.storm_keys, self.storm_seconds = set(keys), seconds
        self.recover_at = float("inf")

    def answer(self, path: str, key: str | None) -> int:
        if path.startswith("/status/"):
            return int(path.rsplit("/", 1)[1])
        if path != "/flaky":
            return 404
        now = time.monotonic()
        if self.storm_keys:
            self.storm_keys.discard(key or "")
            if not self.storm_keys:
                self.recover_at = now + self.storm_seconds
        return 503 if now < self.recover_at else 200


@contextmanager
def serve() -> Iterator[Endpoint]:
    endpoint = Endpoint(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            key = self.headers.get("Idempotency-Key")
            with endpoint.lock:
                status = endpoint.answer(self.path, key)
                endpoint.hits.append(
                    Hit(
                        time.time(),
                        self.path,
                        json.loads(raw) if raw else None,
                        key,
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
