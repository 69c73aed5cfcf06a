"""The one command line: `torchrec-cloud` (pyproject console script, `python -m torchrec_cloud`
the same), its verbs, the light `check` and stacks that exist."""

from __future__ import annotations

import io
import json
import re
import os
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


def test_a_stack_never_deployed_gets_the_next_step_not_only_pulumis_error(tmp_path, monkeypatch):
    """Walkthrough 7: `pulumi stack output` of a stack the backend lacks printed only Pulumi's
    "error: no stack named 'aws' found"."""
    fake = tmp_path / "pulumi"
    fake.write_text("#!/bin/sh\necho \"error: no stack named 'aws' found\" >&2\nexit 255\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    for verb in ("status", "list", "cost"):
        err = io.StringIO()
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            code = main([verb, "--stack", "aws"])
        assert code == 2
        said = err.getvalue()
        assert "error: no stack named 'aws' found" in said
        assert "`pulumi stack init aws`, then `pulumi up --stack aws`" in said
        assert "`pulumi stack select <name>`" in said


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


def _works_as_printed(command: str, cwd: Path) -> None:
    """A printed `python -m pip install ...` or `make ...` runs from `cwd` as printed: the
    program exists there, each -r file exists, a make target is one of the Makefile's."""
    import os
    import re
    import shlex

    words = shlex.split(command)
    if words[0] == "make":
        folder = cwd / words[2] if words[1:2] == ["-C"] else cwd
        target = words[3] if words[1:2] == ["-C"] else words[1]
        assert re.search(rf"^{re.escape(target)}:", (folder / "Makefile").read_text(), re.M), command
        return
    program = cwd / words[0] if "/" in words[0] else None
    assert program is not None and os.access(program, os.X_OK), command  # never a PATH lookup
    assert words[1:4] == ["-m", "pip", "install"], command
    for index, word in enumerate(words):
        if word == "-r":
            assert (cwd / words[index + 1]).is_file(), command


# verb, the module it lacks, what the hint installs, the make target that installs it
MISSING = [
    ("status", "s3fs", "-r requirements-cli.txt", "make status STACK=aws"),
    ("doctor", "boto3", "-r requirements-cli.txt", "make doctor STACK=aws"),
    ("check", "pydantic", "-r requirements-check.txt", "make check STACK=aws"),
    *[(verb, "fsspec", "-r requirements-cli.txt", "make cli")
      for verb in ("list", "cancel", "cost", "logs", "why")],
    # submit renders with workloads/ on the Pulumi SDK: the two packages, at requirements.txt's pins
    ("submit", "pulumi", "pulumi==3.272.0 pulumi-kubernetes==4.34.2", None),
    ("submit", "pulumi_kubernetes", "pulumi==3.272.0 pulumi-kubernetes==4.34.2", None),
    ("tensorboard", "tensorboard", "tensorboard==2.21.0", None),
    ("plan", "torchrec", None, "make train"),
]


@pytest.mark.parametrize("verb, module, install, target", MISSING,
                         ids=[f"{m[0]}-{m[1]}" for m in MISSING])
@pytest.mark.parametrize("elsewhere", [False, True], ids=["in-the-project", "from-another-folder"])
def test_a_module_missing_for_a_verb_names_the_install_of_that_verb(
        monkeypatch, capsys, tmp_path, verb, module, install, target, elsewhere):
    """Each verb run where a module it needs is missing (`make check`'s venv runs `list`, `make
    status`'s runs `submit`) names the install that brings it, never the 1.8 GB dev set, as
    commands that work as printed: this venv's pip, the requirements file's path and make's
    folder as seen from where the user is."""
    import importlib

    from torchrec_cloud import __main__ as cli

    def missing(name: str) -> Any:
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)

    if elsewhere:
        monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(importlib, "import_module", missing)
    assert cli.guarded([verb, "--stack", "aws"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "requirements-dev.txt" not in err, err
    commands = re.findall(r"`([^`]+)`", err)
    assert commands, err
    for command in commands:
        _works_as_printed(command, Path.cwd())
    if install:
        (pip,) = [c for c in commands if " -m pip install " in c]
        assert pip.split(" install ", 1)[1].replace(str(ROOT) + "/", "") == install, pip
    makes = [c for c in commands if c.startswith("make")]
    if target:
        assert [re.sub(r"^make -C \S+", "make", c) for c in makes][0] == target, err


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


def test_a_printed_command_line_is_the_one_that_runs_here(tmp_path, monkeypatch):
    """`make status` leaves .venv unactivated: a message's `torchrec-cloud list` would be
    "command not found". Printed: the bare name only where the shell finds this script, else
    its path from here (.venv/bin/torchrec-cloud), else this Python with -m."""
    import os

    from torchrec_cloud import invocation

    venv = tmp_path / "project" / ".venv" / "bin"
    venv.mkdir(parents=True)
    python = venv / "python"
    python.symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert invocation.cli("list --stack aws") == ".venv/bin/python -m torchrec_cloud list --stack aws"
    script = venv / "torchrec-cloud"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert invocation.cli("list --stack aws") == ".venv/bin/torchrec-cloud list --stack aws"
    assert invocation.pip_install("x==1") == ".venv/bin/python -m pip install x==1"
    monkeypatch.chdir(tmp_path)
    assert invocation.cli("cost --stack aws") == "project/.venv/bin/torchrec-cloud cost --stack aws"
    monkeypatch.setenv("PATH", f"{venv}{os.pathsep}/usr/bin:/bin")  # an activated venv
    assert invocation.cli("cost --stack aws") == "torchrec-cloud cost --stack aws"
    assert invocation.as_run_here("quota: `torchrec-cloud doctor --stack aws`") == \
        "quota: `torchrec-cloud doctor --stack aws`"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert invocation.as_run_here("quota: `torchrec-cloud doctor --stack aws`") == \
        "quota: `project/.venv/bin/torchrec-cloud doctor --stack aws`"


def test_no_message_prints_a_command_line_that_may_not_run_here():
    """Every command a message of torchrec_cloud/ prints goes through torchrec_cloud/invocation.py:
    no string (docstrings aside) holds a bare `torchrec-cloud <verb>`, `python -m
    torchrec_cloud` or a fixed `.venv/bin/pip`."""
    import ast

    verbs = "|".join(COMMANDS)
    fixed = re.compile(rf"`torchrec-cloud ({verbs})\b|python -m torchrec_cloud|\.venv/bin/pip")
    found = []
    for path in sorted((ROOT / "torchrec_cloud").glob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docstrings and fixed.search(node.value):
                found.append(f"{path.name}:{node.lineno}: {node.value[:80]!r}")
    assert not found, found


def test_every_venv_the_make_targets_make_has_the_console_script():
    """pyproject.toml's [project.scripts] torchrec-cloud is installed by each stamp that makes
    .venv (editable, no dependencies: the requirements files pin them), so the docs'
    `.venv/bin/torchrec-cloud <verb>` exists after `make check`, `make cli`, `make status`,
    `make doctor`, `make train` or `make test`; `make cli` installs the verbs' set."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^INSTALL_SCRIPT := \$\(BIN\)/pip install .*--no-deps -e \.$", makefile, re.M)
    rules = re.split(r"\n(?=\S)", makefile)
    making = [rule for rule in rules if "-m venv $(VENV)" in rule]
    assert len(making) >= 3
    for rule in making:
        assert "\t$(INSTALL_SCRIPT)" in rule, rule.splitlines()[0]
        assert "pyproject.toml" in rule.splitlines()[0], rule.splitlines()[0]
    assert re.search(r"^cli: \$\(VENV\)/\.cli-installed$", makefile, re.M)
    for target in ("check", "status", "doctor", "train", "test"):
        chain = re.search(rf"^{target}:(.*)$", makefile, re.M).group(1)
        assert "installed" in chain or "$(MAKE)" in makefile.split(f"\n{target}:", 1)[1].split("\n\n")[0]


# A script that runs verbs through main() and prints the top-level modules they imported.
_RUN_VERBS = (
    "import sys, json, io, contextlib\n"
    "from torchrec_cloud.__main__ import main\n"
    "codes, err = [], io.StringIO()\n"
    "for argv in json.loads(sys.argv[1]):\n"
    "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):\n"
    "        codes.append(main(argv))\n"
    "tops = sorted({m.split('.')[0] for m in sys.modules if not m.startswith('_')})\n"
    "print(json.dumps({'codes': codes, 'err': err.getvalue(),\n"
    "                  'modules': [t for t in tops if t not in sys.stdlib_module_names]}))\n")


def modules_outside(verbs: list[list[str]], allowed: set[str], tmp_path: Path) -> tuple[dict, dict]:
    """Run the verbs in a fresh process; (what they said, modules not in `allowed`)."""
    import importlib.metadata as metadata

    done = subprocess.run([sys.executable, "-c", _RUN_VERBS, json.dumps(verbs)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "AWS_EC2_METADATA_DISABLED": "true"})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    owners = metadata.packages_distributions()
    ours = {"infra", "torchrec_cloud", "trainer", "workloads", "cython_runtime"}
    outside = {m: owners.get(m, ["?"]) for m in found["modules"] if m not in ours and not any(
        re.sub(r"[-_.]+", "-", d).lower() in allowed for d in owners.get(m, []))}
    return found, outside


def test_the_verbs_on_a_deployed_stack_run_on_what_make_cli_installs(tmp_path):
    """`make cli` (and `make status`) install requirements-cli.txt: list, cost, why, logs, cancel
    and status run on it to the end (here: an API server that does not answer, explained),
    importing nothing else and never "this command needs"."""
    from tests.fake_api import kubeconfig as kubeconfig_of

    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({
        "cloud": "aws", "job_name": "dlrm", "job_namespace": "torchrec",
        "kubeconfig": kubeconfig_of(tmp_path, "http://127.0.0.1:9").read_text(),
        "checkpoint_uri": f"file://{tmp_path}/bucket/dlrm"}))
    common = ["--stack", "aws", "--outputs", str(outputs)]
    verbs = [["list", *common], ["cost", *common], ["why", *common], ["logs", *common],
             ["cancel", *common, "--name", "x1"], ["status", *common, "--out", str(tmp_path / "o")]]
    found, outside = modules_outside(verbs, _requirement_closure(ROOT / "requirements-cli.txt"),
                                     tmp_path)
    assert "this command needs" not in found["err"] and "Traceback" not in found["err"], found["err"]
    assert "did not answer" in found["err"]
    assert not outside, f"{outside} imported, not in requirements-cli.txt (make cli)"
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^cli: \$\(VENV\)/\.cli-installed$", makefile, re.M)


def _full_parser() -> Any:
    """The command line's parser with every verb's arguments (main() adds only the one run)."""
    import argparse
    import importlib

    from torchrec_cloud.__main__ import COMMANDS

    parser = argparse.ArgumentParser(prog="torchrec-cloud", exit_on_error=False)
    verbs = parser.add_subparsers(dest="command", required=True)
    for name, (module, _) in COMMANDS.items():
        importlib.import_module(module).add_arguments(verbs.add_parser(name, exit_on_error=False))
    return parser


def _printed_commands(text: str) -> list[str]:
    """Each `.venv/bin/torchrec-cloud ...` a page prints: code-block lines and inline code
    (a placeholder like <cloud> is prose, not a command to paste)."""
    found = []
    for block in re.findall(r"^```(?:bash)?\n(.*?)^```", text, re.M | re.S):
        found += [line.strip().removeprefix("$ ") for line in block.splitlines()
                  if line.strip().removeprefix("$ ").startswith(".venv/bin/torchrec-cloud ")]
    inline = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    found += [c.replace("\n", " ") for c in re.findall(r"`(\.venv/bin/torchrec-cloud [^`<]+)`", inline)]
    return found


def test_docs_commands_lists_every_verb_with_an_example_that_parses_as_printed():
    """docs/commands.md: the eleven verbs, each with an example; every command the README and
    docs/ print with .venv/bin/torchrec-cloud (the console script the make targets install)
    is one the parser takes as printed, on a stack the project has."""
    import argparse
    import shlex

    parser = _full_parser()
    page = (ROOT / "docs" / "commands.md").read_text()
    examples = {shlex.split(c, comments=True)[1] for c in _printed_commands(page)}
    assert examples >= set(COMMANDS), set(COMMANDS) - examples
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    bad = []
    for path in pages:
        for command in _printed_commands(path.read_text()):
            words = shlex.split(command, comments=True)[1:]
            if words == ["--help"]:
                continue
            try:
                args = parser.parse_args(words)
            except (argparse.ArgumentError, SystemExit) as error:
                bad.append(f"{path.name}: {command}: {error}")
                continue
            if getattr(args, "stack", None) not in (None, "aws", "azure", "gcp"):
                bad.append(f"{path.name}: {command}: no stack {args.stack}")
    assert not bad, bad
    readme = (ROOT / "README.md").read_text()
    assert "python -m torchrec_cloud" not in readme and "pip install -e ." not in readme
    assert "[docs/commands.md](docs/commands.md)" in readme


def test_doctor_on_a_bad_stack_file_names_the_check_of_that_same_file(tmp_path, monkeypatch):
    """`doctor --stack-file F` refused: the check it points at reads F, not the project's stack."""
    bad = tmp_path / "Pulumi.aws.yaml"
    bad.write_text((ROOT / "Pulumi.aws.yaml").read_text())  # no apiAccessCidrs yet
    monkeypatch.chdir(tmp_path)
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        code = main(["doctor", "--stack", "aws", "--stack-file", str(bad)])
    assert code == 1
    (command,) = re.findall(r"\(`([^`]+)` first\)", err.getvalue())
    assert command.endswith(" check --file Pulumi.aws.yaml"), command
