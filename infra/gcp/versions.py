"""The GKE version the cluster is created at: one the REGULAR channel offers today.

`kubernetes.version` names a minor ("1.34"); GKE's channels move every few weeks, and a minor
leaves a channel when its standard support ends, so no list in this repository stays true. The
program asks GKE (getServerConfig, through `gcp.container.get_engine_versions` with the minor
as a prefix, https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations/getServerConfig)
when it runs, before any cloud resource is registered, and refuses a minor the channel does not
offer with the versions it does offer. The settings rule can only check the format offline
(infra/settings/model.py Kubernetes.version); this is the check against GKE's own list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.catalog import version_key, version_reaches
from infra.settings.errors import Problem, SettingsError
from infra.settings.model import Settings

# The channel the cluster is enrolled in (infra/gcp/cluster.py): a cluster in a channel can be
# created only at a version that channel offers
# (https://cloud.google.com/kubernetes-engine/docs/concepts/release-channels).
CHANNEL = "REGULAR"
# Flex-start node pools need GKE 1.32.2-gke.1652000 or later
# (https://cloud.google.com/kubernetes-engine/docs/concepts/dws, "Requirements").
FLEX_START_MIN_GKE = "1.32.2-gke.1652000"


@dataclass(frozen=True)
class OfferedVersions:
    """What the data source returns for one location and prefix. Its maps are built in
    terraform-provider-google's data_source_google_container_engine_versions.go (which
    pulumi-gcp wraps): `release_channel_default_version[channel]` is the channel's default,
    whatever the prefix; `release_channel_latest_version[channel]` is the newest of the
    channel's valid versions that starts with the prefix, and is absent when the channel offers
    none."""

    channel_default: str
    channel_latest_with_prefix: str  # "" when the channel offers no build of the minor

    @staticmethod
    def of(result: gcp.container.GetEngineVersionsResult) -> "OfferedVersions":
        defaults: Mapping[str, str] = result.release_channel_default_version or {}
        latest: Mapping[str, str] = result.release_channel_latest_version or {}
        return OfferedVersions(channel_default=defaults.get(CHANNEL, ""),
                               channel_latest_with_prefix=latest.get(CHANNEL, ""))


def pick_version(minor: str, location: str, offered: OfferedVersions) -> str:
    """The channel's default build when it is of `minor` (what GKE recommends), else the
    channel's newest build of `minor`; a minor the channel does not offer is a SettingsError
    that names the channel's default."""
    if offered.channel_default.startswith(f"{minor}."):
        return offered.channel_default
    if offered.channel_latest_with_prefix:
        return offered.channel_latest_with_prefix
    default_minor = ".".join(str(p) for p in version_key(offered.channel_default)[:2])
    raise SettingsError([Problem(
        "kubernetes.version", minor,
        f"a minor GKE's {CHANNEL} channel offers in {location}; it offers no {minor} build "
        f"today (its default is {offered.channel_default or 'unknown'}, so "
        f"'{default_minor}' works). List the channel's versions with `gcloud container "
        f"get-server-config --location {location} --flatten=channels "
        f"--filter=channels.channel={CHANNEL} --format='yaml(channels.validVersions)'`. "
        "Nothing was created")])


def resolve_version(minor: str, location: str, project: str,
                    opts: pulumi.InvokeOptions) -> str:
    """Ask GKE which builds of `minor` it offers in `location` and pick one (pick_version)."""
    result = gcp.container.get_engine_versions(
        location=location, project=project, version_prefix=f"{minor}.", opts=opts)
    return pick_version(minor, location, OfferedVersions.of(result))


def check_features(settings: Settings, version: str) -> None:
    """What the settings ask of the resolved build, checked before anything is registered."""
    if settings.gpu_pools.on_demand.flex_start and not version_reaches(version, FLEX_START_MIN_GKE):
        raise SettingsError([Problem(
            "gpuPools.onDemand.flexStart", True,
            f"flex-start needs GKE {FLEX_START_MIN_GKE} or later; kubernetes.version "
            f"{settings.kubernetes.version} gives {version}: choose a newer minor")])
