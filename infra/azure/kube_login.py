"""How the Entra-only kubeconfig's `kubelogin` signs in: as the identity running `pulumi up`.

AKS hands out an exec kubeconfig that runs `kubelogin get-token --login devicecode`, which would
wait for a browser inside `pulumi up`. The Kubernetes provider runs that command with the
deployer's environment, so the login is chosen from that environment the way the azure-native
provider chooses its own (pulumi-azure-native provider/pkg/provider/auth_azidentity.go,
newSingleMethodAuthCredential: client certificate, client secret, OIDC, managed identity, else
the Azure CLI; each from its `ARM_*` variable). The same identity then holds the AKS RBAC
Cluster Admin grant the program gives `getClientConfig().objectId`.

kubelogin's side (Azure/kubelogin @ 6678496, pkg/internal/token/options.go, provider.go):
- `spn --use-azurerm-env-vars`: reads ARM_CLIENT_ID, ARM_CLIENT_SECRET or
  ARM_CLIENT_CERTIFICATE_PATH (+ _PASSWORD) and ARM_TENANT_ID itself, so no secret is written
  into the kubeconfig.
- `workloadidentity`: with ACTIONS_ID_TOKEN_REQUEST_TOKEN/URL set (GitHub Actions OIDC) it asks
  GitHub for a fresh assertion on every token (GithubActionsCredential, audience
  api://AzureADTokenExchange), so a long run does not outlive a token fetched once at the start
  (what `azure/login` + `azurecli` gives: the az CLI's federated session ends after 60-90
  minutes); otherwise it reads the assertion from `--federated-token-file`.
- `msi`: the VM's managed identity, `--client-id` for a user-assigned one.
- `azurecli`: the `az login` session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import yaml

AZURE_CLI = "azurecli"
SERVICE_PRINCIPAL = "spn"
WORKLOAD_IDENTITY = "workloadidentity"
MANAGED_IDENTITY = "msi"
# Flags AKS writes that name a login-specific identity (the Azure CLI's client app for
# devicecode); replaced per login.
LOGIN_FLAGS = ("--login", "-l", "--client-id")
TENANT_FLAGS = ("--tenant-id", "-t")


@dataclass(frozen=True)
class KubeLogin:
    """kubelogin's `--login` method and the flags it needs; `why` names the variables read."""

    method: str
    flags: tuple[str, ...] = ()
    why: str = "the Azure CLI session (no ARM_* login variables)"


def _on(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").lower() == "true"


def deployer_login(environ: Mapping[str, str]) -> KubeLogin:
    """The kubelogin login matching the azure-native provider's credential; a login kubelogin
    cannot repeat is refused before anything is created."""
    if _on(environ, "ARM_USE_DEFAULT_AZURE_CREDENTIAL"):
        raise RuntimeError(
            "ARM_USE_DEFAULT_AZURE_CREDENTIAL=true: the cluster is Entra-only and its kubeconfig "
            "signs in with kubelogin, which has no DefaultAzureCredential chain, so it could sign "
            "in as another identity than the one granted cluster admin. Unset it and log in one "
            "way: `az login`, ARM_CLIENT_ID/ARM_CLIENT_SECRET (or ARM_CLIENT_CERTIFICATE_PATH)/"
            "ARM_TENANT_ID, ARM_USE_OIDC=true, or ARM_USE_MSI=true. Nothing was created")
    if environ.get("ARM_CLIENT_CERTIFICATE_PATH") or environ.get("ARM_CLIENT_SECRET"):
        return KubeLogin(SERVICE_PRINCIPAL, ("--use-azurerm-env-vars",),
                         "a service principal from ARM_CLIENT_ID and ARM_CLIENT_SECRET or "
                         "ARM_CLIENT_CERTIFICATE_PATH")
    if _on(environ, "ARM_USE_OIDC"):
        identity = ("--client-id", environ.get("ARM_CLIENT_ID", ""),
                    "--tenant-id", environ.get("ARM_TENANT_ID", ""))
        if not (environ.get("ARM_CLIENT_ID") and environ.get("ARM_TENANT_ID")):
            raise RuntimeError("ARM_USE_OIDC=true needs ARM_CLIENT_ID and ARM_TENANT_ID (the "
                               "azure-native provider and kubelogin both read them). Nothing was "
                               "created")
        if environ.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN") and environ.get(
                "ACTIONS_ID_TOKEN_REQUEST_URL"):
            return KubeLogin(WORKLOAD_IDENTITY, identity,
                             "GitHub Actions OIDC (ACTIONS_ID_TOKEN_REQUEST_URL/_TOKEN)")
        if environ.get("ARM_OIDC_TOKEN_FILE_PATH"):
            return KubeLogin(WORKLOAD_IDENTITY, (*identity, "--federated-token-file",
                                                 environ["ARM_OIDC_TOKEN_FILE_PATH"]),
                             "the OIDC token in ARM_OIDC_TOKEN_FILE_PATH")
        raise RuntimeError(
            "ARM_USE_OIDC=true without ACTIONS_ID_TOKEN_REQUEST_URL/_TOKEN (GitHub Actions with "
            "`permissions: id-token: write`) or ARM_OIDC_TOKEN_FILE_PATH: kubelogin cannot take "
            "ARM_OIDC_TOKEN's literal token; write it to a file and set ARM_OIDC_TOKEN_FILE_PATH. "
            "Nothing was created")
    if _on(environ, "ARM_USE_MSI"):
        client = environ.get("ARM_CLIENT_ID")
        return KubeLogin(MANAGED_IDENTITY, ("--client-id", client) if client else (),
                         "the managed identity (ARM_USE_MSI)")
    return KubeLogin(AZURE_CLI)


def use_login(kubeconfig: str, login: KubeLogin) -> str:
    """The kubeconfig with every kubelogin user signing in by `login`; other users untouched
    (a local-accounts cluster's certificate user has no exec)."""
    config = yaml.safe_load(kubeconfig)
    for user in config.get("users") or []:
        exec_ = (user.get("user") or {}).get("exec")
        if not exec_ or "kubelogin" not in str(exec_.get("command", "")):
            continue
        # AKS's own --login/--client-id (and --tenant-id where the login names one) give way.
        replaced = {*LOGIN_FLAGS, *(TENANT_FLAGS if "--tenant-id" in login.flags else ())}
        args = _without(list(exec_.get("args") or []), replaced)
        exec_["args"] = [*args, "--login", login.method, *login.flags]
    return yaml.safe_dump(config, sort_keys=False)


def _without(args: list[str], flags: set[str]) -> list[str]:
    """args less each flag in `flags` and its value."""
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg.split("=", 1)[0] in flags:
            skip = "=" not in arg
            continue
        kept.append(arg)
    return kept
