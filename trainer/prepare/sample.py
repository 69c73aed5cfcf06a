"""A small deterministic sample in Criteo's public TSV format, and ``make prepare-sample``.

``write_sample(dir, days, rows)`` writes ``day_0`` .. ``day_<days-1>`` (the 1TB layout:
``label \\t 13 integers \\t 26 8-digit hex ids``, empty fields as in the real logs, negative
counts in the second integer column as Criteo's I2 has). Ids are drawn from a skewed
distribution so a frequency threshold maps some of them to the shared rare id, and the
label depends on a few features so a brief training run has something to learn.

``python -m trainer.prepare.sample [DIR]`` writes the sample, runs ``python -m
trainer.prepare`` on it and trains briefly on the result with ``python -m trainer.local_run``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import List

import numpy as np

from trainer.config import NUM_DENSE_FEATURES, NUM_SPARSE_FEATURES

VOCAB = [3, 50, 400, 2000] * 6 + [10, 30000]  # distinct raw ids per column


def sample_lines(day: int, rows: int) -> List[str]:
    rng = np.random.RandomState(1000 + day)
    ints = rng.geometric(0.05, size=(rows, NUM_DENSE_FEATURES)) - 1
    ints[:, 1] -= 3  # Criteo's I2 goes negative
    ranks = np.minimum(rng.zipf(1.3, size=(rows, NUM_SPARSE_FEATURES)) - 1, np.array(VOCAB) - 1)
    ids = (ranks * 2654435761 + np.arange(NUM_SPARSE_FEATURES) * 40503) % (1 << 32)
    score = 0.02 * ints[:, 0] + (ranks[:, 3] % 3 == 0) - 0.8 + rng.normal(0, 0.5, rows)
    labels = (score > 0).astype(int)
    empty_int = rng.random_sample((rows, NUM_DENSE_FEATURES)) < 0.1
    empty_id = rng.random_sample((rows, NUM_SPARSE_FEATURES)) < 0.05
    lines = []
    for r in range(rows):
        dense = ["" if empty_int[r, j] else str(ints[r, j]) for j in range(NUM_DENSE_FEATURES)]
        cats = ["" if empty_id[r, j] else f"{ids[r, j]:08x}" for j in range(NUM_SPARSE_FEATURES)]
        lines.append("\t".join([str(labels[r]), *dense, *cats]) + "\n")
    return lines


def write_sample(directory: str, days: int = 3, rows: int = 4000) -> List[str]:
    os.makedirs(directory, exist_ok=True)
    paths = []
    for day in range(days):
        path = os.path.join(directory, f"day_{day}")
        with open(path, "w") as fh:
            fh.writelines(sample_lines(day, rows))
        paths.append(path)
    return paths


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.prepare.sample",
                                     description="Write a small Criteo TSV sample, prepare it, train briefly on it.")
    parser.add_argument("dir", nargs="?", default=os.path.join("out", "prepare-sample"),
                        help="Where raw/ and data/ go (default: out/prepare-sample).")
    root = parser.parse_args(argv).dir
    raw, data = os.path.join(root, "raw"), os.path.join(root, "data")
    write_sample(raw, days=4, rows=5000)
    print(f"sample: 4 Criteo TSV days of 5,000 rows in {raw}", flush=True)
    prepare = [sys.executable, "-m", "trainer.prepare", "--source", raw, "--output", data,
               "--frequency_threshold", "2", "--workers", "2"]
    print("$ " + " ".join(prepare), flush=True)
    if subprocess.call(prepare):
        return 1
    # No --num_embeddings_per_feature: the trainer takes the table sizes from layout.json.
    train = [sys.executable, "-m", "trainer.local_run", "--dataset_path", data,
             "--batch_size", "128", "--max_steps", "60", "--log_every", "20", "--eval_every", "60",
             "--eval_batches", "4", "--checkpoint_every", "60"]
    print("$ " + " ".join(train), flush=True)
    return subprocess.call(train)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
