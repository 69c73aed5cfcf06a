"""GPU utilisation per node, read as `status` reads it: the real kubectl (`get --raw`, the
workloads/why.py Kubectl reader) against a fake Kubernetes API on 127.0.0.1 that lists the
exporter pods and answers each pod's proxy path with dcgm-exporter's own output.

The /metrics bodies follow dcgm-exporter 4.5.3-4.8.2 exactly: its HELP/TYPE lines (README.md,
the chart's default counters) and its sample line template (internal/pkg/rendermetrics/
render_metrics.go: gpu, UUID, pci_bus_id, device, modelName, Hostname, then the DRIVER_VERSION
label field and the pod attributes), with the figures of an 8-GPU H100 node.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from infra.dcgm import EXPORTERS, NOT_PROXIED
from tests.fake_api import Answer, forbidden
from tests.test_why import FakeApi, kubeconfig
from torchrec_cloud.gpu_metrics import parse, read_gpu_utilisation

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")

NODE_A = "ip-10-0-1-23.ec2.internal"
NODE_B = "ip-10-0-1-87.ec2.internal"
TRAINER = {"container": "trainer", "namespace": "torchrec", "pod": "dlrm-workers-0-0-x7k2p"}


def exporter_output(node: str, utilisation: list[float | int], node_label: str = "Hostname",
                    pods: dict[str, str] | None = None) -> str:
    """A dcgm-exporter /metrics body for one node, one line per GPU per counter."""
    counters = [
        ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "gauge", [1980] * 8),
        ("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", "gauge",
         [9223372036854775794] * 8),  # the README's "blank" value: H100 has no such sensor
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge", utilisation),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "gauge", [61234] * 8),
    ]
    lines = []
    for name, help_text, kind, values in counters:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for gpu, value in enumerate(values):
            attributes = "".join(f',{k}="{v}"' for k, v in (pods or {}).items())
            lines.append(
                f'{name}{{gpu="{gpu}",UUID="GPU-5c1b2d3e-0000-4a5b-8c9d-00000000000{gpu}",'
                f'pci_bus_id="00000000:{0x18 + 0x10 * gpu:02X}:00.0",device="nvidia{gpu}",'
                f'modelName="NVIDIA H100 80GB HBM3",{node_label}="{node}",'
                f'DCGM_FI_DRIVER_VERSION="570.172.08"{attributes}}} {value}')
    return "\n".join(lines) + "\n"


IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"


def _pod(name: str, node: str | None, phase: str = "Running", ready: bool = True,
         container: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    """An exporter pod as the API returns it: its Ready condition and its container's status
    (core/v1 PodStatus); `container` replaces the running one (`exporter`, the chart's name)."""
    state = container or {"name": "exporter", "image": IMAGE, "ready": ready, "restartCount": 0,
                          "started": True, "state": {"running": {"startedAt": "2026-11-26T10:02:11Z"}}}
    conditions = [{"type": "PodScheduled", "status": "True"},
                  {"type": "Ready", "status": "True" if ready else "False"}]
    return {"metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"nodeName": node} if node else {},
            "status": {"phase": phase, "conditions": conditions, "containerStatuses": [state],
                       **status}}


def _pod_list(*pods: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "4711"},
            "items": list(pods)}


def _pods_path(cloud: str) -> str:
    exporter = EXPORTERS[cloud]
    selector = exporter.pod_selector.replace("/", "%2F").replace("=", "%3D")
    return f"/api/v1/namespaces/{exporter.namespace}/pods?labelSelector={selector}"


def _proxy(cloud: str, pod: str) -> str:
    exporter = EXPORTERS[cloud]
    return f"/api/v1/namespaces/{exporter.namespace}/pods/{pod}:{exporter.port}/proxy/metrics"


def _kubectl(tmp_path: Path, api: FakeApi):
    from workloads.why import Kubectl

    return Kubectl(kubeconfig=str(kubeconfig(tmp_path, api.url)))


