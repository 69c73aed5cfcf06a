"""GCP stack policies, read off the resources `pulumi up --stack gcp` would register (mocks).

One program run per configuration (module-scoped fixtures); every test only reads it. Until the
workload layer exists (workloads/__init__.py), the program run is __main__.py without the
TrainingJob: the same settings loading and cluster component, so every assertion here holds.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
import socket
import subprocess
import unittest.mock
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime.rpc
import pytest
import yaml

from infra.catalog.cloud import Cloud
from infra.catalog.machines import machine
from infra.gcp.network import secondary_ranges
from infra.settings.errors import SettingsError
from tests import harness
from tests.harness import Run, run_stack, training_pod_template

WORKLOADS_READY = (harness.ROOT / "workloads" / "__init__.py").exists()

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
FIREWALL = "gcp:compute/firewall:Firewall"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
FILESTORE = "gcp:filestore/instance:Instance"
NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
K8S_PROVIDER = "pulumi:providers:kubernetes"
GCP_PROVIDER = "pulumi:providers:gcp"
COMPONENT = "torchrec-cloud:gcp:GpuCluster"


def _run_cluster_only(overrides: dict[str, Any] | None, expect_error: bool) -> Run:
    """__main__.py up to the cluster (settings -> previous run -> release -> GcpGpuCluster),
    under the harness's mocks."""
    from infra.clouds import build_cluster, resolve_release
    from infra.contract import GpuClusterArgs
    from infra.naming import name_prefix
    from infra.previous_run import read_previous_run
    from infra.settings.loader import load_settings, with_kubernetes_minor

    pulumi.runtime.settings.set_root_resource(None)
    asyncio.set_event_loop(asyncio.new_event_loop())
    mocks = harness.RecordingMocks()
    monitor = harness.RecordingMonitor(mocks)
    pulumi.runtime.set_all_config(harness.config_for("gcp", overrides))
    pulumi.runtime.set_mocks(mocks, project=harness.PROJECT, stack="gcp", preview=False,
                             monitor=monitor, organization=harness.ORGANIZATION)
    contracts: list[Any] = []

    @pulumi.runtime.test
    def program() -> None:
        settings = load_settings()
        previous = read_previous_run()
        release = resolve_release(settings, previous)
        settings = with_kubernetes_minor(settings, release.minor)
        contracts.append(build_cluster(GpuClusterArgs(
            settings=settings, name_prefix=name_prefix(), release=release, previous=previous)))

    error: BaseException | None = None
    try:
        # Compute Engine's regions.get, as run_stack answers it (infra/gcp/quotas.py)
        with unittest.mock.patch("infra.gcp.quotas.get_json", harness.gcp_fakes.compute_get):
            program()
    except BaseException as caught:  # noqa: BLE001
        if not expect_error:
            raise
        error = caught
    finally:
        asyncio.get_event_loop().close()
    if expect_error and error is None:
        raise AssertionError("gcp stack ran without the expected error")
    run = Run("gcp", dict(monitor.captured), {}, set(), error)
    run.contract = contracts[0] if contracts else None  # type: ignore[attr-defined]
    return run


def run_gcp(overrides: dict[str, Any] | None = None, expect_error: bool = False,
            previous_outputs: dict[str, Any] | None = None) -> Run:
    """One `pulumi up` of the gcp stack; `previous_outputs`: the stack's outputs from its last
    update (None: a first run, or one after `pulumi destroy`)."""
    if WORKLOADS_READY:
        return run_stack("gcp", overrides=overrides, expect_error=expect_error,
                         previous_outputs=previous_outputs)
    assert previous_outputs is None, "a later run needs the workload layer (run_stack)"
    return _run_cluster_only(overrides, expect_error)


def stack_settings(overrides: dict[str, Any] | None = None):
    """The settings the program sees for the gcp stack (with overrides)."""
    from infra.settings.loader import settings_from_mapping

    config = harness.config_for("gcp", overrides)
    raw = {}
    for key, text in config.items():
        try:
            raw[key.split(":", 1)[1]] = json.loads(text)
        except json.JSONDecodeError:
            raw[key.split(":", 1)[1]] = text
    return settings_from_mapping(raw)


def asked(question: Any) -> Any:
    """`question()` (a function that invokes the cloud) answered by the fakes, outside a run."""
    pulumi.runtime.settings.set_root_resource(None)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    pulumi.runtime.set_mocks(harness.RecordingMocks(), project=harness.PROJECT, stack="gcp",
                             preview=False, organization=harness.ORGANIZATION)
    try:
        return question()
    finally:
        loop.close()


@pytest.fixture(scope="module")
def run() -> Run:
    return run_gcp()


@pytest.fixture(scope="module")
def settings():
    return stack_settings()


A3_OVERRIDES = {
    "gpuPools": {"onDemand": {"machineType": "a3-highgpu-8g"},
                 "spot": {"machineType": "a3-highgpu-8g"}},
    "interconnect": {"placement": False, "fabric": True},
    "job": {"image": "us-docker.pkg.dev/example/trainer:1"},
    "checkpoints": {"retainOnDestroy": False},
}


@pytest.fixture(scope="module")
def a3_run() -> Run:
    """A3 High with GPUDirect-TCPX, a user-supplied image, no compact placement."""
    return run_gcp(A3_OVERRIDES)


SECRET_SIG = pulumi.runtime.rpc._special_sig_key  # noqa: SLF001 (wire marker of a secret)


def unsecret(value: Any) -> Any:
    """The value inside a secret as the mock monitor records it (or the value itself)."""
    if isinstance(value, dict) and value.get(SECRET_SIG) == pulumi.runtime.rpc._special_secret_sig:
        return value["value"]
    return value


@pytest.fixture(scope="module")
def contract():
    """The contract GcpGpuCluster hands the workload layer (the run_stack path cannot see it)."""
    return _run_cluster_only(None, False).contract  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def a3_contract():
    return _run_cluster_only(A3_OVERRIDES, False).contract  # type: ignore[attr-defined]


def gpu_pools(run: Run) -> dict[str, Any]:
    return {p.inputs["name"]: p for p in run.of_type(NODE_POOL)}


# --- network ---------------------------------------------------------------------------------
def test_subnetwork_has_pod_and_service_ranges_with_private_google_access(run, settings):
    subnet = run.one("gcp:compute/subnetwork:Subnetwork")
    assert subnet.inputs["ipCidrRange"] == settings.gcp.network_cidr
    assert subnet.inputs["privateIpGoogleAccess"] is True
    ranges = {r["rangeName"]: r["ipCidrRange"] for r in subnet.inputs["secondaryIpRanges"]}
    assert set(ranges) == {"pods", "services"}
    nets = [ipaddress.ip_network(c) for c in [settings.gcp.network_cidr, *ranges.values()]]
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:])
    assert run.one("gcp:compute/network:Network").inputs["autoCreateSubnetworks"] is False


@pytest.mark.parametrize("cidr", ["10.2.0.0/20", "10.2.64.0/20", "10.0.0.0/16", "192.168.0.0/20"])
def test_secondary_ranges_never_overlap_the_node_range(cidr):
    ranges = secondary_ranges(cidr)
    nets = [ipaddress.ip_network(c) for c in (cidr, ranges.pods, ranges.services)]
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:])


def test_private_nodes_reach_registries_through_cloud_nat(run):
    nat = run.one("gcp:compute/routerNat:RouterNat")
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"
    assert run.waits_for(nat, run.one("gcp:compute/router:Router"))


def test_no_firewall_rule_opens_ingress_to_the_internet(run, a3_run):
    for stack in (run, a3_run):
        rules = stack.of_type(FIREWALL)
        assert rules, "expected the control plane's webhook rule"
        for rule in rules:
            sources = rule.inputs.get("sourceRanges", [])
            assert "0.0.0.0/0" not in sources, rule.name
            assert all(ipaddress.ip_network(c).is_private for c in sources), rule.name
            assert sources or rule.inputs.get("sourceTags"), rule.name


def test_no_rule_duplicates_the_node_rules_gke_creates_itself(run):
    # GKE's own gke-<cluster>-<id>-vms and -all rules admit node-range and pod-range traffic on
    # every port, which is what NCCL and the rendezvous use; a second such rule only drifts.
    for rule in run.of_type(FIREWALL):
        assert "gpu-to-gpu" not in rule.name
        assert {"protocol": "all"} not in rule.inputs["allows"], rule.name


def test_the_control_plane_reaches_every_admission_webhook_on_every_node(run):
    from infra.webhooks import webhook_ports

    cluster = run.one(CLUSTER)
    control_plane = cluster.inputs["privateClusterConfig"]["masterIpv4CidrBlock"]
    assert ipaddress.ip_network(control_plane).prefixlen == 28
    rule = run.one(FIREWALL, "control-plane-to-webhooks")
    assert rule.inputs["direction"] == "INGRESS"
    assert rule.inputs["sourceRanges"] == [control_plane]
    [allowed] = rule.inputs["allows"]
    assert allowed["protocol"] == "tcp"
    assert set(allowed["ports"]) == {str(p) for p in webhook_ports()} | {"8082"}
    assert webhook_ports() == [9443]  # JobSet's, Kueue's and the training operator's webhooks
    [tag] = rule.inputs["targetTags"]
    for pool in run.of_type(NODE_POOL):  # the webhook pods may land on any node
        assert tag in pool.inputs["nodeConfig"]["tags"], pool.name
    # Nothing guarded by a webhook is sent before the rule exists.
    assert run.waits_for(run.one(JOBSET), rule)


def test_kueue_s_visibility_api_is_reachable_from_the_private_control_plane(run):
    """Kueue's APIService v1beta2.visibility.kueue.x-k8s.io is served on the controller pod's
    8082; without the port open the API server marks it FailedDiscoveryCheck (kubectl warns on
    every call, namespace deletion retries on destroy)."""
    cluster = run.one(CLUSTER)
    assert cluster.inputs["privateClusterConfig"]["enablePrivateNodes"] is True
    rule = run.one(FIREWALL, "control-plane-to-webhooks")
    assert rule.inputs["sourceRanges"] == [cluster.inputs["privateClusterConfig"][
        "masterIpv4CidrBlock"]]
    assert any("8082" in a["ports"] for a in rule.inputs["allows"] if a["protocol"] == "tcp")
    assert rule.inputs["direction"] == "INGRESS" and "0.0.0.0/0" not in rule.inputs["sourceRanges"]


def test_the_control_plane_range_overlaps_no_range_of_the_vpcs(settings, a3_run):
    ranges = secondary_ranges(settings.gcp.network_cidr)
    taken = [settings.gcp.network_cidr, ranges.pods, ranges.services,
             *(s.inputs["ipCidrRange"] for s in a3_run.of_type(SUBNET) if "-gpu-nic" in s.name)]
    control_plane = ipaddress.ip_network(ranges.control_plane)
    assert not any(control_plane.overlaps(ipaddress.ip_network(c)) for c in taken)


def test_webhook_ports_are_the_ones_the_installed_manifests_serve():
    from infra.webhooks import ADMISSION_WEBHOOKS
    from workloads.pytorchjob import TRAINING_OPERATOR_MANIFESTS

    docs = [d for d in yaml.load_all(TRAINING_OPERATOR_MANIFESTS.read_text(),
                                 Loader=yaml.CSafeLoader) if d]
    hooks = {h.name: h for h in ADMISSION_WEBHOOKS}
    [config] = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    services = {w["clientConfig"]["service"]["name"] for w in config["webhooks"]}
    assert services == {"training-operator"}
    assert all(w["failurePolicy"] == "Fail" for w in config["webhooks"])
    [service] = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] in services]
    [port] = [p for p in service["spec"]["ports"] if p["port"] == 443]
    assert port["targetPort"] == hooks["training-operator"].port
    assert service["metadata"]["namespace"] == hooks["training-operator"].namespace


def test_the_main_vpc_carries_jumbo_frames(run):
    vpc = run.one(NETWORK, "-vpc")
    assert vpc.inputs["mtu"] == 8896  # the VPC maximum, which gVNIC carries


# --- cluster ---------------------------------------------------------------------------------
def test_cluster_is_regional_and_its_zones_are_those_its_pools_use(run, settings):
    """GKE moves every pool whose zones differ from a changed cluster list: the cluster starts
    with the zones the pools use, so nothing drifts between the cluster and its pools."""
    cluster = run.one(CLUSTER)
    assert cluster.inputs["location"] == settings.region
    assert cluster.inputs["nodeLocations"] == settings.zones
    pool_zones = {z for pool in run.of_type(NODE_POOL) for z in pool.inputs["nodeLocations"]}
    assert pool_zones == set(settings.zones)
    assert cluster.inputs["removeDefaultNodePool"] is True
    assert cluster.inputs["initialNodeCount"] == 1
    for pool in run.of_type(NODE_POOL):  # pools live at the cluster's location
        assert pool.inputs["location"] == settings.region, pool.name


def test_private_nodes_and_api_open_only_to_the_settings_cidrs(run, settings):
    cluster = run.one(CLUSTER)
    assert cluster.inputs["privateClusterConfig"]["enablePrivateNodes"] is True
    blocks = cluster.inputs["masterAuthorizedNetworksConfig"]["cidrBlocks"]
    assert [b["cidrBlock"] for b in blocks] == settings.kubernetes.api_access_cidrs
    assert cluster.inputs["masterAuthorizedNetworksConfig"]["gcpPublicCidrsAccessEnabled"] is False


def test_the_control_plane_endpoints_are_declared_the_current_way(run):
    """ControlPlaneEndpointsConfig: the IP endpoint pulumi uses (behind the authorized
    networks), the DNS endpoint closed to traffic from outside Google. The peering /28 stays:
    it is what the webhook rule names (test above)."""
    endpoints = run.one(CLUSTER).inputs["controlPlaneEndpointsConfig"]
    assert endpoints == {"ipEndpointsConfig": {"enabled": True},
                         "dnsEndpointConfig": {"allowExternalTraffic": False}}


