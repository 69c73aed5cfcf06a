"""Facts about the machine catalog that the rest of the program relies on."""

from __future__ import annotations

import pytest

from dataclasses import replace

from infra import quotas
from infra.catalog.cloud import Cloud
from infra.catalog.gate_floors import gpu_matmul_floor_tflops
from infra.catalog.machines import (MACHINES, Interconnect, Machine, find_machine, gpu_hbm_gb_s,
                                    machine, machine_names)
from workloads.waiting import cloud_steps

GPU_MACHINES = [m for m in MACHINES if m.has_gpus]

# The nine machine types of the seed guides: (cloud, name, GPU model, GPU count, GiB per GPU).
SEED_MACHINES = [
    (Cloud.AWS, "p4d.24xlarge", "A100", 8, 40),
    (Cloud.AWS, "p4de.24xlarge", "A100", 8, 80),
    (Cloud.AWS, "p5.48xlarge", "H100", 8, 80),
    (Cloud.AZURE, "Standard_ND96asr_v4", "A100", 8, 40),
    (Cloud.AZURE, "Standard_ND96amsr_A100_v4", "A100", 8, 80),
    (Cloud.AZURE, "Standard_ND96isr_H100_v5", "H100", 8, 80),
    (Cloud.GCP, "a2-highgpu-8g", "A100", 8, 40),
    (Cloud.GCP, "a2-ultragpu-8g", "A100", 8, 80),
    (Cloud.GCP, "a3-highgpu-8g", "H100", 8, 80),
]


def _id(m) -> str:
    return f"{m.cloud.value}:{m.name}"


@pytest.mark.parametrize(("cloud", "name", "model", "count", "memory"), SEED_MACHINES)
def test_seed_guide_machines_are_present_with_their_gpus(cloud, name, model, count, memory):
    m = machine(cloud, name)
    assert (m.gpu_model, m.gpu_count, m.gpu_memory_gib) == (model, count, memory)


@pytest.mark.parametrize("m", GPU_MACHINES, ids=_id)
def test_every_gpu_machine_has_a_model_count_and_memory(m):
    assert m.gpu_model
    assert m.gpu_count > 0
    assert m.gpu_memory_gib > 0


@pytest.mark.parametrize("m", [m for m in MACHINES if not m.has_gpus], ids=_id)
def test_cpu_machines_declare_no_gpu_facts(m):
    assert m.gpu_model is None
    assert m.gpu_memory_gib == 0
    assert m.gcp_accelerator_type is None
    assert m.efa_interfaces == 0


@pytest.mark.parametrize("m", [m for m in MACHINES if m.interconnect is Interconnect.EFA], ids=_id)
def test_efa_machines_are_aws_and_request_at_least_one_efa_interface(m):
    assert m.cloud is Cloud.AWS
    assert m.efa_interfaces > 0


@pytest.mark.parametrize("m", [m for m in MACHINES if m.interconnect is not Interconnect.EFA], ids=_id)
def test_only_efa_machines_request_efa_interfaces(m):
    assert m.efa_interfaces == 0


# A new GPU machine: what a maintainer would add for an AWS P6 (B200) without the rest.
_B200 = dict(name="p6-b200.48xlarge", cloud=Cloud.AWS, gpu_model="B200", gpu_count=8,
             gpu_memory_gib=179, vcpus=192, memory_gib=2048, network_gbps=3200,
             interconnect=Interconnect.EFA, efa_interfaces=8, on_demand_usd_per_hour=113.93,
             typical_spot_discount=0.5)


def test_a_gpu_machine_whose_gpu_model_has_no_record_is_refused_when_the_catalog_loads():
    """Without a GpuModel the gate would check no matmul floor and the estimate plan nothing."""
    with pytest.raises(ValueError, match=r"p6-b200.48xlarge: add a GpuModel entry for \('B200', 179\)"):
        Machine(**_B200)


def test_a_gcp_gpu_machine_without_its_quota_metric_is_refused_when_the_catalog_loads():
    """Without it `pulumi up` and doctor would skip the GPU quota check for the machine."""
    a3 = machine(Cloud.GCP, "a3-highgpu-8g")
    with pytest.raises(ValueError, match="gcp_gpu_quota_metric"):
        replace(a3, gcp_gpu_quota_metric=None)


