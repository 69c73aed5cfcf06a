"""Pick the cloud component for a stack; a cloud's SDK is imported only when that cloud is used."""

from __future__ import annotations

import importlib

import pulumi

from infra.catalog.cloud import Cloud
from infra.contract import GpuCluster, GpuClusterArgs
from infra.kubernetes_release import Release, choose_release
from infra.previous_run import PreviousRun
from infra.settings.model.stack_file import Settings

COMPONENTS = {
    Cloud.AWS: ("infra.aws.component", "AwsGpuCluster"),
    Cloud.AZURE: ("infra.azure.component", "AzureGpuCluster"),
    Cloud.GCP: ("infra.gcp.component", "GcpGpuCluster"),
}

# Each cloud's module that asks it which Kubernetes versions it creates today
# (`offered_versions(settings) -> Offered`) and which one a live cluster runs
# (`live_version(settings, previous) -> str | None`).
VERSIONS = {
    Cloud.AWS: "infra.aws.versions",
    Cloud.AZURE: "infra.azure.versions",
    Cloud.GCP: "infra.gcp.versions",
}


def resolve_release(settings: Settings, previous: PreviousRun) -> Release:
    """The Kubernetes version for this run (infra/kubernetes_release.py), asked of the
    settings' cloud before any resource is registered."""
    versions = importlib.import_module(VERSIONS[settings.cloud])
    live = versions.live_version(settings, previous) if previous.live else None
    release = choose_release(settings.kubernetes.version, live,
                             lambda: versions.offered_versions(settings))
    if release.notice:
        pulumi.log.warn(release.notice)
    return release


def build_cluster(args: GpuClusterArgs) -> GpuCluster:
    """Create the settings' cloud's GPU cluster and return its contract."""
    module_name, class_name = COMPONENTS[args.settings.cloud]
    component_class = getattr(importlib.import_module(module_name), class_name)
    component = component_class(f"{args.name_prefix}", args)
    contract: GpuCluster = component.contract
    return contract

