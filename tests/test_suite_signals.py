"""The suite gives its commands Ctrl-C as a terminal does, however it was started: a script's
`make test &` or `nohup` leaves SIGINT ignored in pytest and in every process it starts, and
the tests that end a command with Ctrl-C (`logs --follow`, `tensorboard`) waited for ever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.harness import ROOT

PROBE = '''
import signal, subprocess, sys

def test_ctrl_c_reaches_pytest_and_the_processes_it_starts():
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    child = subprocess.run([sys.executable, "-c", "import signal; "
                            "print(signal.getsignal(signal.SIGINT).__name__)"],
                           capture_output=True, text=True, check=True)
    assert child.stdout == "default_int_handler\\n"
'''


def _pytest_started_with_ctrl_c_ignored(probe: Path, *plugins: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *plugins, str(probe)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "WARM_PYTHON": "0"}, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


def test_a_suite_started_with_ctrl_c_ignored_gives_its_processes_ctrl_c(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(textwrap.dedent(PROBE))
    plain = _pytest_started_with_ctrl_c_ignored(probe)
    assert plain.returncode == 1 and "SIG_IGN" in plain.stdout  # what a script's `&` leaves
    ours = _pytest_started_with_ctrl_c_ignored(probe, "-p", "tests.conftest")
    assert ours.returncode == 0, ours.stdout + ours.stderr
