"""The GKE version: what the REGULAR channel offers today for a new cluster, what a live one runs.

GKE's channels move every few weeks and a minor leaves a channel when its standard support
ends, so no list in this repository stays true. A first `pulumi up` asks GKE (getServerConfig,
through `gcp.container.get_engine_versions`,
https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations/getServerConfig)
which minors the channel offers, before any cloud resource is registered; a pinned minor the
channel does not offer is refused naming the ones it does (infra/kubernetes_release.py). A live
cluster is asked what it runs (`gcp.container.get_cluster`): GKE upgrades it inside its channel
by itself, so the stack's last output may be behind, and a cluster whose minor has since left
the channel is kept without asking the channel anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pulumi
import pulumi_gcp as gcp

from infra.catalog.cloud import Cloud
from infra.catalog.stop_notices import Capacity, stop_notice
from infra.kubernetes_versions import version_key, version_reaches
from infra.kubernetes_release import Offered, Release, minor_key, minor_of
from infra.naming import stable_hash
from infra.previous_run import PreviousRun
from infra.settings.errors import Problem, SettingsError
from infra.settings.model.job import PoolChoice
from infra.settings.model.stack_file import Settings

# The channel the cluster is enrolled in (infra/gcp/cluster.py): a cluster in a channel can be
# created only at a version that channel offers
# (https://cloud.google.com/kubernetes-engine/docs/concepts/release-channels).
CHANNEL = "REGULAR"
# Flex-start node pools need GKE 1.32.2-gke.1652000 or later
# (https://cloud.google.com/kubernetes-engine/docs/concepts/dws, "Requirements").
FLEX_START_MIN_GKE = "1.32.2-gke.1652000"


@dataclass(frozen=True)
class ServerConfig:
    """What the data source returns for one location and prefix. Its fields are built in
    terraform-provider-google's data_source_google_container_engine_versions.go (which
    pulumi-gcp wraps): `valid_master_versions` are getServerConfig's validMasterVersions that
    start with the prefix (newest first); `release_channel_default_version[channel]` is the
    channel's default, whatever the prefix; `release_channel_latest_version[channel]` is the
    first (newest) of the channel's validVersions that starts with the prefix, absent when the
    channel offers none. The channel's own list is not exported, so a minor's presence in the
    channel is read from `latest` asked with that minor as the prefix."""

    valid_master_versions: tuple[str, ...]
    channel_default: str
    channel_latest: str  # "" when the channel offers no build with the prefix

    @staticmethod
    def ask(location: str, project: str, prefix: str = "") -> "ServerConfig":
        """One getServerConfig call. The invoke names project and location itself, so the
        default provider's credentials are all it uses; it runs before any resource exists."""
        result = gcp.container.get_engine_versions(
            location=location, project=project, version_prefix=prefix or None,
            opts=pulumi.InvokeOptions())
        defaults: Mapping[str, str] = result.release_channel_default_version or {}
        latest: Mapping[str, str] = result.release_channel_latest_version or {}
        return ServerConfig(valid_master_versions=tuple(result.valid_master_versions or ()),
                            channel_default=defaults.get(CHANNEL, ""),
                            channel_latest=latest.get(CHANNEL, ""))


def how_to_list(location: str) -> str:
    """The gcloud command that shows a user the same list."""
    return (f"gcloud container get-server-config --location {location} --flatten=channels "
            f"--filter=channels.channel={CHANNEL} "
            "--format='yaml(channels.defaultVersion,channels.validVersions)'")


