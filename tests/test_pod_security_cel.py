"""Where the fabric makes the job's namespace enforce Pod Security `privileged` (AKS InfiniBand,
GKE GPUDirect TCPX/TCPXO), the stack's ValidatingAdmissionPolicy puts `baseline` back but for
the fabric's own exceptions (issue 33 item 5). Evaluated with a CEL interpreter (PyPI
cel-python) on the expressions the stack registers, against the training pod it renders and
against hostile pods in the same namespace.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.settings.model.job import Job
from tests.test_workloads import WorkloadRun, run_workload

celpy = pytest.importorskip("celpy", reason="cel-python is in requirements-dev.txt")
from tests import cel  # noqa: E402 (after the skip: it imports celpy)

POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
FABRICS = ("azure-ib", "gcp-a3", "gcp-a3-mega")


@pytest.fixture(scope="module")
def runs() -> dict[str, WorkloadRun]:
    return {name: run_workload(name, Job()) for name in (*FABRICS, "gcp")}


def policy_spec(scenario: WorkloadRun) -> dict[str, Any]:
    (found,) = [p for p in scenario.run.of_type(POLICY) if "fabric-pod-security" in p.name]
    return found.inputs["spec"]


def refusals(spec: dict[str, Any], pod: dict[str, Any]) -> list[str]:
    """The messages of the validations that fail (empty: admitted), as the API server judges."""
    return cel.refusals(spec, pod)


def training_pod(scenario: WorkloadRun) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dlrm-node-0-0"},
            "spec": copy.deepcopy(scenario.pod_spec())}


def trainer_of(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["spec"]["containers"][0]


@pytest.mark.parametrize("fabric", FABRICS)
def test_the_training_pod_itself_is_admitted(runs, fabric) -> None:
    assert refusals(policy_spec(runs[fabric]), training_pod(runs[fabric])) == []


@pytest.mark.parametrize("fabric", FABRICS)
def test_the_policy_is_bound_to_the_job_namespace_alone_and_the_job_waits_for_it(runs, fabric):
    scenario = runs[fabric]
    (binding,) = [b for b in scenario.run.of_type(BINDING) if "fabric-pod-security" in b.name]
    assert binding.inputs["spec"]["validationActions"] == ["Deny"]
    assert binding.inputs["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["torchrec"]}]
    assert scenario.run.waits_for(scenario.workload(), binding)
    assert policy_spec(scenario)["failurePolicy"] == "Fail"


def _privileged(pod):
    trainer_of(pod)["securityContext"]["privileged"] = True


def _host_network(pod):
    pod["spec"]["hostNetwork"] = True


def _host_pid(pod):
    pod["spec"]["hostPID"] = True


def _host_root(pod):
    pod["spec"]["volumes"].append({"name": "root", "hostPath": {"path": "/"}})


def _sys_admin(pod):
    trainer_of(pod)["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN"]


def _net_admin_in_the_trainer(pod):
    trainer_of(pod)["securityContext"]["capabilities"]["add"] = ["NET_ADMIN"]


def _extra_container_with_the_fabric_s_capability(pod):
    pod["spec"]["containers"].append({"name": "miner", "image": "evil:1", "securityContext": {
        "capabilities": {"add": ["NET_ADMIN", "SYS_RESOURCE", "IPC_LOCK"]}}})


def _host_port(pod):
    trainer_of(pod)["ports"] = [{"containerPort": 22, "hostPort": 22}]


def _unconfined(pod):
    pod["spec"]["securityContext"] = {"seccompProfile": {"type": "Unconfined"}}


def _unmasked_proc(pod):
    trainer_of(pod)["securityContext"]["procMount"] = "Unmasked"


def _privileged_ephemeral(pod):
    pod["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox",
                                           "securityContext": {"privileged": True}}]


HOSTILE = [_privileged, _host_network, _host_pid, _host_root, _sys_admin,
           _net_admin_in_the_trainer, _extra_container_with_the_fabric_s_capability, _host_port,
           _unconfined, _unmasked_proc, _privileged_ephemeral]


@pytest.mark.parametrize("fabric", FABRICS)
@pytest.mark.parametrize("edit", HOSTILE, ids=[f.__name__.strip("_") for f in HOSTILE])
def test_what_baseline_refuses_is_refused_but_for_the_fabric_s_exceptions(runs, fabric, edit):
    pod = training_pod(runs[fabric])
    edit(pod)
    assert refusals(policy_spec(runs[fabric]), pod), f"{fabric}: {edit.__name__} admitted"


def test_each_fabric_holds_exactly_its_exceptions(runs) -> None:
    """AKS InfiniBand: SYS_RESOURCE for the trainer (to raise RLIMIT_MEMLOCK), no host path;
    TCPX: the node's lib64, /sys, /proc/sys, IPC_LOCK for the trainer, NET_ADMIN for the rxdm;
    TCPXO: the same paths and /dev/aperture_devices, NET_ADMIN for the rxdm only."""
    messages = {name: " | ".join(r["message"] for r in policy_spec(runs[name])["validations"])
                for name in FABRICS}
    assert "but for the fabric's: none" in messages["azure-ib"]  # no host path at all
    assert "trainer: SYS_RESOURCE" in messages["azure-ib"]
    assert "NET_ADMIN" not in messages["azure-ib"]
    assert "tcpx-daemon: NET_ADMIN" in messages["gcp-a3"]
    assert "trainer: IPC_LOCK" in messages["gcp-a3"]
    assert "tcpxo-daemon: NET_ADMIN" in messages["gcp-a3-mega"]
    assert "trainer:" not in messages["gcp-a3-mega"]
    assert "/dev/aperture_devices" in messages["gcp-a3-mega"]
    assert "/home/kubernetes/bin/nvidia/lib64" in messages["gcp-a3-mega"]
    assert "/home/kubernetes/bin/nvidia," not in messages["gcp-a3-mega"]  # not the whole folder


def test_namespaces_enforce_the_lowest_level_the_fabric_allows(runs) -> None:
    levels = {name: runs[name].run.one("kubernetes:core/v1:Namespace")
              .inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
              for name in runs}
    assert levels == {"azure-ib": "privileged", "gcp-a3": "privileged",
                      "gcp-a3-mega": "privileged", "gcp": "baseline"}
    assert not [b for b in runs["gcp"].run.of_type(BINDING)  # baseline: PSA itself judges
                if "fabric-pod-security" in b.name]
