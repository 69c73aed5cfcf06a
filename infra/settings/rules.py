"""Every rule a cloud API would enforce, checked in seconds before anything is created: here
the rules every cloud shares; each cloud's own are beside its code (infra/aws/rules.py,
infra/azure/rules.py, infra/gcp/rules.py), which imports this module, never the reverse.

Each rule is a small named function that looks at the whole, type-checked settings and returns
the problems it finds (empty when all is well); all_rules.check_all runs every rule, collects every
problem, so one run of `pulumi up` names everything to fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator

from infra.catalog.cloud import Cloud
from infra.catalog.machines import Interconnect, find_machine, machine_names
from infra.settings.placeholders import no_placeholders_left
from infra.settings.stack_flags import TRAINER_FLAG, WORKLOAD_OWNED_FLAGS
from infra.settings.trainer_flags import closest_flag, trainer_args_fit_the_trainer, trainer_flag_names
from infra.regions import CHECKED_ON as REGIONS_CHECKED_ON, REGIONS, cloud_of_region, counterpart
from infra.settings.defaults import CLOUD_DEFAULTS
from infra.settings.errors import Problem, rename_commands, rm_command, set_command, shown
from infra.settings.model.job import (JOBSET_REPLICATED_JOB, PREPARE_JOB_SUFFIX,
                                      PULUMI_AUTONAME_SUFFIX, JobKind, PoolChoice,
                                      SpotShortagePolicy)
from infra.settings.model.pools import NodePool
from infra.settings.model.stack_file import Settings

Rule = Callable[[Settings], Iterator[Problem]]

AKS_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
# AWS zone ids, e.g. use1-az4 (https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html).
AWS_ZONE_ID = re.compile(r"^[a-z]{2,}[0-9]+-az[0-9]+$")
RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
GKE_POOL_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
FS_KIND_BY_CLOUD = {Cloud.AWS: "fsx-lustre", Cloud.AZURE: "azure-netapp-files", Cloud.GCP: "filestore"}
TIB = 1024  # GiB in a TiB: the file system sizes (infra/azure/rules.py, infra/gcp/rules.py)


def _pools(settings: Settings) -> Iterator[tuple[str, NodePool]]:
    yield "systemPool", settings.system_pool
    yield "gpuPools.onDemand", settings.gpu_pools.on_demand
    if settings.gpu_pools.spot.enabled:
        yield "gpuPools.spot", settings.gpu_pools.spot


def pool_sizes_are_ordered(s: Settings) -> Iterator[Problem]:
    for path, pool in _pools(s):
        if not pool.min_nodes <= pool.desired_nodes <= pool.max_nodes:
            yield Problem(
                f"{path}.desiredNodes",
                {"minNodes": pool.min_nodes, "desiredNodes": pool.desired_nodes,
                 "maxNodes": pool.max_nodes},
                "must satisfy 0 <= minNodes <= desiredNodes <= maxNodes",
            )


def pool_names_fit_the_cloud(s: Settings) -> Iterator[Problem]:
    names: dict[str, str] = {}
    for path, pool in _pools(s):
        if s.cloud == Cloud.AZURE and not AKS_POOL_NAME.match(pool.name):
            yield Problem(f"{path}.name", pool.name,
                          "AKS pool names are 1-12 lowercase letters and digits, starting with a "
                          "letter (^[a-z][a-z0-9]{0,11}$)")
        elif s.cloud != Cloud.AZURE and not GKE_POOL_NAME.match(pool.name):
            yield Problem(f"{path}.name", pool.name,
                          "pool names are 1-40 lowercase letters, digits and '-', starting with a "
                          "letter")
        if pool.name in names:
            yield Problem(f"{path}.name", pool.name, f"already used by {names[pool.name]}")
        names[pool.name] = path


def machines_are_in_the_catalog(s: Settings) -> Iterator[Problem]:
    for path, pool in _pools(s):
        found = find_machine(s.cloud, pool.machine_type)
        wants_gpu = path.startswith("gpuPools")
        if found is None:
            names = machine_names(s.cloud, gpu=wants_gpu or None)
            close = difflib.get_close_matches(pool.machine_type, names, n=1, cutoff=0.6)
            fix = (f"did you mean {close[0]!r}? set it with "
                   f"`{set_command(f'{path}.machineType', close[0])}`; " if close else "")
            yield Problem(f"{path}.machineType", pool.machine_type,
                          f"{fix}one of the {s.cloud.value} catalog's "
                          f"{'GPU ' if wants_gpu else ''}machines: {', '.join(names)}")
        elif wants_gpu and not found.has_gpus:
            yield Problem(f"{path}.machineType", pool.machine_type,
                          f"has no GPUs; GPU pools need one of: "
                          f"{', '.join(machine_names(s.cloud, gpu=True))}")


CLOUD_NAMES = {Cloud.AWS: "AWS", Cloud.AZURE: "Azure", Cloud.GCP: "GCP"}


REGIONS_LISTED = 5  # the closest names a region message shows; the rest are in infra/regions.py


def _region_name(region: str) -> str:
    """Azure's display names (`East US`) as its API names them (`eastus`)."""
    return region.lower().replace(" ", "")


