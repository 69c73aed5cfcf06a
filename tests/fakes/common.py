"""Fakes shared by every stack (Kubernetes resources, Helm releases, image builds)."""

from __future__ import annotations

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


OUTPUTS: dict[str, Any] = {
    "docker-build:index:Image": _image,
}
CALLS: dict[str, Any] = {}
