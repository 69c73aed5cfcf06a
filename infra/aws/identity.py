"""IAM: the node role, and IRSA roles that trust exactly one Kubernetes service account.

Pods get AWS access only through IRSA (web identity on the cluster's OIDC provider); the node
role carries what kubelet itself needs and nothing a training pod could use to reach data.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from infra.settings.model import uri_parts

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
    """Read/write the checkpoint bucket; read each dataset prefix (dataset.importUri, the
    preparation's s3:// source: Dataset.bucket_uris)."""
    statements: list[dict] = [
        {"Sid": "ListCheckpoints", "Effect": "Allow",
         "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": bucket_arn},
        {"Sid": "ReadWriteCheckpoints", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject",
                    "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
         "Resource": f"{bucket_arn}/*"},
    ]
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
    return json.dumps({"Version": "2012-10-17", "Statement": statements})
