"""Build trainer/Dockerfile and push it to the stack's registry, tagged by content.

Shared by the three clouds: each passes its registry address and push credentials. The tag is
a hash of the trainer's files, so the job runs exactly the code in this repository and a change
to the trainer produces a new tag (and a rolling update of the job), while an unchanged trainer
rebuilds nothing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pulumi
import pulumi_docker_build as docker_build

REPO_ROOT = Path(__file__).resolve().parent.parent
TRAINER_DIR = REPO_ROOT / "trainer"
IGNORED_PARTS = {"__pycache__", ".pytest_cache"}


def trainer_content_tag(directory: Path = TRAINER_DIR) -> str:
    """A short hash of every file the image is built from (paths and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        if IGNORED_PARTS & set(path.parts) or path.suffix == ".pyc":
            continue
        digest.update(str(path.relative_to(directory)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def build_trainer_image(
    name: str,
    repository_url: pulumi.Input[str],
    registry: docker_build.RegistryArgs,
    parent: pulumi.Resource,
    depends_on: list[pulumi.Resource] | None = None,
) -> docker_build.Image:
    """Build for linux/amd64 (the GPU nodes) and push `<repository_url>:<content tag>`.

    Never built on preview: pulumi-docker-build's `buildOnPreview` defaults to true, which
    would build the multi-gigabyte CUDA image on every `pulumi preview` (and the preview step of
    every `pulumi up`); the tag is a content hash known without building, so the preview
    still shows whether the image changes."""
    tag = trainer_content_tag()
    return docker_build.Image(
        name,
        context=docker_build.BuildContextArgs(location=str(REPO_ROOT)),
        dockerfile=docker_build.DockerfileArgs(location=str(TRAINER_DIR / "Dockerfile")),
        platforms=[docker_build.Platform.LINUX_AMD64],
        tags=[pulumi.Output.concat(repository_url, ":", tag)],
        push=True,
        build_on_preview=False,
        registries=[registry],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on or []),
    )


def image_reference(image: docker_build.Image) -> pulumi.Output[str]:
    """The pushed image by digest (`repo:tag@sha256:...`), so pods pull exactly what was built."""
    return image.ref
