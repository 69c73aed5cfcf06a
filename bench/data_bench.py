"""Data delivered to one rank's training loop, per format, batch size and reader setup.

Writes Criteo files in a temp folder (torchrec's one-hot .npy layout, MLPerf's multi-hot .npz
and raw TSV), then reads them the way the trainer does (``BatchStream`` behind
``AgreedBatches``: with ``--data_workers`` 0 one background thread in the process, with 2 two
reader processes handing batches over in order) and prints, per format, batch size and workers:
- reader: samples/s of the reader alone (one thread, ``source.tensors``, nothing else running);
- delivered: samples/s reaching a loop that does nothing else;
- wait (GPU-like step): the share of the time the loop waits for its next batch when each
  step takes as long as a GPU step at the target rate (batch / 150k s). The step is a sleep: on
  a GPU node the training thread spends its step waiting on CUDA with the GIL released, which
  a sleep reproduces; this machine has no GPU (and 2 cores: the real CPU model is ~90 ms per
  2048-sample step, 40x too slow to pace a 150k samples/s loop).
- wait (CPU-bound step): the same with a step that spins in Python for that long (holds the
  GIL all step: the worst case for a reader thread; reader processes are not affected but
  share this machine's 2 cores with it).
PASS needs delivered >= 150k samples/s and a GPU-like-step wait under 2% (issue 14; 16 GPUs
at 1M samples/s need 62.5k per rank).

    python bench/data_bench.py [--rows 1000000] [--steps 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Callable, Optional

import numpy as np
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from trainer.config import parse_config  # noqa: E402
from trainer.data.loader import READERS, BatchStream, cores_per_rank  # noqa: E402
from trainer.data.prefetch import share_the_gil_finely  # noqa: E402
from trainer.data.source import make_source  # noqa: E402
from trainer.train import AgreedBatches, StopFlag  # noqa: E402

TARGET = 150_000
WAIT_LIMIT = 0.02
TABLE_ROWS = 10_000_000
WARM_UP = 16  # steps: two of AgreedBatches' 8-batch refills


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


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def reader_rate(path: str, batch: int, steps: int) -> float:
    """Samples/s of the reader alone: this rank's batches built in this thread, one by one."""
    cfg = parse_config(["--dataset_path", path, "--num_embeddings", str(TABLE_ROWS)])
    tensors = make_source(cfg, 0, 1, batch).tensors("train", 0, 0)
    next(tensors)  # index built, files mapped
    started = time.perf_counter()
    for _ in range(steps):
        next(tensors)
    return steps * batch / (time.perf_counter() - started)


def measure(path: str, batch: int, steps: int, workers: int,
            step: Optional[Callable[[float], None]]) -> tuple[float, float]:
    """(samples/s delivered, share of the time spent waiting for data) over ``steps`` steps of
    a loop whose step is ``step(batch / TARGET)`` (None: no work)."""
    cfg = parse_config(["--dataset_path", path, "--num_embeddings", str(TABLE_ROWS),
                        "--batch_size", str(batch)])
    stream = BatchStream(make_source(cfg, 0, 1, batch), cfg, 0, 1, batch, "train", 0, 0,
                         workers=workers)
    batches = AgreedBatches(stream, steps + WARM_UP, StopFlag(), None)
    try:
        # Warm-up at the loop's own pace: readers started, index built, files mapped, and the
        # queue as full as the reader keeps it in steady state. Taken without the step, the
        # warm-up drains the queue and the first measured refill pays for the start (up to
        # 66 ms on TSV at batch 2048: 5 points of wait over 60 steps that a 100k-step run
        # pays once).
        for _ in range(WARM_UP):
            next(batches)
            if step is not None:
                step(batch / TARGET)
        waited, started = 0.0, time.perf_counter()
        for _ in range(steps):
            asked = time.perf_counter()
            next(batches)
            waited += time.perf_counter() - asked
            if step is not None:
                step(batch / TARGET)
        elapsed = time.perf_counter() - started
    finally:
        stream.close()
    return steps * batch / elapsed, waited / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per day file")
    parser.add_argument("--steps", type=int, default=200,
                        help="measured steps per setting (fewer where a day has fewer batches)")
    args = parser.parse_args()
    share_the_gil_finely()  # as the trainer does
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=0, world_size=1)
        started = time.perf_counter()
        npy, npz, tsv = write_days(folder, args.rows)
        print(f"wrote 2 days x {args.rows:,} rows per format in {time.perf_counter() - started:.0f}s; "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; target >= {TARGET:,} samples/s per rank, wait < "
              f"{100 * WAIT_LIMIT:.0f}% of a GPU-like step")
        print(f"{'format':<6} {'batch':>5} {'workers':>7} {'reader/s':>10} {'delivered/s':>12} "
              f"{'wait GPU-like':>13} {'wait CPU-bound':>14}  verdict")
        for name, path in (("npy", npy), ("npz", npz), ("tsv", tsv)):
            for batch in (2048, 8192):
                steps = min(args.steps, args.rows // batch - WARM_UP)  # day 0 trains
                if steps < 5:
                    print(f"{name:<6} {batch:>5}: too few rows for a measurement (--rows)")
                    continue
                alone = reader_rate(path, batch, steps)
                # --data_workers unset (trainer/data/loader.py readers_for)
                default = READERS if name == "tsv" and cores_per_rank() > READERS else 0
                for workers in (0, 2):
                    rate, _ = measure(path, batch, steps, workers, None)
                    _, wait = measure(path, batch, steps, workers, time.sleep)
                    _, busy = measure(path, batch, steps, workers, _spin)
                    verdict = "PASS" if rate >= TARGET and wait < WAIT_LIMIT else "MISS"
                    why = "" if verdict == "PASS" else (" (rate)" if rate < TARGET else " (wait)")
                    mark = "*" if workers == default else " "
                    print(f"{name:<6} {batch:>5} {workers:>6}{mark} {alone:>10,.0f} {rate:>12,.0f} "
                          f"{100 * wait:>12.1f}% {100 * busy:>13.1f}%  {verdict}{why}", flush=True)
        dist.destroy_process_group()
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs "
          "(above the CPU count: other work shared the machine and the figures are low)")
    print("npz: MLPerf's multi-hot layout (214 ids per sample), read memory-mapped; "
          "workers 0 = a thread in the trainer process, 2 = two reader processes (--data_workers); "
          "* = the trainer's default for the format")


if __name__ == "__main__":
    main()
