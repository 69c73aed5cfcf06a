"""AWS stack policies: the real program under mocks, read like rules a reviewer would state."""

from __future__ import annotations

import re
import json
import os
from datetime import date, datetime, timezone
from typing import Any

import pulumi
import pytest
import time_machine

from infra.aws.addons import DCGM_EXPORTER, EFA_DEVICE_PLUGIN, FSX_CSI_DRIVER, NVIDIA_DEVICE_PLUGIN
from infra.aws.interconnect import efa_interconnect, hugepages
from infra.aws.network import subnet_cidrs
from infra.catalog.cloud import Cloud
from infra.catalog.machines import MACHINES, Interconnect, machine
from infra.settings.errors import SettingsError
from tests import harness
from tests.fakes import aws as aws_fake
from tests.harness import JOBSET, Run, run_stack, training_pod_template


PREFIX = "torchrec-cloud-aws"
OIDC = "oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"  # tests/fakes/aws.py
GPU_ZONE = "us-east-1a"
GPU_SUBNET = f"subnet-{PREFIX}-private-{GPU_ZONE}"
MNG = "eks:index:ManagedNodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
HELM = "kubernetes:helm.sh/v3:Release"
ADDON = "aws:eks/addon:Addon"
BUCKET = "aws:s3/bucket:Bucket"
ROLE = "aws:iam/role:Role"


@pytest.fixture(scope="module")
def run() -> Run:
    return run_stack("aws")


def _group(run: Run, pool_name: str) -> dict[str, Any]:
    return _node_group(run, pool_name).inputs


def _node_group(run: Run, pool_name: str) -> harness.Captured:
    found = [r for r in run.of_type(MNG) if r.name == f"{PREFIX}-{pool_name}"]
    assert len(found) == 1, [r.name for r in run.of_type(MNG)]
    return found[0]


def _unsecret(value: Any) -> Any:
    """A secret input arrives as {<signature>: ..., "value": ...}."""
    return value["value"] if isinstance(value, dict) and "value" in value else value


def _trust(run: Run, role: str) -> dict[str, Any]:
    return json.loads(run.one(ROLE, role).inputs["assumeRolePolicy"])


# --- network -------------------------------------------------------------------------------
def test_every_zone_has_a_private_and_a_public_subnet_in_the_vpc_range(run: Run) -> None:
    subnets = {r.name: r.inputs for r in run.of_type("aws:ec2/subnet:Subnet")}
    assert run.one("aws:ec2/vpc:Vpc").inputs["cidrBlock"] == "10.0.0.0/16"
    for zone in ("us-east-1a", "us-east-1b"):
        private, public = subnet_cidrs("10.0.0.0/16", zone)
        assert subnets[f"{PREFIX}-private-{zone}"]["cidrBlock"] == private
        assert subnets[f"{PREFIX}-public-{zone}"]["cidrBlock"] == public
    assert not any(s.get("mapPublicIpOnLaunch") for s in subnets.values())


def test_subnet_ranges_follow_the_zone_letter_not_its_position() -> None:
    assert subnet_cidrs("10.0.0.0/16", "us-east-1b") == ("10.0.32.0/19", "10.0.225.0/24")


def test_private_subnets_route_through_one_nat_gateway(run: Run) -> None:
    nat = run.one("aws:ec2/natGateway:NatGateway")
    assert nat.inputs["subnetId"] == f"subnet-{PREFIX}-public-{GPU_ZONE}"
    private = run.one("aws:ec2/routeTable:RouteTable", "private").inputs["routes"]
    assert [route["cidrBlock"] for route in private] == ["0.0.0.0/0"]
    assert "natGatewayId" in private[0] and "gatewayId" not in private[0]


def test_every_aws_resource_uses_the_stack_region_provider(run: Run) -> None:
    provider = run.named(f"{PREFIX}-aws")
    assert provider.inputs["region"] == "us-east-1"
    # The version questions asked before the component exists go through their own provider,
    # in the same region, which manages no resource.
    lookups = run.named(f"{PREFIX}-aws-lookups")
    assert lookups.type == provider.type == "pulumi:providers:aws"
    assert lookups.inputs["region"] == "us-east-1"
    assert not [r.name for r in run.resources if r.provider_urn == lookups.urn]
    tags = provider.inputs["defaultTags"]
    tags = json.loads(tags) if isinstance(tags, str) else tags  # providers take JSON strings
    assert tags["tags"] == {"project": "torchrec-cloud"}
    aws_resources = [r for r in run.resources if r.type.startswith("aws:")]
    assert aws_resources and all(r.provider_urn == provider.urn for r in aws_resources)


# --- EKS -----------------------------------------------------------------------------------
def test_eks_is_private_with_public_access_only_from_configured_cidrs(run: Run) -> None:
    cluster = run.one("eks:index:Cluster").inputs
    assert cluster["endpointPrivateAccess"] is True
    assert cluster["publicAccessCidrs"] == harness.USER_API_CIDRS
    assert cluster["nodeAssociatePublicIpAddress"] is False
    assert cluster["privateSubnetIds"] == [f"subnet-{PREFIX}-private-us-east-1a",
                                           f"subnet-{PREFIX}-private-us-east-1b"]
    assert "publicSubnetIds" not in cluster


def test_eks_uses_access_entries_oidc_kms_secrets_and_logs(run: Run) -> None:
    cluster = run.one("eks:index:Cluster").inputs
    assert cluster["skipDefaultNodeGroup"] is True
    assert cluster["authenticationMode"] == "API"
    assert cluster["createOidcProvider"] is True
    assert cluster["encryptionConfigKeyArn"].startswith("arn:aws:kms:")
    assert set(cluster["enabledClusterLogTypes"]) >= {"api", "audit", "authenticator"}
    assert cluster["version"] == "1.35"
    # Not billed for extended support unless kubernetes.extendedSupport accepts it.
    assert cluster["upgradePolicy"] == {"supportType": "STANDARD"}


# --- node groups ---------------------------------------------------------------------------
def test_the_spot_node_group_is_spot_and_can_scale_to_zero(run: Run) -> None:
    spot = _group(run, "gpuspot")
    assert spot["capacityType"] == "SPOT"
    assert spot["scalingConfig"]["minSize"] == 0
    assert spot["scalingConfig"]["desiredSize"] == 0
    assert {"key": "torchrec-cloud/spot", "value": "true", "effect": "NO_SCHEDULE"} in spot["taints"]
    assert spot["labels"]["torchrec-cloud/capacity"] == "spot"


def test_the_on_demand_group_starts_empty_within_the_settings_bounds(run: Run) -> None:
    """Created empty: a group whose first p4d cannot launch ends in CREATE_FAILED and stops
    `pulumi up`; an empty one is grown by the autoscaler when the job's pods are Pending."""
    on_demand = _group(run, "gpu")
    assert on_demand["capacityType"] == "ON_DEMAND"
    assert on_demand["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 2}
    assert on_demand["instanceTypes"] == ["p4d.24xlarge"]


def test_gpu_node_groups_use_the_al2023_nvidia_ami_and_the_gpu_taint(run: Run) -> None:
    for pool in ("gpu", "gpuspot"):
        group = _group(run, pool)
        assert group["amiType"] == "AL2023_x86_64_NVIDIA"
        assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"} in group["taints"]
        assert group["labels"]["torchrec-cloud/pool"] == pool


def test_gpu_node_groups_are_in_the_gpu_zone_private_subnet_only(run: Run) -> None:
    for pool in ("gpu", "gpuspot"):
        assert _group(run, pool)["subnetIds"] == [GPU_SUBNET]


def test_system_group_is_untainted_and_spans_the_private_subnets(run: Run) -> None:
    system = _group(run, "system")
    assert system["amiType"] == "AL2023_x86_64_STANDARD"
    assert "taints" not in system or not system["taints"]
    assert len(system["subnetIds"]) == 2 and all("private" in s for s in system["subnetIds"])


def test_efa_is_on_and_a_placement_group_exists(run: Run) -> None:
    efa_count = machine(Cloud.AWS, "p4d.24xlarge").efa_interfaces
    for key in ("onDemand", "spot"):
        placement = run.one("aws:ec2/placementGroup:PlacementGroup", key)
        assert placement.inputs["strategy"] == "cluster"
        template = run.one(LAUNCH_TEMPLATE, key).inputs
        interfaces = template["networkInterfaces"]
        assert len(interfaces) == efa_count
        assert sorted(i["networkCardIndex"] for i in interfaces) == list(range(efa_count))
        # EC2 refuses associatePublicIPAddress on multi-interface launches; subnets are private.
        assert all("associatePublicIpAddress" not in i for i in interfaces)
        assert template["placement"]["groupName"] == placement.outputs.get(
            "name", f"{PREFIX}-{key}")


def test_efa_interfaces_follow_the_ec2_guide_primary_at_0_0_efa_only_at_device_1(run: Run) -> None:
    """EC2 guide (efa-acc-inst-types.html): card 0 device 0 an EFA-with-ENA interface; each
    additional one on the next card, device index 1, EFA or EFA-only."""
    for key in ("onDemand", "spot"):
        interfaces = {i["networkCardIndex"]: i for i in
                      run.one(LAUNCH_TEMPLATE, key).inputs["networkInterfaces"]}
        primary = interfaces.pop(0)
        assert (primary["interfaceType"], primary["deviceIndex"]) == ("efa", 0)
        assert interfaces and all((i["interfaceType"], i["deviceIndex"]) == ("efa-only", 1)
                                  for i in interfaces.values())


def test_imdsv2_is_required_and_root_volumes_are_encrypted_on_every_node(run: Run) -> None:
    templates = run.of_type(LAUNCH_TEMPLATE)
    assert len(templates) == 3
    for template in templates:
        assert template.inputs["metadataOptions"]["httpTokens"] == "required"
        # Token responses stop at the host: a pod on the pod network cannot read the node role.
        assert template.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1
        root = template.inputs["blockDeviceMappings"][0]
        assert root["deviceName"] == "/dev/xvda" and root["ebs"]["encrypted"] == "true"


def test_every_node_group_uses_its_own_launch_template(run: Run) -> None:
    for pool in ("system", "gpu", "gpuspot"):
        assert _group(run, pool)["launchTemplate"]["id"].startswith("lt-")


def test_node_role_can_pull_from_ecr_and_no_more(run: Run) -> None:
    arns = {r.inputs["policyArn"] for r in run.of_type(
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment") if "node" in r.name}
    assert arns == {"arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
                    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"}


# --- add-ons -------------------------------------------------------------------------------
def test_eks_managed_addons_are_installed_without_an_unused_pod_identity_agent(run: Run) -> None:
    names = {r.inputs["addonName"] for r in run.of_type(ADDON)}
    assert names == {"vpc-cni", "coredns", "kube-proxy"}  # every pod role is IRSA


def test_the_vpc_cni_enforces_network_policies(run: Run) -> None:
    """Without the CNI's policy agent, workloads/network_policy.py would be decorative."""
    cni = run.one(ADDON, "vpc-cni").inputs
    assert json.loads(cni["configurationValues"]) == {"enableNetworkPolicy": "true"}
    assert run.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")


def test_the_vpc_cni_starts_after_its_role_holds_the_cni_policy(run: Run) -> None:
    attachment = [r for r in run.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                  if r.inputs["policyArn"].endswith("AmazonEKS_CNI_Policy")]
    assert len(attachment) == 1
    assert run.waits_for(run.one(ADDON, "vpc-cni"), attachment[0])


def test_vpc_cni_comes_before_nodes_and_coredns_after(run: Run) -> None:
    gpu = _node_group(run, "gpu")
    assert run.waits_for(gpu, run.one(ADDON, "vpc-cni"))
    assert run.waits_for(run.one(ADDON, "coredns"), gpu)


def test_helm_charts_are_pinned(run: Run) -> None:
    releases = {r.inputs["chart"]: r.inputs for r in run.of_type(HELM)}
    from infra.addon_versions import choose
    minor = run.one("eks:index:Cluster").inputs["version"]
    for chart, repo in (NVIDIA_DEVICE_PLUGIN, EFA_DEVICE_PLUGIN, FSX_CSI_DRIVER):
        version = choose(chart, minor).row.version  # the table's pick for the cluster's minor
        assert releases[chart]["version"] == version
        assert releases[chart]["repositoryOpts"]["repo"] == repo
        assert version and not any(c in version for c in "^~*x>")


def test_device_plugins_tolerate_the_gpu_and_spot_taints(run: Run) -> None:
    for chart in ("nvidia-device-plugin", "aws-efa-k8s-device-plugin"):
        values = run.one(HELM, chart).inputs["values"]
        keys = {t["key"] for t in values["tolerations"]}
        assert keys == {"nvidia.com/gpu", "torchrec-cloud/spot"}


# --- GPU metrics (DCGM) ------------------------------------------------------------------------
DCGM_CHART = json.loads((harness.ROOT / "tests/schemas/dcgm-exporter-4.8.2.json").read_text())


def _helm_merge(defaults: Any, given: Any) -> Any:
    """Helm's coalescing of user values over a chart's: maps merge key by key, anything else
    (lists included) replaces, null deletes."""
    if not (isinstance(defaults, dict) and isinstance(given, dict)):
        return given
    merged = dict(defaults)
    for key, value in given.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _helm_merge(defaults.get(key), value)
    return merged


def _paths(values: dict[str, Any], prefix: str = "") -> list[str]:
    return [p for key, value in values.items()
            for p in (_paths(value, f"{prefix}{key}.") if isinstance(value, dict) and value
                      else [f"{prefix}{key}"])]


def _dcgm_values(run: Run) -> dict[str, Any]:
    from tests.k8s_manifests import clean

    return clean(run.one(HELM, "dcgm-exporter").inputs["values"])


def test_gpu_metrics_come_from_nvidias_pinned_dcgm_exporter_chart_on_every_gpu_node(run: Run
                                                                                  ) -> None:
    """As GKE has DCGM managed: NVIDIA's chart at the table's version for the cluster's minor,
    in kube-system where `status` looks for it, on the GPU nodes only, spot ones included."""
    from infra.addon_versions import choose
    from infra.dcgm import AWS_RELEASE, EXPORTERS

    release = run.one(HELM, "dcgm-exporter").inputs
    minor = run.one("eks:index:Cluster").inputs["version"]
    assert (release["chart"], release["repositoryOpts"]["repo"]) == DCGM_EXPORTER
    assert release["version"] == choose("dcgm-exporter", minor).row.version
    assert release["version"] == DCGM_CHART["chart"]["version"]  # the chart the tests read
    assert release["name"] == AWS_RELEASE and release["namespace"] == EXPORTERS["aws"].namespace
    values = _dcgm_values(run)
    assert values["nodeSelector"] == {"torchrec-cloud/gpu": "true"}
    assert {t["key"] for t in values["tolerations"]} == {"nvidia.com/gpu", "torchrec-cloud/spot"}


def test_the_dcgm_exporter_values_are_ones_the_chart_reads(run: Run) -> None:
    """Helm ignores a misspelt value silently: each one set here is read by a template of the
    pinned chart (or lies under a value a template renders whole, like securityContext)."""
    read = DCGM_CHART["template_values"]
    unread = [path for path in _paths(_dcgm_values(run))
              if not any(path == r or path.startswith(r + ".") for r in read)]
    assert not unread, unread


def test_the_dcgm_exporter_runs_with_no_capability_and_no_prometheus_operator(run: Run) -> None:
    """What the chart renders once Helm merges these values into its own: the profiling counters
    (the only ones that need SYS_ADMIN) are left out and so is the capability the chart adds by
    default; the ServiceMonitor the chart enables by default would need a CRD this cluster lacks;
    the Service the API server proxies to stays on the port `status` reads."""
    from infra.dcgm import EXPORTERS

    effective = _helm_merge(DCGM_CHART["values"], _dcgm_values(run))
    context = effective["securityContext"]
    assert context["capabilities"] == {"add": [], "drop": ["ALL"]}
    assert context["allowPrivilegeEscalation"] is False and not context.get("privileged")
    counters = [line.split(",")[0].strip() for line in effective["customMetrics"].splitlines()
                if line.strip() and not line.startswith("#")]
    assert "DCGM_FI_DEV_GPU_UTIL" in counters
    assert not [c for c in counters if c.startswith("DCGM_FI_PROF_")]
    assert effective["serviceMonitor"]["enabled"] is False
    assert effective["service"]["enable"] is True
    assert effective["service"]["port"] == EXPORTERS["aws"].port
    # The exporter listens where the Service and the pod proxy send (DCGM_EXPORTER_LISTEN).
    assert effective["service"]["address"] == f":{EXPORTERS['aws'].port}"
    assert effective["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}


def test_the_dcgm_exporter_daemonset_is_valid_kubernetes_for_the_clusters_minor(run: Run) -> None:
    """The fields these values fill, placed where the chart's templates/daemonset.yaml and
    service.yaml put them, against the official schema (strict): a wrong toleration, resource or
    security field would fail the Helm install only on a real cluster."""
    import kubernetes_validate

    from infra.dcgm import AWS_RELEASE, EXPORTERS

    v = _helm_merge(DCGM_CHART["values"], _dcgm_values(run))
    labels = {"app.kubernetes.io/name": AWS_RELEASE, "app.kubernetes.io/instance": AWS_RELEASE}
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": AWS_RELEASE, "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels, "annotations": v["podAnnotations"]},
            "spec": {
                "priorityClassName": v["priorityClassName"], "hostPID": v["hostPID"],
                "nodeSelector": v["nodeSelector"], "tolerations": v["tolerations"],
                "volumes": [{"name": "pod-gpu-resources", "hostPath": {"path": v["kubeletPath"]}},
                            *v["extraConfigMapVolumes"]],
                "containers": [{
                    "name": "exporter", "securityContext": v["securityContext"],
                    "image": f"{v['image']['repository']}:{v['image']['tag']}",
                    "args": v["arguments"], "resources": v["resources"],
                    "env": [{"name": "DCGM_EXPORTER_LISTEN", "value": v["service"]["address"]}],
                    "ports": [{"name": "metrics", "containerPort": v["service"]["port"]}],
                    "volumeMounts": v["extraVolumeMounts"],
                }],
            }}},
    }
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": AWS_RELEASE, "namespace": EXPORTERS["aws"].namespace},
               "spec": {"type": v["service"]["type"], "selector": labels, "ports": [
                   {"name": "metrics", "port": v["service"]["port"],
                    "targetPort": v["service"]["port"], "protocol": "TCP"}]}}
    minor = run.one("eks:index:Cluster").inputs["version"]
    for manifest in (daemonset, service):
        kubernetes_validate.validate(manifest, f"{minor}.0", strict=True)
    # The chart mounts the counters' ConfigMap over the file its default argument names.
    assert v["extraVolumeMounts"][0]["mountPath"] == v["arguments"][1]
    # `status` finds the pods by this selector.
    key, value = EXPORTERS["aws"].pod_selector.split("=")
    assert labels[key] == value


