"""Fakes for the gcp stack's resources and invokes: the outputs GcpGpuCluster reads."""

from __future__ import annotations

import base64
from typing import Any

import pulumi

FAKE_PROJECT = "my-gcp-project"
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
    name = f"{args.name}-a1b2c3d"  # Pulumi auto-names buckets with a random suffix
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


OUTPUTS: dict[str, Any] = {
    "gcp:container/cluster:Cluster": _cluster,
    "gcp:filestore/instance:Instance": _filestore,
    "gcp:serviceaccount/account:Account": _service_account,
    "gcp:storage/bucket:Bucket": _bucket,
    "gcp:artifactregistry/repository:Repository": _repository,
    "gcp:compute/network:Network": _network,
}
CALLS: dict[str, Any] = {
    "gcp:organizations/getClientConfig:getClientConfig": _client_config,
}