def test_an_infiniband_machine_without_its_hca_count_or_topology_family_is_refused_when_the_catalog_loads():
    """Without them `pulumi up` could not name the HCAs or the topology file of the job's NCCL
    environment (infra/azure/interconnect.py): the catalog says so before any resource exists."""
    nd = machine(Cloud.AZURE, "Standard_ND96isr_H200_v5")
    assert (nd.ib_hcas, nd.azure_topology) == (8, "ndv5")
    with pytest.raises(ValueError, match=r"Standard_ND96isr_H200_v5: add ib_hcas and azure_topology"):
        replace(nd, ib_hcas=0)
    with pytest.raises(ValueError, match="ib_hcas and azure_topology"):
        replace(nd, azure_topology=None)


@pytest.mark.parametrize("m", GPU_MACHINES, ids=_id)
def test_every_gpu_machine_has_its_gpu_model_s_rated_figures(m):
    assert m.gpu is not None and (m.gpu.model, m.gpu.memory_gib) == (m.gpu_model, m.gpu_memory_gib)
    assert gpu_matmul_floor_tflops(m) > 0  # the gate's GPU health floor
    assert gpu_hbm_gb_s(m) and m.gpu.fp32_dense_tflops and m.gpu.tf32_dense_tflops


@pytest.mark.parametrize("m", [m for m in GPU_MACHINES if m.cloud is Cloud.GCP], ids=_id)
def test_every_gcp_gpu_machine_names_its_gpu_quota_metric(m):
    assert quotas.gcp_gpu_metric(m) == m.gcp_gpu_quota_metric
    assert m.gcp_gpu_quota_metric.startswith("NVIDIA_") and m.gcp_gpu_quota_metric.endswith("_GPUS")


@pytest.mark.parametrize("m", [m for m in GPU_MACHINES if m.cloud is Cloud.AWS], ids=_id)
def test_every_aws_gpu_machine_s_p_family_has_a_spot_quota_name_and_a_gang_size(m):
    """AWS_SPOT_P_QUOTAS is keyed by the P family the catalog's names give: a new family needs
    its quota's name there, or the waiting message names every P quota."""
    family = cloud_steps.instance_family(m.name)
    assert family in cloud_steps.AWS_SPOT_P_QUOTAS
    assert quotas.ec2_family(m) == family  # `check`'s quota and the waiting message's agree
    assert cloud_steps.gang_vcpus(family, 2) == 2 * m.vcpus


def test_the_p_family_of_a_dashed_instance_type_is_its_p_generation():
    """p6-b200.48xlarge counts against the P6 quotas; a suffix strip would give "p6-b200"."""
    assert cloud_steps.instance_family("p6-b200.48xlarge") == "p6"
    assert cloud_steps.aws_family(["Could not launch On-Demand Instances (p6-b200.48xlarge)"]) == "p6"
    assert cloud_steps.instance_family("p5en.48xlarge") == "p5"


def test_every_aws_gpu_machine_in_the_catalog_uses_efa():
    aws_gpu = [m for m in GPU_MACHINES if m.cloud is Cloud.AWS]
    assert aws_gpu
    assert all(m.interconnect is Interconnect.EFA for m in aws_gpu)


@pytest.mark.parametrize("m", [m for m in GPU_MACHINES if m.cloud is Cloud.GCP], ids=_id)
def test_gcp_gpu_machines_name_their_accelerator_type(m):
    assert m.gcp_accelerator_type and m.gcp_accelerator_type.startswith("nvidia-")


def test_only_gcp_machines_name_a_gcp_accelerator_type():
    assert all(m.gcp_accelerator_type is None for m in MACHINES if m.cloud is not Cloud.GCP)


@pytest.mark.parametrize(
    ("name", "accelerator", "interconnect"),
    [
        ("a2-highgpu-8g", "nvidia-tesla-a100", Interconnect.NONE),
        ("a2-ultragpu-8g", "nvidia-a100-80gb", Interconnect.NONE),
        ("a3-highgpu-8g", "nvidia-h100-80gb", Interconnect.GPUDIRECT_TCPX),
        ("a3-megagpu-8g", "nvidia-h100-mega-80gb", Interconnect.GPUDIRECT_TCPXO),
        ("a3-ultragpu-8g", "nvidia-h200-141gb", Interconnect.RDMA),
    ],
)
def test_gcp_accelerator_names_and_fabrics(name, accelerator, interconnect):
    m = machine(Cloud.GCP, name)
    assert (m.gcp_accelerator_type, m.interconnect) == (accelerator, interconnect)


