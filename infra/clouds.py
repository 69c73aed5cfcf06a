"""Pick the cloud component for a stack; a cloud's SDK is imported only when that cloud is used."""

from __future__ import annotations

import importlib

from infra.catalog import Cloud, machine
from infra.contract import GpuCluster, GpuClusterArgs

COMPONENTS = {
    Cloud.AWS: ("infra.aws", "AwsGpuCluster"),
    Cloud.AZURE: ("infra.azure", "AzureGpuCluster"),
    Cloud.GCP: ("infra.gcp", "GcpGpuCluster"),
}


def build_cluster(args: GpuClusterArgs) -> GpuCluster:
    """Create the settings' cloud's GPU cluster and return its contract."""
    module_name, class_name = COMPONENTS[args.settings.cloud]
    component_class = getattr(importlib.import_module(module_name), class_name)
    component = component_class(f"{args.name_prefix}", args)
    contract: GpuCluster = component.contract
    return contract


def hourly_cost(args: GpuClusterArgs) -> dict[str, float]:
    """Estimated USD per hour at the pools' desired sizes, on-demand and with spot, from the catalog."""
    s = args.settings
    system = machine(s.cloud, s.system_pool.machine_type).on_demand_usd_per_hour
    system_cost = system * s.system_pool.desired_nodes
    gpu = machine(s.cloud, s.job_pool.machine_type)
    return {
        "on_demand_usd_per_hour": round(system_cost + gpu.on_demand_usd_per_hour * s.job.nodes, 2),
        "spot_usd_per_hour": round(system_cost + gpu.spot_usd_per_hour * s.job.nodes, 2),
    }

