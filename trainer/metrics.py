"""Metrics: computed honestly across all ranks, reported by rank 0.

Every rank keeps its window between two log steps as sums (loss, samples) and a histogram
of its logits per label; at a log step all ranks all-reduce those fixed-size counts (one
tensor of ``2 * AUC_BINS`` integers, whatever the batch or world size) and rank 0 prints
one line, advances the progress bar, appends a JSON line and writes TensorBoard scalars.
No logit leaves its rank: gathering them (6.5 million per log step on 16 GPUs) and sorting
them on every rank stalled all of them. Evaluation, once per eval interval, stays exact.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Dict, Optional

import fsspec
import numpy as np
import torch
import torch.distributed as dist


def auc_by_ranks(scores: np.ndarray, labels: np.ndarray) -> float:
    """Exact ROC AUC on the host (Mann-Whitney U with tied scores averaged); NaN if one class
    only. The reference ``auc`` is tested against; 20-60 s for an evaluation's 89M scores."""
    positives = float(labels.sum())
    negatives = float(len(labels) - positives)
    if positives == 0 or negatives == 0:
        return float("nan")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    avg_rank = np.cumsum(counts) - (counts - 1) / 2.0  # 1-based mean rank of each tie group
    rank_sum = avg_rank[inverse][labels > 0.5].sum()
    return float((rank_sum - positives * (positives + 1) / 2.0) / (positives * negatives))


def auc(scores: Any, labels: Any, device: Optional[torch.device] = None) -> float:
    """Exact ROC AUC, sorted on ``device`` (default: where ``scores`` live; numpy arrays: the
    CPU): one sort, then per group of tied scores its positives and negatives; each positive
    counts the negatives below its group and half those tied with it (Mann-Whitney U, as
    ``auc_by_ranks`` and sklearn's roc_auc_score). Counts are int64, so the sum is exact and
    one division ends it. NaN if one class only."""
    s = torch.as_tensor(scores)
    y = torch.as_tensor(labels)
    if device is not None:
        s, y = s.to(device), y.to(device)
    s, positive = s.reshape(-1), y.reshape(-1) > 0.5
    n, n_pos = s.numel(), int(positive.sum())
    n_neg = n - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ordered, order = torch.sort(s)
    pos = positive[order].to(torch.int64)
    starts = torch.ones(n, dtype=torch.bool, device=s.device)
    starts[1:] = ordered[1:] != ordered[:-1]
    group = torch.cumsum(starts, 0) - 1  # tie group of each sorted score
    groups = int(group[-1]) + 1
    pos_in = torch.zeros(groups, dtype=torch.int64, device=s.device).index_add_(0, group, pos)
    neg_in = torch.bincount(group, minlength=groups) - pos_in
    neg_below = torch.cumsum(neg_in, 0) - neg_in
    twice_u = int((pos_in * (2 * neg_below + neg_in)).sum())
    return twice_u / (2.0 * n_pos * n_neg)


def held_out_figures(samples: Any, device: Optional[torch.device] = None) -> torch.Tensor:
    """Loss, AUC, count and positive rate of an evaluation's gathered [logits; labels] (rank 0),
    in float64 where ``samples`` live (or on ``device``): rank 0's GPU where it has one, the
    gathered scores never copied to the host (20 evaluations of 89M scores an epoch). The loss
    is the mean binary cross-entropy of the logits (DLRMTrain's), over the whole set: no
    per-batch means."""
    both = torch.as_tensor(samples)
    if device is not None:
        both = both.to(device)
    both = both.double()
    logits, labels = both[0], both[1]
    loss = (torch.logaddexp(torch.zeros_like(logits), logits) - labels * logits).mean()
    return torch.tensor([float(loss), auc(logits, labels), float(labels.numel()),
                         float(labels.mean())], dtype=torch.float64)


