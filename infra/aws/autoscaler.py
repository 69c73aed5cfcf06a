"""Cluster Autoscaler: grows a GPU node group from zero when the job's pods are Pending and
shrinks it back when the nodes sit idle.

Why Cluster Autoscaler and not Karpenter: the GPU pools are EKS managed node groups with our
launch templates (EFA interfaces, a cluster placement group per group, capacity reservations),
which Cluster Autoscaler scales through their Auto Scaling groups as they are. Karpenter replaces
node groups with its own NodePools and launches instances itself, so the groups, their
templates and the interruption handling in infra/aws/interruption.py would all be rebuilt.

Alongside the Node Termination Handler (infra/aws/interruption.py) nothing is done twice: the
handler acts on EC2 events (spot notice, maintenance, instance state changes) and leaves ASG
lifecycle hooks to EKS; the autoscaler only changes desired capacity and terminates nodes it
has drained itself. The state-change event of such a termination reaches the handler after the
node is already empty, so its drain finds nothing to evict. The autoscaler runs on the system
group, where the handler never drains for a spot notice.

Sources (kubernetes/autoscaler, tag cluster-autoscaler-1.35.2 and cluster-autoscaler-chart-9.59.0):
- cluster-autoscaler/cloudprovider/aws/README.md: IAM policy, auto-discovery tags (EKS puts
  k8s.io/cluster-autoscaler/enabled and k8s.io/cluster-autoscaler/<cluster> on every managed
  node group's ASG: https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html),
  node-template tags for scale from zero (infra/aws/node_groups.py), the GPU label.
- cluster-autoscaler/charts/cluster-autoscaler/values.yaml: the chart's values.
- cluster-autoscaler/FAQ.md: flags, and `cluster-autoscaler.kubernetes.io/safe-to-evict`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from infra.addon_versions import version_for
from infra.aws import identity
from infra.catalog.cloud import Cloud
from infra.catalog.node_times import SCALE_DOWN_UNNEEDED_MINUTES
from trainer.node_taint import TAINT_KEY as UNHEALTHY_TAINT

# (name, version, repository) as infra/aws/addons.helm_release installs it, into kube-system.
# 9.59.0: appVersion 1.35.0; the image tag is chosen per Kubernetes minor (image_tag).
CHART = ("cluster-autoscaler", "9.59.0", "https://kubernetes.github.io/autoscaler")
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"
IMAGE = "registry.k8s.io/autoscaling/cluster-autoscaler"
ADDON = "cluster-autoscaler"  # its rows in infra/addon_versions.py: one image tag per minor


def image_tag(kubernetes_version: str) -> str:
    """"We recommend using Cluster Autoscaler with the Kubernetes control plane version for which
    it was meant" (cluster-autoscaler/README.md, "Releases"): the newest patch of the cluster's
    minor from the table; past the table, the newest image with a warning (never a KeyError)."""
    return version_for(ADDON, kubernetes_version)


# The pod annotation that keeps a node from being scaled down while the pod runs (FAQ.md,
# "What types of pods can prevent CA from removing a node?"); the training pods carry it.
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def discovery_tag(cluster_name: str) -> str:
    return f"k8s.io/cluster-autoscaler/{cluster_name}"


def autoscaler_policy(cluster_name: str, region: str, account: str) -> str:
    """The README's "Full Cluster Autoscaler Features Policy" with its second block restricted,
    as the README asks, by a tag condition: only ASGs carrying this cluster's discovery tag (the
    ones the autoscaler may discover at all) can be resized or have an instance terminated.
    eks:DescribeNodegroup is limited to this cluster's node groups (resource type nodegroup,
    arn:aws:eks:<region>:<account>:nodegroup/<cluster>/<name>/<uuid>:
    https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoneks.html); the
    Describe actions of Auto Scaling and EC2 take no resource-level restriction."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "DiscoverGroupsAndInstanceTypes", "Effect": "Allow",
             "Action": [
                 "autoscaling:DescribeAutoScalingGroups",
                 "autoscaling:DescribeAutoScalingInstances",
                 "autoscaling:DescribeLaunchConfigurations",
                 "autoscaling:DescribeScalingActivities",
                 "ec2:DescribeImages",
                 "ec2:DescribeInstanceTypes",
                 "ec2:DescribeLaunchTemplateVersions",
                 "ec2:GetInstanceTypesFromInstanceRequirements",
             ],
             "Resource": "*"},
            {"Sid": "ReadThisClustersNodeGroups", "Effect": "Allow",
             "Action": "eks:DescribeNodegroup",
             "Resource": f"arn:aws:eks:{region}:{account}:nodegroup/{cluster_name}/*"},
            {"Sid": "ScaleThisClustersGroupsOnly", "Effect": "Allow",
             "Action": ["autoscaling:SetDesiredCapacity",
                        "autoscaling:TerminateInstanceInAutoScalingGroup"],
             "Resource": "*",
             "Condition": {"Null": {
                 f"autoscaling:ResourceTag/{discovery_tag(cluster_name)}": "false"}}},
        ],
    })