def test_each_gpu_nodes_utilisation_is_the_mean_of_its_gpus_through_the_pod_proxy(tmp_path):
    """Two GPU nodes, each with its exporter pod: a busy one (the trainer's gang) and an idle
    one. The Service would answer for one pod per request; the pod proxy reads both."""
    busy = [97, 95, 99, 96, 98, 94, 97, 96]
    routes = {
        _pods_path("aws"): _pod_list(_pod("dcgm-exporter-4xq8m", NODE_A),
                                     _pod("dcgm-exporter-9wlr2", NODE_B)),
        _proxy("aws", "dcgm-exporter-4xq8m"): exporter_output(NODE_A, busy, pods=TRAINER),
        _proxy("aws", "dcgm-exporter-9wlr2"): exporter_output(NODE_B, [0] * 8),
    }
    with FakeApi(routes) as api:
        result = read_gpu_utilisation(_kubectl(tmp_path, api), "aws")
    assert result.per_node == {NODE_A: pytest.approx(sum(busy) / 8), NODE_B: 0.0}
    assert result.reason == ""
    # The exact paths kubectl sent (the fake also answers a path without its query).
    assert ("/api/v1/namespaces/kube-system/pods?labelSelector=app.kubernetes.io%2Fname%3D"
            "dcgm-exporter") in api.requests
    assert "/api/v1/namespaces/kube-system/pods/dcgm-exporter-4xq8m:9400/proxy/metrics" in api.requests


def test_the_node_comes_from_the_newer_lowercase_label_and_blank_values_are_not_readings(
        tmp_path):
    """After 4.8.2 the exporter writes `hostname` (NVIDIA/dcgm-exporter #655); a GPU whose
    value is DCGM's blank sentinel counts for nothing, not for 9.2e18 percent."""
    values: list[float | int] = [80, 90, 9223372036854775794, 70, 80, 90, 70, 80]
    routes = {
        _pods_path("azure"): _pod_list(_pod("nvidia-dcgm-exporter-tk2zx", "aks-gpu-12345678-vmss000000")),
        _proxy("azure", "nvidia-dcgm-exporter-tk2zx"):
            exporter_output("aks-gpu-12345678-vmss000000", values, node_label="hostname"),
    }
    with FakeApi(routes) as api:
        per_node = read_gpu_utilisation(_kubectl(tmp_path, api), "azure").per_node
    assert per_node == {"aks-gpu-12345678-vmss000000": pytest.approx(80.0)}
    # The GPU Operator's exporter, in its own namespace, with its own label.
    assert ("/api/v1/namespaces/gpu-operator/pods?labelSelector=app%3Dnvidia-dcgm-exporter"
            in api.requests)


def test_no_gpu_node_yet_says_so_instead_of_a_figure(tmp_path):
    """GPU pools scale from zero: before the gang's nodes come up there is no exporter pod."""
    routes = {_pods_path("aws"): _pod_list()}
    with FakeApi(routes) as api:
        result = read_gpu_utilisation(_kubectl(tmp_path, api), "aws")
    assert result.per_node is None
    assert result.reason == ("no DCGM exporter pod in kube-system (app.kubernetes.io/name="
                             "dcgm-exporter): no GPU node is up yet")
    assert not [r for r in api.requests if "/proxy/" in r]


def test_an_exporter_that_cannot_pull_its_image_is_named_with_the_kubelets_reason(tmp_path):
    """`pulumi up` does not wait for the exporter, so status is where a broken one shows: a pod
    stuck Pending on a GPU node that is up says ImagePullBackOff, not "no GPU node is up"."""
    pulling = _pod("dcgm-exporter-4xq8m", NODE_A, phase="Pending", ready=False, container={
        "name": "exporter", "image": IMAGE, "imageID": "", "ready": False, "restartCount": 0,
        "started": False, "lastState": {},
        "state": {"waiting": {"reason": "ImagePullBackOff",
                              "message": f'Back-off pulling image "{IMAGE}"'}}})
    routes = {_pods_path("aws"): _pod_list(pulling)}
    with FakeApi(routes) as api:
        result = read_gpu_utilisation(_kubectl(tmp_path, api), "aws")
    assert result.per_node is None
    assert result.reason == (f"no DCGM exporter pod is ready: dcgm-exporter-4xq8m (on {NODE_A}): "
                             "exporter ImagePullBackOff")
    assert not [r for r in api.requests if "/proxy/" in r]


