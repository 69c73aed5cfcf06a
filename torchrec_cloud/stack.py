"""A deployed stack as the user's own tools see it: its outputs, its kubeconfig, its bucket.

The outputs come from `pulumi stack output --json --show-secrets --stack <name>` (the user's
Pulumi CLI and login; a read that never touches the stack's state), or from a file holding that
command's output (`--outputs`), so the commands run where no Pulumi CLI is. The kubeconfig is
written to a private temporary file (0600) for kubectl and removed afterwards: it is a secret
output. The bucket is opened with fsspec and the user's own cloud credentials.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Iterator

from infra.telemetry import TELEMETRY_FOLDER

STACKS = ("aws", "azure", "gcp")
PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_NAMESPACE = "torchrec"  # infra/settings/model/job.py Job.namespace, for stacks before job_namespace


class StackError(Exception):
    """The stack's outputs could not be read; the message says why and what to do."""


@dataclass(frozen=True)
class Outputs:
    """The stack outputs these commands read (__main__.py exports them)."""

    stack: str
    cloud: str
    cluster_name: str
    kubeconfig: str
    checkpoint_uri: str
    job_name: str
    job_namespace: str
    storage_account: str = ""  # Azure: the checkpoint container's account (adlfs needs it)
    # Where the trainer saves: "objectStore" (checkpoint_uri) or "sharedFileSystem"
    # (checkpoint_dir, on the cluster's file system); "" from a stack before this output.
    checkpoint_location: str = ""
    checkpoint_dir: str = ""
    node_pools: Mapping[str, str] = field(default_factory=dict)  # name -> "spot" / "on-demand"
    estimated_cost: Mapping[str, Any] = field(default_factory=dict)  # infra/estimate.py's export
    kubernetes_version: str = ""

    @property
    def checkpoints_on_shared_file_system(self) -> bool:
        return self.checkpoint_location == "sharedFileSystem"  # infra/settings CheckpointLocation

    @classmethod
    def of(cls, stack: str, raw: dict[str, Any]) -> "Outputs":
        missing = [k for k in ("cloud", "kubeconfig", "job_name") if not raw.get(k)]
        if missing:
            raise StackError(f"stack {stack}: the outputs lack {', '.join(missing)}; has "
                             f"`pulumi up --stack {stack}` finished?")
        kubeconfig = raw["kubeconfig"]
        return cls(stack=stack, cloud=str(raw["cloud"]), cluster_name=str(raw.get("cluster_name") or ""),
                   kubeconfig=kubeconfig if isinstance(kubeconfig, str) else json.dumps(kubeconfig),
                   checkpoint_uri=str(raw.get("checkpoint_uri") or "").rstrip("/"),
                   job_name=str(raw["job_name"]),
                   job_namespace=str(raw.get("job_namespace") or DEFAULT_NAMESPACE),
                   storage_account=str(raw.get("storage_account") or ""),
                   checkpoint_location=str(raw.get("checkpoint_location") or ""),
                   checkpoint_dir=str(raw.get("checkpoint_dir") or ""),
                   node_pools={str(k): str(v) for k, v in (raw.get("node_pools") or {}).items()}
                   if isinstance(raw.get("node_pools"), dict) else {},
                   estimated_cost=raw["estimated_cost"]
                   if isinstance(raw.get("estimated_cost"), dict) else {},
                   kubernetes_version=str(raw.get("kubernetes_version") or ""))

    @property
    def telemetry_uri(self) -> str:
        return f"{self.checkpoint_uri}/{TELEMETRY_FOLDER}"


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, help="the Pulumi stack: aws, azure or gcp "
                        "(or any stack name of this project)")
    parser.add_argument("--outputs", metavar="FILE.json",
                        help="a saved `pulumi stack output --json --show-secrets`, instead of "
                             "asking the Pulumi CLI")
    parser.add_argument("--kubeconfig", help="a kubeconfig for the cluster, instead of the "
                        "stack's kubeconfig output")


