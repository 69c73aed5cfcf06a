"""The suite's own clock: tests judge dates against a fixed day, never the real one.

Whatever day `make test` runs (`faketime '2028-06-01' make test` included), the Pulumi program
and its rules see PINNED_DAY: a test that depends on the calendar states the day it means.
Tests that run real processes beside them (torchrun gangs, the preparation's wait script,
image builds) keep the real clock: those processes read the operating system's, and the two
must agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
import time_machine

PINNED_DAY = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)
REAL_CLOCK_MODULES = ("test_gang", "test_image", "test_prepare")


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
