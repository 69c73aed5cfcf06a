"""Spot notice -> drain: the AWS Node Termination Handler (NTH) in queue mode.

Why NTH in queue mode, and not what EKS or the AMI already do
(https://github.com/aws/aws-node-termination-handler, README, tag v1.25.6):
- EKS managed node groups drain a Spot node on the 2-minute notice only "on a best-effort basis"
  and only for a node that first got a rebalance recommendation
  (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html, "Managed node
  group capacity types"); the notice itself is not a documented trigger with a known delay.
- Kubernetes graceful node shutdown starts only when the OS shuts down, at the end of the notice,
  and the EKS AL2023 AMI turns it on only for Kubernetes 1.34+ (awslabs/amazon-eks-ami,
  nodeadm/internal/kubelet/config.go `withVersionToggles`, PR #2390).
- Karpenter's interruption queue would mean replacing the managed node groups: out of scope.
NTH reads EC2's own events from an SQS queue through EventBridge and cordons and drains the node
through the Kubernetes eviction API as soon as it reads the notice, so the training pod gets
SIGTERM with nearly all of the 2 minutes left.

Which events reach the queue (NTH queue mode cannot filter events itself: "modify your Amazon
EventBridge rules to not send certain types of events", README "Queue Processor"):
- Spot interruption warning: the 2-minute notice this module exists for.
- AWS Health scheduled change for EC2: planned maintenance, on-demand nodes included.
- Instance state change to stopping/stopped/shutting-down/terminated: terminations outside the
  ASG (console, API). Only the states NTH acts on (pkg/monitor/sqsevent/ec2-state-change-event.go
  `instanceStatesToDrain`), so the queue does not fill with pending/running events.
Left out on purpose:
- Rebalance recommendation: EKS managed node groups already act on it (capacity rebalancing:
  launch a replacement, then cordon and drain). NTH would cordon and drain at once on every
  recommendation, also on ones no interruption follows, leaving a GPU node cordoned
  (aws/aws-node-termination-handler issue #458).
- ASG terminate lifecycle actions: the managed node groups' ASG hooks belong to EKS, which drains
  on them itself; NTH would complete them (`autoscaling:CompleteLifecycleAction`) and race EKS.
  Leaving them out also keeps every autoscaling permission off the handler's role.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.addon_versions import version_for
from infra.aws import identity
from infra.naming import stack_unique_prefix

# https://github.com/aws/aws-node-termination-handler/blob/v1.25.6/config/helm/aws-node-termination-handler/Chart.yaml
# (chart 0.27.6 = app v1.25.6, the newest release); the chart is published only as an OCI
# artifact (README "Helm": oci://public.ecr.aws/aws-ec2/helm/aws-node-termination-handler).
NTH_CHART = "oci://public.ecr.aws/aws-ec2/helm/aws-node-termination-handler"
# Its version: infra/addon_versions.py, row "aws-node-termination-handler".
NTH_RELEASE = "aws-node-termination-handler"
NTH_NAMESPACE = "kube-system"
NTH_SERVICE_ACCOUNT = "aws-node-termination-handler"
# NTH acts only on instances carrying this tag key (chart value `managedTag`, checked with
# `checkTagBeforeDraining`). One key per cluster, so two stacks in one account, each with its own
# queue and handler, never drain each other's nodes.
MANAGED_TAG_PREFIX = "aws-node-termination-handler/"
# Queue settings from NTH's own CloudFormation template (docs/cfn-template.yaml, v1.25.6):
# events older than 5 minutes are past any notice; SSE-SQS encrypts at rest and, unlike a
# customer-managed KMS key, needs no key policy for EventBridge (README "Create an SQS Queue").
QUEUE_RETENTION_SECONDS = 300

# EventBridge event patterns, each from the NTH README step "Create Amazon EventBridge Rules"
# (v1.25.6) and the EC2 event reference
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html).
EVENT_PATTERNS: Mapping[str, dict] = {
    "spot-interruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Spot Instance Interruption Warning"],
    },
    "scheduled-change": {
        "source": ["aws.health"],
        "detail-type": ["AWS Health Event"],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    },
    "state-change": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Instance State-change Notification"],
        "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]},
    },
}


@dataclass(frozen=True)
class InterruptionQueue:
    queue: aws.sqs.Queue
    rules: dict[str, aws.cloudwatch.EventRule]  # by EVENT_PATTERNS key
    ready: list[pulumi.Resource]  # policy and targets: the queue receives events after these


def managed_tag(cluster_name: str) -> str:
    """The instance tag key this cluster's handler acts on."""
    return f"{MANAGED_TAG_PREFIX}{cluster_name}"


