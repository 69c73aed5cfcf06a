"""Changes that AKS makes only in one piece, or that roll the GPU nodes under a running job:
refused before any resource, with the commands that do them.

A minor upgrade. The cluster's one ManagedCluster PUT carries the control plane's version and
the inline system pool's; the GPU pools are AgentPool resources of their own. AKS refuses a
managed-cluster PUT that changes a pool's version unless every pool is in it at the control
plane's version ("Using managed cluster api, all Agent pools' OrchestratorVersion must be all
specified or all unspecified. If all specified, they must be stay unchanged or the same with
control plane", NotAllAgentPoolOrchestratorVersionSpecifiedAndUnchanged: Azure/azure-cli#22807,
hashicorp/terraform-provider-azurerm#23436, Azure/AKS#4765), and with an auto-upgrade channel (this
cluster has `patch`) it refuses the control-plane-only upgrade too: "Cluster auto-upgrade always
upgrades the control plane and the node pools together" (https://learn.microsoft.com/azure/aks/
auto-upgrade-cluster, "Cluster auto-upgrade limitations"). `az aks upgrade` sends that one PUT:
it reads the cluster and sets kubernetesVersion and every agentPoolProfiles[].orchestratorVersion
to the target (azure-cli acs/custom.py aks_upgrade). Pulumi, whose pools are separate resources,
cannot; so the program names that command. The next `pulumi up` is not a no-op: Pulumi's state
still holds the old minor as the cluster's and pools' inputs, so it plans in-place updates of the
cluster and every GPU pool to the new minor, which AKS finds each one already runs: no node rolls,
and each pool's node count is declared as it runs (node_pools.declared_count). `pulumi refresh`
first would show the same; it is not needed.

The upgrade rolls every node of every pool; the GPU pools roll all their nodes at once with no
surge node (maxSurge 0, maxUnavailable = maxNodes; spot pools never surge: infra/azure/node_pools.py), so it
needs no quota beyond the pools' maxNodes. A drained GPU node stops the gang: while GPU nodes
run, the message says how to suspend the job first and resume it after.

A GPU pool's VM size. `vmSize` cannot change in place: Pulumi replaces the pool, which deletes
every node of it at once. While that pool has nodes, the change is refused with the same
suspend and resume commands; once the suspended job's nodes are gone it goes ahead.
"""

from __future__ import annotations

import pulumi

from infra.azure.versions import LiveCluster
from infra.contract import GpuClusterArgs
from infra.settings.errors import Problem, SettingsError


def pulumi_command(verb: str, rest: str = "") -> str:
    """A pulumi command for this stack, named: the shell's selected stack may be another cloud's."""
    return f"pulumi {verb} --stack {pulumi.get_stack()}" + (f" {rest}" if rest else "")


def set_config(path: str, value: object) -> str:
    return pulumi_command("config set", f"--path {path} {value}")


def gpu_nodes(live: LiveCluster, pools: list[str]) -> int:
    """How many nodes the stack's GPU pools have now (AKS's count per pool)."""
    return sum(live.nodes.get(pool, 0) for pool in pools)


def suspend_first(nodes: int, revert: str, middle: str, restore: str) -> str:
    """What to do about a running job, or nothing when no GPU node runs. `revert` puts the
    changed setting back for the run that suspends (which this check would refuse otherwise),
    `middle` is what to do once the job is stopped, `restore` sets the change again."""
    if nodes == 0:
        return ""
    up = pulumi_command("up")
    return (f" The GPU pools have {nodes} node(s) now and each one drained stops the job's gang:"
            f" to do it between runs, first `{revert} && {set_config('job.suspend', 'true')}` "
            f"and `{up}` (the job stops after a save; its idle GPU nodes are removed about 10 "
            f"minutes later), then {middle}, then `{restore} && "
            f"{set_config('job.suspend', 'false')}` and `{up}` to resume from the newest "
            "checkpoint.")


def check_changes(args: GpuClusterArgs, live: LiveCluster | None) -> None:
    """Refuse, before any resource, an upgrade Pulumi cannot send and a pool replacement under a
    running job. `live`: the stack's cluster as AKS runs it (None: there is none)."""
    release, settings = args.release, args.settings
    if live is None or (release.upgrade_from is None and not settings.enabled_gpu_pools):
        return
    gpu_pools = [pool.name for pool in settings.enabled_gpu_pools]
    problems: list[Problem] = []
    if release.upgrade_from is not None:
        upgrade = (f"az aks upgrade --resource-group {live.resource_group} --name {live.name} "
                   f"--kubernetes-version {release.minor} --yes")
        problems.append(Problem(
            "kubernetes.version", release.minor,
            f"the cluster runs {live.version}; AKS upgrades a cluster with an auto-upgrade "
            "channel only together with every node pool, in one request Pulumi cannot send "
            "for node pools declared as their own resources "
            "(NotAllAgentPoolOrchestratorVersionSpecifiedAndUnchanged). Upgrade it as `az aks "
            f"upgrade` does: `{upgrade}` (control plane, then every pool; a GPU pool's nodes all "
            f"at once with no surge node, so no quota beyond maxNodes), then `{pulumi_command('up')}`"
            f" again with this setting: it records {release.minor} in the stack's state by "
            "updating the cluster and its pools in place to the version they already run, so "
            "no node rolls and every pool keeps the node count it runs." + suspend_first(
                gpu_nodes(live, gpu_pools),
                set_config("kubernetes.version", release.upgrade_from),
                f"`{upgrade}`",
                set_config("kubernetes.version", release.minor))
            + " Nothing was changed"))
    for key, pool in settings.gpu_pools_by_key.items():
        was = live.vm_sizes.get(pool.name)
        nodes = live.nodes.get(pool.name, 0)
        if was is None or was == pool.machine_type or nodes == 0:
            continue
        problems.append(Problem(
            f"gpuPools.{key.value}.machineType", pool.machine_type,
            f"pool {pool.name} runs {was} on {nodes} node(s); a new VM size replaces the pool, "
            "deleting all of its nodes at once under the running job." + suspend_first(
                nodes, set_config(f"gpuPools.{key.value}.machineType", was),
                "once the pool has no node",
                set_config(f"gpuPools.{key.value}.machineType", pool.machine_type))
            + " Nothing was changed"))
    if problems:
        raise SettingsError(problems)
