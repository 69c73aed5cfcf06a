"""One subscription, one identity and one cloud for every Azure call the program makes.

Resources go through the component's explicit `azure_native.Provider` (given only a location):
it takes the deployer's login from the environment (`ARM_*` variables, else the Azure CLI's
current subscription) and never reads the stack's `azure-native:*` config, which only the
default provider reads (pulumi/pulumi docs/architecture/providers/default.md). The lookups made
before any resource exists (AKS's version list, the live cluster, the kept checkpoint store,
the InfiniBand feature) are synchronous invokes that cannot wait for that provider, so they go
through the default provider. The two agree exactly when the stack config sets none of the keys
that pick a subscription, an identity or a cloud: one that does is refused here, before
anything is asked or created, instead of splitting the run across two subscriptions.

Public Azure only: pulumi_azure_native's `Provider` sets `environment` to "public" when it is
not given (provider.py), so the resources, the ARM version listing (versions.py) and the ACR
token exchange all talk to public Azure; a sovereign cloud named in the environment is refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pulumi

PROVIDER_PACKAGE = "azure-native"
# pulumi_azure_native.Provider's keys that decide whose subscription and which cloud a call
# reaches (the package's config/vars.py); `location` and `partnerId` change neither.
LOGIN_KEYS = ("subscriptionId", "tenantId", "auxiliaryTenantIds", "clientId", "clientSecret",
              "clientCertificatePath", "clientCertificatePassword", "useMsi", "msiEndpoint",
              "useOidc", "oidcToken", "oidcTokenFilePath", "oidcRequestToken", "oidcRequestUrl",
              "useDefaultAzureCredential", "environment", "metadataHost")
# How the provider names public Azure in ARM_ENVIRONMENT / AZURE_ENVIRONMENT (azure-native's
# getCloud: azure.GetCloudByName).
PUBLIC_CLOUD = {"public", "azurepubliccloud", "azurecloud"}
CLOUD_VARIABLES = ("ARM_ENVIRONMENT", "AZURE_ENVIRONMENT")


def check_one_login(environ: Mapping[str, str] | None = None) -> None:
    """Refuse a stack config or environment under which the program's lookups and its
    resources would reach different subscriptions or clouds."""
    # The raw config, not pulumi.Config: a secret (clientSecret) is only tested for presence.
    stray = [key for key in LOGIN_KEYS
             if pulumi.runtime.get_config(f"{PROVIDER_PACKAGE}:{key}") is not None]
    if stray:
        keys = ", ".join(f"{PROVIDER_PACKAGE}:{key}" for key in stray)
        raise RuntimeError(
            f"the stack config sets {keys}, which only Pulumi's default azure-native provider "
            "reads: the program's resources use their own provider, which takes the login from "
            "the environment, so lookups and resources would reach different subscriptions. "
            f"Remove it (`pulumi config rm {PROVIDER_PACKAGE}:{stray[0]}`) and choose the "
            "subscription with `az account set --subscription <id>` or ARM_SUBSCRIPTION_ID "
            "(and ARM_TENANT_ID, ARM_CLIENT_ID... for a service principal). Nothing was created")
    environ = os.environ if environ is None else environ
    for variable in CLOUD_VARIABLES:
        cloud = environ.get(variable, "")
        if cloud and cloud.lower() not in PUBLIC_CLOUD:
            raise RuntimeError(
                f"{variable}={cloud}: this program deploys to public Azure only (its azure-native "
                f"provider and its own ARM calls use management.azure.com); unset {variable}. "
                "Nothing was created")
