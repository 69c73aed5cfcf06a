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

Whether the deployer is a user or a service principal (CI: a secret, a certificate, OIDC, a
managed identity) decides the `principalType` of the deployer's own role assignments: ARM
refuses one whose type differs from the principal's ("UnmatchedPrincipalType"), and
pulumi_azure_native's RoleAssignment turns an unset type into "User"
(authorization/role_assignment.py), the API's default since 2022-04-01
(Azure/azure-rest-api-specs#21664). The program reads it off the deployer's own ARM token.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import pulumi
from pulumi_azure_native import authorization

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
            f"Remove it (`pulumi config rm --stack {pulumi.get_stack()} "
            f"{PROVIDER_PACKAGE}:{stray[0]}`) and choose the "
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


def token_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, read without checking its signature: the program only learns
    what kind of principal it signed in as, and ARM, not this program, trusts the token.
    Raises ValueError for anything that is not a JWT with a JSON object payload."""
    parts = token.split(".")
    if len(parts) != 3 or not parts[1]:
        raise ValueError(f"not a JWT: {len(parts)} dot-separated parts, a JWT has 3")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)  # base64url without padding (RFC 7515)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"JWT payload is not base64url JSON: {error}") from error
    if not isinstance(claims, dict):
        raise ValueError("JWT payload is not a JSON object")
    return claims


def principal_type_of(claims: Mapping[str, Any]) -> authorization.PrincipalType:
    """ServicePrincipal for an app-only token, User for a delegated (user) one.

    Microsoft identity platform, access token claims: `scp` is "Only included for user
    tokens"; optional claims reference: `idtyp` is "app when the token is an app-only token
    ... the most accurate way for an API to determine if a token is an app token or an
    app+user token" (learn.microsoft.com/entra/identity-platform/access-token-claims-reference,
    .../optional-claims-reference). ARM tokens carry `idtyp` ("app" or "user"); `scp` decides
    when it is missing. A managed identity signs in as its service principal: app-only."""
    kind = claims.get("idtyp")
    if kind == "app":
        return authorization.PrincipalType.SERVICE_PRINCIPAL
    if kind is None and not claims.get("scp"):
        return authorization.PrincipalType.SERVICE_PRINCIPAL
    return authorization.PrincipalType.USER


def principal_type_from_token(token: str) -> authorization.PrincipalType:
    """principal_type_of the token's claims. A token that is not a readable JWT (Entra's
    access tokens are, so this is not expected) falls back to User with a warning instead of
    stopping the run: User is what every run got before the type was read and is right for an
    `az login` user, while a service principal then meets the ARM error the warning names."""
    try:
        return principal_type_of(token_claims(token))
    except ValueError as error:
        pulumi.log.warn(
            f"the deployer's ARM token could not be read as a JWT ({error}): its role "
            "assignments (AKS RBAC Cluster Admin, AcrPush, Storage Blob Data Reader) are made "
            "for a principal of type User. A service principal or managed identity running "
            "`pulumi up` gets UnmatchedPrincipalType from ARM there; deploy as a user "
            "(`az login`) or with an ARM_* login that returns an Entra ID access token")
        return authorization.PrincipalType.USER


def deployer_principal_type() -> authorization.PrincipalType:
    """The principal type of the identity running `pulumi up`, read once, before anything is
    created, from its ARM token (authorization.get_client_token: the default provider's
    login, the one the program's own ARM reads use, which check_one_login makes the
    resources' login too), and given to every grant to the deployer."""
    check_one_login()
    return principal_type_from_token(authorization.get_client_token().token)
