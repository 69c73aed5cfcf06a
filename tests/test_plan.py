"""The sizing advisor (`torchrec-cloud plan`): torchrec's planner on a table set and a
catalog machine, offline on CPU, and the whole time-to-train it prints. Its checkpoint figures
are the planner's own for the recipe's optimizer (exact Adagrad for MLPerf), its MLPerf
estimate on each cloud's 2 x 8 H100 stays within 1.5x of its GPU-bound time, and
docs/data.md shows exactly what it prints."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path

import pytest
import torch

from infra.catalog.machines import machine
from torchrec_cloud import time_to_train as ttt
from torchrec_cloud.file_systems import file_system
from torchrec_cloud.plan import advise, render
from trainer.offline_plan import run_planner
from trainer.sizing import DATA_PARALLEL_MAX_MB, MLPERF_ROWS, TableSet, checkpoint_bytes, table_set

ROOT = Path(__file__).resolve().parent.parent
MLPERF = table_set("mlperf")
H100_PAIRS = {"aws": "p5.48xlarge", "azure": "Standard_ND96isr_H100_v5", "gcp": "a3-megagpu-8g"}


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


# Planning MLPerf on three clouds takes about a minute of CPU (more on a busy machine): the
# tests that share it may take that long.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def mlperf() -> dict:
    """The advisor on 2 nodes of each cloud's H100 machine (AWS's with the planner's debug
    statistics captured and the other rules' estimates): planned once for this file."""
    handler = _Lines()
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    try:
        out = {"aws": advise(MLPERF, "aws", H100_PAIRS["aws"], 2, debug=True)}
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    for cloud in ("azure", "gcp"):
        out[cloud] = advise(MLPERF, cloud, H100_PAIRS[cloud], 2, compare=False)
    out["stats"] = handler.lines
    return out


def _planners_own_bytes(options, ranks: int) -> tuple[list[int], int]:
    """Per rank, the weights and optimizer state torchrec's planner itself counts for the
    sharded tables' shards (shard_estimators._calculate_storage_specific_sizes, the optimizer
    class read from the parameter as the planner reads it), and the replicated tables' once."""
    from torchrec.distributed.planner.shard_estimators import _calculate_storage_specific_sizes

    per_rank, replicated = [0] * ranks, 0
    for option in options:
        tensor = option.tensor
        optimizer = getattr(tensor, "_optimizer_classes", [None])[0]
        sizes = _calculate_storage_specific_sizes(
            storage=tensor.element_size() * tensor.nelement(), shape=tensor.shape,
            shard_sizes=[s.size for s in option.shards], sharding_type=option.sharding_type,
            optimizer_class=optimizer)
        if option.sharding_type == "data_parallel":
            replicated += sizes[0]
            continue
        for shard, size in zip(option.shards, sizes):
            per_rank[shard.rank] += size
    return per_rank, replicated


def test_exact_adagrad_checkpoint_is_what_torchrecs_planner_counts_at_a_small_shape():
    """Small tables on 2 x 2 ranks, some large enough to be split: with exact Adagrad each
    rank's sharded bytes and the total are the planner's own weights + optimizer state (one
    value per weight: twice the weights), not row-wise Adagrad's one value per row."""
    from trainer.offline_plan import checkpoint_bytes_per_rank
    from trainer.planning import Hardware

    rows = ([400_000, 3_000, 250_000, 200, 60_000, 7] * 5)[:26]
    tables = TableSet("small", rows, [3.0, 1, 2, 1, 5, 1] * 4 + [1, 1], 32)
    hw = Hardware(world_size=4, local_world_size=2, compute_device="cuda",
                  hbm_bytes=512 << 20, ddr_bytes=1 << 30)
    done, _ = run_planner(tables, hw, 512, "exact_adagrad", max_mb=0.05,
                          dense=dict(dense_arch_layer_sizes=[64, 32], over_arch_layer_sizes=[64, 1]))
    options = done._best_plan
    kinds = {o.sharding_type for o in options}
    assert "data_parallel" in kinds and len(kinds) > 1, kinds
    assert {getattr(o.tensor, "_optimizer_classes", [None])[0] for o in options
            if o.sharding_type != "data_parallel"} == {torch.optim.Adagrad}

    ours = checkpoint_bytes_per_rank(options, 4, "exact_adagrad")
    theirs, replicated = _planners_own_bytes(options, 4)
    assert sum(ours) == sum(theirs) + replicated == checkpoint_bytes(
        tables.rows, 32, "exact_adagrad", 0.05)
    assert any(len(o.shards) > 1 for o in options)  # some tables split over ranks
    sharded_only = checkpoint_bytes_per_rank([o for o in options
                                              if o.sharding_type != "data_parallel"], 4,
                                             "exact_adagrad")
    assert sharded_only == theirs
    row_wise = checkpoint_bytes_per_rank(options, 4, "adagrad")
    assert sum(row_wise) < 0.6 * sum(ours)


