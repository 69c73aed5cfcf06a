"""Object-store emulators the tests start themselves on 127.0.0.1 (free ports), stopped after.

- S3: moto in server mode (PyPI moto[server]), for s3fs.
- Azure Blob: Azurite (npm, installed by `make test` into .venv/azurite), for adlfs.
- GCS: gcp-storage-emulator (PyPI), for gcsfs via STORAGE_EMULATOR_HOST; optionally behind
  `ObjectUserProxy`, which refuses bucket-level calls as GCS does for roles/storage.objectUser.

What none of them can mimic: the pod's identity (IRSA web identity, Azure workload identity,
GKE workload identity). Each emulator takes a fixed test credential instead, so the tests
prove the trainer's storage code and the contract's non-credential settings, not IAM;
only the GCS proxy reproduces one IAM rule (no storage.buckets.get).
"""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, Iterator, List

ROOT = Path(__file__).resolve().parent.parent
AZURITE = ROOT / ".venv" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
BIN = Path(sys.executable).parent
# Azurite's documented development account (not a secret).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulator:
    """A server process; ``env`` holds the variables that point a client at it."""

    def __init__(self, argv: List[str], port: int, env: Dict[str, str], ready_path: str = "/") -> None:
        self.port = port
        self.env = env
        self.url = f"http://127.0.0.1:{port}"
        # Its log goes to a file, not a pipe: moto logs every request, and a pipe nobody reads
        # fills at 64 KiB and stops the server mid-request.
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.url + ready_path, timeout=1)
                return
            except urllib.error.HTTPError:
                return  # it answers (an error status is still an answer)
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    err = self.log_tail()
                    raise RuntimeError(f"emulator {argv[0]} did not start: {err}")
                time.sleep(0.1)

    def log_tail(self, size: int = 2000) -> str:
        self.log.seek(0, 2)
        self.log.seek(max(0, self.log.tell() - size))
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def moto_s3() -> Emulator:
    port = free_port()
    return Emulator([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], port, {
        "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}",
        # Stand-ins for the IRSA web identity the pod gets (moto accepts any key).
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
    }, ready_path="/moto-api/")


def azurite() -> Emulator:
    if not AZURITE.exists():
        raise RuntimeError(f"{AZURITE} is missing: run `make test` (it installs Azurite from npm)")
    port = free_port()
    conn = (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
            f"AccountKey={AZURITE_KEY};BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};")
    return Emulator([str(AZURITE), "--inMemoryPersistence", "--blobHost", "127.0.0.1",
                     "--blobPort", str(port), "--skipApiVersionCheck", "--disableTelemetry",
                     "--silent"], port,
                    # Stand-in for workload identity: Azurite only takes account keys over http.
                    {"AZURE_STORAGE_CONNECTION_STRING": conn})


def gcs(bucket: str) -> Emulator:
    port = free_port()
    return Emulator([str(BIN / "gcp-storage-emulator"), "start", "--host", "127.0.0.1", "--port",
                     str(port), "--in-memory", "--default-bucket", bucket, "--quiet"], port,
                    gcs_client_env(f"http://127.0.0.1:{port}"), ready_path="/storage/v1/b")


def gcs_client_env(endpoint: str) -> Dict[str, str]:
    # No GKE metadata server here: skip google-auth's probe of it, so gcsfs ends up anonymous.
    return {"STORAGE_EMULATOR_HOST": endpoint, "NO_GCE_CHECK": "true",
            "GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9"}


class ObjectUserProxy:
    """HTTP proxy to the GCS emulator that answers 403 to bucket-level requests
    (GET/PATCH/DELETE /storage/v1/b/<bucket>, POST /storage/v1/b), as GCS does for an identity
    holding only roles/storage.objectUser (no storage.buckets.get / create), and 400 to the
    moveTo call the emulator lacks."""

    def __init__(self, upstream_port: int) -> None:
        upstream = upstream_port
        self.refused: List[str] = []
        refused = self.refused

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                path = self.path.split("?", 1)[0].rstrip("/")
                parts = path.split("/")
                bucket_level = (path.startswith("/storage/v1/b") and len(parts) <= 5)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if bucket_level or "/moveTo/" in path:
                    # The emulator answers moveTo with 501, which gcsfs retries for ~30 s before
                    # its copy+delete fallback; a 400 takes the fallback at once.
                    status = 403 if bucket_level else 400
                    if bucket_level:
                        refused.append(f"{self.command} {path}")
                    data = (b'{"error": {"code": 403, "message": "caller does not have '
                            b'storage.buckets.get access to the Google Cloud Storage bucket."}}'
                            if bucket_level else
                            b'{"error": {"code": 400, "message": "moveTo: not in the emulator"}}')
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for key, value in resp.getheaders():
                    if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def running(emulator: Emulator) -> Iterator[Emulator]:
    try:
        yield emulator
    finally:
        emulator.stop()


def apply_env(monkeypatch, env: Dict[str, str]) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)


__all__ = ["Emulator", "ObjectUserProxy", "apply_env", "azurite", "free_port", "gcs",
           "gcs_client_env", "moto_s3", "running"]
