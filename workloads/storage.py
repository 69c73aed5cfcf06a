"""A static PersistentVolume for the cloud's shared file system, and the claim bound to it.

Static, not dynamic: the file system is created by the cloud component (and outlives pods), so
the PV only points at it. `Retain` means deleting the PV never deletes the data, and
storageClassName "" plus claimRef/volumeName bind exactly this claim to exactly this volume.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from infra.contract import CsiVolumeSource, GpuCluster, NfsVolumeSource
from workloads.names import JobNames

core = k8s.core.v1
meta = k8s.meta.v1


def _source(source: CsiVolumeSource | NfsVolumeSource) -> dict[str, object]:
    if isinstance(source, CsiVolumeSource):
        return {"csi": core.CSIPersistentVolumeSourceArgs(
            driver=source.driver,
            volume_handle=source.volume_handle,
            volume_attributes=dict(source.volume_attributes),
        )}
    return {"nfs": core.NFSVolumeSourceArgs(server=source.server, path=source.path)}


def persistent_volume(name: str, names: JobNames, cluster: GpuCluster,
                      opts: pulumi.ResourceOptions) -> core.PersistentVolume:
    fs = cluster.shared_file_system
    return core.PersistentVolume(
        name,
        metadata=meta.ObjectMetaArgs(name=names.persistent_volume, labels=names.common_labels),
        spec=core.PersistentVolumeSpecArgs(
            capacity={"storage": f"{fs.capacity_gib}Gi"},
            access_modes=["ReadWriteMany"],
            persistent_volume_reclaim_policy="Retain",
            storage_class_name="",
            volume_mode="Filesystem",
            mount_options=list(fs.mount_options) or None,
            claim_ref=core.ObjectReferenceArgs(namespace=names.namespace, name=names.claim),
            **_source(fs.source),  # type: ignore[arg-type]
        ),
        opts=opts,
    )


def persistent_volume_claim(name: str, names: JobNames, cluster: GpuCluster,
                            volume: core.PersistentVolume,
                            opts: pulumi.ResourceOptions) -> core.PersistentVolumeClaim:
    return core.PersistentVolumeClaim(
        name,
        metadata=meta.ObjectMetaArgs(name=names.claim, namespace=names.namespace,
                                     labels=names.common_labels),
        spec=core.PersistentVolumeClaimSpecArgs(
            access_modes=["ReadWriteMany"],
            storage_class_name="",
            volume_name=volume.metadata.name,
            resources=core.VolumeResourceRequirementsArgs(
                requests={"storage": f"{cluster.shared_file_system.capacity_gib}Gi"}),
        ),
        opts=opts,
    )
