"""`python -m workloads.why --namespace torchrec --job dlrm`: why the job is not running.

Reads the objects workloads/waiting/ needs from the cluster and prints its one answer: the
reason, the evidence line and a next step. Run it from a laptop with the stack's kubeconfig
(KUBECONFIG, or --kubeconfig).

Why kubectl and not a Python client: the official `kubernetes` package is not among the
program's dependencies, and the stack's kubeconfigs authenticate through exec plugins (aws eks
get-token, kubelogin, gke-gcloud-auth-plugin) that kubectl already runs. `kubectl get --raw PATH`
reads the exact API paths, with no discovery and no client-side conversion, so the classifier
sees what the API server returns.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence
from urllib.parse import quote

from workloads.waiting import AUTOSCALER_STATUS, ClusterView, Verdict, explain

JOBSET_PATH = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets/{job}"  # workloads/jobset.py API_VERSION
PYTORCHJOB_PATH = "/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs/{job}"
# Kueue serves v1beta2 (the storage version since it was added) and v1beta1 on older releases.
KUEUE_PATHS = ("/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads",
               "/apis/kueue.x-k8s.io/v1beta1/namespaces/{ns}/workloads")
# The cluster-autoscaler chart's pod label on EKS: "<cloudProvider>-cluster-autoscaler"
# (charts/cluster-autoscaler/templates/_helpers.tpl, cluster-autoscaler.name); infra/aws/autoscaler.py.
AWS_AUTOSCALER_SELECTOR = "app.kubernetes.io/name=aws-cluster-autoscaler"
# The last hour of the autoscaler's log, not a line count: its "ASG %s scaling failed with
# description: %s" is a klog.Warningf (cloudprovider/aws/auto_scaling_groups.go,
# cluster-autoscaler-1.35.2), written once per failed activity, and even at the stack's v=1
# (infra/aws/autoscaler.py) a line count says nothing about how far back it reaches.
# sinceSeconds: core/v1 PodLogOptions.
LOG_SINCE_SECONDS = 3600


class NotFound(Exception):
    """The API answered 404: the object, or its API (no Kueue installed), is absent."""


class ApiError(Exception):
    pass


Reader = Callable[[str], str]  # an API path -> the response body


@dataclass(frozen=True)
class Kubectl:
    """`kubectl get --raw` with the user's kubeconfig."""

    kubeconfig: str | None = None
    context: str | None = None
    kubectl: str = "kubectl"
    # kubectl's --request-timeout in seconds, for a caller that must not wait on one slow
    # request (status's GPU exporters behind the pod proxy); None: kubectl's own (no limit).
    request_timeout_s: int | None = None

    def bounded(self, seconds: int) -> "Kubectl":
        """The same reader, giving up on each request after `seconds`."""
        return replace(self, request_timeout_s=seconds)

    def __call__(self, path: str) -> Any:
        command = [self.kubectl, "get", "--raw", path]
        if self.request_timeout_s is not None:
            command.insert(1, f"--request-timeout={self.request_timeout_s}s")
        if self.kubeconfig:
            command[1:1] = ["--kubeconfig", self.kubeconfig]
        if self.context:
            command[1:1] = ["--context", self.context]
        # kubectl's own limit comes first and says what timed out; this one stops a kubectl
        # that hangs before any request (an exec credential plugin).
        limit = 60 if self.request_timeout_s is None else self.request_timeout_s + 15
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit)
        if done.returncode != 0:
            if "NotFound" in done.stderr:
                raise NotFound(path)
            raise ApiError(f"{' '.join(command)}: {done.stderr.strip()}")
        return done.stdout


def _optional(read: Reader, path: str, default: Any) -> Any:
    """A read that may be missing (no Kueue, no autoscaler ConfigMap, no rights on kube-system)."""
    try:
        return read(path)
    except (NotFound, ApiError):
        return default


