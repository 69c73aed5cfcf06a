"""GPU utilisation per node for `status`, read from the cluster's DCGM exporter through the API
server's pod proxy, with the user's own kubeconfig: nothing to port-forward, no Prometheus.

Why the pod proxy and not the Service's: a Service proxy hands each request to one endpoint,
so it shows one node per read; the per-node figure needs each exporter pod
(/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/metrics, core/v1 "connect GET requests to
proxy of Pod", the `pods/proxy` subresource).

The exporters are read at the same time, each request bounded (PROXY_TIMEOUT_S): a node whose
exporter hangs (a node going away) costs `status` one bound, not one per node, and is named.

Only exporter pods whose Ready condition is True are read (the chart's readinessProbe is its
/health). `pulumi up` does not wait for the exporter, so `status` is where a broken one shows:
a pod that is not ready is named with the kubelet's words (core/v1 ContainerStatus:
state.waiting.reason, restartCount, lastState.terminated.message); "no GPU node is up yet" is
said only when there is no exporter pod at all.

A node is named by the exporter's own label: it writes NODE_NAME (the chart and the GPU Operator
set it from spec.nodeName) as `Hostname` (dcgm-exporter 4.5.3-4.8.2,
internal/pkg/rendermetrics/render_metrics.go), renamed `hostname` after that release
(NVIDIA/dcgm-exporter #655); without either, the pod's node.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
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
PROXY_TIMEOUT_S = 10  # per request (kubectl --request-timeout): an exporter answers in well under 1 s
READERS = 8  # exporters read at once: kubectl processes, light on a laptop
MESSAGE_CHARS = 120  # a termination message as status prints it: one line, not a log


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


def _forbidden(error: Exception) -> bool:
    """The API server's 403, as kubectl reports it: `Error from server (Forbidden)`."""
    return "(Forbidden)" in str(error)


def _missing(permission: str, exporter: Exporter) -> str:
    return (f"your Kubernetes user may not {permission} in {exporter.namespace}: `status` needs "
            f"`list pods` and `get pods/proxy` there (a Role on resources pods and pods/proxy)")


def _ready(pod: dict) -> bool:
    """The pod's Ready condition (core/v1 PodCondition) on a node: its exporter can answer."""
    status = pod.get("status") or {}
    conditions = status.get("conditions") or []
    return bool((pod.get("spec") or {}).get("nodeName")) and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _short(text: str) -> str:
    """A container's termination message on one line: its last line (a log tail ends with the
    error, FallbackToLogsOnError), cut to MESSAGE_CHARS."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= MESSAGE_CHARS else last[:MESSAGE_CHARS - 3] + "..."


def _container(c: dict, init: bool = False) -> str | None:
    """One container's state (core/v1 ContainerStatus): why it waits, its restarts, how it last
    ended. None for an init container that completed."""
    state, last = c.get("state") or {}, (c.get("lastState") or {}).get("terminated") or {}
    if init and (state.get("terminated") or {}).get("exitCode") == 0:
        return None
    parts = []
    if (state.get("waiting") or {}).get("reason"):
        parts.append(state["waiting"]["reason"])
    elif state.get("running"):
        parts.append("running, not ready")
    elif state.get("terminated"):
        ended = state["terminated"]
        parts.append(f"{ended.get('reason') or 'terminated'} (exit code {ended.get('exitCode')})")
    if c.get("restartCount"):
        parts.append(f"{c['restartCount']} restarts")
    if last:
        said = _short(str(last.get("message") or ""))
        how = f"{last.get('reason') or 'terminated'} (exit code {last.get('exitCode')})"
        parts.append(f"last exit: {said or how}")
    name = f"{'init container ' if init else ''}{c.get('name', '?')}"
    return f"{name} {', '.join(parts) or 'not ready'}"


def _why_not_ready(pod: dict) -> str:
    """An exporter pod that is not ready: its node, and each container's state; a pod with no
    container state yet says why (not scheduled: the PodScheduled condition's message)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    states = [*(_container(c, init=True) for c in status.get("initContainerStatuses") or []),
              *(_container(c) for c in status.get("containerStatuses") or [])]
    said = [x for x in states if x]
    if not said:
        scheduled = next((c for c in status.get("conditions") or []
                          if c.get("type") == "PodScheduled" and c.get("status") == "False"), None)
        said = [_short(f"{scheduled.get('reason', '')}: {scheduled.get('message', '')}")
                if scheduled else status.get("phase") or "no status yet"]
    where = f"on {node}" if node else "not on a node"
    return f"{meta.get('name', '?')} ({where}): {' / '.join(said)}"