def test_a_crash_looping_exporter_shows_its_restarts_and_last_words_and_the_others_still_read(
        tmp_path):
    """Running but not ready (CrashLoopBackOff): it is not read through the proxy; its restarts
    and the last line of its termination message (FallbackToLogsOnError: the log's tail) are
    what the user needs; the ready node's figure still comes."""
    crashing = _pod("dcgm-exporter-9wlr2", NODE_B, ready=False, container={
        "name": "exporter", "image": IMAGE, "ready": False, "restartCount": 7, "started": False,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting "
                              "failed container=exporter pod=dcgm-exporter-9wlr2_kube-system"}},
        "lastState": {"terminated": {
            "exitCode": 1, "reason": "Error", "startedAt": "2026-11-26T11:50:02Z",
            "finishedAt": "2026-11-26T11:50:04Z",
            "message": 'time=2026-11-26T11:50:03Z level=INFO msg="Starting dcgm-exporter"\n'
                       'time=2026-11-26T11:50:04Z level=ERROR msg="Error starting nv-hostengine"'
                       ' error="DCGM initialization error"\n'}}})
    routes = {
        _pods_path("aws"): _pod_list(_pod("dcgm-exporter-4xq8m", NODE_A), crashing),
        _proxy("aws", "dcgm-exporter-4xq8m"): exporter_output(NODE_A, [50] * 8),
    }
    with FakeApi(routes) as api:
        result = read_gpu_utilisation(_kubectl(tmp_path, api), "aws")
    assert result.per_node == {NODE_A: 50.0}
    assert result.reason == (
        f"dcgm-exporter-9wlr2 (on {NODE_B}): exporter CrashLoopBackOff, 7 restarts, last exit: "
        'time=2026-11-26T11:50:04Z level=ERROR msg="Error starting nv-hostengine" '
        'error="DCGM initialization error"')
    assert _proxy("aws", "dcgm-exporter-9wlr2") not in api.requests
    # Without a message (the chart's default terminationMessagePolicy: File), how it ended.
    crashing["status"]["containerStatuses"][0]["lastState"]["terminated"].pop("message")
    routes[_pods_path("aws")] = _pod_list(crashing)
    with FakeApi(routes) as api:
        result = read_gpu_utilisation(_kubectl(tmp_path, api), "aws")
    assert result.per_node is None
    assert result.reason.endswith("exporter CrashLoopBackOff, 7 restarts, last exit: Error (exit code 1)")


def test_an_exporter_pod_not_on_a_node_yet_says_why_the_scheduler_left_it(tmp_path):
    """A DaemonSet pod waits for the scheduler like any other (its node affinity names the
    node): the PodScheduled condition's words, not a GPU figure, not a crash."""
    unscheduled = _pod("nvidia-dcgm-exporter-tk2zx", None, phase="Pending", ready=False,
                       conditions=[{"type": "PodScheduled", "status": "False",
                                    "reason": "Unschedulable", "message": "0/3 nodes are "
                                    "available: 1 Too many pods, 2 node(s) didn't match Pod's "
                                    "node affinity/selector."}])
    del unscheduled["status"]["containerStatuses"]
    routes = {_pods_path("azure"): _pod_list(unscheduled)}
    with FakeApi(routes) as api:
        result = read_gpu_utilisation(_kubectl(tmp_path, api), "azure")
    assert result.per_node is None
    assert result.reason == ("no DCGM exporter pod is ready: nvidia-dcgm-exporter-tk2zx (not on "
                             "a node): Unschedulable: 0/3 nodes are available: 1 Too many pods, "
                             "2 node(s) didn't match Pod's node affinity/selector.")


