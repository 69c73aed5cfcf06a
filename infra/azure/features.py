"""Subscription features the stack relies on, checked before anything is registered.

AKSInfinibandSupport keeps every node of a pool on one InfiniBand network; without it nodes of
one pool can land on different fabrics, `pulumi up` succeeds and the job fails at the fabric
gate (Azure/aks-rdma-infiniband website/docs/getting-started/02-prerequisites.md; AKS "Use GPUs"
docs, "Register the AKSInfinibandSupport feature"). Registration is per subscription and takes
minutes, so the program names the commands instead of registering it itself.

This read is the program's first azure-native call in a fresh subscription, so its refusals are
answered too: ARM's 409 MissingSubscriptionRegistration for a resource provider the subscription
has not registered (https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/
error-register-resource-provider), and a 404 for a feature registration that was never made,
both with the commands that register them (as infra/azure/https.py does for the program's own
ARM reads), instead of a bare traceback.
"""

from __future__ import annotations

import re

import pulumi
import pulumi_azure_native as azure_native

from infra.settings.errors import Problem, SettingsError

NAMESPACE = "Microsoft.ContainerService"
INFINIBAND_FEATURE = "AKSInfinibandSupport"
# What the invoke's error says when the subscription lacks a provider or the feature: the
# provider passes ARM's code and status on in the text of the error.
NOT_REGISTERED = re.compile(r"MissingSubscriptionRegistration|NotRegistered|not registered|"
                            r"NotFound|\b404\b|was not found|could not be found", re.IGNORECASE)
_NAMESPACE = re.compile(r"namespace '([A-Za-z0-9.]+)'")


def _commands(feature: str, namespaces: list[str]) -> str:
    registers = " and ".join(f"`az provider register --namespace {namespace} --wait`"
                             for namespace in namespaces)
    return (f"run `az feature register --namespace {NAMESPACE} --name {feature}`, wait until "
            f"`az feature show --namespace {NAMESPACE} --name {feature} --query "
            f"properties.state` says Registered, then {registers}; or set interconnect.fabric: "
            f"false (`pulumi config set --stack {pulumi.get_stack()} --path interconnect.fabric "
            "false`). Nothing was created")


def require_registered(feature: str, setting: str, value: object,
                       opts: pulumi.InvokeOptions | None = None) -> None:
    """Raise a SettingsError naming `setting` unless `feature` is Registered."""
    try:
        result = azure_native.features.get_subscription_feature_registration(
            feature_name=feature, provider_namespace=NAMESPACE, opts=opts)
    except Exception as error:  # noqa: BLE001 (invoke errors carry ARM's code in the text)
        reason = str(error)
        if not NOT_REGISTERED.search(reason):
            raise  # no rights, throttling: not a registration to make
        named = _NAMESPACE.search(reason)
        namespaces = [NAMESPACE, *([named.group(1)] if named and named.group(1) != NAMESPACE
                                   else [])]
        raise SettingsError([Problem(
            setting, value,
            f"needs the subscription feature {NAMESPACE}/{feature}, which Azure reports as not "
            f"registered for this subscription ({reason.strip().splitlines()[0][:300]}): "
            + _commands(feature, namespaces))]) from None
    state = (result.properties.state if result.properties else None) or "NotRegistered"
    if state != "Registered":
        raise SettingsError([Problem(
            setting, value,
            f"needs the subscription feature {NAMESPACE}/{feature}, which is {state}: "
            + _commands(feature, [NAMESPACE]))])