def offered_versions(settings: Settings) -> Offered:
    """The minors GKE's REGULAR channel offers a new cluster in the settings' region today, its
    default, and the build each minor is created at: the channel's default build for the
    default's minor (what GKE recommends), the channel's newest build for every other one.

    Which minors: every minor getServerConfig lists (validMasterVersions, plus the channel's
    default and newest build) up to the channel's newest, each confirmed by asking with the
    minor as the prefix (`release_channel_latest_version` is there only when the channel has a
    build of it); the "." in the prefix keeps 1.3 from matching 1.34."""
    assert settings.gcp is not None  # cloud_options_match + defaults guarantee it
    location, project = settings.region, settings.gcp.project
    whole = ServerConfig.ask(location, project)
    if not whole.channel_default:
        raise RuntimeError(f"GKE answered getServerConfig in {location} without a default for "
                           f"the {CHANNEL} channel; `{how_to_list(location)}` shows what it has")
    newest = whole.channel_latest or whole.channel_default
    exact = {minor_of(whole.channel_default): whole.channel_default}
    exact.setdefault(minor_of(newest), newest)
    listed = {minor_of(v) for v in (*whole.valid_master_versions, whole.channel_default, newest)}
    top = minor_key(newest)
    for minor in sorted(listed, key=minor_key):
        if minor in exact or minor_key(minor) > top:
            continue
        build = ServerConfig.ask(location, project, f"{minor}.").channel_latest
        if build:
            exact[minor] = build
    return Offered(minors=tuple(sorted(exact, key=minor_key)), default=whole.channel_default,
                   where=f"GKE's {CHANNEL} channel in {location}",
                   how_to_list=how_to_list(location), exact=exact)


@dataclass(frozen=True)
class LiveCluster:
    """What a live cluster runs, as GKE said when the program ran (or, when GKE could not be
    asked, what the stack's last run recorded)."""

    master: str  # the control plane's version, e.g. "1.34.1-gke.3899001"
    pools: Mapping[str, str] = field(default_factory=dict)  # node pool name -> its nodes' version


def live_cluster(settings: Settings, previous: PreviousRun) -> LiveCluster | None:
    """The live cluster's control-plane and node-pool versions (getCluster: `master_version` is
    the cluster's currentMasterVersion, each node pool's `version` its nodes' version), or the
    version the last run recorded where the cluster cannot be read; None with neither."""
    assert settings.gcp is not None
    name, recorded = previous.text("cluster_name"), previous.text("kubernetes_version")
    if name:
        try:
            found = gcp.container.get_cluster(name=name, location=settings.region,
                                              project=settings.gcp.project,
                                              opts=pulumi.InvokeOptions())
        except Exception as error:  # noqa: BLE001 (the provider reports any API error here)
            pulumi.log.warn(f"could not read GKE cluster {name} in {settings.region} ({error}); "
                            f"keeping the version the last run recorded ({recorded})")
        else:
            if found.master_version:
                pools = {p.name: p.version for p in (found.node_pools or []) if p.version}
                return LiveCluster(master=found.master_version, pools=pools)
    return LiveCluster(master=recorded) if recorded else None


def live_version(settings: Settings, previous: PreviousRun) -> str | None:
    """The version the live cluster's control plane runs (see live_cluster)."""
    live = live_cluster(settings, previous)
    return live.master if live else None


# Stack outputs a later run reads (infra/previous_run.py): the version each GPU pool's
# node-side settings (a Spot pool's kubelet shutdown, the job's stop budget) followed, and a
# fingerprint of the settings that run had.
NODE_BASIS_OUTPUT = "node_versions"
SETTINGS_OUTPUT = "settings_fingerprint"


@dataclass(frozen=True)
class NodeVersions:
    """The version each node pool's node-side settings follow on this run (a Spot pool's kubelet
    shutdown, the job's stop budget): what the nodes run, or what the last run used (below)."""

    by_pool: Mapping[str, str]  # node pool name -> version
    default: str  # a pool not yet created: GKE creates it at the control plane's version
    notice: str | None = None  # a warning for the user about the job (node_versions)

    def of(self, pool_name: str) -> str:
        return self.by_pool.get(pool_name, self.default)

    def oldest(self, pool_names: list[str]) -> str:
        """The oldest version among the pools: the node side a job on any of them can count on."""
        return min((self.of(n) for n in pool_names), key=version_key, default=self.default)

    def basis(self, pool_names: list[str]) -> dict[str, str]:
        """What the stack records for the next run (NODE_BASIS_OUTPUT)."""
        return {name: self.of(name) for name in pool_names}


def settings_fingerprint(settings: Settings) -> str:
    """The same text for the same settings on every run. kubernetes.version is left out: the
    program sets it from the version it keeps (a setting the user changes there is an upgrade,
    which the release says)."""
    data = settings.model_dump(mode="json")
    data.get("kubernetes", {}).pop("version", None)
    return stable_hash(json.dumps(data, sort_keys=True, default=str))