def test_a_gpu_operator_exporter_waiting_for_its_validation_says_so():
    """The GPU Operator's exporter (Azure) starts after its init container `toolkit-validation`
    sees the container toolkit: until then the init container is named, not a crash."""
    waiting = _pod("nvidia-dcgm-exporter-tk2zx", "aks-gpu-12345678-vmss000000", phase="Pending",
                   ready=False, container={"name": "nvidia-dcgm-exporter", "ready": False,
                                           "restartCount": 0, "state": {"waiting": {
                                               "reason": "PodInitializing"}}},
                   initContainerStatuses=[{"name": "toolkit-validation", "ready": False,
                                           "restartCount": 0, "state": {"running": {
                                               "startedAt": "2026-11-26T10:01:40Z"}}}])
    asked: list[str] = []
    result = read_gpu_utilisation(
        lambda path: asked.append(path) or json.dumps(_pod_list(waiting)), "azure")
    assert result.per_node is None
    assert result.reason == ("no DCGM exporter pod is ready: nvidia-dcgm-exporter-tk2zx (on "
                             "aks-gpu-12345678-vmss000000): init container toolkit-validation "
                             "running, not ready / nvidia-dcgm-exporter PodInitializing")
    assert len(asked) == 1  # the pod list only: nothing is read through a proxy


def test_a_node_whose_exporter_does_not_answer_is_named_and_the_others_still_read(tmp_path):
    """The proxy answers 404 for an exporter pod that just went away (a preempted spot node)."""
    routes = {
        _pods_path("aws"): _pod_list(_pod("dcgm-exporter-4xq8m", NODE_A),
                                     _pod("dcgm-exporter-9wlr2", NODE_B)),
        _proxy("aws", "dcgm-exporter-4xq8m"): exporter_output(NODE_A, [50] * 8),
    }
    with FakeApi(routes) as api:
        result = read_gpu_utilisation(_kubectl(tmp_path, api), "aws")
    assert result.per_node == {NODE_A: 50.0}
    assert result.reason == (f"{NODE_B}: NotFound "
                             f"{_proxy('aws', 'dcgm-exporter-9wlr2')}")


def test_exporters_are_read_at_once_and_a_hanging_one_costs_one_bounded_wait(tmp_path,
                                                                               monkeypatch):
    """Two exporters answer only once both requests have arrived (read one after the other,
    the first would give up waiting for the second); a third, on a node going away, never
    answers: it is named, and `status` waits one bound for it, not kubectl's default."""
    import torchrec_cloud.gpu_metrics as gpu_metrics

    monkeypatch.setattr(gpu_metrics, "PROXY_TIMEOUT_S", 2)
    together = threading.Barrier(2, timeout=20)
    released = threading.Event()
    node_c = "ip-10-0-1-99.ec2.internal"
    routes = {
        _pods_path("aws"): _pod_list(_pod("dcgm-exporter-4xq8m", NODE_A),
                                     _pod("dcgm-exporter-9wlr2", NODE_B),
                                     _pod("dcgm-exporter-zz9k1", node_c)),
        _proxy("aws", "dcgm-exporter-4xq8m"):
            Answer(exporter_output(NODE_A, [60] * 8), first=together.wait),
        _proxy("aws", "dcgm-exporter-9wlr2"):
            Answer(exporter_output(NODE_B, [20] * 8), first=together.wait),
        _proxy("aws", "dcgm-exporter-zz9k1"):
            Answer(exporter_output(node_c, [0] * 8), first=lambda: released.wait(60)),
    }
    try:
        with FakeApi(routes) as api:
            started = time.monotonic()
            result = read_gpu_utilisation(_kubectl(tmp_path, api), "aws")
            took = time.monotonic() - started
    finally:
        released.set()
    assert result.per_node == {NODE_A: 60.0, NODE_B: 20.0}
    assert result.reason.startswith(f"{node_c}: kubectl ")
    assert "--request-timeout=2s" in result.reason
    assert took < 2 * 2 + 10, took  # one bound (plus kubectl's start), not three, not 60 s


