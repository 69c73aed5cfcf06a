"""Helpers: run the trainer as users do (a subprocess, under torchrun when 2 ranks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional


REPO = Path(__file__).resolve().parents[2]
# Tiny tables and batches: the behaviours under test do not need the default sizes.
TINY = ["--num_embeddings", "500", "--batch_size", "32", "--dense_arch_layer_sizes", "16,8",
        "--over_arch_layer_sizes", "16,1", "--embedding_dim", "8", "--eval_batches", "2"]


def trainer_cmd(args: List[str], nproc: int = 1) -> List[str]:
    if nproc == 1:
        return [sys.executable, "-m", "trainer", *args]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={nproc}", "-m", "trainer", *args]


def env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def run_trainer(args: List[str], nproc: int = 1, timeout: int = 180) -> subprocess.CompletedProcess:
    proc = subprocess.run(trainer_cmd(args, nproc), cwd=REPO, env=env(), capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"trainer failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return proc


def records(path: Path) -> List[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summary(path: Path) -> dict:
    found: Optional[dict] = next((r for r in reversed(records(path)) if r["event"] == "summary"), None)
    assert found is not None, f"no summary in {path}"
    return found



def train_until(step: int, checkpoint_uri: str, env: dict, metrics: Path,
                timeout: Optional[int] = 180) -> None:
    """One trainer process (TINY model, a save every 2 steps) up to `step` against a
    checkpoint store, as a pod runs it: the resume-across-stores and across-destroy tests call
    it twice and read `resumed_from` from the metrics."""
    proc = subprocess.run([sys.executable, "-m", "trainer", *TINY, "--max_steps", str(step),
                           "--checkpoint_every", "2", "--checkpoint_dir", checkpoint_uri,
                           "--metrics_file", str(metrics)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"trainer failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