def _spot_changes(settings: Settings, was: NodeVersions, now: NodeVersions) -> list[str]:
    """What moving the node side from `was` to `now` changes that the job feels: a Spot pool's
    shutdown window (its kubelet settings: GKE recreates the pool's nodes) and, for a job on
    Spot, the pods' grace and stop budget (the JobSet's pod template: the JobSet is replaced)."""
    changes = []
    for choice, pool in settings.gpu_pools_by_key.items():
        if choice != PoolChoice.SPOT:
            continue
        before, after = (stop_notice(Cloud.GCP, Capacity.SPOT, v.of(pool.name)) for v in (was, now))
        if before != after:
            changes.append(
                f"GKE upgraded Spot pool {pool.name} to {now.of(pool.name)}, whose kubelet "
                f"gives {after.notice_seconds} s of shutdown ({before.notice_seconds} s now): "
                "applying it recreates the pool's nodes")
    names = [pool.name for pool in settings.gpu_pools_by_key.values()]
    if settings.job.pool == PoolChoice.SPOT:
        before, after = (stop_notice(Cloud.GCP, Capacity.SPOT, v.oldest(names))
                         for v in (was, now))
        if before != after:
            changes.append(
                f"the training pods' grace on Spot goes from {before.pod_seconds} s to "
                f"{after.pod_seconds} s: the JobSet is replaced and training restarts from its "
                "newest checkpoint")
    return changes


def node_versions(settings: Settings, release: Release, previous: PreviousRun) -> NodeVersions:
    """A new cluster's pools are created at the release's build. On a live stack the pools'
    settings follow what they run: GKE upgrades nodes after the control plane, in the
    maintenance window (infra/gcp/cluster.py), so for a while they run an older build than the
    control plane.

    Except on a run that changes nothing: once GKE has upgraded the nodes past a build that
    changes the Spot shutdown window (catalog STOP_NOTICES), following it would recreate the
    Spot pool's nodes and replace the JobSet, restarting the training, on a `pulumi up` the
    user made for nothing of the sort. So with the settings (their fingerprint) and the version
    unchanged since the last run, the node side stays at what that run used (its
    `node_versions` output) and a warning says so; the first run that changes a setting
    applies it, and warns that this restarts the job. The older build's window is what the
    nodes give without the kubelet setting, so the job's budget stays true either way."""
    live = live_cluster(settings, previous) if previous.live else None
    if live is None:
        return NodeVersions(by_pool={}, default=release.version)
    running = NodeVersions(by_pool=dict(live.pools), default=release.version)
    recorded = previous.outputs.get(NODE_BASIS_OUTPUT)
    if not isinstance(recorded, Mapping) or not recorded:
        return running  # a stack whose last run did not record it: follow the nodes
    was = NodeVersions(by_pool={**live.pools, **{str(k): str(v) for k, v in recorded.items()}},
                       default=release.version)
    changes = _spot_changes(settings, was, running)
    if not changes:
        return running
    unchanged = (release.upgrade_from is None
                 and previous.text(SETTINGS_OUTPUT) == settings_fingerprint(settings))
    # Only what the nodes have reached may be kept: a kubelet setting for a newer build than
    # the pool runs would be refused by GKE.
    reached = all(version_key(was.of(name)) <= version_key(running.of(name))
                  for name in live.pools)
    if unchanged and reached:
        return replace(was, notice=(
            "; ".join(changes) + ". Nothing in the settings changed, so this `pulumi up` keeps "
            "the last run's Spot shutdown and stop budget and does not restart the training; "
            "the next `pulumi up` that changes a setting applies the new ones"))
    return replace(running, notice=(
        "this `pulumi up` changes the settings, and with them applies what GKE's node upgrade "
        "allows: " + "; ".join(changes)))


def check_features(settings: Settings, version: str) -> None:
    """What the settings ask of the build the cluster gets, checked before anything is
    registered."""
    if settings.gpu_pools.on_demand.flex_start and not version_reaches(version, FLEX_START_MIN_GKE):
        raise SettingsError([Problem(
            "gpuPools.onDemand.flexStart", True,
            f"flex-start needs GKE {FLEX_START_MIN_GKE} or later; kubernetes.version "
            f"{settings.kubernetes.version} gives {version}: choose a newer minor")])