@pytest.mark.parametrize(
    "name",
    ["Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4", "Standard_ND96isr_H100_v5",
     "Standard_ND96isr_H200_v5"],
)
def test_azure_nd_machines_have_infiniband(name):
    assert machine(Cloud.AZURE, name).interconnect is Interconnect.INFINIBAND


def test_azure_has_a_gpu_machine_without_infiniband():
    assert any(m.cloud is Cloud.AZURE and m.interconnect is Interconnect.NONE for m in GPU_MACHINES)


@pytest.mark.parametrize("cloud", list(Cloud))
def test_names_are_unique_per_cloud(cloud):
    names = [m.name for m in MACHINES if m.cloud is cloud]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("cloud", list(Cloud))
def test_each_cloud_has_gpu_and_non_gpu_machines(cloud):
    assert machine_names(cloud, gpu=True)
    assert machine_names(cloud, gpu=False)


@pytest.mark.parametrize("m", MACHINES, ids=_id)
def test_prices_and_shapes_are_positive_and_spot_is_cheaper(m):
    assert m.vcpus > 0 and m.memory_gib > 0 and m.network_gbps > 0
    assert m.on_demand_usd_per_hour > 0
    assert 0 < m.typical_spot_discount < 1
    assert 0 < m.spot_usd_per_hour < m.on_demand_usd_per_hour


def test_a_gpu_machine_costs_more_than_any_system_pool_machine():
    assert min(m.on_demand_usd_per_hour for m in GPU_MACHINES) > max(
        m.on_demand_usd_per_hour for m in MACHINES if not m.has_gpus
    )


def test_h200_machines_have_141_gib_per_gpu():
    h200 = [m for m in GPU_MACHINES if m.gpu_model == "H200"]
    assert {m.cloud for m in h200} == set(Cloud)
    assert all(m.gpu_memory_gib == 141 and m.gpu_count == 8 for m in h200)


def test_lookup_accepts_cloud_strings_and_reports_unknown_machines():
    assert find_machine("aws", "p5.48xlarge") is machine(Cloud.AWS, "p5.48xlarge")
    assert find_machine(Cloud.GCP, "p5.48xlarge") is None
    with pytest.raises(KeyError, match="not in the machine catalog"):
        machine(Cloud.AZURE, "Standard_ND40rs_v2")
    with pytest.raises(ValueError):
        find_machine("oracle", "BM.GPU.H100.8")


def test_machine_names_filters_and_sorts():
    all_gcp = machine_names("gcp")
    assert all_gcp == sorted(all_gcp)
    assert set(machine_names("gcp", gpu=True)) | set(machine_names("gcp", gpu=False)) == set(all_gcp)
    assert "e2-standard-4" in machine_names("gcp", gpu=False)
    assert "e2-standard-4" not in machine_names("gcp", gpu=True)


def test_machines_sold_only_through_reservations_are_flagged():
    assert machine(Cloud.GCP, "a3-ultragpu-8g").on_demand_available is False
    assert machine(Cloud.AWS, "p5.48xlarge").on_demand_available is True


def test_every_cloud_has_a_spot_and_an_on_demand_stop_notice_with_a_source() -> None:
    from infra.catalog.stop_notices import Capacity, stop_notice

    for cloud in Cloud:
        spot = stop_notice(cloud, Capacity.SPOT)
        assert spot.notice_seconds and 0 < spot.pod_seconds <= spot.notice_seconds
        assert spot.source.startswith("https://")
        assert stop_notice(cloud, Capacity.ON_DEMAND).pod_seconds is None  # no forced stop


def test_gke_spot_notice_depends_on_the_kubernetes_version() -> None:
    from infra.catalog.stop_notices import Capacity, stop_notice

    assert stop_notice(Cloud.GCP, Capacity.SPOT, "1.33").pod_seconds == 15
    assert stop_notice(Cloud.GCP, Capacity.SPOT, "1.35").pod_seconds == 105
    assert stop_notice(Cloud.GCP, Capacity.SPOT).pod_seconds == 15  # version unknown: the base


