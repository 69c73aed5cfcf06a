"""Learning-rate schedule as a pure function of the step: resuming needs only the step."""

from __future__ import annotations

from trainer.config import TrainConfig


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """Linear warm-up, constant, then quadratic decay to 0 (the TorchRec DLRM example's policy)."""
    if cfg.lr_warmup_steps and step < cfg.lr_warmup_steps:
        return cfg.learning_rate * (step + 1) / cfg.lr_warmup_steps
    if cfg.lr_decay_start and step >= cfg.lr_decay_start:
        left = max(cfg.lr_decay_start + cfg.lr_decay_steps - step, 0) / cfg.lr_decay_steps
        return cfg.learning_rate * left * left
    return cfg.learning_rate