def test_a_new_dcgm_counter_list_rolls_the_exporter_pods(run: Run) -> None:
    """The chart mounts the counters with subPath (never refreshed in a running pod): the pod
    template carries the hash of the list the ConfigMap holds, so a changed list is a changed
    DaemonSet and its pods restart with it."""
    import hashlib

    effective = _helm_merge(DCGM_CHART["values"], _dcgm_values(run))
    assert effective["extraVolumeMounts"][0]["subPath"]  # why the annotation is needed
    assert effective["podAnnotations"]["checksum/counters"] == hashlib.sha256(
        effective["customMetrics"].encode()).hexdigest()


def test_the_training_job_does_not_wait_for_gpu_metrics(run: Run) -> None:
    assert not run.waits_for(run.one(JOBSET), run.one(HELM, "dcgm-exporter"))


def test_an_exporter_that_cannot_start_does_not_fail_the_deploy(run: Run) -> None:
    """Training needs the device plugins and the autoscaler, not its GPU metrics: only the
    exporter's release is neither awaited nor rolled back (atomic would turn skipAwait off)."""
    releases = {r.inputs["name"]: r.inputs for r in run.of_type(HELM)
                if r.inputs.get("namespace") == "kube-system"}
    dcgm = releases.pop("dcgm-exporter")
    assert dcgm.get("skipAwait") is True and not dcgm.get("atomic")
    assert "nvidia-device-plugin" in releases
    assert all(r["atomic"] is True and not r.get("skipAwait") for r in releases.values()), releases


def test_the_fsx_csi_controller_may_only_describe_file_systems(run: Run) -> None:
    """Static volumes need no Create/Delete, but the controller polls DescribeFileSystems every
    minute: its own IRSA role allows that and nothing else."""
    values = run.one(HELM, "fsx-csi").inputs["values"]
    account = values["controller"]["serviceAccount"]
    assert values["controller"]["region"] == "us-east-1"
    role = run.one(ROLE, "fsx-csi-controller")
    assert account["name"] == "fsx-csi-controller-sa"
    assert account["annotations"]["eks.amazonaws.com/role-arn"].endswith(f"role/{role.name}")
    conditions = [st["Condition"] for st in _trust(run, "fsx-csi-controller")["Statement"]]
    assert any("system:serviceaccount:kube-system:fsx-csi-controller-sa" in json.dumps(c)
               for c in conditions)
    policy = json.loads(run.one("aws:iam/rolePolicy:RolePolicy", "fsx-csi-controller")
                        .inputs["policy"])
    assert [st["Action"] for st in policy["Statement"]] == [["fsx:DescribeFileSystems"]]
    assert not [r for r in run.resources if "AmazonFSxFullAccess" in json.dumps(r.inputs)]


def test_the_kubernetes_provider_waits_for_node_groups_and_addons(run: Run) -> None:
    provider = run.one("pulumi:providers:kubernetes")
    for waited in [*run.of_type(MNG), *run.of_type(ADDON)]:
        assert run.waits_for(provider, waited), waited.name
    assert provider.inputs["enableServerSideApply"] in (True, "true")


def test_the_training_job_waits_for_the_gpu_pools_and_charts(run: Run) -> None:
    job = run.one(JOBSET)
    for waited in [_node_group(run, "gpu"), run.one(HELM, "nvidia-device-plugin")]:
        assert run.waits_for(job, waited), waited.name


# --- FSx -----------------------------------------------------------------------------------
def test_fsx_is_persistent_2_encrypted_in_the_gpu_zone(run: Run) -> None:
    fsx = run.one("aws:fsx/lustreFileSystem:LustreFileSystem").inputs
    assert fsx["deploymentType"] == "PERSISTENT_2"
    assert fsx["storageCapacity"] == 2400
    assert fsx["perUnitStorageThroughput"] == 250
    assert fsx["subnetIds"] == GPU_SUBNET
    assert fsx["kmsKeyId"].startswith("arn:aws:kms:")
    assert fsx["securityGroupIds"] == [f"sg-{PREFIX}-fsx"]


LUSTRE = {(988, 988), (1018, 1023)}


def _lustre_sources(run: Run, group: str) -> set[tuple[int, int, str]]:
    rules = [r.inputs for r in run.of_type(INGRESS) if r.inputs["securityGroupId"] == group]
    assert all(r["ipProtocol"] == "tcp" and "cidrIpv4" not in r for r in rules)
    return {(r["fromPort"], r["toPort"], r["referencedSecurityGroupId"]) for r in rules}


def test_the_fsx_security_group_opens_988_and_1018_1023_to_the_nodes_and_itself_only(
        run: Run) -> None:
    fsx_sg = f"sg-{PREFIX}-fsx"
    assert _lustre_sources(run, fsx_sg) == {
        (low, high, source) for low, high in LUSTRE
        for source in (aws_fake.CLUSTER_SECURITY_GROUP, fsx_sg)}
    # ... and the clients' group admits the file system back (the FSx guide's client rules).
    assert _lustre_sources(run, aws_fake.CLUSTER_SECURITY_GROUP) == {
        (low, high, fsx_sg) for low, high in LUSTRE}


def test_every_node_that_may_mount_fsx_carries_the_lustre_client_group(run: Run) -> None:
    """GPU nodes (training) name the cluster security group on every interface; the system
    template names none, so EKS puts the cluster security group on the system nodes, where
    dataset.prepare runs with its default pool: cpu."""
    for key in ("onDemand", "spot"):
        for interface in run.one(LAUNCH_TEMPLATE, key).inputs["networkInterfaces"]:
            assert aws_fake.CLUSTER_SECURITY_GROUP in interface["securityGroups"]
    system = run.one(LAUNCH_TEMPLATE, "-system").inputs
    assert "vpcSecurityGroupIds" not in system and "networkInterfaces" not in system


def test_no_dataset_association_without_an_import_uri(run: Run) -> None:
    assert not run.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")


# --- S3 and identity -----------------------------------------------------------------------
def test_the_bucket_is_retained_on_destroy_by_default(run: Run) -> None:
    bucket = run.one(BUCKET)
    assert bucket.retain_on_delete is True
    assert bucket.inputs["forceDestroy"] is False


def test_the_bucket_is_versioned_encrypted_private_and_owner_enforced(run: Run) -> None:
    versioning = run.one("aws:s3/bucketVersioning:BucketVersioning").inputs
    assert versioning["versioningConfiguration"]["status"] == "Enabled"
    sse = run.one("aws:s3/bucketServerSideEncryptionConfiguration:"
                  "BucketServerSideEncryptionConfiguration").inputs["rules"][0]
    # SSE-S3, not the stack's KMS key: retained checkpoints must outlive that key.
    assert sse["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"
    block = run.one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy",
                                          "ignorePublicAcls", "restrictPublicBuckets"))
    ownership = run.one("aws:s3/bucketOwnershipControls:BucketOwnershipControls").inputs
    assert ownership["rule"]["objectOwnership"] == "BucketOwnerEnforced"


def test_the_irsa_role_trusts_exactly_the_jobs_service_account(run: Run) -> None:
    statements = _trust(run, "-job")["Statement"]
    assert len(statements) == 1
    statement = statements[0]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Principal"]["Federated"] == f"arn:aws:iam::123456789012:oidc-provider/{OIDC}"
    assert statement["Condition"] == {"StringEquals": {
        f"{OIDC}:sub": "system:serviceaccount:torchrec:trainer",
        f"{OIDC}:aud": "sts.amazonaws.com",
    }}


def test_the_job_role_reaches_only_its_bucket(run: Run) -> None:
    policy = json.loads(run.one("aws:iam/rolePolicy:RolePolicy", "-job").inputs["policy"])
    resources = {res for s in policy["Statement"] for res in
                 ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])}
    s3_resources = {r for r in resources if r.startswith("arn:aws:s3")}
    assert s3_resources and all(r.startswith("arn:aws:s3:::torchrec-cloud-aws-ckpt-") for r in s3_resources)
    assert "*" not in resources


def test_the_contract_gives_the_job_the_role_and_checkpoint_uri(run: Run) -> None:
    account = run.one("kubernetes:core/v1:ServiceAccount").inputs
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].endswith(f"{PREFIX}-job")
    assert run.outputs["checkpoint_uri"].startswith("s3://torchrec-cloud-aws-ckpt-")
    assert run.outputs["checkpoint_uri"].endswith("/dlrm")


# --- interconnect, image, outputs ----------------------------------------------------------
def test_the_job_requests_efa_devices_from_the_catalog(run: Run) -> None:
    container = training_pod_template(run)["spec"]["containers"][0]
    efa = machine(Cloud.AWS, "p4d.24xlarge").efa_interfaces
    assert str(container["resources"]["limits"]["vpc.amazonaws.com/efa"]) == str(efa)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"


# The capabilities the Pod Security "baseline" level lets a container add
# (https://kubernetes.io/docs/concepts/security/pod-security-standards/, Baseline, "Capabilities").
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                         "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                         "SYS_CHROOT"}


def test_efa_pods_ask_for_no_capability_and_their_namespace_enforces_baseline(run: Run) -> None:
    """EFA needs unlimited locked memory, which the GPU nodes' containerd gives every container;
    IPC_LOCK does nothing for uid 1000 and would only force the `privileged` level."""
    pod = training_pod_template(run)["spec"]
    trainer = pod["containers"][0]
    assert "add" not in trainer["securityContext"]["capabilities"]
    assert trainer["securityContext"]["runAsUser"] == 1000
    for container in [*pod["containers"], *pod.get("initContainers", [])]:
        context = container["securityContext"]
        assert set(context["capabilities"].get("add", [])) <= BASELINE_CAPABILITIES, container["name"]
        assert context["privileged"] is False, container["name"]
    assert not any(key in pod for key in ("hostNetwork", "hostPID", "hostIPC"))
    assert not [v for v in pod["volumes"] if "hostPath" in v]
    (namespace,) = run.of_type("kubernetes:core/v1:Namespace")
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAP_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


