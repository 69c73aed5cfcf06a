"""Judging: the verdict from every rank's figures, a pure function of numbers (no torch, no
clock), so tests feed it published healthy runs and degraded ones.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import List, Optional, Sequence

from trainer.exit_codes import FABRIC_ERROR, NODE_LEFT_OUT
from trainer.gate.nccl_log import unique as _unique

# A rank is "slow" when its matmul time exceeds this many times the median of the other ranks
# (and by more than SLOW_RANK_MIN_SECONDS, so a millisecond of jitter on small CPU runs is not news).
SLOW_RANK_FACTOR = 1.5
SLOW_RANK_MIN_SECONDS = 0.005


@dataclass
class RankFigures:
    """What one rank measured; gathered to every rank so that all decide alike."""

    rank: int
    host: str
    transport: Optional[str]
    compute_s: float
    all_reduce_s: List[float]  # per message size, mean seconds per call on this rank
    all_to_all_s: List[float]
    local_problems: List[str] = field(default_factory=list)  # this node's RDMA set-up
    rails: Optional[int] = None  # fabric NICs this rank's NCCL found (None: its log says not)
    node: str = ""  # the Kubernetes node (env NODE_NAME from spec.nodeName; else the host)
    gpu_problems: List[str] = field(default_factory=list)  # trainer/gpu_health.py
    matmul_tflops: Optional[float] = None  # this rank's BF16 matmul throughput (GPU only)
    nccl_version: Optional[str] = None  # the NCCL this rank loaded (None: unknown, e.g. gloo)


@dataclass
class GateResult:
    """The gate's verdict and figures (the same on every rank)."""

    mode: str
    passed: bool
    transport: str
    expected_transport: str
    floor_gbps: float
    sizes: List[int]
    all_reduce_busbw_gbps: List[Optional[float]]
    all_to_all_busbw_gbps: List[Optional[float]]
    world_size: int
    slowest_rank: int
    slowest_host: str
    slowest_ratio: float  # slowest rank's compute time / median of the other ranks'
    seconds: float = 0.0
    problems: List[str] = field(default_factory=list)
    fewest_rails: Optional[int] = None  # fabric NICs on the rank whose NCCL found the fewest
    expected_rails: int = 0
    all_to_all_floor_gbps: float = 0.0
    # Nodes a problem of their own was found on (GPU, transport, NICs, RDMA, a slow rank);
    # empty when every problem is the fabric's (bandwidth under a floor).
    bad_nodes: List[str] = field(default_factory=list)
    attempts: int = 1
    exit_status: int = 0  # 0 (go on), NODE_LEFT_OUT or FABRIC_ERROR; set by run_fabric_gate
    left_out: List[str] = field(default_factory=list)  # nodes tainted by this run
    expected_nccl_version: str = ""  # the NCCL every rank must have loaded (torch's own)
    nccl_versions: List[str] = field(default_factory=list)  # what the ranks loaded
    nodes: List[str] = field(default_factory=list)  # every node of the gang, in rank order
    measured: bool = True  # False: stopped on the NCCL check, before any collective

    def line(self) -> str:
        """The one log line, pass or fail."""
        if not self.problems:
            status = "passed"
        elif self.passed:
            status = "WARNING (report only, not enforced)"
        elif self.exit_status == NODE_LEFT_OUT:
            status = (f"FAILED, left out node{'s' * (len(self.left_out) > 1)} "
                      f"{', '.join(self.left_out)} (exit {NODE_LEFT_OUT}: "
                      "the gang restarts on other nodes, not counted)")
        else:
            status = f"FAILED (exit {FABRIC_ERROR}, no retry)"
        bw = self.all_reduce_busbw_gbps[-1] if self.all_reduce_busbw_gbps else None
        a2a = self.all_to_all_busbw_gbps[-1] if self.all_to_all_busbw_gbps else None
        floor = f"floor {self.floor_gbps:g} GB/s" if self.floor_gbps else "no floor"
        a2a_floor = (f"floor {self.all_to_all_floor_gbps:g} GB/s" if self.all_to_all_floor_gbps
                     else "no floor")
        nics = "" if self.fewest_rails is None else (
            f", {self.fewest_rails} fabric NICs" + (f" of {self.expected_rails}"
                                                     if self.expected_rails else ""))
        size = _size(self.sizes[-1]) if self.sizes else "-"
        nccl = (f"; NCCL {'+'.join(self.nccl_versions)}" if self.nccl_versions else "") + (
            f" (expected {self.expected_nccl_version})" if self.expected_nccl_version else "")
        if not self.measured:
            return (f"fabric gate {status}{nccl}, checked before any collective; "
                    f"{self.world_size} ranks; problems: {'; '.join(self.problems)}")
        text = (f"fabric gate {status}: transport {self.transport} (expected "
                f"{self.expected_transport or 'any'}{nics}){nccl}; all_reduce busbw {_gbps(bw)} at "
                f"{size} ({floor}); all_to_all busbw {_gbps(a2a)} ({a2a_floor}); slowest rank "
                f"{self.slowest_rank} on {self.slowest_host} "
                f"{self.slowest_ratio:.2f}x the others' median compute time (limit "
                f"{SLOW_RANK_FACTOR:g}x); {self.world_size} ranks, {self.seconds:.1f} s"
                + (f", {self.attempts} attempts" if self.attempts > 1 else ""))
        return text + (f"; problems: {'; '.join(self.problems)}" if self.problems else "")

    def record(self) -> dict:
        """The metrics JSON line (event "fabric_gate")."""
        return {"event": "fabric_gate", **asdict(self)}