def region_is_one_of_the_cloud_s(s: Settings) -> Iterator[Problem]:
    """A region the cloud does not have (infra/regions.py) fails the first cloud call of
    `pulumi up`; name it here, with the closest few names and the commands that move the
    zones along with it."""
    names = REGIONS[s.cloud]
    if s.region in names:
        return
    wanted = _region_name(s.region)

    def likeness(name: str) -> float:
        return 1.0 if name == wanted else difflib.SequenceMatcher(None, wanted, name).ratio()

    ranked = sorted(names, key=lambda name: -likeness(name))  # stable: ties keep list order
    # 0.8, not difflib's 0.6: region names share long words (mars-central is 0.75 like
    # qatarcentral), and a misspelling (us-east-9, eastus3, westeurop) scores 0.85 or more
    close = [ranked[0]] if likeness(ranked[0]) >= 0.8 else []
    other = cloud_of_region(wanted)
    same_metro = counterpart(wanted, s.cloud) if other not in (None, s.cloud) else None
    why = (f"{s.region!r} is a region of {CLOUD_NAMES[other]}; "
           if other is not None and other != s.cloud else "")
    if same_metro:  # another cloud's name: its metro here, not the closest spelling
        why += f"{CLOUD_NAMES[s.cloud]}'s region in the same place is {same_metro!r}; "
        close = [same_metro]
        ranked = [same_metro] + [name for name in ranked if name != same_metro]
    guess = f"did you mean {close[0]!r}? " if close and not same_metro else ""
    if wanted != s.region and wanted in names:
        guess += "(regions are named in lower case without spaces) "
    shown_names = ", ".join(ranked[:REGIONS_LISTED])
    more = len(ranked) - REGIONS_LISTED
    # With no name close to it, no command: a guess (austriaeast for us-east-1) sets a region
    # that was never meant.
    fix = (f"; set it with `pulumi config set region {close[0]}`" + _zone_moves(s, close[0])
           if close else "; set the region you meant with `pulumi config set region <region>`")
    yield Problem("region", s.region,
                  f"{why}{guess}one of the {CLOUD_NAMES[s.cloud]} regions, closest first: "
                  f"{shown_names} (and {more} more in infra/regions.py, as of "
                  f"{REGIONS_CHECKED_ON}){fix}")


def zone_name(cloud: Cloud, region: str, letter: str) -> str:
    """How the cloud spells a zone of `region`: AWS the region and a letter (us-west-2b), GCP
    the region, '-' and a letter (us-east1-b). Which letters exist is the cloud's to say."""
    return f"{region}{letter}" if cloud == Cloud.AWS else f"{region}-{letter}"


def zone_list_command(cloud: Cloud, region: str) -> str | None:
    """The command that lists the zones `region` has for this account or project: AWS maps
    letters to zones per account and gives some regions only some letters (us-west-1: two of
    a, b, c; ap-northeast-1 has no b for newer accounts), GCP regions skip letters (us-east1:
    b, c, d); Azure's zones are '1', '2', '3' everywhere (None)."""
    if cloud == Cloud.AWS:
        return f"aws ec2 describe-availability-zones --region {region}"
    if cloud == Cloud.GCP:
        return f"gcloud compute zones list --filter=region:{region}"
    return None


def _in_region(zone: str, region: str) -> bool:
    return zone.startswith(region) and len(zone) > len(region)


