"""The EKS control plane (pulumi-eks): private endpoint, public only from configured CIDRs,
access entries (no aws-auth ConfigMap), OIDC for IRSA, KMS-encrypted secrets, logs on."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from infra.settings.model.stack_file import Settings

CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
# EKS writes control-plane logs to /aws/eks/<cluster>/cluster and creates that group with no
# retention (kept, and billed, forever) unless it already exists
# (https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html).
LOG_RETENTION_DAYS = 90
def control_plane_log_group_name(cluster_name: str) -> str:
    return f"/aws/eks/{cluster_name}/cluster"


class LogGroupCheckError(pulumi.RunError):
    """CloudWatch Logs answered the existence check with something other than "not found"."""


def log_group_exists(name: str, opts: pulumi.InvokeOptions) -> bool:
    """DescribeLogGroups by name prefix (the provider's plural data source): an absent group
    is an empty list, never an error. The singular data source answers an absent group with
    the error "reading CloudWatch Logs Log Group (<name>): empty result" (terraform-provider-aws
    internal/service/logs group.go findLogGroupByName -> tfresource.NewEmptyResultError), text a
    program can only guess at. Any error here (AccessDenied, throttling) stops the run before
    any cloud resource, as `create` of an existing group would fail later with
    ResourceAlreadyExistsException after the network is paid for."""
    try:
        found = aws.cloudwatch.get_log_groups(log_group_name_prefix=name, opts=opts)
    except Exception as error:  # noqa: BLE001 (the provider reports every failure as an error)
        raise LogGroupCheckError(
            f"could not tell whether the log group {name} exists ({error}). Nothing was "
            "created. The deployer needs logs:DescribeLogGroups (infra/aws/deployer-policy.json)"
        ) from error
    return name in (found.log_group_names or [])


def create_log_group(cluster_name: str, retain: bool, exists: bool,
                     opts: pulumi.ResourceOptions) -> aws.cloudwatch.LogGroup:
    """The control plane's log group with a retention; the cluster waits for it, or EKS would
    create the group first and this one would fail with "already exists".

    The name is fixed by EKS, so a group left by an earlier deployment of this stack is
    adopted (imported by its name, the log group's id), never created again:
    - `retain` (checkpoints.retainOnDestroy): `pulumi destroy` keeps the group, so the audit
      log of who did what to the cluster lives as long as its checkpoints (until
      LOG_RETENTION_DAYS expire each event);
    - without it, the group is deleted, but EKS's service-linked role has been seen writing
      the last logs after the cluster is gone and creating the group again
      (terraform-aws-modules/terraform-aws-eks#2486, #2763): the next `up` then failed with
      ResourceAlreadyExistsException before EKS existed.
    Pulumi CLI 3.174 or newer turns an import whose declared inputs differ (a group EKS
    recreated has no retention) into import-then-update (pulumi/pulumi#19339)."""
    name = control_plane_log_group_name(cluster_name)
    return aws.cloudwatch.LogGroup(
        f"{cluster_name}-control-plane", name=name,
        retention_in_days=LOG_RETENTION_DAYS,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            retain_on_delete=retain, import_=name if exists else None)))


def create_kms_key(prefix: str, opts: pulumi.ResourceOptions,
                   keep_on_destroy: bool = False) -> aws.kms.Key:
    """One customer-managed key for Kubernetes secrets, FSx, S3 and ECR of this stack.

    `keep_on_destroy` (an FSx final backup is kept): the backup is encrypted with the file
    system's key (FSx Backup.KmsKeyId), and a key scheduled for deletion cannot decrypt it, so
    `pulumi destroy` keeps the key (about USD 1 a month) and the next `up` restores from the
    backup with it. Its alias goes, so the next `up` can create `alias/<prefix>` again."""
    key = aws.kms.Key(f"{prefix}-key", description=f"{prefix}: EKS secrets, FSx, S3, ECR",
                      enable_key_rotation=True, deletion_window_in_days=30,
                      opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                          retain_on_delete=keep_on_destroy)))
    aws.kms.Alias(f"{prefix}-key", name=f"alias/{prefix}", target_key_id=key.key_id,
                  opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=key)))
    return key


def support_type(settings: Settings) -> str:
    """STANDARD unless extended support was accepted (kubernetes.extendedSupport): EKS then
    upgrades the cluster when standard support ends instead of billing extended support
    (https://docs.aws.amazon.com/eks/latest/userguide/disable-extended-support.html)."""
    return "EXTENDED" if settings.kubernetes.extended_support else "STANDARD"


# The control plane pulumi-eks creates inside its component (nodejs/eks/cluster/cluster.ts,
# `new aws.eks.Cluster(`${name}-eksCluster`, ...)`).
EKS_CLUSTER_TYPE = "aws:eks/cluster:Cluster"


def keep_live_version(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """Ignore changes to the control plane's `version` (a transform on the pulumi-eks component).

    Used while the release is kept: when EKS upgraded the cluster itself at the end of standard
    support, Pulumi's state still holds the old version, and passing the version the cluster
    already runs would make the provider call UpdateClusterVersion to it, which EKS refuses
    ("Unsupported Kubernetes minor version update from 1.34 to 1.34"). `transforms` (not
    `transformations`) reach the children of a packaged component such as pulumi-eks
    (https://www.pulumi.com/docs/iac/concepts/options/transforms/)."""
    if args.type_ != EKS_CLUSTER_TYPE:
        return None
    return pulumi.ResourceTransformResult(
        props=args.props,  # merge appends to the child's own ignore_changes
        opts=pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(
            ignore_changes=["version"])))


def create_cluster(cluster_name: str, settings: Settings, vpc_id: pulumi.Input[str],
                   private_subnet_ids: list[pulumi.Input[str]], key_arn: pulumi.Input[str],
                   opts: pulumi.ResourceOptions, keep_version: bool = False) -> eks.Cluster:
    """The control plane only: node groups and add-ons are created (and owned) by us.
    `keep_version`: the release is kept (no upgrade asked), so the control plane's version is
    left as EKS has it (`keep_live_version`); an upgrade passes the new minor through."""
    if keep_version:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            transforms=[keep_live_version]))
    return eks.Cluster(
        cluster_name,
        eks.ClusterArgs(
            name=cluster_name,
            version=settings.kubernetes.version,
            vpc_id=vpc_id,
            private_subnet_ids=private_subnet_ids,
            node_associate_public_ip_address=False,
            skip_default_node_group=True,
            # Managed node groups then use the EKS-created cluster security group, which is
            # also what `cluster_security_group_id` returns.
            skip_default_security_groups=True,
            authentication_mode=eks.AuthenticationMode.API,
            create_oidc_provider=True,
            endpoint_private_access=True,
            endpoint_public_access=True,
            public_access_cidrs=list(settings.kubernetes.api_access_cidrs),
            encryption_config_key_arn=key_arn,
            enabled_cluster_log_types=CONTROL_PLANE_LOGS,
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=support_type(settings)),
            # We install vpc-cni, kube-proxy and CoreDNS ourselves as EKS managed add-ons.
            bootstrap_self_managed_addons=False,
            use_default_vpc_cni=True,
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(enabled=False),
            tags={"Name": cluster_name},
        ),
        opts=opts,
    )
