"""Writes to the cluster with the user's kubectl: `kubectl create --raw` and `delete --raw`.

Raw API paths, as the readers use (workloads/why.py Kubectl): no discovery, no client-side
schema, the same kubeconfig and credentials. An unreachable API server is explained
(unreachable()): the address may be outside kubernetes.apiAccessCidrs, or the cluster gone.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Mapping

from workloads.why import ApiError, NotFound

ROOT = Path(__file__).resolve().parent.parent  # where the stack files are

PLURALS = {"Service": "services", "NetworkPolicy": "networkpolicies", "JobSet": "jobsets",
           "Workload": "workloads"}
# `status` and `list` exit with this when the cluster cannot be read (what else could be read
# is printed), so a script or CI step sees it (docs/architecture.md, the commands' table).
CLUSTER_UNREAD = 3
UNREACHABLE = ("connection refused", "no such host", "i/o timeout", "dial tcp",
               "Unable to connect to the server", "context deadline exceeded", "was refused")


def collection_path(obj: Mapping[str, Any]) -> str:
    """The API path objects of this kind are created at."""
    group_version = obj["apiVersion"]
    namespace = obj["metadata"]["namespace"]
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    return f"{root}/namespaces/{namespace}/{PLURALS[obj['kind']]}"


def api_ranges_in_stack_file(stack: str, root: Path = ROOT) -> int:
    """How many kubernetes.apiAccessCidrs the stack file lists (1 when it cannot tell: the
    shipped files list one), so the printed command adds the next one, never overwrites one."""
    import yaml

    try:
        data = yaml.safe_load((root / f"Pulumi.{stack}.yaml").read_text()) or {}
        kubernetes = (data.get("config") or {}).get("torchrec-cloud:kubernetes") or {}
        cidrs = kubernetes.get("apiAccessCidrs")
        return len(cidrs) if isinstance(cidrs, list) else 1
    except (OSError, ValueError, AttributeError, yaml.YAMLError):
        return 1


def unreachable(stack: str, stderr: str, listed: int | None = None) -> str | None:
    """The reason and the fix when kubectl could not reach the API server at all."""
    if not any(mark in stderr for mark in UNREACHABLE):
        return None
    index = api_ranges_in_stack_file(stack) if listed is None else listed
    return (f"the cluster's API server did not answer. Either this machine's address is not in "
            f"kubernetes.apiAccessCidrs (add it: pulumi config set --stack {stack} --path "
            f"'kubernetes.apiAccessCidrs[{index}]' \"$(curl -s https://checkip.amazonaws.com)/32\" && "
            f"pulumi up --stack {stack}), or the cluster no longer exists (`pulumi stack output "
            f"--stack {stack}` shows none after `pulumi destroy`; `pulumi up --stack {stack}` "
            "makes it again)")


class KubeWriter:
    def __init__(self, kubeconfig: str | None, kubectl: str = "kubectl") -> None:
        self.kubeconfig, self.kubectl = kubeconfig, kubectl

    def _run(self, *args: str, stdin: str | None = None) -> str:
        command = [self.kubectl, *(["--kubeconfig", self.kubeconfig] if self.kubeconfig else []),
                   *args]
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            if "NotFound" in done.stderr or "not found" in done.stderr:
                raise NotFound(args[-1])
            raise ApiError(f"{' '.join(command)}: {done.stderr.strip()}")
        return done.stdout

    def create(self, obj: Mapping[str, Any]) -> None:
        self._run("create", "--raw", collection_path(obj), "-f", "-", stdin=json.dumps(obj))

    def delete(self, path: str, grace_seconds: int | None = None) -> None:
        """Delete in the background (children and pods follow, each with its grace period:
        the trainer's SIGTERM path saves a final checkpoint)."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1",
                                   "propagationPolicy": "Background"}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        self._run("delete", "--raw", path, "-f", "-", stdin=json.dumps(options))
