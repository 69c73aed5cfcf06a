"""The suite's own clock: tests judge dates against a fixed day, never the real one.

Whatever day `make test` runs (`faketime '2028-06-01' make test` included), the Pulumi program
and its rules see PINNED_DAY: a test that depends on the calendar states the day it means.
Tests that run real processes beside them (torchrun gangs, the preparation's wait script,
image builds) keep the host's clock: those processes read the operating system's, and the two
must agree.

Under `faketime DATE`, libfaketime is preloaded into pytest. It also breaks timed waits inside
the process (observed with libfaketime 0.9.10: `threading.Condition.wait(0.3)` never returns,
and with FAKETIME_DONT_FAKE_MONOTONIC=1 `time.sleep` raises EINVAL), which hung the in-process
trainer tests; and a faked date inside pytest but not in the processes a test starts set a
heartbeat written here against a shell's `date` there (observed). So pytest restarts itself
once without it: whatever DATE is, the program's tests run on PINNED_DAY and the real
processes on the host's clock, as on any other day (the header names DATE).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
import time_machine

from tests import file_order
from tests.warm import popen as warm

PINNED_DAY = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)
REAL_CLOCK_MODULES = ("test_gang", "test_image", "test_prepare")
FAKETIME_LIBRARY = "faketime"
SUITE_DAY_ENV = "TORCHREC_CLOUD_SUITE_DAY"  # the date `faketime` gave the run, ISO 8601
GC_FIRST_THRESHOLD = 10_000  # allocations between young-generation scans (Python's default: 700)


# Seconds per test file in this run (setup, call and teardown), summed where the reports land:
# in the controller under xdist. tests/file_order.py orders the next distributed run by them.
FILE_SECONDS: dict[str, float] = defaultdict(float)


def _distributes_files(config: pytest.Config) -> bool:
    return config.getoption("dist", "no") == "loadfile"


def take_ctrl_c_as_from_a_terminal() -> None:
    """A suite started in the background by a script (`make test &`, `nohup`) inherits SIGINT
    ignored, and so would every process it starts: the tests that give a command Ctrl-C
    (`logs --follow`, `tensorboard`) then wait for ever. The suite takes SIGINT as a terminal's
    foreground job does, with the interpreter's handler; its processes get it at its default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    """Take Ctrl-C as from a terminal. Hand out whole files heaviest first (tests/file_order.py:
    the workers' collection is in that order, and xdist must keep it rather than sort by number
    of tests). Then re-run this pytest command without libfaketime, carrying the date it faked."""
    take_ctrl_c_as_from_a_terminal()
    if _distributes_files(config):
        config.option.loadscopereorder = False
    preload = os.environ.get("LD_PRELOAD", "").split(":")
    if not any(FAKETIME_LIBRARY in lib for lib in preload):
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKETIME")}
    env[SUITE_DAY_ENV] = datetime.now(timezone.utc).isoformat()  # the date libfaketime gave
    kept = [lib for lib in preload if lib and FAKETIME_LIBRARY not in lib]
    if kept:
        env["LD_PRELOAD"] = ":".join(kept)
    else:
        env.pop("LD_PRELOAD", None)
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:  # give the new process the terminal, not pytest's capture file
        capture.stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Each process that runs tests starts a warm server (tests/warm/): the trainer processes
    its tests start are forked from an interpreter that imported torch once. WARM_PYTHON=0
    starts every process the ordinary way (the same tests, about twice the CPU)."""
    config = session.config
    controller = config.getoption("dist", "no") != "no" and not hasattr(config, "workerinput")
    if controller or os.environ.get("WARM_PYTHON") == "0":
        return
    warm.start_server(Path(tempfile.mkdtemp(prefix="warm-python-")))


def pytest_unconfigure(config: pytest.Config) -> None:
    warm.stop_server()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Keep the collector off what importing and collecting left behind: a worker holds about
    700k objects once torch, torchrec and three clouds' Pulumi SDKs are imported, and Python's
    cycle collector walked them all again and again (a quarter of each stack run's CPU was
    spent there, measured). `gc.freeze` sets them aside for good; the larger first threshold
    lets each program run's short-lived Outputs go by reference count before a scan. Nothing
    is left uncollected: cycles made by the tests are still found, only less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_FIRST_THRESHOLD, *gc.get_threshold()[1:])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: its order is the one handed out
        file_order.heaviest_first(items, file_order.known_seconds(config))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    FILE_SECONDS[file_order.file_of(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller of a distributed run keeps each file's seconds for the next run's order."""
    config = session.config
    if _distributes_files(config) and not hasattr(config, "workerinput"):
        file_order.remember(config, FILE_SECONDS)


def pytest_report_header(config: pytest.Config) -> str | None:
    day = os.environ.get(SUITE_DAY_ENV)
    return (f"faketime gave {day}: restarted without libfaketime; program tests on "
            f"{PINNED_DAY.date()}, real processes on the host clock") if day else None


def _uses_real_clock(request: pytest.FixtureRequest) -> bool:
    path = request.node.path
    return "trainer" in path.parent.name or path.stem in REAL_CLOCK_MODULES


@pytest.fixture(autouse=True, scope="module")
def pinned_clock(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every other test module runs on PINNED_DAY (the clock ticks on from there); module
    scope, so the stack runs a module shares are made on it too."""
    if _uses_real_clock(request):
        yield
        return
    with time_machine.travel(PINNED_DAY, tick=True):
        yield


@pytest.fixture(autouse=True)
def no_stack_named() -> Iterator[None]:
    """Each test starts with no stack named in fix commands (infra/settings/errors.py
    use_stack): a program run names its stack for the rest of the process, as `pulumi up`
    does, and a later test must not inherit it."""
    from infra.settings.errors import use_stack

    use_stack(None)
    yield
    use_stack(None)
