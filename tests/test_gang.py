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

from infra.settings.model import Job, PoolChoice
from tests.gang import GangRecord, Pod, SimulatedJobSet
from tests.test_workloads import run_workload
from trainer.exit_codes import RESUME

STEPS = 240
SMALL = ["--num_embeddings=500", "--embedding_dim=8", "--dense_arch_layer_sizes=16,8",
         "--over_arch_layer_sizes=16,1", "--batch_size=32", "--eval_batches=2",
         "--log_every=10", "--checkpoint_every=40", "--checkpoint_every_seconds=0",
         f"--max_steps={STEPS}", "--synthetic_steps_per_epoch=100000",
         # gloo here: no EFA to enforce, and CPU-sized messages, not the GPU plateau (8 GiB)
         "--fabric_gate=report", "--fabric_gate_sizes=65536,1048576"]


def render(job: Job) -> dict[str, Any]:
    """The job as the program registers it (aws flavour): JobSet spec, container command,
    args and environment."""
    scenario = run_workload("aws", job)
    container = scenario.container()
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    return {"jobset": scenario.workload().inputs["spec"], "command": container["command"],
            "args": container["args"], "env": env}


@pytest.fixture(scope="module")
def rendered() -> dict[str, Any]:
    return render(Job(pool=PoolChoice.SPOT))


def gang(rendered: dict[str, Any], workdir: Path, extra: Sequence[str] = (),
         **options: Any) -> SimulatedJobSet:
    """The rendered pod, with only the model size and the local paths changed (argparse keeps
    the last value of a repeated flag, so these follow the stack's own flags), then ``extra``
    flags; ``options`` go to SimulatedJobSet."""
    workdir.mkdir(parents=True, exist_ok=True)
    local = [f"--checkpoint_dir={workdir / 'checkpoints'}",
             f"--metrics_file={workdir / 'metrics.jsonl'}",
             f"--tensorboard_dir={workdir / 'tensorboard'}"]
    return SimulatedJobSet(rendered["jobset"], rendered["command"],
                           [*rendered["args"], *SMALL, *local, *extra], rendered["env"],
                           namespace="torchrec", name="dlrm", workdir=workdir, **options)


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
    """The trainer processes the pod's launcher (its PID 1, after the shell's exec) started."""
    assert pod.process is not None
    pid = pod.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    workers = []
    for child in map(int, children):
        argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        if b"-m" in argv and argv[argv.index(b"-m") + 1:][:1] == [b"trainer"]:
            workers.append(child)
    assert workers, children
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
    job = gang(rendered, tmp_path, ["--max_steps=20"], join_timeout=15)  # the stack waits 1800 s
    record = job.run(pending=lambda generation: {1} if generation == 0 else set(), timeout=180)
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
