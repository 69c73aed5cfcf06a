"""The cost and time estimate (infra/estimate.py): what `make check` prints and the stack
exports as `estimated_cost`, and the spend ceiling job.maxHourlyUsd that refuses a stack.

Expected figures are computed from the catalog and price tables, never typed in: the tests
assert how the estimate is composed, so a price update changes no test."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.catalog import MEASURED_THROUGHPUT, machine
from infra.estimate import (
    LARGE_STACK_USD_PER_HOUR, ROUGH_PLAN, control_plane_plan, estimate_lines, estimate_output, hourly,
    job_hourly_usd, most_hourly, run_estimate,
)
from infra.prices import AKS_TIER_HOUR, EKS_CLUSTER_HOUR, GKE_CLUSTER_HOUR
from infra.settings import SettingsError, settings_from_mapping
from infra.settings.model import Settings
from tests.harness import PROJECT, STACKS, stack_config


def values(stack: str, **sections: dict[str, Any]) -> dict[str, Any]:
    """The shipped stack file (with the user's API CIDR), some sections' keys replaced."""
    prefix = f"{PROJECT}:"
    out = {k.removeprefix(prefix): v for k, v in stack_config(stack).items()
           if k.startswith(prefix)}
    for section, changes in sections.items():
        out[section] = {**out.get(section, {}), **changes}
    return out


def settings(stack: str, **sections: dict[str, Any]) -> Settings:
    return settings_from_mapping(values(stack, **sections))


def item(s: Settings, name: str):
    (line,) = [line for line in hourly(s).lines if line.item == name]
    return line


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_s_hour_is_the_sum_of_its_items(stack: str) -> None:
    s = settings(stack)
    now = hourly(s)
    names = [line.item for line in now.lines]
    for expected in ("GPU nodes", "system nodes", "file system", "outbound", "control plane",
                     "checkpoints"):
        assert expected in names, f"{stack}: no {expected} item in {names}"
    assert now.total() == pytest.approx(sum(line.usd_per_hour for line in now.lines))
    spot = [line.spot_usd_per_hour if line.gpu else line.usd_per_hour for line in now.lines]
    assert now.total(spot=True) == pytest.approx(sum(spot))
    assert now.total(spot=True) < now.total()
    # The GPU nodes are the job's nodes at the catalog's prices of each pool's machine.
    on_demand = machine(s.cloud, s.gpu_pools.on_demand.machine_type)
    spot_machine = machine(s.cloud, s.gpu_pools.spot.machine_type)
    gpu = item(s, "GPU nodes")
    assert gpu.usd_per_hour == pytest.approx(on_demand.on_demand_usd_per_hour * s.job.nodes)
    assert gpu.spot_usd_per_hour == pytest.approx(spot_machine.spot_usd_per_hour * s.job.nodes)
    # Beside the nodes, the standing items cost something (the checkpoints a fraction of a cent).
    for name in ("file system", "outbound", "control plane"):
        assert item(s, name).usd_per_hour > 0, f"{stack}: {name} costs nothing"
    assert 0 <= item(s, "checkpoints").usd_per_hour < 0.01


CONTROL_PLANE_FEES = {"aws": EKS_CLUSTER_HOUR["STANDARD"].usd,
                      "azure": AKS_TIER_HOUR["Standard"].usd, "gcp": GKE_CLUSTER_HOUR.usd}


@pytest.mark.parametrize("stack", STACKS)
def test_each_cloud_s_control_plane_fee_is_counted(stack: str) -> None:
    assert item(settings(stack), "control plane").usd_per_hour == CONTROL_PLANE_FEES[stack]


def test_extended_support_and_long_term_support_raise_the_control_plane_fee() -> None:
    extended = settings("aws", kubernetes={"extendedSupport": True})
    assert item(extended, "control plane").usd_per_hour == EKS_CLUSTER_HOUR["EXTENDED"].usd
    lts = settings("azure", azure={"longTermSupport": True})
    assert item(lts, "control plane").usd_per_hour == AKS_TIER_HOUR["Premium"].usd


@pytest.mark.parametrize("changes", [{}, {"kubernetes": {"extendedSupport": True}}])
def test_the_eks_fee_follows_the_support_type_the_cluster_gets(changes: dict[str, Any]) -> None:
    from infra.aws.cluster import support_type

    s = settings("aws", **changes)
    assert control_plane_plan(s) == support_type(s)


@pytest.mark.parametrize("lts", [False, True])
def test_the_aks_fee_follows_the_tier_the_cluster_gets(lts: bool) -> None:
    from infra.azure.cluster import control_plane_tier

    s = settings("azure", azure={"longTermSupport": lts})
    assert control_plane_plan(s) == control_plane_tier(s).value


# Each file system twice as large, in steps its service accepts (infra/settings/rules.py).
DOUBLED = {"aws": {"capacityGib": 4800}, "azure": {"poolSizeTib": 8},
           "gcp": {"capacityGib": 5120}}


@pytest.mark.parametrize("stack", STACKS)
def test_the_file_system_costs_in_proportion_to_its_size(stack: str) -> None:
    shipped = item(settings(stack), "file system").usd_per_hour
    doubled = item(settings(stack, sharedFileSystem=DOUBLED[stack]), "file system")
    assert doubled.usd_per_hour == pytest.approx(2 * shipped)


def test_a_faster_fsx_tier_costs_more_per_hour() -> None:
    slow = item(settings("aws", sharedFileSystem={"throughputPerTib": 125}), "file system")
    fast = item(settings("aws", sharedFileSystem={"throughputPerTib": 1000}), "file system")
    assert fast.usd_per_hour > slow.usd_per_hour


@pytest.mark.parametrize("stack", STACKS)
def test_at_most_counts_every_pool_at_its_max_nodes(stack: str) -> None:
    s = settings(stack)
    most, now = most_hourly(s), hourly(s)
    pools = s.gpu_pools
    # Spot at what a spot price may reach: on-demand (no Azure maxPrice in the shipped files).
    gpu = (machine(s.cloud, pools.on_demand.machine_type).on_demand_usd_per_hour
           * pools.on_demand.max_nodes
           + machine(s.cloud, pools.spot.machine_type).on_demand_usd_per_hour
           * pools.spot.max_nodes)
    nodes = sum(line.usd_per_hour for line in most.lines if "pool" in line.item)
    assert nodes == pytest.approx(gpu)
    assert most.total() == pytest.approx(sum(line.usd_per_hour for line in most.lines))
    assert most.total() > now.total()


def test_a_spot_job_runs_at_the_spot_rate() -> None:
    on_demand = settings("aws")
    spot = settings("aws", job={"pool": "spot"})
    assert job_hourly_usd(on_demand) == pytest.approx(hourly(on_demand).total())
    assert job_hourly_usd(spot) == pytest.approx(hourly(spot).total(spot=True))


# --- job.maxHourlyUsd ---------------------------------------------------------------------------
def test_the_issue_s_500_node_stack_is_refused_above_its_ceiling() -> None:
    """job.nodes 500 with maxNodes 500 (about USD 11,000 an hour on p4d) passed silently."""
    big = values("aws", job={"nodes": 500, "maxHourlyUsd": 1000},
                 gpuPools={"onDemand": {"machineType": "p4d.24xlarge", "maxNodes": 500},
                           "spot": {"machineType": "p4d.24xlarge", "maxNodes": 2}})
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(big)
    (problem,) = [p for p in caught.value.problems if p.path == "job.maxHourlyUsd"]
    assert problem.value == 1000
    unbounded = settings_from_mapping({**big, "job": {**big["job"], "maxHourlyUsd": None}})
    most, job = most_hourly(unbounded).total(), job_hourly_usd(unbounded)
    assert most is not None and most > job > 10_000
    # Both figures, the pools behind the first, and the fix.
    assert f"{most:,.2f}" in problem.allowed and f"{job:,.2f}" in problem.allowed
    assert "500 x p4d.24xlarge" in problem.allowed
    assert "maxNodes" in problem.allowed and "raise job.maxHourlyUsd" in problem.allowed
    assert "job.maxHourlyUsd = 1000" in str(caught.value)


def test_a_ceiling_above_the_most_the_pools_reach_is_accepted() -> None:
    most = most_hourly(settings("aws")).total()
    assert most is not None
    s = settings("aws", job={"maxHourlyUsd": most + 1})
    assert s.job.max_hourly_usd == most + 1


def test_the_ceiling_is_judged_where_the_pools_may_scale_not_at_the_job_s_size() -> None:
    """Between the job's rate and the most the pools reach: refused, since the spot pool may
    scale too; without the spot pool the same ceiling holds."""
    shipped = settings("aws")
    between = (job_hourly_usd(shipped) + (most_hourly(shipped).total() or 0)) / 2
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(values("aws", job={"maxHourlyUsd": between}))
    assert [p.path for p in caught.value.problems] == ["job.maxHourlyUsd"]
    no_spot = values("aws", job={"maxHourlyUsd": between})
    no_spot["gpuPools"] = {**no_spot["gpuPools"],
                           "spot": {**no_spot["gpuPools"]["spot"], "enabled": False}}
    assert settings_from_mapping(no_spot).job.max_hourly_usd == between


@pytest.mark.parametrize("ceiling", [0, -5])
def test_a_ceiling_must_be_positive(ceiling: float) -> None:
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(values("aws", job={"maxHourlyUsd": ceiling}))
    assert "job.maxHourlyUsd" in [p.path for p in caught.value.problems]


# --- One run ----------------------------------------------------------------------------------
def test_the_default_job_is_1000_synthetic_steps() -> None:
    """The trainer's defaults (trainer/config.py): one epoch of --synthetic_steps_per_epoch
    1,000, at the stack's batch 2048 per rank over 2 x 8 ranks."""
    run = run_estimate(settings("aws"))
    assert run.steps.steps == 1000 and "synthetic" in run.steps.how
    assert run.steps.global_batch == 2048 * 16 and run.samples == 1000 * 2048 * 16


def test_the_run_grows_with_max_steps() -> None:
    short = run_estimate(settings("aws", job={"trainerArgs": {"batch_size": 2048,
                                                               "max_steps": 10_000}}))
    long = run_estimate(settings("aws", job={"trainerArgs": {"batch_size": 2048,
                                                              "max_steps": 20_000}}))
    assert short.training_hours and long.training_hours and short.usd and long.usd
    assert long.training_hours == pytest.approx(2 * short.training_hours)
    assert long.hours == pytest.approx(long.node_start_hours + long.training_hours
                                       + long.scale_down_hours)
    assert long.usd == pytest.approx(long.hours * long.usd_per_hour)
    assert long.usd > short.usd


def test_more_nodes_train_a_fixed_global_batch_faster_at_a_higher_rate() -> None:
    args = {"global_batch_size": 65536, "max_steps": 50_000}
    two = run_estimate(settings("aws", job={"trainerArgs": args, "nodes": 2}))
    four_values = values("aws", job={"trainerArgs": args, "nodes": 4})
    for pool in ("onDemand", "spot"):
        four_values["gpuPools"][pool] = {**four_values["gpuPools"][pool], "maxNodes": 4}
    four = run_estimate(settings_from_mapping(four_values))
    assert two.samples == four.samples
    assert two.training_hours and four.training_hours
    assert four.training_hours == pytest.approx(two.training_hours / 2)
    assert four.usd_per_hour > two.usd_per_hour


H200_POOLS = {"onDemand": {"machineType": "p5en.48xlarge", "maxNodes": 2},
              "spot": {"machineType": "p5en.48xlarge", "maxNodes": 2}}


def _bench_model() -> dict[str, Any]:
    """bench/train_throughput.py's MODEL, read from the file the figure came from."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "bench" / "train_throughput.py"
    spec = importlib.util.spec_from_file_location("train_throughput", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MODEL


def test_the_recorded_measurement_is_the_bench_s_model() -> None:
    measured, model = MEASURED_THROUGHPUT[0], _bench_model()
    assert measured.embedding_dim == model["embedding_dim"]
    assert measured.rows_per_table == model["num_embeddings"]
    assert ",".join(map(str, measured.dense_arch_layer_sizes)) == model["dense_arch_layer_sizes"]
    assert ",".join(map(str, measured.over_arch_layer_sizes)) == model["over_arch_layer_sizes"]
    assert measured.gpus == 1 and "bench/train_throughput.py" in measured.command


def _bench_job(nodes: int, **trainer: Any) -> dict[str, Any]:
    measured = MEASURED_THROUGHPUT[0]
    args = {"embedding_dim": measured.embedding_dim, "num_embeddings": measured.rows_per_table,
            "dense_arch_layer_sizes": list(measured.dense_arch_layer_sizes),
            "over_arch_layer_sizes": list(measured.over_arch_layer_sizes),
            "interaction": measured.interaction, "optimizer": measured.optimizer,
            "batch_size": 2048, **trainer}
    return {"nodes": nodes, "trainerArgs": args}


def test_measured_only_for_the_bench_s_gpu_model_and_one_node() -> None:
    """The H200 figure is "measured" for the bench's model on one H200 node; the same model on
    2 nodes, another shape, or an A100 is a rough plan, said so."""
    measured = MEASURED_THROUGHPUT[0]
    same = run_estimate(settings("aws", gpuPools=H200_POOLS, job=_bench_job(1))).throughput
    assert same and same.measured and same.source.startswith("measured:")
    assert same.samples_per_s_per_gpu == measured.samples_per_s_per_gpu
    for changes in ({"gpuPools": H200_POOLS, "job": _bench_job(2)},
                    {"gpuPools": H200_POOLS, "job": _bench_job(1, num_embeddings=1_000_000)},
                    {"gpuPools": H200_POOLS, "job": _bench_job(1, embedding_dim=128,
                                                              dense_arch_layer_sizes=[512, 256, 128])},
                    {"job": _bench_job(1)}):
        plan = run_estimate(settings("aws", **changes)).throughput
        assert plan and not plan.measured and plan.source.startswith(ROUGH_PLAN), changes


def test_a_plan_scales_by_matmul_peak_and_never_above_the_bench_for_a_smaller_model() -> None:
    from infra.catalog import GPU_BF16_DENSE_TFLOPS

    a100 = run_estimate(settings("aws", job=_bench_job(1))).throughput
    assert a100 is not None
    ratio = GPU_BF16_DENSE_TFLOPS["A100"] / GPU_BF16_DENSE_TFLOPS["H200"]
    assert a100.samples_per_s_per_gpu == pytest.approx(
        MEASURED_THROUGHPUT[0].samples_per_s_per_gpu * ratio)
    smaller = run_estimate(settings("aws", job=_bench_job(
        1, dense_arch_layer_sizes=[128, 64], over_arch_layer_sizes=[64, 1]))).throughput
    assert smaller and smaller.samples_per_s_per_gpu == pytest.approx(a100.samples_per_s_per_gpu)


def test_the_mlperf_model_plans_slower_by_its_dense_work() -> None:
    from infra.estimate import dense_macs_per_sample

    bench = run_estimate(settings("aws", job=_bench_job(1))).throughput
    mlperf = run_estimate(settings("aws", job={"nodes": 1, "trainerArgs": {"recipe": "mlperf"}}))
    assert bench and mlperf.throughput
    m = MEASURED_THROUGHPUT[0]
    small = dense_macs_per_sample(m.embedding_dim, list(m.dense_arch_layer_sizes),
                                  list(m.over_arch_layer_sizes), "dot")
    big = dense_macs_per_sample(128, [512, 256, 128], [1024, 1024, 512, 256, 1], "dcn", 3, 512)
    assert mlperf.throughput.samples_per_s_per_gpu == pytest.approx(
        bench.samples_per_s_per_gpu * small / big)


def test_across_nodes_the_embedding_all_to_all_bounds_the_rate() -> None:
    """GCP's a2-highgpu-8g has 100 Gbit/s for 8 GPUs: two nodes are bound by the pooled
    embeddings and their gradients crossing nodes; half-precision comms halve those bytes."""
    from infra.catalog import inter_host_gb_s_per_gpu

    s = settings("gcp")
    plan = run_estimate(s).throughput
    assert plan and "the lower" in plan.source
    # 26 pooled vectors out and gradients back at 4 B, 26 int64 ids, half of them across nodes.
    crossing = (26 * 8 + 26 * 128 * (4 + 4)) / 2
    per_gpu = inter_host_gb_s_per_gpu(machine(s.cloud, s.job_pool.machine_type)) * 1e9
    assert plan.samples_per_s_per_gpu == pytest.approx(per_gpu / crossing)
    half = run_estimate(settings("gcp", job={"trainerArgs": {
        "batch_size": 2048, "embedding_dim": 128, "dense_arch_layer_sizes": [512, 256, 128],
        "embedding_comm_forward_precision": "fp16",
        "embedding_comm_backward_precision": "bf16"}})).throughput
    assert half and half.samples_per_s_per_gpu > plan.samples_per_s_per_gpu
    one_node = run_estimate(settings("gcp", job={"nodes": 1})).throughput
    assert one_node and "network bound" not in one_node.source


def test_data_of_unknown_size_asks_for_max_steps() -> None:
    s = settings("aws", dataset={"path": "criteo/mine"})
    run = run_estimate(s)
    assert run.steps.steps is None and run.usd is None
    assert any("max_steps" in line for line in estimate_lines(s))


def test_prepared_criteo_days_give_the_steps() -> None:
    s = settings("aws", dataset={"path": "criteo/1tb", "prepare": {
        "enabled": True, "source": "s3://my-raw-criteo/days", "days": "0-3"}},
        job={"trainerArgs": {"global_batch_size": 65536}})
    run = run_estimate(s)
    from trainer.prepare import CRITEO_1TB_ROWS

    assert run.steps.steps == -(-CRITEO_1TB_ROWS * 3 // 24 // 65536)  # 3 training days


# --- What the user sees --------------------------------------------------------------------------
@pytest.mark.parametrize("stack", STACKS)
def test_the_export_carries_the_totals_the_items_and_the_run(stack: str) -> None:
    s = settings(stack)
    out = estimate_output(s)
    json.dumps(out)  # a stack output: plain JSON
    assert out["on_demand_usd_per_hour"] == round(hourly(s).total() or 0, 2)
    assert out["spot_usd_per_hour"] == round(hourly(s).total(spot=True) or 0, 2)
    assert out["usd_per_hour"] == out["on_demand_usd_per_hour"]  # the shipped job is on-demand
    assert len(out["items"]) == len(hourly(s).lines)
    assert out["at_most_usd_per_hour"] == round(most_hourly(s).total() or 0, 2)
    run = out["run"]
    assert run["steps"] == 1000 and run["hours"] > 0 and run["usd"] > 0
    assert run["throughput_source"].startswith(ROUGH_PLAN) and not run["throughput_measured"]


@pytest.mark.parametrize("stack", STACKS)
def test_the_printed_lines_name_each_item_the_totals_and_the_source(stack: str) -> None:
    s = settings(stack)
    text = "\n".join(estimate_lines(s))
    for line in hourly(s).lines:
        assert line.detail in text
    assert f"{hourly(s).total():,.2f} on-demand" in text
    assert "with the GPU nodes on spot" in text and "at most" in text
    run = run_estimate(s)
    assert run.throughput and run.throughput.source in text
    assert f"at most about USD {run.usd:,.2f}" in text
    assert "up to" in text and "node start" in text and "idle before scale-down" in text


def test_a_large_stack_without_a_ceiling_gets_a_note() -> None:
    big = values("aws", job={"nodes": 100},
                 gpuPools={"onDemand": {"machineType": "p4d.24xlarge", "maxNodes": 100},
                           "spot": {"machineType": "p4d.24xlarge", "maxNodes": 2}})
    s = settings_from_mapping(big)
    assert (most_hourly(s).total() or 0) > LARGE_STACK_USD_PER_HOUR
    assert any("no job.maxHourlyUsd" in line for line in estimate_lines(s))
    assert not any("no job.maxHourlyUsd" in line for line in estimate_lines(settings("aws")))


def test_every_file_system_setting_the_rules_accept_has_a_price() -> None:
    from infra.prices import ANF_GIB_HOUR, FILESTORE_GIB_MONTH, FSX_LUSTRE_GB_MONTH
    from infra.settings.model import AnfServiceLevel, FilestoreTier

    fsx = [("PERSISTENT_2", t) for t in (125, 250, 500, 1000)] + [
        ("PERSISTENT_1", t) for t in (50, 100, 200)] + [("SCRATCH_2", None)]
    for deployment, tier in fsx:
        changes = {"deploymentType": deployment, "throughputPerTib": tier}
        line = item(settings("aws", sharedFileSystem=changes), "file system")
        assert line.usd_per_hour > 0 and (deployment, tier) in FSX_LUSTRE_GB_MONTH
    assert set(ANF_GIB_HOUR) == {level.value for level in AnfServiceLevel}
    assert set(FILESTORE_GIB_MONTH) == {tier.value for tier in FilestoreTier}


def test_without_a_spot_pool_there_is_no_spot_figure() -> None:
    no_spot = values("aws")
    no_spot["gpuPools"] = {**no_spot["gpuPools"],
                           "spot": {**no_spot["gpuPools"]["spot"], "enabled": False}}
    s = settings_from_mapping(no_spot)
    out = estimate_output(s)
    assert hourly(s).total(spot=True) is None and "spot_usd_per_hour" not in out
    assert out["usd_per_hour"] == out["on_demand_usd_per_hour"]
    assert not any("with the GPU nodes on spot" in line for line in estimate_lines(s))


# --- What the review found missing --------------------------------------------------------------
def test_an_azure_spot_max_price_caps_the_spot_pool_at_most() -> None:
    """maxPrice -1 pays up to on-demand; a cap below it is the most a spot node costs."""
    s = settings("azure")
    spot = machine(s.cloud, s.gpu_pools.spot.machine_type)
    (line,) = [l for l in most_hourly(s).lines if l.item == "GPU pool spot"]
    assert line.usd_per_hour == pytest.approx(spot.on_demand_usd_per_hour * s.gpu_pools.spot.max_nodes)
    capped = settings("azure", gpuPools={**values("azure")["gpuPools"], "spot": {
        **values("azure")["gpuPools"]["spot"], "maxPrice": 12.5}})
    (line,) = [l for l in most_hourly(capped).lines if l.item == "GPU pool spot"]
    assert line.usd_per_hour == pytest.approx(12.5 * s.gpu_pools.spot.max_nodes)
    assert "maxPrice 12.5" in line.detail


def test_the_idle_tail_is_the_autoscaler_s_own_setting() -> None:
    from infra.aws.autoscaler import values as chart_values
    from infra.catalog import SCALE_DOWN_UNNEEDED_MINUTES, Cloud

    chart = chart_values("c", "us-east-1", "1.33", "arn", {})
    assert chart["extraArgs"]["scale-down-unneeded-time"] == f"{SCALE_DOWN_UNNEEDED_MINUTES[Cloud.AWS]}m"
    for stack in STACKS:
        s = settings(stack)
        assert run_estimate(s).scale_down_hours == SCALE_DOWN_UNNEEDED_MINUTES[s.cloud] / 60


def test_a_preparation_on_the_gpu_pool_adds_its_hours_and_its_node() -> None:
    from infra.settings.rules import prepare_hours

    prepare = {"path": "criteo/1tb", "prepare": {"enabled": True, "source": "s3://raw/days",
                                                 "days": "0-3", "pool": "gpu"}}
    job = {"trainerArgs": {"global_batch_size": 65536}}
    pools = {**values("aws")["gpuPools"], "onDemand": {
        **values("aws")["gpuPools"]["onDemand"], "maxNodes": 3}}
    s = settings("aws", dataset=prepare, job=job, gpuPools=pools)
    run = run_estimate(s)
    estimate = prepare_hours(s)
    assert estimate and run.prepare_hours == estimate[-1] > 0
    node = machine(s.cloud, s.job_pool.machine_type)
    assert run.prepare_extra_usd_per_hour == node.on_demand_usd_per_hour
    assert run.usd == pytest.approx(run.hours * run.usd_per_hour
                                    + run.prepare_hours * node.on_demand_usd_per_hour)
    assert any("preparation" in line for line in estimate_lines(s))
