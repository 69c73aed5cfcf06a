"""Cross-cloud security policies, the whole program run under mocks per stack (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gang import process_state
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
  *) echo $$ >> "$KUBECTL_PIDS"; echo "[train] step 1"; exec sleep 60 ;;
esac
'''


@pytest.mark.parametrize("signame", ["SIGHUP", "SIGTERM", "SIGINT", "SIGQUIT"])
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
           "KUBECONFIG_SEEN": str(seen), "KUBECTL_PIDS": str(tmp_path / "kubectl.pids")}
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
    # kubectl (`logs -f`, which holds the terminal) ends with the command: its pid is gone.
    pids = [int(p) for p in (tmp_path / "kubectl.pids").read_text().split()]
    deadline = time.monotonic() + 20
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in pids if _running(p)]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    _, errors = proc.communicate(timeout=30)
    assert "Traceback" not in errors
    assert not alive, f"kubectl {alive} outlived the command ({signame})"


def _running(pid: int) -> bool:
    """A process that exists and is not a zombie waiting for its parent."""
    return process_state(pid) not in (None, "Z")


def test_up_fetches_no_manifest_from_the_network(run: Run) -> None:
    """JobSet's and the training operator's manifests are vendored: GitHub down or a release
    asset replaced cannot change or stop a `pulumi up` (issue 33, pinned supply)."""
    from tests.harness import ROOT

    files = [r for r in run.resources
             if r.type in ("kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml/v2:ConfigGroup",
                           "kubernetes:yaml:ConfigFile")]
    assert files, "no operator manifest found"
    for resource in files:
        for source in [resource.inputs.get("file"), *(resource.inputs.get("files") or [])]:
            if source is None:
                continue
            assert "://" not in source, f"{resource.name} fetches {source}"
            path = (ROOT / source).resolve()
            assert path.is_file() and ROOT in path.parents, source


def test_every_jobset_release_the_table_can_choose_is_vendored() -> None:
    from infra.addon_versions import ADDON_VERSIONS
    from workloads.jobset import ADDON, manifests_for

    for row in ADDON_VERSIONS[ADDON]:
        text = manifests_for(row.version).read_text()
        assert f"image: registry.k8s.io/jobset/jobset:{row.version}" in text
        assert "kind: CustomResourceDefinition" in text


AWS_EFA_KEY = "4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC"  # AWS EC2 User Guide, efa-start


def _gpg(home, *args: str, stdin: str | None = None) -> str:
    import subprocess

    done = subprocess.run(["gpg", "--homedir", str(home), "--batch", "--pinentry-mode",
                           "loopback", "--passphrase", "", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def _new_key(home, name: str) -> str:
    _gpg(home, "--quick-gen-key", f"{name} <{name}@example.com>", "ed25519", "sign", "never")
    listed = _gpg(home, "--with-colons", "--fingerprint", f"{name}@example.com")
    return next(line.split(":")[9] for line in listed.splitlines() if line.startswith("fpr:"))


def test_the_efa_installer_runs_only_when_signed_by_the_key_whose_fingerprint_we_keep(
        tmp_path) -> None:
    """The image build's signature check (trainer/fabric/verify_signed.sh, run by
    trainer/Dockerfile with AWS's published fingerprint) against real GnuPG signatures: a key
    file served beside the installer can be replaced with it, so a good signature by any other
    key, even one shipped in the same key file, is refused."""
    import subprocess

    from tests.harness import ROOT

    script = ROOT / "trainer" / "fabric" / "verify_signed.sh"
    assert AWS_EFA_KEY in (ROOT / "trainer" / "Dockerfile").read_text()
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    ours, attacker = _new_key(home, "publisher"), _new_key(home, "attacker")
    tarball = tmp_path / "aws-efa-installer.tar.gz"
    tarball.write_bytes(b"installer")
    keys = tmp_path / "aws-efa-installer.key"
    keys.write_text(_gpg(home, "--armor", "--export", ours, attacker))

    def verify(signer: str, fingerprint: str) -> int:
        signature = tmp_path / f"{signer}.sig"
        signature.unlink(missing_ok=True)
        _gpg(home, "--local-user", signer, "--output", str(signature), "--detach-sign",
             str(tarball))
        return subprocess.run([str(script), str(keys), fingerprint, str(signature), str(tarball)],
                              capture_output=True, text=True, timeout=60).returncode

    assert verify(ours, ours) == 0
    assert verify(attacker, ours) == 1  # the attacker's key rode along in the key file
    assert verify(ours, AWS_EFA_KEY) == 1  # a key file that is not AWS's
    tarball.write_bytes(b"installer, altered")
    assert subprocess.run([str(script), str(keys), ours, str(tmp_path / f"{ours}.sig"),
                           str(tarball)], capture_output=True, timeout=60).returncode == 1


def test_the_reserved_add_on_namespaces_are_the_ones_the_stack_creates() -> None:
    """The settings rule's list (infra/settings cannot import workloads/) matches the constants
    of the add-ons that create those namespaces."""
    from infra.dcgm import GPU_OPERATOR_NAMESPACE
    from infra.settings.security_rules import ADDON_NAMESPACES
    from workloads.kueue import NAMESPACE as KUEUE_NAMESPACE

    jobset = (Path(__file__).resolve().parent.parent / "workloads" / "manifests")
    assert all("namespace: jobset-system" in f.read_text() for f in jobset.glob("jobset-*.yaml"))
    for name in (KUEUE_NAMESPACE, GPU_OPERATOR_NAMESPACE, "jobset-system", "network-operator",
                 "kubeflow"):
        assert name in ADDON_NAMESPACES


def test_the_unpinned_image_notice_quotes_the_image_in_its_commands() -> None:
    """`pulumi up` prints the notice for whatever job.image holds; pasted, its commands take
    the image as one argument and run nothing else."""
    import shlex

    from infra.settings.loader import settings_and_problems
    from infra.settings.security_rules import unpinned_image_notice
    from tests.test_cloud_rules import stack_values

    image = "x; touch pwned"
    settings, _ = settings_and_problems(stack_values("aws", {"job": {"image": image}}))
    assert settings is not None
    notice = unpinned_image_notice(settings)
    commands = notice.split("`")[1::2]
    assert shlex.split(commands[0]) == ["docker", "buildx", "imagetools", "inspect", image]
    assert shlex.split(commands[1])[-1] == f"{image}@sha256:<digest>"


@pytest.mark.parametrize(("cidr", "refused"), [
    ("::/80", True),  # holds ::ffff:0:0/96, all of IPv4
    ("64:ff9b::/96", True),  # NAT64's well-known prefix: all of IPv4 (RFC 6052)
    ("::ffff:81.2.69.0/120", False),  # a /24 of IPv4
    ("2a00:1450:4001::/48", False),  # plain IPv6 at the limit
])
def test_ipv6_ranges_that_carry_ipv4_are_judged_by_the_ipv4_limit(cidr: str, refused: bool) -> None:
    from infra.settings.loader import settings_and_problems
    from tests.test_cloud_rules import stack_values

    _, problems = settings_and_problems(stack_values("aws", {"kubernetes": {
        "apiAccessCidrs": [cidr]}}))
    paths = [p.path for p in problems]
    assert ("kubernetes.apiAccessCidrs[0]" in paths) == refused, problems


def test_the_reserved_tag_key_and_job_folders_are_the_program_s_own() -> None:
    """The settings rules (which load without pulumi) repeat two facts of the program: the
    owner tag of infra/store_owner.py and the job's folders of workloads/pod.py."""
    from infra.settings.security_rules import JOB_FOLDERS, OWNER_TAG_KEY
    from infra.store_owner import OWNER_KEY
    from workloads.pod import job_folders

    assert OWNER_TAG_KEY == OWNER_KEY
    assert [f.split("/")[2] for f in job_folders("/m", "dlrm")] == list(JOB_FOLDERS)


