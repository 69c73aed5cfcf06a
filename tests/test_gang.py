"""Spot preemptions end in an exact resume of the whole gang, and never in an early "Complete".

The pods run the exact command and arguments of the JobSet the program registers (under mocks,
aws spot pool), as two process groups on this machine; tests/gang.py applies the JobSet's own
rendered failure rules the way Kubernetes and JobSet define them. Each disrupted run must finish
with the same weights and the same evaluation as an uninterrupted run with the same seed.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest
import torch

import yaml

from infra.settings.model.job import Job, PoolChoice, SpotShortage
from tests.gang import Capacity, GangRecord, KueueRules, NodePool, Pod, SimulatedJobSet
from tests.k8s_manifests import clean
from tests.test_workloads import run_workload
from trainer.exit_codes import RESUME
from workloads.command import RENDEZVOUS_JOIN_TIMEOUT_SECONDS

STEPS = 240
SMALL = ["--num_embeddings=500", "--embedding_dim=8", "--dense_arch_layer_sizes=16,8",
         "--over_arch_layer_sizes=16,1", "--batch_size=32", "--eval_batches=2",
         "--log_every=10", "--checkpoint_every=40", "--checkpoint_every_seconds=0",
         f"--max_steps={STEPS}", "--synthetic_steps_per_epoch=100000",
         # gloo here: no EFA to enforce, and CPU-sized messages, not the GPU plateau (8 GiB)
         "--fabric_gate=report", "--fabric_gate_sizes=65536,1048576"]


KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"


def render(job: Job, flavour: str = "aws") -> dict[str, Any]:
    """The job as the program registers it: JobSet spec, container command, args and
    environment; Kueue's rules (its manager configuration, ClusterQueue and ResourceFlavors)
    and the GPU pools' nodes (labels and taints) from the cluster contract."""
    scenario = run_workload(flavour, job)
    container = scenario.container()
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    (release,) = [r for r in scenario.run.of_type("kubernetes:helm.sh/v3:Release")
                  if r.inputs["chart"].endswith("/kueue")]
    config = yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    (queue,) = scenario.run.of_type(f"{KUEUE}:ClusterQueue")
    flavors = {r.inputs["metadata"]["name"]: clean(r.inputs["spec"])
               for r in scenario.run.of_type(f"{KUEUE}:ResourceFlavor")}
    pools = {key: NodePool(key, dict(pool.node_labels),
                           [{"key": t.key, "value": t.value, "effect": t.effect}
                            for t in pool.taints])
             for key, pool in scenario.cluster.contract.gpu_pools.items()}
    return {"jobset": clean(scenario.workload().inputs["spec"]), "command": container["command"],
            "args": container["args"], "env": env,
            "kueue": KueueRules.rendered(config, clean(queue.inputs["spec"]), flavors),
            "pools": pools}


@pytest.fixture(scope="module")
def rendered() -> dict[str, Any]:
    return render(Job(pool=PoolChoice.SPOT))


def gang(rendered: dict[str, Any], workdir: Path, time_scale: float = 1.0,
         extra: Sequence[str] = ()) -> SimulatedJobSet:
    """The rendered pod, with only the model size and the local paths changed (argparse keeps
    the last value of a repeated flag, so these follow the stack's own flags), then ``extra``
    flags."""
    workdir.mkdir(parents=True, exist_ok=True)
    local = [f"--checkpoint_dir={workdir / 'checkpoints'}",
             f"--metrics_file={workdir / 'metrics.jsonl'}",
             f"--tensorboard_dir={workdir / 'tensorboard'}",
             # The stack's bucket copy, to a local folder: no test reaches a real bucket.
             f"--telemetry_dir={workdir / 'telemetry'}"]
    return SimulatedJobSet(rendered["jobset"], rendered["command"],
                           [*rendered["args"], *SMALL, *local, *extra], rendered["env"],
                           namespace="torchrec", name="dlrm", workdir=workdir,
                           time_scale=time_scale)


def records(workdir: Path) -> list[dict[str, Any]]:
    path = workdir / "metrics.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written
            pass
    return out