def _bounded(read: Reader) -> Reader:
    """The reader with each request bounded, where it can be (workloads/why.py Kubectl)."""
    bounded = getattr(read, "bounded", None)
    return bounded(PROXY_TIMEOUT_S) if callable(bounded) else read


def read_gpu_utilisation(read: Reader, cloud: str) -> GpuUtilisation:
    """The mean DCGM_FI_DEV_GPU_UTIL of each GPU node whose exporter answers.

    A failed read is a reason, never an exception: `status` goes on without this line."""
    if cloud in NOT_PROXIED:
        return GpuUtilisation(None, NOT_PROXIED[cloud])
    exporter = EXPORTERS.get(cloud)
    if exporter is None:
        return GpuUtilisation(None, f"no DCGM exporter known on cloud {cloud!r}")
    read = _bounded(read)
    try:
        pods = _pods(read, exporter)
    except Exception as error:  # the Reader's own errors (kubectl, 403, 404) are all reasons
        if _forbidden(error):
            return GpuUtilisation(None, _missing("list pods", exporter))
        return GpuUtilisation(None, f"cannot list the DCGM exporter pods in "
                                    f"{exporter.namespace}: {_said(error)}")
    if not pods:
        return GpuUtilisation(None, f"no DCGM exporter pod in {exporter.namespace} "
                                    f"({exporter.pod_selector}): no GPU node is up yet")
    # Only a ready exporter answers its proxy path. `pulumi up` does not wait for the exporter,
    # so this is where a broken one shows: each pod that is not ready, in the kubelet's words.
    not_ready = [_why_not_ready(p) for p in pods if not _ready(p)]
    pods = sorted((p for p in pods if _ready(p)), key=lambda p: p["spec"]["nodeName"])
    if not pods:
        return GpuUtilisation(None, "no DCGM exporter pod is ready: " + "; ".join(not_ready))

    def metrics(pod: dict) -> str | Exception:
        path = (f"/api/v1/namespaces/{exporter.namespace}/pods/{pod['metadata']['name']}:"
                f"{exporter.port}/proxy/metrics")
        try:
            return read(path)
        except Exception as error:  # one node's exporter may be starting, hanging or gone
            return error

    with ThreadPoolExecutor(max_workers=min(READERS, len(pods))) as pool:
        answers = list(pool.map(metrics, pods))
    per_node: dict[str, float] = {}
    failures: list[str] = list(not_ready)
    forbidden = False
    for pod, answer in zip(pods, answers):
        node = pod["spec"]["nodeName"]
        try:
            if isinstance(answer, Exception):
                raise answer
            means = _node_means(answer, node)
        except Exception as error:  # an unreadable body too
            forbidden = forbidden or _forbidden(error)
            failures.append(f"{node}: {_said(error)}")
            continue
        if not means:
            failures.append(f"{node}: no {UTILISATION} sample")
        per_node.update(means)
    if forbidden and not per_node:  # every node refused alike: one line says what to grant
        return GpuUtilisation(None, _missing("get pods/proxy", exporter))
    if forbidden:
        failures.append(_missing("get pods/proxy", exporter))
    return GpuUtilisation(per_node or None, "; ".join(failures))
