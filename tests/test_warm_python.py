"""The warm server (tests/warm/) starts a trainer process as `python -m` would, only without
paying torch's import again, and starts anything it could not reproduce the ordinary way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.gang import process_state
from tests.warm import popen as warm

PROBE = "tests.warm.probe"


@pytest.fixture
def probe_is_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    if warm._socket_path is None:
        pytest.skip("WARM_PYTHON=0: every process starts the ordinary way")
    monkeypatch.setattr(warm, "MODULES", warm.MODULES | {PROBE})


def _probe(args: list[str], tmp_path: Path, **env: str) -> tuple[dict, subprocess.CompletedProcess]:
    done = subprocess.run([sys.executable, "-u", "-m", PROBE, *args], cwd=tmp_path,
                          env={**os.environ, "MARKER": "m1", "OMP_NUM_THREADS": "1",
                               "PYTHONPATH": str(warm.REPO), **env},
                          capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout.splitlines()[0]), done


def test_a_trainer_process_is_forked_with_its_own_argv_cwd_env_streams_and_exit_status(
        probe_is_warm: None, tmp_path: Path) -> None:
    seen, done = _probe(["--flag", "x y", "--exit", "3"], tmp_path)
    assert seen["ppid"] != os.getpid()  # the server's child: no new interpreter was started
    assert seen["torch"]  # imported once, before the fork
    assert seen["argv"] == ["--flag", "x y", "--exit", "3"]
    assert seen["cwd"] == seen["path0"] == str(tmp_path)
    assert seen["marker"] == "m1"
    assert done.stderr == "to stderr\n"
    assert done.returncode == 3


def test_a_signal_ends_a_forked_process_as_it_ends_a_started_one(
        probe_is_warm: None, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-u", "-m", PROBE, "--sleep"], cwd=tmp_path,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(warm.REPO)},
                            stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    seen = json.loads(proc.stdout.readline())
    assert seen["sid"] == seen["pid"] == proc.pid  # its own session, as start_new_session asks
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.1)
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    proc.stdout.close()


@pytest.mark.parametrize("forked", [True, False], ids=["forked", "started"])
def test_an_ended_child_s_process_group_exists_until_its_parent_waits(
        probe_is_warm: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forked: bool) -> None:
    """torchrun's agent closes a failed gang by `killpg` to each worker still unwaited; one that
    has just ended is a zombie whose group still exists, so the signal finds it. A forked
    child must stay one too until its requester has its status (the server reaped it at once:
    the agent's killpg raised ProcessLookupError, one loaded run's failure)."""
    if not forked:
        monkeypatch.setattr(subprocess, "Popen", warm._ORIGINAL_POPEN)
    proc = subprocess.Popen([sys.executable, "-u", "-m", PROBE, "--exit", "3"], cwd=tmp_path,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(warm.REPO)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while process_state(proc.pid) not in ("Z", None) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_state(proc.pid) == "Z"  # ended, not yet waited for
    os.killpg(proc.pid, signal.SIGTERM)  # what the agent sends: the group is there
    assert proc.wait(timeout=30) == 3  # its own status, not the signal's
    assert process_state(proc.pid) is None  # reaped once waited for


@pytest.mark.parametrize("ignored", [(), (signal.SIGHUP, signal.SIGINT)], ids=["handled", "ignored"])
def test_a_forked_process_takes_stop_signals_as_a_started_one_would(
        probe_is_warm: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        ignored: tuple[signal.Signals, ...]) -> None:
    """Started under `nohup` or by a script's `cmd &`, a process ignores SIGHUP or SIGINT, and so
    does every `python -m` it starts (a Ctrl-C test then waits for ever); a handled signal is
    at its default in the child (exec resets a handler). The forked child's are the same."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in ignored}
    try:
        forked, _ = _probe([], tmp_path)
        monkeypatch.setattr(subprocess, "Popen", warm._ORIGINAL_POPEN)
        started, _ = _probe([], tmp_path)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    assert forked["ppid"] != os.getpid() and started["ppid"] == os.getpid()
    assert forked["signals"] == started["signals"]
    assert (forked["signals"]["SIGINT"] == "<Handlers.SIG_IGN: 1>") == bool(ignored)


@pytest.mark.parametrize("env", [{"PYTHONPATH": f"{warm.REPO}{os.pathsep}/elsewhere"}, {"PYTHONDEVMODE": "1"},
                                 {"OMP_NUM_THREADS": "2"}, {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}])
def test_what_an_import_would_see_differently_is_started_the_ordinary_way(
        probe_is_warm: None, tmp_path: Path, env: dict[str, str]) -> None:
    seen, done = _probe([], tmp_path, **env)
    assert seen["ppid"] == os.getpid() and not seen["torch"], env
    assert done.returncode == 0


def test_an_entry_point_the_child_could_not_import_fails_as_it_would_in_a_fresh_process(
        probe_is_warm: None, tmp_path: Path) -> None:
    """The server has the repository on its path; a child started elsewhere without it must
    not find `tests` (or `trainer`) there: it is started the ordinary way, and fails so."""
    done = subprocess.run([sys.executable, "-m", PROBE], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ""})
    assert done.returncode == 1 and "No module named 'tests'" in done.stderr


def test_a_preloaded_entry_point_runs_as_main_without_a_word_a_fresh_process_would_not_say(
        probe_is_warm: None, tmp_path: Path) -> None:
    """`python -m trainer --help` from the server, which imported trainer.__main__ before the
    fork: the same help and status, and nothing more on stderr (runpy warns of a module it
    finds already imported)."""
    done = subprocess.run([sys.executable, "-m", "trainer", "--help"], cwd=warm.REPO,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(warm.REPO)})
    forked = [pid for pid, module in warm.started_by(os.getpid()) if module == "trainer"]
    assert forked  # from the server, not a new interpreter
    assert done.returncode == 0 and "--max_steps" in done.stdout
    assert done.stderr == ""
