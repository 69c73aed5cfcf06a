"""The launcher's one exit status, from what torchrun's agent reports about its workers."""

import signal

import pytest

from trainer.exit_codes import CONFIG_ERROR, RESUME
from trainer.launch import CRASH, status_of_worker_failures
from trainer.peers import is_lost_peer


@pytest.mark.parametrize(("codes", "status"), [
    ({RESUME}, RESUME),  # every failed worker asked to resume
    ({RESUME, -signal.SIGTERM}, RESUME),  # the agent stopped the rest after the first left
    ({CONFIG_ERROR, RESUME}, CONFIG_ERROR),  # a bad flag wins: retrying cannot fix it
    ({1, RESUME}, CRASH),  # a crash makes its peers lose a rank: still a crash
    ({-signal.SIGKILL}, CRASH),  # the OOM killer is not a preemption
    ({-signal.SIGSEGV, RESUME}, CRASH),
])
def test_worker_exit_codes_become_one_pod_status(codes, status):
    assert status_of_worker_failures(codes) == status


def test_a_closed_gloo_connection_is_a_lost_peer_and_a_plain_error_is_not():
    import torch.distributed as dist

    # The message gloo gave when the peer process was SIGKILLed (torch 2.13, CPU).
    gloo = RuntimeError("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
                        "Connection closed by peer [127.0.0.1]:44763")
    assert is_lost_peer(gloo)
    assert is_lost_peer(dist.DistBackendError("NCCL communicator was aborted"))
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