def test_mlperf_checkpoint_on_2_p5_is_exact_adagrads_209_gb_with_15_4_gb_on_the_fullest_rank(mlperf):
    """The recipe's exact Adagrad, not row-wise: the whole checkpoint is the formula's (every
    table's weights and as many state values), the fullest rank is the planner's shards (three
    eighths of 40M-row tables on one node), and it no longer fits AWS's spot notice."""
    aws = mlperf["aws"]
    assert aws.optimizer == "exact_adagrad"
    assert aws.checkpoint_gb * 1e9 == checkpoint_bytes(MLPERF_ROWS, 128, "exact_adagrad",
                                                       DATA_PARALLEL_MAX_MB)
    assert round(aws.checkpoint_gb) == 209
    assert round(aws.fullest_rank_gb, 1) == 15.4
    eighth = 40_000_000 * 128 * 4 * 2 / 8
    assert 3 * eighth <= aws.fullest_rank_gb * 1e9 < 3 * eighth + 0.2e9
    assert not aws.fits_spot_notice
    for cloud in ("azure", "gcp"):
        assert mlperf[cloud].checkpoint_gb == aws.checkpoint_gb


def test_the_advisor_reports_the_planners_own_memory_stats_and_its_faster_plan(mlperf):
    """Per-rank HBM and host memory are what torchrec's EmbeddingStats prints for the same
    plan; 18 small tables replicated; the plan beats sharding every table."""
    printed = {}
    for line in mlperf["stats"]:
        match = re.match(r"#\s+(\d+)\s+([\d.]+) \(\d+%\)\s+([\d.]+) \(\d+%\)", line)
        if match:
            printed[int(match.group(1))] = (float(match.group(2)), float(match.group(3)))
    aws = mlperf["aws"]
    assert sorted(printed) == list(range(16))
    for rank in range(16):
        assert (round(aws.hbm_gib[rank], 3), round(aws.ddr_gib[rank], 3)) == printed[rank]
    assert list(aws.sharding.values()).count("data_parallel") == 18
    assert aws.epoch.step.embeddings_ms == pytest.approx(aws.compare["free"], rel=0.02)
    assert aws.epoch.step.embeddings_ms < 0.9 * aws.compare["sharded"]
    assert max(aws.hbm_gib) < machine("aws", "p5.48xlarge").gpu_memory_gib


@pytest.mark.parametrize("cloud", sorted(H100_PAIRS))
def test_mlperf_training_stays_within_1_5x_of_its_gpu_bound_time(mlperf, cloud):
    """Input, evaluations and checkpoints together add under 50% to embeddings + dense on each
    cloud's 2 x 8 H100, in the configuration the advisor recommends (on-the-fly multi-hot, a
    file system that feeds the GPUs, the exact AUC on the GPU); each part is counted."""
    a = mlperf[cloud]
    e = a.epoch
    assert a.data_form == "on-the-fly"
    assert e.step.embeddings_ms > 0 and e.step.dense_ms > 0 and e.step.input_ms > 0
    assert e.eval_seconds > 0 and e.checkpoint_seconds > 0
    assert a.training_hours < 1.5 * a.gpu_bound_hours
    assert e.overhead < 0.5
    assert 0 < a.prepare["shuffle"] and a.prepare["multi-hot"] == 0  # drawn on the fly
    assert a.usd(spot=True) < a.usd()


