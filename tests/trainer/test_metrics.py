"""Training-window metrics: AUC from reduced histograms matches the exact AUC, across real
ranks, without any rank receiving another's logits."""

from __future__ import annotations

import os
import socket

import numpy as np
import pytest
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


def test_the_sort_based_auc_equals_the_rank_sum_auc_with_ties_on_this_device():
    """The evaluation's exact AUC, sorted with torch where the scores live, equals the host's
    Mann-Whitney rank sum (tied scores averaged) on random data with many ties, tensors or
    arrays, and is NaN with one class, as before."""
    from trainer.metrics import auc_by_ranks

    rng = np.random.default_rng(7)
    for n, levels in ((1, 0), (2_000, 5), (50_000, 300), (200_001, 0)):
        labels = (rng.random(n) < 0.2).astype(np.float32)
        scores = rng.normal(0, 1, n) + labels
        if levels:  # heavy ties: a few distinct scores, both classes inside each
            scores = np.round(scores * levels / 4) / levels
        scores = scores.astype(np.float32)
        expected = auc_by_ranks(scores.astype(np.float64), labels)
        if n == 1:
            assert np.isnan(expected) and np.isnan(auc(torch.from_numpy(scores), torch.from_numpy(labels)))
            continue
        assert len(np.unique(scores)) < n or levels == 0
        got = auc(torch.from_numpy(scores), torch.from_numpy(labels), torch.device("cpu"))
        assert got == pytest.approx(expected, abs=1e-12)
        assert auc(scores, labels) == got
    tied = np.zeros(10, np.float32), np.array([0, 1] * 5, np.float32)
    assert auc(*tied) == auc_by_ranks(*tied) == 0.5


def test_held_out_figures_are_the_float64_loss_auc_count_and_rate_of_the_gathered_samples():
    from trainer.metrics import auc_by_ranks, held_out_figures

    logits, labels = _criteo_like(30_000, 3)
    figures = held_out_figures(np.stack([logits, labels]), torch.device("cpu"))
    x, y = logits.astype(np.float64), labels.astype(np.float64)
    assert float(figures[0]) == pytest.approx(np.mean(np.logaddexp(0.0, x) - y * x), rel=1e-12)
    assert float(figures[1]) == pytest.approx(auc_by_ranks(x, y), abs=1e-12)
    assert (int(figures[2]), float(figures[3])) == (30_000, pytest.approx(y.mean()))


def _pairwise_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The AUC by its definition: every (positive, negative) pair, a win when the positive
    scores higher, half a win when tied."""
    pos, neg = scores[labels > 0.5], scores[labels <= 0.5]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def test_the_gathered_evaluation_is_reordered_and_scored_where_it_lies_never_on_the_host(
        monkeypatch):
    """Rank 0's gathered [logits; labels] (3 ranks' slices, rank-major, uneven per batch, one
    empty) are put back in held-out order and scored where they lie (rank 0's GPU where it has
    one): no copy to the host, no numpy. The AUC is the pairwise count's, ties included."""
    from trainer.metrics import held_out_figures, held_out_order

    rng = np.random.default_rng(11)
    world, per_rank = 3, np.array([[5, 4, 2], [5, 0, 3], [5, 4, 1]])  # [rank, batch] scored
    held_out = []  # (rank, batch) -> its samples, in held-out order: batch after batch
    slices = {}
    for b in range(per_rank.shape[1]):
        for r in range(world):
            n = per_rank[r, b]
            labels = (rng.random(n) < 0.4).astype(np.float32)
            logits = (np.round(rng.normal(0, 1, n) * 2) / 2 + labels).astype(np.float32)  # ties
            slices[r, b] = np.stack([logits, labels])
            held_out.append(slices[r, b])
    expected = np.concatenate(held_out, axis=1)
    gathered = torch.from_numpy(np.concatenate(
        [slices[r, b] for r in range(world) for b in range(per_rank.shape[1])], axis=1))
    counts = torch.from_numpy(per_rank.reshape(1, -1).astype(np.float32))

    def no_host(*_args, **_kwargs):
        raise AssertionError("the evaluation's scores were copied to the host")

    monkeypatch.setattr(torch.Tensor, "numpy", no_host)
    monkeypatch.setattr(torch.Tensor, "cpu", no_host)
    monkeypatch.setattr(np, "asarray", no_host)
    ordered = held_out_order(gathered, counts, world)
    assert isinstance(ordered, torch.Tensor) and ordered.device == gathered.device
    figures = held_out_figures(ordered)
    monkeypatch.undo()

    assert np.array_equal(ordered.numpy(), expected)
    x, y = expected[0].astype(np.float64), expected[1].astype(np.float64)
    assert len(np.unique(x)) < len(x)  # tied scores across both classes
    assert float(figures[1]) == _pairwise_auc(x, y)
    assert float(figures[0]) == pytest.approx(np.mean(np.logaddexp(0.0, x) - y * x), rel=1e-12)
    assert int(figures[2]) == per_rank.sum()
