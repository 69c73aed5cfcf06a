"""Wait until the deployer's AKS RBAC Cluster Admin grant is in force before any Kubernetes call.

On an Entra-only cluster with Azure RBAC the program grants the identity running `pulumi up`
"Azure Kubernetes Service RBAC Cluster Admin" on the cluster, then installs add-ons and the job.
"New role assignments can take up to five minutes to propagate and be updated by the
authorization server" (https://learn.microsoft.com/azure/aks/manage-azure-rbac, "Before you
begin"), while the Kubernetes provider starts as soon as the empty
pools exist: its first Namespace or Helm call would get 403 Forbidden and fail the run.

The admin kubeconfig (listClusterAdminCredential) would not depend on the grant, but with local
accounts disabled AKS refuses it ("Getting static credential is not allowed because this cluster
is set to disable local accounts", https://learn.microsoft.com/azure/aks/manage-local-accounts-managed-azure-ad).
So the program asks the API server itself, with an Entra token of the same identity for the
AKS server application (the kubeconfig's `--server-id`), whether it may create what it creates
first: `SelfSubjectAccessReview` (authorization.k8s.io/v1, what `kubectl auth can-i` sends; any
authenticated user may create one, system:basic-user), polled until allowed. No binary beyond
the ones the run needs anyway; the Kubernetes providers take the kubeconfig only after this.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pulumi
import yaml

# The Entra application behind AKS-managed Entra ID (the `--server-id` AKS writes into every
# exec kubeconfig; https://learn.microsoft.com/azure/aks/kubelogin-authentication).
AKS_SERVER_APP_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"
# What the first Kubernetes calls create: namespaces (the operators', the job's) and the
# operators' CRDs. Cluster Admin allows both; a grant not yet in force allows neither.
FIRST_CALLS: tuple[tuple[str, str, str], ...] = (
    ("create", "", "namespaces"),
    ("create", "apiextensions.k8s.io", "customresourcedefinitions"),
)
WAIT_SECONDS = 900.0  # three times the documented five minutes
POLL_SECONDS = 15.0
REQUEST_TIMEOUT_SECONDS = 30
NOT_YET = {401, 403}  # token not yet accepted / authorizer not yet aware of the grant
REVIEW_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def post_json(url: str, body: dict[str, Any], token: str, ca_pem: str) -> dict[str, Any]:
    """One HTTPS POST to the API server, trusting only the cluster's CA (tests/fakes/azure.py
    stands in for it under mocks)."""
    context = ssl.create_default_context(cadata=ca_pem)
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                 "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS,
                                context=context) as response:
        return json.loads(response.read())


def review(verb: str, group: str, resource: str) -> dict[str, Any]:
    """The SelfSubjectAccessReview `kubectl auth can-i <verb> <resource>` sends."""
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "group": group,
                                            "resource": resource}}}


def _current(config: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    entries = [e for e in config.get(kind) or [] if e.get("name") == name]
    return entries[0] if entries else {}


def api_server(kubeconfig: str) -> tuple[str, str]:
    """The current context's API server URL and its CA (PEM)."""
    config = yaml.safe_load(kubeconfig)
    context = _current(config, "contexts", config.get("current-context", ""))
    cluster = _current(config, "clusters", (context.get("context") or {}).get("cluster", ""))
    details = cluster.get("cluster") or {}
    ca = base64.b64decode(details.get("certificate-authority-data", "")).decode()
    return str(details["server"]).rstrip("/"), ca


def server_id(kubeconfig: str) -> str:
    """The Entra application the kubeconfig's kubelogin asks a token for."""
    for user in yaml.safe_load(kubeconfig).get("users") or []:
        args = list(((user.get("user") or {}).get("exec") or {}).get("args") or [])
        if "--server-id" in args and args.index("--server-id") + 1 < len(args):
            return args[args.index("--server-id") + 1]
    return AKS_SERVER_APP_ID


def _allowed(server: str, ca: str, token: str) -> bool:
    for verb, group, resource in FIRST_CALLS:
        answer = post_json(server + REVIEW_PATH, review(verb, group, resource), token, ca)
        if not (answer.get("status") or {}).get("allowed"):
            return False
    return True


def wait_until_granted(kubeconfig: str, token: str, principal: str,
                       sleep: Callable[[float], None] | None = None,
                       clock: Callable[[], float] = time.monotonic) -> str:
    """Poll until the API server lets `principal` create namespaces and CRDs; returns the
    kubeconfig unchanged. Refused or unreachable after WAIT_SECONDS: a RuntimeError that
    names the identity and what to check."""
    server, ca = api_server(kubeconfig)
    deadline = clock() + WAIT_SECONDS
    last = "not allowed yet"
    while True:
        try:
            if _allowed(server, ca, token):
                return kubeconfig
            last = "SelfSubjectAccessReview: not allowed yet"
        except urllib.error.HTTPError as error:
            if error.code not in NOT_YET and error.code < 500:
                raise
            last = f"HTTP {error.code}"
        except urllib.error.URLError as error:
            last = f"unreachable ({error.reason})"
        if clock() >= deadline:
            raise RuntimeError(
                f"the AKS RBAC Cluster Admin grant to {principal} is not in force on {server} "
                f"after {WAIT_SECONDS / 60:.0f} minutes ({last}). Check the role assignment "
                "on the cluster (`az role assignment list --scope <cluster id>`) and that this "
                "machine's address is in kubernetes.apiAccessCidrs; then run "
                f"`pulumi up --stack {pulumi.get_stack()}` again")
        pulumi.log.info(f"waiting for the AKS RBAC Cluster Admin grant to take effect ({last})")
        (sleep or time.sleep)(POLL_SECONDS)


def granted_kubeconfig(kubeconfig: pulumi.Output[str], grant: pulumi.CustomResource,
                       principal: pulumi.Input[str],
                       provider: pulumi.ProviderResource) -> pulumi.Output[str]:
    """`kubeconfig`, resolved only once the grant is created and in force (skipped on preview,
    which makes no Kubernetes changes). The token is the azure-native provider's: the identity
    the grant names."""
    from pulumi_azure_native import authorization

    token = authorization.get_client_token_output(
        endpoint=kubeconfig.apply(server_id), opts=pulumi.InvokeOutputOptions(provider=provider))

    async def wait(args: list[Any]) -> str:
        config, bearer, _grant_id, who = args
        if pulumi.runtime.is_dry_run():
            return config
        # Up to WAIT_SECONDS of polling and sleeping: on a worker thread, so the program's event
        # loop keeps registering (and the engine keeps creating) everything else meanwhile.
        return await asyncio.to_thread(wait_until_granted, config, bearer, who)

    return pulumi.Output.all(kubeconfig, token.token, grant.id, principal).apply(wait)
