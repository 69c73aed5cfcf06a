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

from torchrec_cloud.__main__ import main

ROOT = Path(__file__).resolve().parent.parent
VERBS = ("check", "plan", "status", "logs", "tensorboard", "why", "submit", "list", "cancel",
         "cost", "doctor")
# Import names of what requirements-check.txt installs (pydantic's and PyYAML's own deps too).
CHECK_MODULES = {"pydantic", "pydantic_core", "annotated_types", "typing_extensions",
                 "typing_inspection", "yaml", "infra", "torchrec_cloud", "trainer"}


def test_help_lists_the_eleven_verbs_and_the_console_script_is_the_same_entry_point():
    done = subprocess.run([sys.executable, "-m", "torchrec_cloud", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("    ")}
    assert set(VERBS) <= listed, set(VERBS) - listed
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
