"""Fakes for the gcp stack's resources and invokes: the outputs GcpGpuCluster reads."""

from __future__ import annotations

import base64
from typing import Any

import pulumi

FAKE_PROJECT = "torchrec-ci-01"
FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")


def _project(args: pulumi.runtime.MockResourceArgs) -> str:
    return str(args.inputs.get("project") or FAKE_PROJECT)


def _cluster(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    location = args.inputs.get("location", "us-central1-a")
    return {
        "id": f"projects/{_project(args)}/locations/{location}/clusters/{args.name}",
        "endpoint": "203.0.113.10",
        "masterAuth": {"clusterCaCertificate": FAKE_CA.decode(), "clientCertificate": ""},
        "selfLink": f"https://container.googleapis.com/v1/projects/x/zones/{location}/clusters/{args.name}",
    }


def _filestore(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    networks = [dict(n) for n in args.inputs.get("networks", [{}])]
    networks[0].update({"ipAddresses": ["10.3.0.2"], "reservedIpRange": "10.3.0.0/26"})
    return {"networks": networks}


def _service_account(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    email = f"{args.inputs['accountId']}@{_project(args)}.iam.gserviceaccount.com"
    return {
        "email": email,
        "member": f"serviceAccount:{email}",
        "name": f"projects/{_project(args)}/serviceAccounts/{email}",
        "uniqueId": "100000000000000000001",
    }


def _bucket(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    # The name the program gives, the one an import (`import_`) names, or Pulumi's auto-name:
    # the logical name with a random suffix (what stacks made before fixed names have).
    name = str(args.inputs.get("name") or args.resource_id or f"{args.name}-a1b2c3d")
    return {"name": name, "url": f"gs://{name}", "selfLink": f"https://www.googleapis.com/storage/v1/b/{name}"}


def _repository(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    location, repo = args.inputs.get("location"), args.inputs.get("repositoryId")
    return {
        "name": f"projects/{FAKE_PROJECT}/locations/{location}/repositories/{repo}",
        "registryUri": f"{location}-docker.pkg.dev/{FAKE_PROJECT}/{repo}",
    }


def _network(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    return {
        "id": f"projects/{FAKE_PROJECT}/global/networks/{args.name}",
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{FAKE_PROJECT}/global/networks/{args.name}",
    }


def _client_config(_args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    return {
        "accessToken": "ya29.fake-access-token",
        "id": "fake-client-config",
        "project": FAKE_PROJECT,
        "region": "us-central1",
        "zone": "us-central1-a",
        "defaultLabels": {},
    }


# What getServerConfig offers in the fakes' world (the suite's pinned day, 2026-11-26): each
# channel's valid versions, newest first, and its default. The REGULAR channel offers 1.34 and
# 1.35; 1.33 has left it (RAPID and STABLE are here so a test can tell the channels apart).
# A test that needs another day's world monkeypatches these (tests/test_gcp.py GKE_WORLDS).
CHANNEL_VERSIONS: dict[str, list[str]] = {
    "RAPID": ["1.36.1-gke.1100000", "1.35.1-gke.1200000", "1.35.0-gke.2398000"],
    "REGULAR": ["1.35.0-gke.2398000", "1.35.0-gke.1795000", "1.34.1-gke.3899001",
                "1.34.1-gke.3355000"],
    "STABLE": ["1.34.1-gke.3355000", "1.33.5-gke.2100000"],
}
CHANNEL_DEFAULTS = {"RAPID": "1.35.1-gke.1200000", "REGULAR": "1.34.1-gke.3899001",
                    "STABLE": "1.33.5-gke.2100000"}


ENGINE_VERSION_ASKS: list[dict[str, Any]] = []  # every getEngineVersions call's arguments


def _engine_versions(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    """As terraform-provider-google's data source shapes getServerConfig: the valid versions
    filtered by the prefix, each channel's default as is, and each channel's newest valid
    version with the prefix (absent when it has none)."""
    ENGINE_VERSION_ASKS.append(dict(args.args))
    prefix = str(args.args.get("versionPrefix") or "")
    every = sorted({v for versions in CHANNEL_VERSIONS.values() for v in versions},
                   key=_version_key, reverse=True)
    valid = [v for v in every if v.startswith(prefix)]
    latest = {channel: next(v for v in versions if v.startswith(prefix))
              for channel, versions in CHANNEL_VERSIONS.items()
              if any(v.startswith(prefix) for v in versions)}
    return {
        "id": "fake-engine-versions",
        "location": args.args.get("location"),
        "project": args.args.get("project") or FAKE_PROJECT,
        "versionPrefix": prefix,
        "defaultClusterVersion": CHANNEL_DEFAULTS["REGULAR"],
        "latestMasterVersion": valid[0] if valid else "",
        "latestNodeVersion": valid[0] if valid else "",
        "validMasterVersions": valid,
        "validNodeVersions": valid,
        "releaseChannelDefaultVersion": dict(CHANNEL_DEFAULTS),
        "releaseChannelLatestVersion": latest,
        "releaseChannelUpgradeTargetVersion": dict(CHANNEL_DEFAULTS),
    }


def _version_key(version: str) -> tuple[int, ...]:
    release, _, build = version.partition("-gke.")
    return (*(int(p) for p in release.split(".")), int(build or 0))


# Live GKE clusters in the fakes' world, by name: what getCluster answers. Empty: no cluster
# exists, and getCluster fails as the provider does for a missing one.
LIVE_CLUSTERS: dict[str, dict[str, Any]] = {}
CLUSTER_ASKS: list[dict[str, Any]] = []  # every getCluster call's arguments


def live_cluster(master: str, pools: dict[str, str]) -> dict[str, Any]:
    """What getCluster returns for a cluster whose control plane runs `master` and whose node
    pools (name -> version) run theirs: the fields the program reads."""
    return {"masterVersion": master, "minMasterVersion": "", "nodeVersion": master,
            "nodePools": [{"name": name, "version": version} for name, version in pools.items()]}


def _not_found(message: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A failed invoke as the engine reports one (the SDK raises it where the program can catch
    it); a Python exception here would instead fail the whole mocked run."""
    return {}, [("", message)]


def _get_cluster(args: pulumi.runtime.MockCallArgs) -> Any:
    CLUSTER_ASKS.append(dict(args.args))
    name = str(args.args.get("name"))
    if name not in LIVE_CLUSTERS:
        return _not_found(f"Error: cluster {name} in location {args.args.get('location')} "
                          "not found")
    return {"id": f"projects/{args.args.get('project')}/locations/{args.args.get('location')}"
                  f"/clusters/{name}", "name": name, "location": args.args.get("location"),
            "project": args.args.get("project"), **LIVE_CLUSTERS[name]}


# Buckets that exist in GCS in the fakes' world (kept by an earlier deployment): what getBucket
# finds. Empty: getBucket fails, as the provider does for a bucket that does not exist.
KEPT_BUCKETS: set[str] = set()
# Their labels (getBucket's `labels`), by bucket name.
KEPT_BUCKET_LABELS: dict[str, dict[str, str]] = {}
# Buckets getBucket may not read (another project's bucket of that name, or a deployer without
# storage.buckets.get): the Storage API's 403.
FORBIDDEN_BUCKETS: set[str] = set()
BUCKET_ASKS: list[str] = []


def _get_bucket(args: pulumi.runtime.MockCallArgs) -> Any:
    """The data source returns the Storage API's error as is (terraform-provider-google
    data_source_google_storage_bucket.go, `Buckets.Get(bucket).Do()`), as googleapi formats
    it."""
    name = str(args.args.get("name"))
    BUCKET_ASKS.append(name)
    if name in FORBIDDEN_BUCKETS:
        return _not_found(
            "googleapi: Error 403: deployer@torchrec-ci-01.iam.gserviceaccount.com does not "
            f"have storage.buckets.get access to the Google Cloud Storage bucket. Permission "
            f"'storage.buckets.get' denied on resource (or it may not exist)., forbidden")
    if name not in KEPT_BUCKETS:
        return _not_found("googleapi: Error 404: The specified bucket does not exist., notFound")
    return {"id": name, "name": name, "url": f"gs://{name}", "location": "US-CENTRAL1",
            "selfLink": f"https://www.googleapis.com/storage/v1/b/{name}",
            "labels": KEPT_BUCKET_LABELS.get(name, {})}


OUTPUTS: dict[str, Any] = {
    "gcp:container/cluster:Cluster": _cluster,
    "gcp:filestore/instance:Instance": _filestore,
    "gcp:serviceaccount/account:Account": _service_account,
    "gcp:storage/bucket:Bucket": _bucket,
    "gcp:artifactregistry/repository:Repository": _repository,
    "gcp:compute/network:Network": _network,
}
DEPLOYER_EMAIL = "deployer@example.com"  # whoever runs `pulumi up` in the fakes' world


def _open_id_user_info(_args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    return {"email": DEPLOYER_EMAIL, "id": DEPLOYER_EMAIL}


CALLS: dict[str, Any] = {
    "gcp:organizations/getClientConfig:getClientConfig": _client_config,
    "gcp:organizations/getClientOpenIdUserInfo:getClientOpenIdUserInfo": _open_id_user_info,
    "gcp:container/getEngineVersions:getEngineVersions": _engine_versions,
    "gcp:container/getCluster:getCluster": _get_cluster,
    "gcp:storage/getBucket:getBucket": _get_bucket,
}


# --- Compute Engine's regions.get (infra/gcp/quotas.get_json) -------------------------------
def quota(metric: str, limit: float, usage: float = 0.0) -> dict[str, Any]:
    """One entry of regions.get `quotas[]` (`gcloud compute regions describe` prints it)."""
    return {"metric": metric, "limit": limit, "usage": usage}


# The project's quotas in the stack's region (tests set one to 0): room for every catalog GPU,
# on demand and Spot, and their machine families' CPUs.
REGION_QUOTAS: dict[str, dict[str, Any]] = {
    metric: quota(metric, 64.0) for gpu in
    ("NVIDIA_A100_GPUS", "NVIDIA_A100_80GB_GPUS", "NVIDIA_H100_GPUS", "NVIDIA_H100_MEGA_GPUS",
     "NVIDIA_H200_GPUS") for metric in (gpu, f"PREEMPTIBLE_{gpu}")}
REGION_QUOTAS.update({m: quota(m, 2000.0) for m in ("CPUS", "A2_CPUS", "A3_CPUS", "E2_CPUS",
                                                   "N2_CPUS")})
REGION_REQUESTS: list[tuple[str, str]] = []  # (url, token) of every regions.get


def compute_get(url: str, token: str) -> dict[str, Any]:
    """Stands in for Compute Engine's regions.get, asked with getClientConfig's access token."""
    if token != "ya29.fake-access-token":
        raise AssertionError(f"Compute request {url} without the deployer's token")
    prefix = f"https://compute.googleapis.com/compute/v1/projects/{FAKE_PROJECT}/regions/"
    if not url.startswith(prefix):
        raise AssertionError(f"unexpected Compute request {url}")
    REGION_REQUESTS.append((url, token))
    return {"kind": "compute#region", "name": url.removeprefix(prefix), "status": "UP",
            "quotas": list(REGION_QUOTAS.values())}