def gather_to_first(t: torch.Tensor) -> Optional[torch.Tensor]:
    """Concatenate ``t`` [rows, n_rank] of every rank along its last axis on rank 0 only
    (sizes may differ), on ``t``'s device; None on the other ranks. One ``gather`` to rank 0
    instead of an all-gather: an evaluation's 89M logits and labels land once, not on all 16
    ranks, and stay on rank 0's GPU for the AUC."""
    world = dist.get_world_size()
    if world == 1:
        return t.detach().float()
    rank = dist.get_rank()
    size = torch.tensor([t.shape[-1]], device=t.device, dtype=torch.int64)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)  # a few bytes: each rank's count, to pad to the longest
    counts = [int(s.item()) for s in sizes]
    padded = torch.zeros(t.shape[0], max(counts), device=t.device, dtype=torch.float32)
    padded[:, : t.shape[-1]] = t.float()
    out = [torch.zeros_like(padded) for _ in range(world)] if rank == 0 else None
    dist.gather(padded, gather_list=out, dst=0)
    if out is None:
        return None
    return torch.cat([o[:, :c] for o, c in zip(out, counts)], dim=-1)


def held_out_order(samples: Optional[torch.Tensor], counts: Optional[torch.Tensor],
                   world: int) -> Optional[torch.Tensor]:
    """Rank 0's gathered samples [2, n] (rank 0's, then rank 1's, ...) put back in held-out
    order: global batch after global batch, each its ranks' slices in rank order, from each
    rank's scored samples per batch (``counts`` [1, world x batches], rank-major). One gather
    by an index built where the samples live (rank 0's GPU): no host round trip."""
    if samples is None or counts is None or world == 1:
        return samples
    per_rank = counts.reshape(world, -1).to(device=samples.device, dtype=torch.int64)
    # where each (rank, batch) slice starts in the gathered samples (rank-major) ...
    starts = (torch.cumsum(per_rank.reshape(-1), 0) - per_rank.reshape(-1)).reshape(world, -1)
    # ... taken batch-major: batch 0 of rank 0, of rank 1, ..., then batch 1
    lengths, firsts = per_rank.t().reshape(-1), starts.t().reshape(-1)
    if not int(lengths.sum()):
        return samples
    placed = torch.cumsum(lengths, 0) - lengths  # where each slice lands in held-out order
    index = (torch.repeat_interleave(firsts - placed, lengths)
             + torch.arange(int(lengths.sum()), device=samples.device))
    return samples[:, index]


# The training window's AUC comes from a histogram of logits: AUC_BINS equal bins over
# [-LOGIT_RANGE, LOGIT_RANGE] (logits beyond fall in the end bins). Pairs of a positive and a
# negative in one bin count one half, so the error is at most the share of such pairs: with
# bins 0.0012 logits wide, under 1e-3 on Criteo-like scores (tests/trainer/test_metrics.py).
AUC_BINS = 1 << 15
LOGIT_RANGE = 20.0


def histogram_auc(counts: np.ndarray) -> float:
    """ROC AUC from ``counts`` [2, bins]: negatives' and positives' scores per ascending bin;
    ties within a bin average (as Mann-Whitney U does). NaN if one class only."""
    negatives, positives = counts[0].astype(np.float64), counts[1].astype(np.float64)
    total_neg, total_pos = negatives.sum(), positives.sum()
    if total_neg == 0 or total_pos == 0:
        return float("nan")
    below = np.cumsum(negatives) - negatives  # negatives in lower bins
    return float((positives * (below + 0.5 * negatives)).sum() / (total_pos * total_neg))


