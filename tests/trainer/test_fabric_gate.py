"""The fabric gate: it reads NCCL's transport from real logs, computes nccl-tests' bus bandwidth,
and on 2 CPU processes (gloo) it reports, or fails the job with FABRIC_ERROR and one line."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.helpers import REPO, TINY, env
from trainer.exit_codes import FABRIC_ERROR
from trainer.fabric_gate import (
    SLOW_RANK_FACTOR,
    TEST_DELAY_ENV,
    TEST_NCCL_LOG_ENV,
    RankFigures,
    busbw_gbps,
    decide,
    parse_rails,
    parse_transport,
    prepare_nccl_logging,
    read_nccl_log,
    transport_of_network,
)

LOGS = Path(__file__).parent / "data" / "nccl_logs"
SAMPLES = sorted(LOGS.glob("*.log"))


def _sample(path: Path) -> tuple[str, str, str]:
    """(source URL, expected transport, log text without the header comment)."""
    header, _, body = path.read_text().partition("\n")
    source = re.search(r"# source: (\S+)", header)
    expected = re.search(r"expect: (\w+)\s*$", header)
    assert source and expected, f"{path.name}: first line must be '# source: URL ...; expect: T'"
    return source.group(1), expected.group(1), body


# --- reading NCCL's choice ---

def test_every_transport_has_samples():
    expected = {_sample(p)[1] for p in SAMPLES}
    assert expected == {"socket", "efa", "ib", "tcpx", "tcpxo"}


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_parser_names_the_transport_of_every_public_log_sample(path):
    source, expected, body = _sample(path)
    assert source.startswith("https://")
    assert parse_transport(body) == expected


@pytest.mark.parametrize(("name", "provider", "transport"), [
    ("IB", None, "ib"), ("IBext_v8", None, "ib"), ("Socket", None, "socket"),
    ("AWS Libfabric", "efa", "efa"), ("Libfabric", None, "efa"),
    ("AWS Libfabric", "cxi", "libfabric-cxi"),  # Slingshot through aws-ofi-nccl is not EFA
    ("Libfabric", "tcp", "libfabric-tcp"),  # libfabric's TCP provider must not pass for EFA
    ("GPUDirectTCPX_v7", None, "tcpx"), ("FasTrak", None, "tcpxo"), ("FastSocket", None, "socket"),
])
def test_network_names_map_to_transports(name, provider, transport):
    assert transport_of_network(name, provider) == transport


def test_a_log_that_names_no_network_gives_no_transport():
    assert parse_transport("") is None
    assert parse_transport("host:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n") is None


def test_libfabric_on_a_non_efa_provider_is_not_efa():
    text = ("h:1:1 [0] NCCL INFO NET/OFI Selected provider is tcp, fabric is 10.0.0.0/24 "
            "(found 1 nics)\nh:1:1 [0] NCCL INFO Using network Libfabric\n")
    assert parse_transport(text) == "libfabric-tcp"


# --- NCCL logging set up before the communicator ---

def test_a_quiet_nccl_debug_is_raised_to_info_into_a_file():
    environ = {"NCCL_DEBUG": "WARN"}  # what the cluster contract sets
    pattern = prepare_nccl_logging(environ)
    assert environ["NCCL_DEBUG"] == "INFO" and environ["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert pattern == environ["NCCL_DEBUG_FILE"] and pattern.endswith("nccl.%h.%p.log")


def test_a_users_info_level_and_subsystems_are_kept_and_logged_to_a_file_the_gate_echoes():
    environ = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,GRAPH"}
    pattern = prepare_nccl_logging(environ)
    assert environ == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,GRAPH",
                       "NCCL_DEBUG_FILE": pattern}


def test_a_users_info_level_subsystems_and_file_are_kept():
    environ = {"NCCL_DEBUG": "info", "NCCL_DEBUG_SUBSYS": "ALL", "NCCL_DEBUG_FILE": "/x/n.%p"}
    assert prepare_nccl_logging(environ) == "/x/n.%p"
    assert environ == {"NCCL_DEBUG": "info", "NCCL_DEBUG_SUBSYS": "ALL", "NCCL_DEBUG_FILE": "/x/n.%p"}


def test_the_log_of_this_process_is_found_whatever_host_name_nccl_wrote(tmp_path):
    (tmp_path / "nccl.node-1.42.log").write_text("NCCL INFO Using network IB\n")
    (tmp_path / "nccl.node-1.43.log").write_text("another process\n")
    assert read_nccl_log(str(tmp_path / "nccl.%h.%p.log"), pid=42) == "NCCL INFO Using network IB\n"
    assert read_nccl_log(None) == ""


# --- figures and verdict ---

def test_bus_bandwidth_follows_nccl_tests():
    # nccl-tests all_reduce_perf, 16 ranks, 128 MiB in 3539.5 us: algbw 37.92, busbw 71.10 GB/s
    # (GoogleCloudPlatform/ai-infra-cluster-provisioning sample_workloads/nccltest/a3-mega).
    assert busbw_gbps(134217728, 3539.5e-6, 16, 2.0) == pytest.approx(71.10, abs=0.01)
    assert busbw_gbps(1 << 30, 1.0, 4, 1.0) == pytest.approx((1 << 30) / 1e9 * 3 / 4)  # all_to_all
    assert busbw_gbps(1 << 20, 1.0, 1, 2.0) is None  # a world of one moves nothing


def _figures(compute=(0.02, 0.02), transport="efa", seconds=0.01):
    return [RankFigures(rank=r, host=f"node-{r}", transport=transport, compute_s=c,
                        all_reduce_s=[seconds], all_to_all_s=[seconds]) for r, c in enumerate(compute)]


def test_enforce_fails_under_the_floor_with_one_line_naming_transport_bandwidth_and_floor():
    result = decide(_figures(), [128 << 20], "enforce", "efa", floor_gbps=50.0, seconds=1.25)
    assert not result.passed
    assert result.line() == (
        "fabric gate FAILED (exit 3, no retry): transport efa (expected efa); all_reduce busbw "
        "13.42 GB/s at 128 MiB (floor 50 GB/s); all_to_all busbw 6.71 GB/s (no floor); slowest "
        "rank 0 on "
        "node-0 1.00x the others' median compute time (limit 1.5x); 2 ranks, 1.2 s; problems: "
        "all_reduce busbw 13.42 GB/s is under the floor 50 GB/s")


def test_a_wrong_transport_on_any_rank_fails_enforce_and_only_warns_in_report():
    figures = _figures()
    figures[1].transport = "socket"
    enforced = decide(figures, [1 << 20], "enforce", "efa", 0.0)
    assert not enforced.passed and enforced.transport == "efa+socket"
    assert "rank 1 (node-1): transport socket is not efa" in enforced.problems
    assert enforced.bad_nodes == ["node-1"]  # the node is named, to be left out
    reported = decide(figures, [1 << 20], "report", "efa", 0.0)
    assert reported.passed and reported.line().startswith("fabric gate WARNING (report only")


def test_a_much_slower_rank_is_named_against_the_median_of_the_others():
    result = decide(_figures(compute=(0.02, 0.021, 0.02, 0.09)), [1 << 20], "enforce", "", 0.0)
    assert (result.slowest_rank, result.slowest_host) == (3, "node-3")
    assert result.slowest_ratio == pytest.approx(4.5) and result.slowest_ratio > SLOW_RANK_FACTOR
    assert not result.passed and result.bad_nodes == ["node-3"]
    # Jitter of a millisecond is not a slow GPU, even at 1.5x.
    assert decide(_figures(compute=(0.002, 0.0035)), [1 << 20], "enforce", "", 0.0).passed


@pytest.mark.parametrize(("stem", "rails"), [
    ("efa_libfabric_nccl_1597", 16),  # p5en: "Selected Provider is efa (found 16 nics)"
    ("ib_sharp_ibext_nccl_1357", 4), ("ib_roce_nccl_tests_185", 2),
    ("ib_with_socket_bootstrap_horovod_1523", 1),
    ("socket_loopback_nccl_1053", None), ("tcpx_skypilot_readme", None),
])
def test_the_fabric_nics_nccl_found_are_read_from_real_logs(stem, rails):
    assert parse_rails(_sample(LOGS / f"{stem}.log")[2]) == rails


def test_a_node_whose_nccl_found_fewer_fabric_nics_fails_enforce_by_name():
    """A dead HCA or EFA device: NCCL quietly runs on the rest at a fraction of the bandwidth."""
    figures = _figures(transport="ib")
    figures[0].rails, figures[1].rails = 8, 7
    result = decide(figures, [1 << 20], "enforce", "ib", 0.0, expected_rails=8)
    assert not result.passed
    assert "rank 1 (node-1): NCCL found 7 of the node's 8 fabric NICs" in result.problems
    assert "(expected ib, 7 fabric NICs of 8)" in result.line()
    figures[1].rails = 8
    assert decide(figures, [1 << 20], "enforce", "ib", 0.0, expected_rails=8).passed
    figures[1].rails = None  # a log without the line proves nothing either way: not a failure
    assert decide(figures, [1 << 20], "enforce", "ib", 0.0, expected_rails=8).passed


def test_a_world_of_one_reports_no_bandwidth_and_no_floor_applies():
    result = decide(_figures(compute=(0.02,)), [1 << 20], "enforce", "", floor_gbps=100.0)
    assert result.passed and result.all_reduce_busbw_gbps == [None]
    assert "n/a (one rank)" in result.line()


# --- the gate on 2 CPU processes, through the container's launcher (its exit = the pod's) ---

def _launch(args, extra_env=None, timeout=120) -> subprocess.CompletedProcess:
    """Every rank reports the same injected compute time unless extra_env names a slow one
    (TEST_DELAY_ENV): no verdict here depends on the test machine's jitter."""
    with socket.socket() as s:  # the launcher's own parser has no --standalone: a c10d store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "trainer.launch", "--nnodes=1", "--nproc_per_node=2",
           "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=gate",
           "-m", "trainer", *TINY, *args]
    return subprocess.run(cmd, cwd=REPO, env={**env(), TEST_DELAY_ENV: "none", **(extra_env or {})},
                          capture_output=True,
                          text=True, timeout=timeout)


