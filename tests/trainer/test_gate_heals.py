"""The fabric gate judged against published nccl-tests figures per fabric, its GPU health check,
and healing: a bad node is named, tainted through the Kubernetes API (a fake API server here,
never the network) and the gang restarts elsewhere without using the retry budget."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import pytest
import torch

from infra.catalog.cloud import Cloud
from infra.catalog.gate_floors import GIB, PUBLISHED_BUSBW, all_to_all_bound_gbps
from infra.catalog.machines import MACHINES, Interconnect, machine
from tests.gang import job_failure, jobset_action
from tests.trainer.helpers import REPO, TINY, env
from trainer.exit_codes import FABRIC_ERROR, NODE_LEFT_OUT, RESUME
from trainer.fabric_gate import (TEST_DELAY_ENV, TEST_SICK_GPU_ENV, TEST_SICK_GPU_PROBLEM,
                                 RankFigures, decide,
                                 parse_transport, seconds_for_busbw)
from trainer.gpu_health import GpuReadings, judge_gpu
from trainer.launch import status_of_worker_failures
from trainer.node_taint import API_ENV, TAINT_KEY, KubeApi, leave_out

LOGS = Path(__file__).parent / "data" / "nccl_logs"
GPUS = 8


def _published(name: str) -> float:
    return next(p.busbw_gbps for p in PUBLISHED_BUSBW if p.machine == name)


def _run(log: str, all_reduce: float, all_to_all: float, size: int, nodes: int = 2
         ) -> list[RankFigures]:
    """Every rank of an N x 8 gang as the gate gathers them, from bus bandwidths at `size`
    and a real NCCL log of the fabric (the transport each rank's NCCL reports)."""
    text = (LOGS / log).read_text().partition("\n")[2]
    n = nodes * GPUS
    return [RankFigures(rank=r, host=f"pod-{r // GPUS}", node=f"node-{r // GPUS}",
                        transport=parse_transport(text), compute_s=0.02,
                        all_reduce_s=[seconds_for_busbw(size, all_reduce, n, 2.0)],
                        all_to_all_s=[seconds_for_busbw(size, all_to_all, n, 1.0)])
            for r in range(n)]


# (fabric log, machine, healthy all_reduce busbw at the floor's size and where it comes from).
# all_to_all: nothing published for these machines (infra/catalog/gate_floors.py); a healthy run is taken
# as 80 % of what the network allows, a degraded one as a fallback to the node's 100 Gbit/s
# Ethernet (12.5 GB/s per node).
FABRICS = [
    ("efa_libfabric_nccl_1597.log", "p5.48xlarge", _published("p5.48xlarge")),  # published 2x8
    ("tcpxo_fastrak_plugin_source.log", "a3-megagpu-8g", _published("a3-megagpu-8g")),
    ("ib_sharp_ibext_nccl_1357.log", "Standard_ND96asr_v4", 186.0),  # just over Azure's 180
    ("tcpx_skypilot_readme.log", "a3-highgpu-8g", 70.0),  # none published: over the guess
]


@pytest.mark.parametrize(("log", "name", "healthy"), FABRICS, ids=[f[1] for f in FABRICS])
def test_published_healthy_runs_pass_and_degraded_ones_fail_on_each_fabric(log, name, healthy):
    m = next(x for x in MACHINES if x.name == name)
    floor = m.fabric_floor(2)
    good_a2a = all_to_all_bound_gbps(m, 2) * 0.8
    args = dict(mode="enforce", expected_transport=m.fabric_transport,
                floor_gbps=floor.all_reduce_gbps, all_to_all_floor_gbps=floor.all_to_all_gbps)
    ok = decide(_run(log, healthy, good_a2a, floor.size), [floor.size], **args)
    assert ok.passed, ok.line()
    # The same fabric at its 128 MiB figure is still climbing: judged at the plateau, a run
    # that only reaches there is degraded (A3 Mega 152 GB/s, p5 289 GB/s published at 128 MiB).
    slow = decide(_run(log, healthy * 0.45, good_a2a, floor.size), [floor.size], **args)
    assert not slow.passed and slow.bad_nodes == []  # the fabric's fault: no node to blame
    assert f"all_reduce busbw {healthy * 0.45:.2f} GB/s is under the floor" in slow.line()
    # On 2 nodes NCCL's tree all_reduce can look healthy while all_to_all (DLRM's embeddings)
    # crawls over the node's Ethernet: all_to_all is enforced on its own.
    ethernet = all_to_all_bound_gbps(m, 2) * 12.5 / (m.network_gbps / 8)
    crawl = decide(_run(log, healthy, ethernet, floor.size), [floor.size], **args)
    assert not crawl.passed and "all_to_all busbw" in crawl.problems[-1], crawl.line()


def test_every_fabric_machine_has_a_floor_with_its_source_for_2_and_more_nodes():
    for m in MACHINES:
        if not (m.has_gpus and m.interconnect != Interconnect.NONE):
            continue
        two, four = m.fabric_floor(2), m.fabric_floor(4)
        assert two.all_reduce_source and two.all_to_all_source
        assert two.size >= GIB and four.size >= GIB  # judged at the plateau, never 128 MiB
        assert two.all_to_all_gbps > four.all_to_all_gbps > 0  # fewer nodes, less over the net
    # Published figures are used where they exist, with their source ...
    assert machine(Cloud.AWS, "p5.48xlarge").fabric_floor(2).all_reduce_gbps == pytest.approx(
        479.28 * 0.75, abs=0.1)
    assert machine(Cloud.AZURE, "Standard_ND96asr_v4").fabric_floor(2).all_reduce_gbps == 180.0
    assert "a3-megagpu-8g" in machine(Cloud.GCP, "a3-megagpu-8g").fabric_floor(2).all_reduce_source
    # ... and a 2-node figure (tree all_reduce beats the network) is not used for 4 nodes.
    four = machine(Cloud.AWS, "p5.48xlarge").fabric_floor(4)
    assert not four.published and four.all_reduce_source.startswith("CONSERVATIVE")


def test_gpu_health_names_ecc_remap_and_throttling_and_its_node_is_named():
    assert judge_gpu(GpuReadings(0, uncorrected_ecc=0, retired_pages_pending=False,
                                 row_remap_pending=False, row_remap_failed=False,
                                 clock_event_reasons=0x1)) == []  # GPU idle: not a problem
    sick = judge_gpu(GpuReadings(3, uncorrected_ecc=2, row_remap_failed=True,
                                 clock_event_reasons=0x08 | 0x40))
    assert sick == ["GPU 3: 2 uncorrected ECC errors", "GPU 3: row remapping failed (no spare rows)",
                    "GPU 3: throttled (HW slowdown, HW thermal slowdown)"]
    figures = _run("ib_sharp_ibext_nccl_1357.log", 200, 50, 8 * GIB)
    figures[9].gpu_problems = sick[:1]
    figures[12].matmul_tflops = 40.0  # throttled to a crawl
    result = decide(figures, [8 * GIB], "enforce", "ib", 180.0, matmul_floor_tflops=124.8)
    assert not result.passed and result.bad_nodes == ["node-1"]
    assert "rank 12 (node-1): GPU matmul 40 TFLOPS is under the floor 124.8 TFLOPS" in result.problems


# --- the Kubernetes API seam against a fake API server ---

class FakeApi:
    """A tiny API server: nodes by name, every request recorded (method, path, type, body)."""

    def __init__(self, nodes: dict[str, dict[str, Any]]) -> None:
        self.nodes, self.requests = nodes, []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                api.requests.append(("GET", self.path, None, None))
                if self.path == "/api/v1/nodes":
                    return self._reply(200, {"items": list(api.nodes.values())})
                name = self.path.rsplit("/", 1)[-1]
                self._reply(200, api.nodes[name]) if name in api.nodes else self._reply(404, {})

            def do_PATCH(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.requests.append(("PATCH", self.path, self.headers["Content-Type"], body))
                node = api.nodes[self.path.rsplit("/", 1)[-1]]
                node["spec"]["taints"] = body["spec"]["taints"]
                self._reply(200, node)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _node(name: str, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "4711"},
            "spec": {"taints": taints or [{"key": "nvidia.com/gpu", "value": "present",
                                           "effect": "NoSchedule"}]}}


@pytest.fixture
def fake_api() -> Iterator[FakeApi]:
    api = FakeApi({"gpu-a": _node("gpu-a"), "gpu-b": _node("gpu-b")})
    yield api
    api.close()


EXPECTED_PATCH = ("PATCH", "/api/v1/nodes/gpu-a", "application/merge-patch+json", {
    "metadata": {"resourceVersion": "4711"},
    "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                        {"key": TAINT_KEY, "value": "fabric-gate", "effect": "NoSchedule"}]}})


def test_the_left_out_taint_is_one_every_cluster_autoscaler_keeps_out_of_its_templates():
    """Cluster Autoscaler builds a pool's node template from one of its nodes; a custom taint
    copied from a left-out node would make it refuse every scale-up for the gang. Taints with
    the status-taint prefix are filtered out there (cluster-autoscaler FAQ.md "Status taints"),
    with no flag, so GKE's managed autoscaler honours it too (issue 32, item 3)."""
    prefix, _, name = TAINT_KEY.partition("/")
    assert prefix == "status-taint.cluster-autoscaler.kubernetes.io"
    assert re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", name)  # a taint key name


def test_leaving_out_adds_only_the_taint_and_stops_at_the_bound(fake_api):
    api = KubeApi(fake_api.url)
    assert leave_out(api, ["gpu-a"], most=1) == (["gpu-a"], None)
    assert fake_api.requests == [("GET", "/api/v1/nodes", None, None),
                                 ("GET", "/api/v1/nodes/gpu-a", None, None), EXPECTED_PATCH]
    fake_api.requests.clear()
    tainted, refused = leave_out(api, ["gpu-b"], most=1)  # gpu-a already counts
    assert tainted == [] and "more than --fabric_max_nodes_left_out=1" in refused
    assert [r[0] for r in fake_api.requests] == ["GET"]  # nothing written


def test_the_gate_judges_an_injected_compute_time_never_the_clock(monkeypatch):
    """The slow-rank tests judge a delay they inject, the same on a quiet machine and a busy
    one: with the test hook set, no rank's compute time is read off the clock."""
    from trainer.fabric_gate import TEST_COMPUTE_SECONDS, TEST_DELAY_SECONDS, time_compute

    def no_clock() -> float:
        raise AssertionError("the clock was read")

    monkeypatch.setattr("trainer.gate.measure.time.perf_counter", no_clock)
    monkeypatch.setenv(TEST_DELAY_ENV, "1")
    cpu = torch.device("cpu")
    assert time_compute(cpu, 0) == TEST_COMPUTE_SECONDS
    assert time_compute(cpu, 1) == TEST_COMPUTE_SECONDS + TEST_DELAY_SECONDS
    monkeypatch.setenv(TEST_DELAY_ENV, "none")
    assert time_compute(cpu, 0) == time_compute(cpu, 1) == TEST_COMPUTE_SECONDS
    figures = _run("ib_sharp_ibext_nccl_1357.log", 200, 50, 8 * GIB)
    for f in figures:
        f.compute_s = time_compute(cpu, f.rank)
    assert decide(figures, [8 * GIB], "enforce", "ib", 180.0).passed


def test_a_slow_rank_s_node_is_tainted_and_every_rank_exits_node_left_out(fake_api):
    """2 gloo ranks through the container's launcher; rank 1 is slow (the test-delay hook)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "trainer.launch", "--nnodes=1", "--nproc_per_node=2",
           "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=heal",
           "-m", "trainer", *TINY, "--fabric_gate", "enforce", "--fabric_max_nodes_left_out", "1"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env={
        **env(), TEST_DELAY_ENV: "1", API_ENV: fake_api.url, "NODE_NAME": "gpu-a"})
    assert proc.returncode == NODE_LEFT_OUT, proc.stderr[-3000:]
    assert fake_api.requests[-1] == EXPECTED_PATCH
    assert sum(r[0] == "PATCH" for r in fake_api.requests) == 1  # rank 0 alone writes
    line = next(l for l in proc.stderr.splitlines() if "fabric gate FAILED" in l)
    assert "left out node gpu-a (exit 200" in line and "rank 1 (gpu-a):" in line


def _report_gate(api_url: str | None, *args: str) -> subprocess.CompletedProcess:
    """2 gloo ranks in report mode (a stack without a fabric), rank 1's GPU failing its health
    check (the test hook), compute times injected alike."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "trainer.launch", "--nnodes=1", "--nproc_per_node=2",
           "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=health",
           "-m", "trainer", *TINY, "--fabric_gate", "report", *args]
    extra = {TEST_SICK_GPU_ENV: "1", TEST_DELAY_ENV: "none", "NODE_NAME": "gpu-a"}
    if api_url:
        extra[API_ENV] = api_url
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**env(), **extra})


