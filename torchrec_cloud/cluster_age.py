"""When the cluster was made: what both `status` (the standing cost since then) and `cost` (the
spend since the stack's creation) need, in a module of its own so neither imports the other."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime

from torchrec_cloud import pools as pool_view
from workloads.why import ApiError, NotFound, Reader

DEFAULT_NAMESPACE_PATH = "/api/v1/namespaces/default"  # its age is the cluster's


def cluster_created(read: Reader) -> datetime | None:
    """When the cluster was made: the `default` namespace's creationTimestamp (the API server
    creates it at bootstrap, and it cannot be deleted). None when it cannot be read."""
    try:
        namespace = json.loads(read(DEFAULT_NAMESPACE_PATH))
    except (NotFound, ApiError, OSError, ValueError, subprocess.TimeoutExpired):
        return None
    return pool_view.parse_time(((namespace or {}).get("metadata") or {}).get("creationTimestamp"))
