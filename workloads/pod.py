"""The pod template both job kinds share: one pod per GPU node, locked down for a scan.

Kept in one function so the Indexed Job and the PyTorchJob cannot drift apart in GPUs,
placement, identity, storage or security settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import shlex
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.contract import GpuCluster, GpuPool
from infra.preemption import StopBudget
from infra.settings.model.job import Job
from trainer.node_taint import NODE_NAME_ENV, TOKEN_DIR
from trainer.privileges import DROP_TO_ENV
from workloads.names import RENDEZVOUS_PORT, JobNames
from workloads.sizing import pod_size
from workloads.spend import spend_env

core = k8s.core.v1
RUN_AS = 1000  # the trainer image's non-root user and group
GPU_TAINT = core.TolerationArgs(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")
SHARED_VOLUME = "shared-fs"
FOLDER_PREPARER = "prepare-shared-fs"


@dataclass(frozen=True)
class ContainerSpec:
    """What differs between the two job kinds: the container's name, command and port name."""

    name: str
    command: list[pulumi.Input[str]]
    args: pulumi.Input[list[pulumi.Input[str]]]
    port_name: str


def job_pool(cluster: GpuCluster, job: Job) -> GpuPool:
    """The pool the settings chose; the contract keys pools like the settings do."""
    return cluster.gpu_pools[job.pool.value]


def tolerations(*pools: GpuPool) -> list[core.TolerationArgs]:
    """Every taint of the pools the pod may run on, once each, and the GPU taint."""
    taints = list(dict.fromkeys(t for pool in pools for t in pool.taints))
    own = [core.TolerationArgs(key=t.key, operator="Equal", value=t.value, effect=t.effect)
           for t in taints]
    if any(t.key == "nvidia.com/gpu" for t in taints):
        return own
    return [*own, GPU_TAINT]


def node_affinity(*pools: GpuPool) -> core.AffinityArgs:
    """Required, not preferred: a trainer pod off the GPU pools would wait for GPUs forever.
    One term per pool (terms are ORed): with Kueue, the admitted flavor's nodeSelector then
    picks the pool (Kueue matches each flavor's nodeLabels against these terms)."""
    return core.AffinityArgs(node_affinity=core.NodeAffinityArgs(
        required_during_scheduling_ignored_during_execution=core.NodeSelectorArgs(
            node_selector_terms=[core.NodeSelectorTermArgs(match_expressions=[
                core.NodeSelectorRequirementArgs(key=key, operator="In", values=[value])
                for key, value in sorted(pool.node_labels.items())
            ]) for pool in pools],
        ),
    ))


def environment(cluster: GpuCluster) -> list[core.EnvVarArgs]:
    values: Mapping[str, pulumi.Input[str]] = {
        **cluster.interconnect.env,
        **cluster.checkpoints.env,
        "HOME": "/tmp",  # the root file system is read-only; caches (torch, triton) go to /tmp
        "PYTHONUNBUFFERED": "1",
        **({DROP_TO_ENV: f"{RUN_AS}:{RUN_AS}"} if cluster.interconnect.raise_locked_memory
           else {}),
    }
    return [*(core.EnvVarArgs(name=name, value=value) for name, value in sorted(values.items())),
            # The node the fabric gate names and leaves out when it finds this one bad.
            core.EnvVarArgs(name=NODE_NAME_ENV, value_from=core.EnvVarSourceArgs(
                field_ref=core.ObjectFieldSelectorArgs(field_path="spec.nodeName")))]


KUBE_API_VOLUME = "kube-api-access"


def kube_api_volume() -> core.VolumeArgs:
    """The service account's token, only for the trainer container and only where the gate may
    leave a node out (workloads/node_gate.py): a short-lived projected token and the cluster's
    CA, where in-cluster clients look for them."""
    return core.VolumeArgs(name=KUBE_API_VOLUME, projected=core.ProjectedVolumeSourceArgs(
        sources=[
            core.VolumeProjectionArgs(service_account_token=core.ServiceAccountTokenProjectionArgs(
                path="token", expiration_seconds=3600)),
            core.VolumeProjectionArgs(config_map=core.ConfigMapProjectionArgs(
                name="kube-root-ca.crt", items=[core.KeyToPathArgs(key="ca.crt", path="ca.crt")])),
        ]))


# Only what raising RLIMIT_MEMLOCK and then dropping to RUN_AS take (trainer/launch.py).
RAISE_MEMLOCK_CAPABILITIES = ["SETGID", "SETUID", "SYS_RESOURCE"]


