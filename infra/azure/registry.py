"""The stack's container registry and the trainer image pushed to it (unless job.image is set).

The admin user stays disabled. The image is pushed in the same `pulumi up` that creates the
registry, with an ACR refresh token the program obtains for the deployer's own Entra identity
(infra/azure/acr_login.py); the deployer gets AcrPush, and the kubelet pulls with AcrPull.

Network: the registry keeps its public endpoint (Standard SKU). Registry firewall rules and
private endpoints exist only on Premium, and a private registry would need the deploying machine
and the nodes on its network for push and pull
(https://learn.microsoft.com/azure/container-registry/container-registry-skus,
https://learn.microsoft.com/azure/container-registry/container-registry-access-selected-networks).
What protects it: no admin user, no anonymous pull, Entra tokens and RBAC on this registry only.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_docker_build as docker_build
from pulumi_azure_native import authorization, containerregistry

from infra.azure.acr_login import ACR_AUDIENCE, ACR_REFRESH_TOKEN_USER, exchange_for_refresh_token
from infra.azure.identity import ACR_PULL, ACR_PUSH, assign_role
from infra.image import build_trainer_image, image_reference

TRAINER_REPOSITORY = "torchrec-trainer"
REGISTRY_MAX_LENGTH = 50  # ACR names: 5-50 letters and digits, globally unique


@dataclass
class TrainerImage:
    registry: containerregistry.Registry
    image: docker_build.Image
    reference: pulumi.Output[str]
    pull: authorization.RoleAssignment  # pods can start only after the kubelet may pull


def push_credentials(registry: containerregistry.Registry, tenant_id: pulumi.Input[str],
                     provider: pulumi.ProviderResource) -> docker_build.RegistryArgs:
    """The registry login for the image push: an ACR refresh token for the deployer, a secret."""
    access = authorization.get_client_token_output(
        endpoint=ACR_AUDIENCE, opts=pulumi.InvokeOutputOptions(provider=provider))
    token = pulumi.Output.all(registry.login_server, tenant_id, access.token).apply(
        lambda args: exchange_for_refresh_token(*args))
    return docker_build.RegistryArgs(address=registry.login_server,
                                     username=ACR_REFRESH_TOKEN_USER,
                                     password=pulumi.Output.secret(token))


def create_trainer_image(prefix: str, registry_name: pulumi.Input[str],
                         resource_group_name: pulumi.Input[str],
                         kubelet_object_id: pulumi.Input[str],
                         deployer_object_id: pulumi.Input[str],
                         subscription_id: pulumi.Input[str], tenant_id: pulumi.Input[str],
                         tags: dict[str, str], provider: pulumi.ProviderResource,
                         parent: pulumi.Resource, opts: pulumi.ResourceOptions, *,
                         deployer_type: authorization.PrincipalType) -> TrainerImage:
    registry = containerregistry.Registry(
        f"{prefix}-acr",
        resource_group_name=resource_group_name,
        registry_name=registry_name,
        sku=containerregistry.SkuArgs(name=containerregistry.SkuName.STANDARD),
        admin_user_enabled=False,
        anonymous_pull_enabled=False,
        public_network_access=containerregistry.PublicNetworkAccess.ENABLED,
        tags=tags,
        opts=opts,
    )
    pull = assign_role(
        f"{prefix}-kubelet-acr-pull", role=ACR_PULL, principal_id=kubelet_object_id,
        principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL, scope=registry.id,
        subscription_id=subscription_id, opts=opts)
    push = assign_role(
        f"{prefix}-deployer-acr-push", role=ACR_PUSH, principal_id=deployer_object_id,
        principal_type=deployer_type, scope=registry.id, subscription_id=subscription_id,
        opts=opts)
    repository = pulumi.Output.concat(registry.login_server, "/", TRAINER_REPOSITORY)
    image = build_trainer_image(
        f"{prefix}-trainer-image",
        repository_url=repository,
        registry=push_credentials(registry, tenant_id, provider),
        parent=parent,
        depends_on=[push],
    )
    return TrainerImage(registry=registry, image=image, reference=image_reference(image), pull=pull)