class Window:
    """Per-rank accumulation of training outputs between two log steps, in fixed-size sums
    kept on the training device: adding a step launches a few small kernels, no host sync."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.steps = 0
        self.loss: Optional[torch.Tensor] = None
        self.counts: Optional[torch.Tensor] = None  # [2 * AUC_BINS]: negatives, then positives
        self.started = time.perf_counter()

    def add(self, loss: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> None:
        logits, labels = logits.detach().reshape(-1), labels.detach().reshape(-1)
        if self.counts is None:
            self.counts = torch.zeros(2 * AUC_BINS, dtype=torch.int64, device=logits.device)
            self.loss = torch.zeros((), dtype=torch.float64, device=logits.device)
        scaled = (logits.float() + LOGIT_RANGE) * (AUC_BINS / (2 * LOGIT_RANGE))
        bins = scaled.clamp_(0, AUC_BINS - 1).long() + AUC_BINS * (labels > 0.5).long()
        self.counts += torch.bincount(bins, minlength=2 * AUC_BINS)
        self.loss += loss.detach().double()  # type: ignore[operator]
        self.steps += 1

    def reduce(self) -> Dict[str, float]:
        """Collective: mean loss over ranks and steps, AUC over all ranks' samples (one
        all-reduce of the loss, the sample count rides in the histogram)."""
        assert self.steps and self.counts is not None and self.loss is not None, \
            "reduce() needs at least one step in the window"
        counts, loss = self.counts.clone(), self.loss.clone()
        if dist.get_world_size() > 1:
            dist.all_reduce(counts)
            dist.all_reduce(loss)
        hist = counts.cpu().numpy().reshape(2, AUC_BINS)
        samples = int(hist.sum())
        seconds = time.perf_counter() - self.started
        return {
            "loss": float(loss.item()) / max(self.steps * dist.get_world_size(), 1),
            "auc": histogram_auc(hist),
            "samples": samples,
            "samples_per_sec": samples / seconds if seconds > 0 else 0.0,
            "step_time_ms": 1000.0 * seconds / max(self.steps, 1),
        }


def open_jsonl(metrics_file: str) -> Any:
    """The metrics JSON lines file, opened for appending (a resumed run adds to it), with its
    folder made first; a path or an fsspec URI."""
    fs, path = fsspec.core.url_to_fs(metrics_file)
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    if parent:
        fs.makedirs(parent, exist_ok=True)
    return fs.open(path, "a")


class MetricsLogger:
    """Rank 0's outputs: console line, progress bar, JSON lines, TensorBoard."""

    def __init__(self, rank: int, total_steps: Optional[int], metrics_file: Optional[str],
                 tensorboard_dir: Optional[str], start_step: int = 0) -> None:
        self.enabled = rank == 0
        self.bar = None
        self.jsonl = None
        self.tb = None
        if not self.enabled:
            return
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total_steps, initial=start_step, unit="step", dynamic_ncols=True)
        if metrics_file:
            self.jsonl = open_jsonl(metrics_file)
        if tensorboard_dir:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(log_dir=tensorboard_dir)

    def print(self, text: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(text)
        else:
            print(text, flush=True)

    def advance(self, steps: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(steps)

    def record(self, kind: str, step: int, values: Dict[str, Any]) -> None:
        """kind: 'start', 'train', 'eval', 'test' or 'summary'. Prints, writes JSON, and
        TensorBoard scalars for the metrics (train, eval, test)."""
        if not self.enabled:
            return
        numbers = {k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        # Flags too ("preempted true"): a reader of the log alone (`status` without the bucket)
        # must tell a preempted generation's summary from a finished run's.
        text = "  ".join(f"{k} {_fmt(v) if k in numbers else str(v).lower()}" for k, v in values.items()
                         if k in numbers or isinstance(v, bool))
        self.print(f"[{kind}] step {step}  {text}")
        self.note(kind, step, values)
        if self.tb is not None and kind not in ("summary", "start"):
            for key, value in numbers.items():
                self.tb.add_scalar(f"{kind}/{key}", value, step)
            self.tb.flush()

    def note(self, kind: str, step: int, values: Dict[str, Any]) -> None:
        """One JSON line only (e.g. 'checkpoint': what a reader of the file should know
        that is no metric). ``time`` (Unix seconds) lets a reader tell the run's length and
        how fresh the file is."""
        if not self.enabled or self.jsonl is None:
            return
        record = {"event": kind, "step": step, **_clean(values), "time": round(time.time(), 3)}
        self.jsonl.write(json.dumps(record) + "\n")
        self.jsonl.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.jsonl is not None:
            self.jsonl.close()
        if self.tb is not None:
            self.tb.close()


def _fmt(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    return f"{v:.4f}" if abs(v) < 1000 else f"{v:,.0f}"


def _clean(values: Dict[str, Any]) -> Dict[str, Any]:
    """JSON has no NaN: write null instead."""
    return {k: (None if isinstance(v, float) and v != v else v) for k, v in values.items()}
