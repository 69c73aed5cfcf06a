"""The cost and time estimate (infra/estimate.py): what `make check` prints and the stack
exports as `estimated_cost`, and the spend ceiling job.maxHourlyUsd that refuses a stack.

Expected figures are computed from the catalog and price tables, never typed in: the tests
assert how the estimate is composed, so a price update changes no test."""

from __future__ import annotations

import math

import json
import re
from typing import Any

import pytest

from infra.catalog.machines import machine
from infra.catalog.planning import throughput_reference
from infra.estimate import (job_most_hourly, standing_line, standing_usd_per_hour,
    LARGE_STACK_USD_PER_HOUR, control_plane_plan, estimate_lines, estimate_output, hourly,
    job_hourly_usd, most_hourly, run_estimate,
)
from infra.throughput import ROUGH_PLAN
from infra.prices import AKS_TIER_HOUR, EKS_CLUSTER_HOUR, GKE_CLUSTER_HOUR
from infra.settings.errors import SettingsError
from infra.settings.loader import settings_from_mapping
from infra.settings.model.stack_file import Settings
from tests.config_commands import config_after
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


# Each file system twice as large, in steps its service accepts (infra/<cloud>/rules.py).
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
                 quota={"pending": True},  # past EKS's default 450 nodes per node group
                 gpuPools={"onDemand": {"machineType": "p4d.24xlarge", "maxNodes": 500},
                           "spot": {"machineType": "p4d.24xlarge", "maxNodes": 2}})
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(big)
    (problem,) = [p for p in caught.value.problems if p.path == "job.maxHourlyUsd"]
    assert problem.value == 1000
    unbounded = settings_from_mapping({**big, "job": {**big["job"], "maxHourlyUsd": None}})
    most, job = job_most_hourly(unbounded).total(), job_hourly_usd(unbounded)
    assert most is not None and most > job > 10_000
    # Both figures, the pools behind the first, and the fix.
    assert f"{most:,.2f}" in problem.allowed and f"{job:,.2f}" in problem.allowed
    assert "500 x p4d.24xlarge" in problem.allowed
    # Two commands that work as printed (new-user review B3: no value, no command, and a pool
    # the job does not use was named): the ceiling rounded up, or the job's own pool's bound.
    assert f"pulumi config set --path job.maxHourlyUsd {math.ceil(most)}" in problem.allowed
    # maxNodes is the gang's size already: growing less is no fix (walkthrough 4).
    assert "gpuPools.onDemand.maxNodes" not in problem.allowed
    assert "gpuPools.spot" not in problem.allowed
    assert "job.maxHourlyUsd = 1000" in str(caught.value)


def _ceiling_refusal(sections: dict[str, Any], cloud: str) -> str | None:
    try:
        settings_from_mapping(values(cloud, **sections))
    except SettingsError as error:
        found = [p.allowed for p in error.problems if p.path == "job.maxHourlyUsd"]
        return found[0] if found else None
    return None


@pytest.mark.parametrize("cloud, sections, expected", [
    # The walkthrough's: an 18.79/h spot job under 30/h, its pool's maxNodes the gang's size.
    ("aws", {"job": {"pool": "spot", "nodes": 2, "maxHourlyUsd": 30},
             "gpuPools": {"spot": {"maxNodes": 2}}}, ["job.maxHourlyUsd"]),
    ("aws", {"job": {"pool": "spot", "nodes": 1, "maxHourlyUsd": 30},
             "gpuPools": {"spot": {"maxNodes": 2}}}, ["job.maxHourlyUsd", "gpuPools.spot.maxNodes"]),
    ("azure", {"job": {"pool": "spot", "nodes": 2, "maxHourlyUsd": 30},
               "gpuPools": {"spot": {"maxNodes": 2}}}, ["job.maxHourlyUsd", "gpuPools.spot.maxPrice"]),
    ("aws", {"job": {"nodes": 2, "maxHourlyUsd": 30}, "gpuPools": {"onDemand": {"maxNodes": 2}}},
     ["job.maxHourlyUsd"]),
    # Second walkthrough: maxNodes 4 above the gang of 2, but 2 spot nodes at on-demand still
    # pass 30/h: growing less alone lifts nothing, so it is not offered.
    ("aws", {"job": {"pool": "spot", "nodes": 2, "maxHourlyUsd": 30},
             "gpuPools": {"spot": {"maxNodes": 4}}}, ["job.maxHourlyUsd"]),
])
def test_every_fix_the_ceiling_refusal_prints_lifts_it(cloud: str, sections: dict[str, Any],
                                                       expected: list[str]) -> None:
    """Walkthrough 4: "let the job's pool grow less" printed maxNodes = job.nodes where it
    already was, and the same refusal followed. Each command printed now lifts the refusal,
    and a spot job says plainly that spot is counted at the on-demand price."""
    refusal = _ceiling_refusal(sections, cloud)
    assert refusal is not None
    commands = re.findall(r"`(pulumi config set [^`]+)`", refusal)
    assert [c.split()[4] for c in commands] == expected
    for command in commands:
        assert _ceiling_refusal(config_after(sections, command), cloud) is None, command
    if sections["job"].get("pool") == "spot":
        # said beside the figure it explains, not beside the job's figure at today's spot price
        most, job = refusal.split("), above this ceiling", 1)
        assert "spot nodes counted at the on-demand price" in most
        assert "at today's spot price" in job and "on-demand" not in job.split(". ", 1)[0]
        if cloud == "aws":
            assert "the stack sets no spot price cap on aws" in most