def read_outputs(stack: str, outputs_file: str | None = None) -> Outputs:
    """The stack's outputs, from the file or from the user's Pulumi CLI; a stack this project
    has no file for is refused first (a typo would otherwise reach the Pulumi CLI or kubectl)."""
    if not outputs_file:
        from torchrec_cloud.stack_file import unknown_stack

        unknown = unknown_stack(stack, PROJECT_ROOT)
        if unknown:
            raise StackError(unknown)
    if outputs_file:
        try:
            with open(outputs_file, encoding="utf-8") as f:
                return Outputs.of(stack, json.load(f))
        except (OSError, ValueError) as error:
            raise StackError(f"--outputs {outputs_file}: {error}") from error
    command = ["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", stack]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except FileNotFoundError as error:
        raise StackError("the Pulumi CLI is not installed (https://www.pulumi.com/docs/iac/download-install/); "
                         "or pass --outputs FILE.json saved from `pulumi stack output --json "
                         "--show-secrets`") from error
    except subprocess.TimeoutExpired as error:
        raise StackError(f"{' '.join(command)} did not answer in 120 s") from error
    if done.returncode != 0:
        said = done.stderr.strip() or done.stdout.strip()
        raise StackError(f"{' '.join(command)}: {said}{_next_step(stack, said)}")
    try:
        return Outputs.of(stack, json.loads(done.stdout or "{}"))
    except ValueError as error:
        raise StackError(f"{' '.join(command)} printed no JSON: {error}") from error


def _next_step(stack: str, said: str) -> str:
    """What to do after the Pulumi CLI's own refusal: a stack the backend has never seen
    (`error: no stack named 'aws' found`) is created and deployed, or is there under another
    name (an organization's `org/project/aws`, or another backend: `pulumi login`)."""
    if "no stack named" not in said:
        return ""
    return (f"; the stack file is here, but your Pulumi backend has no stack {stack} yet: "
            f"create it with `pulumi stack init {stack}`, then `pulumi up --stack {stack}`; or, "
            f"if it was made under another name or backend, `pulumi stack ls` lists them "
            f"(`pulumi stack select <name>` picks one, `pulumi login` another backend)")


# Signals that end a command in a terminal: a closed terminal (SIGHUP), `kill` or a session
# manager (SIGTERM). Python's default for them ends the process without running `finally`, which
# left the kubeconfig copy (a credential) in the temporary folder.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@contextlib.contextmanager
def removed_on_signal() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into SystemExit(128 + signal) while the block runs, so that its
    `finally` clauses (the temporary kubeconfig's removal) run; Ctrl-C (SIGINT) already raises
    KeyboardInterrupt. Handlers can only be set from the main thread: elsewhere, no change."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, leave) for sig in ENDING_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def file_name(stack: str) -> str:
    """A stack's name as one file or folder name: `org/project/aws` (a fully qualified stack)
    -> `org_project_aws`, never a path that climbs or nests."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", stack).strip(".")
    return cleaned or "stack"


@contextlib.contextmanager
def kubeconfig_file(outputs: Outputs, override: str | None = None) -> Iterator[str]:
    """A path kubectl can use: the override as given, else the stack's kubeconfig in a private
    temporary file that is removed on exit."""
    if override:
        yield override
        return
    with removed_on_signal():
        yield from _private_copy(outputs)


def _private_copy(outputs: Outputs) -> Iterator[str]:
    handle, path = tempfile.mkstemp(prefix=f"kubeconfig-{file_name(outputs.stack)}-", suffix=".yaml")
    try:
        os.fchmod(handle, 0o600)
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(outputs.kubeconfig)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def open_bucket(uri: str, outputs: Outputs | None = None) -> tuple[Any, str]:
    """(fsspec file system, path) for a bucket URI, with the user's own credentials.

    gs://: gcsfs's plain GCSFileSystem, as the trainer uses (trainer/checkpoint.py open_store:
    the extended class asks for bucket metadata an object-only role lacks). az://: adlfs with
    anon=False (DefaultAzureCredential: the user's `az login`) and the stack's storage account,
    which az:// URIs do not carry. s3://: s3fs's default credential chain. file:// and plain
    paths: the local file system (tests, and a bucket mounted locally). Instances are not
    cached: a cached one would keep a stale listing.
    """
    import fsspec

    scheme = uri.split("://", 1)[0] if "://" in uri else "file"
    if scheme in ("gs", "gcs"):
        from gcsfs.core import GCSFileSystem

        fs = GCSFileSystem(skip_instance_cache=True)
        return fs, fs._strip_protocol(uri)
    options: dict[str, Any] = {}
    if scheme in ("az", "abfs", "abfss"):
        options["anon"] = False
        account = (outputs.storage_account if outputs else "") or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME", "")
        if account:
            options["account_name"] = account
    return fsspec.core.url_to_fs(uri, skip_instance_cache=True, **options)
