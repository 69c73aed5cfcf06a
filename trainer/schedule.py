"""Learning-rate schedule as a pure function of the step: resuming needs only the step.

It is the reference's ``LRPolicyScheduler`` (mlcommons/training aa344c7,
recommendation_v2/torchrec_dlrm/lr_scheduler.py, copied there from facebookresearch/dlrm's
mlperf branch; torchrec's DLRM example has the same policy), step for step:
- the reference steps the scheduler once in its constructor and once after every training step,
  so training step ``s`` (0-based, = completed steps) runs with ``_step_count = s + 1``;
- warm-up while ``count < W``: ``base * (1 - (W - count) / W)``;
- decay while ``D <= count < D + N``: ``max(1e-7, base * ((N - (count - D)) / N) ** 2)``;
- otherwise, with ``N > 0``, the last rate set is *held* ("freeze at last"): after the decay its
  final value (clamped at 1e-7, never 0), between warm-up and decay the last warm-up value
  ``base * (W - 1) / W``; with ``N == 0`` the base rate.
The reference exits when ``D < W`` and fails (no rate to hold) when ``N > 0``, ``W <= 1`` and
``D > 1``: trainer/config.py refuses both as flag errors instead.
"""

from __future__ import annotations

from typing import Optional

from trainer.config import TrainConfig

MIN_DECAYED_LR = 0.0000001  # lr_scheduler.py: min_lr in the decay branch


def _set_at(base: float, warmup: int, start: int, steps: int, count: int) -> Optional[float]:
    """The rate the reference sets at ``_step_count == count``, None where it sets none."""
    if count < warmup:
        return base * (1.0 - (warmup - count) / warmup)
    if start <= count < start + steps:
        return max(MIN_DECAYED_LR, base * ((steps - (count - start)) / steps) ** 2)
    return None


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """The rate of training step ``step`` (0-based: the number of completed steps)."""
    base, warmup = cfg.learning_rate, cfg.lr_warmup_steps
    start, steps = cfg.lr_decay_start, cfg.lr_decay_steps
    count = step + 1
    value = _set_at(base, warmup, start, steps, count)
    if value is not None:
        return value
    if not steps:
        return base
    # Held: the last count before this one at which a rate was set.
    last = start + steps - 1 if count >= start + steps else warmup - 1
    held = _set_at(base, warmup, start, steps, last) if last >= 1 else None
    if held is None:  # refused by the config's checks; kept as a guard
        raise ValueError("--lr_decay_start: the reference scheduler has no rate to hold here")
    return held


def eval_interval(cfg: TrainConfig, train_samples: int, global_batch: int) -> int:
    """Steps between evaluations: --eval_every, or for --evals_per_epoch the reference's
    --validation_freq_within_epoch formula, training samples // (global batch x evaluations per
    epoch) (README.MD: $((TOTAL_TRAINING_SAMPLES / (GLOBAL_BATCH_SIZE * 20))), 3200 steps for
    Criteo 1TB at 65536), at least 1."""
    if not cfg.evals_per_epoch:
        return cfg.eval_every
    return max(1, train_samples // (global_batch * cfg.evals_per_epoch))
