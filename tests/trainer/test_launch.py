"""The launcher's one exit status, from what torchrun's agent reports about its workers."""

import signal

import pytest

from trainer.exit_codes import CONFIG_ERROR, RESUME
from trainer.launch import CRASH, checkpoint_dir_of, status_of_worker_failures
from trainer.peers import is_lost_peer
from trainer.restarts import STARTS_WITHOUT_PROGRESS, record_start, starts_without_progress


@pytest.mark.parametrize(("codes", "status"), [
    ({RESUME}, RESUME),  # every failed worker asked to resume
    ({RESUME, -signal.SIGTERM}, RESUME),  # the agent stopped the rest after the first left
    ({CONFIG_ERROR, RESUME}, CONFIG_ERROR),  # a bad flag wins: retrying cannot fix it
    ({1, RESUME}, CRASH),  # a crash makes its peers lose a rank: still a crash
    ({-signal.SIGKILL}, CRASH),  # the OOM killer is not a preemption
    ({-signal.SIGSEGV, RESUME}, CRASH),
    ({-signal.SIGABRT}, RESUME),  # the NCCL watchdog tore the worker down: a peer or link is gone
    ({128 + signal.SIGABRT}, RESUME),  # the same abort, reported through a shell (134)
    ({-signal.SIGABRT, RESUME}, RESUME),  # one rank aborted, its local peers asked to resume
    ({-signal.SIGABRT, 1}, CRASH),  # a rank's own exception aborts its peers: still a crash
])
def test_worker_exit_codes_become_one_pod_status(codes, status):
    assert status_of_worker_failures(codes) == status


@pytest.mark.parametrize("codes", [{-signal.SIGABRT}, {134}, {-signal.SIGABRT, RESUME}])
def test_an_abort_after_repeated_starts_from_one_checkpoint_is_counted(codes):
    """A deterministic abort (a real bug) must not restart for ever without counting."""
    assert status_of_worker_failures(codes, STARTS_WITHOUT_PROGRESS - 1) == RESUME
    assert status_of_worker_failures(codes, STARTS_WITHOUT_PROGRESS) == CRASH


def test_only_an_abort_is_bounded_a_preemption_always_resumes():
    assert status_of_worker_failures({RESUME, -signal.SIGTERM}, 10 * STARTS_WITHOUT_PROGRESS) == RESUME


def test_starts_from_the_same_checkpoint_are_counted_and_progress_resets_them(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    assert starts_without_progress(ckpt) == 0  # nothing recorded yet
    assert [record_start(ckpt, None) for _ in range(2)] == [1, 2]  # from scratch, twice
    assert record_start(ckpt, 40) == 1  # a new checkpoint: progress
    assert record_start(ckpt, 40) == 2
    assert starts_without_progress(ckpt) == 2
    assert record_start(f"file://{tmp_path / 'ckpt'}", 40) == 3  # the same store through fsspec
    assert record_start(ckpt, 80) == 1
    assert starts_without_progress(None) == 0  # no checkpoints: nothing to bound against


def test_a_sigterm_torch_s_agent_masks_with_another_error_still_resumes(monkeypatch):
    """The kubelet's SIGTERM can land in torch's metrics wrapper before it has set `start`:
    its `finally` then raises UnboundLocalError over the agent's SignalException (a drained
    pod's launcher exited 1 under load: a counted crash). The real wrapper, the signal
    injected where it landed; any other error still propagates."""
    from types import SimpleNamespace

    import torch.distributed.launcher.api as launcher_api
    from torch.distributed.elastic.metrics import api as metrics
    from torch.distributed.elastic.multiprocessing.api import SignalException

    from trainer.launch import launch

    def sigterm_at_start_time() -> float:  # the agent's handler runs at `start = time.time()`
        raise SignalException("Process 1 got signal: 15", sigval=signal.SIGTERM)

    @metrics.prof
    def monitor_workers() -> None:
        raise AssertionError("not reached: the signal came first")

    monkeypatch.setattr(metrics, "time", SimpleNamespace(time=sigterm_at_start_time))
    monkeypatch.setattr(launcher_api, "elastic_launch",
                        lambda config, entrypoint: lambda *args: monitor_workers())
    argv = ["--nnodes=1", "--nproc_per_node=1", "-m", "trainer"]
    with pytest.raises(UnboundLocalError):  # what torch's wrapper leaves
        monitor_workers()
    assert launch(argv) == RESUME

    monkeypatch.setattr(metrics, "time", SimpleNamespace(time=lambda: 0.0))
    with pytest.raises(AssertionError, match="not reached"):  # not a signal: not a resume
        launch(argv)


def test_the_launcher_finds_the_trainers_checkpoint_dir_among_its_flags():
    args = ["-u", "-m", "trainer", "--checkpoint_dir=s3://a/b", "--checkpoint_every", "5",
            "--checkpoint_dir", "s3://bucket/job"]
    assert checkpoint_dir_of(args) == "s3://bucket/job"  # the last wins, as in the trainer
    assert checkpoint_dir_of(["-m", "trainer", "--checkpoint_every=5"]) is None


def test_a_closed_gloo_connection_is_a_lost_peer_and_a_plain_error_is_not():
    import torch.distributed as dist

    # The message gloo gave when the peer process was SIGKILLed (torch 2.13, CPU).
    gloo = RuntimeError("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
                        "Connection closed by peer [127.0.0.1]:44763")
    assert is_lost_peer(gloo)
    assert is_lost_peer(dist.DistBackendError("NCCL communicator was aborted"))
    # NCCL's words for a lost peer, when a wrapper re-raises them as a plain RuntimeError.
    assert is_lost_peer(RuntimeError(
        "NCCL error in: ProcessGroupNCCL.cpp:2042, remote process exited or there was a "
        "network error, NCCL version 2.27.5\nncclRemoteError: A call failed possibly due to a "
        "network error or a remote process exiting prematurely."))
    assert is_lost_peer(RuntimeError(
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
        "OpType=ALLTOALL_BASE, Timeout(ms)=300000) ran for 300041 milliseconds before timing out."))
    assert not is_lost_peer(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not is_lost_peer(ValueError("Connection closed by peer"))


def test_an_rdma_pod_raises_locked_memory_as_root_then_runs_as_the_trainer(tmp_path):
    """What a pod with raise_locked_memory does before torchrun starts (needs root, as the
    container starts there; this machine's tests run as root)."""
    import os
    import subprocess
    import sys

    from trainer.privileges import DROP_TO_ENV

    if os.geteuid() != 0:
        pytest.skip("needs root, like the container's start")
    probe = ("import os, resource; from trainer.privileges import raise_locked_memory_and_drop; "
             "raise_locked_memory_and_drop(); soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK); "
             "print(os.getuid(), os.getgid(), os.getgroups(), soft == hard, "
             "soft == resource.RLIM_INFINITY, "
             "open('/proc/self/status').read().split('CapEff:')[1].split()[0])")
    env = {**os.environ, DROP_TO_ENV: "1000:1000", "PYTHONPATH": str(tmp_path.parent)}
    from tests.trainer.helpers import REPO
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                         check=True, cwd=REPO).stdout.split()[-6:]
    # The container holds CAP_SYS_RESOURCE (bit 24): unlimited. A sandbox without it (like
    # some CI machines) gets the soft limit raised to the hard one and a warning.
    has_sys_resource = bool(int(open("/proc/self/status").read().split("CapEff:")[1].split()[0],
                                16) & (1 << 24))
    assert out == ["1000", "1000", "[]", "True", str(has_sys_resource), "0000000000000000"]