def test_the_endpoint_fields_the_stack_sets_exist_in_the_installed_provider():
    """The fields' wire names as pulumi-gcp declares them; a renamed field would otherwise pass
    the mocks silently (they accept any dict)."""
    import inspect

    import pulumi_gcp as gcp

    c = gcp.container
    assert "control_plane_endpoints_config" in inspect.signature(c.Cluster._internal_init).parameters
    assert list(inspect.signature(
        c.ClusterControlPlaneEndpointsConfigIpEndpointsConfigArgs).parameters) == ["enabled"]
    assert "allow_external_traffic" in inspect.signature(
        c.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs).parameters
    # No replacement for the deprecated PrivateClusterConfig flags in this provider version:
    # ip_endpoints_config has no enable_public_endpoint (above), the cluster no
    # default_enable_private_nodes.
    cluster_args = inspect.signature(c.Cluster._internal_init).parameters
    assert "private_cluster_config" in cluster_args
    assert not [name for name in cluster_args if "default_enable_private_nodes" in name]


def test_workload_identity_pool_is_the_projects(run, settings):
    cluster = run.one(CLUSTER)
    assert cluster.inputs["workloadIdentityConfig"]["workloadPool"] == (
        f"{settings.gcp.project}.svc.id.goog")


def test_cluster_version_channel_addons_and_protection_follow_settings(run, settings):
    from tests.fakes.gcp import CHANNEL_DEFAULTS

    cluster = run.one(CLUSTER)
    # No version in the stack file: GKE creates the cluster at the channel's default build of
    # the day (no version asked), and the stack reports that build.
    assert settings.kubernetes.version is None
    assert "minMasterVersion" not in cluster.inputs
    assert run.outputs["kubernetes_version"] == CHANNEL_DEFAULTS["REGULAR"]
    assert cluster.inputs["releaseChannel"] == {"channel": "REGULAR"}
    assert cluster.inputs["addonsConfig"]["gcpFilestoreCsiDriverConfig"] == {"enabled": True}
    assert "DCGM" in cluster.inputs["monitoringConfig"]["enableComponents"]
    assert cluster.inputs["monitoringConfig"]["managedPrometheus"]["enabled"] is True
    assert cluster.inputs["enableShieldedNodes"] is True
    assert cluster.inputs["deletionProtection"] is settings.gcp.deletion_protection
    policy = cluster.inputs["ipAllocationPolicy"]
    assert (policy["clusterSecondaryRangeName"], policy["servicesSecondaryRangeName"]) == (
        "pods", "services")


def test_the_autoscaler_keeps_nodes_longer_than_kueue_waits_between_attempts(run):
    """GKE exposes only the autoscaling profile: BALANCED keeps an unneeded node 10 minutes,
    longer than Kueue's requeue backoff cap, so the nodes of one attempt are still there for
    the next; OPTIMIZE_UTILIZATION would remove them sooner (issue 32, nodes live long enough)."""
    from workloads.kueue import BACKOFF_MAX_SECONDS

    autoscaling = run.one(CLUSTER).inputs["clusterAutoscaling"]
    assert autoscaling["autoscalingProfile"] == "BALANCED"
    assert "enabled" not in autoscaling  # node auto-provisioning stays off: the pools are ours
    assert BACKOFF_MAX_SECONDS < 10 * 60


def test_the_deployer_acts_as_the_node_account_only_granted_by_the_run_before_the_cluster(run):
    """No project-wide Service Account User (it could act as the default compute account,
    Editor): the run grants whoever runs it actAs on the node account alone, and the cluster
    and pools wait for it (issue 33)."""
    from tests.fakes.gcp import DEPLOYER_EMAIL

    [grant] = [m for m in run.of_type(SA_MEMBER) if m.inputs["role"] == "roles/iam.serviceAccountUser"]
    assert grant.inputs["member"] == f"user:{DEPLOYER_EMAIL}"
    nodes = run.one("gcp:serviceaccount/account:Account", "-nodes")
    assert grant.inputs["serviceAccountId"] and run.waits_for(grant, nodes)
    assert run.waits_for(run.one(CLUSTER), grant)
    for pool in run.of_type(NODE_POOL):
        assert run.waits_for(pool, grant), pool.name
    assert not [m for m in run.of_type("gcp:projects/iAMMember:IAMMember")
                if m.inputs["role"] in ("roles/iam.serviceAccountUser", "roles/owner",
                                        "roles/editor")]


def test_a_service_account_deployer_is_named_as_one():
    from infra.gcp.identity import deployer_member

    assert deployer_member("ci@proj.iam.gserviceaccount.com") == \
        "serviceAccount:ci@proj.iam.gserviceaccount.com"
    assert deployer_member("me@example.com") == "user:me@example.com"


def test_every_resource_kind_the_program_creates_has_its_deployer_role_in_the_docs(
        run, a3_run, a3_mega_run, flex_run):
    """The deployer's roles: a row in infra/gcp/deployer.py for every GCP resource type a full
    mock run registers (shipped stack, A3 TCPX, A3 Mega TCPXO, flex-start), and the docs'
    table lists exactly those roles, project-wide Service Account User not among them."""
    from infra.gcp.deployer import DEPLOYER_NEEDS, deployer_roles

    registered = {r.type for fixture in (run, a3_run, a3_mega_run, flex_run)
                  for r in fixture.resources
                  if r.custom and r.type.split(":")[0] in ("gcp", "docker-build")}
    assert registered <= set(DEPLOYER_NEEDS), sorted(registered - set(DEPLOYER_NEEDS))
    assert all(n.permissions and all(re.fullmatch(r"[a-z]+(\.[a-zA-Z]+){2}", p)
                                     for p in n.permissions) for n in DEPLOYER_NEEDS.values())
    text = (harness.ROOT / "docs" / "gcp.md").read_text()
    section = text[text.index("The roles to create all of the above"):text.index("## 2. Enable")]
    documented = set(re.findall(r"^  \| `(roles/[\w.]+)`", section, flags=re.M))
    assert documented == set(deployer_roles())
    assert "roles/iam.serviceAccountUser" not in documented


KMS_KEY = "projects/kms-proj-1/locations/us-central1/keyRings/gke/cryptoKeys/secrets"


def test_secrets_are_encrypted_with_the_users_kms_key_only_when_one_is_set(run):
    """An optional customer-managed key for GKE's Secrets (issue 33): databaseEncryption
    ENCRYPTED with the key's resource name; unset, GKE's default encryption."""
    assert run.one(CLUSTER).inputs.get("databaseEncryption") is None
    keyed = run_gcp({"gcp": {"secretsKmsKey": KMS_KEY}})
    assert keyed.one(CLUSTER).inputs["databaseEncryption"] == {
        "state": "ENCRYPTED", "keyName": KMS_KEY}


@pytest.mark.parametrize(("key", "words"), [
    ("secrets", ("projects/PROJECT/locations/us-central1/keyRings/RING/cryptoKeys/KEY",
                 "gcloud kms keys list")),
    (KMS_KEY.replace("us-central1", "europe-west4"), ("cluster's region us-central1",
                                                      "europe-west4")),
])
def test_a_secrets_key_gke_would_refuse_is_refused_first(key, words):
    with pytest.raises(SettingsError) as refused:
        stack_settings({"gcp": {"secretsKmsKey": key}})
    [problem] = [p for p in refused.value.problems if p.path == "gcp.secretsKmsKey"]
    for word in words:
        assert word in problem.allowed, problem


def test_deletion_protection_setting_reaches_the_cluster():
    protected = run_gcp({"gcp": {"deletionProtection": True}})
    assert protected.one(CLUSTER).inputs["deletionProtection"] is True


def test_every_gcp_resource_uses_the_explicit_provider(run, settings):
    provider = run.one(GCP_PROVIDER)
    assert provider.inputs["project"] == settings.gcp.project
    assert provider.inputs["region"] == settings.region
    assert json.loads(provider.inputs["defaultLabels"]) == settings.tags
    for resource in run.resources:
        if resource.type.startswith("gcp:"):
            assert resource.provider_urn == provider.urn, resource.name


def test_everything_is_inside_the_component(run):
    component = run.one(COMPONENT)
    assert component.name == "torchrec-cloud-gcp"
    for resource in run.resources:
        if resource.type.startswith(("gcp:", "pulumi:providers:gcp", "pulumi:providers:kube")):
            assert resource.parent == component.urn, resource.name


# --- node pools ------------------------------------------------------------------------------
def test_system_pool_follows_the_settings(run, settings):
    pool = gpu_pools(run)[settings.system_pool.name]
    assert pool.inputs["nodeConfig"]["machineType"] == settings.system_pool.machine_type
    assert "guestAccelerators" not in pool.inputs["nodeConfig"]
    assert pool.inputs["autoscaling"]["minNodeCount"] == settings.system_pool.min_nodes


def test_gpu_accelerators_match_the_catalog_machine(run, settings):
    for key in ("on_demand", "spot"):
        wanted = getattr(settings.gpu_pools, key)
        gpu = machine(Cloud.GCP, wanted.machine_type)
        config = gpu_pools(run)[wanted.name].inputs["nodeConfig"]
        assert config["machineType"] == gpu.name
        [accelerator] = config["guestAccelerators"]
        assert accelerator["type"] == gpu.gcp_accelerator_type
        assert accelerator["count"] == gpu.gpu_count
        assert accelerator["gpuDriverInstallationConfig"]["gpuDriverVersion"] in {"LATEST", "DEFAULT"}


def test_gpu_pools_are_compact_in_one_zone(run, settings):
    for key in ("on_demand", "spot"):
        pool = gpu_pools(run)[getattr(settings.gpu_pools, key).name]
        assert pool.inputs["placementPolicy"] == {"type": "COMPACT"}
        assert pool.inputs["nodeLocations"] == [settings.gpu_zones[0]]


def test_gpu_nodes_are_hardened(run, settings):
    config = gpu_pools(run)[settings.gpu_pools.on_demand.name].inputs["nodeConfig"]
    assert config["gvnic"] == {"enabled": True}
    assert config["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert config["shieldedInstanceConfig"] == {"enableSecureBoot": True,
                                                "enableIntegrityMonitoring": True}
    node_sa = run.one("gcp:serviceaccount/account:Account", "nodes")
    assert config["serviceAccount"] == f"{node_sa.inputs['accountId']}@torchrec-ci-01.iam.gserviceaccount.com"


def test_node_account_has_gkes_default_node_role_and_what_image_streaming_needs(run):
    members = run.of_type("gcp:projects/iAMMember:IAMMember")
    assert {m.inputs["role"] for m in members} == {
        "roles/container.defaultNodeServiceAccount", "roles/serviceusage.serviceUsageConsumer"}
    for member in members:
        assert member.inputs["member"].endswith("nodes@torchrec-ci-01.iam.gserviceaccount.com")


def test_spot_pool_is_spot_and_scales_to_zero(run, settings):
    spot = settings.gpu_pools.spot
    pool = gpu_pools(run)[spot.name]
    assert pool.inputs["nodeConfig"]["spot"] is True
    assert pool.inputs["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": spot.max_nodes}
    assert pool.inputs["initialNodeCount"] == spot.desired_nodes
    on_demand = gpu_pools(run)[settings.gpu_pools.on_demand.name]
    assert on_demand.inputs["nodeConfig"]["spot"] is False


def test_on_demand_pool_sizes_follow_the_settings(run, settings):
    wanted = settings.gpu_pools.on_demand
    pool = gpu_pools(run)[wanted.name]
    assert pool.inputs["autoscaling"] == {"minNodeCount": wanted.min_nodes,
                                          "maxNodeCount": wanted.max_nodes}
    assert pool.inputs["initialNodeCount"] == wanted.desired_nodes


def test_contract_pools_carry_gke_labels_and_the_gpu_taint(contract):
    spot = contract.gpu_pools["spot"]
    assert spot.spot and spot.node_labels["cloud.google.com/gke-spot"] == "true"
    assert spot.min_nodes == 0
    on_demand = contract.gpu_pools["onDemand"]
    assert "cloud.google.com/gke-spot" not in on_demand.node_labels
    for pool in contract.gpu_pools.values():
        assert pool.node_labels["cloud.google.com/gke-nodepool"] == pool.name
        assert ("nvidia.com/gpu", "NoSchedule") in {(t.key, t.effect) for t in pool.taints}
        assert pool.machine.gcp_accelerator_type == "nvidia-tesla-a100"
    assert contract.interconnect.env == {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "WARN"}
    assert contract.shared_file_system.source.path == "/shared"
    assert "nfsvers=3" in contract.shared_file_system.mount_options
    assert contract.checkpoints.pod_labels == {}
    assert set(contract.checkpoints.service_account_annotations) == {
        "iam.gke.io/gcp-service-account"}


# --- Filestore -------------------------------------------------------------------------------
def test_filestore_follows_the_settings_on_the_cluster_network(run, settings):
    fs = settings.shared_file_system
    instance = run.one(FILESTORE)
    assert instance.inputs["tier"] == fs.tier.value
    assert instance.inputs["location"] == settings.gpu_zones[0]
    assert instance.inputs["fileShares"] == {"name": fs.share_name, "capacityGb": fs.capacity_gib}
    [network] = instance.inputs["networks"]
    assert network["modes"] == ["MODE_IPV4"]
    assert network["connectMode"] == "DIRECT_PEERING"
    assert network["network"] == run.one("gcp:compute/network:Network").name


def test_regional_filestore_lives_in_the_region():
    regional = run_gcp({"sharedFileSystem": {"tier": "REGIONAL", "capacityGib": 1024}})
    assert regional.one(FILESTORE).inputs["location"] == "us-central1"