def create_role(prefix: str, cluster_name: str, region: str, oidc_arn: pulumi.Output[str],
                oidc_issuer: pulumi.Input[str], opts: pulumi.ResourceOptions
                ) -> tuple[aws.iam.Role, aws.iam.RolePolicy]:
    """An IRSA role only the autoscaler's service account can assume."""
    role = identity.irsa_role(f"{prefix}-cluster-autoscaler", oidc_arn, oidc_issuer, NAMESPACE,
                              SERVICE_ACCOUNT, opts)
    # The account is the OIDC provider's: arn:aws:iam::<account>:oidc-provider/...
    policy = aws.iam.RolePolicy(
        f"{prefix}-cluster-autoscaler", role=role.name,
        policy=oidc_arn.apply(
            lambda arn: autoscaler_policy(cluster_name, region, arn.split(":")[4])),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=role)))
    return role, policy


# After a failed scale-up (no spot or on-demand capacity: InsufficientInstanceCapacity) the
# autoscaler leaves the group alone for a backoff that starts at
# --initial-node-group-backoff-duration (default 5m) and doubles up to
# --max-node-group-backoff-duration (default 30m), reset after --node-group-backoff-reset-timeout
# (3h) without failure (cluster-autoscaler/config/flags/flags.go; utils/backoff/
# exponential_backoff.go). With the defaults, GPU capacity that returns after an hour-long gap
# waits up to 30 minutes more; here a retry comes within BACKOFF_MAX_MINUTES. A retry is one
# SetDesiredCapacity call, and a refused launch costs nothing.
def held_minimum_advice(pool_name: str, min_nodes: int) -> str:
    """A node the health gate taints in a group held at its minimum is never removed by the
    autoscaler (it scales down to minSize, not below): say how to replace it."""
    return (f"gpuPools pool {pool_name} keeps minNodes {min_nodes}: a node the health gate "
            f"taints ({UNHEALTHY_TAINT}) there is not replaced by the autoscaler. Replace it "
            "with `aws autoscaling terminate-instance-in-auto-scaling-group --instance-id <id> "
            "--no-should-decrement-desired-capacity` (the id: `kubectl get node <node> -o "
            "jsonpath='{.spec.providerID}'`), or set minNodes: 0")


BACKOFF_INITIAL_MINUTES = 1
BACKOFF_MAX_MINUTES = 5


# `--max-node-startup-time` (registered -> Ready; 15 minutes hard-coded before) is a flag from
# the 1.35 images on (cluster-autoscaler/config/flags/flags.go); an older binary refuses an
# unknown flag and would not start.
STARTUP_TIME_FLAG_FROM = (1, 35)


def startup_time_flag(tag: str, minutes: int) -> dict[str, str]:
    """The flag when the image takes it: a GPU node still advertising no GPUs past the startup
    time stops counting as upcoming, and the autoscaler may add a second node for the gang."""
    major, minor = (int(part) for part in tag.lstrip("v").split(".")[:2])
    return ({"max-node-startup-time": f"{minutes}m"}
            if (major, minor) >= STARTUP_TIME_FLAG_FROM else {})


