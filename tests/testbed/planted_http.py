"""A planted HTTP service: what a hostile run's author points `target.pdURL` at.

Every answer carries the marker it was made with, so a test can search everything the
controller wrote for it. One thread per server; each path is one kind of answer:

- `/json/...`     200, a metadata-style JSON object holding the marker (no `stores`)
- `/html/...`     200, an HTML page holding the marker
- `/error/...`    500, a JSON string holding the marker (PD's error form)
- `/redirect/...` 302 to a URL holding the marker, with the marker in the body
- `/trickle/...`  200, then one byte a second, forever (a total deadline must end it)

`silent_port()` is a port that accepts connections and never answers.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _handler(marker: str) -> type[BaseHTTPRequestHandler]:
    class Planted(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, ctype: str, **headers: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            kind = self.path.strip("/").split("/", 1)[0]
            if kind == "json":
                body = json.dumps({"latest": {"token": marker, "role": marker}}).encode()
                self._send(200, body, "application/json")
            elif kind == "html":
                self._send(200, f"<html><p>{marker}</p></html>".encode(), "text/html")
            elif kind == "error":
                self._send(500, json.dumps(f"error {marker}").encode(), "application/json")
            elif kind == "redirect":
                self._send(302, marker.encode(), "text/plain", Location=f"/json/{marker}")
            elif kind == "trickle":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                try:
                    for char in f'{{"stores": "{marker}' * 1000:
                        self.wfile.write(char.encode())
                        self.wfile.flush()
                        time.sleep(1.0)
                except OSError:
                    return
            else:
                self._send(404, f"no {marker}".encode(), "text/plain")

    return Planted


@contextmanager
def planted_http(marker: str, host: str = "127.0.0.1") -> Iterator[str]:
    """A server whose answers carry `marker`; yields its base URL `http://host:port`."""
    server = ThreadingHTTPServer((host, 0), _handler(marker))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        sock.listen(64)
        yield int(sock.getsockname()[1])
