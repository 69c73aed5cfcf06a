"""Fakes for the aws stack's resources and invokes: every output infra/aws reads."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pulumi

from tests.fakes.common import FAKE_KUBECONFIG

ACCOUNT = "123456789012"
REGION = "us-east-1"
OIDC_ISSUER = f"oidc.eks.{REGION}.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
CLUSTER_SECURITY_GROUP = "sg-0cluster00000000"


def _eks_cluster(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    return {
        "kubeconfig": {"apiVersion": "v1", "kind": "Config"},
        "kubeconfigJson": json.dumps({"raw": FAKE_KUBECONFIG}),
        "oidcProviderArn": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{OIDC_ISSUER}",
        "oidcProviderUrl": f"https://{OIDC_ISSUER}",
        "oidcIssuer": OIDC_ISSUER,
        "clusterSecurityGroupId": CLUSTER_SECURITY_GROUP,
        "nodeSecurityGroupId": CLUSTER_SECURITY_GROUP,
    }


def _arn(service: str, kind: str) -> Any:
    def make(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
        return {"arn": f"arn:aws:{service}::{ACCOUNT}:{kind}/{args.name}"}
    return make


def _security_group(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    return {"id": f"sg-{args.name}", "arn": f"arn:aws:ec2:{REGION}:{ACCOUNT}:security-group/sg-{args.name}"}


def _subnet(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    return {"id": f"subnet-{args.name}"}


def _kms_key(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    key_id = f"key-{args.name}"
    return {"id": key_id, "keyId": key_id, "arn": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{key_id}"}


def _launch_template(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    return {"id": f"lt-{args.name}", "latestVersion": 1, "defaultVersion": 1}


def _lustre(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    fs_id = "fs-0123456789abcdef0"
    return {"id": fs_id, "dnsName": f"{fs_id}.fsx.{REGION}.amazonaws.com",
            "mountName": "abcdefgh", "arn": f"arn:aws:fsx:{REGION}:{ACCOUNT}:file-system/{fs_id}"}


def _bucket(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    # Created with a name, with a prefix (S3 adds a suffix), or imported by its name.
    name = (args.inputs.get("bucket") or args.resource_id
            or f"{args.inputs.get('bucketPrefix', args.name)}20250101")
    return {"id": name, "bucket": name, "arn": f"arn:aws:s3:::{name}"}


def _repository(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("name", args.name)
    return {"registryId": ACCOUNT, "arn": f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/{name}",
            "repositoryUrl": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{name}"}


def _queue(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("name") or args.name
    return {"id": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}",
            "url": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}",
            "arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"}


def _event_rule(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = args.inputs.get("name") or args.name
    return {"id": name, "arn": f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{name}"}


def _authorization_token(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    return {"id": REGION, "authorizationToken": "QVdTOmZha2U=", "expiresAt": "2030-01-01T00:00:00Z",
            "password": "fake-ecr-password", "proxyEndpoint": f"https://{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com",
            "registryId": ACCOUNT, "userName": "AWS"}


def auto_scaling_group_name(node_group_name: str) -> str:
    """The name EKS gives a managed node group's Auto Scaling group (eks-<group>-<uuid>)."""
    return f"eks-{node_group_name}-0ac9f1e2-1111-2222-3333-444455556666"


# Node groups as EKS describes them before a run: name -> (Kubernetes version, desired size).
LIVE_NODE_GROUPS: dict[str, tuple[str, int]] = {}


