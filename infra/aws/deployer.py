"""The deployer's IAM policy: every AWS action `pulumi up` and `pulumi destroy` of this program
call, in one table keyed by what asks for them (a resource type the program registers, a
packaged component, or a lookup), written to infra/aws/deployer-policy.json.

tests/test_aws.py runs the whole program under mocks and checks that every AWS resource type
and lookup it registers has its row here and that the shipped JSON is this table's policy, so a
new resource without its permission fails the suite. Actions are the ones the Pulumi AWS
provider (terraform-provider-aws) calls to create, read, update and delete each type
(https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html);
the `eks:index:*` rows cover what pulumi-eks' components create inside (the control plane, its
role and OIDC provider, access entries; the aws.eks.NodeGroup of a managed node group).

Regenerate after a change: `python -m infra.aws.deployer --write`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

POLICY_FILE = Path(__file__).with_name("deployer-policy.json")

_TAGS_EC2 = ("ec2:CreateTags", "ec2:DeleteTags")
_ROLE = ("iam:CreateRole", "iam:DeleteRole", "iam:GetRole", "iam:UpdateRole",
         "iam:UpdateAssumeRolePolicy", "iam:TagRole", "iam:UntagRole", "iam:ListRolePolicies",
         "iam:ListAttachedRolePolicies", "iam:ListInstanceProfilesForRole")
_SG_RULE = ("ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress",
            "ec2:AuthorizeSecurityGroupEgress", "ec2:RevokeSecurityGroupEgress",
            "ec2:DescribeSecurityGroupRules", "ec2:ModifySecurityGroupRules", *_TAGS_EC2)

# Resource types (and packaged components) -> the actions their lifecycle calls.
RESOURCE_ACTIONS: dict[str, tuple[str, ...]] = {
    "aws:autoscaling/tag:Tag": (
        "autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags", "autoscaling:DescribeTags"),
    "aws:cloudwatch/eventRule:EventRule": (
        "events:PutRule", "events:DeleteRule", "events:DescribeRule", "events:ListTargetsByRule",
        "events:ListTagsForResource", "events:TagResource", "events:UntagResource"),
    "aws:cloudwatch/eventTarget:EventTarget": (
        "events:PutTargets", "events:RemoveTargets", "events:ListTargetsByRule"),
    "aws:cloudwatch/logGroup:LogGroup": (
        "logs:CreateLogGroup", "logs:DeleteLogGroup", "logs:DescribeLogGroups",
        "logs:PutRetentionPolicy", "logs:DeleteRetentionPolicy", "logs:ListTagsForResource",
        "logs:TagResource", "logs:UntagResource", "logs:ListTagsLogGroup", "logs:TagLogGroup"),
    "aws:ec2/eip:Eip": (
        "ec2:AllocateAddress", "ec2:ReleaseAddress", "ec2:DescribeAddresses",
        "ec2:DescribeAddressesAttribute", "ec2:DisassociateAddress", *_TAGS_EC2),
    "aws:ec2/internetGateway:InternetGateway": (
        "ec2:CreateInternetGateway", "ec2:DeleteInternetGateway", "ec2:AttachInternetGateway",
        "ec2:DetachInternetGateway", "ec2:DescribeInternetGateways", *_TAGS_EC2),
    "aws:ec2/launchTemplate:LaunchTemplate": (
        "ec2:CreateLaunchTemplate", "ec2:CreateLaunchTemplateVersion", "ec2:ModifyLaunchTemplate",
        "ec2:DeleteLaunchTemplate", "ec2:DescribeLaunchTemplates",
        "ec2:DescribeLaunchTemplateVersions", *_TAGS_EC2),
    "aws:ec2/natGateway:NatGateway": (
        "ec2:CreateNatGateway", "ec2:DeleteNatGateway", "ec2:DescribeNatGateways", *_TAGS_EC2),
    "aws:ec2/placementGroup:PlacementGroup": (
        "ec2:CreatePlacementGroup", "ec2:DeletePlacementGroup", "ec2:DescribePlacementGroups",
        *_TAGS_EC2),
    "aws:ec2/routeTable:RouteTable": (
        "ec2:CreateRouteTable", "ec2:DeleteRouteTable", "ec2:DescribeRouteTables",
        "ec2:CreateRoute", "ec2:DeleteRoute", "ec2:ReplaceRoute", *_TAGS_EC2),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": (
        "ec2:AssociateRouteTable", "ec2:DisassociateRouteTable", "ec2:DescribeRouteTables"),
    "aws:ec2/securityGroup:SecurityGroup": (
        "ec2:CreateSecurityGroup", "ec2:DeleteSecurityGroup", "ec2:DescribeSecurityGroups",
        "ec2:RevokeSecurityGroupEgress", "ec2:DescribeNetworkInterfaces", *_TAGS_EC2),
    "aws:ec2/subnet:Subnet": (
        "ec2:CreateSubnet", "ec2:DeleteSubnet", "ec2:DescribeSubnets",
        "ec2:ModifySubnetAttribute", *_TAGS_EC2),
    "aws:ec2/vpc:Vpc": (
        "ec2:CreateVpc", "ec2:DeleteVpc", "ec2:DescribeVpcs", "ec2:DescribeVpcAttribute",
        "ec2:ModifyVpcAttribute", "ec2:DescribeNetworkAcls", "ec2:DescribeRouteTables",
        "ec2:DescribeSecurityGroups", *_TAGS_EC2),
    "aws:ec2/vpcEndpoint:VpcEndpoint": (
        "ec2:CreateVpcEndpoint", "ec2:DeleteVpcEndpoints", "ec2:DescribeVpcEndpoints",
        "ec2:ModifyVpcEndpoint", "ec2:DescribePrefixLists", *_TAGS_EC2),
    "aws:ecr/repository:Repository": (
        "ecr:CreateRepository", "ecr:DeleteRepository", "ecr:DescribeRepositories",
        "ecr:ListTagsForResource", "ecr:TagResource", "ecr:UntagResource",
        "ecr:PutImageScanningConfiguration", "ecr:PutImageTagMutability", "ecr:ListImages",
        "ecr:BatchDeleteImage", "kms:CreateGrant", "kms:RetireGrant", "kms:DescribeKey"),
    "aws:eks/addon:Addon": (
        "eks:CreateAddon", "eks:DeleteAddon", "eks:DescribeAddon", "eks:UpdateAddon",
        "eks:DescribeUpdate", "eks:TagResource", "eks:UntagResource", "iam:PassRole"),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": (
        "fsx:CreateDataRepositoryAssociation", "fsx:DeleteDataRepositoryAssociation",
        "fsx:DescribeDataRepositoryAssociations", "fsx:UpdateDataRepositoryAssociation",
        "fsx:TagResource", "s3:ListBucket", "s3:GetBucketPolicy", "s3:PutBucketPolicy",
        "iam:CreateServiceLinkedRole", "iam:AttachRolePolicy", "iam:PutRolePolicy"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": (
        "fsx:CreateFileSystem", "fsx:CreateFileSystemFromBackup", "fsx:DeleteFileSystem",
        "fsx:DescribeFileSystems", "fsx:UpdateFileSystem", "fsx:TagResource",
        "fsx:UntagResource", "fsx:ListTagsForResource", "fsx:CreateBackup",
        "fsx:DescribeBackups", "ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSubnets", "ec2:DescribeVpcs", "ec2:DescribeSecurityGroups",
        "iam:CreateServiceLinkedRole", "kms:CreateGrant", "kms:DescribeKey"),
    "aws:iam/role:Role": _ROLE,
    "aws:iam/rolePolicy:RolePolicy": (
        "iam:PutRolePolicy", "iam:GetRolePolicy", "iam:DeleteRolePolicy"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": (
        "iam:AttachRolePolicy", "iam:DetachRolePolicy", "iam:ListAttachedRolePolicies"),
    "aws:kms/alias:Alias": (
        "kms:CreateAlias", "kms:DeleteAlias", "kms:ListAliases", "kms:UpdateAlias"),
    "aws:kms/key:Key": (
        "kms:CreateKey", "kms:DescribeKey", "kms:GetKeyPolicy", "kms:PutKeyPolicy",
        "kms:GetKeyRotationStatus", "kms:EnableKeyRotation", "kms:ListResourceTags",
        "kms:TagResource", "kms:UntagResource", "kms:ScheduleKeyDeletion"),
    "aws:s3/bucket:Bucket": (
        "s3:CreateBucket", "s3:DeleteBucket", "s3:ListBucket", "s3:ListBucketVersions",
        "s3:GetBucketTagging", "s3:PutBucketTagging", "s3:GetBucketAcl", "s3:GetBucketCORS",
        "s3:GetBucketWebsite", "s3:GetBucketVersioning", "s3:GetAccelerateConfiguration",
        "s3:GetBucketRequestPayment", "s3:GetBucketLogging", "s3:GetLifecycleConfiguration",
        "s3:GetReplicationConfiguration", "s3:GetEncryptionConfiguration",
        "s3:GetBucketObjectLockConfiguration", "s3:GetBucketPolicy", "s3:GetBucketLocation",
        "s3:DeleteObject", "s3:DeleteObjectVersion"),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": (
        "s3:PutLifecycleConfiguration", "s3:GetLifecycleConfiguration"),
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": (
        "s3:PutBucketOwnershipControls", "s3:GetBucketOwnershipControls"),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": (
        "s3:PutBucketPublicAccessBlock", "s3:GetBucketPublicAccessBlock"),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        "s3:PutEncryptionConfiguration", "s3:GetEncryptionConfiguration"),
    "aws:s3/bucketVersioning:BucketVersioning": (
        "s3:PutBucketVersioning", "s3:GetBucketVersioning"),
    "aws:sqs/queue:Queue": (
        "sqs:CreateQueue", "sqs:DeleteQueue", "sqs:GetQueueAttributes", "sqs:SetQueueAttributes",
        "sqs:GetQueueUrl", "sqs:ListQueueTags", "sqs:TagQueue", "sqs:UntagQueue"),
    "aws:sqs/queuePolicy:QueuePolicy": ("sqs:SetQueueAttributes", "sqs:GetQueueAttributes"),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": _SG_RULE,
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": _SG_RULE,
    "aws:ec2/capacityReservation:CapacityReservation": ("ec2:DescribeCapacityReservations",),
    # The trainer image pushed to the stack's repository (infra/aws/registry.py).
    "docker-build:index:Image": (
        "ecr:GetAuthorizationToken", "ecr:BatchCheckLayerAvailability",
        "ecr:InitiateLayerUpload", "ecr:UploadLayerPart", "ecr:CompleteLayerUpload",
        "ecr:PutImage", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"),
    # pulumi-eks: the control plane, its IAM role, the OIDC provider, access entries.
    "eks:index:Cluster": (
        "eks:CreateCluster", "eks:DeleteCluster", "eks:DescribeCluster",
        "eks:UpdateClusterConfig", "eks:UpdateClusterVersion", "eks:DescribeUpdate",
        "eks:ListTagsForResource", "eks:TagResource", "eks:UntagResource",
        "eks:CreateAccessEntry", "eks:DeleteAccessEntry", "eks:DescribeAccessEntry",
        "eks:AssociateAccessPolicy", "eks:DisassociateAccessPolicy",
        "eks:ListAssociatedAccessPolicies", "iam:CreateOpenIDConnectProvider",
        "iam:DeleteOpenIDConnectProvider", "iam:GetOpenIDConnectProvider",
        "iam:TagOpenIDConnectProvider", "iam:UntagOpenIDConnectProvider",
        # pulumi-eks recomputes the issuer's thumbprint each run (cluster.ts thumbprintLists).
        "iam:UpdateOpenIDConnectProviderThumbprint", *_ROLE, "iam:AttachRolePolicy",
        "iam:DetachRolePolicy", "iam:PassRole", "iam:CreateServiceLinkedRole",
        "kms:DescribeKey", "kms:CreateGrant", "ec2:DescribeSubnets", "ec2:DescribeVpcs",
        "ec2:DescribeSecurityGroups"),
    # pulumi-eks: the aws.eks.NodeGroup; EKS launches with the deployer's launch template.
    "eks:index:ManagedNodeGroup": (
        "eks:CreateNodegroup", "eks:DeleteNodegroup", "eks:DescribeNodegroup",
        "eks:UpdateNodegroupConfig", "eks:UpdateNodegroupVersion", "eks:DescribeUpdate",
        "eks:TagResource", "eks:UntagResource", "iam:PassRole", "iam:GetRole",
        "iam:CreateServiceLinkedRole", "ec2:RunInstances", "ec2:CreateTags",
        "ec2:DescribeLaunchTemplateVersions", "ec2:DescribeSubnets"),
}

# Lookups (invoke tokens) -> the read they make.
INVOKE_ACTIONS: dict[str, tuple[str, ...]] = {
    "aws:cloudwatch/getLogGroups:getLogGroups": ("logs:DescribeLogGroups",),
    "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": (
        "ec2:DescribeInstanceTypeOfferings",),
    "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation": (
        "ec2:DescribeCapacityReservations",),
    "aws:ecr/getAuthorizationToken:getAuthorizationToken": ("ecr:GetAuthorizationToken",),
    "aws:eks/getAddonVersion:getAddonVersion": ("eks:DescribeAddonVersions",),
    "aws:eks/getClusterVersions:getClusterVersions": ("eks:DescribeClusterVersions",),
    "aws:eks/getCluster:getCluster": ("eks:DescribeCluster",),
    "aws:eks/getNodeGroup:getNodeGroup": ("eks:DescribeNodegroup",),
    "aws:fsx/getBackups:getBackups": ("fsx:DescribeBackups",),
    "aws:index/getAvailabilityZones:getAvailabilityZones": ("ec2:DescribeAvailabilityZones",),
    "aws:index/getCallerIdentity:getCallerIdentity": ("sts:GetCallerIdentity",),
    "aws:s3/getBucket:getBucket": ("s3:ListBucket",),
    "aws:s3/getBuckets:getBuckets": ("s3:ListAllMyBuckets",),
    # The kept bucket's owner tag (infra/store_owner.py) and the job pool's vCPU quota
    # (infra/quotas.py), both read before any resource.
    "aws:resourcegroupstaggingapi/getResources:getResources": ("tag:GetResources",),
    # The data source reads the default quota first, then the applied one (terraform-provider-aws
    # internal/service/servicequotas/service_quota_data_source.go).
    "aws:servicequotas/getServiceQuota:getServiceQuota": (
        "servicequotas:GetAWSDefaultServiceQuota", "servicequotas:GetServiceQuota"),
}

# Conditions keep the two IAM actions that reach beyond this stack's own resources narrow.
PASS_ROLE_SERVICES = ("eks.amazonaws.com", "ec2.amazonaws.com")
SERVICE_LINKED_ROLES = (
    "eks.amazonaws.com", "eks-nodegroup.amazonaws.com", "autoscaling.amazonaws.com",
    "spot.amazonaws.com", "fsx.amazonaws.com", "s3.data-source.lustre.fsx.amazonaws.com")
CONDITIONED = ("iam:PassRole", "iam:CreateServiceLinkedRole")


def all_actions() -> set[str]:
    return {a for row in (*RESOURCE_ACTIONS.values(), *INVOKE_ACTIONS.values()) for a in row}


def policy() -> dict:
    """The deployer policy document: every action in the table; PassRole only to EKS and EC2,
    service-linked roles only for the services the stack uses."""
    plain = sorted(all_actions() - set(CONDITIONED))
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "DeployTorchrecCloud", "Effect": "Allow", "Action": plain, "Resource": "*"},
        {"Sid": "PassRolesToEksAndEc2", "Effect": "Allow", "Action": "iam:PassRole",
         "Resource": "*",
         "Condition": {"StringEquals": {"iam:PassedToService": list(PASS_ROLE_SERVICES)}}},
        {"Sid": "ServiceLinkedRoles", "Effect": "Allow", "Action": "iam:CreateServiceLinkedRole",
         "Resource": "*",
         "Condition": {"StringEquals": {"iam:AWSServiceName": list(SERVICE_LINKED_ROLES)}}},
    ]}


def render() -> str:
    return json.dumps(policy(), indent=2) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        POLICY_FILE.write_text(render())
    else:
        sys.stdout.write(render())