def _zone_fixes(s: Settings, region: str) -> dict[tuple[str, int], str | None]:
    """(setting, index) -> the zone of `region` to write there, for each zone outside it, or
    None where no zone is certain to exist: only a zone the stack already names in `region`,
    or one of the cloud's default zones for its default region (infra/settings/defaults.py),
    is certain; a letter carried over from another region may not exist there. None on Azure
    (its zones are the same three in every region) or for AWS zone ids (the program checks
    their region: infra/aws/zones.py)."""
    if s.cloud == Cloud.AZURE:
        return {}
    defaults = CLOUD_DEFAULTS[s.cloud]
    # a GPU zone the stack names in the region first: the cluster's zones then keep it
    known = [zone for zone in s.gpu_zones if _in_region(zone, region)]
    known += list(defaults["zones"]) if defaults["region"] == region else []
    fixes: dict[tuple[str, int], str | None] = {}
    for index, zone in enumerate(s.zones):
        if _in_region(zone, region) or (s.cloud == Cloud.AWS and AWS_ZONE_ID.match(zone)):
            continue
        fresh = [z for z in known if z not in s.zones and z not in fixes.values()]
        fixes["zones", index] = fresh[0] if fresh else None
    # the cluster's zones once fixed: a GPU zone moved onto one of them stays among them
    named = [fixes.get(("zones", index), zone) for index, zone in enumerate(s.zones)]
    named = [zone for zone in named if zone is not None and _in_region(zone, region)]
    for index, zone in enumerate(s.gpu_zones):
        if _in_region(zone, region) or (s.cloud == Cloud.AWS and AWS_ZONE_ID.match(zone)):
            continue
        # a GPU zone follows the cluster zone it was, so it stays one of them
        was = fixes.get(("zones", s.zones.index(zone))) if zone in s.zones else None
        fixes["gpuZones", index] = was or (named[0] if named else None)
    return fixes


AZURE_ZONES = ("1", "2", "3")


def _azure_zone_fixes(s: Settings) -> dict[tuple[str, int], str]:
    """(setting, index) -> the Azure zone to write there, for each name Azure does not have
    (eastus-1): for a cluster zone one not yet chosen, for a GPU zone the cluster zone it was
    (else the cluster's first), as _zone_fixes does across regions."""
    fixes: dict[tuple[str, int], str] = {}
    known = [*(zone for zone in s.gpu_zones if zone in AZURE_ZONES), *AZURE_ZONES]
    for index, zone in enumerate(s.zones):
        if zone not in AZURE_ZONES:
            fresh = [z for z in known if z not in s.zones and z not in fixes.values()]
            fixes["zones", index] = fresh[0] if fresh else AZURE_ZONES[0]
    named = [fixes.get(("zones", index), zone) for index, zone in enumerate(s.zones)]
    for index, zone in enumerate(s.gpu_zones):
        if zone not in AZURE_ZONES:
            was = fixes.get(("zones", s.zones.index(zone))) if zone in s.zones else None
            fixes["gpuZones", index] = (was or (named[0] if named else _another_zone(s, []))
                                        or AZURE_ZONES[0])
    return fixes


def zones_once_in_the_region(s: Settings, path: str) -> list[str | None]:
    """`zones` or `gpuZones` as zones_are_in_the_region's commands leave them (None: a zone the
    user looks up), so that the other zone rules judge and suggest from what the stack will
    hold, never from a zone that rule has the user replace. As written where that rule does not
    run (a region the cloud does not have); on Azure, as its names' commands leave them."""
    zones = s.zones if path == "zones" else s.gpu_zones
    if s.cloud != Cloud.AZURE and s.region not in REGIONS[s.cloud]:
        return list(zones)
    fixes: dict[tuple[str, int], str | None] = dict(
        _azure_zone_fixes(s) if s.cloud == Cloud.AZURE else _zone_fixes(s, s.region))
    return [fixes.get((path, index), zone) for index, zone in enumerate(zones)]


def distinct_zones(zones: list[str | None]) -> int:
    """How many zones a list will hold, each zone still to be looked up counted as its own."""
    return len({zone for zone in zones if zone is not None}) + zones.count(None)


def _zone_advice(s: Settings, region: str, path: str, index: int, zone: str | None) -> str:
    if zone is not None:
        return f"set it with `{set_command(f'{path}[{index}]', zone)}`"
    listing = zone_list_command(s.cloud, region)
    return (f"list its zones with `{listing}` and set one with "
            f"`pulumi config set --path '{path}[{index}]' <zone>`")


