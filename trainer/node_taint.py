"""Leave a bad node out: taint it NoSchedule (TAINT_KEY) through the Kubernetes API.

The fabric gate (trainer/fabric_gate.py) calls this when it has named a slow or broken node; the
job's pods do not tolerate the taint, so the restarted gang is scheduled elsewhere (and the
cluster autoscaler brings a fresh node for it). The pod's service account may only get, list and
patch nodes (workloads/node_gate.py: ClusterRole), and a ValidatingAdmissionPolicy lets it change
nothing on a node but this one taint. Plain HTTP from the standard library: no client package.

The one seam is `KubeApi`: in a pod it talks to the API server with the projected token; tests
point `TORCHREC_CLOUD_KUBE_API` at a fake server and read the exact requests.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

# A Cluster Autoscaler "status taint" by its prefix, on every cloud without a flag: the
# autoscaler treats the node as ready but filters it out of scale-up and leaves the taint out
# of the pool's node template (kubernetes/autoscaler cluster-autoscaler/FAQ.md "Status taints":
# "all taints with the prefix status-taint.cluster-autoscaler.kubernetes.io/"), so a pool whose
# template came from a left-out node still scales up for the gang (GKE's managed autoscaler
# takes no --status-taint flag; the prefix needs none. That GKE's closed autoscaler follows
# upstream here is inferred from upstream, not documented by Google: if it did not, a pool at
# maxNodes with a left-out node grows again once that empty node is scaled down, ~10 minutes).
TAINT_KEY = "status-taint.cluster-autoscaler.kubernetes.io/torchrec-cloud-unhealthy"
# The key releases before 2026-11 used: not a status taint, so the autoscaler copies it into the
# pool's template and refuses to scale up for the gang. Nodes made then may still carry it; the
# gate never writes it, `why`/`status` name it with the command that removes it.
LEGACY_TAINT_KEYS = ("torchrec-cloud/unhealthy",)
TAINT_VALUE = "fabric-gate"  # who left it out; a label value (63 chars, alnum - _ .)
TAINT = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": "NoSchedule"}
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # the pod's projected volume
NODE_NAME_ENV = "NODE_NAME"  # the pod's spec.nodeName, from the downward API (workloads/pod.py)
API_ENV = "TORCHREC_CLOUD_KUBE_API"  # test seam: a plain-HTTP API base URL, no token
MERGE_PATCH = "application/merge-patch+json"


class KubeApiError(RuntimeError):
    """The API server refused or could not be reached."""


@dataclass
class KubeApi:
    """The few API calls the gate makes."""

    base_url: str
    token: Optional[str] = None
    ca_file: Optional[str] = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ,
                         token_dir: str = TOKEN_DIR) -> Optional["KubeApi"]:
        """The API of the cluster this pod runs in, or None where there is no token (outside
        a cluster, or a pod without the gate's token volume)."""
        if environ.get(API_ENV):
            return cls(environ[API_ENV].rstrip("/"))
        host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get(
            "KUBERNETES_SERVICE_PORT", "443")
        token_path = os.path.join(token_dir, "token")
        if not host or not os.path.exists(token_path):
            return None
        with open(token_path) as fh:
            token = fh.read().strip()
        host = f"[{host}]" if ":" in host else host  # IPv6 service address
        return cls(f"https://{host}:{port}", token, os.path.join(token_dir, "ca.crt"))

    def request(self, method: str, path: str, body: Optional[Dict[str, Any]] = None,
                content_type: str = "application/json") -> Dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        context = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None
        try:
            with urllib.request.urlopen(req, timeout=30, context=context) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")[:300]
            raise KubeApiError(f"{method} {path}: HTTP {err.code} {detail}") from err
        except OSError as err:
            raise KubeApiError(f"{method} {path}: {err}") from err


def taints_of(node: Dict[str, Any]) -> List[Dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def is_left_out(node: Dict[str, Any]) -> bool:
    return any(t.get("key") == TAINT_KEY for t in taints_of(node))


def taint_patch(node: Dict[str, Any]) -> Dict[str, Any]:
    """A JSON merge patch adding the taint to the node's own list (a merge patch replaces a
    list whole, so every other taint is written back unchanged). The resourceVersion makes it
    a compare-and-swap: a taint another controller added meanwhile is never overwritten (409)."""
    return {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
            "spec": {"taints": [*taints_of(node), dict(TAINT)]}}


def nodes_left_out(api: KubeApi) -> List[str]:
    """Nodes that carry the taint now (left out earlier and not yet removed or repaired)."""
    listed = api.request("GET", "/api/v1/nodes")
    return sorted(n["metadata"]["name"] for n in listed.get("items", []) if is_left_out(n))


def leave_out(api: KubeApi, nodes: Sequence[str], most: int) -> Tuple[List[str], Optional[str]]:
    """Taint `nodes`, unless that would leave more than `most` nodes out in all: then taint
    none and say why. Returns (nodes tainted now, refusal or None)."""
    already = nodes_left_out(api)
    wanted = sorted(set(nodes) - set(already))
    if len(set(already) | set(wanted)) > most:
        return [], (f"leaving out {', '.join(wanted)} would make {len(already) + len(wanted)} "
                    f"nodes left out (already: {', '.join(already) or 'none'}), more than "
                    f"--fabric_max_nodes_left_out={most}")
    for name in wanted:
        for attempt in range(2):  # a 409 means the node changed meanwhile: read it again once
            node = api.request("GET", f"/api/v1/nodes/{name}")
            if is_left_out(node):
                break
            try:
                api.request("PATCH", f"/api/v1/nodes/{name}", taint_patch(node), MERGE_PATCH)
                break
            except KubeApiError as err:
                if "HTTP 409" not in str(err) or attempt:
                    raise
    return wanted, None
