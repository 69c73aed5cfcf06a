"""AwsGpuCluster: the AWS implementation of the cluster contract (infra/contract.py)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.aws import (
    addons,
    autoscaler,
    cluster as eks_cluster,
    fsx,
    identity,
    interruption,
    network,
    node_groups,
    quotas as aws_quotas,
    reservations,
    storage,
    versions as eks_versions,
    zones as aws_zones,
)
from infra.aws.interconnect import EFA_RESOURCE, efa_interconnect
from infra.aws.registry import trainer_image
from infra.catalog.cloud import Cloud
from infra.catalog.machines import machine
from infra.contract import (
    CheckpointStore,
    CsiVolumeSource,
    GpuCluster,
    GpuClusterArgs,
    SharedFileSystem,
)
from infra.device_admission import restrict_device
from infra.naming import name_prefix, prefix_was_cut, stack_unique_prefix
from infra.settings.model.checkpoints import CheckpointLocation
from infra.settings.model.job import PoolChoice
from infra.settings.model.shared_file_system import FsxLustre

TYPE_TOKEN = "torchrec-cloud:aws:GpuCluster"


class AwsGpuCluster(pulumi.ComponentResource):
    """EKS + GPU node groups (EFA, placement) + FSx for Lustre + S3 checkpoints + add-ons."""

    contract: GpuCluster

    def __init__(self, name: str, args: GpuClusterArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, None, opts)
        s = args.settings
        prefix = args.name_prefix
        if not isinstance(s.shared_file_system, FsxLustre):  # settings rules guarantee it
            raise ValueError("sharedFileSystem.kind must be fsx-lustre on aws")
        cluster_name = f"{prefix}-eks"
        reservation = s.aws.capacity_reservation if s.aws else None

        provider = aws.Provider(
            f"{prefix}-aws", region=s.region,
            default_tags=aws.ProviderDefaultTagsArgs(tags=dict(s.tags)),
            opts=pulumi.ResourceOptions(parent=self))
        aws_opts = pulumi.ResourceOptions(parent=self, provider=provider)
        component_opts = pulumi.ResourceOptions(parent=self, providers=[provider])

        # --- what the account offers: checked before any cloud resource ----------------------
        zones = aws_zones.resolve(s.zones, s.gpu_zones, s.region, provider)
        aws_zones.check_offered(zones, [p.machine_type for p in s.enabled_gpu_pools], provider)
        aws_quotas.check_job_quota(s, provider)  # the job's nodes fit the account's quota
        gpu_zone = zones.gpu_names[0]
        if reservation is not None:
            reservations.check(reservation, s.gpu_pools.on_demand.machine_type, gpu_zone,
                               s.job.nodes if s.job.pool == PoolChoice.ON_DEMAND else 1, provider)
        eks_versions.check_support_change(s, args.previous, args.release)
        # The checkpoint bucket: one name per stack, account and region, so a bucket `pulumi
        # destroy` kept is found again and imported (infra/aws/storage.py). Asked of S3 here,
        # before any cloud resource, so an answer other than "no such bucket" stops the run.
        lookup = pulumi.InvokeOptions(provider=provider)
        account_id = aws.get_caller_identity(opts=lookup).account_id
        bucket_plan = storage.plan_checkpoint_bucket(
            storage.checkpoint_bucket_name(stack_unique_prefix(), account_id, s.region),
            args.previous, lambda name: storage.bucket_exists(name, lookup),
            # Earlier versions named the bucket after the cut prefix, without the stack's hash.
            lambda: storage.legacy_buckets(name_prefix(), s.region, lookup),
            lambda name: storage.bucket_tags(name, lookup), name_was_cut=prefix_was_cut())
        # The control plane's log group: a fixed name that a destroy keeps or EKS recreates
        # (infra/aws/cluster.py create_log_group); asked here, before any cloud resource.
        # The final backup a destroy kept of checkpoints on FSx, found before any cloud resource.
        keep_final_backup = (s.checkpoints.enabled and s.checkpoints.retain_on_destroy
                             and s.checkpoints.location == CheckpointLocation.SHARED_FILE_SYSTEM)
        restore_from = fsx.backup_to_restore(
            s.shared_file_system, args.previous.live, keep_final_backup, prefix,
            lambda: fsx.final_backups([prefix, name_prefix()], lookup))
        if args.previous.live:
            # The backup the live file system was made from, kept in its final backup's tags
            # on every later run (a live run restores nothing, and an `up` without it would
            # drop the restored-from tag: the next destroy's backup would look unrelated).
            restore_from = args.previous.text(fsx.RESTORED_FROM_OUTPUT) or restore_from
        logs_exist = eks_cluster.log_group_exists(
            eks_cluster.control_plane_log_group_name(cluster_name), lookup)

        plans = [node_groups.gpu_pool_plan(
            key.value, pool, machine(Cloud.AWS, pool.machine_type), spot=key == PoolChoice.SPOT,
            fabric=s.interconnect.fabric, placement=s.interconnect.placement,
            reservation=reservation if key == PoolChoice.ON_DEMAND else None)
            for key, pool in s.gpu_pools_by_key.items()]
        # A Capacity Block group with nodes keeps its version until it is empty (EKS updates it
        # only at 0 nodes: infra/aws/node_groups.py capacity_block_version).
        # Its launch template version is held the same way (capacity_block_template_hold).
        group_versions: dict[str, str] = {}
        held_templates: dict[str, str | None] = {}
        for plan in plans:
            if plan.capacity_type == "CAPACITY_BLOCK" and args.previous.live:
                live = node_groups.live_group(
                    cluster_name, node_groups.gpu_node_group_name(prefix, plan), lookup)
                version, advice = node_groups.capacity_block_version(
                    plan, s.kubernetes.version, live)
                group_versions[plan.key] = version
                held_templates[plan.key] = node_groups.capacity_block_template_hold(plan, live)
                if advice:
                    pulumi.log.warn(advice)
                elif held_templates[plan.key]:
                    pulumi.log.warn(
                        f"GPU pool {plan.pool.name} (Capacity Block) keeps launch template "
                        f"version {held_templates[plan.key]} on this run while it has nodes: "
                        "EKS changes a Capacity Block group only at 0 nodes. A changed template "
                        "reaches its nodes after `pulumi config set --path job.suspend true && "
                        "pulumi up`, the group at 0 nodes, `pulumi up` again, then `pulumi "
                        "config set --path job.suspend false && pulumi up`")

        # --- network, key, control plane ---------------------------------------------------
        vpc_cidr = s.aws.vpc_cidr if s.aws else "10.0.0.0/16"
        net = network.create_network(prefix, vpc_cidr, zones.names, gpu_zone, cluster_name,
                                     s.region, aws_opts)
        key = eks_cluster.create_kms_key(prefix, aws_opts, keep_on_destroy=keep_final_backup)
        private_ids = [net.private_subnets[zone].id for zone in zones.names]
        logs = eks_cluster.create_log_group(cluster_name, s.checkpoints.retain_on_destroy,
                                            logs_exist, aws_opts)
        cluster = eks_cluster.create_cluster(
            cluster_name, s, net.vpc.id, private_ids, key.arn,
            pulumi.ResourceOptions.merge(component_opts, pulumi.ResourceOptions(depends_on=[logs])),
            keep_version=args.release.kept)
        oidc_arn, oidc_issuer = cluster.oidc_provider_arn, cluster.oidc_issuer

        # --- identity ------------------------------------------------------------------------
        node_role = identity.node_role(prefix, aws_opts)
        cni_role = identity.irsa_role(f"{prefix}-vpc-cni", oidc_arn, oidc_issuer,
                                      addons.SYSTEM_NAMESPACE, "aws-node", aws_opts)
        cni_policy = aws.iam.RolePolicyAttachment(
            f"{prefix}-vpc-cni", role=cni_role.name, policy_arn=identity.CNI_POLICY,
            opts=pulumi.ResourceOptions.merge(aws_opts, pulumi.ResourceOptions(parent=cni_role)))

        # --- add-ons nodes need before they can be Ready -------------------------------------
        # The CNI's pods assume its role at start: the role must hold its policy by then.
        # Add-on versions follow the control plane's minor on this run (kept or upgraded to).
        addon_lookup = pulumi.InvokeOutputOptions(provider=provider)
        early_addons = [
            addons.managed_addon(prefix, cluster_name, addon, s.kubernetes.version, addon_lookup,
                                 pulumi.ResourceOptions.merge(
                                     aws_opts,
                                     pulumi.ResourceOptions(depends_on=[cluster, cni_policy])),
                                 role_arn=cni_role.arn if addon == "vpc-cni" else None)
            for addon in addons.BEFORE_NODES
        ]

        # --- spot notice -> drain: queue, rules and the handler's role (infra/aws/interruption.py)
        notices = interruption.create_queue(prefix, aws_opts)
        nth_role, nth_policy = interruption.create_handler_role(
            prefix, notices.queue, oidc_arn, oidc_issuer, aws_opts)
        # What every node's instance, volumes and interfaces carry: the stack's cost tags and the
        # handler's tag (launch templates do not get the provider's default tags).
        instance_tags = {**s.tags, interruption.managed_tag(cluster_name): "true"}

        # --- node groups ---------------------------------------------------------------------
        # Lustre clients: the cluster security group, which every node carries.
        groups = fsx.create_security_groups(prefix, net.vpc.id,
                                                cluster.cluster_security_group_id, aws_opts)
        # Nodes join only with routes out (ECR, S3), the Lustre rules and (GPU) the EFA rules.
        node_opts = pulumi.ResourceOptions.merge(
            component_opts,
            pulumi.ResourceOptions(depends_on=[*early_addons, *net.ready, *groups.rules]))
        system_group = node_groups.system_node_group(
            prefix, cluster, s.system_pool, node_role.arn, private_ids, instance_tags,
            s.kubernetes.version, aws_opts, node_opts)
        gpu_node_sgs = [cluster.cluster_security_group_id, groups.gpu_nodes.id]
        for plan in plans:
            if plan.pool.min_nodes > 0:
                pulumi.log.warn(autoscaler.held_minimum_advice(plan.pool.name,
                                                              plan.pool.min_nodes))
        # A reservation made in a cluster placement group takes launches into that group only.
        reserved_placement = (reservations.placement_group(prefix, reservation, account_id,
                                                           aws_opts)
                              if reservation is not None else None)
        gpu_groups = []
        for plan in plans:
            group_version = group_versions.get(plan.key, s.kubernetes.version)
            group, _placement = node_groups.gpu_node_group(
                prefix, cluster, plan, node_role.arn, net.private_subnets[gpu_zone].id,
                gpu_zone, gpu_node_sgs, instance_tags, group_version, aws_opts, node_opts,
                reservation_placement_group=(reserved_placement if plan.reservation is not None
                                             else None),
                held_template_version=held_templates.get(plan.key))
            gpu_groups.append(group)
            # Scale from zero for GPU + EFA pods (infra/aws/autoscaler.py), and the launch
            # tags of the nodes launched from now on (a tag edit replaces no node).
            node_groups.tag_auto_scaling_group(prefix, cluster_name, plan, group, instance_tags,
                                               aws_opts)
        all_groups = [system_group, *gpu_groups]

        late_addons = [
            addons.managed_addon(prefix, cluster_name, addon, s.kubernetes.version, addon_lookup,
                                 pulumi.ResourceOptions.merge(
                                     aws_opts, pulumi.ResourceOptions(depends_on=all_groups)))
            for addon in addons.AFTER_NODES
        ]

        # --- Kubernetes provider: only usable once nodes and add-ons exist -------------------
        kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json)
        k8s_provider = k8s.Provider(
            f"{prefix}-k8s", kubeconfig=kubeconfig, enable_server_side_apply=True,
            delete_unreachable=True,  # destroy from anywhere: docs/security.md "Destroy"
            opts=pulumi.ResourceOptions(parent=self,
                                        depends_on=[*all_groups, *early_addons, *late_addons]))
        helm_opts = pulumi.ResourceOptions(parent=self, provider=k8s_provider)
        taints = [t for plan in plans for t in plan.pool.taints]
        minor = s.kubernetes.version  # the minor chosen for this run: add-on versions follow it
        fsx_role = identity.irsa_role(f"{prefix}-fsx-csi-controller", oidc_arn, oidc_issuer,
                                      addons.SYSTEM_NAMESPACE, addons.FSX_CSI_CONTROLLER_SA,
                                      aws_opts)
        fsx_policy = aws.iam.RolePolicy(
            f"{prefix}-fsx-csi-controller", role=fsx_role.name,
            policy=addons.fsx_csi_controller_policy(),
            opts=pulumi.ResourceOptions.merge(aws_opts, pulumi.ResourceOptions(parent=fsx_role)))
        charts = [
            addons.helm_release(prefix, addons.chart_for(addons.NVIDIA_DEVICE_PLUGIN, minor),
                                addons.nvidia_device_plugin_values(node_groups.GPU_LABEL, taints),
                                helm_opts),
            addons.helm_release(prefix, addons.chart_for(addons.FSX_CSI_DRIVER, minor),
                                addons.fsx_csi_values(s.region, taints, fsx_role.arn),
                                pulumi.ResourceOptions.merge(
                                    helm_opts, pulumi.ResourceOptions(depends_on=[fsx_policy]))),
        ]
        ca_role, ca_policy = autoscaler.create_role(prefix, cluster_name, s.region, oidc_arn,
                                                    oidc_issuer, aws_opts)
        charts.append(addons.helm_release(
            prefix, autoscaler.CHART,
            autoscaler.values(cluster_name, s.region, minor, ca_role.arn,
                              {node_groups.POOL_LABEL: s.system_pool.name},
                              node_ready_minutes=max(p.pool.machine.node_ready_minutes
                                                     for p in plans)),
            pulumi.ResourceOptions.merge(helm_opts, pulumi.ResourceOptions(depends_on=[ca_policy]))))
        charts.append(interruption.create_handler(
            prefix,
            interruption.handler_values(
                notices.queue.url, s.region, nth_role.arn, cluster_name,
                {node_groups.POOL_LABEL: s.system_pool.name}),
            minor,
            pulumi.ResourceOptions.merge(helm_opts, pulumi.ResourceOptions(
                depends_on=[*notices.ready, nth_policy]))))
        if any(plan.efa for plan in plans):
            charts.append(addons.helm_release(
                prefix, addons.chart_for(addons.EFA_DEVICE_PLUGIN, minor),
                addons.efa_device_plugin_values(node_groups.GPU_LABEL, taints), helm_opts))
            # The EFA devices (RDMA outside the CNI's network policy) only for the job's
            # namespace, as rdma/ib is on Azure (infra/device_admission.py).
            charts += restrict_device(prefix, "efa", EFA_RESOURCE,
                                      "the node's EFA devices, outside network policy",
                                      s.job.namespace, helm_opts)
        # GPU metrics (DCGM) on the GPU nodes, as GKE has them managed. Not among what the job
        # waits for, and not awaited by `pulumi up` either: training does not need its metrics,
        # so an exporter that cannot start (NVML) must not roll back and fail the deploy.
        addons.helm_release(prefix, addons.chart_for(addons.DCGM_EXPORTER, minor),
                            addons.dcgm_exporter_values(node_groups.GPU_LABEL, taints), helm_opts,
                            required=False)

        # --- shared file system and checkpoints ----------------------------------------------
        fs_settings = s.shared_file_system
        lustre, association = fsx.create_lustre(
            prefix, fs_settings, net.private_subnets[gpu_zone].id, groups, key.arn,
            s.dataset.import_uri, aws_opts,
            keep_final_backup=keep_final_backup, restore_from=restore_from)
        bucket = storage.checkpoint_bucket(prefix, bucket_plan, s.checkpoints, s.job.name,
                                          aws_opts)
        job_role = identity.irsa_role(f"{prefix}-job", oidc_arn, oidc_issuer, s.job.namespace,
                                      s.job.service_account, aws_opts)
        job_policy = aws.iam.RolePolicy(
            f"{prefix}-job", role=job_role.name,
            policy=bucket.arn.apply(
                lambda arn: identity.job_bucket_policy(arn, s.dataset.bucket_uris("s3"))),
            opts=pulumi.ResourceOptions.merge(aws_opts, pulumi.ResourceOptions(parent=job_role)))

        preparation = identity.preparation_identity(
            prefix, oidc_arn, oidc_issuer, s.job.namespace, s.job.prepare_service_account,
            s.dataset.prepare_source_uris("s3"), s.region, aws_opts)

        image: pulumi.Input[str] = s.job.image or trainer_image(prefix, key.arn, self, aws_opts)

        job_machine = machine(Cloud.AWS, s.job_pool.machine_type)
        pools = {plan.key: plan.pool for plan in plans}
        self.contract = GpuCluster(
            cloud=Cloud.AWS,
            name=cluster.kubeconfig_json.apply(lambda _: cluster_name),
            kubeconfig=kubeconfig,
            provider=k8s_provider,
            gpu_pools=pools,
            shared_file_system=SharedFileSystem(
                source=CsiVolumeSource(
                    driver=fsx.FSX_CSI_DRIVER, volume_handle=lustre.id,
                    volume_attributes={"dnsname": lustre.dns_name,
                                       "mountname": lustre.mount_name}),
                capacity_gib=fs_settings.capacity_gib,
                mount_path=fs_settings.mount_path,
                mount_options=list(fsx.FSX_MOUNT_OPTIONS),
                file_system_id=lustre.id,
                ready=association or lustre,
            ),
            checkpoints=CheckpointStore(
                uri=pulumi.Output.concat("s3://", bucket.bucket, "/", s.job.name),
                bucket=bucket.bucket,
                service_account_annotations={"eks.amazonaws.com/role-arn": job_role.arn},
                pod_labels={},
                env={"AWS_REGION": s.region},
            ),
            interconnect=efa_interconnect(job_machine, s.interconnect.fabric),
            trainer_image=image,
            ready=[*all_groups, *early_addons, *late_addons, *charts, job_policy],
            pod_annotations={autoscaler.SAFE_TO_EVICT: "false"},
            kubernetes_version=args.release.version,
            exports={storage.ADOPTED_OUTPUT: bucket_plan.adopted,
                     **({fsx.RESTORED_FROM_OUTPUT: restore_from or fs_settings.backup_id}
                        if keep_final_backup and (restore_from or fs_settings.backup_id) else {})},
            preparation=preparation,
        )
        self.register_outputs({
            "clusterName": self.contract.name,
            "kubeconfig": kubeconfig,
            "fileSystemId": lustre.id,
            "fileSystemMountName": lustre.mount_name,
            "checkpointBucket": bucket.bucket,
        })