def security_context(cluster: GpuCluster) -> core.SecurityContextArgs:
    """Non-root with every capability dropped; where RDMA needs a raised locked-memory limit,
    the container starts as root with just the three capabilities the launcher uses to raise
    it and drop to RUN_AS before the trainer runs; where the fabric's vendor runs NCCL only as
    root (GKE GPUDirect: contract `trainer_runs_as_root`), root with nothing but the fabric's
    capabilities. No privilege escalation, read-only root file system either way."""
    raise_memlock = cluster.interconnect.raise_locked_memory
    root = raise_memlock or cluster.interconnect.trainer_runs_as_root
    add = sorted({*cluster.interconnect.capabilities,
                  *(RAISE_MEMLOCK_CAPABILITIES if raise_memlock else [])})
    return core.SecurityContextArgs(
        allow_privilege_escalation=False,
        privileged=False,
        read_only_root_filesystem=True,
        run_as_non_root=not root,
        run_as_user=0 if root else RUN_AS,
        run_as_group=0 if root else RUN_AS,
        capabilities=core.CapabilitiesArgs(drop=["ALL"], add=add or None),
        seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
    )


def writable_dirs(cluster: GpuCluster, job: Job) -> list[str]:
    """The job's folders on the shared file system (metrics, TensorBoard, FS checkpoints)."""
    return job_folders(cluster.shared_file_system.mount_path, job.name)


def job_folders(mount: str, job_name: str) -> list[str]:
    """A job's folders under the mount (a submitted job's too: workloads/submitted.py)."""
    return [f"{mount}/runs/{job_name}", f"{mount}/checkpoints/{job_name}"]


def preparer_script(folders: Sequence[str]) -> str:
    """The folder preparer's one line: make the folders, give them to RUN_AS."""
    quoted = " ".join(shlex.quote(d) for d in folders)
    return f"mkdir -p {quoted} && chown {RUN_AS}:{RUN_AS} {quoted}"


def shared_fs_preparer(cluster: GpuCluster, job: Job) -> core.ContainerArgs:
    """Give the trainer's user its folders on the shared file system (folder_preparer)."""
    return folder_preparer(cluster, writable_dirs(cluster, job))


