"""The suite's own clock: tests judge dates against a fixed day, never the real one.

Whatever day `make test` runs (`faketime '2028-06-01' make test` included), the Pulumi program
and its rules see PINNED_DAY: a test that depends on the calendar states the day it means.
Tests that run real processes beside them (torchrun gangs, the preparation's wait script,
image builds) keep the real clock: those processes read the operating system's, and the two
must agree.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
import time_machine

PINNED_DAY = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)
FAKETIME_LIBRARY = "faketime"
REAL_CLOCK_MODULES = ("test_gang", "test_image", "test_prepare")


def pytest_configure(config: pytest.Config) -> None:
    """Every process a test starts (torchrun gangs, Azurite, the trainer against emulators,
    image builds) runs on the operating system's clock, as a pod does. `faketime DATE make test`
    preloads libfaketime into pytest; inherited by a trainer, its frozen clock hung the run
    (observed). The suite itself keeps the fake date: the program's rules never read it."""
    for key in [k for k in os.environ if k.startswith("FAKETIME")]:
        del os.environ[key]
    preload = [lib for lib in os.environ.get("LD_PRELOAD", "").split(":")
               if lib and FAKETIME_LIBRARY not in lib]
    if preload:
        os.environ["LD_PRELOAD"] = ":".join(preload)
    else:
        os.environ.pop("LD_PRELOAD", None)


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