def _gbps(value: Optional[float]) -> str:
    return "n/a (one rank)" if value is None else f"{value:.2f} GB/s"


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def busbw_gbps(nbytes: int, seconds: float, world_size: int, factor: float) -> Optional[float]:
    """nccl-tests' bus bandwidth in GB/s (1e9 bytes); None for a world of one (no traffic)."""
    if world_size < 2 or seconds <= 0:
        return None
    return nbytes / seconds / 1e9 * factor * (world_size - 1) / world_size


def seconds_for_busbw(nbytes: int, busbw: float, world_size: int, factor: float) -> float:
    """The inverse of busbw_gbps: the time per call a published bus bandwidth stands for."""
    return nbytes / (busbw * 1e9) * factor * (world_size - 1) / world_size


def _where(f: RankFigures) -> str:
    return f"rank {f.rank} ({f.node or f.host})"


def decide(figures: Sequence[RankFigures], sizes: Sequence[int], mode: str,
           expected_transport: str, floor_gbps: float, seconds: float = 0.0,
           expected_rails: int = 0, all_to_all_floor_gbps: float = 0.0,
           matmul_floor_tflops: float = 0.0, expected_nccl_version: str = "") -> GateResult:
    """The verdict from every rank's figures: a pure function, so tests can feed it numbers
    (published healthy runs, degraded ones). Problems of one node name it in `bad_nodes`;
    bandwidth under a floor is the fabric's and names none."""
    n = len(figures)
    by_rank = sorted(figures, key=lambda f: f.rank)
    transports = _unique(f.transport or "unknown" for f in by_rank)
    ar = [busbw_gbps(size, max(f.all_reduce_s[i] for f in by_rank), n, 2.0)
          for i, size in enumerate(sizes)]
    a2a = [busbw_gbps(size, max(f.all_to_all_s[i] for f in by_rank), n, 1.0)
           for i, size in enumerate(sizes)]
    slowest = max(by_rank, key=lambda f: f.compute_s)
    others = [f.compute_s for f in by_rank if f.rank != slowest.rank]
    median = statistics.median(others) if others else slowest.compute_s
    ratio = slowest.compute_s / median if median > 0 else 1.0

    problems: List[str] = []
    bad: List[RankFigures] = []
    sick: List[RankFigures] = []  # GPU health: acted on in report mode too (HEALTH_ENFORCED)

    def node_problem(f: RankFigures, text: str, gpu: bool = False) -> None:
        problems.append(f"{_where(f)}: {text}")
        bad.append(f)
        if gpu:
            sick.append(f)

    for f in by_rank:
        for p in f.local_problems:
            node_problem(f, p)
        for p in f.gpu_problems:
            node_problem(f, p, gpu=True)
        if matmul_floor_tflops and f.matmul_tflops is not None \
                and f.matmul_tflops < matmul_floor_tflops:
            node_problem(f, f"GPU matmul {f.matmul_tflops:.0f} TFLOPS is under the floor "
                            f"{matmul_floor_tflops:g} TFLOPS", gpu=True)
    if expected_transport:
        for f in by_rank:
            if f.transport != expected_transport:
                node_problem(f, f"transport {f.transport or 'unknown'} is not "
                                f"{expected_transport}")
    for f in by_rank:
        for p in nccl_problems(f.nccl_version, expected_nccl_version):
            node_problem(f, p)
    if expected_rails:
        for f in by_rank:
            if f.rails is not None and f.rails < expected_rails:
                node_problem(f, f"NCCL found {f.rails} of the node's {expected_rails} fabric NICs")
    if floor_gbps and ar and ar[-1] is not None and ar[-1] < floor_gbps:
        problems.append(f"all_reduce busbw {ar[-1]:.2f} GB/s is under the floor {floor_gbps:g} GB/s")
    if all_to_all_floor_gbps and a2a and a2a[-1] is not None and a2a[-1] < all_to_all_floor_gbps:
        problems.append(f"all_to_all busbw {a2a[-1]:.2f} GB/s is under the floor "
                        f"{all_to_all_floor_gbps:g} GB/s")
    if ratio > SLOW_RANK_FACTOR and slowest.compute_s - median > SLOW_RANK_MIN_SECONDS:
        node_problem(slowest, f"{ratio:.2f}x slower than the others' median")
    enforced = mode == "enforce"
    return GateResult(
        mode=mode, passed=not (problems if enforced else sick), transport="+".join(transports),
        expected_transport=expected_transport, floor_gbps=floor_gbps, sizes=list(sizes),
        all_reduce_busbw_gbps=ar, all_to_all_busbw_gbps=a2a, world_size=n,
        slowest_rank=slowest.rank, slowest_host=slowest.node or slowest.host,
        slowest_ratio=ratio, seconds=seconds, problems=problems, expected_rails=expected_rails,
        fewest_rails=min((f.rails for f in by_rank if f.rails is not None), default=None),
        all_to_all_floor_gbps=all_to_all_floor_gbps,
        bad_nodes=_unique(f.node or f.host for f in (bad if enforced else sick)),
        expected_nccl_version=expected_nccl_version,
        nccl_versions=_unique(f.nccl_version for f in by_rank if f.nccl_version),
        nodes=_unique(f.node or f.host for f in by_rank))


