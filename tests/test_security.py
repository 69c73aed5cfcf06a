"""Cross-cloud security policies, the whole program run under mocks per stack (issue 33)."""

from __future__ import annotations

import pytest

from tests.harness import STACKS, Run, run_stack


@pytest.fixture(scope="module", params=STACKS)
def run(request: pytest.FixtureRequest) -> Run:
    return run_stack(request.param)


def test_destroy_from_an_address_outside_api_access_cidrs_still_removes_the_cloud_resources(
        run: Run) -> None:
    """Every Kubernetes provider drops its objects from the state when the cluster cannot be
    reached (deleteUnreachable), so `pulumi destroy` goes on to delete the cluster and its GPU
    nodes instead of stopping at the first Kubernetes delete (pulumi/pulumi-kubernetes#2463,
    #2489). `destroy` runs with the provider inputs the last `up` stored."""
    providers = run.of_type("pulumi:providers:kubernetes")
    assert providers
    for provider in providers:
        assert provider.inputs.get("deleteUnreachable") in (True, "true"), provider.name


FAKE_KUBECTL = r'''#!/bin/sh
# `kubectl --kubeconfig PATH ...`: lists one rank-0 pod, then "follows" its log until killed.
echo "$2" > "$KUBECONFIG_SEEN"
case "$*" in
  *" get --raw "*) printf '%s' '{"items": [{"metadata": {"name": "dlrm-node-0-0", "labels": {"batch.kubernetes.io/job-completion-index": "0"}}, "status": {"phase": "Running"}, "spec": {"containers": [{"name": "trainer"}]}}]}' ;;
  *) echo "[train] step 1"; exec sleep 60 ;;
esac
'''


@pytest.mark.parametrize("signame", ["SIGHUP", "SIGTERM", "SIGINT"])
def test_logs_follow_removes_its_kubeconfig_copy_on_every_signal(tmp_path, signame) -> None:
    """`logs --follow` writes the stack's kubeconfig (a credential) to a 0600 temporary file;
    a closed terminal, `kill` or Ctrl-C must not leave it behind."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.harness import ROOT

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    temp = tmp_path / "tmp"
    temp.mkdir()
    seen = tmp_path / "seen"
    saved = tmp_path / "outputs.json"
    saved.write_text(json.dumps({"cloud": "aws", "job_name": "dlrm", "kubeconfig": "secret: 1\n"}))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(temp),
           "KUBECONFIG_SEEN": str(seen)}
    proc = subprocess.Popen([sys.executable, "-m", "torchrec_cloud", "logs", "--stack", "aws",
                             "--outputs", str(saved), "--follow"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "[train] step 1\n"  # kubectl logs -f is running
        copy = seen.read_text().strip()
        assert copy.startswith(str(temp)) and os.path.exists(copy)
        proc.send_signal(getattr(signal, signame))
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not os.path.exists(copy), f"{signame} left {copy}"
    started = time.monotonic()
    _, errors = proc.communicate(timeout=30)  # kubectl, killed with it, held the pipes
    assert "Traceback" not in errors
    assert time.monotonic() - started < 20, "kubectl outlived the command"
