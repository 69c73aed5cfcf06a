"""``--recipe mlperf`` against mlcommons' DLRM-DCNv2 reference itself (commit aa344c7,
recommendation_v2/torchrec_dlrm, copied unchanged into tests/trainer/data/mlperf_reference/):
its ``parse_args`` run on its README's MLPerf run script, its ``LRPolicyScheduler`` stepped as
its train loop steps it, its ``Multihot`` tables, and the optimizer torchrec builds from what it
passes (``torch.optim.Adagrad`` -> ``EmbOptimType.EXACT_ADAGRAD``)."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import List

import numpy as np
import pytest
import torch

from tests.trainer.helpers import REPO, env
from trainer.config import parse_config
from trainer.schedule import eval_interval, learning_rate

REFERENCE = Path(__file__).parent / "data" / "mlperf_reference"
WORLD_SIZE = 8  # the run script's WORLD_SIZE
TOTAL_TRAINING_SAMPLES = 4195197692  # the run script's, Criteo 1TB days 0-22


def _reference_module_parts() -> dict:
    """dlrm_main.py's constants, InteractionType and parse_args, executed as written (the rest
    of the file needs mlperf_logging and a GPU job; these parts need only argparse)."""
    tree = ast.parse((REFERENCE / "dlrm_main.py").read_text())
    keep = [node for node in tree.body
            if (isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper()
                                                     for t in node.targets)
                and not isinstance(node.value, ast.Call))
            or (isinstance(node, (ast.ClassDef, ast.FunctionDef))
                and node.name in ("InteractionType", "parse_args"))]
    namespace: dict = {"argparse": argparse, "Enum": Enum, "List": List}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "dlrm_main.py", "exec"), namespace)
    return namespace


def _run_script_argv(heading: str) -> List[str]:
    """The README's run command under ``heading``, its shell arithmetic done by bash, as the
    argument list dlrm_main.py receives."""
    readme = (REFERENCE / "README.MD").read_text()
    block = readme.split(heading, 1)[1].split("```", 2)[1]
    script = re.sub(r"torchx run .*?--script dlrm_main.py --", "printf '%s\\n'", block)
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.fixture(scope="module")
def reference() -> argparse.Namespace:
    parts = _reference_module_parts()
    argv = _run_script_argv("## Run the MLPerf DLRM v2 benchmark, which uses the materialized")
    args = parts["parse_args"](argv)
    for name, val in vars(args).items():  # dlrm_main.main: comma lists become int lists
        try:
            vars(args)[name] = list(map(int, val.split(",")))
        except (ValueError, AttributeError):
            pass
    on_the_fly = parts["parse_args"](_run_script_argv("## (Alternative method that trains multi-hot"))
    args.multi_hot_sizes = list(map(int, on_the_fly.multi_hot_sizes.split(",")))
    args.multi_hot_distribution_type = on_the_fly.multi_hot_distribution_type
    args.constants = {k: v for k, v in parts.items() if k.isupper()}
    target = re.search(r"target AUROC to reach within one epoch is ([0-9.]+)\.",
                       (REFERENCE / "README.MD").read_text())
    assert target is not None
    args.target_auroc = float(target.group(1))
    return args


@pytest.fixture
def recipe(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", str(WORLD_SIZE))  # torchrun's, as on 8 GPUs
    return parse_config(["--recipe", "mlperf"])


def test_every_hyper_parameter_is_the_references(reference, recipe):
    ref = reference
    assert ref.adagrad and recipe.optimizer == "exact_adagrad"
    expected = {
        "embedding_dim": ref.embedding_dim,
        "dense_arch_layer_sizes": ref.dense_arch_layer_sizes,
        "over_arch_layer_sizes": ref.over_arch_layer_sizes,
        "num_embeddings_per_feature": ref.num_embeddings_per_feature,
        "interaction": ref.interaction_type.value,
        "dcn_num_layers": ref.dcn_num_layers,
        "dcn_low_rank_dim": ref.dcn_low_rank_dim,
        "learning_rate": ref.learning_rate,
        "lr_warmup_steps": ref.lr_warmup_steps,
        "lr_decay_start": ref.lr_decay_start,
        "lr_decay_steps": ref.lr_decay_steps,
        "num_epochs": ref.epochs,
        "batch_size": ref.batch_size,  # per rank: GLOBAL_BATCH_SIZE / WORLD_SIZE
        "multi_hot_sizes": ref.multi_hot_sizes,
        "multi_hot_distribution_type": ref.multi_hot_distribution_type,
        "validation_auroc": ref.target_auroc,
    }
    assert {k: getattr(recipe, k) for k in expected} == expected
    assert recipe.batch_size * WORLD_SIZE == 65536
    # Every 0.05 epoch: the reference's step count between validations, from its formula.
    assert eval_interval(recipe, TOTAL_TRAINING_SAMPLES, recipe.batch_size * WORLD_SIZE) == \
        ref.validation_freq_within_epoch == 3200
    # The whole validation set: no --limit_val_batches, and drop_last only for training.
    assert ref.limit_val_batches is None and recipe.eval_batches == -1
    assert ref.test_batch_size is None  # validation batches are training-sized, as here


def test_explicit_flags_override_the_recipe(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    cfg = parse_config(["--recipe", "mlperf", "--batch_size", "16", "--embedding_dim", "8",
                        "--dense_arch_layer_sizes", "16,8"])
    assert (cfg.batch_size, cfg.global_batch_size, cfg.embedding_dim) == (16, None, 8)
    assert cfg.learning_rate == 0.005 and cfg.optimizer == "exact_adagrad"


def _reference_lrs(base: float, warmup: int, start: int, steps: int, n: int) -> List[float]:
    """The reference's rate at each of ``n`` training steps: its train loop reads the param
    groups' lr, runs the step, then calls ``lr_scheduler.step()``."""
    spec = importlib.util.spec_from_file_location("ref_lr_scheduler", REFERENCE / "lr_scheduler.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base)
    scheduler = module.LRPolicyScheduler(opt, warmup, start, steps)
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
    return out


@pytest.mark.parametrize("warmup,start,steps", [(0, 0, 0), (4, 4, 0), (5, 9, 6), (3, 3, 10),
                                                (0, 1, 5), (6, 6, 20000)])
def test_the_learning_rate_schedule_is_the_references_step_for_step(warmup, start, steps):
    flags = ["--learning_rate", "2.0", "--lr_warmup_steps", str(warmup),
             "--lr_decay_start", str(start), "--lr_decay_steps", str(steps)]
    cfg = parse_config(flags)
    n = min(start + steps + 8, 60) if steps < 1000 else 20020
    ours = [learning_rate(cfg, s) for s in range(n)]
    assert ours == pytest.approx(_reference_lrs(2.0, warmup, start, steps, n), rel=1e-12, abs=0)
    if steps:  # after the decay the rate holds, never 0
        assert ours[-1] == ours[-2] > 0


def test_the_recipe_schedule_holds_the_references_rate(reference, recipe):
    lrs = _reference_lrs(recipe.learning_rate, recipe.lr_warmup_steps, recipe.lr_decay_start,
                         recipe.lr_decay_steps, 10)
    assert [learning_rate(recipe, s) for s in range(10)] == lrs == [reference.learning_rate] * 10


@pytest.mark.parametrize("flags,fragment", [
    (["--lr_warmup_steps", "5", "--lr_decay_start", "2", "--lr_decay_steps", "3"],
     "warmup must finish before the decay starts"),
    (["--lr_decay_start", "4", "--lr_decay_steps", "3"], "no rate to hold"),
])
def test_schedules_the_reference_cannot_run_are_flag_errors(flags, fragment, capsys):
    with pytest.raises(SystemExit):
        parse_config(flags)
    assert fragment in capsys.readouterr().err


def test_embeddings_train_with_exact_adagrad_and_dense_with_the_references_adagrad(reference):
    """The optimizer torchrec builds from the recipe: the fused EXACT_ADAGRAD kernel for every
    sharded table, as the reference's torch.optim.Adagrad maps to, and the dense Adagrad's
    settings (which also train the data-parallel tables: per-weight state, the same rule). The
    tiny tables here are sharded by --data_parallel_max_mb 0."""
    code = """
import json, torch
from trainer.config import parse_config
from trainer.distributed import init_distributed, shard_model
from trainer.model import build_model
from fbgemm_gpu.split_embedding_configs import EmbOptimType
cfg = parse_config(["--recipe", "mlperf", "--num_embeddings_per_feature", ",".join(["40"] * 26),
                    "--embedding_dim", "8", "--dense_arch_layer_sizes", "16,8",
                    "--over_arch_layer_sizes", "16,1", "--dcn_low_rank_dim", "4", "--batch_size", "4",
                    "--data_parallel_max_mb", "0"])
ctx = init_distributed()
model, _, dense = shard_model(build_model(cfg, ctx.device), cfg, ctx)
def leaves(opt):  # CombinedOptimizer -> ... -> EmbeddingFusedOptimizer (one per kernel)
    inner = getattr(opt, "_optims", None)
    return [leaf for _, o in inner for leaf in leaves(o)] if inner is not None else [opt]
kinds = sorted({str(o._emb_module.optimizer) for o in leaves(model.fused_optimizer)})
shapes = {k: list(v["t_cat_0.momentum1"].size()) for k, v in model.fused_optimizer.state_dict()["state"].items()
          if "t_cat_0.momentum1" in v}
group = dense.param_groups[0]
print(json.dumps({"kinds": kinds, "dense": type(dense._optimizer).__name__, "shapes": shapes,
                  **{k: group[k] for k in ("eps", "lr_decay", "weight_decay", "initial_accumulator_value", "lr")}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    constants = reference.constants
    assert found["kinds"] == [str(__import__("fbgemm_gpu.split_embedding_configs", fromlist=["x"])
                                  .EmbOptimType.EXACT_ADAGRAD)]
    # One accumulator per weight (EXACT_ADAGRAD), not one per row (row-wise Adagrad's [rows]).
    assert list(found["shapes"].values()) == [[40, 8]]
    assert found["dense"] == "Adagrad" and found["lr"] == reference.learning_rate
    assert (found["eps"], found["lr_decay"], found["weight_decay"],
            found["initial_accumulator_value"]) == (constants["ADAGRAD_EPS"],
                                                    constants["ADAGRAD_LR_DECAY"],
                                                    constants["WEIGHT_DECAY"],
                                                    constants["ADAGRAD_INIT_ACC"])


@pytest.mark.parametrize("distribution", ["uniform", "pareto"])
def test_on_the_fly_multi_hot_ids_are_the_references_tables(tmp_path, distribution):
    """The reference's Multihot.convert_to_multi_hot on a batch, and MultiHot.expand on the
    same ids: the same ids in the same order."""
    from torchrec.datasets.utils import Batch

    from trainer.data.batch import assemble, batch_tensors
    from trainer.data.multi_hot import MultiHot

    spec = importlib.util.spec_from_file_location("ref_multi_hot", REFERENCE / "multi_hot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    sizes = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]
    rows = [3000, 39, 17, 74, 202, 3, 71, 15, 6, 2900, 306, 405, 10, 220, 119, 15, 4, 97, 14,
            4000, 4000, 4000, 590, 129, 108, 36]
    batch_size = 64
    ids = np.random.default_rng(1).integers(0, rows, (batch_size, 26))
    one_hot = assemble(batch_tensors(np.zeros((batch_size, 13), np.float32), ids,
                                     np.zeros(batch_size, np.float32)))
    ref = module.Multihot(sizes, rows, batch_size, collect_freqs_stats=False, dist_type=distribution)
    theirs: Batch = ref.convert_to_multi_hot(one_hot)
    ours = assemble(batch_tensors(np.zeros((batch_size, 13), np.float32),
                                  MultiHot(sizes, rows, distribution, root=str(tmp_path)).expand(ids),
                                  np.zeros(batch_size, np.float32))).sparse_features
    assert torch.equal(ours.values(), theirs.sparse_features.values().long())
    assert torch.equal(ours.offsets(), theirs.sparse_features.offsets().long())