def test_only_the_jobs_namespace_may_request_the_efa_devices(run: Run) -> None:
    """`vpc.amazonaws.com/efa` hands a pod the node's EFA devices, whose RDMA traffic the VPC
    CNI's network policy does not see: an admission policy denies it to pods in every other
    namespace (as `rdma/ib` on Azure), valid against the official 1.34 schemas, and the job
    waits for it."""
    import kubernetes_validate
    from tests.k8s_manifests import manifest_of

    policy, binding = run.one(VAP, "efa-policy"), run.one(VAP_BINDING, "efa-policy")
    for resource in (policy, binding):
        kubernetes_validate.validate(manifest_of(resource), "1.34.0", strict=True)
        assert resource.provider_urn == run.named(f"{PREFIX}-k8s").urn
    spec = policy.inputs["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["pods"] and rule["operations"] == ["CREATE"]
    (validation,) = spec["validations"]
    assert "'vpc.amazonaws.com/efa' in c.resources.requests" in validation["expression"]
    assert "'vpc.amazonaws.com/efa' in c.resources.limits" in validation["expression"]
    assert "initContainers" in spec["variables"][0]["expression"]
    bound = binding.inputs["spec"]
    assert bound["policyName"] == policy.inputs["metadata"]["name"]
    assert bound["validationActions"] == ["Deny"]
    (requirement,) = bound["matchResources"]["namespaceSelector"]["matchExpressions"]
    job = run.one(JOBSET)
    assert requirement == {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                           "values": [job.inputs["metadata"]["namespace"]]}
    assert training_pod_template(run)["spec"]["containers"][0]["resources"]["limits"][
        "vpc.amazonaws.com/efa"]
    assert run.waits_for(job, binding)


def test_a_cpu_preparation_runs_on_system_nodes_that_fsx_admits() -> None:
    """dataset.prepare's default pool is cpu: a system node, which carries only the cluster
    security group. The file system's group must admit Lustre from it, or the mount hangs."""
    run = run_stack("aws", overrides={"dataset": {
        "importUri": "s3://criteo-data/terabyte", "path": "criteo/prepared",
        "prepare": {"enabled": True, "source": "s3://raw-criteo/days/"}}})
    (prepare,) = run.of_type("kubernetes:batch/v1:Job")
    pod = prepare.inputs["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"torchrec-cloud/pool": "system"}
    assert any("persistentVolumeClaim" in v for v in pod["volumes"])  # it mounts the FSx claim
    system = run.one(LAUNCH_TEMPLATE, "-system").inputs
    assert "vpcSecurityGroupIds" not in system  # so EKS gives the nodes the cluster group
    sources = _lustre_sources(run, f"sg-{PREFIX}-fsx")
    assert {(988, 988, aws_fake.CLUSTER_SECURITY_GROUP),
            (1018, 1023, aws_fake.CLUSTER_SECURITY_GROUP)} <= sources


def test_the_training_pod_forces_nccl_onto_efa(run: Run) -> None:
    """NCCL may use the OFI plugin's network only and libfabric its efa provider only, so a node
    without EFA fails the first communicator instead of training over sockets."""
    container = training_pod_template(run)["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NCCL_NET_PLUGIN"] == "ofi"  # the image keeps only libnccl-net-ofi.so
    assert env["NCCL_NET"] == "Libfabric"  # what aws-ofi-nccl >= 1.12 registers
    assert env["FI_PROVIDER"] == "efa"
    assert env["NCCL_SOCKET_IFNAME"] == "^lo"


AWS_EFA_MACHINES = ["p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge",
                    "p5en.48xlarge"]


@pytest.mark.parametrize("name", AWS_EFA_MACHINES)
def test_every_efa_machine_gets_the_forced_ofi_environment(name: str) -> None:
    from trainer.gate.nccl_log import transport_of_network  # torch-free (fabric_gate: torch)

    gpu = machine(Cloud.AWS, name)
    spec = efa_interconnect(gpu, fabric=True)
    assert spec.pod_resources == {"vpc.amazonaws.com/efa": gpu.efa_interfaces, **hugepages(gpu)}
    assert spec.fabric_rails == gpu.efa_interfaces  # the gate's NIC count: every EFA device
    forced = {
        "NCCL_NET_PLUGIN": "ofi", "NCCL_NET": "Libfabric", "NCCL_TUNER_PLUGIN": "ofi",
        "FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1",
        "NCCL_SOCKET_IFNAME": "^lo", "NCCL_DEBUG": "WARN",
    }
    assert {k: v for k, v in spec.env.items() if k != "FI_EFA_USE_HUGE_PAGE"} == forced
    # The network the job forces is the one the fabric gate accepts for this machine.
    assert transport_of_network(spec.env["NCCL_NET"]) == gpu.fabric_transport == "efa"


@pytest.mark.parametrize("name, pages", [
    ("p4d.24xlarge", {}), ("p4de.24xlarge", {}),
    ("p5.48xlarge", {"hugepages-2Mi": "5120Mi"}), ("p5e.48xlarge", {"hugepages-2Mi": "5120Mi"}),
    ("p5en.48xlarge", {"hugepages-2Mi": "5120Mi"}),
])
def test_libfabric_uses_huge_pages_only_where_the_pod_is_granted_them(
        name: str, pages: dict) -> None:
    """A container that requests no huge pages has a hugetlb limit of 0: a huge-page fault there
    is SIGBUS, so libfabric must be told to use none. p5 pods ask for ADT's 5120Mi."""
    gpu = machine(Cloud.AWS, name)
    spec = efa_interconnect(gpu, fabric=True)
    granted = {k: v for k, v in spec.pod_resources.items() if k.startswith("hugepages-")}
    assert granted == pages == hugepages(gpu)
    if granted:
        assert "FI_EFA_USE_HUGE_PAGE" not in spec.env  # libfabric's default: use them
    else:
        assert spec.env["FI_EFA_USE_HUGE_PAGE"] == "0"


@pytest.fixture(scope="module")
def p5_run() -> Run:
    pools = {"onDemand": {"machineType": "p5.48xlarge"}, "spot": {"machineType": "p5.48xlarge"}}
    return run_stack("aws", {"gpuPools": pools})


def _quantity_mib(quantity: str) -> int:
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()
    return int(number) * (1024 if unit == "Gi" else 1)


def test_a_p5_pod_gets_its_huge_pages_and_the_empty_group_declares_them(p5_run: Run) -> None:
    """The pod's huge pages are requested and limited alike (Kubernetes refuses otherwise, and
    needs memory beside them); each GPU ASG declares the node's reserved pages to the
    autoscaler, or a group at zero nodes never grows for this pod."""
    resources = training_pod_template(p5_run)["spec"]["containers"][0]["resources"]
    assert resources["requests"]["hugepages-2Mi"] == resources["limits"]["hugepages-2Mi"] == "5120Mi"
    assert resources["requests"]["memory"] == resources["limits"]["memory"]
    for pool in ("gpu", "gpuspot"):
        declared = _asg_tags(p5_run, pool)[f"{TEMPLATE}/resources/hugepages-2Mi"]
        assert declared == "21122Mi"  # 192 vCPUs x 110 MiB / 2 MiB + 1 pages (efa-check.sh)
        assert _quantity_mib(resources["limits"]["hugepages-2Mi"]) <= _quantity_mib(declared)


def test_without_the_fabric_nothing_forces_ofi() -> None:
    spec = efa_interconnect(machine(Cloud.AWS, "p5.48xlarge"), fabric=False)
    assert spec.pod_resources == {} and "NCCL_NET" not in spec.env


# --- scale from zero: Cluster Autoscaler node-template tags on the ASGs ---------------------
ASG_TAG = "aws:autoscaling/tag:Tag"
TEMPLATE = "k8s.io/cluster-autoscaler/node-template"


def _asg_tags(run: Run, pool: str) -> dict[str, Any]:
    asg = aws_fake.auto_scaling_group_name(_group(run, pool)["nodeGroupName"])
    tags = [r.inputs for r in run.of_type(ASG_TAG) if r.inputs["autoscalingGroupName"] == asg
            and r.inputs["tag"]["key"].startswith(TEMPLATE)]
    assert all(t["tag"]["propagateAtLaunch"] is False for t in tags)  # for the autoscaler only
    return {t["tag"]["key"]: t["tag"]["value"] for t in tags}


def test_gpu_groups_have_fixed_names_to_find_their_auto_scaling_groups(run: Run) -> None:
    for pool in ("gpu", "gpuspot"):
        assert re.fullmatch(rf"{PREFIX}-{pool}-[0-9a-f]{{6}}", _group(run, pool)["nodeGroupName"])


def test_gpu_asgs_declare_gpus_efa_labels_and_taints_for_scale_from_zero(run: Run) -> None:
    gpu = machine(Cloud.AWS, "p4d.24xlarge")
    for pool in ("gpu", "gpuspot"):
        group = _group(run, pool)
        tags = _asg_tags(run, pool)
        assert not any("hugepages" in key for key in tags)  # p4d pods ask for none
        assert tags[f"{TEMPLATE}/resources/nvidia.com/gpu"] == str(gpu.gpu_count)
        assert tags[f"{TEMPLATE}/resources/vpc.amazonaws.com/efa"] == str(gpu.efa_interfaces)
        assert {k.removeprefix(f"{TEMPLATE}/label/"): v for k, v in tags.items()
                if "/label/" in k} == group["labels"]
        effects = {"NO_SCHEDULE": "NoSchedule"}
        assert {k.removeprefix(f"{TEMPLATE}/taint/"): v for k, v in tags.items()
                if "/taint/" in k} == {t["key"]: f"{t['value']}:{effects[t['effect']]}"
                                       for t in group["taints"]}


def test_the_efa_the_autoscaler_expects_is_what_the_pod_asks_for(run: Run) -> None:
    container = training_pod_template(run)["spec"]["containers"][0]
    limits = container["resources"]["limits"]
    declared = {k.removeprefix(f"{TEMPLATE}/resources/"): v
                for k, v in _asg_tags(run, "gpu").items() if "/resources/" in k}
    for resource in ("vpc.amazonaws.com/efa", "nvidia.com/gpu"):
        assert int(str(limits[resource])) <= int(declared[resource]), resource


def test_asg_tags_sit_under_the_component_keyed_by_pool_name(run: Run) -> None:
    component = run.one("torchrec-cloud:aws:GpuCluster")
    tags = run.of_type(ASG_TAG)
    assert tags and all(t.parent == component.urn for t in tags)
    for tag in tags:
        pool = "gpuspot" if "gpuspot" in tag.inputs["autoscalingGroupName"] else "gpu"
        assert tag.name.startswith(f"{PREFIX}-{pool}-")


def test_the_trainer_image_is_built_into_an_encrypted_scanned_ecr_repository(run: Run) -> None:
    repository = run.one("aws:ecr/repository:Repository").inputs
    assert repository["imageScanningConfiguration"]["scanOnPush"] is True
    assert repository["encryptionConfigurations"][0]["encryptionType"] == "KMS"
    image = run.one("docker-build:index:Image").inputs
    assert image["tags"][0].startswith("123456789012.dkr.ecr.us-east-1.amazonaws.com/")
    assert _unsecret(image["registries"])[0]["username"] == "AWS"
    assert run.outputs["trainer_image"].startswith("123456789012.dkr.ecr.")


def test_the_component_exports_cluster_kubeconfig_fs_and_bucket(run: Run) -> None:
    assert run.outputs["cluster_name"] == f"{PREFIX}-eks"
    assert run.outputs["file_system_id"] == "fs-0123456789abcdef0"
    assert "kubeconfig" in run.secret_outputs
    component = run.one("torchrec-cloud:aws:GpuCluster")
    assert all(r.parent for r in run.resources if r.type.startswith("aws:"))
    assert component.name == PREFIX


# --- variations ----------------------------------------------------------------------------
def test_retain_off_force_destroys_the_bucket() -> None:
    bucket = run_stack("aws", overrides={"checkpoints": {"retainOnDestroy": False}}).one(BUCKET)
    assert bucket.retain_on_delete is False
    assert bucket.inputs["forceDestroy"] is True


def test_fabric_off_has_no_efa_interfaces_plugin_or_devices() -> None:
    assert not [r for r in run_stack("aws", overrides={"interconnect": {"fabric": False}})
                .of_type(VAP) if "efa" in r.name]
    run = run_stack("aws", overrides={"interconnect": {"fabric": False, "placement": False}})
    template = run.one(LAUNCH_TEMPLATE, "onDemand").inputs
    assert "networkInterfaces" not in template and "placement" not in template
    assert not run.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert "aws-efa-k8s-device-plugin" not in {r.inputs["chart"] for r in run.of_type(HELM)}
    container = training_pod_template(run)["spec"]["containers"][0]
    assert "vpc.amazonaws.com/efa" not in container["resources"].get("limits", {})
    asg = aws_fake.auto_scaling_group_name(_group(run, "gpu")["nodeGroupName"])
    keys = {r.inputs["tag"]["key"] for r in run.of_type(ASG_TAG)
            if r.inputs["autoscalingGroupName"] == asg}
    assert f"{TEMPLATE}/resources/nvidia.com/gpu" in keys
    assert f"{TEMPLATE}/resources/vpc.amazonaws.com/efa" not in keys


def test_a_dataset_bucket_is_linked_and_readable_by_the_job() -> None:
    run = run_stack("aws", overrides={"dataset": {"importUri": "s3://criteo-data/terabyte"},
                                      "gpuPools": {"spot": {"enabled": False}},
                                      "job": {"image": "registry.acme-ml.io/trainer:1"}})
    association = run.one("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation").inputs
    assert association["dataRepositoryPath"] == "s3://criteo-data/terabyte"
    policy = json.loads(run.one("aws:iam/rolePolicy:RolePolicy", "-job").inputs["policy"])
    read = [s for s in policy["Statement"] if s["Sid"] == "ReadDataset"][0]
    assert read["Resource"] == "arn:aws:s3:::criteo-data/terabyte/*"
    assert len(run.of_type(MNG)) == 2  # system and on-demand: the spot group is disabled
    assert not run.of_type("aws:ecr/repository:Repository")  # image given: nothing built


def test_a_preparation_source_bucket_is_read_by_the_preparation_s_own_role_only() -> None:
    """The preparation's IRSA role trusts `torchrec/trainer-prepare` alone and reads its source
    prefix, nothing else: no checkpoint bucket; the trainer's role keeps the import prefix and
    does not read the raw source."""
    run = run_stack("aws", overrides={
        "dataset": {"importUri": "s3://criteo-data/terabyte", "path": "criteo/prepared",
                    "prepare": {"enabled": True, "source": "s3://raw-criteo/days/"}},
        "job": {"image": "registry.acme-ml.io/trainer:1"}})
    job = json.loads(run.one("aws:iam/rolePolicy:RolePolicy", "-job").inputs["policy"])
    reads = {s["Resource"] for s in job["Statement"] if s["Sid"].startswith("ReadDataset")}
    assert reads == {"arn:aws:s3:::criteo-data/terabyte/*"}
    prepare = json.loads(run.one("aws:iam/rolePolicy:RolePolicy", "-prepare").inputs["policy"])
    assert {a for s in prepare["Statement"] for a in [s["Action"]]} == {
        "s3:ListBucket", "s3:GetObject"}
    assert [s["Resource"] for s in prepare["Statement"] if s["Sid"] == "ReadDataset"] == [
        "arn:aws:s3:::raw-criteo/days/*"]
    listing = [s for s in prepare["Statement"] if s["Sid"] == "ListDataset"]
    assert listing[0]["Condition"]["StringLike"]["s3:prefix"] == ["days/*", "days"]
    trust = json.loads(run.one("aws:iam/role:Role", "-prepare").inputs["assumeRolePolicy"])
    [condition] = [s["Condition"]["StringEquals"] for s in trust["Statement"]]
    assert [v for k, v in condition.items() if k.endswith(":sub")] == [
        "system:serviceaccount:torchrec:trainer-prepare"]


def test_a_preparation_from_the_shared_file_system_gets_no_aws_role() -> None:
    run = run_stack("aws", overrides={
        "dataset": {"path": "criteo/prepared",
                    "prepare": {"enabled": True, "source": "criteo/raw"}},
        "job": {"image": "registry.acme-ml.io/trainer:1"}})
    assert not [r for r in run.of_type("aws:iam/role:Role") if "-prepare" in r.name]


FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
FINAL_BACKUP = "backup-0123456789abcdef0"


def test_checkpoints_on_fsx_kept_on_destroy_leave_a_final_backup_the_next_up_restores() -> None:
    on_fsx = {"checkpoints": {"location": "sharedFileSystem"}}
    first_run = run_stack("aws", overrides=on_fsx)
    first = first_run.one(FSX)
    # `pulumi destroy` deletes the file system but FSx keeps its final backup, tagged with the
    # stack so `aws fsx describe-backups` finds it ...
    assert first.inputs["skipFinalBackup"] is False
    assert first.inputs["finalBackupTags"]["torchrec-cloud/final-backup-of"] == PREFIX
    assert "backupId" not in first.inputs
    # The backup is encrypted with the stack's key: destroy keeps the key (a key pending deletion
    # cannot decrypt the backup), not its alias (the next `up` creates the alias again).
    key = first_run.one("aws:kms/key:Key")
    assert key.retain_on_delete and not first_run.one("aws:kms/alias:Alias").retain_on_delete
    # ... and the next `up` creates the file system from it; a later edit of the id never
    # replaces the file system (and its checkpoints).
    again = run_stack("aws", overrides={**on_fsx, "sharedFileSystem": {"backupId": FINAL_BACKUP}})
    restored = again.one(FSX)
    assert restored.inputs["backupId"] == FINAL_BACKUP and "backupId" in restored.ignore_changes
    assert restored.inputs["skipFinalBackup"] is False  # and kept again on the next destroy


def test_the_next_up_after_destroy_restores_the_final_backup_by_itself(monkeypatch) -> None:
    """Checkpoints kept in an FSx final backup come back without the user looking it up (AWS
    re-review B1): found by its tag, under this stack's prefix or the cut one of earlier
    versions; several are refused with their ids; a live stack never looks."""
    from tests.fakes import aws as aws_fake

    on_fsx = {"checkpoints": {"location": "sharedFileSystem"}}
    monkeypatch.setattr(aws_fake, "FINAL_BACKUPS", {FINAL_BACKUP: PREFIX,
                                                    "backup-0aaaaaaaaaaaaaaa1": "someone-else"})
    restored = run_stack("aws", overrides=on_fsx).one(FSX)
    assert restored.inputs["backupId"] == FINAL_BACKUP
    live = run_stack("aws", overrides=on_fsx, previous_outputs={"cloud": "aws"}).one(FSX)
    assert "backupId" not in live.inputs  # a live stack's file system is never re-created
    monkeypatch.setattr(aws_fake, "FINAL_BACKUPS", {FINAL_BACKUP: PREFIX,
                                                    "backup-0bbbbbbbbbbbbbbb2": PREFIX})
    refused = run_stack("aws", overrides=on_fsx, expect_error=True)
    assert not [r for r in refused.resources if r.type.startswith("aws:")]  # no cloud resource
    assert "backup-0bbbbbbbbbbbbbbb2" in str(refused.error) and FINAL_BACKUP in str(refused.error)
    assert "sharedFileSystem.backupId" in str(refused.error)


def test_every_destroy_up_cycle_restores_the_newest_final_backup_and_never_another_stacks(
        monkeypatch) -> None:
    """AWS review B1: a restored backup is not consumed, so after the second destroy two final
    backups carry the stack's tag. The newest is the one no other was made from (each file
    system's final backup names its source); a pinned backupId the last destroy superseded is
    refused (it would resume from older checkpoints); a backup another stack owns is never
    restored, even under a prefix both stacks' names cut to (security review C1)."""
    from tests.fakes import aws as aws_fake

    on_fsx = {"checkpoints": {"location": "sharedFileSystem"}}
    first = run_stack("aws", overrides=on_fsx).one(FSX)
    owner = first.inputs["finalBackupTags"]["torchrec-cloud-stack"]
    assert owner == "torchrec-cloud/aws" and "torchrec-cloud/restored-from" not in \
        first.inputs["finalBackupTags"]
    # First destroy: backup A. The next up restores A, and its file system's final backup says so.
    ours = {"torchrec-cloud/final-backup-of": PREFIX, "torchrec-cloud-stack": owner}
    monkeypatch.setattr(aws_fake, "FINAL_BACKUPS", {"backup-0aaaaaaaaaaaaaaa1": ours})
    second = run_stack("aws", overrides=on_fsx).one(FSX)
    assert second.inputs["backupId"] == "backup-0aaaaaaaaaaaaaaa1"
    assert second.inputs["finalBackupTags"]["torchrec-cloud/restored-from"] == \
        "backup-0aaaaaaaaaaaaaaa1"
    # Any later `up` of that live stack (a suspend, an upgrade) keeps the tag (AWS re-review N1:
    # it was dropped, so the next destroy's backup looked unrelated and the third up refused).
    second_run = run_stack("aws", overrides=on_fsx)
    live = run_stack("aws", overrides=on_fsx, previous_outputs=second_run.outputs).one(FSX)
    assert live.inputs["finalBackupTags"]["torchrec-cloud/restored-from"] == \
        "backup-0aaaaaaaaaaaaaaa1"
    # Second destroy: backup B made from A; A is still there. The third up restores B, not A,
    # and not a backup of another stack tagged with the same prefix.
    monkeypatch.setattr(aws_fake, "FINAL_BACKUPS", {
        "backup-0aaaaaaaaaaaaaaa1": ours,
        "backup-0bbbbbbbbbbbbbbb2": {**ours, "torchrec-cloud/restored-from": "backup-0aaaaaaaaaaaaaaa1"},
        "backup-0ccccccccccccccc3": {**ours, "torchrec-cloud-stack": "torchrec-cloud/aws-other"}})
    assert run_stack("aws", overrides=on_fsx).one(FSX).inputs["backupId"] == "backup-0bbbbbbbbbbbbbbb2"
    # A backupId pinned at A (as the old several-backups message asked) is now stale: refused.
    refused = run_stack("aws", overrides={**on_fsx, "sharedFileSystem": {
        "backupId": "backup-0aaaaaaaaaaaaaaa1"}}, expect_error=True)
    assert not [r for r in refused.resources if r.type.startswith("aws:")]
    assert "backup-0bbbbbbbbbbbbbbb2" in str(refused.error)
    assert "pulumi config rm --path sharedFileSystem.backupId" in str(refused.error)


def test_checkpoints_in_s3_or_not_kept_take_no_final_fsx_backup(run: Run) -> None:
    assert run.one(FSX).inputs["skipFinalBackup"] is True  # checkpoints are in S3
    assert not run.one("aws:kms/key:Key").retain_on_delete  # no backup needs the key
    dropped = run_stack("aws", overrides={"checkpoints": {"location": "sharedFileSystem",
                                                          "retainOnDestroy": False}})
    assert dropped.one(FSX).inputs["skipFinalBackup"] is True


def test_scratch_2_has_no_throughput_and_no_kms_key() -> None:
    run = run_stack("aws", overrides={"sharedFileSystem": {
        "deploymentType": "SCRATCH_2", "capacityGib": 1200, "throughputPerTib": None}})
    fsx = run.one("aws:fsx/lustreFileSystem:LustreFileSystem").inputs
    assert fsx["deploymentType"] == "SCRATCH_2"
    assert "perUnitStorageThroughput" not in fsx and "kmsKeyId" not in fsx


# --- bad settings are refused before any resource exists ----------------------------------
@pytest.mark.parametrize("overrides, setting", [
    ({"sharedFileSystem": {"capacityGib": 1000}}, "sharedFileSystem.capacityGib"),
    ({"sharedFileSystem": {"throughputPerTib": 300}}, "sharedFileSystem.throughputPerTib"),
    ({"sharedFileSystem": {"deploymentType": "PERSISTENT_1", "throughputPerTib": 250}},
     "sharedFileSystem.throughputPerTib"),
    ({"gpuPools": {"onDemand": {"machineType": "m6i.xlarge"}}}, "gpuPools.onDemand.machineType"),
    ({"gpuZones": ["us-east-1a", "us-east-1b"]}, "gpuZones"),
    ({"zones": ["us-east-1a"], "gpuZones": ["us-east-1a"]}, "zones"),
    ({"kubernetes": {"apiAccessCidrs": ["0.0.0.0/0"]}}, "kubernetes.apiAccessCidrs"),
    ({"dataset": {"importUri": "https://example.com/data"}}, "dataset.importUri"),
    # Checkpoints on a scratch file system kept on destroy: FSx takes no backup of SCRATCH_2.
    ({"checkpoints": {"location": "sharedFileSystem"}, "sharedFileSystem": {
        "deploymentType": "SCRATCH_2", "capacityGib": 1200, "throughputPerTib": None}},
     "sharedFileSystem.deploymentType"),
    ({"sharedFileSystem": {"backupId": "fs-0123456789abcdef0"}}, "sharedFileSystem.backupId"),
    # ... nor of a PERSISTENT_1 file system linked to S3 by its import path.
    ({"checkpoints": {"location": "sharedFileSystem"}, "dataset": {
        "importUri": "s3://criteo-data/terabyte"}, "sharedFileSystem": {
        "deploymentType": "PERSISTENT_1", "throughputPerTib": 200}}, "dataset.importUri"),
])
def test_bad_aws_settings_are_refused_before_any_resource(overrides: dict, setting: str) -> None:
    run = run_stack("aws", overrides=overrides, expect_error=True)
    assert run.resources == []
    assert f"torchrec-cloud:{setting}" in str(run.error)


# --- spot notice -> drain (infra/aws/interruption.py) ---------------------------------------
QUEUE = "aws:sqs/queue:Queue"
RULE = "aws:cloudwatch/eventRule:EventRule"
TARGET = "aws:cloudwatch/eventTarget:EventTarget"
NTH_TAG = "aws-node-termination-handler/torchrec-cloud-aws-eks"


def _nth(run: Run) -> harness.Captured:
    return run.one(HELM, "node-termination-handler")


def test_the_interruption_queue_receives_exactly_spot_notices_maintenance_and_terminations(
        run: Run) -> None:
    patterns = sorted((json.loads(r.inputs["eventPattern"]) for r in run.of_type(RULE)),
                      key=lambda p: p["detail-type"][0])
    assert patterns == [
        {"source": ["aws.health"], "detail-type": ["AWS Health Event"],
         "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]}},
        {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"],
         "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]}},
        {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    ]
    # Rebalance recommendations and ASG lifecycle actions stay with EKS managed node groups.
    kinds = {t for r in run.of_type(RULE) for t in json.loads(r.inputs["eventPattern"])["detail-type"]}
    assert not kinds & {"EC2 Instance Rebalance Recommendation",
                        "EC2 Instance-terminate Lifecycle Action"}


def test_every_rule_sends_to_the_interruption_queue(run: Run) -> None:
    queue_arn = "arn:aws:sqs:us-east-1:123456789012:torchrec-cloud-aws-nth"  # tests/fakes/aws.py
    rules = {r.inputs["name"] for r in run.of_type(RULE)}
    targets = run.of_type(TARGET)
    assert {t.inputs["rule"] for t in targets} == rules
    assert all(t.inputs["arn"] == queue_arn for t in targets)


def test_only_this_stacks_eventbridge_rules_can_send_to_the_queue(run: Run) -> None:
    policy = json.loads(run.one("aws:sqs/queuePolicy:QueuePolicy").inputs["policy"])
    (statement,) = policy["Statement"]
    assert statement["Effect"] == "Allow"
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Resource"].endswith(":torchrec-cloud-aws-nth")
    rule_arns = statement["Condition"]["ArnEquals"]["aws:SourceArn"]
    assert sorted(a.rsplit("/", 1)[1] for a in rule_arns) == sorted(
        r.inputs["name"] for r in run.of_type(RULE))


def test_the_queue_is_encrypted_and_keeps_events_only_as_long_as_a_notice(run: Run) -> None:
    queue = run.one(QUEUE).inputs
    assert queue["sqsManagedSseEnabled"] is True
    assert queue["messageRetentionSeconds"] == 300


def test_the_handler_role_only_reads_its_queue_and_describes_instances(run: Run) -> None:
    policy = json.loads(run.one("aws:iam/rolePolicy:RolePolicy", "-nth").inputs["policy"])
    grants = {(a, s["Resource"]) for s in policy["Statement"] for a in
              ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    queue = "arn:aws:sqs:us-east-1:123456789012:torchrec-cloud-aws-nth"
    assert grants == {("sqs:ReceiveMessage", queue), ("sqs:DeleteMessage", queue),
                      ("ec2:DescribeInstances", "*")}
    condition = _trust(run, "-nth")["Statement"][0]["Condition"]["StringEquals"]
    assert condition[f"{OIDC}:sub"] == "system:serviceaccount:kube-system:aws-node-termination-handler"


def test_the_handler_chart_is_pinned_and_in_queue_mode(run: Run) -> None:
    nth = _nth(run).inputs
    assert nth["chart"] == "oci://public.ecr.aws/aws-ec2/helm/aws-node-termination-handler"
    assert nth["version"] == "0.27.6"
    values = nth["values"]
    assert values["enableSqsTerminationDraining"] is True
    assert values["queueURL"].endswith("/torchrec-cloud-aws-nth")
    assert values["awsRegion"] == "us-east-1"
    assert values["podTerminationGracePeriod"] == -1  # each pod's own grace
    assert values["checkTagBeforeDraining"] is True and values["managedTag"] == NTH_TAG
    annotations = values["serviceAccount"]["annotations"]
    assert annotations["eks.amazonaws.com/role-arn"].endswith(f"{PREFIX}-nth")


def test_the_handler_runs_on_the_system_pool_never_on_a_node_it_drains(run: Run) -> None:
    values = _nth(run).inputs["values"]
    assert values["nodeSelector"] == {"torchrec-cloud/pool": "system"}
    assert "tolerations" not in values


def test_every_node_instance_volume_and_interface_carries_the_stack_and_handler_tags(
        run: Run) -> None:
    """Launch templates do not get the provider's default tags: GPU instances, their volumes
    and EFA interfaces would miss the cost tags, and the handler would not know the nodes."""
    for template in run.of_type(LAUNCH_TEMPLATE):
        specs = {spec["resourceType"]: spec["tags"] for spec in template.inputs["tagSpecifications"]}
        assert set(specs) == {"instance", "volume", "network-interface"}, template.name
        for tags in specs.values():
            assert tags == {"project": "torchrec-cloud", NTH_TAG: "true"}, template.name
    # GPU nodes launched after a tag edit get the edited tags from their Auto Scaling group.
    for pool in ("gpu", "gpuspot"):
        launch_tags = {t.inputs["tag"]["key"]: t.inputs["tag"]["value"]
                       for t in run.of_type(ASG_TAG) if t.name.startswith(f"{PREFIX}-{pool}-tag-")
                       and t.inputs["tag"]["propagateAtLaunch"]}
        assert launch_tags == {"project": "torchrec-cloud", NTH_TAG: "true"}, pool


def _gpu_launch_inputs(run: Run) -> dict[str, Any]:
    """What EKS rolls GPU nodes for: the GPU groups and their launch templates' inputs, less
    what the engine ignores on the templates (their ignore_changes)."""
    found: dict[str, Any] = {}
    for key in ("onDemand", "spot"):
        template = run.one(LAUNCH_TEMPLATE, key)
        found[template.name] = {k: v for k, v in template.inputs.items()
                                if k not in template.ignore_changes}
    for pool in ("gpu", "gpuspot"):
        found[pool] = _group(run, pool)
    return found


def test_a_tag_edit_rolls_no_gpu_node_and_reaches_the_nodes_launched_after_it(run: Run) -> None:
    """Each launch template edit is a new version, and a group following its template's latest
    version replaces every node for it (surging new p4d nodes beyond the quota; a Capacity Block
    group refuses the update unless at zero). Tags go to the Auto Scaling group instead."""
    edited = run_stack("aws", overrides={"tags": {"project": "torchrec-cloud", "team": "ranking"}})
    assert _gpu_launch_inputs(edited) == _gpu_launch_inputs(run)
    for key in ("onDemand", "spot"):
        assert "tagSpecifications" in edited.one(LAUNCH_TEMPLATE, key).ignore_changes
    team = [t.inputs for t in edited.of_type(ASG_TAG) if t.inputs["tag"]["key"] == "team"]
    assert len(team) == 2  # one per GPU group
    assert all(t["tag"] == {"key": "team", "value": "ranking", "propagateAtLaunch": True}
               for t in team)


def test_the_handler_starts_after_its_queue_policy_rules_and_role(run: Run) -> None:
    nth = _nth(run)
    for waited in [run.one("aws:sqs/queuePolicy:QueuePolicy"),
                   run.one("aws:iam/rolePolicy:RolePolicy", "-nth"), *run.of_type(TARGET)]:
        assert run.waits_for(nth, waited), waited.name


def test_efa_nodes_give_containers_unlimited_locked_memory_for_the_non_root_trainer(run: Run) -> None:
    """RDMA registration needs RLIMIT_MEMLOCK; IPC_LOCK does nothing for uid 1000."""
    import base64

    import yaml

    from infra.aws.node_groups import UNLIMITED

    gpu_templates = [t for t in run.of_type("aws:ec2/launchTemplate:LaunchTemplate")
                     if t.inputs.get("networkInterfaces")]
    assert gpu_templates
    for template in gpu_templates:
        mime = base64.b64decode(template.inputs["userData"]).decode()
        assert "Content-Type: application/node.eks.aws" in mime
        node_config = yaml.safe_load(mime.split("application/node.eks.aws")[1].split("--TORCHREC")[0])
        assert node_config["kind"] == "NodeConfig"
        rlimits = {r["type"]: r for r in
                   node_config["spec"]["containerd"]["baseRuntimeSpec"]["process"]["rlimits"]}
        assert rlimits["RLIMIT_MEMLOCK"]["soft"] == rlimits["RLIMIT_MEMLOCK"]["hard"] == UNLIMITED
        # nodeadm merges through float64 JSON; the value must come back exactly, within uint64.
        assert int(float(UNLIMITED)) == UNLIMITED < 2**64 and UNLIMITED >= 2**50
        assert rlimits["RLIMIT_NOFILE"] == {"type": "RLIMIT_NOFILE", "soft": 65536, "hard": 1048576}


# --- capacity arrives when the job needs it: Cluster Autoscaler (infra/aws/autoscaler.py) ---
CA = "cluster-autoscaler"


def test_the_autoscaler_chart_and_image_are_pinned_to_the_clusters_kubernetes_minor(
        run: Run) -> None:
    release = run.one(HELM, CA).inputs
    assert release["chart"] == CA and release["version"] == "9.59.0"
    assert release["repositoryOpts"]["repo"] == "https://kubernetes.github.io/autoscaler"
    image = release["values"]["image"]
    assert image["repository"] == "registry.k8s.io/autoscaling/cluster-autoscaler"
    version = run.one("eks:index:Cluster").inputs["version"]
    assert image["tag"].startswith(f"v{version}.")  # CA minor == Kubernetes minor


@pytest.mark.parametrize("day", [date(2026, 11, 26), date(2027, 6, 1), date(2028, 6, 1)])
def test_every_minor_eks_lists_has_an_autoscaler_image(day: date) -> None:
    """Of its own minor where the add-on table has one (infra/addon_versions.py); past the
    table, the newest image (with a warning), never a KeyError."""
    from infra.addon_versions import choose
    from infra.aws.autoscaler import ADDON, image_tag

    for row in aws_fake.eks_listing(day):
        minor = row["clusterVersion"]
        chosen = choose(ADDON, minor)
        if chosen.warning:
            assert image_tag(minor) == chosen.row.version, (day, minor)
        else:
            assert image_tag(minor).startswith(f"v{minor}."), (day, minor)


def test_the_autoscaler_discovers_this_clusters_groups_and_keeps_gpu_groups_apart(run: Run) -> None:
    values = run.one(HELM, CA).inputs["values"]
    assert values["cloudProvider"] == "aws" and values["awsRegion"] == "us-east-1"
    assert values["autoDiscovery"] == {"clusterName": f"{PREFIX}-eks"}
    args = values["extraArgs"]
    assert args["expander"] == "least-waste"
    assert args["balance-similar-node-groups"] is False  # one zone, one placement group each
    assert args["scale-down-unneeded-time"] == "10m"  # idle GPU nodes go back to zero
    assert values["nodeSelector"] == {"torchrec-cloud/pool": "system"}
    assert "tolerations" not in values  # never on a GPU node it may remove


def test_a_node_the_health_gate_left_out_never_blocks_its_group_from_growing(run: Run) -> None:
    """The gate's taint is a status taint: left out of the empty group's template (so a gang
    the gate left out whole gets nodes again), the tainted node still counted as ready (so it
    is removed as unneeded once empty, not kept as a never-ready upcoming node)."""
    from trainer.node_taint import TAINT_KEY
    from workloads.waiting import UNHEALTHY_TAINT

    args = run.one(HELM, CA).inputs["values"]["extraArgs"]
    assert args["status-taint"] == TAINT_KEY == UNHEALTHY_TAINT
    assert "ignore-taint" not in args and "startup-taint" not in args
    # A tainted empty node goes after scale-down-unneeded-time down to the group's minimum,
    # which the shipped GPU groups keep at zero: the node is replaced by the next scale-up.
    for group in run.of_type(MNG):
        if group.name != f"{PREFIX}-system":
            assert group.inputs["scalingConfig"]["minSize"] == 0, group.name


def test_a_gpu_group_held_above_zero_says_how_to_replace_a_node_the_gate_left_out(
        warnings_logged: list[str]) -> None:
    run_stack("aws", overrides={"gpuPools": {"onDemand": {"minNodes": 1, "desiredNodes": 1,
                                                                   "maxNodes": 3}}})
    (advice,) = [w for w in warnings_logged if "status-taint.cluster-autoscaler.kubernetes.io/torchrec-cloud-unhealthy" in w]
    assert "minNodes 1" in advice and "terminate-instance-in-auto-scaling-group" in advice
    assert "--no-should-decrement-desired-capacity" in advice


def test_a_gpu_node_may_take_the_catalogs_ready_budget_and_returning_capacity_is_used_in_minutes(
        run: Run) -> None:
    args = run.one(HELM, CA).inputs["values"]["extraArgs"]
    budget = machine(Cloud.AWS, "p4d.24xlarge").node_ready_minutes
    # Neither a scale-up timeout nor an "unready" removal before the budget is spent ...
    assert args["max-node-provision-time"] == f"{budget}m"
    assert args["scale-down-unready-time"] == f"{budget}m"
    assert args["max-node-startup-time"] == f"{budget}m"  # registered -> GPUs advertised
    assert budget >= 30  # the defaults (15m, 20m) were shorter
    # ... and after a failed scale-up (no capacity) a retry within 5 minutes, not 30.
    assert args["initial-node-group-backoff-duration"] == "1m"
    assert args["max-node-group-backoff-duration"] == "5m"


def test_the_startup_time_flag_goes_only_to_autoscaler_images_that_take_it() -> None:
    """An unknown flag stops the autoscaler binary: before 1.35 it is left out."""
    from infra.aws.autoscaler import startup_time_flag

    assert startup_time_flag("v1.34.5", 30) == {}
    assert startup_time_flag("v1.35.2", 30) == {"max-node-startup-time": "30m"}
    assert startup_time_flag("v1.36.1", 45) == {"max-node-startup-time": "45m"}


def test_the_autoscaler_role_resizes_only_this_clusters_groups(run: Run) -> None:
    policy = json.loads(run.one("aws:iam/rolePolicy:RolePolicy", "cluster-autoscaler").inputs["policy"])
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    writes = by_sid["ScaleThisClustersGroupsOnly"]
    assert sorted(writes["Action"]) == ["autoscaling:SetDesiredCapacity",
                                        "autoscaling:TerminateInstanceInAutoScalingGroup"]
    assert writes["Condition"] == {"Null": {
        f"autoscaling:ResourceTag/k8s.io/cluster-autoscaler/{PREFIX}-eks": "false"}}
    reads = by_sid["DiscoverGroupsAndInstanceTypes"]["Action"]
    assert all(a.split(":")[1].startswith(("Describe", "Get")) for a in reads)
    # Labels and taints of a never-scaled group, of this cluster's groups only.
    assert by_sid["ReadThisClustersNodeGroups"] == {
        "Sid": "ReadThisClustersNodeGroups", "Effect": "Allow", "Action": "eks:DescribeNodegroup",
        "Resource": f"arn:aws:eks:us-east-1:{aws_fake.ACCOUNT}:nodegroup/{PREFIX}-eks/*"}
    assert "autoscaling:UpdateAutoScalingGroup" not in json.dumps(policy)
    condition = _trust(run, "cluster-autoscaler")["Statement"][0]["Condition"]["StringEquals"]
    assert condition[f"{OIDC}:sub"] == "system:serviceaccount:kube-system:cluster-autoscaler"
    assert values_role(run).endswith(f"{PREFIX}-cluster-autoscaler")
    assert run.waits_for(run.one(HELM, CA), run.one("aws:iam/rolePolicy:RolePolicy", "cluster-autoscaler"))


def values_role(run: Run) -> str:
    annotations = run.one(HELM, CA).inputs["values"]["rbac"]["serviceAccount"]["annotations"]
    return annotations["eks.amazonaws.com/role-arn"]


def test_pulumi_never_resets_a_size_the_autoscaler_chose(run: Run) -> None:
    for group in run.of_type(MNG):
        assert group.inputs["ignoreScalingChanges"] is True, group.name


def test_a_running_training_pod_keeps_its_node_from_scale_down(run: Run) -> None:
    annotations = training_pod_template(run)["metadata"]["annotations"]
    assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"


def test_gpu_nodes_carry_the_autoscalers_gpu_label_so_it_does_not_scale_up_twice(run: Run) -> None:
    for pool in ("gpu", "gpuspot"):
        assert _group(run, pool)["labels"]["k8s.amazonaws.com/accelerator"] == "nvidia-a100"
        assert _asg_tags(run, pool)[f"{TEMPLATE}/label/k8s.amazonaws.com/accelerator"] == "nvidia-a100"


def test_the_spot_job_starts_from_zero_spot_nodes_and_the_autoscaler_can_grow_them() -> None:
    """`job.pool: spot` with the spot group at 0 nodes: the job selects and tolerates exactly what
    the spot ASG's node-template tags declare, so the autoscaler sees a group that fits."""
    run = run_stack("aws", overrides={"job": {"pool": "spot"}})
    spot = _group(run, "gpuspot")
    assert spot["scalingConfig"]["desiredSize"] == 0 and spot["scalingConfig"]["maxSize"] >= 2
    pod = training_pod_template(run)["spec"]
    tags = _asg_tags(run, "gpuspot")
    declared_labels = {k.removeprefix(f"{TEMPLATE}/label/"): v for k, v in tags.items() if "/label/" in k}
    required = [(k, [v]) for k, v in (pod.get("nodeSelector") or {}).items()]
    for term in (pod.get("affinity", {}).get("nodeAffinity", {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution", {})
                 .get("nodeSelectorTerms", [])):
        for expression in term.get("matchExpressions", []):
            assert expression["operator"] == "In"
            required.append((expression["key"], expression["values"]))
    assert required
    for key, values in required:
        assert declared_labels.get(key) in values, key
    tolerated = {t["key"] for t in pod["tolerations"]}
    assert {k.removeprefix(f"{TEMPLATE}/taint/") for k in tags if "/taint/" in k} <= tolerated


# --- ordering: what a cloud API checks at creation is created first ------------------------
def _lustre_rules(run: Run) -> list[harness.Captured]:
    return [r for r in run.of_type(INGRESS) + run.of_type(
        "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule") if "lustre" in r.name]


def test_fsx_is_created_after_the_lustre_rules_it_checks_not_after_the_cluster(run: Run) -> None:
    """CreateFileSystem checks that its group admits Lustre from itself; the client rules name
    the EKS cluster's security group, so waiting for them would start FSx after EKS."""
    fsx = run.one("aws:fsx/lustreFileSystem:LustreFileSystem")
    own = [r for r in _lustre_rules(run) if r.inputs["securityGroupId"] == f"sg-{PREFIX}-fsx"
           and r.inputs["referencedSecurityGroupId"] == f"sg-{PREFIX}-fsx"]
    assert len(own) == 4  # 988 and 1018-1023, in and out
    for rule in own:
        assert run.waits_for(fsx, rule), rule.name
    assert not run.waits_for(fsx, run.one("eks:index:Cluster"))


def test_node_groups_launch_after_routes_out_the_efa_and_every_lustre_rule(run: Run) -> None:
    lustre = _lustre_rules(run)
    assert len(lustre) == 10  # FSx: in and out, self and clients; clients: in from FSx
    waited = [*run.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation"),
              run.one("aws:ec2/vpcEndpoint:VpcEndpoint"),
              *[r for r in run.of_type(INGRESS) if "gpu-nodes" in r.name], *lustre]
    for group in run.of_type(MNG):
        for earlier in waited:
            assert run.waits_for(group, earlier), (group.name, earlier.name)


def test_the_control_plane_log_group_exists_before_eks_and_expires_its_logs(run: Run) -> None:
    group = run.one("aws:cloudwatch/logGroup:LogGroup").inputs
    assert group["name"] == f"/aws/eks/{PREFIX}-eks/cluster"
    assert group["retentionInDays"] == 90
    assert run.waits_for(run.one("eks:index:Cluster"), run.one("aws:cloudwatch/logGroup:LogGroup"))


LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
CONTROL_PLANE_LOGS = f"/aws/eks/{PREFIX}-eks/cluster"


def test_the_audit_log_is_kept_on_destroy_as_long_as_the_checkpoints_are(run: Run) -> None:
    group = run.one(LOG_GROUP)
    assert group.retain_on_delete and group.import_id == ""  # a first run creates it
    gone = run_stack("aws", overrides={"checkpoints": {"retainOnDestroy": False}})
    assert not gone.one(LOG_GROUP).retain_on_delete


@pytest.mark.parametrize("retain", [True, False], ids=["kept-by-destroy", "recreated-by-eks"])
def test_a_second_up_after_destroy_adopts_the_control_plane_log_group_left_behind(
        retain: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept by `destroy` (checkpoints.retainOnDestroy), or deleted and then created again by
    EKS's service-linked role writing late logs (terraform-aws-eks#2486, #2763): either way the
    group exists when the next `up` starts, which must import it, not fail on
    ResourceAlreadyExistsException before EKS exists."""
    overrides = {"checkpoints": {"retainOnDestroy": retain}}
    monkeypatch.setattr(aws_fake, "EXISTING_LOG_GROUPS", set())
    first = run_stack("aws", overrides=overrides)
    assert first.one(LOG_GROUP).import_id == ""
    monkeypatch.setattr(aws_fake, "EXISTING_LOG_GROUPS", {CONTROL_PLANE_LOGS})
    second = run_stack("aws", overrides=overrides)  # no outputs: destroy removed them
    group = second.one(LOG_GROUP)
    assert group.import_id == CONTROL_PLANE_LOGS and group.urn == first.one(LOG_GROUP).urn
    assert group.inputs["retentionInDays"] == 90 and group.retain_on_delete is retain
    assert second.waits_for(second.one(CLUSTER), group)


def test_a_log_group_that_only_starts_like_the_control_planes_is_not_adopted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The lookup is by prefix (an absent group is an empty answer, not the singular data
    source's "empty result" error): only the exact name is the control plane's."""
    monkeypatch.setattr(aws_fake, "EXISTING_LOG_GROUPS", {CONTROL_PLANE_LOGS + "-2025"})
    assert run_stack("aws").one(LOG_GROUP).import_id == ""


def test_a_log_group_check_cloudwatch_refuses_stops_the_run_before_any_cloud_resource(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import fakes

    def denied(args: pulumi.runtime.MockCallArgs) -> Any:
        return {}, [("", "reading CloudWatch Logs Log Groups: AccessDeniedException: "
                         "not authorized to perform: logs:DescribeLogGroups")]

    monkeypatch.setitem(fakes.CALLS, "aws:cloudwatch/getLogGroups:getLogGroups", denied)
    refused = run_stack("aws", expect_error=True)
    assert "logs:DescribeLogGroups" in str(refused.error)
    assert not [r for r in refused.resources if r.type.startswith("aws:") and r.custom]


# --- smaller items --------------------------------------------------------------------------
def test_s3_traffic_takes_the_free_gateway_endpoint_not_the_nat(run: Run) -> None:
    endpoint = run.one("aws:ec2/vpcEndpoint:VpcEndpoint").inputs
    assert endpoint["serviceName"] == "com.amazonaws.us-east-1.s3"
    assert endpoint["vpcEndpointType"] == "Gateway"
    private = run.one("aws:ec2/routeTable:RouteTable", "private")
    assert endpoint["routeTableIds"] == [f"{private.name}-id"]  # the mocks' id for it


def test_pruned_checkpoints_and_cut_short_uploads_expire(run: Run) -> None:
    rule, _ = run.one("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration").inputs["rules"]
    assert rule["status"] == "Enabled" and rule["filter"] == {"prefix": ""}
    assert rule["noncurrentVersionExpiration"]["noncurrentDays"] == 7
    assert rule["abortIncompleteMultipartUpload"]["daysAfterInitiation"] == 1


def test_the_telemetry_mirror_s_overwritten_copies_expire_after_a_day() -> None:
    """The trainer copies metrics.jsonl whole to <checkpoint_uri>/telemetry/ every minute: on
    the versioned bucket each copy leaves the last one as a noncurrent version, which the
    checkpoints' week would keep (stored bytes growing with the square of the run's length).
    The rule follows the job's name, the prefix the trainer writes under."""
    run = run_stack("aws", overrides={"job": {"name": "ctr"}})
    _, rule = run.one("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration").inputs["rules"]
    assert rule["status"] == "Enabled" and rule["filter"] == {"prefix": "ctr/telemetry/"}
    assert rule["noncurrentVersionExpiration"] == {"noncurrentDays": 1}
    assert "expiration" not in rule  # the current copy stays
    args = training_pod_template(run)["spec"]["containers"][0]["args"]
    (uri,) = [a for a in args if str(a).startswith("--telemetry_dir=")]
    bucket = run.outputs["checkpoint_uri"].split("/")[2]
    assert uri == f"--telemetry_dir=s3://{bucket}/ctr/telemetry"  # the prefix the rule names


def test_the_efa_device_plugin_may_run_on_every_catalog_efa_machine(run: Run) -> None:
    """The chart's daemonset admits only the instance types in supportedInstanceLabels (aws/eks-charts
    @ 5239609, stable/aws-efa-k8s-device-plugin/templates/daemonset.yaml); a catalog EFA machine
    missing from the pinned chart's own list would get no EFA devices and its pods stay Pending."""
    labels = run.one(HELM, "aws-efa-k8s-device-plugin").inputs["values"]["supportedInstanceLabels"]
    efa = {m.name for m in MACHINES if m.interconnect == Interconnect.EFA}
    assert efa and labels["keys"] == ["node.kubernetes.io/instance-type"]
    assert set(labels["values"]) == efa


def test_the_efa_device_plugin_chart_is_a_current_one(run: Run) -> None:
    release = run.one(HELM, "aws-efa-k8s-device-plugin").inputs
    assert release["version"] == "v0.5.30"  # aws/eks-charts, July 2026; v0.5.7 was a year older


def test_extended_support_when_accepted_keeps_the_cluster_on_extended_support() -> None:
    run = run_stack("aws", overrides={"kubernetes": {"version": "1.33", "extendedSupport": True}})
    cluster = run.one("eks:index:Cluster").inputs
    assert cluster["version"] == "1.33"
    assert cluster["upgradePolicy"] == {"supportType": "EXTENDED"}
    assert run.one(HELM, CA).inputs["values"]["image"]["tag"].startswith("v1.33.")


# --- zones that offer the machine (infra/aws/zones.py) --------------------------------------
def test_zone_ids_are_accepted_and_land_in_the_same_subnets_as_their_names() -> None:
    by_id = run_stack("aws", overrides={"zones": ["use1-az4", "use1-az6"], "gpuZones": ["use1-az4"]})
    subnets = {r.name: r.inputs for r in by_id.of_type("aws:ec2/subnet:Subnet")}
    assert subnets[f"{PREFIX}-private-us-east-1a"]["availabilityZone"] == "us-east-1a"
    assert subnets[f"{PREFIX}-private-us-east-1a"]["cidrBlock"] == subnet_cidrs("10.0.0.0/16", "us-east-1a")[0]
    assert _group(by_id, "gpu")["subnetIds"] == [GPU_SUBNET]


def test_a_gpu_zone_without_the_machine_is_refused_with_the_zones_that_offer_it() -> None:
    run = run_stack("aws", overrides={"zones": ["us-east-1a", "us-east-1f"], "gpuZones": ["us-east-1f"]},
                    expect_error=True)
    message = str(run.error)
    assert "torchrec-cloud:gpuZones = 'us-east-1f'" in message
    assert "us-east-1f (use1-az5) does not offer p4d.24xlarge" in message
    assert "us-east-1a (use1-az4)" in message and "us-east-1c (use1-az1)" in message
    assert not [r for r in run.resources if r.type.startswith(("aws:ec2", "eks:"))]


def test_a_zone_eks_does_not_accept_for_cluster_subnets_is_refused() -> None:
    run = run_stack("aws", overrides={"zones": ["us-east-1a", "us-east-1e"]}, expect_error=True)
    assert "torchrec-cloud:zones = 'us-east-1e'" in str(run.error)
    assert "use1-az3, a zone EKS does not accept" in str(run.error)


def test_an_unknown_zone_is_refused_with_the_regions_zones() -> None:
    run = run_stack("aws", overrides={"zones": ["us-east-1a", "use1-az9"]}, expect_error=True)
    assert "torchrec-cloud:zones = 'use1-az9'" in str(run.error)
    assert "us-east-1b (use1-az6)" in str(run.error)


# --- capacity reservations (infra/aws/reservations.py) --------------------------------------
def test_an_on_demand_capacity_reservation_is_targeted_by_the_on_demand_group() -> None:
    reservation = aws_fake.RESERVATION_IN_PLACEMENT_GROUP
    run = run_stack("aws", overrides={"aws": {"capacityReservation": {"id": reservation}}})
    template = run.one(LAUNCH_TEMPLATE, "onDemand").inputs
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": reservation}}
    assert "instanceMarketOptions" not in template
    assert _group(run, "gpu")["capacityType"] == "ON_DEMAND"
    spot = run.one(LAUNCH_TEMPLATE, "spot").inputs
    assert "capacityReservationSpecification" not in spot and "placement" in spot


def test_a_reservation_in_a_cluster_placement_group_gets_launches_into_that_group() -> None:
    """EC2 (cr-cpg.html): a reservation made in a cluster placement group serves launches that
    name that group; the program's own group would never get a node from it."""
    run = run_stack("aws", overrides={"aws": {"capacityReservation": {
        "id": aws_fake.RESERVATION_IN_PLACEMENT_GROUP}}})
    template = run.one(LAUNCH_TEMPLATE, "onDemand").inputs
    assert template["placement"] == {"groupName": aws_fake.RESERVED_PLACEMENT_GROUP}
    placement_groups = run.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert [g.name for g in placement_groups] == [f"{PREFIX}-spot"]  # none made for the reservation


def test_a_reservation_outside_placement_groups_launches_without_one() -> None:
    run = run_stack("aws", overrides={"aws": {"capacityReservation": {
        "id": aws_fake.RESERVATION_OUTSIDE_PLACEMENT_GROUPS}}})
    assert not run.one(LAUNCH_TEMPLATE, "onDemand").inputs.get("placement")


def test_a_reservation_in_another_accounts_placement_group_is_refused() -> None:
    run = run_stack("aws", overrides={"aws": {"capacityReservation": {
        "id": aws_fake.RESERVATION_OF_ANOTHER_ACCOUNT}}}, expect_error=True)
    message = str(run.error)
    assert "aws.capacityReservation.id" in message and aws_fake.RESERVATION_OF_ANOTHER_ACCOUNT in message
    assert f"placement group {aws_fake.RESERVED_PLACEMENT_GROUP} of account {aws_fake.OTHER_ACCOUNT}" in message


def test_a_capacity_block_uses_the_capacity_block_market_and_capacity_type() -> None:
    run = run_stack("aws", overrides={"aws": {"capacityReservation": {
        "id": aws_fake.CAPACITY_BLOCK_ID, "capacityBlock": True}},
        "gpuPools": {"onDemand": {"desiredNodes": 0}}})
    template = run.one(LAUNCH_TEMPLATE, "onDemand").inputs
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["instanceType"] == "p4d.24xlarge"
    assert template["capacityReservationSpecification"]["capacityReservationTarget"] == {
        "capacityReservationId": aws_fake.CAPACITY_BLOCK_ID}
    assert not template.get("placement")  # the block is in no placement group (fake)
    group = _group(run, "gpu")
    assert group["capacityType"] == "CAPACITY_BLOCK"
    assert "instanceTypes" not in group  # named in the launch template instead
    assert group["subnetIds"] == [GPU_SUBNET]  # the block's zone


def test_a_capacity_block_in_another_zone_or_of_another_type_is_refused() -> None:
    run = run_stack("aws", overrides={
        "zones": ["us-east-1a", "us-east-1b"], "gpuZones": ["us-east-1b"],
        "gpuPools": {"onDemand": {"machineType": "p5.48xlarge"}, "spot": {"enabled": False}},
        "aws": {"capacityReservation": {"id": aws_fake.CAPACITY_BLOCK_ID, "capacityBlock": True}}},
        expect_error=True)
    message = str(run.error)
    assert "a block of p4d.24xlarge" in message
    assert "a block in us-east-1a (use1-az4); set gpuZones to it" in message
    assert not [r for r in run.resources if r.type.startswith(("aws:ec2", "eks:"))]


def test_an_ended_capacity_block_is_refused() -> None:
    from datetime import datetime, timezone

    from infra.aws.reservations import block_problems

    found = aws_fake._capacity_block(type("Args", (), {"args": {"id": aws_fake.CAPACITY_BLOCK_ID}})())
    result = type("Found", (), {snake(k): v for k, v in found.items()})()
    problems = block_problems(result, "p4d.24xlarge", "us-east-1a", 2,
                              datetime(2030, 1, 9, tzinfo=timezone.utc))
    assert [p.allowed for p in problems] == [
        "active, ended 2030-01-08T11:30:00Z: buy another block (aws ec2 describe-capacity-block-offerings)"]
    assert block_problems(result, "p4d.24xlarge", "us-east-1a", 2,
                          datetime(2030, 1, 2, tzinfo=timezone.utc)) == []


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# --- Kubernetes versions from EKS itself (infra/aws/versions.py) ----------------------------
CLUSTER = "eks:index:Cluster"
CLUSTER_NAME = f"{PREFIX}-eks"
LISTING = "aws:eks/getClusterVersions:getClusterVersions"
# The days the suite looks at: today's pinned clock, and two later ones (the fake EKS lists
# what its calendar offers on each: tests/fakes/aws.py EKS_CALENDAR).
DAYS = [date(2026, 11, 26), date(2027, 6, 1), date(2028, 6, 1)]


def _on(day: date, monkeypatch: pytest.MonkeyPatch) -> time_machine.travel:
    """The program's clock and EKS' answer both on `day`."""
    monkeypatch.setattr(aws_fake, "LISTING_DAY", day)
    return time_machine.travel(datetime(day.year, day.month, day.day, 12, tzinfo=timezone.utc))


def _standard(day: date) -> list[str]:
    return [r["clusterVersion"] for r in aws_fake.eks_listing(day)
            if r["versionStatus"] == "STANDARD_SUPPORT"]


def _default(day: date) -> str:
    (default,) = [r["clusterVersion"] for r in aws_fake.eks_listing(day) if r["defaultVersion"]]
    return default


# The provider the version questions go through before the component exists
# (infra/aws/versions.py lookup_provider): a refused run registers it and nothing else.
# It creates nothing in AWS.
LOOKUPS = ("pulumi:providers:aws", f"{PREFIX}-aws-lookups")


def _registered(run: Run) -> list[tuple[str, str]]:
    return [(r.type, r.name) for r in run.resources]


def _versions(run: Run) -> set[str]:
    """The control plane's version and every node group's: one minor, all following it."""
    return {run.one(CLUSTER).inputs["version"], *(g.inputs["version"] for g in run.of_type(MNG))}


@pytest.fixture
def listing_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Every DescribeClusterVersions the program makes."""
    from tests import fakes

    calls: list[dict] = []
    answer = fakes.CALLS[LISTING]

    def recorded(args: pulumi.runtime.MockCallArgs) -> Any:
        calls.append(dict(args.args))
        return answer(args)

    monkeypatch.setitem(fakes.CALLS, LISTING, recorded)
    return calls


@pytest.fixture
def warnings_logged(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    logged: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: logged.append(message))
    return logged


@pytest.mark.parametrize("day", DAYS, ids=str)
def test_the_shipped_stack_creates_the_cluster_at_the_version_eks_offers_that_day(
        day: date, monkeypatch: pytest.MonkeyPatch, listing_calls: list[dict]) -> None:
    with _on(day, monkeypatch):
        run = run_stack("aws")
    assert _versions(run) == {_default(day)} and _default(day) in _standard(day)
    assert run.outputs["kubernetes_version"] == _default(day)
    assert listing_calls == [{"clusterType": "eks"}]  # the region is the provider's
    image = run.one(HELM, CA).inputs["values"]["image"]["tag"]
    from infra.aws.autoscaler import image_tag
    assert image == image_tag(_default(day))  # the add-on table's image for that minor


@pytest.mark.parametrize("day", DAYS, ids=str)
def test_a_pinned_minor_eks_no_longer_offers_is_refused_naming_the_offered_ones(
        day: date, monkeypatch: pytest.MonkeyPatch) -> None:
    with _on(day, monkeypatch):
        run = run_stack("aws", overrides={"kubernetes": {"version": "1.30"}}, expect_error=True)
    assert isinstance(run.error, SettingsError), run.error
    message = str(run.error)
    assert "kubernetes.version" in message and "Nothing was created" in message
    assert f"EKS in us-east-1 creates today: {', '.join(_standard(day))}" in message
    assert "aws eks describe-cluster-versions --region us-east-1" in message
    assert _registered(run) == [LOOKUPS]


def test_a_minor_in_extended_support_only_needs_extended_support_accepted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # On 2026-11-26 EKS keeps 1.33 in extended support (billed per cluster hour).
    with _on(DAYS[0], monkeypatch):
        refused = run_stack("aws", overrides={"kubernetes": {"version": "1.33"}}, expect_error=True)
    assert isinstance(refused.error, SettingsError), refused.error
    assert "kubernetes.extendedSupport: true" in str(refused.error)
    assert "extended support only" in str(refused.error) and "1.34, 1.35" in str(refused.error)
    assert _registered(refused) == [LOOKUPS]


def test_a_minor_in_extended_support_is_created_with_a_billing_warning_when_accepted(
        monkeypatch: pytest.MonkeyPatch, warnings_logged: list[str]) -> None:
    with _on(DAYS[0], monkeypatch):
        run = run_stack("aws", overrides={"kubernetes": {"version": "1.33",
                                                         "extendedSupport": True}})
    assert _versions(run) == {"1.33"}
    assert run.one(CLUSTER).inputs["upgradePolicy"] == {"supportType": "EXTENDED"}
    assert any("1.33 is in EKS extended support, billed per cluster hour, until 2027-07-29" in w
               for w in warnings_logged), warnings_logged


def test_standard_support_ending_soon_is_advice_not_a_refusal(
        monkeypatch: pytest.MonkeyPatch, warnings_logged: list[str]) -> None:
    # 1.34 leaves standard support on 2026-12-02, six days after the pinned day.
    with _on(DAYS[0], monkeypatch):
        run = run_stack("aws", overrides={"kubernetes": {"version": "1.34"}})
    assert _versions(run) == {"1.34"}
    assert any("1.34 leaves EKS standard support on 2026-12-02 (in 6 days)" in w
               for w in warnings_logged), warnings_logged


def _later_run(first: Run, **changes: Any) -> dict[str, Any]:
    """The stack outputs a later `pulumi up` reads: the first run's, with `changes`."""
    return {**first.outputs, **changes}


@pytest.fixture(scope="module")
def first_run() -> Run:
    return run_stack("aws")


def test_a_live_cluster_on_an_older_minor_keeps_it_without_asking_what_eks_offers(
        first_run: Run, monkeypatch: pytest.MonkeyPatch, listing_calls: list[dict]) -> None:
    # Created in 2026 at 1.33; in 2028 EKS lists no 1.33 at all, and nothing is upgraded.
    monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.33"})
    with _on(DAYS[2], monkeypatch):
        run = run_stack("aws", previous_outputs=_later_run(first_run, kubernetes_version="1.33"))
    assert _versions(run) == {"1.33"}
    assert run.outputs["kubernetes_version"] == "1.33"
    assert listing_calls == []


def test_a_cluster_eks_upgraded_itself_is_kept_at_the_version_it_runs(
        first_run: Run, monkeypatch: pytest.MonkeyPatch, listing_calls: list[dict]) -> None:
    # The last run recorded 1.33; at the end of its support EKS moved the control plane to 1.34.
    monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.34"})
    run = run_stack("aws", previous_outputs=_later_run(first_run, kubernetes_version="1.33"))
    assert _versions(run) == {"1.34"} and listing_calls == []


def test_when_eks_cannot_describe_the_cluster_the_recorded_version_is_kept(
        first_run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {})
    run = run_stack("aws", previous_outputs=_later_run(first_run, kubernetes_version="1.33"))
    assert _versions(run) == {"1.33"}


def test_upgrades_go_one_minor_at_a_time_and_the_node_groups_follow(
        first_run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.34"})
    previous = _later_run(first_run, kubernetes_version="1.34")
    skipped = run_stack("aws", overrides={"kubernetes": {"version": "1.36"}},
                        previous_outputs=previous, expect_error=True)
    assert isinstance(skipped.error, SettingsError)
    assert "the next upgrade is to 1.35" in str(skipped.error)
    assert _registered(skipped) == [LOOKUPS]
    upgraded = run_stack("aws", overrides={"kubernetes": {"version": "1.35"}},
                         previous_outputs=previous)
    assert _versions(upgraded) == {"1.35"}
    for group in upgraded.of_type(MNG):  # nodes upgrade after the control plane
        assert upgraded.waits_for(group, upgraded.one(CLUSTER))


def _child_options(run: Run, type_: str, name: str) -> pulumi.ResourceOptions:
    """The options a child of the pulumi-eks component gets once the component's transforms ran,
    as the engine runs them (mocks never create a packaged component's children)."""
    args = pulumi.ResourceTransformArgs(custom=True, type_=type_, name=name,
                                        props={"version": "1.34"}, opts=pulumi.ResourceOptions())
    for transform in run.one(CLUSTER).transforms:
        result = transform(args)
        if result is not None:
            args = pulumi.ResourceTransformArgs(custom=True, type_=type_, name=name,
                                                props=result.props, opts=result.opts)
    return args.opts


def _control_plane_ignores(run: Run) -> list[str]:
    """ignore_changes of the aws.eks.Cluster pulumi-eks creates (`<name>-eksCluster`)."""
    return list(_child_options(run, "aws:eks/cluster:Cluster",
                               f"{CLUSTER_NAME}-eksCluster").ignore_changes or [])


def test_a_cluster_eks_upgraded_itself_is_not_asked_to_upgrade_to_the_version_it_runs(
        first_run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """The state still holds 1.33: without ignoring `version`, the provider would call
    UpdateClusterVersion to 1.34 on a cluster already at 1.34, which EKS refuses."""
    monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.34"})
    run = run_stack("aws", previous_outputs=_later_run(first_run, kubernetes_version="1.33"))
    assert _control_plane_ignores(run) == ["version"]
    assert {g.inputs["version"] for g in run.of_type(MNG)} == {"1.34"}  # pools follow it
    # Only the control plane: the component's other children keep their own diffs.
    role = _child_options(run, "aws:iam/role:Role", f"{CLUSTER_NAME}-eksRole")
    assert not role.ignore_changes


def test_an_upgrade_asked_for_reaches_the_control_plane(
        first_run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.34"})
    run = run_stack("aws", overrides={"kubernetes": {"version": "1.35"}},
                    previous_outputs=_later_run(first_run, kubernetes_version="1.34"))
    assert _control_plane_ignores(run) == [] and _versions(run) == {"1.35"}
    assert first_run.one(CLUSTER).transforms == []  # a new cluster: nothing to keep


def _node_group_update_config(run: Run, group: harness.Captured) -> dict[str, Any]:
    """The updateConfig the aws.eks.NodeGroup inside a pulumi-eks ManagedNodeGroup gets once the
    component's transforms ran (mocks never create a packaged component's children)."""
    args = pulumi.ResourceTransformArgs(custom=True, type_="aws:eks/nodeGroup:NodeGroup",
                                        name=group.name, props={"version": "1.34"},
                                        opts=pulumi.ResourceOptions())
    for transform in group.transforms:
        result = transform(args)
        if result is not None:
            args = pulumi.ResourceTransformArgs(custom=True, type_=args.type_, name=args.name,
                                                props=result.props, opts=result.opts)
    return args.props.get("updateConfig") or {}


def _gpu_groups(run: Run) -> list[harness.Captured]:
    return [g for g in run.of_type(MNG) if g.name != f"{PREFIX}-system"]


@pytest.mark.parametrize("change", ["pinned-upgrade", "eks-auto-upgrade", "template-change"])
def test_a_change_that_replaces_gpu_nodes_stays_within_max_nodes(
        change: str, first_run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """A version upgrade asked for, the node groups following a control plane EKS upgraded
    itself, or a new launch template version: EKS replaces every GPU node of the group. With
    the MINIMAL strategy it terminates before it launches (no surge beyond maxNodes and the
    GPU quota), all of a group's nodes at once (the gang restarts once)."""
    if change == "pinned-upgrade":
        monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.34"})
        run = run_stack("aws", overrides={"kubernetes": {"version": "1.35"}},
                        previous_outputs=_later_run(first_run, kubernetes_version="1.34"))
        assert {g.inputs["version"] for g in _gpu_groups(run)} == {"1.35"}
    elif change == "eks-auto-upgrade":
        monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.35"})
        run = run_stack("aws", previous_outputs=_later_run(first_run, kubernetes_version="1.34"))
        assert {g.inputs["version"] for g in _gpu_groups(run)} == {"1.35"}
    else:  # the placement group dropped: a new launch template version
        run = run_stack("aws", overrides={"interconnect": {"placement": False}},
                        previous_outputs=first_run.outputs)
        assert not run.one(LAUNCH_TEMPLATE, "onDemand").inputs.get("placement")
    groups = _gpu_groups(run)
    assert {g.name for g in groups} == {f"{PREFIX}-gpu", f"{PREFIX}-gpuspot"}
    for group in groups:
        max_nodes = int(group.inputs["scalingConfig"]["maxSize"])
        assert _node_group_update_config(run, group) == {
            "updateStrategy": "MINIMAL", "maxUnavailable": max_nodes}, group.name


CAPACITY_BLOCK = {"aws": {"capacityReservation": {"id": aws_fake.CAPACITY_BLOCK_ID,
                                                  "capacityBlock": True}},
                  "gpuPools": {"onDemand": {"desiredNodes": 0}}}


@pytest.mark.parametrize("nodes", [2, 0])
def test_a_capacity_block_group_with_nodes_waits_for_zero_before_it_upgrades(
        nodes: int, first_run: Run, monkeypatch: pytest.MonkeyPatch,
        warnings_logged: list[str]) -> None:
    """EKS updates a Capacity Block group only at 0 nodes: with nodes, the group keeps its
    version on this run (the rest upgrades) and the user is told how to suspend the job, let
    the group empty, upgrade it and resume; at 0 it follows the control plane."""
    from infra.aws.node_groups import gpu_node_group_name, gpu_pool_plan
    from infra.settings.model.cloud_options import CapacityReservation
    from infra.settings.model.pools import NodePool

    plan = gpu_pool_plan("onDemand", NodePool(machine_type="p4d.24xlarge", min_nodes=0,
                                              desired_nodes=0, max_nodes=2, name="gpu"),
                         machine(Cloud.AWS, "p4d.24xlarge"), spot=False, fabric=True,
                         placement=True, reservation=CapacityReservation(
                             id=aws_fake.CAPACITY_BLOCK_ID, capacity_block=True))
    monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.34"})
    monkeypatch.setattr(aws_fake, "LIVE_NODE_GROUPS",
                        {gpu_node_group_name(PREFIX, plan): ("1.34", nodes)})
    run = run_stack("aws", overrides={**CAPACITY_BLOCK, "kubernetes": {"version": "1.35"}},
                    previous_outputs=_later_run(first_run, kubernetes_version="1.34"))
    assert run.one(CLUSTER).inputs["version"] == "1.35"
    assert _group(run, "gpuspot")["version"] == "1.35"
    advice = [w for w in warnings_logged if "Capacity Block" in w]
    if nodes:
        assert _group(run, "gpu")["version"] == "1.34"
        # ... and its launch template version: a changed template would fail the run (review C2).
        assert _group(run, "gpu")["launchTemplate"]["version"] == aws_fake.LIVE_TEMPLATE_VERSION
        (line,) = advice
        assert "pulumi config set --path job.suspend true" in line
        assert "pulumi config set --path job.suspend false" in line
    else:
        assert _group(run, "gpu")["version"] == "1.35" and advice == []
        assert _group(run, "gpu")["launchTemplate"]["version"] != aws_fake.LIVE_TEMPLATE_VERSION


def test_a_capacity_block_group_with_nodes_keeps_its_template_version_on_a_same_version_run(
        first_run: Run, monkeypatch: pytest.MonkeyPatch, warnings_logged: list[str]) -> None:
    """No upgrade, but the template may change (a program upgrade, a new setting): the group
    with nodes stays on its live template version and the user is told how to move it."""
    from infra.aws.node_groups import gpu_node_group_name, gpu_pool_plan
    from infra.settings.model.cloud_options import CapacityReservation
    from infra.settings.model.pools import NodePool

    plan = gpu_pool_plan("onDemand", NodePool(machine_type="p4d.24xlarge", min_nodes=0,
                                              desired_nodes=0, max_nodes=2, name="gpu"),
                         machine(Cloud.AWS, "p4d.24xlarge"), spot=False, fabric=True,
                         placement=True, reservation=CapacityReservation(
                             id=aws_fake.CAPACITY_BLOCK_ID, capacity_block=True))
    monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.35"})
    monkeypatch.setattr(aws_fake, "LIVE_NODE_GROUPS", {gpu_node_group_name(PREFIX, plan): ("1.35", 2)})
    run = run_stack("aws", overrides={**CAPACITY_BLOCK, "kubernetes": {"version": "1.35"}},
                    previous_outputs=_later_run(first_run, kubernetes_version="1.35"))
    assert _group(run, "gpu")["launchTemplate"]["version"] == aws_fake.LIVE_TEMPLATE_VERSION
    (line,) = [w for w in warnings_logged if "Capacity Block" in w]
    assert "launch template version 3" in line and "job.suspend true" in line


def _addon_versions(run: Run) -> dict[str, str]:
    return {a.inputs["addonName"]: a.inputs["addonVersion"] for a in run.of_type(ADDON)}


def test_eks_add_ons_take_eks_default_build_for_the_minor_and_follow_an_upgrade(
        first_run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import fakes

    asked: list[dict] = []
    answer = fakes.CALLS["aws:eks/getAddonVersion:getAddonVersion"]

    def recorded(args: pulumi.runtime.MockCallArgs) -> Any:
        asked.append(dict(args.args))
        return answer(args)

    monkeypatch.setitem(fakes.CALLS, "aws:eks/getAddonVersion:getAddonVersion", recorded)
    monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.34"})
    previous = _later_run(first_run, kubernetes_version="1.34")
    kept = run_stack("aws", previous_outputs=previous)
    assert _addon_versions(kept) == {a: aws_fake.addon_build(a, "1.34")
                                     for a in ("vpc-cni", "kube-proxy", "coredns")}
    assert all(call["mostRecent"] is False for call in asked)  # EKS's default, not the newest
    upgraded = run_stack("aws", overrides={"kubernetes": {"version": "1.35"}},
                         previous_outputs=previous)
    assert _addon_versions(upgraded) == {a: aws_fake.addon_build(a, "1.35")
                                         for a in ("vpc-cni", "kube-proxy", "coredns")}
    for addon in upgraded.of_type(ADDON):  # updated once the control plane runs the new minor
        assert upgraded.waits_for(addon, upgraded.one(CLUSTER))


def test_every_aws_invoke_goes_through_a_provider_in_the_stacks_region(
        first_run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack files set no aws:region: the default provider would fail "Missing Region"."""
    seen: list[tuple[str, str]] = []
    answer = harness.fake_call

    def recorded(args: pulumi.runtime.MockCallArgs) -> Any:
        seen.append((args.token, args.provider))
        return answer(args)

    monkeypatch.setattr(harness, "fake_call", recorded)
    monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.34"})
    monkeypatch.setattr(aws_fake, "SUPPORT_TYPES", {CLUSTER_NAME: "EXTENDED"})
    runs = [run_stack("aws"),  # the listing, the bucket check and list
            run_stack("aws", overrides={"kubernetes": {"extendedSupport": True}},
                      previous_outputs=_later_run(first_run, kubernetes_version="1.34")),
            run_stack("aws", previous_outputs=_later_run(first_run, kubernetes_version="1.34"))]
    regions = {r.urn: r.inputs.get("region") for run in runs
               for r in run.of_type("pulumi:providers:aws")}
    tokens = {token for token, _ in seen if token.startswith("aws:")}
    assert {"aws:eks/getClusterVersions:getClusterVersions", "aws:eks/getCluster:getCluster",
            "aws:s3/getBucket:getBucket", "aws:s3/getBuckets:getBuckets",
            "aws:index/getCallerIdentity:getCallerIdentity",
            "aws:eks/getAddonVersion:getAddonVersion"} <= tokens
    for token, provider in seen:
        if token.startswith("aws:"):
            assert provider, f"{token} used the default provider"
            assert regions[provider.rsplit("::", 1)[0]] == "us-east-1", (token, provider)


def test_turning_extended_support_off_on_a_cluster_in_extended_support_is_refused_early(
        first_run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    # On 2026-11-26 EKS keeps 1.33 in extended support; the cluster was created accepting it.
    monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.33"})
    monkeypatch.setattr(aws_fake, "SUPPORT_TYPES", {CLUSTER_NAME: "EXTENDED"})
    previous = _later_run(first_run, kubernetes_version="1.33")
    with _on(DAYS[0], monkeypatch):
        refused = run_stack("aws", previous_outputs=previous, expect_error=True)
        kept_on = run_stack("aws", overrides={"kubernetes": {"extendedSupport": True}},
                            previous_outputs=previous)
    assert isinstance(refused.error, SettingsError), refused.error
    [problem] = refused.error.problems
    assert (problem.path, problem.value) == ("kubernetes.extendedSupport", False)
    assert "1.33" in problem.allowed and "standard support" in problem.allowed
    assert not [r for r in refused.resources  # nothing in AWS: providers and the component only
                if r.custom and not r.type.startswith("pulumi:providers:")]
    assert kept_on.one(CLUSTER).inputs["upgradePolicy"] == {"supportType": "EXTENDED"}


def test_turning_extended_support_off_on_a_minor_in_standard_support_goes_through(
        first_run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.34"})
    monkeypatch.setattr(aws_fake, "SUPPORT_TYPES", {CLUSTER_NAME: "EXTENDED"})
    with _on(DAYS[0], monkeypatch):
        run = run_stack("aws", previous_outputs=_later_run(first_run, kubernetes_version="1.34"))
    assert run.one(CLUSTER).inputs["upgradePolicy"] == {"supportType": "STANDARD"}


def test_advice_uses_the_dates_eks_lists() -> None:
    from infra.aws.versions import EksVersion, advice

    soon = EksVersion("1.35", "STANDARD_SUPPORT", True, date(2027, 3, 27), date(2028, 3, 27))
    assert advice(soon, date(2026, 11, 26)) == []  # 121 days away
    (line,) = advice(soon, date(2027, 1, 1))
    assert "leaves EKS standard support on 2027-03-27 (in 85 days)" in line
    extended = EksVersion("1.33", "EXTENDED_SUPPORT", False, date(2026, 7, 29), date(2027, 7, 29))
    (line,) = advice(extended, date(2026, 11, 26))
    assert "billed per cluster hour, until 2027-07-29" in line


# --- the checkpoint bucket is found again after `pulumi destroy` (infra/aws/storage.py) ------
CHECKPOINT_BUCKET = f"{PREFIX}-ckpt-{aws_fake.ACCOUNT}-us-east-1"
BUCKET_SETTINGS = ("aws:s3/bucketVersioning:BucketVersioning",
                   "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
                   "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
                   "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
                   "aws:s3/bucketOwnershipControls:BucketOwnershipControls")


def _job_checkpoint_uri(run: Run) -> str:
    """The URI the training pods are given (not only the stack output)."""
    (uri,) = {a.removeprefix("--checkpoint_dir=")
              for c in training_pod_template(run)["spec"]["containers"]
              for a in c.get("args") or [] if a.startswith("--checkpoint_dir=")}
    return uri


def test_the_bucket_name_is_one_per_stack_account_and_region_and_fits_s3s_rules() -> None:
    from infra.aws.storage import checkpoint_bucket_name

    assert checkpoint_bucket_name(PREFIX, "123456789012", "us-east-1") == CHECKPOINT_BUCKET
    longest = checkpoint_bucket_name("a" * 24, "123456789012", "ap-southeast-5")
    long_prefix = checkpoint_bucket_name("x" * 60 + "-", "123456789012", "us-gov-west-1")
    for name in (CHECKPOINT_BUCKET, longest, long_prefix):
        assert 3 <= len(name) <= 63 and re.fullmatch(r"[a-z0-9][a-z0-9-]*[a-z0-9]", name), name
    assert long_prefix.endswith("-ckpt-123456789012-us-gov-west-1")


def _bucket_children(run: Run) -> set[str]:
    """The bucket's settings the stack manages (versioning, lifecycle, encryption, ...)."""
    bucket = run.one(BUCKET)
    return {r.type for r in run.children_of(bucket) if r.type in BUCKET_SETTINGS}


def test_a_first_run_creates_the_bucket_under_its_stack_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", set())
    run = run_stack("aws")
    bucket = run.one(BUCKET)
    assert bucket.inputs["bucket"] == CHECKPOINT_BUCKET and "bucketPrefix" not in bucket.inputs
    assert bucket.import_id == "" and bucket.retain_on_delete  # created, kept on destroy
    assert _bucket_children(run) == set(BUCKET_SETTINGS)
    assert run.outputs["checkpoint_uri"] == f"s3://{CHECKPOINT_BUCKET}/dlrm"
    assert run.outputs["checkpoint_store_adopted"] is False


def test_destroy_then_up_imports_the_kept_bucket_and_the_job_keeps_its_checkpoint_uri(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", set())
    before = run_stack("aws")
    assert before.one(BUCKET).retain_on_delete  # `pulumi destroy` keeps it ...
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {CHECKPOINT_BUCKET})  # ... and S3 has it
    after = run_stack("aws")  # no earlier outputs: destroy removed them
    assert after.outputs["checkpoint_uri"] == before.outputs["checkpoint_uri"]
    assert _job_checkpoint_uri(after) == _job_checkpoint_uri(before) == before.outputs["checkpoint_uri"]
    assert after.outputs["checkpoint_store_adopted"] is True
    # Imported by its name (an S3 bucket's id), managed again: retained on the next destroy as
    # checkpoints.retainOnDestroy says, its settings PUT again ...
    bucket = after.one(BUCKET)
    assert bucket.import_id == CHECKPOINT_BUCKET and bucket.inputs["bucket"] == CHECKPOINT_BUCKET
    assert bucket.urn == before.one(BUCKET).urn and bucket.retain_on_delete
    assert _bucket_children(after) == set(BUCKET_SETTINGS)
    # ... and what belongs to the stack, the job's access to it, is made again.
    policy = json.loads(after.one("aws:iam/rolePolicy:RolePolicy", f"{PREFIX}-job").inputs["policy"])
    resources = {r for s in policy["Statement"] for r in _as_list(s["Resource"])}
    assert f"arn:aws:s3:::{CHECKPOINT_BUCKET}" in resources


def test_an_imported_bucket_follows_retain_on_destroy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {CHECKPOINT_BUCKET})
    run = run_stack("aws", overrides={"checkpoints": {"retainOnDestroy": False}})
    bucket = run.one(BUCKET)
    assert bucket.import_id == CHECKPOINT_BUCKET
    assert not bucket.retain_on_delete and bucket.inputs["forceDestroy"] is True


def test_a_retry_after_a_failed_first_up_imports_the_bucket_that_run_created(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The failed run created the bucket (so it is in the stack's state) but left no outputs.
    The retry registers the same resource with `import` set to the id the state holds, which
    the engine treats as an ordinary update, not an import: `isImport := goal.Custom &&
    goal.ID != "" && (!hasOld || old.External || oldImportID != goal.ID)` (pulumi/pulumi
    pkg/resource/deploy/step_generator.go). The harness has no state, so this checks what the
    program registers: the same URN, with the import id equal to the bucket's id."""
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", set())
    failed_first = run_stack("aws")
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {CHECKPOINT_BUCKET})
    retry = run_stack("aws")  # no outputs: the first run never finished
    bucket, created = retry.one(BUCKET), failed_first.one(BUCKET)
    assert bucket.urn == created.urn and bucket.import_id == created.outputs["id"]
    assert retry.outputs["checkpoint_uri"] == failed_first.outputs["checkpoint_uri"]


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def test_an_imported_bucket_stays_adopted_on_later_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {CHECKPOINT_BUCKET})
    adopted = run_stack("aws")
    later = run_stack("aws", previous_outputs=adopted.outputs)
    assert later.one(BUCKET).import_id == CHECKPOINT_BUCKET  # in state now: an ordinary update
    assert later.outputs["checkpoint_store_adopted"] is True
    assert later.outputs["checkpoint_uri"] == adopted.outputs["checkpoint_uri"]


def test_a_created_bucket_stays_the_stacks_own_on_later_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", set())
    created = run_stack("aws")
    # S3 now has it (this stack made it): the same resource, same inputs, not "adopted".
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {CHECKPOINT_BUCKET})
    later = run_stack("aws", previous_outputs=created.outputs)
    bucket = later.one(BUCKET)
    assert bucket.inputs["bucket"] == CHECKPOINT_BUCKET and bucket.urn == created.one(BUCKET).urn
    assert later.outputs["checkpoint_store_adopted"] is False


def test_a_bucket_check_s3_refuses_stops_the_run_before_any_cloud_resource(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """AccessDenied is not "absent": creating instead would point the job at an empty bucket."""
    from infra.aws.storage import BucketCheckError

    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", set())
    monkeypatch.setattr(aws_fake, "BUCKET_ERRORS",
                        {CHECKPOINT_BUCKET: aws_fake.head_bucket_forbidden(CHECKPOINT_BUCKET)})
    run = run_stack("aws", expect_error=True)
    assert isinstance(run.error, BucketCheckError), run.error
    message = str(run.error)
    assert CHECKPOINT_BUCKET in message and "StatusCode: 403" in message
    assert "s3:ListBucket" in message and "Nothing was created" in message
    assert not [r.name for r in run.resources
                if r.custom and not r.type.startswith("pulumi:providers:")]


LEGACY_BUCKET = f"{PREFIX}-ckpt-20250101"  # bucket_prefix=<prefix>-ckpt- plus S3's suffix


@pytest.fixture
def infos_logged(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    logged: list[str] = []
    monkeypatch.setattr(pulumi.log, "info", lambda message, *a, **k: logged.append(message))
    return logged


def test_a_stack_from_the_previous_program_keeps_its_suffixed_bucket_without_replacement(
        first_run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    # The previous program named the bucket with bucket_prefix (S3 added a suffix) and exported
    # no checkpoint_store_adopted.
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {LEGACY_BUCKET})
    old_uri = f"s3://{LEGACY_BUCKET}/dlrm"
    previous = {k: v for k, v in first_run.outputs.items() if k != "checkpoint_store_adopted"}
    run = run_stack("aws", previous_outputs={**previous, "checkpoint_uri": old_uri})
    bucket = run.one(BUCKET)
    assert bucket.inputs["bucketPrefix"] == f"{PREFIX}-ckpt-" and "bucket" not in bucket.inputs
    assert {"bucket", "bucketPrefix"} <= set(bucket.ignore_changes)  # never a replacement
    assert bucket.import_id == LEGACY_BUCKET  # in state: an ordinary update
    assert run.outputs["checkpoint_uri"] == old_uri == _job_checkpoint_uri(run)
    assert run.outputs["checkpoint_store_adopted"] is False


def test_a_suffixed_bucket_the_previous_program_kept_on_destroy_is_imported(
        monkeypatch: pytest.MonkeyPatch, infos_logged: list[str]) -> None:
    elsewhere = f"{PREFIX}-ckpt-20240101"  # same prefix, another region: not this stack's
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {LEGACY_BUCKET, elsewhere})
    monkeypatch.setattr(aws_fake, "BUCKET_REGIONS", {elsewhere: "eu-west-1"})
    run = run_stack("aws")  # after the destroy: no outputs, no deterministic bucket
    bucket = run.one(BUCKET)
    assert bucket.import_id == LEGACY_BUCKET and bucket.inputs["bucketPrefix"] == f"{PREFIX}-ckpt-"
    assert run.outputs["checkpoint_uri"] == f"s3://{LEGACY_BUCKET}/dlrm" == _job_checkpoint_uri(run)
    assert run.outputs["checkpoint_store_adopted"] is True
    assert any(LEGACY_BUCKET in line and "imported" in line for line in infos_logged), infos_logged


def test_a_deployer_who_may_not_list_buckets_still_gets_a_new_bucket_with_a_warning(
        monkeypatch: pytest.MonkeyPatch, warnings_logged: list[str]) -> None:
    from tests import fakes

    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {LEGACY_BUCKET})
    monkeypatch.setitem(fakes.CALLS, "aws:s3/getBuckets:getBuckets", lambda args: (
        {}, [("", "listing S3 Buckets: operation error S3: ListBuckets, https response error "
                  "StatusCode: 403, api error AccessDenied: Access Denied")]))
    run = run_stack("aws")
    assert run.one(BUCKET).inputs["bucket"] == CHECKPOINT_BUCKET
    assert any("s3:ListAllMyBuckets" in w for w in warnings_logged), warnings_logged


def test_several_suffixed_buckets_are_named_and_none_is_imported(
        monkeypatch: pytest.MonkeyPatch, warnings_logged: list[str]) -> None:
    other = f"{PREFIX}-ckpt-20240101"
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {LEGACY_BUCKET, other})
    run = run_stack("aws")
    bucket = run.one(BUCKET)
    assert bucket.import_id == "" and bucket.inputs["bucket"] == CHECKPOINT_BUCKET
    assert any(LEGACY_BUCKET in w and other in w for w in warnings_logged), warnings_logged


def test_the_trainer_resumes_across_destroy_from_the_kept_bucket_on_moto_s3(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import emulators
    from tests.trainer.helpers import REPO, summary, train_until

    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", set())
    first = run_stack("aws")
    pod_env = {e["name"]: str(e["value"]) for c in training_pod_template(first)["spec"]["containers"]
               for e in c.get("env") or [] if "value" in e}
    monkeypatch.setattr(aws_fake, "EXISTING_BUCKETS", {CHECKPOINT_BUCKET})  # kept by destroy
    second = run_stack("aws")
    uris = (_job_checkpoint_uri(first), _job_checkpoint_uri(second))
    assert second.outputs["checkpoint_store_adopted"] is True
    host = ("AWS_", "AZURE_", "GOOGLE_", "STORAGE_EMULATOR_HOST", "GCSFS_", "CLOUDSDK_")
    for server in emulators.running(emulators.moto_s3()):
        import boto3

        s3 = boto3.client("s3", region_name=pod_env["AWS_REGION"], endpoint_url=server.url,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        s3.create_bucket(Bucket=CHECKPOINT_BUCKET)  # the first `pulumi up` creates it
        env = {k: v for k, v in os.environ.items() if not k.startswith(host)}
        env.update(pod_env)
        env.update(server.env)
        env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), HOME=str(tmp_path))
        metrics = tmp_path / "metrics.jsonl"
        # Before the destroy: 4 steps to the first run's URI; after: on to 6 from the second's.
        for uri, step in zip(uris, (4, 6)):
            train_until(step, uri, env, metrics)
        final = summary(metrics)
        assert final["resumed_from"] == 4 and final["step"] == 6


# --- the deployer's permissions (infra/aws/deployer.py, infra/aws/deployer-policy.json) -------
# Types that need no AWS permission of the deployer: providers, our own components, and the
# Kubernetes objects (the API server authorizes those through the cluster creator's access entry).
NO_AWS_PERMISSION = ("pulumi:providers:", "torchrec-cloud:", "kubernetes:")


@pytest.fixture(scope="module")
def every_aws_call() -> tuple[set[str], set[str]]:
    """(resource types, invoke tokens) over full runs that together reach every branch that
    talks to AWS: the shipped stack, a reservation in a placement group, a linked dataset
    bucket, a Capacity Block, and a later run of a live stack (the version lookups)."""
    types: set[str] = set()
    tokens: set[str] = set()
    recorded = harness.fake_call

    def recording(args: pulumi.runtime.MockCallArgs) -> Any:
        tokens.add(args.token)
        return recorded(args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(harness, "fake_call", recording)
        first = run_stack("aws")
        patch.setattr(aws_fake, "LIVE_CLUSTERS", {CLUSTER_NAME: "1.35"})
        runs = [first, run_stack("aws", previous_outputs=first.outputs),
                run_stack("aws", overrides={"aws": {"capacityReservation": {
                    "id": aws_fake.RESERVATION_IN_PLACEMENT_GROUP}}}),
                run_stack("aws", overrides={"dataset": {"importUri": "s3://data-bucket/criteo"}}),
                run_stack("aws", overrides=CAPACITY_BLOCK, previous_outputs=first.outputs)]
    for run in runs:
        types |= {r.type for r in run.resources if not r.type.startswith(NO_AWS_PERMISSION)}
    return types, tokens


def _policy_actions() -> set[str]:
    from infra.aws.deployer import POLICY_FILE

    document = json.loads(POLICY_FILE.read_text())
    return {a for statement in document["Statement"] for a in _as_list(statement["Action"])}


def test_the_deployer_policy_allows_every_action_the_program_calls(
        every_aws_call: tuple[set[str], set[str]]) -> None:
    """A resource type or lookup the program starts using without its row in
    infra/aws/deployer.py fails here, and so does a policy file not regenerated from the table."""
    from infra.aws.deployer import INVOKE_ACTIONS, RESOURCE_ACTIONS, render, POLICY_FILE

    types, tokens = every_aws_call
    assert {"aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation",
            "aws:ec2/placementGroup:PlacementGroup", "eks:index:ManagedNodeGroup",
            "docker-build:index:Image"} <= types
    assert "aws:eks/getCluster:getCluster" in tokens
    assert sorted(types - set(RESOURCE_ACTIONS)) == []
    assert sorted(tokens - set(INVOKE_ACTIONS)) == []
    allowed = _policy_actions()
    needed = {a for t in types for a in RESOURCE_ACTIONS[t]} | {
        a for t in tokens for a in INVOKE_ACTIONS[t]}
    assert sorted(needed - allowed) == []
    # What review found missing from the hand-kept list in docs/aws.md.
    assert {"sqs:CreateQueue", "events:PutRule", "logs:CreateLogGroup",
            "ec2:CreateLaunchTemplate", "ec2:CreatePlacementGroup", "iam:PassRole",
            "iam:CreateServiceLinkedRole"} <= allowed
    assert POLICY_FILE.read_text() == render()  # `python -m infra.aws.deployer --write`


def test_the_deployer_policy_fits_one_managed_policy_and_scopes_its_iam_reach() -> None:
    from infra.aws.deployer import POLICY_FILE

    text = POLICY_FILE.read_text()
    document = json.loads(text)
    # IAM managed policies: at most 6,144 characters, whitespace not counted
    # (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html).
    assert len(re.sub(r"\s", "", text)) <= 6144
    by_sid = {s["Sid"]: s for s in document["Statement"]}
    assert by_sid["PassRolesToEksAndEc2"]["Condition"] == {"StringEquals": {
        "iam:PassedToService": ["eks.amazonaws.com", "ec2.amazonaws.com"]}}
    assert "iam:AWSServiceName" in by_sid["ServiceLinkedRoles"]["Condition"]["StringEquals"]
    assert "iam:PassRole" not in by_sid["DeployTorchrecCloud"]["Action"]


def test_the_aws_guide_points_the_deployer_at_the_shipped_policy() -> None:
    guide = (harness.ROOT / "docs" / "aws.md").read_text()
    assert "infra/aws/deployer-policy.json" in guide
    assert "aws iam create-policy" in guide
