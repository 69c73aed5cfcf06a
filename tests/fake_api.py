"""A fake Kubernetes API server on 127.0.0.1 serving recorded objects, for the real kubectl.

The server answers the API paths a command reads (list responses as the API server returns
them, 404 Status objects for what is absent); the kubeconfig points there. Used by
tests/test_why.py and tests/test_status.py.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit


def api_list(kind: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "4711"},
            "items": items}


def _without_timeout(path: str) -> str:
    """The path without the `timeout` parameter kubectl --request-timeout adds to each request
    (the API server's own limit, not part of what the command reads)."""
    parts = urlsplit(path)
    query = "&".join(p for p in parts.query.split("&") if p and not p.startswith("timeout="))
    return parts.path + (f"?{query}" if query else "")


@dataclass(frozen=True)
class Answer:
    """A route's answer other than an immediate 200: another HTTP status, or one given only
    once `first` returns (it runs in the request's own thread: a wait)."""

    body: Any
    status: int = 200
    first: Callable[[], object] | None = None


def forbidden(verb: str, resource: str, namespace: str, name: str = "") -> Answer:
    """The API server's 403 Status for a user without an RBAC rule (apimachinery
    NewForbidden: `<resource> "<name>" is forbidden: User ... cannot <verb> resource ...`)."""
    kind, _, sub = resource.partition("/")
    what = f'{kind} "{name}"' if name else kind
    return Answer({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": f'{what} is forbidden: User "alice" cannot {verb} resource '
                              f'"{resource}" in API group "" in the namespace "{namespace}"',
                   "reason": "Forbidden", "details": {"name": name, "kind": kind}, "code": 403},
                  status=403)


class FakeApi:
    """Routes: exact path (query included where the command sends one) -> JSON or text body,
    or an Answer."""

    def __init__(self, routes: dict[str, Any]) -> None:
        self.routes = {"/version": {"major": "1", "minor": "33", "gitVersion": "v1.33.4"}, **routes}
        self.requests: list[str] = []
        self.created: list[tuple[str, dict[str, Any]]] = []  # (collection path, object) POSTed
        self.deleted: list[tuple[str, dict[str, Any]]] = []  # (path, DeleteOptions)
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path = _without_timeout(self.path)
                api.requests.append(path)
                body = api.routes.get(path, api.routes.get(urlsplit(path).path))
                if body is None:
                    status, body = 404, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                         "status": "Failure", "reason": "NotFound", "code": 404,
                                         "message": "the server could not find the requested resource"}
                elif isinstance(body, Answer):
                    if body.first is not None:
                        body.first()
                    status, body = body.status, body.body
                else:
                    status = 200
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (an Answer that waited past its timeout)

            def do_POST(self) -> None:  # noqa: N802: a create stores the object at its path
                path = _without_timeout(self.path)
                body = json.loads(self._body() or b"{}")
                api.requests.append(f"POST {path}")
                name = body.get("metadata", {}).get("name", "")
                if f"{path}/{name}" in api.routes:
                    self._send(409, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                     "reason": "AlreadyExists", "code": 409,
                                     "message": f'"{name}" already exists'})
                    return
                api.created.append((path, body))
                api.routes[f"{path}/{name}"] = body
                self._send(201, body)

            def do_DELETE(self) -> None:  # noqa: N802
                path = _without_timeout(self.path)
                options = json.loads(self._body() or b"{}")
                api.requests.append(f"DELETE {path}")
                if api.routes.pop(path, None) is None:
                    self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                     "reason": "NotFound", "code": 404,
                                     "message": f"{path} not found"})
                    return
                api.deleted.append((path, options))
                self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

            def _body(self) -> bytes:
                """The request body, sent whole or chunked (kubectl streams `-f -` chunked)."""
                if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                    return self.rfile.read(int(self.headers.get("Content-Length") or 0))
                data = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeApi":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "stack",
        "clusters": [{"name": "stack", "cluster": {"server": server}}],
        "users": [{"name": "stack", "user": {"token": "not-a-secret"}}],
        "contexts": [{"name": "stack", "context": {"cluster": "stack", "user": "stack"}}],
    }))
    return path