def _object(read: Reader, path: str) -> dict[str, Any] | None:
    body = _optional(read, path, None)
    return None if body is None else json.loads(body)


def _items(read: Reader, path: str) -> list[dict[str, Any]]:
    return (_object(read, path) or {}).get("items") or []


def _job(read: Reader, ns: str, job: str) -> dict[str, Any] | None:
    for template in (JOBSET_PATH, PYTORCHJOB_PATH):
        try:
            return json.loads(read(template.format(ns=ns, job=job)))
        except NotFound:
            continue
    return None


def _autoscaler_log(read: Reader) -> str:
    """Where Cluster Autoscaler runs as a pod (EKS), the cloud's words are only in its log: the
    last hour of it, and of the previous container's too when it restarted (PodLogOptions
    `previous`), oldest first."""
    pods = _items(read, f"/api/v1/namespaces/kube-system/pods?labelSelector={quote(AWS_AUTOSCALER_SELECTOR)}")
    logs = []
    for pod in pods:
        path = f"/api/v1/namespaces/kube-system/pods/{pod['metadata']['name']}/log"
        restarted = any((c.get("restartCount") or 0) > 0
                        for c in (pod.get("status") or {}).get("containerStatuses") or [])
        if restarted:
            logs.append(_optional(read, f"{path}?previous=true&sinceSeconds={LOG_SINCE_SECONDS}", ""))
        logs.append(_optional(read, f"{path}?sinceSeconds={LOG_SINCE_SECONDS}", ""))
    return "\n".join(log for log in logs if log)


def read_view(read: Reader, namespace: str, job: str, cloud: str | None = None) -> ClusterView:
    """Every object the classifier reads; the job's namespace first, then the cluster's."""
    ns = namespace
    workloads: list[dict[str, Any]] = []
    for template in KUEUE_PATHS:
        try:
            workloads = json.loads(read(template.format(ns=ns))).get("items") or []
            break
        except (NotFound, ApiError):
            continue
    field = quote(f"involvedObject.name={AUTOSCALER_STATUS}")
    return ClusterView(
        job=job, namespace=ns, cloud=cloud,
        jobset=_job(read, ns, job),
        pods=_items(read, f"/api/v1/namespaces/{ns}/pods"),
        events=_items(read, f"/api/v1/namespaces/{ns}/events"),
        workloads=workloads,
        nodes=_items(read, "/api/v1/nodes"),
        autoscaler_status=_object(
            read, f"/api/v1/namespaces/kube-system/configmaps/{AUTOSCALER_STATUS}"),
        autoscaler_events=_items(read, f"/api/v1/namespaces/kube-system/events?fieldSelector={field}"),
        autoscaler_log=_autoscaler_log(read) if cloud in (None, "aws") else "",
    )


def render(view: ClusterView, verdict: Verdict) -> str:
    return (f"{view.job} ({view.namespace}): {verdict.reason}\n"
            f"  evidence: {verdict.evidence}\n"
            f"  next step: {verdict.next_step}\n")


def main(argv: Sequence[str] | None = None, read: Reader | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.why", description=__doc__.split("\n")[0])
    parser.add_argument("--namespace", "-n", default="torchrec", help="the job's namespace (job.namespace)")
    parser.add_argument("--job", default="dlrm", help="the job's name (stack output job_name)")
    parser.add_argument("--cloud", choices=("aws", "azure", "gcp"), help="default: from the nodes")
    parser.add_argument("--kubeconfig", help="default: KUBECONFIG or ~/.kube/config, as kubectl")
    parser.add_argument("--context", help="a kubeconfig context other than the current one")
    args = parser.parse_args(argv)
    reader = read or Kubectl(args.kubeconfig, args.context)
    try:
        view = read_view(reader, args.namespace, args.job, args.cloud)
    except (ApiError, OSError, subprocess.TimeoutExpired) as error:
        print(f"cannot read the cluster: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(render(view, explain(view)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
