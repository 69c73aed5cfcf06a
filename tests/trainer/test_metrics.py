"""Training-window metrics: AUC from reduced histograms matches the exact AUC, across real
ranks, without any rank receiving another's logits."""

from __future__ import annotations

import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from trainer.metrics import AUC_BINS, Window, auc, histogram_auc


def _criteo_like(n: int, seed: int):
    """Click logits of a fair model on Criteo-like data (~3.4% positives, AUC ~0.8)."""
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.034).astype(np.float32)
    logits = rng.normal(-3.6, 1.0, n) + 1.2 * labels  # positives score higher on average
    return logits.astype(np.float32), labels


def _hist(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    window = Window()
    window.add(torch.tensor(0.0), torch.from_numpy(logits), torch.from_numpy(labels))
    return window.counts.numpy().reshape(2, AUC_BINS)


def test_histogram_auc_is_within_a_thousandth_of_the_exact_auc():
    logits, labels = _criteo_like(200_000, seed=1)
    exact = auc(logits, labels)
    assert 0.7 < exact < 0.9
    assert abs(histogram_auc(_hist(logits, labels)) - exact) < 1e-3
    # Scores far outside the binned range still order correctly at the ends.
    assert histogram_auc(_hist(np.array([-80.0, 90.0], np.float32), np.array([0.0, 1.0], np.float32))) == 1.0
    # Tied scores count one half, as in the exact AUC; one class only is undefined.
    tied = np.zeros(10, np.float32), np.array([0, 1] * 5, np.float32)
    assert histogram_auc(_hist(*tied)) == auc(*tied) == 0.5
    assert np.isnan(histogram_auc(_hist(logits[:5], np.zeros(5, np.float32))))


def _rank(rank: int, port: int, out: "mp.Queue") -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)

    def refuse(*args, **kwargs):
        raise AssertionError("a log step must not gather logits")

    dist.all_gather = refuse  # what the old window did at every log step
    window = Window()
    logits, labels = _criteo_like(60_000, seed=7)
    mine = slice(rank * 30_000, (rank + 1) * 30_000)
    for step in range(3):  # three steps of 10,000 samples on each rank
        part = slice(mine.start + step * 10_000, mine.start + (step + 1) * 10_000)
        window.add(torch.tensor(0.5 + rank), torch.from_numpy(logits[part]), torch.from_numpy(labels[part]))
    out.put((rank, window.reduce()))
    dist.destroy_process_group()


def test_two_ranks_report_the_auc_and_loss_of_all_their_samples_without_gathering_logits():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    logits, labels = _criteo_like(60_000, seed=7)
    for values in results.values():  # every rank has the global figures
        assert abs(values["auc"] - auc(logits, labels)) < 1e-3
        assert values["auc"] == histogram_auc(_hist(logits, labels))
        assert values["loss"] == (3 * 0.5 + 3 * 1.5) / 6
        assert values["samples"] == 60_000
