"""A tiny real HTTP server on loopback that records what reaches it (for tests of what must never be
sent, or of what a hostile server answers). Not an inference server: each test gives it its answers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# (method, path, headers) → (status, content type, body)
Answer = Callable[[str, str, dict[str, str]], tuple[int, str, bytes]]


class Stub:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.requests: list[tuple[str, str, dict[str, str]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def http_stub(answer: Answer) -> Iterator[Stub]:
    stub: Stub

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            headers = dict(self.headers.items())
            stub.requests.append((self.command, self.path, headers))
            status, ctype, body = answer(self.command, self.path, headers)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _serve

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stub = Stub(server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
