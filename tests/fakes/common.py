"""Fakes shared by every stack (Kubernetes resources, Helm releases, image builds)."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pulumi

FAKE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: 'https://fake.example.com', certificate-authority-data: ZmFrZQ==}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
users: [{name: fake, user: {token: fake}}]
"""


def _image(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    tags = args.inputs.get("tags") or ["registry.example.com/trainer:latest"]
    return {"ref": f"{tags[0]}@sha256:{'0' * 64}", "digest": f"sha256:{'0' * 64}"}


def _job(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    """What the API server and pulumi-kubernetes give a created Job: Pulumi's auto-name
    (`<logical name>-<8 random characters>`) where none is set, and a uid."""
    digest = hashlib.sha256(args.name.encode()).hexdigest()
    metadata = dict(args.inputs.get("metadata") or {})
    metadata.setdefault("name", f"{args.name}-{digest[:8]}")
    metadata["uid"] = str(uuid.UUID(digest[:32]))
    return {"metadata": metadata}


OUTPUTS: dict[str, Any] = {
    "docker-build:index:Image": _image,
    "kubernetes:batch/v1:Job": _job,
}
CALLS: dict[str, Any] = {}