def values(cluster_name: str, region: str, kubernetes_version: str,
           role_arn: pulumi.Input[str], node_selector: Mapping[str, str],
           node_ready_minutes: int = 30) -> dict:
    """Chart values. Flags (FAQ.md, "What are the parameters to CA?"):
    - expander least-waste: the job's pods select one pool by label, so only its group fits
      them; among groups that do fit (system pods), the one left with the least idle CPU.
    - balance-similar-node-groups off: each GPU group is one zone and one placement group on
      purpose, and the groups differ by capacity type; there is nothing to balance.
    - skip-nodes-with-local-storage left at its default (true): the only pods with emptyDir on a
      GPU node are training pods, protected anyway by SAFE_TO_EVICT while they run and no
      obstacle once Completed; daemon set pods (device plugins, CSI node) never block removal.
    - scale-down-unneeded-time 10m (the default, stated; infra/catalog/node_times.py SCALE_DOWN_UNNEEDED_MINUTES,
      which the run estimate counts too): an idle GPU node goes after 10 minutes.
    - status-taint (the health gate's taint, trainer/node_taint.py):
      the autoscaler builds an empty group's template from its last real node, keeps custom
      taints in it and caches it (processors/nodeinfosprovider/mixed_nodeinfos_processor.go;
      utils/taints/taints.go SanitizeTaints drops only startup and status taints). A 2-node
      gang whose nodes were both tainted, or a 1-node job with a bad GPU, then never got nodes
      again: every template "repelled" the job's pods. A status taint is left out of templates
      and still counts the node as ready (FAQ.md "How can I ignore a taint?" and release
      1.29.0, #6132/#6218, which deprecated --ignore-taint for --status-taint/--startup-taint;
      a startup taint would count the node unready and remove it after scale-down-unready-time
      even with training pods' data on it). A tainted, empty node is then unneeded and goes
      after scale-down-unneeded-time, down to the group's minimum (0 in the shipped stack).
    - max-node-provision-time and scale-down-unready-time = the catalog's node-ready budget
      (infra/catalog/machines.py node_ready_minutes, 30 minutes for p4d/p5): a GPU node whose device
      plugins have not advertised its GPUs yet counts as unready (the GPU label, infra/aws/
      node_groups.py ACCELERATOR_LABEL: core/utils/utils.go FilterOutNodesWithUnreadyResources),
      and the defaults (15 and 20 minutes) would time its scale-up out and back the group off,
      or remove it as unready, before the budget is spent.
    - initial/max node-group backoff 1m/5m (BACKOFF_*, above).
    - v 1 instead of the chart's 4 (values.yaml `extraArgs.v: 4`, chart 9.59.0): at 4 the log
      is many times longer (at 1 it is still not quiet: per-node startup lines every 10 s), and
      the line `python -m workloads.why`
      needs, "ASG %s scaling failed with description", is a klog.Warningf
      (cloudprovider/aws/auto_scaling_groups.go), written whatever -v is, as are the scale-up
      failures' "Failed adding %v nodes" lines (clusterstate.go, klog.V(1)).
    """
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name},
        "image": {"repository": IMAGE, "tag": image_tag(kubernetes_version)},
        "rbac": {"serviceAccount": {
            "create": True, "name": SERVICE_ACCOUNT,
            "annotations": {"eks.amazonaws.com/role-arn": role_arn}}},
        "extraArgs": {
            "expander": "least-waste",
            "balance-similar-node-groups": False,
            "scale-down-unneeded-time": f"{SCALE_DOWN_UNNEEDED_MINUTES[Cloud.AWS]}m",
            "status-taint": UNHEALTHY_TAINT,
            "max-node-provision-time": f"{node_ready_minutes}m",
            "scale-down-unready-time": f"{node_ready_minutes}m",
            **startup_time_flag(image_tag(kubernetes_version), node_ready_minutes),
            "initial-node-group-backoff-duration": f"{BACKOFF_INITIAL_MINUTES}m",
            "max-node-group-backoff-duration": f"{BACKOFF_MAX_MINUTES}m",
            "v": 1,  # Helm merges this over the chart's extraArgs (logtostderr, stderrthreshold stay)
        },
        # On the system pool: never on a node it might remove, and never on a tainted GPU node.
        "nodeSelector": dict(node_selector),
    }