@pytest.mark.parametrize("tier, capacity_gib, expected", [
    ("ZONAL", 2560, "nconnect=2"), ("REGIONAL", 9984, "nconnect=2"),
    ("ZONAL", 10240, "nconnect=7"), ("HIGH_SCALE_SSD", 10240, "nconnect=7"),
    ("BASIC_SSD", 2560, None), ("BASIC_HDD", 1024, None)])
def test_filestore_mounts_with_the_connections_google_advises_for_its_tier_and_size(
        tier, capacity_gib, expected):
    from infra.gcp.filestore import mount_options
    from infra.settings.model.shared_file_system import FilestoreTier
    options = mount_options(FilestoreTier(tier), capacity_gib)
    assert [o for o in options if o.startswith("nconnect=")] == ([expected] if expected else [])
    assert options[:2] == ["nfsvers=3", "hard"]


def test_the_stacks_filestore_share_reaches_the_pods_with_nconnect(contract, settings):
    assert settings.shared_file_system.capacity_gib < 10240  # the stack's 1-9.75 TiB share
    assert "nconnect=2" in contract.shared_file_system.mount_options


# --- checkpoints and identity ----------------------------------------------------------------
def test_checkpoint_bucket_is_private_versioned_regional_and_kept(run, settings):
    bucket = run.one(BUCKET)
    assert bucket.inputs["uniformBucketLevelAccess"] is True
    assert bucket.inputs["publicAccessPrevention"] == "enforced"
    assert bucket.inputs["versioning"] == {"enabled": True}
    # Pruned or overwritten checkpoints (noncurrent versions) are deleted a day later, into
    # the week of soft delete (test_deleted_checkpoints_stay_recoverable_for_a_week...).
    rule, _ = bucket.inputs["lifecycleRules"]
    assert rule["action"] == {"type": "Delete"}
    assert rule["condition"]["daysSinceNoncurrentTime"] == 1
    assert rule["condition"]["withState"] == "ARCHIVED"
    assert "matchesPrefixes" not in rule["condition"]  # the whole bucket
    assert bucket.inputs["location"] == settings.region.upper()
    assert bucket.retain_on_delete is True
    assert bucket.inputs["forceDestroy"] is False


def test_the_telemetry_mirror_s_overwritten_copies_are_deleted_after_a_day():
    """The trainer copies metrics.jsonl whole to <checkpoint_uri>/telemetry/ every minute: on
    the versioned bucket each copy leaves the last one noncurrent, which the checkpoints' week
    would keep (stored bytes growing with the square of the run's length). The rule follows
    the job's name, the prefix the trainer writes under."""
    run = run_stack("gcp", overrides={"job": {"name": "ctr"}})
    _, rule = run.one(BUCKET).inputs["lifecycleRules"]
    assert rule["action"] == {"type": "Delete"}
    assert rule["condition"]["matchesPrefixes"] == ["ctr/telemetry/"]
    assert rule["condition"]["daysSinceNoncurrentTime"] == 1
    assert rule["condition"]["withState"] == "ARCHIVED"  # noncurrent only: the live copy stays
    args = training_pod_template(run)["spec"]["containers"][0]["args"]
    (uri,) = [a for a in args if str(a).startswith("--telemetry_dir=")]
    assert uri == f"--telemetry_dir=gs://{run.one(BUCKET).inputs['name']}/ctr/telemetry"


def test_bucket_without_retention_is_deleted_with_its_data(a3_run):
    bucket = a3_run.one(BUCKET)
    assert bucket.retain_on_delete is False
    assert bucket.inputs["forceDestroy"] is True


def test_bucket_access_is_granted_to_the_job_account_only(run):
    [member] = run.of_type(BUCKET_MEMBER)
    job_sa = run.one("gcp:serviceaccount/account:Account", "job")
    email = f"{job_sa.inputs['accountId']}@torchrec-ci-01.iam.gserviceaccount.com"
    assert member.inputs["member"] == f"serviceAccount:{email}"
    assert member.inputs["role"] in {"roles/storage.objectUser", "roles/storage.objectAdmin"}
    assert run.waits_for(member, run.one(BUCKET))


def test_workload_identity_binds_exactly_the_jobs_kubernetes_account(run, settings):
    # (the other service account binding: the deployer's actAs on the node account)
    [binding] = [m for m in run.of_type(SA_MEMBER)
                 if m.inputs["role"] != "roles/iam.serviceAccountUser"]
    assert binding.inputs["role"] == "roles/iam.workloadIdentityUser"
    assert binding.inputs["member"] == (
        f"serviceAccount:{settings.gcp.project}.svc.id.goog"
        f"[{settings.job.namespace}/{settings.job.service_account}]")
    assert binding.inputs["serviceAccountId"].endswith(
        run.one("gcp:serviceaccount/account:Account", "job").inputs["accountId"]
        + "@torchrec-ci-01.iam.gserviceaccount.com")
    assert run.waits_for(binding, run.one(CLUSTER))  # the pool exists once the cluster does


# --- kubeconfig, provider, image -------------------------------------------------------------
def test_kubernetes_provider_waits_for_every_pool(run):
    provider = run.one(K8S_PROVIDER)
    for pool in run.of_type(NODE_POOL):
        assert run.waits_for(provider, pool), pool.name
    assert run.waits_for(provider, run.one("gcp:compute/routerNat:RouterNat"))