def test_every_number_setting_refuses_true() -> None:
    """pydantic reads true as 1 in a number field; NUMBER_FIELDS names every int or float field
    of the models, so each one refuses it."""
    import importlib
    import pkgutil
    import typing

    from pydantic import BaseModel

    from infra.settings import model
    from infra.settings.model.section import NUMBER_FIELDS

    sections = [importlib.import_module(f"{model.__name__}.{info.name}")
                for info in pkgutil.iter_modules(model.__path__)]
    numbers = set()
    for cls in (obj for section in sections for obj in vars(section).values()):
        if isinstance(cls, type) and issubclass(cls, BaseModel):
            for name, field in cls.model_fields.items():
                kinds = set(typing.get_args(field.annotation) or (field.annotation,)) - {type(None)}
                if kinds and kinds <= {int, float}:
                    numbers.add(name)
    assert numbers == set(NUMBER_FIELDS)


def test_an_eks_pool_past_the_node_group_quota_goes_ahead_with_a_raise_asked_for() -> None:
    """EKS's 450 nodes per managed node group is a quota that can be raised; AKS's and GKE's
    1,000 are not."""
    from infra.settings.loader import settings_and_problems
    from tests.test_cloud_rules import stack_values

    def refused(stack: str, pending: bool) -> bool:
        _, problems = settings_and_problems(stack_values(stack, {
            "gpuPools": {"onDemand": {"maxNodes": 1001}}, "quota": {"pending": pending}}))
        return "gpuPools.onDemand.maxNodes" in [p.path for p in problems]

    assert refused("aws", False) and not refused("aws", True)
    assert refused("azure", True) and refused("gcp", True)
