"""IAM: the node role, and IRSA roles that trust exactly one Kubernetes service account.

Pods get AWS access only through IRSA (web identity on the cluster's OIDC provider); the node
role carries what kubelet itself needs and nothing a training pod could use to reach data.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from infra.contract import PreparationIdentity
from infra.settings.model.dataset import uri_parts

# AWS managed policies (arn:aws partition; GovCloud/China would need another partition).
WORKER_NODE_POLICY = "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"
# Pull only: GetAuthorizationToken, BatchGetImage, GetDownloadUrlForLayer (and
# BatchImportUpstreamImage for pull-through caches). ReadOnly adds listing and describing every
# repository of the account (DescribeRepositories, ListImages, GetRepositoryPolicy, ...), which
# nothing on a node needs (https://docs.aws.amazon.com/AmazonECR/latest/userguide/security-iam-awsmanpol.html,
# AmazonEC2ContainerRegistryPullOnly; EKS names it for node roles:
# https://docs.aws.amazon.com/eks/latest/userguide/create-node-role.html).
ECR_PULL_ONLY_POLICY = "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly"
CNI_POLICY = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"


def service_account_subject(namespace: str, service_account: str) -> str:
    return f"system:serviceaccount:{namespace}:{service_account}"


def irsa_trust_policy(oidc_provider_arn: str, oidc_issuer: str, subject: str) -> str:
    """Trust only tokens for one service account, minted for STS (IRSA)."""
    issuer = oidc_issuer.removeprefix("https://")
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Federated": oidc_provider_arn},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringEquals": {
                f"{issuer}:sub": subject,
                f"{issuer}:aud": "sts.amazonaws.com",
            }},
        }],
    })


def irsa_role(name: str, oidc_provider_arn: pulumi.Input[str], oidc_issuer: pulumi.Input[str],
              namespace: str, service_account: str,
              opts: pulumi.ResourceOptions) -> aws.iam.Role:
    """A role only `namespace/service_account` can assume."""
    subject = service_account_subject(namespace, service_account)
    policy = pulumi.Output.all(oidc_provider_arn, oidc_issuer).apply(
        lambda values: irsa_trust_policy(values[0], values[1], subject))
    return aws.iam.Role(name, assume_role_policy=policy,
                        description=f"IRSA role for {subject}", opts=opts)


def node_role(prefix: str, opts: pulumi.ResourceOptions) -> aws.iam.Role:
    """EC2 role for every node: join the cluster and pull images (ECR pull-only)."""
    role = aws.iam.Role(
        f"{prefix}-node",
        assume_role_policy=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                           "Action": "sts:AssumeRole"}],
        }),
        description="EKS managed node groups",
        opts=opts,
    )
    child = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=role))
    for short, arn in (("worker", WORKER_NODE_POLICY), ("ecr-pull", ECR_PULL_ONLY_POLICY)):
        aws.iam.RolePolicyAttachment(f"{prefix}-node-{short}", role=role.name, policy_arn=arn,
                                     opts=child)
    return role


def job_bucket_policy(bucket_arn: str, dataset_uris: Sequence[str]) -> str:
    """Read/write the checkpoint bucket; read each dataset prefix the trainer needs
    (dataset.importUri: Dataset.bucket_uris). The preparation's source is not here: its own
    role reads it (prepare_read_policy)."""
    statements: list[dict] = [
        {"Sid": "ListCheckpoints", "Effect": "Allow",
         "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": bucket_arn},
        {"Sid": "ReadWriteCheckpoints", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject",
                    "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
         "Resource": f"{bucket_arn}/*"},
    ]
    return json.dumps({"Version": "2012-10-17",
                       "Statement": statements + dataset_read_statements(dataset_uris)})


def prepare_read_policy(source_uris: Sequence[str]) -> str:
    """The dataset preparation's role: list and read its s3:// source prefix, nothing else (it
    writes the shared file system, not a bucket)."""
    return json.dumps({"Version": "2012-10-17",
                       "Statement": dataset_read_statements(source_uris)})


def dataset_read_statements(dataset_uris: Sequence[str]) -> list[dict]:
    """List and read each `s3://bucket/prefix`, the listing narrowed to the prefix."""
    statements: list[dict] = []
    for n, dataset_uri in enumerate(dataset_uris):
        bucket, key_prefix = uri_parts(dataset_uri)
        objects = f"arn:aws:s3:::{bucket}/{key_prefix}/*" if key_prefix else f"arn:aws:s3:::{bucket}/*"
        suffix = str(n) if n else ""  # Sids are unique within a policy
        listing: dict = {"Sid": f"ListDataset{suffix}", "Effect": "Allow", "Action": "s3:ListBucket",
                         "Resource": f"arn:aws:s3:::{bucket}"}
        if key_prefix:
            listing["Condition"] = {"StringLike": {"s3:prefix": [f"{key_prefix}/*", key_prefix]}}
        statements += [listing, {"Sid": f"ReadDataset{suffix}", "Effect": "Allow",
                                 "Action": "s3:GetObject", "Resource": objects}]
    return statements


def preparation_identity(prefix: str, oidc_provider_arn: pulumi.Input[str],
                         oidc_issuer: pulumi.Input[str], namespace: str, service_account: str,
                         source_uris: Sequence[str], region: str,
                         opts: pulumi.ResourceOptions) -> PreparationIdentity:
    """An IRSA role only the preparation's service account can assume, reading its s3://
    source; none at all when the source is on the shared file system."""
    if not source_uris:
        return PreparationIdentity()
    role = irsa_role(f"{prefix}-prepare", oidc_provider_arn, oidc_issuer, namespace,
                     service_account, opts)
    policy = aws.iam.RolePolicy(
        f"{prefix}-prepare", role=role.name, policy=prepare_read_policy(source_uris),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=role)))
    return PreparationIdentity(
        service_account_annotations={"eks.amazonaws.com/role-arn": role.arn},
        env={"AWS_REGION": region}, ready=[policy])
