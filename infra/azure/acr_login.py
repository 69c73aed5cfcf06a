"""Log the image push in to the stack's registry from inside `pulumi up`, as `az acr login` does.

The registry's admin user stays off, and a first run cannot ask the user to `az acr login` to a
registry that does not exist yet. So the program exchanges the Entra access token of the
identity running `pulumi up` (`authorization.get_client_token`, the azure-native provider's own
credentials) for an ACR refresh token at the registry's `POST /oauth2/exchange`, and hands it to
the image build with the null-GUID user name, which tells ACR the password is a refresh token
(Azure/acr docs/AAD-OAuth.md, "Calling POST /oauth2/exchange to get an ACR refresh token" and
"Authenticating docker with an ACR refresh token"). The token lives about three hours and is
fetched on every run; pulumi-docker-build ignores registry password changes when diffing, so a
new token does not rebuild the image (pulumi-docker-build provider/internal/image.go, Diff).
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

from infra.azure.https import with_retries

# The token's audience: ACR's own, never ARM's. The built-in Azure Policy "Container registries
# should have ARM audience token authentication disabled" (and its Modify twin) turns
# `azureADAuthenticationAsArmPolicy` off, and then only ACR-audience tokens are accepted; an
# ACR-audience token works with the policy on as well (https://aka.ms/acr/authentication;
# Azure/azure-policy built-in-policies/policyDefinitions/Container Registry/
# ACR_AADAuthenticationAsArmPolicy_AuditDeny.json). azure-native's getClientToken asks Entra for
# `<endpoint>/.default` (pulumi-azure-native provider/pkg/provider/provider.go, tokenRequestOpts).
ACR_AUDIENCE = "https://containerregistry.azure.net"
ACR_REFRESH_TOKEN_USER = "00000000-0000-0000-0000-000000000000"
EXCHANGE_TIMEOUT_SECONDS = 60


def post_form(url: str, fields: dict[str, str]) -> dict:
    """One HTTPS form POST returning JSON (tests/fakes/azure.py stands in for it under mocks)."""
    request = urllib.request.Request(
        url, data=urllib.parse.urlencode(fields).encode(), method="POST",
        headers={"Content-Type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(request, timeout=EXCHANGE_TIMEOUT_SECONDS) as response:
        return json.loads(response.read())


def exchange_for_refresh_token(login_server: str, tenant_id: str, access_token: str) -> str:
    """The ACR refresh token for an Entra access token (grant_type=access_token)."""
    answer = with_retries(lambda: post_form(f"https://{login_server}/oauth2/exchange", {
        "grant_type": "access_token",
        "service": login_server,
        "tenant": tenant_id,
        "access_token": access_token,
    }))
    token = answer.get("refresh_token")
    if not token:
        raise RuntimeError(f"{login_server} answered the token exchange without a refresh_token")
    return token