def _gate_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if "fabric gate " in line]


def test_report_mode_prints_figures_records_them_and_trains(tmp_path):
    metrics = tmp_path / "m.jsonl"
    proc = _launch(["--max_steps", "2", "--metrics_file", str(metrics)])
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    lines = _gate_lines(proc)
    assert len(lines) == 1 and "transport gloo (expected any)" in lines[0], lines
    assert re.search(r"all_reduce busbw \d+\.\d\d GB/s at 1 MiB \(no floor\)", lines[0])
    record = next(json.loads(r) for r in metrics.read_text().splitlines()
                  if json.loads(r)["event"] == "fabric_gate")
    assert record["transport"] == "gloo" and record["world_size"] == 2 and record["passed"]
    assert record["sizes"] == [64 << 10, 1 << 20] and record["all_reduce_busbw_gbps"][-1] > 0


def test_enforce_under_the_floor_exits_fabric_error_with_one_line():
    proc = _launch(["--fabric_gate", "enforce", "--fabric_floor_gbps", "100000"])
    assert proc.returncode == FABRIC_ERROR, proc.stderr[-3000:]
    lines = _gate_lines(proc)
    assert len(lines) == 1, lines
    assert "fabric gate FAILED (exit 3, no retry): transport gloo" in lines[0]
    assert re.search(r"all_reduce busbw \d+\.\d\d GB/s at 1 MiB \(floor 100000 GB/s\)", lines[0])
    assert "[train]" not in proc.stdout  # nothing trained


