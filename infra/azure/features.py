"""Subscription features the stack relies on, checked before anything is registered.

AKSInfinibandSupport keeps every node of a pool on one InfiniBand network; without it nodes of
one pool can land on different fabrics, `pulumi up` succeeds and the job fails at the fabric
gate (Azure/aks-rdma-infiniband website/docs/getting-started/02-prerequisites.md; AKS "Use GPUs"
docs, "Register the AKSInfinibandSupport feature"). Registration is per subscription and takes
minutes, so the program names the commands instead of registering it itself.
"""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure_native

from infra.settings.errors import Problem, SettingsError

NAMESPACE = "Microsoft.ContainerService"
INFINIBAND_FEATURE = "AKSInfinibandSupport"


def require_registered(feature: str, setting: str, value: object,
                       opts: pulumi.InvokeOptions | None = None) -> None:
    """Raise a SettingsError naming `setting` unless `feature` is Registered."""
    result = azure_native.features.get_subscription_feature_registration(
        feature_name=feature, provider_namespace=NAMESPACE, opts=opts)
    state = (result.properties.state if result.properties else None) or "NotRegistered"
    if state != "Registered":
        raise SettingsError([Problem(
            setting, value,
            f"needs the subscription feature {NAMESPACE}/{feature}, which is {state}: run "
            f"`az feature register --namespace {NAMESPACE} --name {feature}`, wait until "
            f"`az feature show --namespace {NAMESPACE} --name {feature} --query "
            f"properties.state` says Registered, then `az provider register --namespace "
            f"{NAMESPACE}`; or set interconnect.fabric: false. Nothing was created")])