def test_a_ceiling_above_the_most_the_pools_reach_is_accepted() -> None:
    most = most_hourly(settings("aws")).total()
    assert most is not None
    s = settings("aws", job={"maxHourlyUsd": most + 1})
    assert s.job.max_hourly_usd == most + 1


def test_the_ceiling_is_judged_where_the_pools_may_scale_not_at_the_job_s_size() -> None:
    """Between the job's rate and the most its pool reaches (maxNodes, system pool at its max):
    refused, since the job's pool may scale; the spot pool an on-demand job never uses is not
    counted, so a ceiling between the two totals holds."""
    shipped = settings("aws")
    own = job_most_hourly(shipped).total() or 0
    assert job_hourly_usd(shipped) < own < (most_hourly(shipped).total() or 0)
    between = (job_hourly_usd(shipped) + own) / 2
    with pytest.raises(SettingsError) as caught:
        settings_from_mapping(values("aws", job={"maxHourlyUsd": between}))
    assert [p.path for p in caught.value.problems] == ["job.maxHourlyUsd"]
    above_own = (own + (most_hourly(shipped).total() or 0)) / 2
    assert settings_from_mapping(values("aws", job={"maxHourlyUsd": above_own})).job.max_hourly_usd == above_own


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
    assert two.training_hours and four.training_hours and two.throughput and four.throughput
    for run in (two, four):  # the GPUs taken to scale linearly at the planned rate per GPU
        assert run.training_hours == pytest.approx(
            run.samples / (run.throughput.samples_per_s_per_gpu * run.gpus) / 3600)
    # Network-bound on p4d: 3/4 of the tables across nodes on 4, half on 2.
    assert "network bound" in two.throughput.source and "the lower" in four.throughput.source
    assert four.throughput.samples_per_s_per_gpu == pytest.approx(
        two.throughput.samples_per_s_per_gpu * (1 / 2) / (3 / 4))
    assert four.training_hours < two.training_hours
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


BENCH = throughput_reference("H200 bench")
ANCHOR = throughput_reference("p4d 1 node")


def test_the_recorded_bench_run_is_the_bench_s_model() -> None:
    model = _bench_model()
    assert BENCH.embedding_dim == model["embedding_dim"]
    assert set(BENCH.rows) == {model["num_embeddings"]}
    assert ",".join(map(str, BENCH.dense_arch_layer_sizes)) == model["dense_arch_layer_sizes"]
    assert ",".join(map(str, BENCH.over_arch_layer_sizes)) == model["over_arch_layer_sizes"]
    assert BENCH.gpus == 1 and "bench/train_throughput.py" in BENCH.source
    assert BENCH.batch_per_gpu is None  # never recorded: the reason nothing is "measured"


