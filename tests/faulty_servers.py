"""Misbehaving inference servers on loopback, for the fault tests: each answers every path badly in one way.

    hang     200 and the first bytes of a JSON body, then nothing (the connection stays open)
    slow     200 and one byte every 0.2 s, for ever: never silent long enough for a read timeout
    garbage  200 with bytes that are neither JSON nor Prometheus text
    huge     /metrics of 50 MB of valid-looking exposition lines, sent as fast as the socket takes them

A real socket server (http.server, one thread per connection), so the client's timeouts, deadline and byte
caps are exercised through the network stack; `close()` releases every handler still hanging.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HUGE_BYTES = 50 * 1024 * 1024
GARBAGE = b"\x00\xff<html>{{{ not json, not metrics \xfe\n" * 64
MODES = ("hang", "slow", "garbage", "huge")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet: the tests read rows, not logs
        pass

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def _head(self, length: int, kind: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.flush()

    def _answer(self) -> None:
        mode, stop = self.server.mode, self.server.stop
        self.server.requests.append(self.path)
        try:
            if mode == "hang":
                self._head(10_000)
                self.wfile.write(b'{"choices": [')
                self.wfile.flush()
                stop.wait()
            elif mode == "slow":
                self._head(10_000_000)
                while not stop.wait(0.2):
                    self.wfile.write(b" ")
                    self.wfile.flush()
            elif mode == "garbage":
                self._head(len(GARBAGE), "text/plain")
                self.wfile.write(GARBAGE)
            elif mode == "huge":
                if not self.path.startswith("/metrics"):
                    self.send_error(404)
                    return
                line = b'ddtree:filler_total{model_name="huge",series="%08d"} 1\n'
                block = b"".join(line % i for i in range(1000))
                self._head(HUGE_BYTES // len(block) * len(block), "text/plain; version=0.0.4")
                for _ in range(HUGE_BYTES // len(block)):
                    if stop.is_set():
                        return
                    self.wfile.write(block)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = mode
        self.stop = threading.Event()
        self.requests: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def faulty_server(mode: str) -> Iterator[_Server]:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    server = _Server(mode)
    thread = threading.Thread(target=server.serve_forever, name=f"faulty-{mode}", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(10)
