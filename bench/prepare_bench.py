"""The preparation's passes on synthetic Criteo days: rows/s and peak memory per worker.

Writes ``--days`` days of ``--rows`` rows in Criteo's public TSV format, where the columns that
are largest in Criteo 1TB (0, 9, 19, 20, 21: tens of millions of ids each) get a new id on most
rows and the others draw from a few thousand, then runs ``python -m trainer.prepare`` on them as
the stack's Job does (one spawned worker per day), once one-hot with a frequency threshold and
once with MLPerf's multi-hot sizes, and prints what its log reports per pass. The figures size
the Job (trainer/prepare/README.md: a real day is 195M rows; memory grows with a day's distinct
ids per column, speed does not).

    python bench/prepare_bench.py [--rows 1000000] [--days 2]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from trainer.config import NUM_DENSE_FEATURES, NUM_SPARSE_FEATURES  # noqa: E402

LARGE_COLUMNS = (0, 9, 19, 20, 21)  # the 40M-capped tables of MLPerf's sizes (README)
# MLPerf DLRM-DCNv2's ids per feature (mlcommons/training recommendation_v2/torchrec_dlrm README).
MLPERF_MULTI_HOT_SIZES = "3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1"
# "scan 1/2 day_0: 1,000,000 rows, 0.2 min, 91,022 rows/s, worker peak 480 MiB"
# "day 1/2 day_0 done, 1,000,000 rows, 0.2 min, 101,415 rows/s, worker peak 520 MiB"
# "vocabulary 3/26 column 2: 1,234 distinct ids, table 1,000, worker peak 300 MiB"
LINE = re.compile(r"prepare: (?:(?P<scan>scan)|(?P<vocab>vocabulary)|day) \d+/\d+ .*?"
                  r"(?:(?P<rate>[\d,]+) rows/s, )?worker peak (?P<peak>[\d,]+) MiB")


def write_day(path: str, rows: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ints = rng.geometric(0.05, size=(rows, NUM_DENSE_FEATURES)) - 1
    ids = rng.zipf(1.3, size=(rows, NUM_SPARSE_FEATURES)) % 5000 * 2654435761 % (1 << 32)
    ids[:, LARGE_COLUMNS] = rng.integers(0, 1 << 32, size=(rows, len(LARGE_COLUMNS)))
    labels = rng.random(rows) < 0.034
    with open(path, "w") as fh:
        for start in range(0, rows, 100_000):
            end = min(rows, start + 100_000)
            fh.write("".join(
                "\t".join([str(int(labels[r])), *map(str, ints[r]), *(f"{v:08x}" for v in ids[r])]) + "\n"
                for r in range(start, end)))


def run(raw: str, out: str, workers: int, flags: List[str]) -> Dict[str, List[tuple]]:
    """Per pass, (rows/s or None, peak MiB) of every task line the preparation logged."""
    argv = [sys.executable, "-m", "trainer.prepare", "--source", raw, "--output", out,
            "--workers", str(workers), *flags]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    passes: Dict[str, List[tuple]] = {"scan": [], "vocabulary": [], "write": []}
    for match in LINE.finditer(proc.stdout):
        name = "scan" if match["scan"] else "vocabulary" if match["vocab"] else "write"
        rate = int(match["rate"].replace(",", "")) if match["rate"] else None
        passes[name].append((rate, int(match["peak"].replace(",", ""))))
    return passes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per day file")
    parser.add_argument("--days", type=int, default=2, help="day files (one worker each)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        raw = os.path.join(folder, "raw")
        os.makedirs(raw)
        started = time.perf_counter()
        for day in range(args.days):
            write_day(os.path.join(raw, f"day_{day}"), args.rows, day)
        size = sum(os.path.getsize(os.path.join(raw, f)) for f in os.listdir(raw))
        print(f"wrote {args.days} days x {args.rows:,} rows ({size / args.days / 1e6:,.0f} MB each) in "
              f"{time.perf_counter() - started:.0f}s; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
              f"{args.days} spawned workers")
        print(f"{'run':<22} {'pass':<11} {'rows/s per worker':>18} {'worker peak MiB':>16}")
        for label, flags in (("one-hot, threshold 3", ["--frequency_threshold", "3"]),
                             ("MLPerf multi-hot", ["--max_ind_range", "40000000",
                                                   "--multi_hot_sizes", MLPERF_MULTI_HOT_SIZES])):
            passes = run(raw, os.path.join(folder, label.split(",")[0].replace(" ", "-")), args.days, flags)
            for name, tasks in passes.items():
                rates = [rate for rate, _ in tasks if rate is not None]
                shown = f"{min(rates):,}-{max(rates):,}" if rates else "-"
                print(f"{label:<22} {name:<11} {shown:>18} {max(peak for _, peak in tasks):>16,}")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print("vocabulary: one task per column (26), no row rate; a worker's peak is its process's "
          "maximum resident memory so far, so later passes include earlier ones run in it")


if __name__ == "__main__":
    main()