def test_drawing_multi_hot_on_the_fly_is_counted_on_the_readers_a_rank_gets(mlperf):
    """MLPerf's 214 ids a sample drawn on the fly cost ~31 ms of CPU a 4,096-sample batch
    (infra/catalog/planning.py). A 2 x 8 H100 rank gets 8 readers (trainer/data/loader.py), 3.9 ms a
    batch, counted in the step's input and in each evaluation's batches; with the 2 readers it
    had, 15.5 ms a batch left the step input-bound, 1.9x its 8.3 ms GPU-bound time."""
    from infra.catalog.planning import MULTI_HOT_EXPAND_MS_PER_SAMPLE
    from trainer.data.loader import multi_hot_readers

    for cloud in H100_PAIRS:
        a = mlperf[cloud]
        s = a.epoch.step
        assert a.readers == multi_hot_readers(machine(cloud, H100_PAIRS[cloud]).vcpus // 8) == 8
        assert s.expand_ms == pytest.approx(4096 * MULTI_HOT_EXPAND_MS_PER_SAMPLE / 8)
        assert s.input_ms == max(s.read_ms, s.expand_ms) and s.input_ms < s.gpu_ms
        assert f"multi-hot drawn by 8 readers a rank in {s.expand_ms:.2f} ms" in render(a, MLPERF)
        eval_batches = -(-ttt.VALIDATION_SAMPLES // 65536)
        assert a.epoch.evaluation_seconds >= eval_batches * s.expand_ms / 1e3
        two = ttt.Step(s.embeddings_ms, s.dense_ms, s.all_reduce_ms, s.read_ms,
                       ttt.expand_step_ms(4096, MULTI_HOT_EXPAND_MS_PER_SAMPLE, 2), readers=2)
        assert two.input_ms == pytest.approx(15.5) and two.input_ms > 1.6 * s.gpu_ms


def test_the_shipped_file_systems_cannot_feed_16_h100_and_the_advisor_names_the_change(mlperf):
    """The stack files' file systems read on-the-fly MLPerf data slower than 16 H100 consume
    it: the advisor says which setting to change, per cloud, and plans with it."""
    expected = {"aws": "sharedFileSystem.throughputPerTib 1000",
                "azure": "sharedFileSystem.serviceLevel Ultra", "gcp": "sharedFileSystem.capacityGib"}
    for cloud, change in expected.items():
        a = mlperf[cloud]
        shipped = file_system(cloud)
        gpu_bound_rate = ttt.ONE_HOT_BYTES * 65536 / (a.epoch.step.gpu_ms / 1e3) / 1e6
        assert shipped.read_mb_s < gpu_bound_rate <= a.file_system.read_mb_s
        assert a.file_system.change.startswith(change)
        assert change in render(a, MLPERF)


def test_the_stack_and_the_advisor_size_mlperfs_checkpoint_alike_on_each_2_x_h100(mlperf):
    """One fullest-rank figure: what the stack's settings (`check`, the derived cadence, the
    tables-fit rule) take for MLPerf on 2 x 8 H100 is torchrec's planner's own, byte for byte,
    as the advisor prints it (15.4 GB), not the torch-free bound (18.2 GB); the checkpoint too."""
    from infra.preemption import checkpoint_bytes as stack_checkpoint_bytes
    from infra.preemption import largest_rank_bytes
    from tests.test_checkpoint_cadence import MLPERF as STACK_MLPERF, _settings
    from infra.cadence import cadence
    from trainer.sizing import largest_rank_checkpoint_bytes

    for cloud, name in H100_PAIRS.items():
        a = mlperf[cloud]
        fullest = largest_rank_bytes({"recipe": "mlperf"}, 16, 8, name)
        assert fullest == round(a.fullest_rank_gb * 1e9)
        assert stack_checkpoint_bytes({"recipe": "mlperf"}) == round(a.checkpoint_gb * 1e9)
    bound = largest_rank_checkpoint_bytes(MLPERF_ROWS, 128, "exact_adagrad",
                                          DATA_PARALLEL_MAX_MB, 16, 8)
    assert round(bound / 1e9, 1) == 18.2  # what `check` said before
    save = cadence(_settings(STACK_MLPERF)).save  # the stack file as `check` reads it
    assert save.largest_rank_bytes == round(mlperf["aws"].fullest_rank_gb * 1e9)
    assert save.bytes == round(mlperf["aws"].checkpoint_gb * 1e9)
    assert save.seconds == pytest.approx(mlperf["aws"].save_seconds)


def test_the_advisor_saves_at_the_cadence_the_stack_derives_and_prints_it(mlperf):
    """One cadence: the advisor's checkpoints come every --checkpoint_every steps the stack
    would give the trainer for the same job (infra/cadence.py, a save at most 10% of the time),
    timed at the advisor's step; a fixed 500 steps (a 154 s save every few seconds) is gone."""
    from infra.cadence import SAVE_SHARE, cadence, checkpoints_in_effect
    from tests.test_checkpoint_cadence import MLPERF as STACK_MLPERF, _settings

    aws = mlperf["aws"]
    settings = _settings(STACK_MLPERF)
    stack = cadence(settings)
    assert aws.checkpoint_every_steps == stack.every_steps == checkpoints_in_effect(
        settings).every_steps
    assert aws.checkpoint_every_seconds == stack.every_seconds
    assert aws.checkpoint_every_steps >= aws.save_seconds / SAVE_SHARE * stack.steps_per_second
    for cloud in H100_PAIRS:
        a = mlperf[cloud]
        e = a.epoch
        step_s = (e.step.gpu_ms + e.step.input_extra_ms) / 1e3
        assert e.checkpoint_interval_seconds == pytest.approx(a.checkpoint_every_steps * step_s)
        assert e.checkpoint_interval_seconds > 500 * step_s and a.checkpoint_every_steps > 500
        assert e.checkpoint_seconds < 0.05 * e.gpu_seconds
        assert (f"checkpoints: every {a.checkpoint_every_steps:,} steps" in render(a, MLPERF))


def test_start_up_draws_the_multi_hot_tables_and_the_run_ends_with_a_priced_save(mlperf):
    """On the fly, MLPerf's 5.8 billion lookup-table ids (23 GB) are drawn at each pod's start:
    start-up, and each preemption, pay for them; the preparation counts the shuffle's
    permutation of 4.2 billion rows; the run's hours end with the final save."""
    from trainer.prepare import (CRITEO_1TB_TRAINING_ROWS, MULTI_HOT_TABLE_IDS_PER_SECOND,
                                 PERMUTATION_SECONDS_PER_ROW)
    from trainer.recipe import MLPERF_MULTI_HOT_SIZES

    ids = sum(r * (k - 1) for r, k in zip(MLPERF_ROWS, MLPERF_MULTI_HOT_SIZES))
    assert ids * 4 == pytest.approx(23.1e9, rel=0.01)
    for cloud in H100_PAIRS:
        a = mlperf[cloud]
        assert a.multi_hot_tables_seconds == pytest.approx(ids / MULTI_HOT_TABLE_IDS_PER_SECOND)
        assert a.start_seconds == a.node_start_seconds + a.multi_hot_tables_seconds
        assert a.prepare["permutation"] == pytest.approx(
            CRITEO_1TB_TRAINING_ROWS * PERMUTATION_SECONDS_PER_ROW / 3600)
        assert a.prepare["multi-hot"] == 0
        assert a.run_hours == pytest.approx(
            (a.node_start_seconds + a.multi_hot_tables_seconds + a.save_seconds) / 3600
            + a.training_hours)
        assert a.preemption_hours * 3600 == pytest.approx(
            a.spot_interval_seconds / 2 + a.start_seconds + a.load_seconds)
        assert "multi-hot lookup tables drawn on each node" in render(a, MLPERF)
        assert "the final save after the target" in render(a, MLPERF)


def test_materialized_multi_hot_draws_its_tables_once_in_the_preparation():
    prep = ttt.prepare_hours(1000, 900, 160, 100.0, 100.0, 100.0, 0.5, 2e-3, 7200.0)
    assert prep["multi-hot"] == pytest.approx(2 + 10 / 3600)
    assert prep["permutation"] == pytest.approx(1.8 / 3600)
    assert ttt.prepare_hours(1000, 900, 160, 100.0, 100.0, None, 0.5, 2e-3, 7200.0)[
        "multi-hot"] == 0


def test_dense_time_is_the_models_flops_at_the_rated_fp32_or_tf32_throughput():
    """MLPerf's DCN model: 16.0M multiply-adds a sample forward; forward + backward of 4,096
    samples a rank at H100's 67 FP32 TFLOPS is 5.9 ms, at 494.5 TF32 TFLOPS 0.8 ms."""
    from infra.throughput import dense_macs_per_sample

    macs = dense_macs_per_sample(128, [512, 256, 128], [1024, 1024, 512, 256, 1], "dcn", 3, 512)
    assert macs == 170_496 + 3 * 2 * 27 * 128 * 512 + 5_243_136
    assert ttt.dense_step_ms(4096, macs, 67.0) == pytest.approx(5.88, abs=0.01)
    assert ttt.dense_step_ms(4096, macs, 494.5) == pytest.approx(0.80, abs=0.01)


def test_a_save_longer_than_its_interval_is_skipped_not_queued():
    """The trainer skips a save due while the previous one is written: a save longer than the
    interval stretches it, and only the stall of the saves written costs training time."""
    assert ttt.checkpoint_share(100, 2, 400) == pytest.approx(2 / 400)
    assert ttt.checkpoint_share(500, 2, 400) == pytest.approx(2 / 500)


def test_materialized_multi_hot_reads_almost_six_times_the_bytes_of_on_the_fly():
    """3.83 TB an epoch against 0.67 TB (issue 30's figures)."""
    from trainer.recipe import MLPERF_MULTI_HOT_SIZES

    assert ttt.TRAIN_SAMPLES * ttt.materialized_bytes(MLPERF_MULTI_HOT_SIZES) == pytest.approx(3.83e12, rel=0.01)
    assert ttt.TRAIN_SAMPLES * ttt.ONE_HOT_BYTES == pytest.approx(0.67e12, rel=0.01)


def test_epochs_to_the_target_are_the_reference_runs_mean():
    assert ttt.epochs_to_target() == 0.79
    assert max(ttt.RCP_EPOCHS_65536) == 0.95 and len(ttt.RCP_EPOCHS_65536) == 30


def test_docs_data_md_shows_exactly_what_the_advisor_prints_for_mlperf(mlperf):
    """docs/data.md's MLPerf block is the advisor's output on the three clouds, figure for
    figure: a change to the model or the catalog that moves a figure must update the docs."""
    doc = (ROOT / "docs" / "data.md").read_text()
    command = "$ .venv/bin/torchrec-cloud plan --tables mlperf --cloud aws --machine p5.48xlarge --nodes 2"
    assert command in doc
    block = doc.split(command, 1)[1].split("\n", 1)[1].split("```", 1)[0].strip("\n")
    printed = "\n\n".join(render(mlperf[cloud], MLPERF) for cloud in ("aws", "azure", "gcp"))
    assert block == printed


def test_the_plan_verb_runs_from_the_command_line(tmp_path, capsys):
    """`python -m torchrec_cloud plan` with a small layout.json on one machine, as JSON."""
    from torchrec_cloud.__main__ import main

    layout = tmp_path / "layout.json"
    layout.write_text(json.dumps({"num_embeddings_per_feature": [1000] * 26}))
    assert main(["plan", "--tables", str(layout), "--recipe", "", "--cloud", "aws",
                 "--machine", "p5.48xlarge", "--nodes", "1", "--read_mb_s", "2000",
                 "--json"]) == 0
    # The planner's chatter is silenced for the command only: logging works again after it
    # (CI: a test run after it in the same process captured no warnings at all).
    import logging
    assert logging.root.manager.disable == logging.NOTSET
    out = json.loads(capsys.readouterr().out)["aws"]
    assert out["optimizer"] == "adagrad" and out["ranks"] == 8
    assert out["training_hours"] > out["gpu_bound_hours"] > 0


def test_the_checkpoint_bench_projects_mlperf_at_the_advisors_exact_adagrad_size(mlperf):
    """bench/checkpoint_bench.py's MLPerf projection is the advisor's checkpoint on 2 x p5
    (exact Adagrad: 209 GB, 15.4 GB on the fullest rank), not row-wise Adagrad's 105 GB, and
    its save time is the fullest rank's bytes at the measured rate per rank."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("checkpoint_bench",
                                                  ROOT / "bench" / "checkpoint_bench.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclass looks its module up
    try:
        spec.loader.exec_module(bench)
    finally:
        del sys.modules[spec.name]
    projection = bench.mlperf_projection()
    aws = mlperf["aws"]
    assert (projection.checkpoint_bytes, projection.fullest_rank_bytes) == (
        round(aws.checkpoint_gb * 1e9), round(aws.fullest_rank_gb * 1e9))
    assert round(projection.checkpoint_bytes / 1e9) == 209
    assert projection.ranks == aws.ranks == 16
    assert projection.save_seconds(100e6) == pytest.approx(aws.fullest_rank_gb * 1e9 / 100e6)


def test_plan_and_check_time_mlperf_at_one_rate_and_print_the_same_hours_an_epoch(
        mlperf, tmp_path):
    """One step rate: the stack's run estimate and derived cadence (`check`, infra/estimate.py,
    infra/cadence.py) time MLPerf on each cloud's 2 x 8 H100 with the advisor's own step
    (torchrec's planner's embeddings, recorded in trainer/sizing.py, + dense + all-reduce), not
    a public run scaled 1.5x slower (80 against 120 steps/s on 2 x p5; 15 against 106 on A3
    Mega): `check` prints the GPU-bound hours of one epoch `plan` prints."""
    from infra.cadence import steps_per_second
    from infra.estimate import estimate_lines
    from infra.throughput import planned_step
    from tests.test_check import check, write_stack
    from tests.test_checkpoint_cadence import MLPERF as STACK_MLPERF
    from torchrec_cloud.plan import stack_settings
    from trainer.sizing import planned_rank

    dataset = STACK_MLPERF["dataset"]
    for cloud, name in H100_PAIRS.items():
        a = mlperf[cloud]
        s = a.epoch.step
        recorded = planned_rank(MLPERF_ROWS, 128, "exact_adagrad", DATA_PARALLEL_MAX_MB, name,
                                2, 4096)
        assert recorded is not None and recorded.embeddings_ms == pytest.approx(
            s.embeddings_ms, rel=1e-9)  # the planner's figure, planned again here
        settings = stack_settings(cloud, name, 2, "mlperf", None, 8, {"dataset": dataset})
        step = planned_step(settings)
        assert step is not None
        assert (step.dense_ms, step.all_reduce_ms) == pytest.approx((s.dense_ms, s.all_reduce_ms),
                                                                    rel=1e-9)
        assert step.gpu_ms == pytest.approx(s.gpu_ms, rel=1e-9)
        assert steps_per_second(settings) == pytest.approx(1e3 / s.gpu_ms, rel=1e-9)
        assert a.stack_steps_per_second == pytest.approx(1e3 / s.gpu_ms, rel=1e-9)
        hours = f"{a.epoch.gpu_seconds / 3600:.2f} h"
        assert f"one epoch: GPU-bound {hours}" in render(a, MLPERF)
        assert (f"  one epoch     {hours} GPU-bound ({a.epoch.steps:,} steps at "
                f"{1e3 / s.gpu_ms:,.0f} steps/s)") in estimate_lines(settings)
    # and `check` itself, on the AWS stack file the issue walked
    done = check("--file", str(write_stack(tmp_path, "aws", STACK_MLPERF)))
    assert done.returncode == 0, done.stderr
    aws = mlperf["aws"]
    assert (f"one epoch     {aws.epoch.gpu_seconds / 3600:.2f} h GPU-bound "
            f"({aws.epoch.steps:,} steps at 120 steps/s)") in done.stdout
@pytest.mark.parametrize("need_mb_s", [2800.0, 6000.0, 20000.0])
def test_the_advisor_names_a_filestore_size_the_settings_accept(need_mb_s):
    """Past 9.75 TiB a Zonal share grows in 2.5 TiB steps: the size the advisor names for the
    GCP stack file's Filestore passes the settings' own rule and reads what is needed (it named
    10,752 GiB for 2,800 MB/s, which `pulumi up` then refused)."""
    from infra.settings.loader import settings_and_problems
    from tests.test_cloud_rules import stack_values
    from torchrec_cloud.file_systems import faster_file_system

    faster = faster_file_system("gcp", need_mb_s)
    capacity = int(faster.change.rsplit(" ", 1)[1])
    assert faster.read_mb_s >= need_mb_s
    _, problems = settings_and_problems(stack_values("gcp", {"sharedFileSystem": {
        "kind": "filestore", "tier": "ZONAL", "capacityGib": capacity}}))
    assert not [p for p in problems if p.path == "sharedFileSystem.capacityGib"], problems