def test_kubeconfig_uses_the_gke_auth_plugin_and_is_secret(run):
    provider = run.one(K8S_PROVIDER)
    wrapped = provider.inputs["kubeconfig"]
    assert isinstance(wrapped, dict) and SECRET_SIG in wrapped, "the kubeconfig must be a secret"
    kubeconfig = json.loads(unsecret(wrapped))
    [user] = kubeconfig["users"]
    assert user["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert "token" not in user["user"]
    [cluster] = kubeconfig["clusters"]
    assert cluster["cluster"]["server"] == "https://203.0.113.10"
    assert cluster["cluster"]["certificate-authority-data"]
    if WORKLOADS_READY:
        assert "kubeconfig" in run.secret_outputs


def test_trainer_image_is_built_into_artifact_registry(run, settings):
    repo = run.one("gcp:artifactregistry/repository:Repository")
    assert repo.inputs["format"] == "DOCKER"
    assert repo.inputs["location"] == settings.region
    image = run.one("docker-build:index:Image")
    [tag] = image.inputs["tags"]
    assert tag.startswith(f"us-central1-docker.pkg.dev/{settings.gcp.project}/{repo.inputs['repositoryId']}/trainer:")
    [registry] = unsecret(image.inputs["registries"])
    assert registry["username"] == "oauth2accesstoken"
    assert registry["address"] == "us-central1-docker.pkg.dev"
    reader = run.one("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember")
    assert reader.inputs["role"] == "roles/artifactregistry.reader"
    assert reader.inputs["member"].endswith("nodes@torchrec-ci-01.iam.gserviceaccount.com")


def test_the_job_waits_for_the_iam_it_needs(contract, a3_contract):
    """Workload identity, checkpoint writes and image pulls are granted before any pod starts:
    the workload layer depends on `ready`, and each grant is in it."""
    import pulumi_gcp as gcp
    kinds = {type(resource) for resource in contract.ready}
    assert {gcp.serviceaccount.IAMMember, gcp.storage.BucketIAMMember,
            gcp.artifactregistry.RepositoryIamMember} <= kinds
    given_image = {type(resource) for resource in a3_contract.ready}  # nothing to pull-grant
    assert gcp.artifactregistry.RepositoryIamMember not in given_image
    assert gcp.storage.BucketIAMMember in given_image


def test_a_preparation_source_bucket_is_read_by_the_preparation_s_own_account_only():
    """The source is read by `<prefix>-prep`, which only `torchrec/trainer-prepare` can act as;
    the trainer's account gets no read there, and the preparation's no checkpoint write."""
    run = run_gcp({"dataset": {"path": "criteo/prepared", "prepare": {
        "enabled": True, "source": "gs://raw-criteo/days"}}})
    [read] = [m for m in run.of_type(BUCKET_MEMBER) if m.inputs["bucket"] == "raw-criteo"]
    assert read.inputs["role"] == "roles/storage.objectViewer"
    assert read.inputs["member"].startswith("serviceAccount:") and "-prep@" in read.inputs["member"]
    prep_member = read.inputs["member"]
    assert [m for m in run.of_type(BUCKET_MEMBER) if m.inputs["member"] == prep_member] == [read]
    bindings = {m.inputs["member"] for m in run.of_type("gcp:serviceaccount/iAMMember:IAMMember")
                if m.inputs["role"] == "roles/iam.workloadIdentityUser"}
    assert "serviceAccount:torchrec-ci-01.svc.id.goog[torchrec/trainer-prepare]" in bindings
    assert "serviceAccount:torchrec-ci-01.svc.id.goog[torchrec/trainer]" in bindings


def test_a_preparation_from_the_shared_file_system_has_no_cloud_identity():
    run = run_gcp({"dataset": {"path": "criteo/prepared", "prepare": {
        "enabled": True, "source": "criteo/raw"}}})
    assert not [a for a in run.of_type("gcp:serviceaccount/account:Account")
                if "prep" in a.inputs["accountId"]]


def test_a_given_image_builds_nothing(a3_run):
    assert not a3_run.of_type("docker-build:index:Image")
    assert not a3_run.of_type("gcp:artifactregistry/repository:Repository")


# --- A3 with GPUDirect-TCPX ------------------------------------------------------------------
def test_a3_pools_get_h100_accelerators_and_no_placement_when_off(a3_run):
    for pool in a3_run.of_type(NODE_POOL):
        config = pool.inputs["nodeConfig"]
        if config.get("guestAccelerators"):
            assert config["guestAccelerators"][0]["type"] == "nvidia-h100-80gb"
            assert config["guestAccelerators"][0]["count"] == 8
            assert "placementPolicy" not in pool.inputs


def test_a3_with_fabric_gets_the_tcpx_nccl_environment(a3_contract):
    env = a3_contract.interconnect.env
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert env["NCCL_CROSS_NIC"] == "0"
    assert env["NCCL_PROTO"] == "Simple"
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "eth1,eth2,eth3,eth4"
    # gpudirect-tcpx/README.md, release Jun 22, 2026 (v3.1.12 / v2.0.15), "NCCL configs".
    assert env["NCCL_ALGO"] == "Ring,Tree"
    assert env["NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS"] == "500000"
    # torch's own NCCL runs (Google's 2.19.4 lacks symbols torch 2.13 calls); the installer's
    # folder is on the library path for the net plugin only.
    assert "LD_PRELOAD" not in env and env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert a3_contract.interconnect.nccl_version == "2.29.7"
    assert a3_contract.interconnect.trainer_runs_as_root


def test_the_tcpx_release_notes_pair_the_images_the_stack_pins():
    """The pinned pair is one of Google's releases, as its release notes list them (coupled:
    "The tcpx-daemon version is coupled with the NCCL plugin installer version")."""
    from infra.catalog.machines import Interconnect
    from infra.gcp.interconnect import GPUDIRECT

    releases = {  # gpudirect-tcpx/README.md: installer, rxdm, qualified NCCL
        "Jun 22, 2026": ("v3.1.12", "v2.0.15", "2.19.4"),
        "Feb 15, 2024": ("v3.1.9", "v2.0.12", "2.19.3"),
    }
    tcpx = GPUDIRECT[Interconnect.GPUDIRECT_TCPX]
    pinned = (tcpx.installer_image.rsplit(":", 1)[1], tcpx.rxdm_image.rsplit(":", 1)[1],
              tcpx.qualified_nccl)
    assert pinned == releases["Jun 22, 2026"]  # the newest
    tcpxo = GPUDIRECT[Interconnect.GPUDIRECT_TCPXO]
    assert (tcpxo.installer_image.rsplit(":", 1)[1], tcpxo.rxdm_image.rsplit(":", 1)[1],
            tcpxo.qualified_nccl) == ("v1.0.15", "v1.0.21", "2.28.7")  # gpudirect-tcpxo, Jan 9, 2026


def test_the_nccl_the_gate_requires_on_a3_is_the_one_the_image_pins_for_torch(tmp_path):
    from infra.gcp.interconnect import torch_nccl_version

    # tests/test_image.py holds the image build to the same pin (torch 2.13.0 declares it).
    assert torch_nccl_version() == "2.29.7"
    unpinned = tmp_path / "requirements-gpu.txt"
    unpinned.write_text("torch==2.13.0\nnvidia-nccl-cu12>=2.29\n")
    with pytest.raises(ValueError, match="pins no nvidia-nccl-cu12==X.Y.Z"):
        torch_nccl_version(unpinned)


def _bind_unix_socket(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    return sock


def test_the_tcpx_sidecar_is_started_only_once_the_rxdm_serves_its_sockets(tmp_path):
    """The startup probe's command, run for real against a folder standing in for /run/tcpx:
    it fails while the rxdm has not bound its sockets (or a plain file has the name), and
    passes once all three are unix sockets."""
    from infra.catalog.machines import Interconnect
    from infra.gcp.interconnect import GPUDIRECT, TCPX_RXDM_SOCKETS, rxdm_sidecar

    probe = rxdm_sidecar(GPUDIRECT[Interconnect.GPUDIRECT_TCPX]).startup_probe
    assert probe.failure_threshold * probe.period_seconds == 120  # 2 minutes, as TCPXO's
    shell, flag, script = probe.exec_.command
    assert (shell, flag) == ("/bin/sh", "-c") and "/run/tcpx/rx_rule_manager" in script

    from infra.gcp.interconnect import NVIDIA_LIB64

    libraries = tmp_path / "lib64"  # stands in for the plugin installer's folder
    libraries.mkdir()

    def ready() -> bool:
        run = subprocess.run([shell, flag, script.replace("/run/tcpx", str(tmp_path))
                              .replace(NVIDIA_LIB64, str(libraries))])
        return run.returncode == 0

    assert not ready()  # the rxdm is still setting up the NICs
    held = [_bind_unix_socket(tmp_path / name) for name in TCPX_RXDM_SOCKETS[:2]]
    (tmp_path / TCPX_RXDM_SOCKETS[2]).write_text("")  # a file, not a socket
    assert not ready()
    (tmp_path / TCPX_RXDM_SOCKETS[2]).unlink()
    held.append(_bind_unix_socket(tmp_path / TCPX_RXDM_SOCKETS[2]))
    assert not ready()  # the rxdm serves, but the NCCL plugin is not installed yet
    (libraries / "libnccl-net.so").write_bytes(b"\x7fELF")
    assert ready()
    for sock in held:
        sock.close()


# --- validation ------------------------------------------------------------------------------
BAD_SETTINGS = {
    "filestore capacity for the tier": (
        {"sharedFileSystem": {"tier": "BASIC_SSD", "capacityGib": 1024}},
        "sharedFileSystem.capacityGib"),
    "compact placement across zones": (
        {"zones": ["us-central1-a", "us-central1-b"],
         "gpuZones": ["us-central1-a", "us-central1-b"]},
        "gpuZones"),
    "GPUDirect on an A2 machine": (
        {"interconnect": {"fabric": True}}, "interconnect.fabric"),
    "GPUDirect-RDMA (A3 Ultra), which this program does not set up": (
        {"gpuPools": {"onDemand": {"machineType": "a3-ultragpu-8g"},
                      "spot": {"machineType": "a3-ultragpu-8g"}},
         "interconnect": {"fabric": True}},
        "interconnect.fabric"),
    "a CPU machine in a GPU pool (no accelerator to attach)": (
        {"gpuPools": {"onDemand": {"machineType": "n2-standard-4"}}},
        "gpuPools.onDemand.machineType"),
    "an accelerator type from another cloud's machine": (
        {"gpuPools": {"spot": {"machineType": "p4d.24xlarge"}}},
        "gpuPools.spot.machineType"),
}


@pytest.mark.parametrize("case", sorted(BAD_SETTINGS))
def test_bad_gcp_settings_are_refused_before_any_resource_exists(case):
    overrides, path = BAD_SETTINGS[case]
    failed = run_gcp(overrides, expect_error=True)
    assert isinstance(failed.error, SettingsError), failed.error
    assert path in {p.path for p in failed.error.problems}, failed.error
    assert not [r for r in failed.resources if r.type != "pulumi:pulumi:Stack"]


def test_the_stack_file_itself_is_valid(settings):
    assert settings.cloud == Cloud.GCP and settings.gcp.project
    assert Path(harness.ROOT / "Pulumi.gcp.yaml").exists()


# --- spot notice -> pod: graceful node shutdown ---------------------------------------------
@pytest.fixture(scope="module")
def gke_135_run() -> Run:
    """The stack on Kubernetes 1.35, where GKE lets a Spot pool extend its shutdown to 120 s."""
    return run_gcp({"kubernetes": {"version": "1.35"}})


def test_on_gke_1_35_the_spot_pool_gives_ordinary_pods_105_of_120_seconds(gke_135_run):
    pools = gpu_pools(gke_135_run)
    kubelet = pools["gpuspot"].inputs["nodeConfig"]["kubeletConfig"]
    assert kubelet == {"shutdownGracePeriodSeconds": 120,
                       "shutdownGracePeriodCriticalPodsSeconds": 15}


def test_only_the_spot_pool_carries_the_spot_shutdown_setting(gke_135_run):
    # GKE accepts the field on Spot and preemptible VMs only.
    for name, pool in gpu_pools(gke_135_run).items():
        if name != "gpuspot":
            assert "kubeletConfig" not in pool.inputs["nodeConfig"], name


def test_below_gke_1_35_no_pool_asks_for_a_shutdown_gke_would_refuse(run):
    # The channel's 1.34 default keeps GKE's default: 30 s in all, 15 s for ordinary pods.
    for name, pool in gpu_pools(run).items():
        assert "kubeletConfig" not in pool.inputs["nodeConfig"], name


@pytest.mark.parametrize(("version", "grace"), [
    ("1.33", (30, 15)),
    ("1.34", (30, 15)),
    ("1.35", (120, 15)),  # GKE resolves "1.35" to its newest 1.35 build
    ("1.35.0-gke.1170999", (30, 15)),
    ("1.35.0-gke.1171000", (120, 15)),
    ("1.36", (120, 15)),
])
def test_the_spot_shutdown_window_follows_the_gke_version(version, grace):
    from infra.gcp.node_pools import spot_shutdown_grace

    assert spot_shutdown_grace(version) == grace


# --- GPUDirect on A3: VPCs, multi-networking, GKE network objects, DaemonSets, the pod --------
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
PARAM_SET = "kubernetes:networking.gke.io/v1:GKENetworkParamSet"
GKE_NETWORK = "kubernetes:networking.gke.io/v1:Network"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"

A3_MEGA_OVERRIDES = {
    **A3_OVERRIDES,
    "gpuPools": {"onDemand": {"machineType": "a3-megagpu-8g"},
                 "spot": {"machineType": "a3-megagpu-8g"}},
}


@pytest.fixture(scope="module")
def a3_mega_run() -> Run:
    """A3 Mega with GPUDirect-TCPXO."""
    return run_gcp(A3_MEGA_OVERRIDES)


@pytest.fixture(scope="module")
def a3_sockets_run() -> Run:
    """A3 High with interconnect.fabric off: NCCL over gVNIC, nothing of GPUDirect."""
    return run_gcp({**A3_OVERRIDES, "interconnect": {"placement": False, "fabric": False}})


def gpu_vpcs(run: Run) -> list[Any]:
    return sorted((n for n in run.of_type(NETWORK) if "-gpu-nic" in n.name), key=lambda n: n.name)


def pod_template(run: Run) -> dict[str, Any]:
    (replicated,) = run.one(JOBSET).inputs["spec"]["replicatedJobs"]
    return replicated["template"]["spec"]["template"]


def trainer(pod: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod["spec"]["containers"]
    return container


def test_gpu_direct_settings_rule_and_infra_agree_on_what_is_set_up():
    from infra.gcp.interconnect import GPUDIRECT
    from infra.settings.rules import GCP_FABRICS_SET_UP

    assert set(GPUDIRECT) == GCP_FABRICS_SET_UP


@pytest.mark.parametrize(("fixture", "nics"), [("a3_run", 4), ("a3_mega_run", 8)])
def test_a3_gets_one_jumbo_frame_vpc_per_gpu_nic_clear_of_the_cluster_ranges(
        fixture, nics, settings, request):
    run = request.getfixturevalue(fixture)
    vpcs = gpu_vpcs(run)
    assert [v.name for v in vpcs] == sorted(f"torchrec-cloud-gcp-gpu-nic{n}" for n in range(1, nics + 1))
    for vpc in vpcs:
        assert vpc.inputs["mtu"] == 8244  # cluster-toolkit multivpc `mtu: 8244`
        assert vpc.inputs["autoCreateSubnetworks"] is False
    subnets = [s for s in run.of_type(SUBNET) if "-gpu-nic" in s.name]
    assert len(subnets) == nics
    ranges = secondary_ranges(settings.gcp.network_cidr)
    cluster_nets = [ipaddress.ip_network(c) for c in
                    (settings.gcp.network_cidr, ranges.pods, ranges.services)]
    gpu_nets = [ipaddress.ip_network(s.inputs["ipCidrRange"]) for s in subnets]
    assert all(n.prefixlen == 20 and n.is_private for n in gpu_nets)
    every = cluster_nets + gpu_nets
    assert not any(a.overlaps(b) for i, a in enumerate(every) for b in every[i + 1:])


def test_gpu_vpcs_admit_only_their_own_range_and_only_to_gpu_nodes(a3_run):
    subnets = {s.name: s.inputs["ipCidrRange"] for s in a3_run.of_type(SUBNET)}
    rules = [r for r in a3_run.of_type(FIREWALL) if "-gpu-nic" in r.name]
    assert len(rules) == 4
    for rule in rules:
        nic = rule.name.removesuffix("-internal")
        assert rule.inputs["sourceRanges"] == [subnets[nic]]
        assert "0.0.0.0/0" not in rule.inputs["sourceRanges"]
        assert rule.inputs["targetTags"] == ["gpu-node"]
        assert {a["protocol"] for a in rule.inputs["allows"]} == {"tcp", "udp", "icmp"}


def test_every_cluster_enforces_network_policy_with_dataplane_v2(run, a3_sockets_run):
    for plain in (run, a3_sockets_run):
        assert plain.one(CLUSTER).inputs["datapathProvider"] == "ADVANCED_DATAPATH"
        # ... and the job's policy is there for it to enforce.
        policy = plain.one("kubernetes:networking.k8s.io/v1:NetworkPolicy")
        assert policy.inputs["spec"]["policyTypes"] == ["Ingress", "Egress"]
        assert plain.waits_for(policy, plain.one(CLUSTER))


def test_a3_cluster_has_multi_networking_on_dataplane_v2(a3_run, a3_mega_run):
    for run in (a3_run, a3_mega_run):
        cluster = run.one(CLUSTER)
        assert cluster.inputs["enableMultiNetworking"] is True
        assert cluster.inputs["datapathProvider"] == "ADVANCED_DATAPATH"


def test_a2_and_a3_without_fabric_stay_as_they_were(run, a3_sockets_run):
    for plain in (run, a3_sockets_run):
        cluster = plain.one(CLUSTER)
        assert "enableMultiNetworking" not in cluster.inputs
        assert not gpu_vpcs(plain)
        assert not plain.of_type(DAEMONSET) and not plain.of_type(GKE_NETWORK)
        for pool in plain.of_type(NODE_POOL):
            assert "networkConfig" not in pool.inputs, pool.name
        pod = pod_template(plain)
        assert "annotations" not in pod["metadata"]
        assert [c["name"] for c in pod["spec"]["initContainers"]] == ["prepare-shared-fs"]
        env = {e["name"]: e.get("value") for e in trainer(pod)["env"]}
        assert env["NCCL_SOCKET_IFNAME"] == "eth0" and "LD_LIBRARY_PATH" not in env


@pytest.mark.parametrize(("fixture", "nics"), [("a3_run", 4), ("a3_mega_run", 8)])
def test_a3_gpu_pools_get_every_gpu_vpc_as_an_extra_nic(fixture, nics, request):
    run = request.getfixturevalue(fixture)
    names = {v.name: v for v in gpu_vpcs(run)}
    for pool in run.of_type(NODE_POOL):
        if not pool.inputs["nodeConfig"].get("guestAccelerators"):
            assert "networkConfig" not in pool.inputs  # the system pool
            continue
        extra = pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]
        # By name, in NIC order: eth1 is on gpu-nic1 (the mocks echo the logical name).
        assert extra == [{"network": f"torchrec-cloud-gcp-gpu-nic{n}",
                          "subnetwork": f"torchrec-cloud-gcp-gpu-nic{n}"}
                         for n in range(1, nics + 1)]
        assert set(e["network"] for e in extra) <= set(names)


def test_each_gpu_vpc_is_a_gke_device_network_the_pods_can_name(a3_run):
    provider = a3_run.one(K8S_PROVIDER)
    params = {p.inputs["metadata"]["name"]: p for p in a3_run.of_type(PARAM_SET)}
    networks = {n.inputs["metadata"]["name"]: n for n in a3_run.of_type(GKE_NETWORK)}
    assert sorted(params) == sorted(networks) == ["vpc1", "vpc2", "vpc3", "vpc4"]
    for n in range(1, 5):
        name = f"vpc{n}"
        assert params[name].inputs["spec"] == {
            "vpc": f"torchrec-cloud-gcp-gpu-nic{n}", "vpcSubnet": f"torchrec-cloud-gcp-gpu-nic{n}",
            "deviceMode": "NetDevice"}
        assert networks[name].inputs["spec"] == {"type": "Device", "parametersRef": {
            "group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name}}
        assert a3_run.waits_for(networks[name], params[name])
        for obj in (params[name], networks[name]):
            assert obj.provider_urn == provider.urn


def daemonsets(run: Run) -> dict[str, dict[str, Any]]:
    return {d.inputs["metadata"]["name"]: d.inputs for d in run.of_type(DAEMONSET)}


def test_a3_high_installs_the_tcpx_plugin_and_the_device_injector_pinned(a3_run):
    sets = daemonsets(a3_run)
    assert set(sets) == {"nccl-tcpx-installer", "device-injector"}
    for name, ds in sets.items():
        assert ds["metadata"]["namespace"] == "kube-system"
        pod = ds["spec"]["template"]["spec"]
        [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        assert term["matchExpressions"] == [{"key": "cloud.google.com/gke-accelerator",
                                             "operator": "In", "values": ["nvidia-h100-80gb"]}]
        assert pod["tolerations"] == [{"operator": "Exists"}]
        for container in pod.get("initContainers", []) + pod["containers"]:
            image = container["image"]
            assert "@sha256:" in image or re.search(r":v?\d+(\.\d+)+$", image), image
    installer = sets["nccl-tcpx-installer"]["spec"]["template"]["spec"]
    [init] = installer["initContainers"]
    # Google's current TCPX release (gpudirect-tcpx/README.md, Jun 22, 2026).
    assert init["image"] == ("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/"
                             "nccl-plugin-gpudirecttcpx-dev:v3.1.12")
    assert "/scripts/container_entry.sh install --install-nccl" in init["args"][0]
    injector = sets["device-injector"]["spec"]["template"]["spec"]
    assert injector["containers"][0]["image"].startswith("gcr.io/gke-release/nri-device-injector@sha256:")


def test_a3_mega_installs_the_tcpxo_plugin_after_exposing_the_aperture_devices(a3_mega_run):
    sets = daemonsets(a3_mega_run)
    assert set(sets) == {"nccl-tcpxo-installer", "device-injector"}
    installer = sets["nccl-tcpxo-installer"]["spec"]["template"]["spec"]
    pre, install = installer["initContainers"]
    assert pre["name"] == "pre-installation" and pre["command"][:4] == ["nsenter", "-at", "1", "--"]
    assert "/dev/aperture_devices" in pre["command"][-1]
    # Google's Docker Hub cache: no anonymous Docker Hub rate limit on the nodes' pulls.
    assert pre["image"] == "mirror.gcr.io/library/ubuntu:24.04"
    assert install["image"].endswith("/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15")
    values = installer["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    assert values == ["nvidia-h100-mega-80gb"]


def test_the_job_waits_for_every_gpudirect_object(a3_run):
    jobset = a3_run.one(JOBSET)
    for kind in (DAEMONSET, PARAM_SET, GKE_NETWORK):
        for obj in a3_run.of_type(kind):
            assert a3_run.waits_for(jobset, obj), obj.name


@pytest.mark.parametrize("name", ["a3-highgpu-8g", "a3-megagpu-8g"])
def test_the_rxdm_sidecar_gets_one_device_per_gpu_the_catalog_gives_the_machine(name: str) -> None:
    """The GPU devices injected into the sidecar follow the catalog's gpu_count (a machine with
    fewer GPUs gets fewer /dev/nvidia<i>, none that do not exist), then the control devices."""
    from dataclasses import replace

    from infra.gcp.interconnect import interconnect_spec

    for gpus in (8, 4):
        a3 = replace(machine(Cloud.GCP, name), gpu_count=gpus)
        [annotation] = [v for k, v in interconnect_spec(a3, True).pod_annotations.items()
                        if k.startswith("devices.gke.io/container.")]
        paths = [d["path"] for d in yaml.safe_load(annotation)]
        nvidia = [p for p in paths if re.fullmatch(r"/dev/nvidia\d+", p)]
        assert nvidia == [f"/dev/nvidia{i}" for i in range(gpus)]
        assert {"/dev/nvidiactl", "/dev/nvidia-uvm"} <= set(paths)


def test_a3_high_pod_carries_the_tcpx_sidecar_networks_and_environment(a3_run):
    from infra.gcp.interconnect import TCPX_ENV

    pod = pod_template(a3_run)
    annotations = pod["metadata"]["annotations"]
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    assert json.loads(annotations["networking.gke.io/interfaces"]) == [
        {"interfaceName": "eth0", "network": "default"},
        *({"interfaceName": f"eth{n}", "network": f"vpc{n}"} for n in range(1, 5))]
    devices = yaml.safe_load(annotations["devices.gke.io/container.tcpx-daemon"])
    assert [d["path"] for d in devices] == [
        *(f"/dev/nvidia{i}" for i in range(machine(Cloud.GCP, "a3-highgpu-8g").gpu_count)),
        "/dev/nvidiactl", "/dev/nvidia-uvm"]
    spec = pod["spec"]
    prepare, sidecar = spec["initContainers"]
    assert prepare["name"] == "prepare-shared-fs" and "restartPolicy" not in prepare
    assert sidecar["name"] == "tcpx-daemon" and sidecar["restartPolicy"] == "Always"
    assert sidecar["image"] == "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.15"
    assert sidecar["command"][:2] == ["/tcpgpudmarxd/build/app/tcpgpudmarxd", "--gpu_nic_preset"]
    # Google's rxdm holds the runtime's defaults plus NET_ADMIN; here the defaults less NET_RAW
    # and MKNOD, as the trainer (root, as Google runs it).
    from infra.gcp.interconnect import REFERENCE_DEFAULT_CAPABILITIES

    assert sidecar["securityContext"]["capabilities"] == {
        "drop": ["ALL"], "add": sorted({*REFERENCE_DEFAULT_CAPABILITIES, "NET_ADMIN"})}
    assert sidecar["securityContext"]["runAsUser"] == 0
    assert sidecar["securityContext"]["privileged"] is False
    assert {m["mountPath"] for m in sidecar["volumeMounts"]} == {
        "/usr/local/nvidia/lib64", "/run/tcpx", "/hostsysfs", "/hostprocsysfs"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["libraries"]["hostPath"] == {"path": "/home/kubernetes/bin/nvidia/lib64"}
    assert volumes["tcpx-socket"] == {"name": "tcpx-socket", "emptyDir": {}}
    assert volumes["sys"]["hostPath"] == {"path": "/sys"}
    container = trainer(pod)
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/run/tcpx"] == "tcpx-socket" and mounts["/usr/local/nvidia/lib64"] == "libraries"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert {k: env[k] for k in TCPX_ENV} == TCPX_ENV
    assert env["NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"] == "/run/tcpx"  # where the socket is mounted
    # The trainer runs as root, as Google's NCCL container does, with its capabilities: the
    # runtime's defaults (DAC_OVERRIDE: root writes the job's uid-1000 folders on Filestore)
    # less NET_RAW and MKNOD, plus IPC_LOCK, as Google's unprivileged TCPX pod does; otherwise
    # locked down; only the sidecar holds NET_ADMIN. The node's libraries are read-only.
    context = container["securityContext"]
    assert context["runAsUser"] == 0 and context["runAsNonRoot"] is False
    assert context["readOnlyRootFilesystem"] is True and context["privileged"] is False
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    added = set(context["capabilities"]["add"])
    assert {"IPC_LOCK", "DAC_OVERRIDE", "FOWNER", "CHOWN", "KILL"} <= added
    assert not added & {"NET_RAW", "MKNOD", "NET_ADMIN", "SYS_ADMIN"}
    for c in (container, sidecar):
        [lib] = [m for m in c["volumeMounts"] if m["mountPath"] == "/usr/local/nvidia/lib64"]
        assert lib.get("readOnly") is True, c["name"]
    assert "NCCL_GPUDIRECTTCPX_FORCE_ACK" not in env  # deprecated: no Google reference sets it
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    # torch's NCCL is the one loaded (no preload of the installer's). The gate checks its
    # version for the image this program builds (tests/test_workloads.py); this run's image is
    # the user's, whose NCCL the program cannot know.
    assert "LD_PRELOAD" not in env
    assert "--fabric_nccl_version" not in " ".join(container["args"])
    assert "--fabric_gate=enforce" in container["args"]
    assert sidecar["startupProbe"]["exec"]["command"][:2] == ["/bin/sh", "-c"]
    assert "test -S /run/tcpx/queue_ids_by_gpu" in sidecar["startupProbe"]["exec"]["command"][2]
    # ... and the trainer waits for the plugin installer too (GCP review C2: NCCL on sockets).
    assert "test -e /usr/local/nvidia/lib64/libnccl-net.so" in \
        sidecar["startupProbe"]["exec"]["command"][2]
    namespace = a3_run.one("kubernetes:core/v1:Namespace").inputs["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "privileged"


def test_a3_mega_pod_carries_the_tcpxo_sidecar_with_its_startup_probe(a3_mega_run):
    pod = pod_template(a3_mega_run)
    interfaces = json.loads(pod["metadata"]["annotations"]["networking.gke.io/interfaces"])
    assert [i["network"] for i in interfaces] == ["default", *(f"vpc{n}" for n in range(1, 9))]
    devices = yaml.safe_load(pod["metadata"]["annotations"]["devices.gke.io/container.tcpxo-daemon"])
    assert devices[-1] == {"path": "/dev/dmabuf_import_helper"} and len(devices) == 11
    _, sidecar = pod["spec"]["initContainers"]
    assert sidecar["name"] == "tcpxo-daemon" and sidecar["restartPolicy"] == "Always"
    assert sidecar["image"] == "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"
    assert "/fts/entrypoint_rxdm_container.sh --num_hops=2" in sidecar["args"][0]
    from infra.gcp.interconnect import REFERENCE_DEFAULT_CAPABILITIES

    # Google's (nccl-test-latest-autopilot.yaml): defaults + NET_ADMIN, NET_BIND_SERVICE; here
    # the defaults less NET_RAW and MKNOD, and the node's lib64 alone, read-only.
    rxdm_caps = sidecar["securityContext"]["capabilities"]
    assert rxdm_caps["drop"] == ["ALL"] and {"NET_ADMIN", "NET_BIND_SERVICE"} <= set(rxdm_caps["add"])
    assert set(rxdm_caps["add"]) == {*REFERENCE_DEFAULT_CAPABILITIES, "NET_ADMIN"}
    assert {"name": "libraries", "mountPath": "/usr/local/nvidia/lib64", "readOnly": True} \
        in sidecar["volumeMounts"]
    host_paths = {v["hostPath"]["path"] for v in pod["spec"]["volumes"] if "hostPath" in v}
    assert host_paths == {"/home/kubernetes/bin/nvidia/lib64", "/sys", "/proc/sys",
                          "/dev/aperture_devices"}
    assert sidecar["startupProbe"]["exec"]["command"] == [
        "/bin/sh", "-c", "cat /run/health-check && test -e /usr/local/nvidia/lib64/libnccl-net.so"]
    assert {"name": "HEALTH_CHECK_LOG_FILE", "value": "/run/health-check"} in sidecar["env"]
    container = trainer(pod)
    assert {"name": "aperture-devices", "mountPath": "/dev/aperture_devices"} in container["volumeMounts"]
    env = {e["name"]: e.get("value") for e in container["env"]}  # NODE_NAME: valueFrom
    assert env["NCCL_FASTRAK_IFNAME"] == ",".join(f"eth{n}" for n in range(1, 9))
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"
    assert env["NCCL_NVLSTREE_MAX_CHUNKSIZE"] == "131072"  # the guest config checker enforces it
    assert env["NCCL_TUNER_CONFIG_PATH"].startswith(env["LD_LIBRARY_PATH"] + "/")
    # Root as Google's TCPXO NCCL container, which keeps the runtime's default capabilities
    # (less NET_RAW and MKNOD here) and adds none; torch's NCCL 2.29.7, not the installer's
    # 2.28.7 (it lacks 8 symbols torch 2.13 links), checked by the gate.
    context = container["securityContext"]
    assert context["runAsUser"] == 0 and context["capabilities"] == {
        "drop": ["ALL"], "add": sorted(REFERENCE_DEFAULT_CAPABILITIES)}
    assert context["privileged"] is False and context["allowPrivilegeEscalation"] is False
    assert "LD_PRELOAD" not in env
    assert "--fabric_nccl_version" not in " ".join(container["args"])  # the user's image


@pytest.mark.parametrize("fixture", ["a3_run", "a3_mega_run"])
def test_a3_manifests_are_valid_kubernetes(fixture, request):
    from tests.k8s_manifests import validate_manifests

    manifests = validate_manifests(request.getfixturevalue(fixture), "1.33")
    kinds = {m["kind"] for m in manifests}
    assert {"DaemonSet", "GKENetworkParamSet", "Network", "JobSet"} <= kinds


def test_a3_ultra_fabric_is_refused_naming_the_machine_and_the_way_out():
    with pytest.raises(SettingsError) as refused:
        stack_settings({"gpuPools": {"onDemand": {"machineType": "a3-ultragpu-8g"},
                                     "spot": {"machineType": "a3-ultragpu-8g"}},
                        "interconnect": {"fabric": True}})
    [problem] = [p for p in refused.value.problems if p.path == "interconnect.fabric"]
    text = str(problem)
    for words in ("a3-ultragpu-8g", "rdma", "pulumi config set --path interconnect.fabric false",
                  "a3-highgpu-8g", "a3-megagpu-8g"):
        assert words in text, text


# --- the GKE version: what the REGULAR channel offers when the program runs ------------------
def test_a_minor_the_channel_no_longer_offers_is_refused_before_any_cloud_resource():
    failed = run_gcp({"kubernetes": {"version": "1.33"}}, expect_error=True)
    assert isinstance(failed.error, SettingsError), failed.error
    [problem] = failed.error.problems
    assert (problem.path, problem.value) == ("kubernetes.version", "1.33")
    assert "REGULAR" in problem.allowed and "us-central1" in problem.allowed
    assert "1.34, 1.35" in problem.allowed and "default 1.34" in problem.allowed
    assert "gcloud container get-server-config --location us-central1" in problem.allowed
    assert failed.resources == []  # not even the component or its provider


@pytest.mark.parametrize(("minor", "picked"), [
    ("1.34", "1.34.1-gke.3899001"),  # the channel's default build
    ("1.35", "1.35.0-gke.2398000"),  # not the default: the channel's newest 1.35 build
])
def test_the_cluster_runs_the_channels_build_of_the_minor(minor, picked):
    from infra.gcp.versions import offered_versions

    offered = asked(lambda: offered_versions(stack_settings()))
    assert offered.minors == ("1.34", "1.35")  # STABLE's 1.33 is not the REGULAR channel's
    assert offered.default == "1.34.1-gke.3899001"
    assert offered.exact[minor] == picked


def test_the_version_is_asked_of_the_clusters_location(run):
    # The version the cluster gets is one the channel offers in the cluster's own location (a
    # region's list can differ from a zone's).
    from tests.fakes.gcp import CHANNEL_VERSIONS, ENGINE_VERSION_ASKS

    cluster = run.one(CLUSTER)
    assert cluster.inputs["location"] == "us-central1"
    assert run.outputs["kubernetes_version"] in CHANNEL_VERSIONS["REGULAR"]
    asks = [(a.get("location"), a.get("versionPrefix"), a.get("project"))
            for a in ENGINE_VERSION_ASKS]
    assert ("us-central1", None, "torchrec-ci-01") in asks
    assert ("us-central1", "1.33.", "torchrec-ci-01") in asks  # the "." keeps 1.3 from 1.33
    assert all(location == "us-central1" for location, _, _ in asks)


def test_the_job_is_budgeted_for_the_resolved_build(gke_135_run):
    # "1.35" resolves to 1.35.0-gke.2398000 >= 1.35.0-gke.1171000: the spot pool's 120 s and the
    # job's stop budget agree, both read from the same version.
    from infra.catalog.stop_notices import Capacity, stop_notice

    assert gke_135_run.one(CLUSTER).inputs["minMasterVersion"] == "1.35"  # GKE's alias
    assert gke_135_run.outputs["kubernetes_version"] == "1.35.0-gke.2398000"
    assert gke_135_run.outputs["node_version"] == "1.35.0-gke.2398000"
    assert stop_notice(Cloud.GCP, Capacity.SPOT, "1.35.0-gke.2398000").pod_seconds == 105


# --- upgrades --------------------------------------------------------------------------------
def test_gpu_pools_upgrade_without_a_surge_machine_restarting_the_gang_once(run, settings):
    # No surge machine (no quota beyond maxNodes); every node of the pool at once, so an N-node
    # gang restarts once per roll, not N times.
    for pool in settings.enabled_gpu_pools:
        upgrade = gpu_pools(run)[pool.name].inputs["upgradeSettings"]
        assert upgrade == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": pool.max_nodes}


def test_automatic_upgrades_wait_for_the_weekend_window(run):
    window = run.one(CLUSTER).inputs["maintenancePolicy"]["recurringWindow"]
    assert window["recurrence"] == "FREQ=WEEKLY;BYDAY=SA,SU"
    from datetime import datetime
    start, end = (datetime.fromisoformat(window[k].replace("Z", "+00:00"))
                  for k in ("startTime", "endTime"))
    assert start.weekday() == 5 and (end - start).total_seconds() >= 4 * 3600  # GKE's 4 h floor
    assert start.tzinfo is not None and start.utcoffset().total_seconds() == 0


# --- GPU nodes: disks, image streaming, NCCL Fast Socket, taint ------------------------------
def test_gpu_nodes_stream_images_and_state_the_gpu_taint(run, a3_run):
    for stack in (run, a3_run):
        for pool in stack.of_type(NODE_POOL):
            config = pool.inputs["nodeConfig"]
            if not config.get("guestAccelerators"):
                assert "taints" not in config  # the system pool takes add-ons
                continue
            assert config["gcfsConfig"] == {"enabled": True}
            assert config["taints"] == [{"key": "nvidia.com/gpu", "value": "present",
                                         "effect": "NO_SCHEDULE"}]


def test_contract_taint_is_the_one_on_the_pools(contract, run):
    for key, pool in contract.gpu_pools.items():
        [taint] = pool.taints
        [on_pool] = gpu_pools(run)[pool.name].inputs["nodeConfig"]["taints"]
        assert (taint.key, taint.value) == (on_pool["key"], on_pool["value"])
        assert taint.effect == "NoSchedule" and on_pool["effect"] == "NO_SCHEDULE"


def test_a2_uses_nccl_fast_socket_and_a3_with_gpudirect_or_rdma_nics_does_not(
        run, a3_run, a3_sockets_run, reserved_ultra_run):
    for stack, fast in ((run, True), (a3_sockets_run, True), (a3_run, False),
                        (reserved_ultra_run, False)):
        for pool in stack.of_type(NODE_POOL):
            config = pool.inputs["nodeConfig"]
            if config.get("guestAccelerators"):
                assert config["gvnic"] == {"enabled": True}  # Fast Socket needs gVNIC
                assert config.get("fastSocket") == ({"enabled": True} if fast else None), pool.name


@pytest.mark.parametrize("fixture", ["run", "a3_run", "a3_mega_run"])
def test_gpu_boot_disk_and_local_ssds_follow_the_catalog(fixture, request):
    stack = request.getfixturevalue(fixture)
    for pool in stack.of_type(NODE_POOL):
        config = pool.inputs["nodeConfig"]
        if not config.get("guestAccelerators"):
            continue
        gpu = machine(Cloud.GCP, config["machineType"])
        assert config["diskType"] == gpu.gcp_boot_disk_type
        ssd = config.get("ephemeralStorageLocalSsdConfig")
        assert (ssd or {}).get("localSsdCount", 0) == gpu.gcp_local_ssds
    if fixture != "run":  # A3 High and Mega bundle 16 local SSDs
        assert any(p.inputs["nodeConfig"].get("ephemeralStorageLocalSsdConfig") ==
                   {"localSsdCount": 16} for p in stack.of_type(NODE_POOL))


# --- capacity: reservations, flex-start, queued provisioning, on-demand availability ---------
A3_ULTRA = {"gpuPools": {"onDemand": {"machineType": "a3-ultragpu-8g"},
                         "spot": {"machineType": "a3-ultragpu-8g"}}}


@pytest.fixture(scope="module")
def reserved_ultra_run() -> Run:
    """A3 Ultra (not sold on demand) from a specific reservation, no fabric."""
    return run_gcp({**A3_ULTRA, "gpuPools": {
        **A3_ULTRA["gpuPools"],
        "onDemand": {"machineType": "a3-ultragpu-8g",
                     "reservation": {"affinity": "specific", "name": "h200-block"}}},
        "job": {"image": "us-docker.pkg.dev/example/trainer:1"}})


def test_a_specific_reservation_feeds_the_on_demand_pool_only(reserved_ultra_run):
    pools = gpu_pools(reserved_ultra_run)
    affinity = pools["gpu"].inputs["nodeConfig"]["reservationAffinity"]
    assert affinity == {"consumeReservationType": "SPECIFIC_RESERVATION",
                        "key": "compute.googleapis.com/reservation-name",
                        "values": ["h200-block"]}
    assert pools["gpuspot"].inputs["nodeConfig"]["reservationAffinity"] == {  # spot takes none
        "consumeReservationType": "NO_RESERVATION"}


def test_a3_ultra_boots_from_hyperdisk_with_its_32_local_ssds(reserved_ultra_run):
    config = gpu_pools(reserved_ultra_run)["gpu"].inputs["nodeConfig"]
    assert config["diskType"] == "hyperdisk-balanced"
    assert config["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 32}


def test_any_reservation_names_no_reservation():
    settings = stack_settings({"gpuPools": {"onDemand": {"reservation": {"affinity": "any"}}}})
    from infra.gcp.node_pools import reservation_affinity

    args = reservation_affinity(settings.gpu_pools.on_demand)
    assert args.consume_reservation_type == "ANY_RESERVATION"
    assert args.key is None and args.values is None


@pytest.fixture(scope="module")
def flex_run() -> Run:
    return run_gcp({"gpuPools": {"onDemand": {"flexStart": True, "minNodes": 0,
                                              "desiredNodes": 0, "maxNodes": 2}},
                    "interconnect": {"placement": False}})


def test_flex_start_pool_starts_empty_without_auto_repair_reservation_or_placement(flex_run):
    pool = gpu_pools(flex_run)["gpu"]
    assert pool.inputs["nodeConfig"]["flexStart"] is True
    assert pool.inputs["nodeConfig"]["spot"] is False
    assert pool.inputs["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "NO_RESERVATION"}
    assert "placementPolicy" not in pool.inputs
    assert pool.inputs["management"] == {"autoRepair": False, "autoUpgrade": True}
    assert pool.inputs["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 2,
                                          "locationPolicy": "ANY"}
    spot = gpu_pools(flex_run)["gpuspot"].inputs["nodeConfig"]
    assert spot["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert pool.inputs["initialNodeCount"] == 0
    assert "flexStart" not in gpu_pools(flex_run)["gpuspot"].inputs["nodeConfig"]


CAPACITY_REFUSED = {
    "flex-start with compact placement": (
        {"gpuPools": {"onDemand": {"flexStart": True, "minNodes": 0, "desiredNodes": 0}}},
        "interconnect.placement", ("no compact placement", "placement: false")),
    "A3 Ultra on demand without a reservation or flex-start": (
        A3_ULTRA, "gpuPools.onDemand.machineType",
        ("not sold on demand", "reservation", "flexStart: true", "job.pool: spot")),
    # best-effort-atomic-scale-up is Provisioned when the scale-up is asked, not when the Spot
    # VMs exist: with Concurrent Admission the running gang would move to spot nodes that may
    # never come, back after the ready timeout, and again (issue 32, the fallback that flaps).
    "a spot-to-on-demand fallback that would move the gang before spot nodes exist": (
        {"job": {"pool": "spot", "spotShortage": {"policy": "onDemand"}}},
        "job.spotShortage.policy",
        ("wait on gcp", "job.pool onDemand", "best-effort-atomic-scale-up",
         "not when the VMs exist", "flex-start only", "pulumi config set")),
    # A left-out (tainted) node in a pool held at its minimum is never removed, and at
    # maxNodes none is added beside it: the gang would wait for ever (issue 32).
    "a GPU pool held at its minimum, where a left-out node is never replaced": (
        {"gpuPools": {"spot": {"minNodes": 2, "desiredNodes": 2, "maxNodes": 2}},
         "job": {"pool": "spot", "nodes": 2}},
        "gpuPools.spot.minNodes", ("at most 0", "maxNodes at least 4", "leaves out",
                                   "pulumi config set --path gpuPools.spot.minNodes 0")),
    # retainOnDestroy keeps the bucket; destroy deletes Filestore and no backup is kept.
    "checkpoints kept on destroy on the shared file system, which destroy deletes": (
        {"checkpoints": {"location": "sharedFileSystem", "retainOnDestroy": True}},
        "checkpoints.location", ("objectStore", "deletes the Filestore instance",
                                 "retainOnDestroy false", "pulumi config set")),
    "queued provisioning, which needs a ProvisioningRequest": (
        {"gpuPools": {"onDemand": {"queuedProvisioning": True}}},
        "gpuPools.onDemand.queuedProvisioning", ("ProvisioningRequest", "flexStart")),
    "flex-start with a reservation": (
        {"gpuPools": {"onDemand": {"flexStart": True, "minNodes": 0, "desiredNodes": 0,
                                   "reservation": {"name": "r1"}}}},
        "gpuPools.onDemand.reservation", ("no reservation",)),
    "flex-start with nodes at creation": (
        {"gpuPools": {"onDemand": {"flexStart": True, "desiredNodes": 2}}},
        "gpuPools.onDemand.desiredNodes", ("minNodes 0 and desiredNodes 0",)),
    "a specific reservation without a name": (
        {"gpuPools": {"onDemand": {"reservation": {"affinity": "specific"}}}},
        "gpuPools.onDemand.reservation.name", ("reservation name",)),
    "any reservation with a name": (
        {"gpuPools": {"onDemand": {"reservation": {"affinity": "any", "name": "r1"}}}},
        "gpuPools.onDemand.reservation.name", ("leave name", "specific")),
}


@pytest.mark.parametrize("case", sorted(CAPACITY_REFUSED))
def test_capacity_settings_gke_would_refuse_are_refused_first(case):
    overrides, path, words = CAPACITY_REFUSED[case]
    with pytest.raises(SettingsError) as refused:
        stack_settings(overrides)
    [problem] = [p for p in refused.value.problems if p.path == path]
    for word in words:
        assert word in problem.allowed, problem


def test_shared_reservations_of_another_project_are_named_by_path_without_placement():
    shared = {"gpuPools": {"onDemand": {"reservation": {
        "name": "projects/capacity-project/reservations/h100-block"}}}}
    settings = stack_settings({**shared, "interconnect": {"placement": False}})
    assert settings.gpu_pools.on_demand.reservation.name.endswith("/h100-block")
    # Compact placement works only with single-project reservations.
    with pytest.raises(SettingsError) as refused:
        stack_settings(shared)
    assert "gpuPools.onDemand.reservation.name" in str(refused.value)
    assert "interconnect.placement: false" in str(refused.value)


def test_the_stack_reports_the_gke_build_it_created(run):
    from tests.fakes.gcp import CHANNEL_DEFAULTS

    # Nothing asked: GKE creates the channel's default, the build getServerConfig named.
    assert run.outputs["kubernetes_version"] == CHANNEL_DEFAULTS["REGULAR"]


def test_flex_start_is_refused_on_a_build_older_than_gke_supports_it_on():
    from infra.gcp.versions import FLEX_START_MIN_GKE, check_features

    settings = stack_settings({"gpuPools": {"onDemand": {"flexStart": True, "minNodes": 0,
                                                         "desiredNodes": 0}},
                               "interconnect": {"placement": False}})
    check_features(settings, "1.34.1-gke.3899001")  # what the channel offers: fine
    with pytest.raises(SettingsError) as refused:
        check_features(settings, "1.32.2-gke.1600000")
    [problem] = refused.value.problems
    assert problem.path == "gpuPools.onDemand.flexStart"
    assert FLEX_START_MIN_GKE in problem.allowed and "1.32.2-gke.1600000" in problem.allowed


def test_the_pytorchjob_kind_waits_for_its_vendored_operator_and_the_webhook_rule():
    stack = run_gcp({"job": {"kind": "PyTorchJob"}})
    job = stack.one("kubernetes:kubeflow.org/v1:PyTorchJob")
    [operator] = [c for c in stack.of_type("kubernetes:yaml/v2:ConfigFile")
                  if "training-operator" in c.name]
    assert Path(operator.inputs["file"]).is_file()  # no remote kustomize target to fetch
    assert not stack.of_type("kubernetes:kustomize/v2:Directory")
    assert stack.waits_for(job, operator)
    assert stack.waits_for(job, stack.one(FIREWALL, "control-plane-to-webhooks"))


# --- still deployable next quarter: versions from GKE at run time, kept checkpoints ---------
# What GKE's getServerConfig would answer in us-central1 on each day the suite is pinned to
# (tests/conftest.py, and `faketime` runs of the whole suite): each channel's valid versions,
# newest first, and its default. EXTENDED stands for the builds validMasterVersions still lists
# for clusters outside the channel (extended support): minors the REGULAR channel does not offer.
GKE_WORLDS: dict[str, dict[str, Any]] = {
    "2026-11-26": {
        "versions": None, "defaults": None,  # the fakes' own world (tests/fakes/gcp.py)
        "offered": ("1.34", "1.35"), "default": "1.34.1-gke.3899001", "missing": "1.33",
        "left": "1.33.5-gke.2100000",  # a live cluster's build whose minor left REGULAR
    },
    "2027-06-01": {
        "versions": {
            "RAPID": ["1.38.0-gke.1100000", "1.37.2-gke.1200000"],
            "REGULAR": ["1.37.2-gke.1200000", "1.36.4-gke.1500000", "1.36.3-gke.1100000",
                        "1.35.6-gke.1000000"],
            "STABLE": ["1.35.6-gke.1000000", "1.34.9-gke.1400000"],
            "EXTENDED": ["1.34.9-gke.1400000", "1.33.12-gke.1000000"],
        },
        "defaults": {"RAPID": "1.37.2-gke.1200000", "REGULAR": "1.36.4-gke.1500000",
                     "STABLE": "1.35.6-gke.1000000", "EXTENDED": "1.33.12-gke.1000000"},
        "offered": ("1.35", "1.36", "1.37"), "default": "1.36.4-gke.1500000", "missing": "1.34",
        "left": "1.34.1-gke.3899001",
    },
    "2028-06-01": {
        "versions": {
            "RAPID": ["1.39.1-gke.1000000", "1.38.3-gke.1700000"],
            "REGULAR": ["1.38.3-gke.1700000", "1.37.5-gke.1300000", "1.37.4-gke.1100000",
                        "1.36.9-gke.1200000"],
            "STABLE": ["1.36.9-gke.1200000", "1.35.11-gke.1000000"],
            "EXTENDED": ["1.35.11-gke.1000000", "1.34.14-gke.1000000"],
        },
        "defaults": {"RAPID": "1.38.3-gke.1700000", "REGULAR": "1.37.5-gke.1300000",
                     "STABLE": "1.36.9-gke.1200000", "EXTENDED": "1.34.14-gke.1000000"},
        "offered": ("1.36", "1.37", "1.38"), "default": "1.37.5-gke.1300000", "missing": "1.35",
        "left": "1.35.6-gke.1000000",
    },
}
DAYS = sorted(GKE_WORLDS)


@pytest.fixture
def gke_world(request, monkeypatch):
    """The fakes' GKE and GCS as they are on `request.param` (a day of GKE_WORLDS), with no
    cluster and no kept bucket yet; the clock travels to that day for the test."""
    import time_machine

    from tests.fakes import gcp as fakes

    world = GKE_WORLDS[request.param]
    if world["versions"] is not None:
        monkeypatch.setattr(fakes, "CHANNEL_VERSIONS", world["versions"])
        monkeypatch.setattr(fakes, "CHANNEL_DEFAULTS", world["defaults"])
    monkeypatch.setattr(fakes, "LIVE_CLUSTERS", {})
    monkeypatch.setattr(fakes, "KEPT_BUCKETS", set())
    monkeypatch.setattr(fakes, "FORBIDDEN_BUCKETS", set())
    monkeypatch.setattr(fakes, "ENGINE_VERSION_ASKS", [])
    monkeypatch.setattr(fakes, "CLUSTER_ASKS", [])
    monkeypatch.setattr(fakes, "BUCKET_ASKS", [])
    with time_machine.travel(f"{request.param}T12:00:00Z", tick=True):
        yield world


def _fakes():
    from tests.fakes import gcp as fakes

    return fakes


def _live(run: Run, master: str, pools: dict[str, str] | None = None) -> dict[str, Any]:
    """Make the cluster `run` created live in the fakes' GKE at `master` (its node pools at
    `pools`, else at `master` too); the stack's outputs, as the next run reads them."""
    fakes = _fakes()
    names = [p.inputs["name"] for p in run.of_type(NODE_POOL)]
    fakes.LIVE_CLUSTERS[run.outputs["cluster_name"]] = fakes.live_cluster(
        master, {name: (pools or {}).get(name, master) for name in names})
    return dict(run.outputs)


@pytest.mark.parametrize("gke_world", DAYS, indirect=True)
def test_each_day_the_shipped_stack_gets_the_channels_default(gke_world):
    created = run_gcp()
    cluster = created.one(CLUSTER)
    # No version asked of GKE, which creates the channel's default: the build reported.
    assert "minMasterVersion" not in cluster.inputs
    assert created.outputs["kubernetes_version"] == gke_world["default"]
    assert created.outputs["kubernetes_version"] in _fakes().CHANNEL_VERSIONS["REGULAR"]
    # No pool names a version: GKE creates them at the control plane's.
    assert all("version" not in pool.inputs for pool in created.of_type(NODE_POOL))
    assert _fakes().ENGINE_VERSION_ASKS  # asked of GKE when the program ran


@pytest.mark.parametrize("gke_world", DAYS, indirect=True)
def test_each_day_a_pinned_minor_the_channel_lacks_is_refused_naming_what_it_offers(gke_world):
    failed = run_gcp({"kubernetes": {"version": gke_world["missing"]}}, expect_error=True)
    assert isinstance(failed.error, SettingsError), failed.error
    [problem] = failed.error.problems
    assert (problem.path, problem.value) == ("kubernetes.version", gke_world["missing"])
    assert ", ".join(gke_world["offered"]) in problem.allowed, problem.allowed
    assert failed.resources == []


@pytest.mark.parametrize("gke_world", DAYS, indirect=True)
def test_each_day_each_offered_minor_can_be_pinned(gke_world):
    for minor in gke_world["offered"]:
        pinned = run_gcp({"kubernetes": {"version": minor}})
        # Only the minor, an alias GKE resolves to the minor's newest valid build.
        assert pinned.one(CLUSTER).inputs["minMasterVersion"] == minor
        version = pinned.outputs["kubernetes_version"]
        assert version.startswith(f"{minor}.") and version in _fakes().CHANNEL_VERSIONS["REGULAR"]


@pytest.mark.parametrize("gke_world", DAYS, indirect=True)
def test_each_day_a_live_cluster_whose_minor_left_the_channel_keeps_it(gke_world):
    # Created earlier; GKE has since stopped offering its minor in REGULAR (the cluster is on
    # the older build, e.g. a maintenance exclusion held it). A later run that only suspends
    # the job must not ask the channel, and must not move the cluster.
    first = run_gcp()
    previous = _live(first, gke_world["left"])
    fakes = _fakes()
    fakes.ENGINE_VERSION_ASKS.clear()
    later = run_gcp({"job": {"suspend": True}}, previous_outputs=previous)
    assert "minMasterVersion" in later.one(CLUSTER).ignore_changes  # the cluster is left be
    assert later.outputs["kubernetes_version"] == gke_world["left"]
    assert fakes.ENGINE_VERSION_ASKS == []  # a kept release asks the channel nothing
    assert (first.outputs["cluster_name"], "us-central1", "torchrec-ci-01") in [
        (a.get("name"), a.get("location"), a.get("project")) for a in fakes.CLUSTER_ASKS]
    # Pinning the minor it runs is the same as keeping it.
    minor = ".".join(gke_world["left"].split(".")[:2])
    pinned = run_gcp({"kubernetes": {"version": minor}}, previous_outputs=previous)
    assert pinned.outputs["kubernetes_version"] == gke_world["left"]
    assert "minMasterVersion" in pinned.one(CLUSTER).ignore_changes
    assert fakes.ENGINE_VERSION_ASKS == []


def _bucket_declaration(bucket) -> dict[str, Any]:
    """What the stack declares of its checkpoint bucket, less what may differ between runs."""
    return {k: v for k, v in bucket.inputs.items() if k not in ("__defaults",)}


@pytest.mark.parametrize("gke_world", DAYS, indirect=True)
def test_each_day_destroy_then_up_finds_the_kept_bucket(gke_world):
    fakes = _fakes()
    first = run_gcp()
    uri = first.outputs["checkpoint_uri"]
    [bucket] = first.of_type(BUCKET)
    name = bucket.inputs["name"]
    assert uri == f"gs://{name}/dlrm" and "checkpoint_store_adopted" not in first.outputs
    assert bucket.retain_on_delete and bucket.import_id == ""  # created; destroy keeps it ...
    fakes.KEPT_BUCKETS.add(name)  # ... so GCS still has it after the destroy
    again = run_gcp()  # after destroy: no earlier outputs
    assert again.outputs["checkpoint_uri"] == uri
    assert again.outputs["checkpoint_store_adopted"] is True
    # Imported into the stack's managed bucket, declared exactly as the one first created:
    # versioning, the noncurrent rule, soft delete, retainOnDestroy, and the job's grant.
    [adopted] = again.of_type(BUCKET)
    assert adopted.import_id == name and adopted.name == bucket.name
    assert _bucket_declaration(adopted) == _bucket_declaration(bucket)
    assert adopted.retain_on_delete
    [grant] = again.of_type(BUCKET_MEMBER)
    assert grant.inputs["bucket"] == name and grant.inputs["role"] == "roles/storage.objectUser"
    assert fakes.BUCKET_ASKS == [name, name]  # asked on both runs, found the second time
    # Later runs of the adopting stack ask GCS again and declare it the same way (an import of
    # what the state holds is an ordinary update); it stays reported as adopted.
    later = run_gcp({"job": {"suspend": True}}, previous_outputs=_live(again, gke_world["default"]))
    assert later.outputs["checkpoint_uri"] == uri
    assert later.one(BUCKET).import_id == name
    assert later.outputs["checkpoint_store_adopted"] is True
    assert fakes.BUCKET_ASKS == [name, name, name]


@pytest.mark.parametrize("gke_world", ["2026-11-26"], indirect=True)
def test_a_retry_after_a_failed_first_up_manages_the_bucket_it_made(gke_world):
    # The first `up` made the bucket and then failed: no stack outputs, the bucket in GCS (and
    # in the state). The retry declares the same managed bucket, importing it by name (an
    # update of the state's own), never a read-only reference that would stay so for good.
    fakes = _fakes()
    failed = run_gcp()
    name = failed.one(BUCKET).inputs["name"]
    fakes.KEPT_BUCKETS.add(name)
    retry = run_gcp()
    bucket = retry.one(BUCKET)
    assert bucket.import_id == name and bucket.inputs["versioning"] == {"enabled": True}
    assert bucket.inputs["softDeletePolicy"] == {"retentionDurationSeconds": 7 * 86400}
    assert retry.outputs["checkpoint_uri"] == failed.outputs["checkpoint_uri"]


@pytest.mark.parametrize("gke_world", ["2026-11-26"], indirect=True)
def test_a_failed_destroy_that_kept_the_outputs_still_imports_the_bucket(gke_world):
    # Destroy dropped the bucket from the state (retained) but failed later: the outputs are
    # still there. GCS has the bucket, so it is imported, not created again ("already exists").
    fakes = _fakes()
    first = run_gcp()
    name = first.one(BUCKET).inputs["name"]
    fakes.KEPT_BUCKETS.add(name)
    later = run_gcp(previous_outputs=_live(first, gke_world["default"]))
    assert later.one(BUCKET).import_id == name
    # A bucket destroy did delete (checkpoints.retainOnDestroy false) is created again.
    fakes.KEPT_BUCKETS.clear()
    again = run_gcp(previous_outputs=_live(first, gke_world["default"]))
    assert again.one(BUCKET).import_id == "" and again.one(BUCKET).inputs["name"] == name


@pytest.mark.parametrize("gke_world", ["2026-11-26"], indirect=True)
def test_a_bucket_gcs_will_not_describe_stops_the_run_before_anything_is_made(gke_world):
    from infra.gcp.storage import checkpoint_bucket_name

    fakes = _fakes()
    name = checkpoint_bucket_name("torchrec-ci-01", "torchrec-cloud-gcp")
    fakes.FORBIDDEN_BUCKETS.add(name)  # a 403: not "absent"
    failed = run_gcp(expect_error=True)
    text = str(failed.error)
    assert f"gs://{name}" in text and "storage.buckets.get" in text, text
    assert [r.type for r in failed.resources] == []


@pytest.mark.parametrize("gke_world", ["2026-11-26"], indirect=True)
def test_a_stack_made_before_fixed_bucket_names_keeps_its_bucket(gke_world):
    fakes = _fakes()
    first = run_gcp()
    legacy = "torchrec-cloud-gcp-checkpoints-a1b2c3d"  # Pulumi's auto-name, random suffix
    previous = {**_live(first, gke_world["default"]), "checkpoint_uri": f"gs://{legacy}/dlrm"}
    fakes.KEPT_BUCKETS.add(legacy)
    fakes.BUCKET_ASKS.clear()
    later = run_gcp(previous_outputs=previous)
    # The same name (a name change would replace the bucket and lose the checkpoints), declared
    # with its own name as the import id: the state's own bucket, an ordinary update.
    assert later.one(BUCKET).inputs["name"] == legacy
    assert later.one(BUCKET).import_id == legacy
    assert later.outputs["checkpoint_uri"] == f"gs://{legacy}/dlrm"
    assert "checkpoint_store_adopted" not in later.outputs
    assert fakes.BUCKET_ASKS == [legacy]


@pytest.fixture
def warnings_logged(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every pulumi.log.warn of the runs in the test."""
    logged: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: logged.append(message))
    return logged


def _spot_grace(run: Run) -> tuple[Any, int]:
    """(the spot pool's kubelet settings or None, the training pods' grace)."""
    kubelet = gpu_pools(run)["gpuspot"].inputs["nodeConfig"].get("kubeletConfig")
    return kubelet, harness.training_pod_template(run)["spec"]["terminationGracePeriodSeconds"]


@pytest.mark.parametrize("gke_world", ["2026-11-26"], indirect=True)
def test_the_spot_pool_and_the_stop_budget_follow_the_version_the_nodes_run(
        gke_world, warnings_logged):
    # The control plane is on a 1.35 build whose Spot nodes may shut down in 120 s, but GKE has
    # not upgraded the spot pool yet: its kubelet must not be asked for what 1.34 refuses, and
    # the job is budgeted for the 15 s the 1.34 node gives.
    spot_job = {"job": {"pool": "spot"}}
    first = run_gcp(spot_job)
    master, old = "1.35.0-gke.2398000", "1.34.1-gke.3899001"
    lagging = run_gcp(spot_job, previous_outputs=_live(first, master, {"gpuspot": old}))
    assert lagging.outputs["kubernetes_version"] == master
    assert _spot_grace(lagging) == (None, 15)
    assert lagging.outputs["node_version"] == old
    assert warnings_logged == []
    # GKE then upgrades the nodes to the 1.35 build. A `pulumi up` that changes nothing keeps
    # the last run's spot shutdown and budget, so it neither recreates the spot nodes nor
    # replaces the JobSet (a restart of the training), and says why.
    unchanged = run_gcp(spot_job, previous_outputs=_live(lagging, master))
    assert _spot_grace(unchanged) == (None, 15)
    assert unchanged.outputs["node_version"] == old
    [kept] = warnings_logged
    assert "120 s" in kept and "does not restart the training" in kept, kept
    # The next `pulumi up` that changes a setting applies them, and warns that the job restarts.
    warnings_logged.clear()
    changed = run_gcp({**spot_job, "tags": {"team": "recsys"}},
                      previous_outputs=_live(unchanged, master))
    assert _spot_grace(changed) == (
        {"shutdownGracePeriodSeconds": 120, "shutdownGracePeriodCriticalPodsSeconds": 15}, 105)
    assert changed.outputs["node_version"] == master
    [restart] = warnings_logged
    assert "JobSet is replaced" in restart and "recreates the pool's nodes" in restart, restart
    # And the run after that, unchanged again, keeps them without a word.
    warnings_logged.clear()
    steady = run_gcp({**spot_job, "tags": {"team": "recsys"}},
                     previous_outputs=_live(changed, master))
    assert _spot_grace(steady) == _spot_grace(changed) and warnings_logged == []


@pytest.mark.parametrize("gke_world", ["2026-11-26"], indirect=True)
def test_a_pinned_minor_the_channel_upgraded_past_keeps_the_live_version(
        gke_world, warnings_logged):
    # kubernetes.version 1.34, and the REGULAR channel has since upgraded the cluster (control
    # plane and nodes) to 1.35: GKE never goes back, so the next `pulumi up` registers the
    # cluster and its pools as they are, keeps 1.35, and says the setting lags.
    pinned = {"kubernetes": {"version": "1.34"}}
    first = run_gcp(pinned)
    live = "1.35.0-gke.2398000"
    later = run_gcp(pinned, previous_outputs=_live(first, live))
    assert later.error is None
    assert later.outputs["kubernetes_version"] == live
    cluster = later.one(CLUSTER)
    assert "minMasterVersion" in cluster.ignore_changes  # nothing asks GKE to move it
    assert {p.inputs["name"] for p in later.of_type(NODE_POOL)} == {
        p.inputs["name"] for p in first.of_type(NODE_POOL)}
    assert any("kubernetes.version is 1.34" in w and "kept 1.35" in w for w in warnings_logged)


@pytest.mark.parametrize("gke_world", ["2026-11-26"], indirect=True)
def test_the_jobset_controller_follows_the_control_plane_not_the_nodes(gke_world):
    # GKE upgrades nodes after the control plane: the nodes may still run 1.33 under a 1.34
    # control plane. JobSet's controller and webhook talk to the API server, so its release is
    # the control plane's minor's (here v0.12.0 for 1.34, where 1.33 would give v0.11.1).
    from workloads.jobset import controller_version, manifests_for

    first = run_gcp()
    master, nodes = "1.34.1-gke.3899001", "1.33.5-gke.2100000"
    later = run_gcp(previous_outputs=_live(first, master, {
        p.inputs["name"]: nodes for p in first.of_type(NODE_POOL)}))
    assert later.outputs["node_version"] == nodes
    [controller] = [c for c in later.of_type("kubernetes:yaml/v2:ConfigFile")
                    if "jobset-controller" in c.name]
    assert controller_version("1.34") != controller_version("1.33")  # the case tells them apart
    assert controller.inputs["file"] == str(manifests_for(controller_version(master)))


# Spot tables whose one save takes about 27 s: inside the 100 s a 120 s Spot shutdown leaves the
# trainer, far past the 10 s of GKE's default 30 s.
BIG_SPOT_TABLES = {"job": {"pool": "spot", "trainerArgs": {
    "batch_size": 2048, "embedding_dim": 4096, "dense_arch_layer_sizes": [512, 256, 4096]}}}


def test_the_save_rule_judges_the_build_the_job_is_budgeted_for():
    # "1.35" alone counts as its newest build (120 s); a build before 1.35.0-gke.1171000, or a
    # 1.34 node, gives 30 s, which the job's stop budget follows: the rule must judge that one.
    from infra.settings.cost_rules import spot_save_fits_the_notice

    settings = stack_settings({**BIG_SPOT_TABLES, "kubernetes": {"version": "1.35"}})
    assert list(spot_save_fits_the_notice(settings)) == []
    assert list(spot_save_fits_the_notice(settings, "1.35.0-gke.1171000")) == []
    for older in ("1.35.0-gke.1170999", "1.34.1-gke.3899001"):
        [problem] = spot_save_fits_the_notice(settings, older)
        assert problem.path == "job.trainerArgs" and "30 s notice" in problem.allowed


@pytest.mark.parametrize("gke_world", ["2026-11-26"], indirect=True)
def test_a_save_that_fits_only_the_minors_notice_is_refused_for_the_nodes_build(gke_world):
    # The control plane runs 1.35 (the settings' minor passes the rule), the spot nodes still
    # 1.34: the job would be budgeted for 30 s, so the run stops before any resource.
    first = run_gcp({"job": {"pool": "spot"}})
    previous = _live(first, "1.35.0-gke.2398000", {"gpuspot": "1.34.1-gke.3899001"})
    failed = run_gcp(BIG_SPOT_TABLES, expect_error=True, previous_outputs=previous)
    assert isinstance(failed.error, SettingsError), failed.error
    assert [p.path for p in failed.error.problems] == ["job.trainerArgs"]
    assert failed.resources == []


@pytest.mark.parametrize("gke_world", ["2026-11-26"], indirect=True)
def test_the_next_minor_is_asked_of_the_channel_and_upgrades_the_control_plane(gke_world):
    first = run_gcp()
    previous = _live(first, "1.34.1-gke.3899001")
    upgrade = run_gcp({"kubernetes": {"version": "1.35"}}, previous_outputs=previous)
    # The new minor, not ignored: above every 1.34 build, so the provider upgrades the control
    # plane; GKE resolves the alias to the channel's newest 1.35 build.
    cluster = upgrade.one(CLUSTER)
    assert cluster.inputs["minMasterVersion"] == "1.35"
    assert "minMasterVersion" not in cluster.ignore_changes
    assert upgrade.outputs["kubernetes_version"] == "1.35.0-gke.2398000"
    assert _fakes().ENGINE_VERSION_ASKS
    # The pools still run 1.34 until GKE upgrades them: the spot pool keeps GKE's 30 s.
    assert "kubeletConfig" not in gpu_pools(upgrade)["gpuspot"].inputs["nodeConfig"]
    assert upgrade.outputs["node_version"] == "1.34.1-gke.3899001"


def test_only_an_upgrade_the_user_set_touches_the_control_planes_version():
    from infra.gcp.cluster import ignored_after_creation
    from infra.kubernetes_release import Release

    kept = Release(minor="1.34", exact="1.34.1-gke.3899001", kept=True)
    upgrade = Release(minor="1.35", exact="1.35.0-gke.2398000", upgrade_from="1.34")
    assert "min_master_version" in ignored_after_creation(kept)  # the channel upgrades it
    assert "min_master_version" not in ignored_after_creation(upgrade)
    assert "node_locations" in ignored_after_creation(upgrade)


def test_the_cluster_never_asks_gke_for_an_exact_build():
    # The ignored input is what a replacement cluster is created with (pulumi/pulumi#2657): an
    # exact build would be one the channel dropped by then. Nothing, or a minor GKE resolves.
    from infra.gcp.cluster import master_version
    from infra.kubernetes_release import choose_release
    from infra.gcp.versions import offered_versions

    def today():
        return asked(lambda: offered_versions(stack_settings()))

    assert master_version(choose_release(None, None, today)) is None  # the channel's default
    assert master_version(choose_release("1.35", None, today)) == "1.35"  # pinned
    assert master_version(choose_release(None, "1.34.1-gke.3899001", today)) is None  # kept
    assert master_version(choose_release("1.34", "1.34.1-gke.3899001", today)) == "1.34"
    assert master_version(choose_release("1.35", "1.34.1-gke.3899001", today)) == "1.35"


@pytest.mark.parametrize("gke_world", ["2026-11-26"], indirect=True)
def test_a_cluster_gke_cannot_be_asked_about_keeps_the_recorded_version(gke_world):
    first = run_gcp()
    previous = dict(first.outputs)  # the cluster is not in the fakes' GKE: getCluster fails
    later = run_gcp(previous_outputs=previous)
    assert later.outputs["kubernetes_version"] == first.outputs["kubernetes_version"]
    assert _fakes().CLUSTER_ASKS


def test_deleted_checkpoints_stay_recoverable_for_a_week_the_job_cannot_cut_short(run):
    """The job may delete objects (it prunes and overwrites), and storage.objects.delete also
    purges noncurrent generations: soft delete keeps every deleted generation 7 days, and
    only a bucket policy change ends it, which the job's object-only role cannot make
    (issue 33: on GCP the job's objectUser could purge every earlier version)."""
    assert run.one(BUCKET).inputs["softDeletePolicy"] == {"retentionDurationSeconds": 7 * 86400}
    grants = [g for g in run.of_type(BUCKET_MEMBER) if "job" in g.name]
    assert [g.inputs["role"] for g in grants] == ["roles/storage.objectUser"]
    assert not [m for m in run.of_type("gcp:projects/iAMMember:IAMMember")
                if "storage" in m.inputs["role"] and "admin" in m.inputs["role"]]


@pytest.mark.parametrize(("project", "prefix"), [
    ("torchrec-ci-01", "torchrec-cloud-gcp"),
    ("a-thirty-character-project-id", "torchrec-cloud-production"[:24]),
    ("example.com:my-project", "torchrec-cloud-gcp"),  # a domain-scoped project id
    ("my-google-project", "torchrec-cloud-gcp"),
])
def test_the_bucket_name_is_fixed_per_stack_and_fits_gcs_rules(project, prefix):
    from infra.gcp.storage import checkpoint_bucket_name

    name = checkpoint_bucket_name(project, prefix)
    assert name == checkpoint_bucket_name(project, prefix)  # every run, the same
    assert name != checkpoint_bucket_name(project, f"{prefix}2")  # another stack's differs
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", name), name
    assert "google" not in name and not name.startswith("goog")
    if project == "torchrec-ci-01":
        assert name == "torchrec-ci-01-torchrec-cloud-gcp-ckpt"


def pod_env(run: Run) -> dict[str, str]:
    """The trainer container's literal environment in the run's training pods."""
    spec = harness.training_pod_template(run)["spec"]
    [container] = [c for c in spec["containers"] if c["name"] == "trainer"]
    return {e["name"]: str(e["value"]) for e in container.get("env") or [] if "value" in e}


@pytest.mark.parametrize("gke_world", ["2026-11-26"], indirect=True)
def test_the_trainer_resumes_from_the_checkpoint_written_before_the_destroy(gke_world, tmp_path):
    """A real (CPU, tiny) trainer run against the GCS emulator: it writes checkpoints to the
    first deployment's checkpoint_uri; after destroy, the next deployment adopts the kept
    bucket, and the trainer started with that deployment's URI resumes from the newest one."""
    import os

    from tests import emulators
    from tests.trainer.helpers import REPO, summary, train_until

    first = run_gcp()
    uri = first.outputs["checkpoint_uri"]
    bucket = uri.split("://", 1)[1].split("/", 1)[0]
    for server in emulators.running(emulators.gcs(bucket)):
        # Object calls only, as for the job's roles/storage.objectUser (and moveTo answered at
        # once, so gcsfs takes its copy+delete path without ~30 s of retries).
        proxy = emulators.ObjectUserProxy(server.port)
        # Not the developer's cloud settings (tests/conftest.py gives children the real clock).
        hidden = ("AWS_", "AZURE_", "GOOGLE_", "STORAGE_EMULATOR_HOST", "GCSFS_", "CLOUDSDK_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(hidden)}
        env.update(emulators.gcs_client_env(f"http://127.0.0.1:{proxy.port}"),
                   OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), HOME=str(tmp_path))
        metrics = tmp_path / "metrics.jsonl"

        try:
            train_until(4, uri, env, metrics)
            _fakes().KEPT_BUCKETS.add(bucket)  # `pulumi destroy` kept the bucket and its objects
            adopted = run_gcp()  # the next `pulumi up`, with no earlier outputs
            assert adopted.outputs["checkpoint_store_adopted"] is True
            env.update(pod_env(adopted))  # what the adopting deployment's trainer pod is given
            train_until(6, adopted.outputs["checkpoint_uri"], env, metrics)
        finally:
            proxy.stop()
        final = summary(metrics)
        assert final["resumed_from"] == 4 and final["step"] == 6
