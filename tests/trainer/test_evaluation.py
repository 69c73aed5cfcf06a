"""Evaluation at scale, run as users run it (2 gloo ranks under torchrun): every held-out
sample scored once, the last partial global batch included, and the exact AUC and loss
computed once (rank 0) from all of them; the run stops once the target AUC is reached."""

from __future__ import annotations

import numpy as np

from tests.trainer.helpers import TINY, records, run_trainer, summary

TRAIN_ROWS = 320
HELD_OUT_ROWS = 202  # day 1: validation = its first 101 rows, test = the other 101
BATCH = 16  # per rank: global batch 32, and 101 = 3 x 32 + 5


def _write_days(folder) -> np.ndarray:
    """Two days in torchrec's .npy layout; returns day 1's labels."""
    rng = np.random.default_rng(5)
    labels = None
    for day, rows in enumerate((TRAIN_ROWS, HELD_OUT_ROWS)):
        dense = rng.standard_normal((rows, 13)).astype(np.float32)
        sparse = rng.integers(0, 500, (rows, 26)).astype(np.int32)
        labels = (rng.random((rows, 1)) < 0.2 + 0.6 * (sparse[:, :1] % 2)).astype(np.int32)
        for part, array in (("dense", dense), ("sparse", sparse), ("labels", labels)):
            np.save(folder / f"day_{day}_{part}.npy", array)
    assert labels is not None
    return labels.reshape(-1)


def exact_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties counting one half: every pair."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def test_two_ranks_score_every_held_out_sample_once_and_stop_at_the_target_auc(tmp_path):
    data, scores = tmp_path / "data", tmp_path / "scores"
    data.mkdir()
    held_out_labels = _write_days(data)
    metrics = tmp_path / "metrics.jsonl"
    flags = [*TINY, "--batch_size", str(BATCH), "--dataset_path", str(data),
             "--eval_batches", "-1", "--eval_every", "2", "--max_steps", "8",
             "--validation_auroc", "0.01", "--eval_scores_dir", str(scores),
             "--metrics_file", str(metrics), "--fabric_gate", "off"]
    run_trainer(flags, nproc=2)
    evals = [r for r in records(metrics) if r["event"] == "eval"]
    tests = [r for r in records(metrics) if r["event"] == "test"]
    done = summary(metrics)
    # The first evaluation (step 2) reached the target: training stopped there, as the
    # reference's --validation_auroc does, and the run ended as completed.
    assert [r["step"] for r in evals] == [2] and done["step"] == 2 and done["target_reached"]
    first_half = HELD_OUT_ROWS // 2 + HELD_OUT_ROWS % 2
    for record, name, labels in ((evals[0], "val-step-2.npy", held_out_labels[:first_half]),
                                 (tests[0], "test-step-2.npy", held_out_labels[first_half:])):
        logits, scored_labels = np.load(scores / name)
        # Every sample, once, in held-out order: 101 of them, 5 in the last global batch.
        assert record["samples"] == len(labels) == len(logits) == 101
        np.testing.assert_array_equal(scored_labels, labels)
        assert record["auc"] == exact_auc(logits, scored_labels)
        loss = np.mean(np.logaddexp(0.0, logits.astype(np.float64)) - labels * logits.astype(np.float64))
        assert abs(record["loss"] - loss) < 1e-9
        assert record["world_size"] == 2