@pytest.mark.parametrize(("version", "minimum", "reaches"), [
    ("1.35", "1.35.0-gke.1171000", True),  # a minor stands for its newest build
    ("1.35.0-gke.1170999", "1.35.0-gke.1171000", False),
    ("1.35.0-gke.1171000", "1.35.0-gke.1171000", True),
    ("1.35.1-gke.100", "1.35.0-gke.1171000", True),
    ("1.34.9-gke.9999999", "1.35.0-gke.1171000", False),
    ("1.36", "1.35.0-gke.1171000", True),
    ("1.34", "1.35", False),
    ("v1.35.2", "1.35", True),
])
def test_one_version_comparison_for_minors_and_gke_builds(version, minimum, reaches) -> None:
    from infra.kubernetes_versions import version_reaches

    assert version_reaches(version, minimum) is reaches


def test_gke_spot_notice_follows_the_exact_gke_build() -> None:
    from infra.catalog.stop_notices import Capacity, stop_notice

    assert stop_notice(Cloud.GCP, Capacity.SPOT, "1.35.0-gke.1100000").pod_seconds == 15
    assert stop_notice(Cloud.GCP, Capacity.SPOT, "1.35.0-gke.2398000").pod_seconds == 105


def test_gke_machine_disks_come_from_the_catalog() -> None:
    assert machine(Cloud.GCP, "a3-ultragpu-8g").gcp_boot_disk_type == "hyperdisk-balanced"
    assert machine(Cloud.GCP, "a3-ultragpu-8g").gcp_local_ssds == 32
    assert machine(Cloud.GCP, "a3-megagpu-8g").gcp_local_ssds == 16
    assert machine(Cloud.GCP, "a2-highgpu-8g").gcp_local_ssds == 0


def test_stop_budgets_nest_inside_the_notice() -> None:
    from infra.catalog.stop_notices import STOP_NOTICES
    from infra.preemption import stop_budget

    for notice in STOP_NOTICES:
        budget = stop_budget(notice.cloud, notice.pod_seconds is not None, 120,
                             notice.min_kubernetes)
        assert 0 < budget.save_deadline_seconds < budget.shutdown_timeout_seconds \
            < budget.pod_grace_seconds


def test_every_fsx_tier_the_settings_take_has_a_price_and_the_advisor_names_one_of_them():
    """The FSx throughput tiers live in one table (infra/catalog/storage.py): the settings refuse any
    other value, the estimate prices each one, and the smallest change the advisors name is
    one of them (the top tier with more capacity when none is enough)."""
    from infra.catalog.storage import (FSX_CAPACITY_STEP_GIB, FSX_MB_S_PER_TIB_TIERS,
                                       fsx_persistent_2_for)
    from infra.prices import FSX_LUSTRE_GB_MONTH

    priced = {(kind, tier) for kind, tiers in FSX_MB_S_PER_TIB_TIERS.items()
              for tier in tiers or (None,)}
    assert priced == set(FSX_LUSTRE_GB_MONTH)
    assert fsx_persistent_2_for(500, 2400) == (250, 2400)  # 250 x 2.34 TiB = 586 MB/s
    tier, capacity = fsx_persistent_2_for(5000, 2400)
    assert tier == max(FSX_MB_S_PER_TIB_TIERS["PERSISTENT_2"])
    assert capacity % FSX_CAPACITY_STEP_GIB == 0 and tier * capacity / 1024 >= 5000
    assert tier * (capacity - FSX_CAPACITY_STEP_GIB) / 1024 < 5000


def test_every_filestore_tier_the_settings_take_has_its_sizes_price_and_write_rate():
    """One row per tier in each Filestore table: a tier the settings accept without its sizes
    would fail the size rule with a KeyError instead of a message."""
    from infra.catalog.storage import FILESTORE_CAPACITY_RANGES, FILESTORE_WRITE_MB_S
    from infra.prices import FILESTORE_GIB_MONTH
    from infra.settings.model.shared_file_system import FilestoreTier

    tiers = {t.value for t in FilestoreTier}
    assert tiers == set(FILESTORE_CAPACITY_RANGES) == set(FILESTORE_GIB_MONTH) == set(FILESTORE_WRITE_MB_S)