def test_the_anchor_is_torchrec_s_public_p4d_run() -> None:
    """pytorch/torchrec examples/dlrm/README.MD: 1 x p4d (8 x A100 40GB) 5,497,159.68 rec/s at
    local batch 8192; 2 x p4d 2,028,339.2 rec/s at 4096; dim 128, MLPs 512,256,128 /
    1024,1024,512,256,1 (the MLPerf recipe's own MLPs, trainer/recipe.py)."""
    from trainer.recipe import RECIPES

    two = throughput_reference("p4d 2 nodes")
    for ref, rate, gpus, batch in ((ANCHOR, 5_497_159.68, 8, 8192), (two, 2_028_339.2, 16, 4096)):
        assert (ref.machine, ref.gpus, ref.samples_per_s, ref.batch_per_gpu) == (
            "p4d.24xlarge", gpus, rate, batch)
        assert machine("aws", ref.machine or "").gpu_model == ref.gpu_model
        assert list(ref.dense_arch_layer_sizes) == RECIPES["mlperf"]["dense_arch_layer_sizes"]
        assert list(ref.over_arch_layer_sizes) == RECIPES["mlperf"]["over_arch_layer_sizes"]
        assert "pytorch/torchrec examples/dlrm/README.MD" in ref.source
    assert ANCHOR.samples_per_s_per_gpu == pytest.approx(687_145, rel=1e-5)
    assert two.samples_per_s_per_gpu == pytest.approx(126_771, rel=1e-5)


def _bench_job(nodes: int, **trainer: Any) -> dict[str, Any]:
    args = {"embedding_dim": BENCH.embedding_dim, "num_embeddings": BENCH.rows[0],
            "dense_arch_layer_sizes": list(BENCH.dense_arch_layer_sizes),
            "over_arch_layer_sizes": list(BENCH.over_arch_layer_sizes),
            "interaction": BENCH.interaction, "optimizer": "sgd",
            "batch_size": 2048, **trainer}
    return {"nodes": nodes, "trainerArgs": args}


def test_no_job_is_called_measured_every_plan_names_its_inputs() -> None:
    """Even the bench's own model on one H200 is a plan: the bench's batch was never recorded.
    The source names the anchor's machine, model and batch, the job's batch, and on H200 the
    bench beside the anchor, the lower of the two."""
    for changes in ({"gpuPools": H200_POOLS, "job": _bench_job(1)},
                    {"gpuPools": H200_POOLS, "job": _bench_job(2)},
                    {"job": _bench_job(1)}, {}):
        s = settings("aws", **changes)
        out = estimate_output(s)["run"]
        plan = run_estimate(s).throughput
        assert plan and plan.source.startswith(ROUGH_PLAN), changes
        assert "measured" not in plan.source and "throughput_measured" not in out
        assert "batch 8192/GPU" in plan.source and "p4d.24xlarge" in plan.source
        assert "batch 2048/rank" in plan.source
        gpus = s.job.nodes * s.job.processes_per_node
        assert out["throughput_scaling"] == (f"x {gpus} GPUs assumed to scale linearly"
                                             if gpus > 1 else "1 GPU")
    h200 = run_estimate(settings("aws", gpuPools=H200_POOLS, job=_bench_job(1))).throughput
    assert h200 and "H200 bench" not in h200.source and "batch not recorded" in h200.source


def test_a_plan_scales_by_matmul_peak_and_never_above_the_anchor_for_a_smaller_model() -> None:
    from infra.catalog.gpus import gpu_model
    from infra.throughput import dense_macs_per_sample

    a100 = run_estimate(settings("aws", job=_bench_job(1))).throughput
    assert a100 is not None  # the bench's model is smaller than the anchor's: the anchor's rate
    assert a100.samples_per_s_per_gpu == pytest.approx(ANCHOR.samples_per_s_per_gpu)
    # The anchor's own model on H200: the anchor x the matmul peak ratio, unless the bench
    # (1.70M for its smaller model, not taken as faster for a larger one) is lower.
    anchor_model = {"embedding_dim": 128, "dense_arch_layer_sizes": [512, 256, 128],
                    "over_arch_layer_sizes": [1024, 1024, 512, 256, 1], "interaction": "dot"}
    h200 = run_estimate(settings("aws", gpuPools=H200_POOLS, job=_bench_job(
        1, **anchor_model))).throughput
    ratio = gpu_model("H200", 141).bf16_dense_tflops / gpu_model("A100", 40).bf16_dense_tflops
    big = dense_macs_per_sample(128, [512, 256, 128], [1024, 1024, 512, 256, 1], "dot")
    small = dense_macs_per_sample(64, [512, 256, 64], [512, 512, 256, 1], "dot")
    assert h200 and h200.samples_per_s_per_gpu == pytest.approx(min(
        ANCHOR.samples_per_s_per_gpu * ratio, BENCH.samples_per_s_per_gpu * small / big))
    assert "the lower" in h200.source


