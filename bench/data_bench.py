"""Data delivered to one rank's training loop, per format and batch size, on this machine.

Writes Criteo files in a temp folder (torchrec's one-hot .npy layout, MLPerf's multi-hot .npz
and raw TSV), then reads
them the way the trainer does (``CriteoSource`` behind ``AgreedBatches``: batches built on a
background thread while the loop runs) and prints, per format and batch size:
- delivered: samples/s reaching a loop that does nothing else (the reader's ceiling while
  sharing the process with the loop);
- wait: the share of the step the loop waits for its next batch when each step takes as long
  as a GPU step at the target rate (batch / 150k samples/s). The step is a sleep: on a GPU
  node the training thread spends its step waiting on CUDA with the GIL released, which a
  sleep reproduces; this machine has no GPU to run the real step.
Target (issue 14): 150k samples/s per rank (16 GPUs at 1M samples/s need 62.5k) and a wait
under 2% of the step.

    python bench/data_bench.py [--rows 1000000] [--steps 60]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from trainer.data.criteo import CriteoSource  # noqa: E402
from trainer.data.prefetch import share_the_gil_finely  # noqa: E402
from trainer.train import AgreedBatches, StopFlag  # noqa: E402

TARGET = 150_000
TABLES = [10_000_000] * 26


# MLPerf DLRM-DCNv2's ids per feature (mlcommons/training recommendation_v2/torchrec_dlrm README).
MLPERF_MULTI_HOT_SIZES = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10,
                          3, 1, 1]


def write_days(folder: str, rows: int) -> tuple[str, str, str]:
    """Two days in each format (the second held out): (npy, multi-hot npz, tsv) folders."""
    npy, npz, tsv = (os.path.join(folder, name) for name in ("npy", "npz", "tsv"))
    for path in (npy, npz, tsv):
        os.makedirs(path)
    rng = np.random.default_rng(0)
    for day in range(2):
        ints = rng.integers(-2, 1000, (rows, 13))
        ids = rng.integers(0, 2**32, (rows, 26), dtype=np.uint64)
        labels = (rng.random(rows) < 0.034).astype(np.int32)
        np.save(f"{npy}/day_{day}_dense.npy", np.log(ints + 4, dtype=np.float32))
        np.save(f"{npy}/day_{day}_sparse.npy", ids.astype(np.int64))
        np.save(f"{npy}/day_{day}_labels.npy", labels.reshape(-1, 1))
        for part in ("dense", "labels"):
            os.link(f"{npy}/day_{day}_{part}.npy", f"{npz}/day_{day}_{part}.npy")
        np.savez(f"{npz}/day_{day}_sparse_multi_hot.npz",
                 **{str(k): rng.integers(0, 40_000_000, (rows, size), dtype=np.int32)
                    for k, size in enumerate(MLPERF_MULTI_HOT_SIZES)})
        with open(f"{tsv}/day_{day}", "w") as fh:
            for start in range(0, rows, 100_000):
                end = min(rows, start + 100_000)
                fh.write("".join(
                    "\t".join([str(labels[i]), *map(str, ints[i]), *(f"{v:08x}" for v in ids[i])]) + "\n"
                    for i in range(start, end)))
    return npy, npz, tsv


def measure(path: str, batch: int, steps: int, step_seconds: float) -> tuple[float, float]:
    """(samples/s delivered, share of the time spent waiting for data) over ``steps`` steps."""
    source = CriteoSource(path, TABLES, batch_size=batch, rank=0, world_size=1)
    batches = AgreedBatches(source.train_batches(0, 0), steps + 8, StopFlag(), None)
    try:
        for _ in range(8):  # warm-up: index built, files mapped, queue filled
            next(batches)
        waited, started = 0.0, time.perf_counter()
        for _ in range(steps):
            asked = time.perf_counter()
            next(batches)
            waited += time.perf_counter() - asked
            if step_seconds:
                time.sleep(step_seconds)
        elapsed = time.perf_counter() - started
    finally:
        batches.close()
    return steps * batch / elapsed, waited / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per day file")
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    share_the_gil_finely()  # as the trainer does
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=0, world_size=1)
        started = time.perf_counter()
        npy, npz, tsv = write_days(folder, args.rows)
        print(f"wrote 2 days x {args.rows:,} rows per format in {time.perf_counter() - started:.0f}s")
        print(f"{'format':<8} {'batch':>6} {'delivered/s':>12} {'':>5} {'wait at target step':>20}")
        for name, path in (("npy", npy), ("npz", npz), ("tsv", tsv)):
            for batch in (2048, 8192):
                steps = min(args.steps, args.rows // batch - 10)
                rate, _ = measure(path, batch, steps, 0.0)
                _, wait = measure(path, batch, steps, batch / TARGET)
                verdict = "PASS" if rate >= TARGET and wait < 0.02 else "MISS"
                print(f"{name:<8} {batch:>6} {rate:>12,.0f} {verdict:>5} {100 * wait:>19.1f}%")
        dist.destroy_process_group()
    print("npz: MLPerf's multi-hot layout (214 ids per sample), read memory-mapped")


if __name__ == "__main__":
    main()
