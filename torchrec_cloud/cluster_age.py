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
    return cluster_created_or_why(read)[0]


def cluster_created_or_why(read: Reader) -> tuple[datetime | None, str]:
    """cluster_created, and when it cannot be read, why: kubectl's own words (an unreachable
    API server is then explained by torchrec_cloud/kube.py unreachable)."""
    try:
        namespace = json.loads(read(DEFAULT_NAMESPACE_PATH))
    except FileNotFoundError:
        return None, "kubectl is not installed (https://kubernetes.io/docs/tasks/tools/)"
    except (NotFound, ApiError, OSError, ValueError, subprocess.TimeoutExpired) as error:
        return None, " ".join(str(error).split()) or type(error).__name__
    created = pool_view.parse_time(((namespace or {}).get("metadata") or {}).get("creationTimestamp"))
    return created, "" if created else "the default namespace has no creationTimestamp"