def queue_policy(queue_arn: str, rule_arns: Sequence[str]) -> str:
    """Only EventBridge may send, and only from this stack's rules."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "EventBridgeRulesOnly",
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": sorted(rule_arns)}},
        }],
    })


def handler_policy(queue_arn: str) -> str:
    """What NTH's queue processor calls, nothing more (v1.25.6 pkg/monitor/sqsevent):
    sqs:ReceiveMessage and sqs:DeleteMessage on this queue; ec2:DescribeInstances to map an
    instance id to its node name and managed tag. DescribeInstances has no resource-level
    permissions (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html),
    so it is the one action on "*"."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ReadInterruptionQueue", "Effect": "Allow",
             "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage"], "Resource": queue_arn},
            {"Sid": "FindNodeOfInstance", "Effect": "Allow",
             "Action": "ec2:DescribeInstances", "Resource": "*"},
        ],
    })


def create_queue(prefix: str, opts: pulumi.ResourceOptions) -> InterruptionQueue:
    """The queue, one EventBridge rule per event pattern, their targets and the queue policy.

    Their names carry a hash of project and stack when the stack's name prefix was cut
    (infra/naming.py stack_unique_prefix): CreateQueue and PutRule return or overwrite an
    existing queue or rule of the same name, so production-a and production-b would share
    them, and destroying one stack would delete the other's interruption handling."""
    unique = stack_unique_prefix()
    queue = aws.sqs.Queue(
        f"{prefix}-nth", name=f"{unique}-nth", message_retention_seconds=QUEUE_RETENTION_SECONDS,
        sqs_managed_sse_enabled=True, tags={"Name": f"{prefix}-nth"}, opts=opts)
    child = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=queue))
    rules = {
        key: aws.cloudwatch.EventRule(
            f"{prefix}-nth-{key}", name=f"{unique}-nth-{key}",
            description=f"{key} events for the node termination handler",
            event_pattern=json.dumps(pattern), opts=child)
        for key, pattern in EVENT_PATTERNS.items()
    }
    policy = aws.sqs.QueuePolicy(
        f"{prefix}-nth", queue_url=queue.url,
        policy=pulumi.Output.all(queue.arn, *[rule.arn for rule in rules.values()]).apply(
            lambda arns: queue_policy(arns[0], arns[1:])),
        opts=child)
    targets = [
        aws.cloudwatch.EventTarget(
            f"{prefix}-nth-{key}", rule=rule.name, target_id="nth-queue", arn=queue.arn,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[policy])))
        for key, rule in rules.items()
    ]
    return InterruptionQueue(queue=queue, rules=rules, ready=[policy, *targets])


def create_handler_role(prefix: str, queue: aws.sqs.Queue, oidc_arn: pulumi.Input[str],
                        oidc_issuer: pulumi.Input[str], opts: pulumi.ResourceOptions
                        ) -> tuple[aws.iam.Role, aws.iam.RolePolicy]:
    """An IRSA role only the handler's service account can assume."""
    role = identity.irsa_role(f"{prefix}-nth", oidc_arn, oidc_issuer, NTH_NAMESPACE,
                              NTH_SERVICE_ACCOUNT, opts)
    policy = aws.iam.RolePolicy(
        f"{prefix}-nth", role=role.name, policy=queue.arn.apply(handler_policy),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=role)))
    return role, policy


def handler_values(queue_url: pulumi.Input[str], region: str, role_arn: pulumi.Input[str],
                   cluster_name: str, node_selector: Mapping[str, str]) -> dict:
    """Queue mode, drain with each pod's own grace period, run on the system pool (never on a
    node it may have to drain). Keys: the chart's values.yaml and README (v1.25.6)."""
    return {
        "enableSqsTerminationDraining": True,
        "queueURL": queue_url,
        "awsRegion": region,
        "checkTagBeforeDraining": True,
        "managedTag": managed_tag(cluster_name),
        # -1: each pod's own terminationGracePeriodSeconds, which the job derives from the notice.
        "podTerminationGracePeriod": -1,
        # Taint before draining so nothing new lands on the node during the notice.
        "taintNode": True,
        "serviceAccount": {"create": True, "name": NTH_SERVICE_ACCOUNT,
                           "annotations": {"eks.amazonaws.com/role-arn": role_arn}},
        "nodeSelector": dict(node_selector),
    }


def create_handler(prefix: str, values: dict, kubernetes_version: str,
                   opts: pulumi.ResourceOptions) -> k8s.helm.v3.Release:
    """The chart at the version infra/addon_versions.py gives the cluster's minor."""
    return k8s.helm.v3.Release(
        f"{prefix}-{NTH_RELEASE}",
        k8s.helm.v3.ReleaseArgs(
            name=NTH_RELEASE, chart=NTH_CHART,
            version=version_for(NTH_RELEASE, kubernetes_version),
            namespace=NTH_NAMESPACE, values=values, atomic=True, cleanup_on_fail=True),
        opts=opts)