def _zone_moves(s: Settings, region: str) -> str:
    """What moves the zones into `region` along with it: the commands where the zone is
    certain, else the command that lists the region's zones."""
    fixes = _zone_fixes(s, region)
    commands = [f"`{set_command(f'{path}[{index}]', zone)}`"
                for (path, index), zone in fixes.items() if zone is not None]
    text = f" and its zones: {'; '.join(commands)}" if commands else ""
    listing = zone_list_command(s.cloud, region)
    if listing and None in fixes.values():
        text += (f"{'; move the others' if commands else ' and move its zones'} to zones of "
                 f"{region} (`{listing}` lists them)")
    return text


def zones_are_in_the_region(s: Settings) -> Iterator[Problem]:
    """Each AWS or GCP zone names its region. Under a region the cloud does not have, every
    zone would look wrong and any suggested zone would not exist: region_is_one_of_the_cloud_s
    names the region (and the zones' fix). The one zone rule that reads the region, so a check
    that cannot read the region (an encrypted one) leaves exactly this rule out."""
    if s.cloud == Cloud.AZURE or s.region not in REGIONS[s.cloud]:
        return
    fixes = _zone_fixes(s, s.region)
    for path, zones in (("zones", s.zones), ("gpuZones", s.gpu_zones)):
        for index, zone in enumerate(zones):
            if (path, index) in fixes:
                yield Problem(path, zone, f"must be a zone of region {s.region!r}; " + _zone_advice(
                    s, s.region, path, index, fixes[path, index]))


def _another_zone(s: Settings, taken: list[str]) -> str | None:
    """A zone of the stack's region certain to exist that `taken` lacks: one the stack already
    names, else one of the cloud's default zones when the region is the default one
    (infra/settings/defaults.py); None where only the cloud can say (AWS letters per account)."""
    defaults = CLOUD_DEFAULTS[s.cloud]
    known = [*s.zones, *s.gpu_zones, *(defaults["zones"] if defaults["region"] == s.region else [])]
    if s.cloud == Cloud.AZURE:
        known += AZURE_ZONES
    # only the stack's own region: a zone of another one is what zones_are_in_the_region replaces
    known = [zone for zone in known if _of_the_region(s, zone)]
    return next((zone for zone in known if zone not in taken), None)


def _of_the_region(s: Settings, zone: str) -> bool:
    """Whether `zone` may be one of the stack's region: Azure's 1, 2 and 3, an AWS zone id
    (the program checks its region), any zone where the region is not the cloud's."""
    if s.cloud == Cloud.AZURE:
        return zone in AZURE_ZONES
    return (s.region not in REGIONS[s.cloud] or _in_region(zone, s.region)
            or (s.cloud == Cloud.AWS and bool(AWS_ZONE_ID.match(zone))))


def add_zone_advice(s: Settings, path: str, index: int, zone: str | None) -> str:
    """`pulumi config set --path '<path>[<index>]' <zone>`, with a zone certain to exist, else
    with the command that lists the region's zones."""
    if zone is not None:
        return f"`{set_command(f'{path}[{index}]', zone)}`"
    listing = zone_list_command(s.cloud, s.region)
    where = f" (`{listing}` lists the region's zones)" if listing else ""
    return f"`pulumi config set --path '{path}[{index}]' <zone>`{where}"


def one_gpu_zone_commands(s: Settings) -> str:
    """The commands that leave exactly one GPU zone: the list removed, then its first zone that
    is one of the cluster's (else the cluster's first) set again, each as the zones rules'
    commands leave it; `pulumi config rm` of an item shifts the rest, so the whole list goes."""
    cluster = [zone for zone in zones_once_in_the_region(s, "zones") if zone is not None]
    gpu = [zone for zone in zones_once_in_the_region(s, "gpuZones") if zone is not None]
    zone = next((zone for zone in [*gpu, *cluster] if zone in cluster or not cluster), None)
    keep = (f"`{set_command('gpuZones[0]', zone)}`" if zone is not None
            else add_zone_advice(s, "gpuZones", 0, None))
    return f"`{rm_command('gpuZones')}` then {keep}"


