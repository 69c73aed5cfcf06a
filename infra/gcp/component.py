"""GcpGpuCluster: GKE + GPU pools + Filestore + checkpoint bucket, returned as the cluster contract.

Thin on purpose: each concern lives in its own file (network, cluster, node_pools, filestore,
storage, identity, registry, interconnect, gpudirect, kubeconfig); this class wires them in
order and hands `GpuCluster` to the workload layer.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.catalog.cloud import Cloud
from infra.catalog.machines import machine
from infra.contract import CheckpointStore, GpuCluster, GpuClusterArgs, PreparationIdentity
from infra.gcp.cluster import create_cluster, gpu_zone
from infra.gcp.filestore import create_filestore
from infra.gcp.gpudirect import create_gpudirect_objects, gpu_nics_needed, gpudirect_in_use
from infra.gcp.identity import (create_job_account, create_node_account, create_prepare_account,
                                let_the_deployer_act_as)
from infra.gcp.interconnect import GPU_VPC_MTU, interconnect_spec
from infra.gcp.kubeconfig import cluster_kubeconfig, kubernetes_provider
from infra.gcp.network import GPU_NODE_TAG, create_gpu_networks, create_network
from infra.gcp.node_pools import create_pools
from infra.gcp.quotas import check_job_quota
from infra.gcp.registry import create_trainer_image
from infra.naming import stack_unique_prefix
from infra.gcp.storage import (ADOPTED_OUTPUT, choose_bucket, create_checkpoint_bucket,
                               grant_dataset_reads)
from infra.gcp.versions import (NODE_BASIS_OUTPUT, SETTINGS_OUTPUT, check_features,
                                node_versions, settings_fingerprint)
from infra.settings.errors import SettingsError
from infra.settings.model.shared_file_system import Filestore
from infra.settings.cost_rules import spot_save_fits_the_notice

TYPE_TOKEN = "torchrec-cloud:gcp:GpuCluster"
WORKLOAD_IDENTITY_ANNOTATION = "iam.gke.io/gcp-service-account"


class GcpGpuCluster(pulumi.ComponentResource):
    """Everything the GCP stack creates below the workload; `.contract` is its public face."""

    contract: GpuCluster

    def __init__(self, name: str, args: GpuClusterArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        s = args.settings
        if s.gcp is None or not isinstance(s.shared_file_system, Filestore):
            raise ValueError("GcpGpuCluster needs gcp settings and a filestore shared file system")
        prefix, project, region, zone = args.name_prefix, s.gcp.project, s.region, gpu_zone(s)
        # Before anything is registered (not even this component or its provider): the release
        # was chosen from GKE's channel or the live cluster (infra/gcp/versions.py); what the
        # settings ask of its build is checked here, and the pools' live versions are read.
        release = args.release
        check_features(s, release.version)
        nodes = node_versions(s, release, args.previous)
        if nodes.notice:
            pulumi.log.warn(nodes.notice)
        gpu_pool_names = [pool.name for pool in s.gpu_pools_by_key.values()]
        node_version = nodes.oldest(gpu_pool_names)
        # The save-fits-the-notice rule once more, with the version the job's stop budget uses
        # (the settings' minor alone counts as its newest build).
        unfit = list(spot_save_fits_the_notice(s, node_version))
        if unfit:
            raise SettingsError(unfit)
        # Whether GCS has the checkpoint bucket: asked before anything is registered, so a
        # failed question stops the run with nothing made.
        bucket_choice = choose_bucket(project, stack_unique_prefix(), args.previous)
        check_job_quota(s)  # the job's nodes fit the project's regional GPU and CPU quotas
        super().__init__(TYPE_TOKEN, name, None, opts)

        provider = gcp.Provider(
            f"{prefix}-gcp", project=project, region=region, zone=zone,
            default_labels=s.tags, opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=provider)

        network = create_network(prefix, region, s.gcp.network_cidr, child)
        # GPUDirect (A3 with interconnect.fabric): one VPC per GPU NIC, multi-networking.
        gpudirect = gpudirect_in_use(s)
        gpu_networks = create_gpu_networks(
            prefix, region, s.gcp.network_cidr, gpu_nics_needed(gpudirect), GPU_VPC_MTU,
            GPU_NODE_TAG, child)
        node_account = create_node_account(prefix, project, child)
        acts_as_nodes = let_the_deployer_act_as(prefix, node_account, child)
        runs_as_nodes = pulumi.ResourceOptions.merge(
            child, pulumi.ResourceOptions(depends_on=[acts_as_nodes]))
        cluster = create_cluster(prefix, s, network, node_account.email, release, runs_as_nodes,
                                 multi_networking=bool(gpu_networks))
        pools = create_pools(prefix, s, cluster, zone, node_account.email, nodes, runs_as_nodes,
                             gpu_networks)
        _instance, shared = create_filestore(
            prefix, s.shared_file_system, region, zone, network.network, child)

        job_account, acts_as_job = create_job_account(
            prefix, project, s.job.namespace, s.job.service_account, [cluster], child)
        bucket, writes_checkpoints = create_checkpoint_bucket(
            prefix, region, s.checkpoints, job_account, bucket_choice, s.job.name, child)
        # IAM the job needs before its first pod starts (IAM propagates in seconds to minutes;
        # a pod that starts first gets 403s and a restart it did not need).
        grants: list[pulumi.Resource] = [acts_as_job, writes_checkpoints]
        preparation = PreparationIdentity()  # a source on the shared file system: no identity
        sources = s.dataset.prepare_source_uris("gs")
        if sources:  # its own account, reading the source bucket only
            prepare_account, acts_as_prepare = create_prepare_account(
                prefix, project, s.job.namespace, s.job.prepare_service_account, [cluster],
                child)
            preparation = PreparationIdentity(
                service_account_annotations={
                    WORKLOAD_IDENTITY_ANNOTATION: prepare_account.email},
                ready=[acts_as_prepare,
                       *grant_dataset_reads(prefix, sources, prepare_account, child)])
        checkpoints = CheckpointStore(
            uri=pulumi.Output.concat("gs://", bucket.name, "/", s.job.name),
            bucket=bucket.name,
            service_account_annotations={WORKLOAD_IDENTITY_ANNOTATION: job_account.email},
            pod_labels={},
        )

        image: pulumi.Input[str] = s.job.image or ""
        if not image:  # no image given: build it into this project's registry
            image, pulls_images = create_trainer_image(
                prefix, project, region, node_account, provider, self, child)
            grants.append(pulls_images)

        kubeconfig = cluster_kubeconfig(cluster)
        ready: list[pulumi.Resource] = [*pools.all, network.nat, network.webhook_rule]
        k8s_provider = kubernetes_provider(
            prefix, kubeconfig, ready, pulumi.ResourceOptions(parent=self))
        fabric_objects = create_gpudirect_objects(
            prefix, gpudirect, gpu_networks, s.kubernetes.version,
            pulumi.ResourceOptions(parent=self, provider=k8s_provider))

        self.contract = GpuCluster(
            cloud=Cloud.GCP,
            name=cluster.name,
            kubeconfig=kubeconfig,
            provider=k8s_provider,
            gpu_pools=pools.contract,
            shared_file_system=shared,
            checkpoints=checkpoints,
            interconnect=interconnect_spec(
                machine(Cloud.GCP, s.job_pool.machine_type), s.interconnect.fabric),
            trainer_image=image,
            ready=[*ready, *fabric_objects, *grants],
            preparation=preparation,
            kubernetes_version=release.version,
            node_version=node_version,
            exports={"node_version": node_version,
                     NODE_BASIS_OUTPUT: nodes.basis(gpu_pool_names),
                     SETTINGS_OUTPUT: settings_fingerprint(s),
                     **({ADOPTED_OUTPUT: True} if bucket_choice.adopted else {})},
        )
        self.register_outputs({
            "clusterName": cluster.name,
            "kubeconfig": kubeconfig,
            "fileSystemId": shared.file_system_id,
            "bucket": bucket.name,
            "trainerImage": image,
            "kubernetesVersion": release.version,
            "nodeVersion": node_version,
        })
