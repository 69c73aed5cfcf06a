"""The trainer image: an Artifact Registry repository next to the cluster, and the build into it."""

from __future__ import annotations

import pulumi
import pulumi_docker_build as docker_build
import pulumi_gcp as gcp

from infra.image import build_trainer_image, image_reference

TOKEN_USERNAME = "oauth2accesstoken"  # Artifact Registry takes an OAuth token as password
IMAGE_NAME = "trainer"


def registry_host(region: str) -> str:
    return f"{region}-docker.pkg.dev"


def create_trainer_image(prefix: str, project: str, region: str,
                         node_account: gcp.serviceaccount.Account,
                         provider: gcp.Provider, parent: pulumi.Resource,
                         opts: pulumi.ResourceOptions
                         ) -> tuple[pulumi.Output[str], gcp.artifactregistry.RepositoryIamMember]:
    """Build trainer/Dockerfile into `<region>-docker.pkg.dev/<project>/<repo>/trainer`; the
    image reference and the nodes' read grant (the job waits for it: without it every pull is
    refused).

    The nodes may pull from this repository and nothing else (reader on it, not the project).
    """
    repository = gcp.artifactregistry.Repository(
        f"{prefix}-images",
        repository_id=f"{prefix}-images",
        location=region,
        format="DOCKER",
        description="torchrec-cloud trainer images",
        opts=opts,
    )
    pull = gcp.artifactregistry.RepositoryIamMember(
        f"{prefix}-images-nodes-read",
        repository=repository.name,
        location=region,
        role="roles/artifactregistry.reader",
        member=node_account.member,
        opts=opts,
    )
    token = gcp.organizations.get_client_config_output(
        opts=pulumi.InvokeOutputOptions(provider=provider, parent=parent)).access_token
    url = pulumi.Output.concat(
        registry_host(region), "/", project, "/", repository.repository_id, "/", IMAGE_NAME)
    image = build_trainer_image(
        f"{prefix}-trainer",
        repository_url=url,
        registry=docker_build.RegistryArgs(
            address=registry_host(region),
            username=TOKEN_USERNAME,
            password=pulumi.Output.secret(token),
        ),
        parent=parent,
        depends_on=[repository],
    )
    return image_reference(image), pull