def wait_for(predicate: Callable[[], bool], pods: list[Pod], timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, SimulatedJobSet.logs(pods)
        assert all(p.exit_code() is None for p in pods), SimulatedJobSet.logs(pods)
        time.sleep(0.05)


def trained_past(workdir: Path, step: int) -> Callable[[], bool]:
    return lambda: any(r.get("event") == "train" and r["step"] >= step for r in records(workdir))


def checkpoint_at_least(workdir: Path, step: int) -> Callable[[], bool]:
    root = workdir / "checkpoints"
    return lambda: any((d / ".metadata").exists() and int(d.name.split("-")[1]) >= step
                       for d in root.glob("step-*")) if root.exists() else False


def final_state(workdir: Path) -> dict[str, torch.Tensor]:
    """The newest checkpoint as one plain state dict (DCP's own offline converter)."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    (newest,) = sorted((d for d in (workdir / "checkpoints").glob("step-*")
                        if (d / ".metadata").exists()),
                       key=lambda d: int(d.name.split("-")[1]))[-1:]
    assert newest.name == f"step-{STEPS}"
    out = workdir / "final.pt"
    dcp_to_torch_save(str(newest), str(out))
    flat: dict[str, torch.Tensor] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item)
        elif isinstance(value, torch.Tensor):
            flat[prefix] = value

    walk("", torch.load(out, weights_only=False))
    return flat


def final_eval(workdir: Path) -> dict[str, float]:
    evals = [r for r in records(workdir) if r.get("event") == "eval" and r["step"] == STEPS]
    assert evals, records(workdir)[-5:]
    return {k: evals[-1][k] for k in ("loss", "auc")}


@pytest.fixture(scope="module")
def uninterrupted(rendered, tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("uninterrupted")
    record = gang(rendered, workdir).run()
    assert record.outcome == "Completed" and record.generations == 1, record
    return workdir


def assert_same_training(workdir: Path, reference: Path) -> None:
    got, want = final_state(workdir), final_state(reference)
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=0, msg=key)
    assert final_eval(workdir) == final_eval(reference)


def assert_resumed_without_using_the_budget(record: GangRecord) -> None:
    assert record.outcome == "Completed", record
    assert record.generations == 2, record
    assert record.actions == ["RestartJobSetAndIgnoreMaxRestarts"], record
    assert record.counted_restarts == 0
    assert not record.early_successes, record


def test_sigterm_on_one_pod_restarts_the_gang_and_matches_an_uninterrupted_run(
        rendered, uninterrupted, tmp_path):
    """A drain of node 1 (the kubelet's SIGTERM to the container's PID 1): every rank agrees
    to stop, saves within the deadline, and exits with the resume status."""
    def drain_node_1(generation: int, pods: list[Pod]) -> None:
        if generation == 0:
            wait_for(trained_past(tmp_path, 60), pods)
            os.kill(pods[1].process.pid, signal.SIGTERM)

    record = gang(rendered, tmp_path).run(drain_node_1)
    assert_resumed_without_using_the_budget(record)
    assert record.exit_codes[0] == {0: RESUME, 1: RESUME}, record  # both saved and asked to resume
    resumed = [r for r in records(tmp_path) if r.get("event") == "message"
               and "resumed from checkpoint" in r.get("text", "")]
    assert resumed or "resumed from checkpoint" in (tmp_path / "dlrm-node-0-0-g1.log").read_text()
    assert_same_training(tmp_path, uninterrupted)


def test_a_lost_node_restarts_the_gang_from_the_newest_periodic_checkpoint(
        rendered, uninterrupted, tmp_path):
    """Node 1 vanishes without notice (SIGKILL, and the pod garbage collector's
    DisruptionTarget condition): the survivor sees its peer gone and asks to resume."""
    def lose_node_1(generation: int, pods: list[Pod]) -> None:
        if generation == 0:
            wait_for(checkpoint_at_least(tmp_path, 40), pods)
            wait_for(trained_past(tmp_path, 100), pods)
            pods[1].conditions.add("DisruptionTarget")
            pods[1].lose_node()

    record = gang(rendered, tmp_path).run(lose_node_1)
    assert_resumed_without_using_the_budget(record)
    assert record.exit_codes[0][1] == 128 + signal.SIGKILL
    assert_same_training(tmp_path, uninterrupted)


def test_preempting_pod_zero_the_rendezvous_host_also_resumes(rendered, uninterrupted, tmp_path):
    """Graceful node shutdown on node 0 (SIGTERM and DisruptionTarget): the rendezvous host is
    gone too, and the new generation forms a new rendezvous."""
    def preempt_node_0(generation: int, pods: list[Pod]) -> None:
        if generation == 0:
            wait_for(trained_past(tmp_path, 60), pods)
            pods[0].conditions.add("DisruptionTarget")
            os.kill(pods[0].process.pid, signal.SIGTERM)

    record = gang(rendered, tmp_path).run(preempt_node_0)
    assert_resumed_without_using_the_budget(record)
    assert_same_training(tmp_path, uninterrupted)


def worker_pids(pod: Pod) -> list[int]:
    workers = pod.worker_pids()
    assert workers, pod
    return workers


def test_an_nccl_watchdog_abort_restarts_the_gang_without_counting_and_matches(
        rendered, uninterrupted, tmp_path):
    """On GPUs a lost peer or a broken link ends a worker by the NCCL watchdog's abort
    (SIGABRT, TORCH_NCCL_ASYNC_ERROR_HANDLING=3), not by an exception: the gang resumes from
    the newest checkpoint and the retry budget is untouched."""
    def abort_a_worker_on_node_1(generation: int, pods: list[Pod]) -> None:
        if generation == 0:
            wait_for(checkpoint_at_least(tmp_path, 40), pods)
            wait_for(trained_past(tmp_path, 60), pods)
            for pid in worker_pids(pods[1]):
                os.kill(pid, signal.SIGABRT)

    record = gang(rendered, tmp_path).run(abort_a_worker_on_node_1)
    assert_resumed_without_using_the_budget(record)
    assert record.exit_codes[0] == {0: RESUME, 1: RESUME}, record
    assert "worker exit codes [-6]: exit 143" in (tmp_path / "dlrm-node-0-1-g0.log").read_text()
    assert_same_training(tmp_path, uninterrupted)


def test_a_gang_whose_peer_pod_never_starts_resumes_after_the_join_timeout(rendered, tmp_path):
    """No capacity for pod 1 (it stays Pending): pod 0 waits the rendezvous's join timeout, then
    exits with the resume status, so waiting for capacity never uses the retry budget; once the
    pod gets a node, the gang forms and trains."""
    # The stack's join timeout (and every other duration) shrunk to 15 s.
    job = gang(rendered, tmp_path, time_scale=15 / RENDEZVOUS_JOIN_TIMEOUT_SECONDS,
               extra=["--max_steps=20"])
    record = job.run(nodes=lambda generation: 1 if generation == 0 else None, timeout=180)
    assert_resumed_without_using_the_budget(record)
    assert record.exit_codes[0] == {0: RESUME, 1: None}, record  # pod 1 never ran
    assert "did not form in time" in (tmp_path / "dlrm-node-0-0-g0.log").read_text()
    assert [r["step"] for r in records(tmp_path) if r.get("event") == "summary"] == [20]


def test_a_crash_is_counted_and_bad_flags_fail_the_job_at_once(tmp_path):
    """The retry budget (job.backoffLimit) is for crashes; a typo in the trainer's flags fails
    everything at once."""
    rendered = render(Job(pool=PoolChoice.SPOT, backoff_limit=1))
    bad = gang(rendered, tmp_path / "bad-flags")
    bad.argv.append("--batch_size=-1")
    record = bad.run(timeout=120)
    assert record.outcome == "Failed" and record.actions == ["FailJobSet"], record
    assert record.generations == 1

    crash = gang(rendered, tmp_path / "crash")
    (tmp_path / "empty").mkdir()
    crash.argv.append(f"--dataset_path={tmp_path / 'empty'}")  # exists, holds no data: it raises
    record = crash.run(timeout=240)
    max_restarts = int(rendered["jobset"]["failurePolicy"]["maxRestarts"])  # mocks send floats
    assert record.outcome == "Failed", record
    assert record.actions == ["RestartJobSet"] * (max_restarts + 1), record
    assert record.counted_restarts == max_restarts + 1


# --- capacity: Kueue's gang admission (workloads/kueue.py), judged by tests/gang.KueueRules ----

# One minute of the stack's durations per real second: Kueue's 30-minute PodsReady timeout on
# p4d takes 30 s here, the 30-minute rendezvous join timeout 30 s, the pod's grace under 2 s.
MINUTE = 1 / 60
# Four minutes per real second, for runs that only wait: a PodsReady timeout takes 7.5 s.
FOUR_MINUTES = 1 / 240


def rendezvous_would_have_timed_out(workdir: Path) -> list[str]:
    return [log.name for log in workdir.glob("*.log")
            if "RendezvousTimeoutError" in log.read_text()
            or "did not form in time" in log.read_text()]


def assert_kueue_acts_before_the_rendezvous(job: SimulatedJobSet, kueue: KueueRules) -> None:
    """The rendered timeouts: Kueue evicts a gang that is not all Ready before torchrun's
    join timeout could end pod 0: Kueue counts from admission (or the loss of readiness),
    torchrun from pod 0's join, which comes after its pod started, so equal ones do."""
    assert kueue.ready_timeout <= job.join_timeout, (kueue.ready_timeout, job.join_timeout)
    assert kueue.recovery_timeout <= job.join_timeout, (kueue.recovery_timeout, job.join_timeout)


def test_spot_capacity_gone_longer_than_the_rendezvous_timeout_then_back_completes_unchanged(
        rendered, uninterrupted, tmp_path):
    """Policy wait: the JobSet is admitted into the spot flavor, but the pool has one node for
    two pods for longer than the rendezvous join timeout. Kueue evicts the gang (pods deleted,
    JobSet suspended) each time its pods are not all Ready within the PodsReady timeout and
    requeues it with backoff; once the second node exists the gang runs from the start. No JobSet
    restart at all, none counted, no rendezvous timeout, the same weights as an uninterrupted
    run."""
    kueue: KueueRules = rendered["kueue"]
    assert [name for name, _ in kueue.flavors] == ["dlrm-spot"]
    job = gang(rendered, tmp_path, time_scale=MINUTE)
    assert_kueue_acts_before_the_rendezvous(job, kueue)
    back = job.join_timeout * 1.2  # gone for longer than the rendezvous timeout

    def spot_nodes(pool: str, now: float) -> int:
        return {"spot": 1 if now < back else 2}.get(pool, 0)

    record = job.run_queued(kueue, rendered["pools"], spot_nodes, timeout=240)
    assert record.outcome == "Completed", record
    assert record.pools and set(record.pools) == {"spot"}, record
    assert record.evictions and {r for _, r in record.evictions} == {"PodsReadyTimeout"}, record
    assert kueue.backoff_limit is None  # the default: requeued without a bound
    for (admitted, _), (evicted, _) in zip(record.admissions, record.evictions):
        assert evicted - admitted >= kueue.ready_timeout, record  # a full node join's time
    assert record.actions == [] and record.counted_restarts == 0, record
    assert not record.early_successes, record
    assert not rendezvous_would_have_timed_out(tmp_path)
    assert_same_training(tmp_path, uninterrupted)


def one_spot_node(pool: str, now: float) -> int:
    return 1 if pool == "spot" else 0


def test_spot_capacity_that_never_comes_back_keeps_the_job_queued_by_default(rendered, tmp_path):
    """The default wait has no bound: Kueue evicts and requeues the gang after each PodsReady
    timeout, with backoff, and keeps doing so; the JobSet is never restarted by its own rules,
    never Failed, and no retry is used. (Watched for three evictions.)"""
    kueue: KueueRules = rendered["kueue"]
    assert kueue.backoff_limit is None
    job = gang(rendered, tmp_path, time_scale=FOUR_MINUTES)
    assert_kueue_acts_before_the_rendezvous(job, kueue)
    record = job.run_queued(kueue, rendered["pools"], one_spot_node, timeout=120,
                            watch_evictions=3)
    assert record.outcome == "Queued", record
    assert [reason for _, reason in record.evictions] == ["PodsReadyTimeout"] * 3, record
    assert len(record.admissions) == 3, record
    gaps = [admitted - evicted for (evicted, _), (admitted, _)
            in zip(record.evictions, record.admissions[1:])]
    assert all(gap >= kueue.requeue_delay(n + 1) for n, gap in enumerate(gaps)), (gaps, record)
    assert record.actions == [] and record.counted_restarts == 0, record
    assert not rendezvous_would_have_timed_out(tmp_path)


def test_spot_capacity_that_never_comes_back_holds_the_job_when_a_bound_is_set(tmp_path):
    """maxWaitMinutes set to one node join (30 minutes on p4d): no requeue fits, so Kueue
    deactivates the Workload at its first PodsReady timeout; the JobSet is suspended with a
    reason, never Failed, no retry used."""
    rendered = render(Job(pool=PoolChoice.SPOT, spot_shortage=SpotShortage(max_wait_minutes=30)))
    kueue: KueueRules = rendered["kueue"]
    assert kueue.backoff_limit == 0
    job = gang(rendered, tmp_path, time_scale=FOUR_MINUTES)
    assert_kueue_acts_before_the_rendezvous(job, kueue)
    record = job.run_queued(kueue, rendered["pools"], one_spot_node, timeout=120)
    assert record.outcome == "Deactivated", record
    assert len(record.evictions) == kueue.backoff_limit + 1, record
    assert record.actions == [] and record.counted_restarts == 0, record
    assert not rendezvous_would_have_timed_out(tmp_path)