def test_a_bad_gpu_s_node_is_left_out_on_a_stack_without_a_fabric(fake_api):
    """Report mode (GKE A2, fabric false) reports the fabric but acts on GPU health: the sick
    GPU's node is tainted and every rank exits NODE_LEFT_OUT (issue 32: only reported before)."""
    proc = _report_gate(fake_api.url, "--fabric_max_nodes_left_out", "2")
    assert proc.returncode == NODE_LEFT_OUT, proc.stderr[-3000:]
    assert fake_api.requests[-1] == EXPECTED_PATCH
    line = next(l for l in proc.stderr.splitlines() if "fabric gate FAILED" in l)
    assert "left out node gpu-a (exit 200" in line
    assert f"rank 1 (gpu-a): {TEST_SICK_GPU_PROBLEM}" in line


def test_report_mode_trains_on_where_it_cannot_leave_the_bad_gpu_out(tmp_path):
    """No API access (a workstation, a pod without the gate's token): the bad GPU is reported
    and training goes on, as report mode promises."""
    proc = _report_gate(None, "--max_steps", "1", "--eval_batches", "0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(l for l in (proc.stdout + proc.stderr).splitlines() if "fabric gate " in l)
    assert "WARNING (report only, not enforced)" in line
    assert TEST_SICK_GPU_PROBLEM in line and "not left out: no Kubernetes API access" in line


def _two_node_gang(api_url: str, nodes: tuple[str, str], *args: str
                   ) -> list[subprocess.CompletedProcess]:
    """A 2-node gang as the JobSet runs it: two launchers (one rank each, c10d rendezvous),
    each told its node by NODE_NAME (spec.nodeName), the fake API server for both. Every rank
    reports the same injected compute time (TEST_DELAY_ENV "none"): a busy test machine's
    scheduler can make one CPU rank's matmul 1.5x slower than its peer's, which the gate would
    rightly name (a node's problem), so nothing here depends on how fast the ranks ran."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "trainer.launch", "--nnodes=2", "--nproc_per_node=1",
         "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
         "--rdzv_id=gang", "-m", "trainer", *TINY, "--fabric_gate", "enforce", *args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**env(), API_ENV: api_url, "NODE_NAME": node, TEST_DELAY_ENV: "none"})
        for node in nodes]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def _gang_under_the_floor(api: FakeApi, nodes: tuple[str, str], *args: str
                          ) -> list[subprocess.CompletedProcess]:
    api.requests.clear()
    gang = _two_node_gang(api.url, nodes, "--fabric_floor_gbps", "100000", *args)
    assert not any("slower than the others' median" in p.stderr for p in gang)
    return gang


def test_bandwidth_under_the_floor_leaves_out_the_whole_2_node_gang_within_the_bound(fake_api):
    """A degraded link lowers every rank's bus bandwidth alike: no node is named, so the gate
    leaves out both nodes (the gang restarts on fresh ones, not counted); once that would
    make more than --fabric_max_nodes_left_out nodes tainted (taints already on nodes count),
    it fails the job for good instead."""
    fake_api.nodes.update({"gpu-c": _node("gpu-c"), "gpu-d": _node("gpu-d")})
    bound = ("--fabric_max_nodes_left_out", "2")
    gang = _gang_under_the_floor(fake_api, ("gpu-a", "gpu-b"), *bound)
    assert [p.returncode for p in gang] == [NODE_LEFT_OUT] * 2, gang[0].stderr[-3000:]
    patched = sorted(r[1] for r in fake_api.requests if r[0] == "PATCH")
    assert patched == ["/api/v1/nodes/gpu-a", "/api/v1/nodes/gpu-b"]  # rank 0 taints both
    assert [n for n, node in fake_api.nodes.items()
            if any(t["key"] == TAINT_KEY for t in node["spec"]["taints"])] == ["gpu-a", "gpu-b"]
    for pod in gang:  # each pod's log says why it stopped
        line = next(l for l in pod.stderr.splitlines() if "fabric gate FAILED" in l)
        assert "left out nodes gpu-a, gpu-b (exit 200" in line
        assert "all_reduce busbw" in line and "under the floor 100000 GB/s" in line

    # The restarted gang lands on fresh nodes (the taints keep it off the first two) and the
    # fabric is still slow: 2 more would make 4 left out, over the bound: FABRIC_ERROR.
    again = _gang_under_the_floor(fake_api, ("gpu-c", "gpu-d"), *bound)
    assert [p.returncode for p in again] == [FABRIC_ERROR] * 2, again[0].stderr[-3000:]
    assert not any(r[0] == "PATCH" for r in fake_api.requests)
    line = next(l for l in again[0].stderr.splitlines() if "fabric gate FAILED" in l)
    assert "FAILED (exit 3, no retry)" in line
    assert ("not left out: leaving out gpu-c, gpu-d would make 4 nodes left out (already: "
            "gpu-a, gpu-b), more than --fabric_max_nodes_left_out=2") in line


def test_a_node_named_by_its_own_problem_is_the_only_one_left_out():
    from trainer.fabric_gate import nodes_to_leave_out

    figures = _run("ib_sharp_ibext_nccl_1357.log", 200, 50, 8 * GIB)
    figures[9].gpu_problems = ["GPU 1: 2 uncorrected ECC errors"]
    sick = decide(figures, [8 * GIB], "enforce", "ib", 180.0)
    assert nodes_to_leave_out(sick) == ["node-1"]
    slow = decide(_run("ib_sharp_ibext_nccl_1357.log", 90, 50, 8 * GIB), [8 * GIB], "enforce",
                  "ib", 180.0)
    assert slow.bad_nodes == [] and nodes_to_leave_out(slow) == ["node-0", "node-1"]


# --- the job's rules: restart elsewhere, not counted ---

def test_a_node_left_out_restarts_the_gang_without_using_the_retry_budget():
    from infra.settings.model.job import Job
    from workloads.jobset import failure_policy, pod_failure_policy

    assert status_of_worker_failures({NODE_LEFT_OUT, -15}) == NODE_LEFT_OUT
    assert status_of_worker_failures({RESUME}) == RESUME
    pod = SimpleNamespace(name="dlrm-node-0-1-x7k2p", conditions=set(),
                          exit_code=lambda: NODE_LEFT_OUT)
    reason, message = job_failure(pod_failure_policy("trainer"), 0, 0, pod, "trainer", "torchrec")
    policy = failure_policy(Job().backoff_limit)
    assert jobset_action(policy, reason, message) == "RestartJobSetAndIgnoreMaxRestarts"
    named = next(r["name"] for r in policy["rules"]  # its own rule: JobSet's events name it
                 if r.get("onJobFailureMessagePatterns")
                 and re.search(r["onJobFailureMessagePatterns"][0], message))
    assert named == "NodeLeftOutByGate"
    assert 128 <= NODE_LEFT_OUT <= 255 and NODE_LEFT_OUT > 128 + 64  # retryable, not a signal