def folder_preparer(cluster: GpuCluster, folders: Sequence[str]) -> core.ContainerArgs:
    """Make `folders` on the shared file system and give them to RUN_AS.

    A new volume's root belongs to root (FSx, Filestore: mode 755; Azure NetApp Files: 0770,
    which infra/azure/netapp.py sets to 0755 through the NetApp API so uid 1000 can pass the
    mount point), so the non-root trainer could not write its metrics or checkpoints there.
    This init container runs as root for one mkdir and one non-recursive chown, holding only
    CHOWN (no DAC_OVERRIDE: it writes as the root's owner), with no privilege escalation and a
    read-only root file system; the folders go to RUN_AS, the uid the trainer runs or drops to.
    """
    return core.ContainerArgs(
        name=FOLDER_PREPARER,
        image=cluster.trainer_image,
        image_pull_policy="Always",
        command=["/bin/sh", "-c", preparer_script(folders)],
        resources=core.ResourceRequirementsArgs(
            requests={"cpu": "100m", "memory": "64Mi"}, limits={"cpu": "100m", "memory": "64Mi"}),
        security_context=core.SecurityContextArgs(
            allow_privilege_escalation=False,
            privileged=False,
            read_only_root_filesystem=True,
            run_as_non_root=False,
            run_as_user=0,
            run_as_group=0,
            capabilities=core.CapabilitiesArgs(drop=["ALL"], add=["CHOWN"]),
            seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        volume_mounts=[core.VolumeMountArgs(name=SHARED_VOLUME,
                                            mount_path=cluster.shared_file_system.mount_path)],
    )


def volumes(names: JobNames, shm_gib: int,
            fabric: Sequence[core.VolumeArgs] = ()) -> list[core.VolumeArgs]:
    return [
        core.VolumeArgs(name=SHARED_VOLUME, persistent_volume_claim=(
            core.PersistentVolumeClaimVolumeSourceArgs(claim_name=names.claim))),
        core.VolumeArgs(name="dshm", empty_dir=core.EmptyDirVolumeSourceArgs(
            medium="Memory", size_limit=f"{shm_gib}Gi")),
        core.VolumeArgs(name="tmp", empty_dir=core.EmptyDirVolumeSourceArgs()),
        *fabric,  # the fabric's own (GKE GPUDirect: host paths, the rxdm's sockets)
    ]


def fabric_sidecars(cluster: GpuCluster) -> list[core.ContainerArgs]:
    """The fabric's sidecars (GKE GPUDirect's rxdm), run as Kubernetes native sidecars: init
    containers with restartPolicy Always start before the trainer and are stopped by the
    kubelet once it has exited, so they never keep the batch pod from completing, and the
    pod's phase (what the Job's podFailurePolicy reads) is the trainer's alone."""
    sidecars = list(cluster.interconnect.sidecars)
    for sidecar in sidecars:
        if sidecar.restart_policy != "Always":
            raise ValueError(f"fabric sidecar {sidecar.name!r} must have restart_policy "
                             "'Always' (a native sidecar), or it would block the job's end")
    return sidecars


def pod_template(cluster: GpuCluster, job: Job, names: JobNames, budget: StopBudget,
                 container: ContainerSpec,
                 kube_api: bool = False,
                 pools: Sequence[GpuPool] = ()) -> core.PodTemplateSpecArgs:
    """The pod both job kinds run; its grace is the pool's stop budget (infra/preemption.py).
    `kube_api`: the trainer gets an API token, to leave a bad node out (workloads/node_gate.py).
    `pools`: the GPU pools the pod may run on (Kueue's flavors, same machine); default the
    job's pool."""
    pool = job_pool(cluster, job)
    pools = tuple(pools) or (pool,)
    size = pod_size(pool, cluster.interconnect)
    quantities = size.quantities()
    trainer = core.ContainerArgs(
        name=container.name,
        image=cluster.trainer_image,
        image_pull_policy="Always",  # the image is pinned by digest: Always only re-checks it
        command=container.command,
        args=container.args,
        env=[*environment(cluster),
             # Rank 0 keeps the job's own spend record from these (trainer/spend.py).
             *(core.EnvVarArgs(name=k, value=v) for k, v in spend_env(
                 job.name, job.nodes, "spot" if pool.spot else "on-demand",
                 pool.machine.spot_usd_per_hour if pool.spot
                 else pool.machine.on_demand_usd_per_hour, pool.machine.gpu_count).items())],
        ports=[core.ContainerPortArgs(name=container.port_name, container_port=RENDEZVOUS_PORT,
                                      protocol="TCP")],
        resources=core.ResourceRequirementsArgs(requests=quantities, limits=quantities),
        security_context=security_context(cluster),
        volume_mounts=[
            core.VolumeMountArgs(name=SHARED_VOLUME, mount_path=cluster.shared_file_system.mount_path),
            core.VolumeMountArgs(name="dshm", mount_path="/dev/shm"),
            core.VolumeMountArgs(name="tmp", mount_path="/tmp"),
            *cluster.interconnect.trainer_volume_mounts,
            *([core.VolumeMountArgs(name=KUBE_API_VOLUME, mount_path=TOKEN_DIR, read_only=True)]
              if kube_api else []),
        ],
    )
    return core.PodTemplateSpecArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(
            labels={**names.common_labels, **cluster.checkpoints.pod_labels},
            annotations={**cluster.pod_annotations, **cluster.interconnect.pod_annotations}
            or None),
        spec=core.PodSpecArgs(
            # The folder preparer runs to completion first; the sidecars then start, and the
            # trainer once they have (after their startup probes, where they have one). No wait
            # for the dataset here: a pod in its init containers is not Ready, and Kueue would
            # evict the gang (workloads/prepare.py waiting_first runs it in the trainer).
            init_containers=[shared_fs_preparer(cluster, job), *fabric_sidecars(cluster)],
            containers=[trainer],
            service_account_name=names.service_account,
            # IRSA, Azure and GKE workload identity inject their own projected token (or use the
            # metadata server); the Kubernetes API token is only the gate's (kube_api_volume).
            automount_service_account_token=False,
            enable_service_links=False,
            restart_policy="Never",  # required by podFailurePolicy; JobSet recreates the gang
            termination_grace_period_seconds=budget.pod_grace_seconds,
            tolerations=tolerations(*pools),
            affinity=node_affinity(*pools),
            security_context=core.PodSecurityContextArgs(
                run_as_non_root=True, run_as_user=RUN_AS, run_as_group=RUN_AS,
                # The projected service-account token (Azure workload identity's, EKS IRSA's) is
                # written 0600 for the pod's user when every container runs as one user, root
                # on Azure before the launcher drops to RUN_AS; fsGroup makes it 0640 group
                # RUN_AS, readable after the drop (Azure/azure-workload-identity
                # docs/book/src/known-issues.md). NFS volumes ignore fsGroup.
                fs_group=RUN_AS,
                seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
            ),
            volumes=[*volumes(names, size.shm_gib, cluster.interconnect.volumes),
                     *([kube_api_volume()] if kube_api else [])],
        ),
    )