def nccl_problems(loaded: Optional[str], expected: str) -> List[str]:
    """What is wrong with the NCCL one rank loaded ([] when nothing is expected)."""
    if not expected or loaded == expected:
        return []
    return [f"NCCL {loaded or 'unknown'} is loaded, not {expected}, the one this image's torch "
            "was built with and the fabric's plugin runs under"]


@dataclass
class RankNccl:
    """One rank's NCCL, gathered before any collective."""

    rank: int
    node: str
    version: Optional[str]


def decide_nccl(ranks: Sequence[RankNccl], mode: str, expected: str,
                seconds: float = 0.0) -> GateResult:
    """The verdict on the NCCL every rank loaded, before any collective: a rank with another
    NCCL names its node (one lacking a symbol torch calls would end the first such collective
    with a symbol lookup error, which names nothing and counts as a failure)."""
    by_rank = sorted(ranks, key=lambda r: r.rank)
    problems, bad = [], []
    for r in by_rank:
        for p in nccl_problems(r.version, expected):
            problems.append(f"rank {r.rank} ({r.node}): {p}")
            bad.append(r.node)
    return GateResult(
        mode=mode, passed=mode != "enforce" or not problems, transport="not measured",
        expected_transport="", floor_gbps=0.0, sizes=[], all_reduce_busbw_gbps=[],
        all_to_all_busbw_gbps=[], world_size=len(by_rank), slowest_rank=0, slowest_host="",
        slowest_ratio=1.0, seconds=seconds, problems=problems, bad_nodes=_unique(bad),
        expected_nccl_version=expected,
        nccl_versions=_unique(r.version for r in by_rank if r.version),
        nodes=_unique(r.node for r in by_rank), measured=False)