def _node_group(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    name = args.args["nodeGroupName"]
    version, desired = LIVE_NODE_GROUPS.get(name, ("", 0))
    return {
        "version": version,
        "scalingConfigs": [{"desiredSize": desired, "minSize": 0, "maxSize": 2}],
        "id": f"{args.args['clusterName']}:{name}", "clusterName": args.args["clusterName"],
        "nodeGroupName": name, "status": "ACTIVE",
        "arn": f"arn:aws:eks:{REGION}:{ACCOUNT}:nodegroup/{args.args['clusterName']}/{name}/x",
        "resources": [{"autoscalingGroups": [{"name": auto_scaling_group_name(name)}],
                       "remoteAccessSecurityGroupId": ""}],
        "launchTemplates": [{"id": "lt-0123456789abcdef0", "name": f"{name}-template",
                             "version": LIVE_TEMPLATE_VERSION}] if version else [],
    }


LIVE_TEMPLATE_VERSION = "3"  # the launch template version a live group's nodes run


# us-east-1 as one account sees it: names are per-account aliases of the zone ids.
ZONE_IDS = {"us-east-1a": "use1-az4", "us-east-1b": "use1-az6", "us-east-1c": "use1-az1",
            "us-east-1d": "use1-az2", "us-east-1e": "use1-az3", "us-east-1f": "use1-az5"}
# Zones (by id) that offer each machine type here; use1-az3 and use1-az5 offer no p4d.
OFFERED_IN = {
    "p4d.24xlarge": ["use1-az4", "use1-az6", "use1-az1", "use1-az2"],
    "p4de.24xlarge": ["use1-az6"],
    "p5.48xlarge": ["use1-az4", "use1-az6", "use1-az2", "use1-az5"],
}
CAPACITY_BLOCK_ID = "cr-02168da1478b509e0"  # the EKS User Guide's example id


def _availability_zones(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    return {"id": REGION, "names": list(ZONE_IDS), "zoneIds": list(ZONE_IDS.values()),
            "groupNames": [REGION] * len(ZONE_IDS), "region": REGION, "state": "available"}


def _instance_type_offerings(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    """Answers location type availability-zone-id with an instance-type filter, as EC2 does."""
    assert args.args.get("locationType") == "availability-zone-id", args.args
    (wanted,) = [f["values"] for f in args.args["filters"] if f["name"] == "instance-type"]
    pairs = [(t, zone) for t in wanted for zone in OFFERED_IN.get(t, [])]
    return {"id": REGION, "region": REGION, "instanceTypes": [t for t, _ in pairs],
            "locations": [zone for _, zone in pairs],
            "locationTypes": ["availability-zone-id"] * len(pairs)}


def _capacity_block(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    """An active 2-instance p4d block in us-east-1a, ending in 2030."""
    block_id = args.args["id"]
    return {"id": block_id, "capacityReservationId": block_id,
            "arn": f"arn:aws:ec2:{REGION}:{ACCOUNT}:capacity-reservation/{block_id}",
            "availabilityZone": "us-east-1a", "availabilityZoneId": ZONE_IDS["us-east-1a"],
            "instanceType": "p4d.24xlarge", "instanceCount": 2, "availableInstanceCount": 2,
            "state": "active", "reservationType": "capacity-block",
            "startDate": "2030-01-01T11:30:00Z", "endDate": "2030-01-08T11:30:00Z",
            "endDateType": "limited", "capacityBlockId": "cb-0123", "createDate": "2029-12-01T00:00:00Z",
            "ebsOptimized": True, "instancePlatform": "Linux/UNIX", "outpostArn": "",
            "placementGroupArn": "", "region": REGION, "tenancy": "default",
            "totalInstanceCount": 2, "tags": {}}


# On-Demand Capacity Reservations (infra/aws/reservations.py), read by id: one made in a
# cluster placement group, one outside any.
RESERVATION_IN_PLACEMENT_GROUP = "cr-0123456789abcdef0"
RESERVATION_OUTSIDE_PLACEMENT_GROUPS = "cr-0fedcba9876543210"
RESERVATION_OF_ANOTHER_ACCOUNT = "cr-0aaaabbbbccccdddd"
RESERVED_PLACEMENT_GROUP = "p4d-reserved"
OTHER_ACCOUNT = "210987654321"


def _capacity_reservation(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    reservation_id = args.resource_id or args.name
    placement = {
        RESERVATION_IN_PLACEMENT_GROUP:
            f"arn:aws:ec2:{REGION}:{ACCOUNT}:placement-group/{RESERVED_PLACEMENT_GROUP}",
        RESERVATION_OF_ANOTHER_ACCOUNT:
            f"arn:aws:ec2:{REGION}:{OTHER_ACCOUNT}:placement-group/{RESERVED_PLACEMENT_GROUP}",
    }.get(reservation_id)
    return {"id": reservation_id, "instanceType": "p4d.24xlarge", "availabilityZone": "us-east-1a",
            "instanceCount": 2, "instancePlatform": "Linux/UNIX", "tenancy": "default",
            "ownerId": OTHER_ACCOUNT if reservation_id == RESERVATION_OF_ANOTHER_ACCOUNT else ACCOUNT,
            "arn": f"arn:aws:ec2:{REGION}:{ACCOUNT}:capacity-reservation/{reservation_id}",
            **({"placementGroupArn": placement} if placement else {})}


# --- EKS versions (infra/aws/versions.py) -------------------------------------------------
# EKS' calendar as DescribeClusterVersions reports it: release, end of standard support, end of
# extended support. 1.30-1.35 are EKS' published dates; 1.36-1.38 are projected (14 months of
# standard support, 12 of extended) so the suite can look ahead to 2027 and 2028.
EKS_CALENDAR: dict[str, tuple[date, date, date]] = {
    "1.30": (date(2024, 5, 23), date(2025, 7, 23), date(2026, 7, 23)),
    "1.31": (date(2024, 9, 26), date(2025, 11, 26), date(2026, 11, 26)),
    "1.32": (date(2025, 1, 23), date(2026, 3, 23), date(2027, 3, 23)),
    "1.33": (date(2025, 5, 29), date(2026, 7, 29), date(2027, 7, 29)),
    "1.34": (date(2025, 10, 2), date(2026, 12, 2), date(2027, 12, 2)),
    "1.35": (date(2026, 1, 27), date(2027, 3, 27), date(2028, 3, 27)),
    "1.36": (date(2027, 1, 20), date(2028, 3, 20), date(2029, 3, 20)),
    "1.37": (date(2027, 5, 20), date(2028, 7, 20), date(2029, 7, 20)),
    "1.38": (date(2027, 9, 20), date(2028, 11, 20), date(2029, 11, 20)),
}
# The day the fake EKS answers for: tests that look ahead set it (monkeypatch).
LISTING_DAY = date(2026, 11, 26)


def eks_listing(day: date) -> list[dict[str, Any]]:
    """DescribeClusterVersions on `day` (supported minors only; the newest is the default)."""
    rows = []
    for minor, (released, standard, extended) in EKS_CALENDAR.items():
        if not released <= day <= extended:
            continue
        rows.append({
            "clusterType": "eks", "clusterVersion": minor, "defaultPlatformVersion": "eks.1",
            "defaultVersion": False, "kubernetesPatchVersion": f"{minor}.0",
            "releaseDate": f"{released.isoformat()}T00:00:00Z",
            "endOfStandardSupportDate": f"{standard.isoformat()}T00:00:00Z",
            "endOfExtendedSupportDate": f"{extended.isoformat()}T00:00:00Z",
            "versionStatus": "STANDARD_SUPPORT" if day <= standard else "EXTENDED_SUPPORT",
            "controlPlaneComponentConfigs": [], "controlPlaneScalingTiers": []})
    standard_rows = [r for r in rows if r["versionStatus"] == "STANDARD_SUPPORT"]
    if standard_rows:
        standard_rows[-1]["defaultVersion"] = True
    return rows


def _cluster_versions(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    return {"id": REGION, "region": args.args.get("region") or REGION,
            "clusterType": args.args.get("clusterType"), "clusterVersions": eks_listing(LISTING_DAY),
            "clusterVersionsOnlies": [], "defaultOnly": False, "includeAll": False,
            "versionStatus": ""}


# The EKS clusters that exist, by name -> the version each runs (a later run's live cluster).
LIVE_CLUSTERS: dict[str, str] = {}
# Each live cluster's upgrade policy (STANDARD unless a test says EXTENDED).
SUPPORT_TYPES: dict[str, str] = {}


def not_found(what: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A data source's "not found": the engine hands it back to the program as the invoke's
    error (a real engine as a gRPC error, the mock monitor as a failure), which the program may
    catch; an exception raised here instead would fail the whole run under mocks."""
    return {}, [("", f"reading {what}: couldn't find resource")]


def _cluster(args: pulumi.runtime.MockCallArgs) -> Any:
    name = args.args["name"]
    if name not in LIVE_CLUSTERS:
        return not_found(f"EKS Cluster ({name})")
    return {"id": name, "name": name, "version": LIVE_CLUSTERS[name], "status": "ACTIVE",
            "arn": f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{name}", "platformVersion": "eks.9",
            "upgradePolicies": [{"supportType": SUPPORT_TYPES.get(name, "STANDARD")}]}


def _caller_identity(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    return {"id": ACCOUNT, "accountId": ACCOUNT, "userId": "AIDAEXAMPLE",
            "arn": f"arn:aws:iam::{ACCOUNT}:user/deployer"}


# --- EKS add-on versions (DescribeAddonVersions) ----------------------------------------
def addon_build(addon: str, minor: str, newest: bool = False) -> str:
    """The build EKS lists for `addon` and `minor`: its default one, or with `newest` (the
    invoke's mostRecent) a later build of the same version."""
    number = int(minor.split(".")[1])
    version = {"vpc-cni": f"v1.{number - 14}.0", "kube-proxy": f"v{minor}.0",
               "coredns": f"v1.{number - 22}.0"}[addon]
    return f"{version}-eksbuild.{2 if newest else 1}"


def _addon_version(args: pulumi.runtime.MockCallArgs) -> Any:
    addon, minor = args.args["addonName"], args.args["kubernetesVersion"]
    newest = bool(args.args.get("mostRecent"))
    return {"id": addon, "addonName": addon, "kubernetesVersion": minor, "mostRecent": newest,
            "region": REGION, "version": addon_build(addon, minor, newest)}


# Buckets in the account, e.g. one a `pulumi destroy` kept (tests add names).
EXISTING_BUCKETS: set[str] = set()
# What HeadBucket answers instead of 200/404, by bucket name (e.g. a 403 for AccessDenied).
BUCKET_ERRORS: dict[str, str] = {}


def head_bucket_forbidden(name: str) -> str:
    """The provider's text for HeadBucket answered 403 (data source aws_s3_bucket)."""
    return (f"reading S3 Bucket ({name}): operation error S3: HeadBucket, https response error "
            "StatusCode: 403, RequestID: EXAMPLE, HostID: EXAMPLE, api error Forbidden: Forbidden")


def _get_bucket(args: pulumi.runtime.MockCallArgs) -> Any:
    name = args.args["bucket"]
    if name in BUCKET_ERRORS:
        return {}, [("", BUCKET_ERRORS[name])]
    if name not in EXISTING_BUCKETS:
        return not_found(f"S3 Bucket ({name})")
    return {"id": name, "bucket": name, "arn": f"arn:aws:s3:::{name}", "region": REGION,
            "bucketDomainName": f"{name}.s3.amazonaws.com", "hostedZoneId": "Z3AQBSTGFYJSTF",
            "bucketRegionalDomainName": f"{name}.s3.{REGION}.amazonaws.com"}


# Each bucket's tags, as the Resource Groups Tagging API returns them (tests set them).
BUCKET_TAGS: dict[str, dict[str, str]] = {}


# FSx backups a destroy kept: backup id -> the final-backup tag's value (the stack's prefix),
# or -> all of the backup's tags (a test of the owner and restored-from tags).
FINAL_BACKUPS: dict[str, str | dict[str, str]] = {}


def _tagged_resources(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    if "fsx:backup" in (args.args.get("resourceTypeFilters") or []):
        (wanted,) = args.args["tagFilters"]
        tagged = {backup: tags if isinstance(tags, dict) else {wanted["key"]: tags}
                  for backup, tags in FINAL_BACKUPS.items()}
        found = [{"resourceArn": f"arn:aws:fsx:{REGION}:123456789012:backup/{backup}",
                  "complianceDetails": [], "tags": tags}
                 for backup, tags in sorted(tagged.items())
                 if tags.get(wanted["key"]) in (wanted.get("values") or [])]
        return {"id": REGION, "resourceTypeFilters": ["fsx:backup"],
                "resourceTagMappingLists": found}
    arns = list(args.args.get("resourceArnLists") or [])
    found = [{"resourceArn": arn, "complianceDetails": [],
              "tags": BUCKET_TAGS[arn.removeprefix("arn:aws:s3:::")]}
             for arn in arns if arn.removeprefix("arn:aws:s3:::") in BUCKET_TAGS]
    return {"id": REGION, "resourceArnLists": arns, "resourceTagMappingLists": found}


# Where each bucket lives (ListBuckets' BucketRegion); REGION unless a test says otherwise.
BUCKET_REGIONS: dict[str, str] = {}


def _list_buckets(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    """ListBuckets with the Prefix and BucketRegion filters, as S3 applies them."""
    prefix, region = args.args.get("prefix") or "", args.args.get("bucketRegion")
    names = sorted(n for n in EXISTING_BUCKETS if n.startswith(prefix)
                   and (not region or BUCKET_REGIONS.get(n, REGION) == region))
    return {"id": REGION, "region": REGION, "prefix": prefix, "bucketRegion": region,
            "buckets": [{"name": n, "bucketArn": f"arn:aws:s3:::{n}",
                         "bucketRegion": BUCKET_REGIONS.get(n, REGION),
                         "creationDate": "2025-01-01T00:00:00Z"} for n in names]}


# CloudWatch log groups in the account, e.g. the control plane's one that a destroy kept or that
# EKS's service-linked role created again after the cluster was deleted (tests add names).
EXISTING_LOG_GROUPS: set[str] = set()


def _get_log_groups(args: pulumi.runtime.MockCallArgs) -> Any:
    """DescribeLogGroups by prefix, as the plural data source answers: a list, empty when none."""
    prefix = args.args.get("logGroupNamePrefix", "")
    names = sorted(n for n in EXISTING_LOG_GROUPS if n.startswith(prefix))
    return {"id": REGION, "logGroupNamePrefix": prefix, "logGroupNames": names,
            "arns": [f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{n}" for n in names]}


OUTPUTS: dict[str, Any] = {
    "eks:index:Cluster": _eks_cluster,
    "aws:iam/role:Role": _arn("iam", "role"),
    "aws:ec2/securityGroup:SecurityGroup": _security_group,
    "aws:ec2/subnet:Subnet": _subnet,
    "aws:kms/key:Key": _kms_key,
    "aws:ec2/launchTemplate:LaunchTemplate": _launch_template,
    "aws:fsx/lustreFileSystem:LustreFileSystem": _lustre,
    "aws:s3/bucket:Bucket": _bucket,
    "aws:ecr/repository:Repository": _repository,
    "aws:sqs/queue:Queue": _queue,
    "aws:cloudwatch/eventRule:EventRule": _event_rule,
    "aws:ec2/capacityReservation:CapacityReservation": _capacity_reservation,
}
CALLS: dict[str, Any] = {
    "aws:ecr/getAuthorizationToken:getAuthorizationToken": _authorization_token,
    "aws:eks/getNodeGroup:getNodeGroup": _node_group,
    "aws:index/getAvailabilityZones:getAvailabilityZones": _availability_zones,
    "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": _instance_type_offerings,
    "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation": _capacity_block,
    "aws:eks/getClusterVersions:getClusterVersions": _cluster_versions,
    "aws:eks/getCluster:getCluster": _cluster,
    "aws:index/getCallerIdentity:getCallerIdentity": _caller_identity,
    "aws:s3/getBucket:getBucket": _get_bucket,
    "aws:s3/getBuckets:getBuckets": _list_buckets,
    "aws:resourcegroupstaggingapi/getResources:getResources": _tagged_resources,
    "aws:eks/getAddonVersion:getAddonVersion": _addon_version,
    "aws:cloudwatch/getLogGroups:getLogGroups": _get_log_groups,
    "aws:servicequotas/getServiceQuota:getServiceQuota": lambda args: _service_quota(args),
}


# The account's EC2 vCPU quotas by quota code (infra/quotas.py); a test sets one to 0 to stand
# for a fresh account. Default: room for every shipped stack's pools.
SERVICE_QUOTAS: dict[str, float] = {}


def _service_quota(args: Any) -> dict[str, Any]:
    code = args.args["quotaCode"]
    value = SERVICE_QUOTAS.get(code, 1536.0)
    return {"id": f"ec2/{code}", "arn": f"arn:aws:servicequotas:us-east-1:123456789012:ec2/{code}",
            "quotaCode": code, "serviceCode": "ec2", "quotaName": code, "serviceName": "EC2",
            "value": value, "defaultValue": 0.0, "adjustable": True, "globalQuota": False,
            "region": "us-east-1", "usageMetrics": []}
