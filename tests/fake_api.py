"""A fake Kubernetes API server on 127.0.0.1 serving recorded objects, for the real kubectl.

The server answers the API paths a command reads (list responses as the API server returns
them, 404 Status objects for what is absent); the kubeconfig points there. Used by
tests/test_why.py and tests/test_status.py.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def api_list(kind: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "4711"},
            "items": items}


class FakeApi:
    """Routes: exact path (query included where the command sends one) -> JSON or text body."""

    def __init__(self, routes: dict[str, Any]) -> None:
        self.routes = {"/version": {"major": "1", "minor": "33", "gitVersion": "v1.33.4"}, **routes}
        self.requests: list[str] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                api.requests.append(self.path)
                body = api.routes.get(self.path, api.routes.get(urlsplit(self.path).path))
                if body is None:
                    status, body = 404, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                         "status": "Failure", "reason": "NotFound", "code": 404,
                                         "message": "the server could not find the requested resource"}
                else:
                    status = 200
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
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
