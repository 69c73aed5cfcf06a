"""Retries for the program's own HTTPS calls to Azure (the ARM version listing, the ACR token
exchange): one policy, so both treat a flaky answer and a final refusal alike."""

from __future__ import annotations

import json
import re
import time
import urllib.error
from collections.abc import Callable
from typing import TypeVar

import pulumi

ATTEMPTS = 4  # a new registry's DNS name, or ARM's occasional 5xx, can fail the first try
TOO_MANY_REQUESTS = 429  # ARM's throttling: retried like a 5xx (learn.microsoft.com/azure/
# azure-resource-manager/management/request-limits-and-throttling)
Answer = TypeVar("Answer")
# ARM's answer to a call into a resource provider the subscription has not registered: HTTP 409,
# code MissingSubscriptionRegistration, "The subscription is not registered to use namespace
# 'Microsoft.NetApp'" (https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/
# error-register-resource-provider). A fresh subscription has Microsoft.NetApp unregistered.
CONFLICT = 409
MISSING_REGISTRATION = "MissingSubscriptionRegistration"
_NAMESPACE = re.compile(r"namespace '([A-Za-z0-9.]+)'")
_URL_NAMESPACE = re.compile(r"/providers/([A-Za-z0-9]+\.[A-Za-z0-9.]+)/")


class ProviderNotRegistered(RuntimeError):
    """The subscription has not registered a resource provider the stack needs: said with the
    command that registers it, instead of a bare `HTTPError 409` traceback."""

    def __init__(self, namespace: str, url: str):
        self.namespace = namespace
        super().__init__(
            f"this subscription is not registered for the Azure resource provider {namespace} "
            f"(ARM answered 409 {MISSING_REGISTRATION} to {url.split('?')[0]}). Register it "
            f"once per subscription: `az provider register --namespace {namespace} --wait` "
            f"(check with `az provider show --namespace {namespace} --query "
            f"registrationState`), then run `pulumi up --stack {pulumi.get_stack()}` again. Nothing "
            "was created")


def not_registered(error: urllib.error.HTTPError, url: str) -> ProviderNotRegistered | None:
    """The ProviderNotRegistered a 409 answer means, or None for any other refusal."""
    if error.code != CONFLICT:
        return None
    try:
        body = json.loads(error.read() or b"{}")
    except (ValueError, OSError):
        body = {}
    detail = body.get("error") or {}
    if detail.get("code") != MISSING_REGISTRATION:
        return None
    found = _NAMESPACE.search(str(detail.get("message") or "")) or _URL_NAMESPACE.search(url)
    return ProviderNotRegistered(found.group(1) if found else "(see the URL)", url)


def with_retries(call: Callable[[], Answer],
                 sleep: Callable[[float], None] | None = None) -> Answer:
    """call(), retried with back-off (2, 4, 8 s) on network errors, throttling (429) and 5xx
    answers; any other 4xx (no rights, wrong tenant, bad region) is final and raised at once."""
    for attempt in range(ATTEMPTS):
        try:
            return call()
        except urllib.error.HTTPError as error:
            if not (error.code == TOO_MANY_REQUESTS or error.code >= 500) or attempt == ATTEMPTS - 1:
                raise
        except urllib.error.URLError:
            if attempt == ATTEMPTS - 1:
                raise
        (sleep or time.sleep)(2.0 * 2 ** attempt)
    raise AssertionError("unreachable")
