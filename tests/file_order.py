"""Heaviest test files first, so that `make test`'s workers finish together.

`make test` hands whole files to three workers (`-n 3 --dist loadfile`). xdist's own order is by
number of tests, which sends the files that run real processes (the gang, the trainer, the
sizing advisor: few tests, minutes each) last, where one worker runs them alone while the others
have nothing left. Handing out the longest first (the classic longest-processing-time rule)
leaves only short files for the end.

A file's weight is its seconds in the last `make test` on this machine (pytest's cache,
`.pytest_cache/v/torchrec-cloud/file-seconds`), else tests/file_seconds.json (a fresh clone
has no cache: each file's seconds in a whole distributed run here, scaled to a quiet 2-core
machine; only their order matters), else its number of tests times
PER_TEST_SECONDS.
The order only changes which worker runs a file when: every file still runs whole, in its
own order, on one worker.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

CACHE_KEY = "torchrec-cloud/file-seconds"
SEED = Path(__file__).with_name("file_seconds.json")
PER_TEST_SECONDS = 0.3  # a file neither the cache nor the seed knows (most tests are quick)


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def known_seconds(config: pytest.Config) -> dict[str, float]:
    """Seconds per file: the seed, overridden by what the last distributed run measured."""
    seconds: dict[str, float] = json.loads(SEED.read_text()) if SEED.exists() else {}
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    if cache is not None:
        seconds.update(cache.get(CACHE_KEY, {}))
    return seconds


def heaviest_first(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """Reorder in place: files by weight, heaviest first; each file's tests stay together and
    in their collected order (module-scoped fixtures are made once per file)."""
    counts = Counter(file_of(item.nodeid) for item in items)
    weight = {name: seconds.get(name, PER_TEST_SECONDS * count) for name, count in counts.items()}
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(file_of(item.nodeid), index)
    items.sort(key=lambda item: (-weight[file_of(item.nodeid)], first_seen[file_of(item.nodeid)]))


def remember(config: pytest.Config, measured: dict[str, float]) -> None:
    """Store this run's seconds per file for the next run's order (kept for files not run)."""
    cache = getattr(config, "cache", None)
    if cache is None or not measured:
        return
    stored = dict(cache.get(CACHE_KEY, {}))
    stored.update({name: round(value, 1) for name, value in measured.items()})
    cache.set(CACHE_KEY, stored)