def test_the_mlperf_model_plans_slower_by_its_dense_work() -> None:
    from infra.throughput import dense_macs_per_sample

    mlperf = run_estimate(settings("aws", job={"nodes": 1, "trainerArgs": {"recipe": "mlperf"}}))
    assert mlperf.throughput
    anchor = dense_macs_per_sample(128, [512, 256, 128], [1024, 1024, 512, 256, 1], "dot")
    big = dense_macs_per_sample(128, [512, 256, 128], [1024, 1024, 512, 256, 1], "dcn", 3, 512)
    assert mlperf.throughput.samples_per_s_per_gpu == pytest.approx(
        ANCHOR.samples_per_s_per_gpu * anchor / big)


def test_the_network_share_is_calibrated_on_the_public_two_node_run() -> None:
    """The 2 x p4d run's samples/s per GPU times its all-to-all bytes over EFA's 6.25 GB/s per
    GPU: the share of the fabric the bound takes; the shipped AWS job (that model on 2 x p4d)
    then plans at the public 2-node figure."""
    from infra.throughput import crossing_bytes_per_sample, network_efficiency

    two = throughput_reference("p4d 2 nodes")
    crossing = crossing_bytes_per_sample(26, 128, 4, 4, 2)
    assert crossing == (26 * 8 + 26 * 128 * 8) / 2
    assert network_efficiency() == pytest.approx(two.samples_per_s_per_gpu * crossing / 6.25e9)
    s = settings("aws")
    plan = run_estimate(s).throughput
    if (s.job.nodes, s.interconnect.fabric) == (2, True):
        assert plan and plan.samples_per_s_per_gpu == pytest.approx(two.samples_per_s_per_gpu)


def test_across_nodes_the_embedding_all_to_all_bounds_the_rate() -> None:
    """GCP's a2-highgpu-8g has 100 Gbit/s for 8 GPUs: two nodes are bound by the pooled
    embeddings and their gradients crossing nodes; half-precision comms halve those bytes."""
    from infra.catalog.machines import inter_host_gb_s_per_gpu
    from infra.throughput import network_efficiency

    s = settings("gcp")
    plan = run_estimate(s).throughput
    assert plan and "the lower" in plan.source
    # 26 pooled vectors out and gradients back at 4 B, 26 int64 ids, half of them across nodes.
    crossing = (26 * 8 + 26 * 128 * (4 + 4)) / 2
    per_gpu = inter_host_gb_s_per_gpu(machine(s.cloud, s.job_pool.machine_type), False) * 1e9
    assert plan.samples_per_s_per_gpu == pytest.approx(per_gpu * network_efficiency() / crossing)
    half = run_estimate(settings("gcp", job={"trainerArgs": {
        "batch_size": 2048, "embedding_dim": 128, "dense_arch_layer_sizes": [512, 256, 128],
        "embedding_comm_forward_precision": "fp16",
        "embedding_comm_backward_precision": "bf16"}})).throughput
    assert half and half.samples_per_s_per_gpu > plan.samples_per_s_per_gpu
    one_node = run_estimate(settings("gcp", job={"nodes": 1})).throughput
    assert one_node and "network bound" not in one_node.source


# Machines whose fabric the stack may leave off, with the primary NIC's Gbit/s from the
# catalog's own notes: AWS network card 0 (400 / 4 cards, 3200 / 32), Azure's Ethernet NIC
# (24 / 80 Gbps, not the InfiniBand), GCP A3's primary gVNIC (200 Gbps, not the GPU NICs).
SOCKET_GBPS = {("aws", "p4d.24xlarge"): 100, ("aws", "p5.48xlarge"): 100,
               ("aws", "p5en.48xlarge"): 200, ("azure", "Standard_ND96asr_v4"): 24,
               ("azure", "Standard_ND96isr_H100_v5"): 80, ("gcp", "a3-highgpu-8g"): 200,
               ("gcp", "a3-megagpu-8g"): 200, ("gcp", "a3-ultragpu-8g"): 200,
               ("gcp", "a2-highgpu-8g"): 100, ("azure", "Standard_NC24ads_A100_v4"): 20}


@pytest.mark.parametrize(("cloud", "name"), list(SOCKET_GBPS))
def test_the_inter_host_figure_follows_the_fabric_setting(cloud: str, name: str) -> None:
    from infra.catalog.machines import fabric_in_use, inter_host_gb_s_per_gpu

    m = machine(cloud, name)
    sockets = SOCKET_GBPS[(cloud, name)] / 8 / m.gpu_count
    assert inter_host_gb_s_per_gpu(m, False) == pytest.approx(sockets)
    fabric = m.network_gbps / 8 / m.gpu_count if fabric_in_use(m, True) else sockets
    assert inter_host_gb_s_per_gpu(m, True) == pytest.approx(fabric)
    assert not fabric_in_use(m, False)


