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


def test_on_the_fly_multi_hot_evaluation_is_built_by_reader_processes_with_the_same_scores(
        tmp_path, monkeypatch):
    """At full size (MLPerf, multi-hot drawn on the fly) each held-out batch is expanded to
    214 ids a sample; built on one thread under the trainer's GIL an evaluation took ~40 s a
    rank instead of ~4. Held-out batches now come from the train stream's reader processes,
    in global order: the scores the AUC is computed from are those of the one-thread path."""
    import os

    import torch
    import torch.distributed as dist

    import trainer.train as train_module
    from trainer.config import parse_config
    from trainer.data.loader import BatchStream
    from trainer.distributed import DistContext
    from trainer.metrics import MetricsLogger
    from trainer.train import StopFlag, Trainer

    data = tmp_path / "data"
    data.mkdir()
    held_out_labels = _write_days(data)
    opened = []

    class Recorded(BatchStream):
        def __init__(self, source, cfg, rank, world_size, batch_size, split, *args, workers=0,
                     **kwargs):
            super().__init__(source, cfg, rank, world_size, batch_size, split, *args,
                             workers=workers, **kwargs)
            readers = getattr(self._readers, "_workers", [])
            opened.append((split, workers, [p.pid for p in readers]))

    monkeypatch.setattr(train_module, "BatchStream", Recorded)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        scored = {}
        for workers in ("0", "2"):
            cfg = parse_config([*TINY, "--batch_size", str(BATCH), "--dataset_path", str(data),
                                "--multi_hot_sizes", ",".join(["1", "3"] * 13),
                                "--eval_batches", "-1", "--data_workers", workers,
                                "--eval_scores_dir", str(tmp_path / f"scores{workers}")])
            ctx = DistContext(rank=0, world_size=1, local_rank=0, local_world_size=1,
                              device=torch.device("cpu"), control_group=None)
            torch.manual_seed(0)
            trainer = Trainer(cfg, ctx, StopFlag())
            trainer.metrics = MetricsLogger(0, None, None, None)
            result = trainer.evaluate()
            assert result["samples"] == 101
            scored[workers] = np.load(tmp_path / f"scores{workers}" / "val-step-0.npy")
        # The validation set went through 2 reader processes (not this one) ...
        split, workers, pids = opened[-1]
        assert (split, workers) == ("val", 2) and len(pids) == 2 and os.getpid() not in pids
        # ... and gave, sample for sample, what the one-thread path gives: same AUC inputs.
        np.testing.assert_array_equal(scored["2"], scored["0"])
        np.testing.assert_array_equal(scored["2"][1], held_out_labels[:101])
    finally:
        dist.destroy_process_group()
