"""The stack's container registry and the trainer image pushed to it (unless job.image is set).

The admin user stays disabled: the image is pushed with the deployer's own Entra identity
(granted AcrPush here) through the Docker credentials on the machine running `pulumi up`
(`az acr login --name <registry>`, see README.md, Azure), and the kubelet pulls with AcrPull.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_docker_build as docker_build
from pulumi_azure_native import authorization, containerregistry

from infra.azure.identity import ACR_PULL, ACR_PUSH, assign_role
from infra.image import build_trainer_image, image_reference
from infra.naming import compact

TRAINER_REPOSITORY = "torchrec-trainer"


@dataclass
class TrainerImage:
    registry: containerregistry.Registry
    image: docker_build.Image
    reference: pulumi.Output[str]
    pull: authorization.RoleAssignment  # pods can start only after the kubelet may pull


def registry_name(prefix: str) -> str:
    """ACR names are 5-50 letters and digits, globally unique."""
    return compact(prefix, "acr", max_length=50)


def create_trainer_image(prefix: str, resource_group_name: pulumi.Input[str],
                         kubelet_object_id: pulumi.Input[str],
                         deployer_object_id: pulumi.Input[str],
                         subscription_id: pulumi.Input[str], tags: dict[str, str],
                         parent: pulumi.Resource, opts: pulumi.ResourceOptions) -> TrainerImage:
    registry = containerregistry.Registry(
        f"{prefix}-acr",
        resource_group_name=resource_group_name,
        registry_name=registry_name(prefix),
        sku=containerregistry.SkuArgs(name=containerregistry.SkuName.STANDARD),
        admin_user_enabled=False,
        anonymous_pull_enabled=False,
        tags=tags,
        opts=opts,
    )
    pull = assign_role(
        f"{prefix}-kubelet-acr-pull", role=ACR_PULL, principal_id=kubelet_object_id,
        principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL, scope=registry.id,
        subscription_id=subscription_id, opts=opts)
    push = assign_role(
        f"{prefix}-deployer-acr-push", role=ACR_PUSH, principal_id=deployer_object_id,
        principal_type=None, scope=registry.id, subscription_id=subscription_id, opts=opts)
    repository = pulumi.Output.concat(registry.login_server, "/", TRAINER_REPOSITORY)
    image = build_trainer_image(
        f"{prefix}-trainer-image",
        repository_url=repository,
        # No username/password: Docker's own credential store for this registry is used.
        registry=docker_build.RegistryArgs(address=registry.login_server),
        parent=parent,
        depends_on=[push],
    )
    return TrainerImage(registry=registry, image=image, reference=image_reference(image), pull=pull)