def zones_belong_to_the_region(s: Settings) -> Iterator[Problem]:
    """The zones' shape, whatever the region: some zones, Azure's names, GPU zones among the
    cluster's, two zones for EKS; each with the command that fixes it. Judged on the zones as
    zones_are_in_the_region's commands leave them, so that the commands of one run agree."""
    cluster = zones_once_in_the_region(s, "zones")
    gpu = zones_once_in_the_region(s, "gpuZones")
    chosen = [zone for zone in cluster if zone is not None]
    for path, zones in (("zones", s.zones), ("gpuZones", s.gpu_zones)):
        if not zones and not (path == "zones" and s.cloud == Cloud.AWS):  # EKS's two: below
            first = next(iter(chosen), None) if path == "gpuZones" and s.zones \
                else _another_zone(s, [])
            yield Problem(path, zones, "at least one zone; set it with "
                          + add_zone_advice(s, path, 0, first))
        planned = cluster if path == "zones" else gpu
        for index, zone in enumerate(zones):
            if s.cloud == Cloud.AZURE and zone not in AZURE_ZONES:
                yield Problem(path, zone, "Azure availability zones are 1, 2 or 3; set it with "
                              f"`{set_command(f'{path}[{index}]', planned[index])}`")
    added: dict[str, int] = {}  # each GPU zone added gets its own slot after the zones
    for index, zone in enumerate(s.gpu_zones):
        if gpu[index] != zone:  # moved, or to be looked up: zones_are_in_the_region says so
            continue
        if zone not in cluster:
            add = set_command(f"zones[{added.setdefault(zone, len(s.zones) + len(added))}]", zone)
            fix = (f"set it with `{set_command(f'gpuZones[{index}]', chosen[0])}`, or add it to "
                   f"the zones with `{add}`" if chosen else f"add it to the zones with `{add}`")
            yield Problem("gpuZones", zone, f"must be one of zones {shown(s.zones)}; {fix}")
    if s.cloud == Cloud.AWS and distinct_zones(cluster) < 2:
        # The slots after the first distinct zone: [a] -> zones[1], [a, a] -> zones[1] again.
        first = cluster[:1] or [_another_zone(s, [])]
        second = _another_zone(s, [*chosen, *(z for z in first if z)])
        commands = ([] if s.zones else [add_zone_advice(s, "zones", 0, first[0])]) + [
            add_zone_advice(s, "zones", 1, second)]
        yield Problem("zones", s.zones, "EKS needs subnets in at least two zones; add "
                      + ("them with " if len(commands) > 1 else "one with ") + " and ".join(commands))


def placement_needs_one_zone(s: Settings) -> Iterator[Problem]:
    if s.interconnect.placement and distinct_zones(zones_once_in_the_region(s, "gpuZones")) != 1:
        yield Problem("gpuZones", s.gpu_zones,
                      "placement packs nodes in one zone: give exactly one GPU zone with "
                      f"{one_gpu_zone_commands(s)}, or turn placement off with "
                      f"`{set_command('interconnect.placement', 'false')}`")


# What infra/gcp sets up end to end (infra/gcp/interconnect.py GPUDIRECT: VPCs, multi-networking,
# plugin installer, device injector, rxdm sidecar, NCCL environment).
GCP_FABRICS_SET_UP = {Interconnect.GPUDIRECT_TCPX, Interconnect.GPUDIRECT_TCPXO}


def fabric_needs_a_machine_that_has_it(s: Settings) -> Iterator[Problem]:
    if not s.interconnect.fabric:
        return
    fabric_name = {Cloud.AWS: "EFA", Cloud.AZURE: "InfiniBand", Cloud.GCP: "GPUDirect"}[s.cloud]
    without = [f"{path}.machineType {pool.machine_type}" for path, pool in _pools(s)
               if path.startswith("gpuPools")
               and (found := find_machine(s.cloud, pool.machine_type)) is not None
               and found.has_gpus and found.interconnect == Interconnect.NONE]
    with_it = [name for name in machine_names(s.cloud, gpu=True)
               if (m := find_machine(s.cloud, name)) and m.interconnect != Interconnect.NONE
               and (s.cloud != Cloud.GCP or m.interconnect in GCP_FABRICS_SET_UP)]
    if without:  # the fabric asked for, not the machine, is what this stack cannot deliver
        yield Problem("interconnect.fabric", True,
                      f"read as true (true, yes, on and 1 all read so); {' and '.join(without)} "
                      f"{'has' if len(without) == 1 else 'have'} no {fabric_name}: turn the "
                      f"fabric off with `{set_command('interconnect.fabric', 'false')}`, or "
                      f"choose a machine with it ({', '.join(with_it)})")