def _pools(stack: str, name: str) -> dict[str, Any]:
    pools = values(stack)["gpuPools"]
    return {pool: {**pools[pool], "machineType": name} for pool in ("onDemand", "spot")}


@pytest.mark.parametrize(("stack", "name"), [("gcp", "a3-ultragpu-8g"), ("aws", "p4d.24xlarge"),
                                             ("azure", "Standard_ND96asr_v4"),
                                             ("gcp", "a3-megagpu-8g")])
def test_without_the_fabric_the_network_bound_is_the_primary_nic_s(stack: str, name: str) -> None:
    """a3-ultragpu-8g must run with interconnect.fabric false (the rules), and any fabric
    machine may: NCCL then goes over plain sockets, and the plan says so at that figure."""
    from infra.catalog.machines import inter_host_gb_s_per_gpu
    from infra.throughput import all_to_all_bytes_per_sample, network_efficiency

    extra: dict[str, Any] = {"flexStart": True} if name == "a3-ultragpu-8g" else {}
    pools = _pools(stack, name)
    pools["onDemand"] = {**pools["onDemand"], **extra}
    placement = {"placement": False} if extra else {}  # flex-start: no compact placement
    s = settings(stack, gpuPools=pools, interconnect={"fabric": False, **placement})
    plan = run_estimate(s).throughput
    m = machine(s.cloud, name)
    assert plan and "plain sockets on the primary NIC" in plan.source
    assert f"{inter_host_gb_s_per_gpu(m, False):g} GB/s per GPU" in plan.source
    from infra.throughput import job_trainer_flags as _trainer_flags

    bound = (inter_host_gb_s_per_gpu(m, False) * 1e9 * network_efficiency()
             / all_to_all_bytes_per_sample(s, _trainer_flags(s)))
    assert plan.samples_per_s_per_gpu <= bound * (1 + 1e-9)
    if name != "a3-ultragpu-8g":  # with its fabric on, the same job plans faster
        on = run_estimate(settings(stack, gpuPools=pools,
                                   interconnect={"fabric": True})).throughput
        assert on and on.samples_per_s_per_gpu > plan.samples_per_s_per_gpu


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
    assert run["throughput_source"].startswith(ROUGH_PLAN) and "throughput_measured" not in run


@pytest.mark.parametrize("stack", STACKS)
def test_the_printed_lines_name_each_item_the_totals_and_the_source(stack: str) -> None:
    s = settings(stack)
    text = "\n".join(estimate_lines(s))
    for line in hourly(s).lines:
        assert line.detail in text
    assert f"{hourly(s).total():,.2f} on-demand" in text
    assert "with the GPU nodes on spot" in text and "at most" in text
    # both prices of the GPU nodes count the job's nodes; "at most" says what else it holds
    spot = machine(s.cloud, s.gpu_pools.spot.machine_type)
    assert f"spot {s.job.nodes} x {spot.name} at {spot.spot_usd_per_hour:g}/h" in text
    (most,) = [line for line in text.splitlines() if line.startswith("  at most")]
    assert most.endswith("included)")
    for name in ("file system", "outbound", "control plane"):
        assert name in most.rpartition("; ")[2], f"{stack}: {name} not said to be in {most}"
    run = run_estimate(s)
    assert run.throughput
    # the source, word for word, over indented lines of at most 100 characters
    throughput = text[text.index("  throughput"):text.index("  time ")].splitlines()
    def words(text: str) -> str:
        return text.replace(";", "").replace(" ", "")

    assert words(" ".join(line.strip() for line in throughput[1:])) == words(run.throughput.source)
    assert all(line.startswith(" " * 16) and len(line) <= 100 for line in throughput[1:])
    assert f"about USD {run.usd:,.2f}" in text and "at most about" not in text
    assert f"= about {run.hours:.2f} h (an estimate)" in text
    assert f"x {run.gpus} GPUs assumed to scale linearly" in text
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
    from infra.settings.model.shared_file_system import AnfServiceLevel, FilestoreTier

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
    from infra.catalog.cloud import Cloud
    from infra.catalog.node_times import SCALE_DOWN_UNNEEDED_MINUTES

    chart = chart_values("c", "us-east-1", "1.33", "arn", {})
    assert chart["extraArgs"]["scale-down-unneeded-time"] == f"{SCALE_DOWN_UNNEEDED_MINUTES[Cloud.AWS]}m"
    for stack in STACKS:
        s = settings(stack)
        assert run_estimate(s).scale_down_hours == SCALE_DOWN_UNNEEDED_MINUTES[s.cloud] / 60


