"""A small fake PD HTTP server serving recorded PD API bodies, changeable over time."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "pd"
API = "/pd/api/v1"

# Recorded bodies served by default (tests/data/pd/ = copies of ../shared/samples/).
# /operators defaults to "[]": PD's answer when no operator is running (https://github.com/tikv/pd/blob/v8.1.1/server/api/operator.go).
DEFAULT_FILES = {
    f"{API}/stores": "pd-api-v1-stores_v8.1.0_tidb-operator-testdata.json",
    f"{API}/health": "pd-api-v1-health_v8.1.0_tidb-operator-testdata.json",
    f"{API}/members": "pd-api-v1-members_v8.1.0_tidb-operator-testdata.json",
    f"{API}/leader": "pd-api-v1-leader_v8.1.0_tidb-operator-testdata.json",
    f"{API}/cluster": "pd-api-v1-cluster_tidb-operator-testdata.json",
    f"{API}/config": "pd-api-v1-config_SIMPLIFIED_tidb-operator-testdata.json",
    f"{API}/schedulers": "pd-api-v1-schedulers_default-v8_tidb-operator-testdata.json",
}
DEFAULT_LITERALS = {f"{API}/operators": "[]\n"}

# PD renders JSON with unrolled/render (IndentJSON: 2 spaces), content type as below
# (https://github.com/tikv/pd/blob/v8.1.1/server/api/store.go, GetStore).
JSON_TYPE = "application/json; charset=UTF-8"
# Unknown routes fall through gorilla/mux to Go's http.NotFound: plain text, not JSON.
NOT_FOUND_BODY = "404 page not found\n"
_STATE_ENUM = {"Offline": 1, "Tombstone": 2}

Body = str | bytes | Mapping[str, Any] | list[Any]


@dataclass(frozen=True)
class Response:
    """One canned HTTP answer."""

    status: int
    body: bytes
    content_type: str = JSON_TYPE


def _encode(body: Body) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return (json.dumps(body, indent=2, ensure_ascii=False) + "\n").encode()


def pd_error(status: int, message: str) -> Response:
    """A PD handler error: a JSON string body with a non-200 status (as PD's handlers answer)."""
    return Response(status, json.dumps(message).encode())


class FakePD:
    """Serves GET /pd/api/v1/... from canned bodies; each route is a timeline of responses.

    A route's timeline is a list of (since, Response) with `since` on `clock`; the latest
    entry whose time has come is served. `set_body` replaces the timeline, `set_sequence`
    schedules changes relative to now, `set_store_state` appends a changed stores body.
    """

    def __init__(
        self,
        bodies: Mapping[str, Body] | None = None,
        *,
        defaults: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._routes: dict[str, list[tuple[float, Response]]] = {}
        self.requests: list[str] = []
        if defaults:
            for path, name in DEFAULT_FILES.items():
                self.set_body(path, (DATA_DIR / name).read_bytes())
            for path, text in DEFAULT_LITERALS.items():
                self.set_body(path, text)
        for path, body in (bodies or {}).items():
            self.set_body(path, body)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._tls: ssl.SSLContext | None = None
        #: Handshakes the server refused (TLS mode): OpenSSL's reason, e.g. a client with no
        #: certificate or one signed by another CA.
        self.tls_failures: list[str] = []

    # -- configuration -------------------------------------------------------------------

    def set_body(self, path: str, body: Body, status: int = 200) -> None:
        """Serve `body` on `path` (optionally with `?query`) from now on."""
        with self._lock:
            self._routes[path] = [(float("-inf"), Response(status, _encode(body)))]

    def set_response(self, path: str, response: Response) -> None:
        """Serve a ready-made Response (e.g. `pd_error(500, ...)`) on `path` from now on."""
        with self._lock:
            self._routes[path] = [(float("-inf"), response)]

    def set_sequence(
        self, path: str, steps: Iterable[tuple[float, Body]], status: int = 200
    ) -> None:
        """Serve each body from `after_seconds` (relative to now) until the next one's time."""
        now = self._clock()
        timeline = [(now + after, Response(status, _encode(body))) for after, body in steps]
        timeline.sort(key=lambda item: item[0])
        if not timeline:
            raise ValueError("set_sequence needs at least one step")
        with self._lock:
            self._routes[path] = timeline

    def remove(self, path: str) -> None:
        """Forget a route: it answers 404 like an unknown PD route."""
        with self._lock:
            self._routes.pop(path, None)

    def set_store_state(self, store_id: int, state_name: str, after_seconds: float = 0.0) -> None:
        """From `after_seconds` on, report `state_name` for store `store_id` in /stores."""
        path = f"{API}/stores"
        at = self._clock() + after_seconds
        with self._lock:
            current = self._current(path, at)
            if current is None:
                raise KeyError(f"{path} has no body to change")
            doc = json.loads(current.body)
            found = False
            for info in doc.get("stores") or []:
                meta = info["store"]
                if meta.get("id") == store_id:
                    found = True
                    meta["state_name"] = state_name
                    # `state` is the metapb enum: omitted for Up (omitempty on 0); Down and
                    # Disconnected are Up stores with an old heartbeat (https://github.com/tikv/pd/blob/v8.1.1/pkg/core/store.go).
                    enum = _STATE_ENUM.get(state_name)
                    if enum is None:
                        meta.pop("state", None)
                    else:
                        meta["state"] = enum
            if not found:
                raise KeyError(f"store {store_id} is not in the {path} body")
            timeline = [item for item in self._routes[path] if item[0] < at]
            timeline.append((at, Response(200, _encode(doc))))
            self._routes[path] = timeline

    # -- serving ---------------------------------------------------------------------------

    def _current(self, route: str, now: float) -> Response | None:
        timeline = self._routes.get(route)
        if not timeline:
            return None
        chosen = None
        for since, response in timeline:
            if since <= now:
                chosen = response
        return chosen

    def respond(self, method: str, raw_path: str) -> Response:
        """The answer to one request (also usable without the HTTP server)."""
        self.requests.append(f"{method} {raw_path}")
        parts = urlsplit(raw_path)
        path = parts.path.rstrip("/") or "/"
        now = self._clock()
        with self._lock:
            response = None
            if parts.query:
                response = self._current(f"{path}?{parts.query}", now)
            if response is None:
                response = self._current(path, now)
            if response is None and path.startswith(f"{API}/store/"):
                response = self._one_store(path.rsplit("/", 1)[1], now)
        if response is None:
            return Response(404, NOT_FOUND_BODY.encode(), "text/plain; charset=utf-8")
        if method != "GET":
            return Response(405, b"", "text/plain; charset=utf-8")
        if path == f"{API}/stores" and response.status == 200:
            return self._filter_states(response, parse_qs(parts.query).get("state"))
        return response

    def _one_store(self, raw_id: str, now: float) -> Response | None:
        stores = self._current(f"{API}/stores", now)
        if stores is None:
            return None
        for info in json.loads(stores.body).get("stores") or []:
            if str(info["store"].get("id")) == raw_id:
                return Response(200, _encode(info))
        # GET /store/999 → 404 "[PD:core:ErrStoreNotFound]store 999 not found" (server/api/store.go).
        return pd_error(404, f"[PD:core:ErrStoreNotFound]store {raw_id} not found")

    def _filter_states(self, response: Response, states: list[str] | None) -> Response:
        # GET /stores hides Tombstone stores unless ?state=2 is given (server/api/store.go).
        wanted = {int(s) for s in states} if states else {0, 1}
        doc = json.loads(response.body)
        infos = doc.get("stores") or []
        kept = [i for i in infos if int(i["store"].get("state", 0)) in wanted]
        if len(kept) == len(infos):
            return response
        doc["stores"] = kept
        doc["count"] = len(kept)
        return Response(response.status, _encode(doc), response.content_type)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """http(s)://127.0.0.1:<port> of the running server."""
        if self._server is None:
            raise RuntimeError("FakePD is not started")
        host, port = self._server.server_address[:2]
        return f"{'https' if self._tls else 'http'}://{host!s}:{port}"

    def start(self, port: int = 0, tls: ssl.SSLContext | None = None) -> FakePD:
        """Bind 127.0.0.1 on `port` (0: a free one) and serve in a daemon thread.

        `tls`: serve HTTPS only, as PD does with TiDB Operator's `tlsCluster`; a server
        context with CERT_REQUIRED demands a client certificate signed by its CA (mutual TLS).
        """
        fake = self
        self._tls = tls

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                response = fake.respond(self.command, self.path)
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(response.body)))
                self.end_headers()
                self.wfile.write(response.body)

            do_GET = _answer
            do_POST = _answer
            do_DELETE = _answer

            def log_message(self, format: str, *args: Any) -> None:
                return  # keep test output clean

        class Server(ThreadingHTTPServer):
            allow_reuse_address = True

            def finish_request(self, request: Any, client_address: Any) -> None:
                # The handshake runs in the request's thread: a refused client cannot stall
                # the accept loop.
                if tls is None:
                    super().finish_request(request, client_address)
                    return
                wrapped = tls.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
                try:
                    wrapped.do_handshake()
                except (ssl.SSLError, OSError) as exc:
                    fake.tls_failures.append(str(getattr(exc, "reason", None) or exc))
                    # Read what the client sent before closing (as Go's server does), so the
                    # close is not a reset that hides the alert from the client.
                    raw = socket.socket(fileno=wrapped.detach())
                    with contextlib.suppress(OSError):
                        raw.settimeout(1.0)
                        while raw.recv(4096):
                            pass
                    raw.close()
                    return
                try:
                    super().finish_request(wrapped, client_address)
                finally:
                    with contextlib.suppress(OSError):
                        wrapped.close()

            def shutdown_request(self, request: socket.socket) -> None:
                with contextlib.suppress(OSError):
                    super().shutdown_request(request)

        self._server = Server(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-pd", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakePD:
        return self.start() if self._server is None else self  # `with FakePD().start(tls=…)`

    def __exit__(self, *exc: object) -> None:
        self.stop()


def field_note_stores(namespace: str = "tidb-cluster") -> dict[str, Any]:
    """GET /stores of docs/field-story.md: region_size even, leader_size 689 MiB on store 4.

    Region counts are skewed (130/121/110/41) while region_size is even: a balance check on
    region_count alone would blame the wrong store. Shape as PD v8.1 (https://github.com/tikv/pd/blob/v8.1.1/pkg/response/store.go).
    """
    rows = [
        (1, "basic-tikv-0", 130, 771, 29, 86),
        (2, "basic-tikv-1", 121, 779, 37, 141),
        (3, "basic-tikv-2", 110, 795, 30, 122),
        (4, "basic-tikv-3", 41, 769, 38, 689),
    ]
    stores = [
        store_info(
            sid, pod, namespace=namespace, region_count=regions, region_size=region_size,
            leader_count=leaders, leader_size=leader_size,
        )
        for sid, pod, regions, region_size, leaders, leader_size in rows
    ]  # fmt: skip
    return {"count": len(stores), "stores": stores}


def store_info(
    sid: int, pod: str, *, state: str = "Up", leader_size: int = 0, region_size: int = 0,
    region_count: int = 0, leader_count: int = 0, engine: str | None = None,
    namespace: str = "tidb-cluster",
) -> dict[str, Any]:  # fmt: skip
    """One GET /stores entry in PD's shape (https://github.com/tikv/pd/blob/v8.1.1/pkg/response/store.go)."""
    meta: dict[str, Any] = {
        "id": sid,
        "address": f"{pod}.basic-tikv-peer.{namespace}.svc:20160",
        "version": "8.1.0",
        "state_name": state,
    }
    if engine:
        meta["labels"] = [{"key": "engine", "value": engine}]
    status = {
        "capacity": "915.8GiB",
        "available": "800GiB",
        "leader_count": leader_count,
        "leader_size": leader_size,
        "region_count": region_count,
        "region_size": region_size,
    }
    return {"store": meta, "status": status}