def test_enforce_with_another_transport_expected_exits_fabric_error():
    proc = _launch(["--fabric_gate", "enforce", "--fabric_transport", "efa"])
    assert proc.returncode == FABRIC_ERROR, proc.stderr[-3000:]
    [line] = _gate_lines(proc)
    assert "transport gloo (expected efa)" in line and "is not efa" in line


def test_a_socket_fallback_in_the_nccl_log_fails_an_efa_job():
    log = LOGS / "socket_azure_ib_fallback_nccl_844.log"
    proc = _launch(["--fabric_gate", "enforce", "--fabric_transport", "ib"],
                   {TEST_NCCL_LOG_ENV: str(log)})
    assert proc.returncode == FABRIC_ERROR, proc.stderr[-3000:]
    [line] = _gate_lines(proc)
    assert "transport socket (expected ib)" in line
    assert "rank 0 (" in line and "transport socket is not ib" in line
    assert "not left out: no Kubernetes API access" in line


def test_a_slow_rank_is_named_with_its_host():
    proc = _launch(["--fabric_gate", "enforce"], {TEST_DELAY_ENV: "1"})
    assert proc.returncode == FABRIC_ERROR, proc.stderr[-3000:]
    [line] = _gate_lines(proc)
    assert re.search(r"slowest rank 1 on \S+ \d+\.\d\dx the others' median compute time "
                     r"\(limit 1\.5x\)", line), line
    assert re.search(r"problems: rank 1 \(\S+\): \d+\.\d\dx slower", line), line
    assert "2 attempts" in line  # measured once more before the verdict
    assert "not left out: no Kubernetes API access" in line  # so the job fails instead