def test_a_preparation_on_the_gpu_pool_adds_its_hours_and_its_node() -> None:
    from infra.settings.prepare_rules import prepare_hours

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


# --- trainerArgs in every form `pulumi config set --path` stores (docs/data.md) ----------------
DOCS_ROWS = "45833188,36746,17245,7413,20243,3,7114,1441,62,29275261,1572176,345138,10,2209,11267,128,4,974,14,48937457,11316796,40094537,452104,12606,104,35"  # noqa: E501
AS_TEXT = {"num_embeddings_per_feature": DOCS_ROWS, "embedding_dim": 128,
           "dense_arch_layer_sizes": "512,256,128", "over_arch_layer_sizes": "1024,1024,512,256,1",
           "multi_hot_sizes": "3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1",
           "batch_size": 2048}
AS_LISTS = {key: [int(v) for v in value.split(",")] if isinstance(value, str) else value
            for key, value in AS_TEXT.items()}


def test_comma_text_estimates_as_the_same_lists() -> None:
    """`pulumi config set --path 'job.trainerArgs.dense_arch_layer_sizes' 512,256,128` stores
    the text "512,256,128": the trainer's parser reads it as a list, and so does the estimate
    (it raised ValueError from int() over the characters, crashing `pulumi up`)."""
    text = settings("aws", job={"trainerArgs": AS_TEXT})
    lists = settings("aws", job={"trainerArgs": AS_LISTS})
    assert estimate_output(text) == estimate_output(lists)
    assert estimate_lines(text) == estimate_lines(lists)
    plan = run_estimate(text).throughput
    assert plan and "kB of embedding all-to-all" in plan.source
    # The multi-hot ids (sum 214) count in the bytes, as they do for the list form.
    assert all_to_all(text) == all_to_all(lists) == (214 * 8 + 26 * 128 * 8) / 2
    # The checkpoint item reads the tables as the trainer does: 26 given tables, not the default.
    from infra.preemption import checkpoint_bytes

    assert checkpoint_bytes(dict(text.job.trainer_args)) == checkpoint_bytes(AS_LISTS) > (
        checkpoint_bytes({}))


def all_to_all(s: Settings) -> float:
    from infra.throughput import all_to_all_bytes_per_sample, job_trainer_flags as _trainer_flags

    return all_to_all_bytes_per_sample(s, _trainer_flags(s))


def test_a_single_integer_is_a_one_layer_list() -> None:
    """`over_arch_layer_sizes: 1` (an int in YAML) is the one-layer top MLP [1] for the
    trainer's parser; the estimate takes it the same way."""
    single = settings("aws", job={"trainerArgs": {"over_arch_layer_sizes": 1}})
    listed = settings("aws", job={"trainerArgs": {"over_arch_layer_sizes": [1]}})
    assert estimate_output(single) == estimate_output(listed)
    assert estimate_output(single)["run"]["usd"] > 0


def test_the_ceiling_judges_the_pools_the_job_can_use_not_an_idle_on_demand_pool() -> None:
    """A spot job was refused because the on-demand pool, which it never uses, could grow."""
    sizes = {"onDemand": {"machineType": "p4d.24xlarge", "maxNodes": 4},
             "spot": {"machineType": "p4d.24xlarge", "maxNodes": 1}}
    free = settings_from_mapping(values("aws", job={"pool": "spot", "nodes": 1}, gpuPools=sizes))
    own, every = job_most_hourly(free).total(), most_hourly(free).total()
    assert own is not None and every is not None and own < every
    ceiling = round((own + every) / 2)
    settings_from_mapping(values("aws", job={"pool": "spot", "nodes": 1, "maxHourlyUsd": ceiling},
                                 gpuPools=sizes))  # passes: the on-demand pool is not the job's


def test_check_says_what_a_stack_costs_a_month_while_it_exists() -> None:
    """A forgotten stack bills: the standing items, computed from the estimate."""
    for stack, low, high in (("aws", 700, 1100), ("azure", 1300, 1900)):
        s = settings(stack)
        line = standing_line(s, stack)
        monthly = standing_usd_per_hour(s) * 730
        assert low < monthly < high
        assert f"about USD {monthly:,.0f} a month" in line
        assert f"pulumi destroy --stack {stack}" in line
