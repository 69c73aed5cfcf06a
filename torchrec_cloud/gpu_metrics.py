"""GPU utilisation per node for `status`, read from the cluster's DCGM exporter through the API
server's pod proxy, with the user's own kubeconfig: nothing to port-forward, no Prometheus.

Why the pod proxy and not the Service's: a Service proxy hands each request to one endpoint,
so it shows one node per read; the per-node figure needs each exporter pod
(/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/metrics, core/v1 "connect GET requests to
proxy of Pod", the `pods/proxy` subresource).

A node is named by the exporter's own label: it writes NODE_NAME (the chart and the GPU Operator
set it from spec.nodeName) as `Hostname` (dcgm-exporter 4.5.3-4.8.2,
internal/pkg/rendermetrics/render_metrics.go), renamed `hostname` after that release
(NVIDIA/dcgm-exporter #655); without either, the pod's node.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Iterator
from urllib.parse import quote

from infra.dcgm import EXPORTERS, NOT_PROXIED, Exporter

Reader = Callable[[str], str]  # an API path -> the response body (workloads/why.py Kubectl)

UTILISATION = "DCGM_FI_DEV_GPU_UTIL"  # percent of the sample period a kernel ran
NODE_LABELS = ("Hostname", "hostname")
# DCGM writes its "blank" sentinels (e.g. 9223372036854775794, the README's MEMORY_TEMP sample)
# where a GPU has no value; a percentage outside 0-100 is one of those, not a reading.
PERCENT = (0.0, 100.0)


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class GpuUtilisation:
    """What `status` prints: the mean per node, or why there is none."""

    per_node: dict[str, float] | None
    reason: str = ""  # why per_node is None, or which nodes could not be read


# --- Prometheus text format (exposition format 0.0.4), the part dcgm-exporter writes --------
_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+"
                     r"(?P<value>\S+)(?:\s+-?\d+)?\s*$")
# A label name as dcgm-exporter may write it (its UUID label's name is configurable, and its
# own tests use `test-uuid`), then a quoted value with \\, \" and \n escapes.
_LABEL = re.compile(r'\s*(?P<key>[^=,{}\s"]+)\s*=\s*"(?P<value>(?:[^"\\]|\\.)*)"\s*(?:,|$)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def _labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    position = 0
    while position < len(text.rstrip()):
        match = _LABEL.match(text, position)
        if match is None:
            raise ValueError(f"unreadable labels at {text[position:]!r}")
        labels[match["key"]] = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m[0]], match["value"])
        position = match.end()
    return labels


def parse(text: str) -> Iterator[Sample]:
    """Samples of a Prometheus text exposition; comments (# HELP, # TYPE) and blanks skipped."""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise ValueError(f"line {number} is not a Prometheus sample: {line!r}")
        yield Sample(match["name"], _labels(match["labels"] or ""), float(match["value"]))


# --- the cluster -----------------------------------------------------------------------------
def _pods(read: Reader, exporter: Exporter) -> list[dict]:
    path = (f"/api/v1/namespaces/{exporter.namespace}/pods"
            f"?labelSelector={quote(exporter.pod_selector)}")
    return json.loads(read(path)).get("items") or []


def _node_means(text: str, pod_node: str) -> dict[str, float]:
    by_node: dict[str, list[float]] = {}
    for sample in parse(text):
        if sample.name != UTILISATION or not PERCENT[0] <= sample.value <= PERCENT[1]:
            continue
        node = next((sample.labels[k] for k in NODE_LABELS if sample.labels.get(k)), pod_node)
        by_node.setdefault(node, []).append(sample.value)
    return {node: sum(values) / len(values) for node, values in by_node.items()}


def _said(error: Exception) -> str:
    """kubectl's own words (ApiError), or the kind of failure and its path (NotFound)."""
    return str(error) if " " in str(error) else f"{type(error).__name__} {error}"


def read_gpu_utilisation(read: Reader, cloud: str) -> GpuUtilisation:
    """The mean DCGM_FI_DEV_GPU_UTIL of each GPU node whose exporter answers.

    A failed read is a reason, never an exception: `status` goes on without this line."""
    if cloud in NOT_PROXIED:
        return GpuUtilisation(None, NOT_PROXIED[cloud])
    exporter = EXPORTERS.get(cloud)
    if exporter is None:
        return GpuUtilisation(None, f"no DCGM exporter known on cloud {cloud!r}")
    try:
        pods = _pods(read, exporter)
    except Exception as error:  # the Reader's own errors (kubectl, 403, 404) are all reasons
        return GpuUtilisation(None, f"cannot list the DCGM exporter pods in "
                                    f"{exporter.namespace}: {_said(error)}")
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
               and (p.get("spec") or {}).get("nodeName")]
    if not running:
        return GpuUtilisation(None, f"no DCGM exporter pod running in {exporter.namespace} "
                                    f"({exporter.pod_selector}): no GPU node is up yet")
    per_node: dict[str, float] = {}
    failures: list[str] = []
    for pod in sorted(running, key=lambda p: p["spec"]["nodeName"]):
        name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
        path = (f"/api/v1/namespaces/{exporter.namespace}/pods/{name}:{exporter.port}"
                f"/proxy/metrics")
        try:
            means = _node_means(read(path), node)
        except Exception as error:  # one node's exporter may be starting or gone
            failures.append(f"{node}: {_said(error)}")
            continue
        if not means:
            failures.append(f"{node}: no {UTILISATION} sample")
        per_node.update(means)
    reason = "; ".join(failures)
    return GpuUtilisation(per_node or None, reason)


def gpu_utilisation(read: Reader, cloud: str) -> dict[str, float] | None:
    """Mean GPU utilisation (percent) per node name, or None where the metrics are not
    reachable from here (read_gpu_utilisation(...).reason says why)."""
    return read_gpu_utilisation(read, cloud).per_node
