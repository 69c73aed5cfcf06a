"""`python -m workloads.why` end to end: the real kubectl against a fake Kubernetes API server.

The server answers the API paths the command reads (list responses as the API server returns
them, 404 Status objects for what is absent), on 127.0.0.1 only; the kubeconfig points there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import waiting_fixtures as fx
from tests.fake_api import FakeApi, kubeconfig
from tests.fake_api import api_list as _list

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


def why(tmp_path: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(config)}
    return subprocess.run([sys.executable, "-m", "workloads.why", "--namespace", fx.NS,
                           "--job", fx.JOB, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


NS_PATH = f"/api/v1/namespaces/{fx.NS}"
JOBSET = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{fx.NS}/jobsets/{fx.JOB}"
CA_POD = "cluster-autoscaler-aws-cluster-autoscaler-7ff79bc484-pm8g9"


def test_a_pending_gang_on_eks_prints_no_quota_with_the_ec2_words(tmp_path):
    pods = [fx.trainer_pod(i, unschedulable="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
            for i in (0, 1)]
    routes = {
        JOBSET: fx.jobset(),
        f"{NS_PATH}/pods": _list("PodList", pods),
        f"{NS_PATH}/events": _list("EventList", [fx.event(
            "TriggeredScaleUp", "pod triggered scale-up: [{eks-gpu-ondemand-a1b2c3d4 0->2 (max: 2)}]")]),
        "/api/v1/nodes": _list("NodeList", [fx.node("ip-10-0-1-23.ec2.internal", provider="aws:///us-east-1a/i-0abc")]),
        "/api/v1/namespaces/kube-system/events?fieldSelector=involvedObject.name%3Dcluster-autoscaler-status":
            _list("EventList", [fx.event("ScaleUpFailed", fx.AWS_PLACEHOLDER, kind="ConfigMap",
                                         on="cluster-autoscaler-status", namespace="kube-system")]),
        "/api/v1/namespaces/kube-system/pods?labelSelector=app.kubernetes.io%2Fname%3Daws-cluster-autoscaler":
            _list("PodList", [{"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": CA_POD, "namespace": "kube-system"}}]),
        f"/api/v1/namespaces/kube-system/pods/{CA_POD}/log?sinceSeconds=3600": fx.AWS_VCPU + "\n",
    }
    with FakeApi(routes) as api:
        done = why(tmp_path, kubeconfig(tmp_path, api.url))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == ("dlrm (torchrec): no quota: the cloud refused a new on-demand "
                        "GPU node because the account's quota is used up")
    assert lines[1].startswith("  evidence: W1126") and "vCPU limit of 0" in lines[1]
    assert lines[2].startswith('  next step: request quota "Running On-Demand P instances" (L-417A185B): '
                               'aws service-quotas')
    assert "L-417A185B" in lines[2]
    # Kueue is not installed here: both API versions were asked, and their absence is no error.
    assert f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{fx.NS}/workloads" in api.requests
    assert f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{fx.NS}/workloads" in api.requests


def test_the_autoscaler_log_is_read_by_time_and_from_the_container_before_a_restart(tmp_path):
    """The EC2 words logged before the autoscaler restarted are only in the previous container's
    log; the last hour of both is read, not a line count."""
    pods = [fx.trainer_pod(i, unschedulable="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
            for i in (0, 1)]
    log = f"/api/v1/namespaces/kube-system/pods/{CA_POD}/log"
    routes = {
        JOBSET: fx.jobset(),
        f"{NS_PATH}/pods": _list("PodList", pods),
        f"{NS_PATH}/events": _list("EventList", []),
        "/api/v1/nodes": _list("NodeList", [fx.node("ip-10-0-1-23.ec2.internal", provider="aws:///us-east-1a/i-0abc")]),
        "/api/v1/namespaces/kube-system/pods?labelSelector=app.kubernetes.io%2Fname%3Daws-cluster-autoscaler":
            _list("PodList", [{"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": CA_POD, "namespace": "kube-system"},
                               "status": {"containerStatuses": [
                                   {"name": "aws-cluster-autoscaler", "restartCount": 1}]}}]),
        f"{log}?previous=true&sinceSeconds=3600": fx.AWS_ICE + "\n",
        f"{log}?sinceSeconds=3600": "I1126 10:30:00.1 1 static_autoscaler.go:300] Starting main loop\n",
    }
    with FakeApi(routes) as api:
        done = why(tmp_path, kubeconfig(tmp_path, api.url))
    assert done.returncode == 0, done.stderr
    assert "no capacity" in done.stdout and "InsufficientInstanceCapacity" in done.stdout
    assert not any("tailLines" in r for r in api.requests)


def test_the_eks_autoscaler_logs_at_v1_so_its_warnings_stay_within_reach():
    """The chart's default is v=4 (values.yaml extraArgs.v); the scaling-failure line is a
    warning, logged at any level."""
    from infra.aws.autoscaler import values

    args = values("c", "us-east-1", "1.33", "arn:aws:iam::123456789012:role/ca",
                  {"torchrec-cloud/pool": "system"})["extraArgs"]
    assert args["v"] == 1


def test_a_gang_held_by_kueue_prints_its_condition(tmp_path):
    reserved = fx.condition("QuotaReserved", "False", "ExceedsMaxQuota", fx.KUEUE_MAX)
    routes = {
        JOBSET: fx.jobset(suspend=True, queue="training"),
        f"{NS_PATH}/pods": _list("PodList", []),
        f"{NS_PATH}/events": _list("EventList", []),
        f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{fx.NS}/workloads":
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadList", "metadata": {},
             "items": [fx.kueue_workload(reserved)]},
        "/api/v1/nodes": _list("NodeList", [fx.node("gke-torchrec-system-1a2b")]),
    }
    with FakeApi(routes) as api:
        done = why(tmp_path, kubeconfig(tmp_path, api.url), "--cloud", "gcp")
    assert done.returncode == 0, done.stderr
    assert "waiting for admission" in done.stdout
    assert "Workload/jobset-dlrm-3c9a1 QuotaReserved=False (ExceedsMaxQuota)" in done.stdout
    assert not any("aws-cluster-autoscaler" in r for r in api.requests)  # --cloud gcp: no EKS log read


def test_an_unreachable_cluster_is_a_clear_error(tmp_path):
    with FakeApi({}) as api:
        url = api.url
    done = why(tmp_path, kubeconfig(tmp_path, url))
    assert done.returncode == 2
    assert done.stderr.startswith("cannot read the cluster: kubectl")