def test_off_runs_no_gate():
    proc = _launch(["--fabric_gate", "off", "--max_steps", "1", "--eval_batches", "0"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _gate_lines(proc) == []


def test_rdma_preflight_names_a_small_memlock_and_hcas_that_are_not_infiniband(tmp_path, monkeypatch):
    """Before NCCL runs: too little locked memory, a named HCA the node lacks, or one whose port
    is Ethernet (an accelerated-networking VF in the list would silently drop a rail)."""
    import resource

    from trainer import fabric_gate

    for device, layer in (("mlx5_0", "InfiniBand"), ("mlx5_1", "Ethernet")):
        port = tmp_path / device / "ports" / "1"
        port.mkdir(parents=True)
        (port / "link_layer").write_text(layer + "\n")
        (port / "state").write_text("4: ACTIVE\n")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (64 * 1024, 64 * 1024))
    env = {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1,mlx5_8:1"}
    problems = fabric_gate.rdma_problems("ib", env, str(tmp_path))
    assert problems[0].startswith("locked-memory limit 65536 bytes is too small for RDMA")
    assert "mlx5_1:1, whose link layer is Ethernet" in problems[1]
    assert "mlx5_8:1, which this node does not have" in problems[2]
    assert fabric_gate.rdma_problems("socket", env, str(tmp_path)) == []  # no RDMA, no check
    monkeypatch.setattr(resource, "getrlimit",
                        lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert fabric_gate.rdma_problems("ib", {"NCCL_IB_HCA": "=mlx5_0:1"}, str(tmp_path)) == []


def test_a_port_still_coming_up_is_waited_for_and_one_that_stays_down_is_named(tmp_path):
    """NCCL leaves out a port that is not ACTIVE when it starts: the gate waits for it first."""
    from trainer import fabric_gate

    port = tmp_path / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "link_layer").write_text("InfiniBand\n")
    (port / "state").write_text("2: INIT\n")
    slept = []

    def comes_up_after_two_polls(seconds):
        slept.append(seconds)
        if len(slept) == 2:
            (port / "state").write_text("4: ACTIVE\n")

    env = {"NCCL_IB_HCA": "=mlx5_0:1"}
    problems = fabric_gate.rdma_problems("ib", env, str(tmp_path), sleep=comes_up_after_two_polls)
    assert not any("mlx5_0" in p for p in problems) and len(slept) == 2
    (port / "state").write_text("1: DOWN\n")
    problems = fabric_gate.rdma_problems("ib", env, str(tmp_path), wait_seconds=6,
                                         sleep=lambda s: None)
    assert "NCCL_IB_HCA port mlx5_0:1 is DOWN, not ACTIVE, after 6 s" in problems


def test_a_node_s_rdma_problem_fails_an_enforced_gate_naming_rank_and_host():
    from trainer.fabric_gate import RankFigures, decide

    figures = [RankFigures(rank=r, host=f"node-{r}", transport="ib", compute_s=0.01,
                           all_reduce_s=[0.001], all_to_all_s=[0.001],
                           local_problems=["locked-memory limit 65536 bytes is too small for RDMA"]
                           if r == 1 else [])
               for r in range(2)]
    result = decide(figures, [1 << 20], "enforce", "ib", 0.0)
    assert not result.passed
    assert result.problems == ["rank 1 (node-1): locked-memory limit 65536 bytes is too small "
                               "for RDMA"]
    assert decide(figures, [1 << 20], "report", "ib", 0.0).passed  # report mode only warns


# --- the NCCL every rank must have loaded: torch's own (GKE GPUDirect) ---

def test_the_nccl_version_is_read_from_a_real_log_and_the_code_ncclgetversion_returns():
    from trainer.fabric_gate import nccl_version_from_code, parse_nccl_version

    assert parse_nccl_version(_sample(LOGS / "ib_roce_nccl_tests_185.log")[2]) == "2.19.3"
    assert parse_nccl_version(_sample(LOGS / "ib_with_socket_bootstrap_horovod_1523.log")[2]) \
        == "2.4.7"
    assert parse_nccl_version(_sample(LOGS / "tcpx_skypilot_readme.log")[2]) is None
    # nccl.h NCCL_VERSION(X,Y,Z): X*10000+Y*100+Z from 2.9, X*1000+Y*100+Z before.
    assert nccl_version_from_code(21904) == "2.19.4"
    assert nccl_version_from_code(22807) == "2.28.7"
    assert nccl_version_from_code(2708) == "2.7.8"


def test_a_rank_on_another_nccl_fails_enforce_by_node_and_an_unknown_one_too():
    figures = _figures(transport="tcpx")
    figures[0].nccl_version, figures[1].nccl_version = "2.29.7", "2.19.4"
    result = decide(figures, [1 << 20], "enforce", "tcpx", 0.0, expected_nccl_version="2.29.7")
    assert not result.passed and result.bad_nodes == ["node-1"]
    assert ("rank 1 (node-1): NCCL 2.19.4 is loaded, not 2.29.7, the one this image's torch "
            "was built with and the fabric's plugin runs under") in result.problems
    assert "; NCCL 2.29.7+2.19.4 (expected 2.29.7);" in result.line()
    figures[1].nccl_version = None  # no version was readable
    assert "rank 1 (node-1): NCCL unknown is loaded" in decide(
        figures, [1 << 20], "enforce", "tcpx", 0.0, expected_nccl_version="2.29.7").problems[0]
    figures[1].nccl_version = "2.29.7"
    assert decide(figures, [1 << 20], "enforce", "tcpx", 0.0,
                  expected_nccl_version="2.29.7").passed
    assert decide(_figures(), [1 << 20], "enforce", "efa", 0.0).passed  # not asked: not checked


def test_the_nccl_verdict_before_any_collective_names_the_node_of_each_wrong_rank():
    from trainer.fabric_gate import RankNccl, decide_nccl

    ranks = [RankNccl(rank=r, node=f"node-{r // 8}", version="2.29.7") for r in range(16)]
    assert decide_nccl(ranks, "enforce", "2.29.7").passed
    ranks[11].version = "2.19.4"  # a preload of the installer's NCCL on node-1
    result = decide_nccl(ranks, "enforce", "2.29.7")
    assert not result.passed and result.bad_nodes == ["node-1"] and not result.measured
    assert result.nodes == ["node-0", "node-1"]
    assert result.line() == (
        "fabric gate FAILED (exit 3, no retry); NCCL 2.29.7+2.19.4 (expected 2.29.7), checked "
        "before any collective; 16 ranks; problems: rank 11 (node-1): NCCL 2.19.4 is loaded, "
        "not 2.29.7, the one this image's torch was built with and the fabric's plugin runs under")
    assert decide_nccl(ranks, "report", "2.29.7").passed  # report mode only warns


def test_an_nccl_log_of_another_version_fails_the_gate_through_the_launcher():
    log = LOGS / "ib_roce_nccl_tests_185.log"  # "NCCL version 2.19.3+cuda12.3", over IB/RoCE
    proc = _launch(["--fabric_gate", "enforce", "--fabric_nccl_version", "2.19.4"],
                   {TEST_NCCL_LOG_ENV: str(log)})
    assert proc.returncode == FABRIC_ERROR, proc.stderr[-3000:]
    [line] = _gate_lines(proc)
    assert "NCCL 2.19.3 (expected 2.19.4), checked before any collective" in line
    assert "NCCL 2.19.3 is loaded, not 2.19.4" in line
    assert "busbw" not in line  # nothing measured: no collective ran
    assert "not left out: no Kubernetes API access" in line


def test_a_malformed_nccl_version_is_refused_naming_the_flag(capsys):
    from trainer.config import parse_config

    with pytest.raises(SystemExit) as exited:
        parse_config(["--fabric_nccl_version", "2.19"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "fabric_nccl_version" in error and "2.19" in error and "major.minor.patch" in error
    assert parse_config(["--fabric_nccl_version", "2.28.7"]).fabric_nccl_version == "2.28.7"


LIBNCCL_STUB = "int ncclGetVersion(int *version) { *version = %d; return 0; }\n"
# NCCL >= 2.28 exports ncclAlltoAll; 2.19 (Google's TCPX NCCL) does not.
ALLTOALL_STUB = "int ncclAlltoAll(void) { return 0; }\n"
# Stands in for libtorch_cuda.so: it needs libnccl.so.2 (DT_NEEDED, a soname, no path) and finds
# it through its own RPATH, as torch's wheel finds the nvidia-nccl wheel's copy; like torch built
# against NCCL >= 2.28 (torch/csrc/cuda/nccl.cpp all2all_single_equal_split) it calls
# ncclAlltoAll, bound lazily at the first call.
LIBTORCH_STUB = ("int ncclGetVersion(int *version);\nint ncclAlltoAll(void);\n"
                 "int torch_nccl_version(void) { int v = 0; ncclGetVersion(&v); return v; }\n"
                 "int torch_all_to_all(void) { return ncclAlltoAll(); }\n")


def _cc(tmp_path: Path, source: str, out: Path, *flags: str) -> Path:
    src = tmp_path / (out.name + ".c")
    src.write_text(source)
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(src), *flags], check=True)
    return out


def test_why_a3_preloads_no_nccl_torch_s_own_loads_and_the_gate_reads_it(tmp_path):
    """With stand-in libraries: a library that needs libnccl.so.2 through its RPATH (torch)
    binds to torch's own copy even with the installer's folder on LD_LIBRARY_PATH (where the A3
    pod puts it, for the net plugin). A preloaded older copy (Google's 2.19.4, which the pod
    no longer preloads) wins, and lacks a symbol torch calls: loaded as Python loads torch._C
    (sys.getdlopenflags(), RTLD_NOW: every symbol bound at load), torch fails to import;
    bound lazily, the process dies at the first all_to_all with a symbol lookup error."""
    installer = _cc(tmp_path, LIBNCCL_STUB % 21904, tmp_path / "installer" / "libnccl.so.2",
                    "-Wl,-soname,libnccl.so.2")  # 2.19.4, as /usr/local/nvidia/lib64 holds
    wheel = _cc(tmp_path, LIBNCCL_STUB % 22907 + ALLTOALL_STUB,
                tmp_path / "wheel" / "libnccl.so.2", "-Wl,-soname,libnccl.so.2")  # 2.29.7
    torch_lib = _cc(tmp_path, LIBTORCH_STUB, tmp_path / "torch" / "libtorch_stub.so",
                    f"-L{wheel.parent}", "-l:libnccl.so.2", f"-Wl,-rpath,{wheel.parent}",
                    "-Wl,--disable-new-dtags")  # DT_RPATH: searched before LD_LIBRARY_PATH
    load = "import ctypes, os, sys; torch = ctypes.CDLL(sys.argv[1], mode=int(sys.argv[2])); "
    probe = load + ("from trainer.fabric_gate import loaded_nccl_version; "
                    "print(torch.torch_nccl_version(), loaded_nccl_version(), flush=True); "
                    "print(torch.torch_all_to_all())")

    def run(extra: dict, mode: int = sys.getdlopenflags()) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", probe, str(torch_lib), str(mode)], cwd=REPO,
                              capture_output=True, text=True, env={**env(), **extra})

    assert run({}).stdout.split() == ["22907", "2.29.7", "0"]  # torch's own NCCL
    in_pod = run({"LD_LIBRARY_PATH": str(installer.parent)})  # as the A3 pod sets it
    assert in_pod.stdout.split() == ["22907", "2.29.7", "0"]  # RPATH wins
    # A preload of the installer's 2.19.4: torch (RTLD_NOW, as Python imports torch._C) does
    # not load at all ...
    preloaded = run({"LD_PRELOAD": str(installer)})
    assert preloaded.returncode == 1 and "undefined symbol: ncclAlltoAll" in preloaded.stderr
    # ... and bound lazily, it loads, reads 2.19.4, and dies at the first all_to_all (exit 127,
    # the loader's): hence the gate's version check before any collective.
    lazy = run({"LD_PRELOAD": str(installer)}, mode=os.RTLD_LAZY)
    assert lazy.stdout.split() == ["21904", "2.19.4"]
    assert lazy.returncode == 127 and "symbol lookup error" in lazy.stderr
    assert "undefined symbol: ncclAlltoAll" in lazy.stderr
    # No NCCL in the process at all (CPU): nothing to report.
    assert subprocess.run([sys.executable, "-c", "from trainer.fabric_gate import "
                           "loaded_nccl_version; print(loaded_nccl_version())"], cwd=REPO,
                          env=env(), capture_output=True, text=True).stdout.strip() == "None"