def processes_fit_the_gpus(s: Settings) -> Iterator[Problem]:
    found = find_machine(s.cloud, s.job_pool.machine_type)
    if found and found.has_gpus and s.job.processes_per_node > found.gpu_count:
        yield Problem("job.processesPerNode", s.job.processes_per_node,
                      f"at most the {found.gpu_count} GPUs of {found.name}")
    elif found and found.has_gpus and s.job.processes_per_node < found.gpu_count:
        # Each pod takes the whole node (workloads/sizing.py): fewer processes leave GPUs idle
        # that are paid for all the same.
        yield Problem("job.processesPerNode", s.job.processes_per_node,
                      f"one process per GPU: {found.name} has {found.gpu_count}, and every node "
                      f"is paid whole ({found.gpu_count - s.job.processes_per_node} GPUs would "
                      f"idle); `{set_command('job.processesPerNode', found.gpu_count)}`, or a "
                      f"machine with {s.job.processes_per_node} GPUs")


def gate_left_out_bound(job_nodes: int) -> int:
    """The most nodes the gate may leave out (--fabric_max_nodes_left_out): bandwidth under a
    floor names no node, so the whole gang must fit the bound."""
    return max(2, job_nodes)


def left_out_nodes_are_replaced(s: Settings) -> Iterator[Problem]:
    """A node the gate left out (tainted NoSchedule, empty) is replaced only by the autoscaler:
    it removes an empty node after its unneeded time, but never below the pool's minNodes, and
    adds one only below maxNodes. Tainted nodes it cannot remove (at most minNodes of them)
    must leave room for the whole gang under maxNodes, or the gang waits for ever."""
    if not s.interconnect.gate:
        return
    pool = s.job_pool
    path = "gpuPools.spot" if s.job.pool == PoolChoice.SPOT else "gpuPools.onDemand"
    if not pool.min_nodes <= pool.desired_nodes <= pool.max_nodes or s.job.nodes > pool.max_nodes:
        return  # the pool's order and the job's size are other rules' (job_fits_its_pool)
    kept = min(gate_left_out_bound(s.job.nodes), pool.min_nodes)
    if pool.max_nodes - kept < s.job.nodes:
        yield Problem(f"{path}.minNodes", pool.min_nodes,
                      f"at most {max(0, pool.max_nodes - s.job.nodes)} with maxNodes "
                      f"{pool.max_nodes} and job.nodes {s.job.nodes} (or maxNodes at least "
                      f"{s.job.nodes + kept}): a node the fabric gate leaves out is replaced "
                      "only when the autoscaler may remove it (above minNodes) or add one "
                      f"beside it (below maxNodes); set it with: pulumi config set --path "
                      f"{path}.minNodes {max(0, pool.max_nodes - s.job.nodes)}")


def job_fits_its_pool(s: Settings) -> Iterator[Problem]:
    pool_path = "gpuPools.spot" if s.job.pool == PoolChoice.SPOT else "gpuPools.onDemand"
    if s.job.pool == PoolChoice.SPOT and not s.gpu_pools.spot.enabled:
        yield Problem("job.pool", s.job.pool.value, "the spot pool is disabled (gpuPools.spot.enabled)")
    elif s.job.nodes > s.job_pool.max_nodes:
        reason = f"at most {pool_path}.maxNodes ({s.job_pool.max_nodes})"
        grow = (f"let the pool grow with `{set_command(f'{pool_path}.maxNodes', s.job.nodes)}` "
                "(quota: `torchrec-cloud doctor`)")
        yield Problem("job.nodes", s.job.nodes, f"{reason}: lower it with "
                      f"`{set_command('job.nodes', s.job_pool.max_nodes)}`, or {grow}",
                      reason=reason, elsewhere=(grow,))


# Why the fallback is refused on GKE too: the only ProvisioningRequest class that grows the spot
# pool, best-effort-atomic-scale-up, sets Provisioned=True "if the node group scale up request is
# successful" (kubernetes/autoscaler cluster-autoscaler/FAQ.md "Supported ProvisioningClasses"),
# not once the Spot VMs exist: Kueue's Concurrent Admission (alpha) would then move the running
# on-demand gang to spot nodes that may never come, back after the PodsReady timeout, and again.
# check-capacity.autoscaling.x-k8s.io is Provisioned only on nodes already there (a spot pool at
# 0 has none, so it never is); queued-provisioning.gke.io is Provisioned with the VMs, but only
# on flex-start pools (--flex-start --enable-queued-provisioning,
# https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest), never Spot VMs.
SPOT_FALLBACK_REFUSED = {
    Cloud.AWS: "the fallback needs Cluster Autoscaler to answer a ProvisioningRequest for spot "
               "capacity (--enable-provisioning-requests, its CRD and RBAC), which this "
               "program does not install",
    Cloud.AZURE: "AKS's managed autoscaler documents no ProvisioningRequest support, which the "
                 "fallback needs to learn of spot capacity",
    Cloud.GCP: "GKE's only ProvisioningRequest class that adds Spot VMs "
               "(best-effort-atomic-scale-up) reports them Provisioned when the scale-up is "
               "asked, not when the VMs exist, so Kueue would move the running gang to spot "
               "nodes that may never come; queued provisioning is flex-start only",
}