def test_a_user_without_the_pod_proxy_permission_is_told_which_one(tmp_path):
    """EKS access entries or Azure RBAC may let a user list pods but not use the pod proxy:
    the 403 becomes the permission to ask for, once, not a kubectl error per node."""
    routes = {
        _pods_path("aws"): _pod_list(_pod("dcgm-exporter-4xq8m", NODE_A),
                                     _pod("dcgm-exporter-9wlr2", NODE_B)),
        _proxy("aws", "dcgm-exporter-4xq8m"):
            forbidden("get", "pods/proxy", "kube-system", "dcgm-exporter-4xq8m"),
        _proxy("aws", "dcgm-exporter-9wlr2"):
            forbidden("get", "pods/proxy", "kube-system", "dcgm-exporter-9wlr2"),
    }
    with FakeApi(routes) as api:
        result = read_gpu_utilisation(_kubectl(tmp_path, api), "aws")
    assert result.per_node is None
    assert result.reason == ("your Kubernetes user may not get pods/proxy in kube-system: "
                             "`status` needs `list pods` and `get pods/proxy` there (a Role on "
                             "resources pods and pods/proxy)")


def test_a_user_who_may_not_list_the_exporter_pods_is_told_so(tmp_path):
    routes = {_pods_path("azure"): forbidden("list", "pods", "gpu-operator")}
    with FakeApi(routes) as api:
        result = read_gpu_utilisation(_kubectl(tmp_path, api), "azure")
    assert result.per_node is None
    assert result.reason.startswith("your Kubernetes user may not list pods in gpu-operator: ")
    assert not [r for r in api.requests if "/proxy/" in r]


def test_an_unreachable_cluster_is_a_reason_not_a_crash(tmp_path):
    with FakeApi({}) as api:
        url = api.url
    from workloads.why import Kubectl

    result = read_gpu_utilisation(Kubectl(kubeconfig=str(kubeconfig(tmp_path, url))), "aws")
    assert result.per_node is None
    assert result.reason.startswith("cannot list the DCGM exporter pods in kube-system: kubectl")


def test_on_gke_the_metrics_are_in_cloud_monitoring_and_nothing_is_read():
    asked: list[str] = []
    result = read_gpu_utilisation(lambda path: asked.append(path) or "", "gcp")
    assert result.per_node is None and result.reason == NOT_PROXIED["gcp"]
    assert "Cloud Monitoring" in result.reason and "DCGM_FI_DEV_GPU_UTIL" in result.reason
    assert asked == []


def test_the_gke_reason_holds_the_control_plane_cannot_reach_an_exporter_port():
    """Why GKE is not read through the pod proxy: the private control plane reaches the nodes
    only on 443, 10250 and the webhook ports (infra/gcp/network.py), none of them 9400."""
    from infra.dcgm import METRICS_PORT
    from infra.webhooks import webhook_ports

    assert METRICS_PORT not in {443, 10250, *webhook_ports()}
    assert "gke-managed-system" in NOT_PROXIED["gcp"]
    assert "443, 10250 and the webhook ports" in NOT_PROXIED["gcp"]


def test_the_parser_reads_escapes_spaced_labels_and_timestamps():
    """The exposition format's escapes (\\\\, \\", \\n), the README's `gpu="0", UUID=...`
    spacing, a label-less sample and an optional timestamp."""
    text = ('# HELP x y\n'
            'DCGM_FI_DEV_GPU_UTIL{gpu="0", UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"} 139\n'
            'm{a="q\\"uote",b="back\\\\slash",c="new\\nline"} 1.5 1700000000000\n'
            'up 1\n')
    samples = list(parse(text))
    assert samples[0].labels == {"gpu": "0", "UUID": "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"}
    assert samples[1].labels == {"a": 'q"uote', "b": "back\\slash", "c": "new\nline"}
    assert (samples[1].value, samples[2].name, samples[2].labels) == (1.5, "up", {})
    with pytest.raises(ValueError, match="line 2"):
        list(parse("ok 1\nnot a sample line\n"))


@pytest.mark.parametrize("module", ["torchrec_cloud.gpu_metrics", "torchrec_cloud.status",
                                    "torchrec_cloud.logs", "torchrec_cloud.tensorboard"])
def test_the_laptop_commands_load_no_pulumi(module):
    """`status`, `logs` and `tensorboard` run on a laptop without the stack's SDKs loaded
    (torchrec_cloud/__main__.py; workloads/__init__.py imports its component lazily)."""
    code = (f"import sys, {module}; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'pulumi')))")
    done = subprocess.run([sys.executable, "-c", "import json; " + code], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
