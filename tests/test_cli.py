"""The one command line: `torchrec-cloud` (pyproject console script, `python -m torchrec_cloud`
the same), its verbs, the light `check` and stacks that exist."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tomllib
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from torchrec_cloud.__main__ import COMMANDS, main

ROOT = Path(__file__).resolve().parent.parent
# Import names of what requirements-check.txt installs (pydantic's and PyYAML's own deps too).
CHECK_MODULES = {"pydantic", "pydantic_core", "annotated_types", "typing_extensions",
                 "typing_inspection", "yaml", "infra", "torchrec_cloud", "trainer"}


def test_help_lists_every_verb_and_the_console_script_is_the_same_entry_point():
    """COMMANDS in torchrec_cloud/__main__.py is the one list of verbs: help shows each."""
    done = subprocess.run([sys.executable, "-m", "torchrec_cloud", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("    ")}
    assert len(COMMANDS) >= 11 and set(COMMANDS) <= listed, set(COMMANDS) - listed
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["torchrec-cloud"] == "torchrec_cloud.__main__:guarded"
    assert project["tool"]["setuptools"]["dynamic"]["dependencies"]["file"] == ["requirements-check.txt"]


def test_check_imports_nothing_beyond_requirements_check(tmp_path):
    """`make check` installs only requirements-check.txt: the check, valid stack or not, must
    run on it (no pulumi, moto, torch, boto3, fsspec)."""
    stack = tmp_path / "Pulumi.aws.yaml"
    stack.write_text((ROOT / "Pulumi.aws.yaml").read_text()
                     + "  torchrec-cloud:kubernetes: {apiAccessCidrs: [81.2.69.142/32]}\n")
    script = (
        "import sys, io, contextlib, json\n"
        "from torchrec_cloud.__main__ import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):\n"
        f"    codes = [main(['check', '--file', {str(stack)!r}]), main(['check', '--stack', 'gcp'])]\n"
        "tops = sorted({m.split('.')[0] for m in sys.modules if not m.startswith('_')})\n"
        "print(json.dumps({'codes': codes, 'modules': [t for t in tops if t not in sys.stdlib_module_names]}))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["codes"][0] == 0
    extra = set(found["modules"]) - CHECK_MODULES - {"cython_runtime"}
    assert not extra, f"check imported {sorted(extra)}, not in requirements-check.txt"
    required = (ROOT / "requirements-check.txt").read_text()
    assert "pydantic==" in required and "PyYAML==" in required
    assert "-r requirements-check.txt" in (ROOT / "requirements.txt").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "check: $(VENV)/.check-installed" in makefile


def test_status_and_logs_accept_only_stacks_that_exist():
    for verb in ("status", "logs", "list", "cost"):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main([verb, "--stack", "aws-prod"])
        assert code == 2
        assert "no stack 'aws-prod' in this project" in err.getvalue()
        assert "aws, azure, gcp" in err.getvalue()


def test_sigterm_ends_tensorboard_like_ctrl_c(tmp_path):
    """SIGTERM to the wrapper while TensorBoard runs: TensorBoard is stopped, not orphaned."""
    import os
    import signal
    import threading
    import time

    from torchrec_cloud import tensorboard

    pid_file = tmp_path / "pid"
    child = (f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
             "time.sleep(60)")

    def sigterm() -> None:
        for _ in range(300):
            if pid_file.exists() and pid_file.read_text():
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.05)

    threading.Thread(target=sigterm, daemon=True).start()
    started = time.monotonic()
    code = tensorboard.serve([sys.executable, "-c", child], lambda: [], every=0)
    assert code == 0 and time.monotonic() - started < 20
    with __import__("pytest").raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)  # TensorBoard is gone
    assert signal.getsignal(signal.SIGTERM) is not tensorboard._interrupt  # handler restored


def test_an_interrupted_download_leaves_no_partial_file(tmp_path):
    from torchrec_cloud.tensorboard import sync

    class Interrupted:
        def invalidate_cache(self) -> None:
            pass

        def find(self, root: str, detail: bool) -> dict:
            return {f"{root}/events.out.tfevents.1": {"type": "file", "size": 10}}

        def get_file(self, path: str, local: str) -> None:
            Path(local).write_bytes(b"half")
            raise KeyboardInterrupt  # Ctrl-C or SIGTERM in the middle of the download

    with __import__("pytest").raises(KeyboardInterrupt):
        sync(Interrupted(), "bucket/tb", tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_sigterm_removes_the_kubeconfig_copy(tmp_path):
    """`status` against an API server that does not answer yet: SIGTERM ends it and the
    private kubeconfig copy it wrote is removed (exit 143, 128 + SIGTERM)."""
    import os
    import signal
    import time

    from tests.fake_api import Answer, FakeApi, kubeconfig as kubeconfig_of

    gate = __import__("threading").Event()
    with FakeApi({"/api/v1/nodes": Answer({"items": []}, first=lambda: gate.wait(30))}) as api:
        outputs = tmp_path / "outputs.json"
        outputs.write_text(json.dumps({"cloud": "aws", "job_name": "dlrm",
                                       "kubeconfig": kubeconfig_of(tmp_path, api.url).read_text(),
                                       "checkpoint_uri": f"file://{tmp_path}/bucket/dlrm"}))
        temp = tmp_path / "tmp"
        temp.mkdir()
        process = subprocess.Popen([sys.executable, "-m", "torchrec_cloud", "status", "--stack",
                                    "aws", "--outputs", str(outputs), "--out", str(tmp_path / "o")],
                                   cwd=ROOT, env={**os.environ, "TMPDIR": str(temp)},
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(400):
            if list(temp.glob("kubeconfig-aws-*")) and api.requests:
                break
            time.sleep(0.05)
        assert list(temp.glob("kubeconfig-aws-*"))
        process.send_signal(signal.SIGTERM)
        code = process.wait(30)
        gate.set()
    assert code == 128 + signal.SIGTERM  # 143, as a shell reports a command SIGTERM ended
    assert not list(temp.glob("kubeconfig-aws-*"))


def test_a_missing_module_is_named_with_the_install_that_brings_it():
    """`plan` needs torchrec, which only the trainer's install brings: pointing at
    requirements-dev.txt (1.8 GB) would not help (new-user walkthrough)."""
    from torchrec_cloud.__main__ import missing_module_hint

    assert "make train" in missing_module_hint("torchrec")
    assert "make train" in missing_module_hint("torch.distributed")
    assert "requirements-dev.txt" in missing_module_hint("pulumi_kubernetes")


@pytest.mark.parametrize("verb, module, install", [
    ("status", "s3fs", "requirements-cli.txt"), ("doctor", "boto3", "requirements-cli.txt"),
    ("check", "pydantic", "requirements-check.txt"), ("submit", "pulumi", "requirements-dev.txt")])
def test_a_module_missing_for_a_verb_names_the_install_of_that_verb(monkeypatch, capsys, verb,
                                                                    module, install):
    """`make status` and `make doctor` install requirements-cli.txt, `make check`
    requirements-check.txt: a module missing there is named with that set and its make target,
    not the 1.8 GB dev set that `make status` never installs."""
    import importlib

    from torchrec_cloud import __main__ as cli

    def missing(name: str) -> Any:
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)

    monkeypatch.setattr(importlib, "import_module", missing)
    assert cli.guarded([verb, "--stack", "aws"]) == 2
    err = capsys.readouterr().err
    assert f"pip install -r {install}" in err
    others = {"requirements-check.txt", "requirements-cli.txt", "requirements-dev.txt"} - {install}
    assert not any(other in err for other in others), err
    if verb in ("status", "doctor", "check"):
        assert f"make {verb} STACK=<stack>" in err
    else:
        assert "make status" not in err


def test_every_verb_that_takes_a_stack_gives_the_one_unknown_stack_message():
    """status (make status), logs, list, cost, submit and doctor: the same words from one place
    (torchrec_cloud/stack_file.py unknown_stack), with the near name to use."""
    from torchrec_cloud.stack_file import unknown_stack

    expected = unknown_stack("awz", ROOT)
    assert expected and "did you mean --stack aws?" in expected
    messages = {}
    for argv in (["status"], ["logs"], ["list"], ["cost"], ["submit", "--name", "x", "--dry-run"],
                 ["doctor"]):
        err = io.StringIO()
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            code = main([*argv, "--stack", "awz"])
        assert code == 2, (argv, err.getvalue())
        messages[argv[0]] = err.getvalue().strip().split(": ", 1)[1]
    assert set(messages.values()) == {expected}, messages


def _requirement_closure(path: Path) -> set[str]:
    """Every distribution a requirements file brings (its pins and their dependencies, as the
    installed metadata says; extras not asked for are left out), normalised names."""
    import importlib.metadata as metadata
    import re

    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    def pins(file: Path) -> list[str]:
        found = []
        for line in file.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("-r "):
                found += pins(file.parent / line[3:].strip())
            elif line:
                found.append(line)
        return found

    seen: set[str] = set()
    todo = [Requirement(p) for p in pins(path)]
    while todo:
        req = todo.pop()
        name = norm(req.name)
        if name in seen:
            continue
        seen.add(name)
        for text in metadata.requires(req.name) or []:
            dep = Requirement(text)
            extras = set(req.extras) | {""}
            if dep.marker and not any(dep.marker.evaluate({**default_environment(), "extra": e})
                                      for e in extras):
                continue
            todo.append(dep)
    return seen


def test_status_and_doctor_import_nothing_beyond_requirements_cli(tmp_path):
    """`make status` / `make doctor` install requirements-cli.txt only, not the 1.8 GB dev set:
    status (telemetry in an s3:// store) and doctor (EC2 quotas through boto3) must run on it:
    no pulumi, moto, torch; the report PNG is skipped with the install that adds it."""
    import importlib.metadata as metadata
    import re

    allowed = _requirement_closure(ROOT / "requirements-cli.txt")
    assert {"boto3", "s3fs", "gcsfs", "adlfs"} <= allowed and "matplotlib" not in allowed
    assert not any(name.startswith("pulumi") or name in ("moto", "torch") for name in allowed)
    script = (
        "import sys, json, io, contextlib\n"
        "from datetime import datetime, timezone\n"
        "from pathlib import Path\n"
        "from torchrec_cloud import status, doctor\n"
        "from torchrec_cloud.stack import Outputs, open_bucket\n"
        "from workloads.why import ApiError\n"
        "out = Path(sys.argv[1])\n"
        "outputs = Outputs.of('aws', {'cloud': 'aws', 'kubeconfig': '{}', 'job_name': 'dlrm',\n"
        "    'job_namespace': 'torchrec', 'checkpoint_uri': 's3://bucket/dlrm'})\n"
        "def read(path):\n"
        "    raise ApiError('connection refused')\n"
        "status.report(outputs, read, datetime(2026, 11, 26, tzinfo=timezone.utc),\n"
        "              lambda uri: open_bucket('file://' + str(out)), out)\n"
        "open_bucket('s3://bucket/dlrm', outputs)\n"
        "import boto3\n"
        "client = boto3.client('service-quotas', region_name='us-east-1',\n"
        "                      aws_access_key_id='x', aws_secret_access_key='x')\n"
        "doctor.report(doctor._settings('aws', Path(sys.argv[2])), 'aws', lambda c: (1, ''), lambda: None, lambda: client)\n"
        "tops = sorted({m.split('.')[0] for m in sys.modules if not m.startswith('_')})\n"
        "print(json.dumps([t for t in tops if t not in sys.stdlib_module_names]))\n")
    stack = tmp_path / "Pulumi.aws.yaml"
    stack.write_text((ROOT / "Pulumi.aws.yaml").read_text()
                     + "  torchrec-cloud:kubernetes: {apiAccessCidrs: [81.2.69.142/32]}\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path), str(stack)], cwd=ROOT,
                          capture_output=True, text=True, timeout=180,
                          env={"PATH": "/usr/bin:/bin", "AWS_EC2_METADATA_DISABLED": "true",
                               "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    owners = metadata.packages_distributions()
    ours = {"infra", "torchrec_cloud", "trainer", "workloads", "cython_runtime"}
    outside = {m: owners.get(m, ["?"]) for m in modules if m not in ours and not any(
        re.sub(r"[-_.]+", "-", d).lower() in allowed for d in owners.get(m, []))}
    assert not outside, f"status/doctor imported {outside}, not in requirements-cli.txt"


def test_status_without_matplotlib_says_the_report_is_skipped_and_how_to_add_it(tmp_path,
                                                                              monkeypatch):
    """requirements-cli.txt leaves matplotlib out (about 160 MB): status still runs, and says so."""
    from torchrec_cloud import status

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as where it is not installed
    line = status._write_report([{"step": 1, "loss": 0.5}], tmp_path)
    assert line.startswith("report skipped: matplotlib is not installed here")
    assert "requirements-cli.txt" in line and "pip install matplotlib==3.11.2" in line
    dev = (ROOT / "requirements-dev.txt").read_text()
    assert "matplotlib==3.11.2" in dev and "-r requirements-cli.txt" in dev