def spot_shortage_fallback_fits(s: Settings) -> Iterator[Problem]:
    """job.spotShortage.policy onDemand would need the cloud's autoscaler to answer Kueue's
    ProvisioningRequest for the spot pool only once spot nodes exist; none does here
    (SPOT_FALLBACK_REFUSED), so the policy is refused with the reason on every cloud."""
    if s.job.pool != PoolChoice.SPOT or s.job.spot_shortage.policy != SpotShortagePolicy.ON_DEMAND:
        return
    yield Problem("job.spotShortage.policy", "onDemand",
                  f"wait on {s.cloud.value} (or job.pool onDemand): "
                  f"{SPOT_FALLBACK_REFUSED[s.cloud]} (set it with: pulumi config set --path "
                  "job.spotShortage.policy wait)")


def spot_shortage_wait_fits_one_node_join(s: Settings) -> Iterator[Problem]:
    """job.spotShortage.maxWaitMinutes shorter than one PodsReady timeout (the machine's node
    join time, infra/catalog/machines.py node_ready_minutes) would not even wait for one cold start."""
    minutes = s.job.spot_shortage.max_wait_minutes
    found = find_machine(s.cloud, s.job_pool.machine_type)
    if minutes is None or found is None:
        return
    if minutes < found.node_ready_minutes:
        yield Problem("job.spotShortage.maxWaitMinutes", minutes,
                      f"unset (wait without end), or at least {found.node_ready_minutes}: one "
                      f"{found.name} node's join time, Kueue's PodsReady timeout for it")


def spot_needs_checkpoints(s: Settings) -> Iterator[Problem]:
    if s.gpu_pools.spot.enabled and not s.checkpoints.enabled:
        yield Problem("checkpoints.enabled", False,
                      "a spot pool loses nodes at short notice: keep checkpoints on, or set "
                      "gpuPools.spot.enabled: false")


def kubernetes_names_are_valid(s: Settings) -> Iterator[Problem]:
    for path, value in (("job.name", s.job.name), ("job.namespace", s.job.namespace),
                        ("job.serviceAccount", s.job.service_account)):
        if len(value) > 63 or not RFC1123_LABEL.match(value):
            yield Problem(path, value,
                          "an RFC 1123 label: at most 63 lowercase letters, digits and '-', "
                          "starting and ending with a letter or digit")
            return
    if s.job.kind == JobKind.JOB_SET:
        # JobSet's webhook (pkg/webhooks/jobset_webhook.go, v0.10.1) requires its pod names,
        # `<name>-node-0-<last index>-abcde`, to be DNS-1035 labels of at most 63 characters.
        longest = f"{s.job.name}-{JOBSET_REPLICATED_JOB}-0-{s.job.nodes - 1}-abcde"
        if len(longest) > 63 or not s.job.name[0].isalpha():
            yield Problem("job.name", s.job.name,
                          f"a JobSet name starts with a letter and has at most "
                          f"{63 - len(longest) + len(s.job.name)} characters with "
                          f"{s.job.nodes} nodes (its pods are named {longest[:-6]}-xxxxx)")
    if s.dataset.prepare.enabled:
        prepare_job = f"{s.job.name}{PREPARE_JOB_SUFFIX}-{'x' * (PULUMI_AUTONAME_SUFFIX - 1)}"
        if len(prepare_job) > 63:
            yield Problem("job.name", s.job.name,
                          f"at most {63 - len(prepare_job) + len(s.job.name)} characters with "
                          f"dataset.prepare (its Job is named {prepare_job}, a label value of "
                          "at most 63)")


