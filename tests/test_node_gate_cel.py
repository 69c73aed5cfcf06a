"""The fabric gate's node policy, evaluated by a CEL interpreter (PyPI cel-python, `celpy`) on
the expressions the stack registers (issue 33 item 5): the job's account may add or remove its
one taint on a GPU node, and change nothing else of any node.

Kubernetes runs a ValidatingAdmissionPolicy's validations in CEL with `object` (the node as
written) and `oldObject` (as it was); a write is admitted when every validation is true.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainer.node_taint import TAINT_KEY, TAINT_VALUE

celpy = pytest.importorskip("celpy", reason="cel-python is in requirements-dev.txt")
from tests import cel  # noqa: E402 (after the skip: it imports celpy)

POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
GPU_LABELS = {"eks.amazonaws.com/nodegroup": "gpu"}  # tests/fake_cluster.py, flavour aws
OURS = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def policy() -> dict[str, Any]:
    from tests.test_workloads import Job, run_workload

    (found,) = run_workload("aws", Job()).run.of_type(POLICY)
    return found.inputs["spec"]


def node(labels: dict[str, str] | None = None, taints: list[dict] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "ip-10-0-1-1", "labels": dict(GPU_LABELS if labels is None else labels),
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"providerID": "aws:///us-east-1a/i-0abc",
                     "taints": list([GPU_TAINT] if taints is None else taints)}}


def refusals(spec: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The messages of the validations that fail (empty: admitted), as the API server judges."""
    return cel.refusals(spec, new, old)


def changed(old: dict[str, Any], edit) -> dict[str, Any]:  # noqa: ANN001 (a function of the copy)
    new = copy.deepcopy(old)
    edit(new)
    return new


def test_the_policy_judges_the_jobs_account_only(policy) -> None:
    env = celpy.Environment()
    (condition,) = policy["matchConditions"]
    matches = env.program(env.compile(condition["expression"]))
    user = lambda name: {"request": celpy.json_to_cel({"userInfo": {"username": name}})}  # noqa: E731
    assert matches.evaluate(user("system:serviceaccount:torchrec:trainer"))
    assert not matches.evaluate(user("system:node:ip-10-0-1-1"))


def test_adding_and_removing_its_own_taint_on_a_gpu_node_is_admitted(policy) -> None:
    old = node()
    tainted = changed(old, lambda n: n["spec"]["taints"].append(dict(OURS)))
    assert refusals(policy, old, tainted) == []
    assert refusals(policy, tainted, old) == []  # lifting it again


HOSTILE = {
    "another taint": lambda n: n["spec"]["taints"].append(
        {"key": "dedicated", "value": "mine", "effect": "NoSchedule"}),
    "the cloud's own taint lifted": lambda n: n["spec"].update(taints=[dict(OURS)]),
    "its taint with another value": lambda n: n["spec"]["taints"].append(dict(OURS, value="x")),
    "its taint as NoExecute": lambda n: n["spec"]["taints"].append(dict(OURS, effect="NoExecute")),
    "a label": lambda n: n["metadata"]["labels"].update({"team": "mine"}),
    "an annotation": lambda n: n["metadata"]["annotations"].update({"x": "y"}),
    "a finalizer": lambda n: n["metadata"].update(finalizers=["example.com/keep"]),
    "an owner reference": lambda n: n["metadata"].update(ownerReferences=[{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1"}]),
    "a cordon": lambda n: n["spec"].update(unschedulable=True),
}


@pytest.mark.parametrize("what", list(HOSTILE))
def test_any_other_change_to_a_gpu_node_is_refused(policy, what) -> None:
    old = node()
    new = changed(old, lambda n: (n["spec"]["taints"].append(dict(OURS)), HOSTILE[what](n)))
    assert refusals(policy, old, new), f"{what} was admitted"


def test_a_system_node_may_not_be_tainted_at_all(policy) -> None:
    old = node(labels={"eks.amazonaws.com/nodegroup": "system"}, taints=[])
    new = changed(old, lambda n: n["spec"]["taints"].append(dict(OURS)))
    assert "may taint GPU nodes only" in " ".join(refusals(policy, old, new))
    # ... nor made to look like a GPU node by the same write
    relabelled = changed(new, lambda n: n["metadata"]["labels"].update(GPU_LABELS))
    assert refusals(policy, old, relabelled)
