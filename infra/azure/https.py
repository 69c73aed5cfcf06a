"""Retries for the program's own HTTPS calls to Azure (the ARM version listing, the ACR token
exchange): one policy, so both treat a flaky answer and a final refusal alike."""

from __future__ import annotations

import time
import urllib.error
from collections.abc import Callable
from typing import TypeVar

ATTEMPTS = 4  # a new registry's DNS name, or ARM's occasional 5xx, can fail the first try
TOO_MANY_REQUESTS = 429  # ARM's throttling: retried like a 5xx (learn.microsoft.com/azure/
# azure-resource-manager/management/request-limits-and-throttling)
Answer = TypeVar("Answer")


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