def trainer_args_are_flags(s: Settings) -> Iterator[Problem]:
    for key in s.job.trainer_args:
        if key in WORKLOAD_OWNED_FLAGS:
            decided_by, setting = WORKLOAD_OWNED_FLAGS[key]
            instead = (f"set {setting} instead" if setting == decided_by
                       else f"to change it, set {setting}" if setting else "remove it")
            yield Problem(f"job.trainerArgs.{key}", s.job.trainer_args[key],
                          f"set by the stack from {decided_by}; {instead}")
        elif not TRAINER_FLAG.match(key):
            close = closest_flag(key, trainer_flag_names())
            path = f"job.trainerArgs.{key}"
            hint = (f"did you mean {close!r}? "
                    f"{rename_commands(path, f'job.trainerArgs.{close}', s.job.trainer_args[key])}; "
                    if close else "")
            shape = "flag names as the trainer's options without their dashes, '_' between words, like batch_size"
            yield Problem(f"job.trainerArgs.{key}", s.job.trainer_args[key], f"{hint}{shape}",
                          reason=f"did you mean {close!r}? {shape}" if close else "")


def mlperf_recipe_keeps_its_global_batch(s: Settings) -> Iterator[Problem]:
    """With trainerArgs.recipe mlperf the trainer takes MLPerf's global batch over the job's
    ranks (trainer/recipe.py); a batch_size beside it would silently change the recipe, and
    ranks that do not divide the global batch would fail the job at its start."""
    args = s.job.trainer_args
    if args.get("recipe") != "mlperf":
        return
    from trainer.recipe import MLPERF_GLOBAL_BATCH

    if "batch_size" in args:
        reason = (f"not with recipe mlperf, whose global batch is {MLPERF_GLOBAL_BATCH} samples "
                  "split over the ranks")
        yield Problem("job.trainerArgs.batch_size", args["batch_size"], f"{reason}: remove it "
                      "with `pulumi config rm --path job.trainerArgs.batch_size`", reason=reason)
    ranks = s.job.nodes * s.job.processes_per_node
    if "global_batch_size" not in args and MLPERF_GLOBAL_BATCH % ranks:
        yield Problem("job.nodes", s.job.nodes,
                      f"recipe mlperf splits {MLPERF_GLOBAL_BATCH} samples per step over "
                      f"job.nodes x job.processesPerNode ranks ({ranks}): a number of ranks "
                      f"that divides {MLPERF_GLOBAL_BATCH}")


def file_system_matches_the_cloud(s: Settings) -> Iterator[Problem]:
    expected = FS_KIND_BY_CLOUD[s.cloud]
    if s.shared_file_system.kind != expected:
        yield Problem("sharedFileSystem.kind", s.shared_file_system.kind,
                      f"{expected} on {s.cloud.value}")


def mount_paths_are_absolute(s: Settings) -> Iterator[Problem]:
    path = s.shared_file_system.mount_path
    if not path.startswith("/") or path == "/":
        yield Problem("sharedFileSystem.mountPath", path, "an absolute path other than /")
    if s.dataset.path.startswith("/") or ".." in s.dataset.path.split("/"):
        yield Problem("dataset.path", s.dataset.path,
                      "a path relative to the shared file system's mount, without '..'")


def cloud_options_match(s: Settings) -> Iterator[Problem]:
    for cloud in Cloud:
        if cloud != s.cloud and getattr(s, cloud.value) is not None:
            yield Problem(cloud.value, getattr(s, cloud.value).model_dump(by_alias=True),
                          f"{cloud.value} options, but this stack's cloud is {s.cloud.value}")


RULES: tuple[Rule, ...] = (
    pool_sizes_are_ordered,
    pool_names_fit_the_cloud,
    machines_are_in_the_catalog,
    region_is_one_of_the_cloud_s,
    zones_are_in_the_region,
    zones_belong_to_the_region,
    placement_needs_one_zone,
    fabric_needs_a_machine_that_has_it,
    processes_fit_the_gpus,
    job_fits_its_pool,
    left_out_nodes_are_replaced,
    spot_shortage_fallback_fits,
    spot_shortage_wait_fits_one_node_join,
    spot_needs_checkpoints,
    kubernetes_names_are_valid,
    trainer_args_are_flags,
    trainer_args_fit_the_trainer,
    mlperf_recipe_keeps_its_global_batch,
    file_system_matches_the_cloud,
    mount_paths_are_absolute,
    cloud_options_match,
    no_placeholders_left,
)
