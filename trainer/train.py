"""The train loop: pipelined steps, evaluation, checkpoints and preemption.

All ranks must take the same number of steps (every step has collectives). Two things
can end a stream early on one rank only: a SIGTERM (the spot notice) and running out of
data. ``AgreedBatches`` settles both with one tiny all-reduce per batch on a gloo group,
so every rank stops at the same batch; the pipeline then finishes the batches it already
holds and the loop ends at a step boundary, with the state saved and exit code 0.
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import torch
import torch.distributed as dist
from torchrec.datasets.utils import Batch
from torchrec.distributed import TrainPipelineSparseDist

from trainer.checkpoint import Checkpointer
from trainer.config import TrainConfig
from trainer.data import make_source
from trainer.data.prefetch import Prefetched
from trainer.distributed import DistContext, shard_model
from trainer.metrics import MetricsLogger, Window, auc, gather
from trainer.model import build_model
from trainer.schedule import learning_rate

log = logging.getLogger(__name__)


class StopFlag:
    """Set by SIGTERM; read at the next batch boundary."""

    def __init__(self) -> None:
        self.requested = False

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True


class AgreedBatches:
    """Yield local batches while every rank has one, no stop was requested and the limit
    is not reached. ``reason`` says why it ended: 'limit', 'exhausted' or 'stop'.

    Ranks agree once per ``chunk`` batches (one all-reduce of [missing batches, stop]),
    not once per batch: a SIGTERM is acted on within ``chunk`` steps, and the all-reduce
    stays off most steps. Batches are built ahead on a background thread."""

    def __init__(self, batches: Iterator[Batch], limit: int, stop: StopFlag,
                 group: Optional[dist.ProcessGroup], chunk: int = 8, pin: bool = False) -> None:
        if pin:  # page-locked host memory lets the pipeline's copy stream overlap compute
            batches = (b.pin_memory() for b in batches)
        self.batches = Prefetched(batches, depth=2 * chunk)
        self.left = limit
        self.stop = stop
        self.group = group
        self.chunk = chunk
        self.ready: List[Batch] = []
        self.reason: Optional[str] = None

    def __iter__(self) -> "AgreedBatches":
        return self

    def close(self) -> None:
        """Stop the background thread (idempotent)."""
        self.batches.close()

    def __next__(self) -> Batch:
        if not self.ready and self.reason is None:
            self._refill()
        if not self.ready:
            self.batches.close()
            raise StopIteration
        self.left -= 1
        return self.ready.pop(0)

    def _refill(self) -> None:
        """Collective: all ranks take the same number of batches for the next chunk."""
        want = min(self.chunk, self.left)
        if want <= 0:  # the same on every rank: no need to ask the others
            self.reason = "limit"
            return
        local: List[Batch] = []
        while len(local) < want and (batch := self.batches.next_or_none()) is not None:
            local.append(batch)
        flags = torch.tensor([want - len(local), int(self.stop.requested)], dtype=torch.int64)
        if dist.get_world_size() > 1:
            dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=self.group)
        keep = want - int(flags[0])
        if flags[1]:
            self.reason = "stop"
        elif keep == 0:
            self.reason = "exhausted"
        else:
            self.ready = local[:keep]


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""

    step: int = 0  # completed global steps
    epoch: int = 0
    batch_in_epoch: int = 0  # completed batches of this epoch = data position
    world_size: int = 1
    lr: float = 0.0


class Trainer:
    def __init__(self, cfg: TrainConfig, ctx: DistContext, stop: Optional[StopFlag] = None) -> None:
        self.cfg = cfg
        self.ctx = ctx
        self.source = make_source(cfg, ctx.rank, ctx.world_size)
        self.model, self.optimizer, self.dense_optimizer = shard_model(
            build_model(cfg, ctx.device), cfg, ctx)
        self.pipeline = TrainPipelineSparseDist(self.model, self.optimizer, ctx.device)
        self.progress = Progress(world_size=ctx.world_size)
        self.checkpointer = Checkpointer(cfg.checkpoint_dir, cfg.keep_checkpoints) if cfg.checkpoint_dir else None
        self.stop = stop or StopFlag()
        self.window = Window()
        self.last: Dict[str, float] = {}
        self.last_eval: Dict[str, float] = {}
        self.resumed_from: Optional[int] = None

    # --- checkpoint state ---
    def state_dict(self) -> Dict[str, Any]:
        # Only optimizer *state*: param groups hold the lr, which the schedule recomputes.
        return {
            "model": self.model.state_dict(),
            "optim": {"state": self.optimizer.state_dict()["state"]},
            # Tensors (not Python ints) so DCP stores and restores them like everything else.
            "progress": torch.tensor([self.progress.step, self.progress.epoch,
                                      self.progress.batch_in_epoch, self.progress.world_size]),
            "lr": torch.tensor(self.progress.lr, dtype=torch.float64),
        }

    def restore(self) -> None:
        if self.checkpointer is None:
            return
        step = self.checkpointer.latest()
        if step is None:
            return
        # Lazily created optimizer state would silently not be restored: create it first.
        self.dense_optimizer.init_state()
        state = self.state_dict()
        self.checkpointer.load(step, state)
        self.model.load_state_dict(state["model"])
        full = self.optimizer.state_dict()
        full["state"] = state["optim"]["state"]
        self.optimizer.load_state_dict(full)
        step_, epoch, batch_in_epoch, world_size = (int(v) for v in state["progress"].tolist())
        self.progress = Progress(step_, epoch, batch_in_epoch, world_size, float(state["lr"]))
        if self.progress.world_size != self.ctx.world_size:
            log.warning("resuming a %d-rank checkpoint on %d ranks: the data order changes",
                        self.progress.world_size, self.ctx.world_size)
            self.progress.world_size = self.ctx.world_size
        self.resumed_from = step

    def save(self) -> None:
        if self.checkpointer is not None:
            self.progress.lr = learning_rate(self.cfg, self.progress.step)
            started = time.perf_counter()
            if self.checkpointer.save(self.progress.step, self.state_dict()):
                self.metrics.print(f"saved checkpoint step-{self.progress.step} "
                                   f"in {time.perf_counter() - started:.1f}s")

    # --- loop ---
    def total_steps(self) -> Optional[int]:
        per_epoch = getattr(self.source, "steps_per_epoch", None)
        epochs_total = per_epoch * self.cfg.num_epochs if per_epoch else None
        if self.cfg.max_steps is None:
            return epochs_total
        return min(self.cfg.max_steps, epochs_total) if epochs_total else self.cfg.max_steps

    def _next_stop(self) -> int:
        """The step the current pipeline segment runs to: max_steps or the next eval."""
        end = self.cfg.max_steps if self.cfg.max_steps is not None else 1 << 62
        if self.cfg.eval_every:
            end = min(end, (self.progress.step // self.cfg.eval_every + 1) * self.cfg.eval_every)
        return end

    def run(self) -> Dict[str, Any]:
        self.restore()
        self.metrics = MetricsLogger(self.ctx.rank, self.total_steps(), self.cfg.metrics_file,
                                     self.cfg.tensorboard_dir, start_step=self.progress.step)
        if self.resumed_from is not None:
            self.metrics.print(f"resumed from checkpoint step-{self.resumed_from}")
        started, start_step = time.perf_counter(), self.progress.step
        reason = None
        self.model.train()
        while self.progress.epoch < self.cfg.num_epochs and reason != "stop":
            if self.cfg.max_steps is not None and self.progress.step >= self.cfg.max_steps:
                break
            batches = AgreedBatches(
                self.source.train_batches(self.progress.epoch, self.progress.batch_in_epoch),
                self._next_stop() - self.progress.step, self.stop, self.ctx.control_group,
                pin=self.ctx.device.type == "cuda")
            try:
                self._run_segment(batches)
            finally:
                batches.close()
            reason = batches.reason
            if reason == "exhausted":
                if self.progress.batch_in_epoch == 0:
                    raise RuntimeError("the training data has fewer rows than one batch per rank; "
                                       "check --dataset_path and --batch_size")
                self.progress.epoch += 1
                self.progress.batch_in_epoch = 0
            elif reason == "limit" and self.cfg.eval_every and self.progress.step % self.cfg.eval_every == 0:
                self.evaluate()
        preempted = reason == "stop"
        elapsed = time.perf_counter() - started
        if self.window.losses:
            self.last = self.window.reduce()
        evaluated_here = self.cfg.eval_every and self.progress.step % self.cfg.eval_every == 0
        if not preempted and not evaluated_here:  # a preempted run must exit fast: no eval
            self.evaluate()
        self.save()
        steps = self.progress.step - start_step
        summary = {
            "loss": self.last.get("loss", float("nan")),
            "auc": self.last_eval.get("auc", self.last.get("auc", float("nan"))),
            "train_auc": self.last.get("auc", float("nan")),
            "eval_loss": self.last_eval.get("loss", float("nan")),
            "samples_per_sec": steps * self.cfg.batch_size * self.ctx.world_size / elapsed if elapsed else 0.0,
            "resumed_from": self.resumed_from,
            "preempted": preempted,
            "malformed_rows": self._malformed_rows(),
            "world_size": self.ctx.world_size,
        }
        self.metrics.record("summary", self.progress.step, summary)
        self.metrics.close()
        return summary

    def _run_segment(self, batches: AgreedBatches) -> None:
        """Pipelined steps until the stream ends; the pipeline drains what it holds."""
        while True:
            self._set_lr(learning_rate(self.cfg, self.progress.step))
            try:
                loss, logits, labels = self.pipeline.progress(batches)
            except StopIteration:
                return
            self.progress.step += 1
            self.progress.batch_in_epoch += 1
            self.window.add(loss, logits, labels)
            self.metrics.advance()
            step = self.progress.step
            if step % self.cfg.log_every == 0:
                self.last = self.window.reduce()
                values = {**self.last, "lr": learning_rate(self.cfg, step - 1)}
                malformed = self._malformed_rows()
                if malformed:
                    values["malformed_rows"] = malformed
                self.metrics.record("train", step, values)
                self.window.reset()
            if self.cfg.checkpoint_every and step % self.cfg.checkpoint_every == 0:
                self.save()

    def _set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _malformed_rows(self) -> int:
        count = torch.tensor([self.source.malformed_rows], dtype=torch.int64)
        if dist.get_world_size() > 1:
            dist.all_reduce(count, group=self.ctx.control_group)
        return int(count.item())

    @torch.no_grad()
    def evaluate(self) -> Dict[str, float]:
        """Held-out loss and AUC over all ranks, outside the train pipeline."""
        if self.cfg.eval_batches == 0:
            return {}
        model = self.pipeline.detach()  # plain forward; progress() re-attaches
        model.eval()
        losses, logits, labels = [], [], []
        batches = AgreedBatches(self.source.eval_batches(self.cfg.eval_batches),
                                self.cfg.eval_batches, StopFlag(), self.ctx.control_group)
        for batch in batches:
            loss, (_, out, y) = model(batch.to(self.ctx.device))
            losses.append(loss)
            logits.append(out)
            labels.append(y)
        model.train()
        if not losses:
            return {}
        all_logits = gather(torch.cat(logits))
        all_labels = gather(torch.cat(labels))
        loss_sum = torch.stack(losses).sum()
        if dist.get_world_size() > 1:
            dist.all_reduce(loss_sum)
        self.last_eval = {
            "loss": float(loss_sum.item()) / (len(losses) * dist.get_world_size()),
            "auc": auc(all_logits, all_labels),
            "samples": int(len(all_labels)),
            "positive_rate": float(np.mean(all_labels)) if len(all_labels) else float("nan"),
        }
        self.metrics.record("eval", self.progress.step, self.last_eval)
        return self.last_eval
