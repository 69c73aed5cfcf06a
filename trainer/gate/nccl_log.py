"""Which network NCCL chose, how many fabric NICs it found and which NCCL is loaded, read from
NCCL's own INFO log (turned on before the first communicator) and from the process's maps.

Torch-free: the log parser's tests and the command line's readers need none of torch.
"""

from __future__ import annotations

import glob
import os
import re
import sys
import tempfile
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Tuple

if TYPE_CHECKING:
    import torch

# A test-only hook: a file read as if NCCL had written it (the transport check on gloo).
TEST_NCCL_LOG_ENV = "TORCHREC_CLOUD_GATE_TEST_NCCL_LOG"
NCCL_LOG_NAME = "nccl.%h.%p.log"  # NCCL expands %h (host) and %p (pid) in NCCL_DEBUG_FILE


def unique(items: Iterable[str]) -> List[str]:
    return list(dict.fromkeys(items))


_USING_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")  # NCCL core, once per comm
# "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA": the network a connection runs on.
_CHANNEL_VIA_NET = re.compile(r"via NET/([^/\n]+)/")
_OFI_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is ([\w-]+)")  # aws-ofi-nccl
# Lines a network prints when it initialises, for logs without "Using network" (NCCL < 2.5
# printed none, and a plugin's own lines may be all a user pasted).
_NET_INIT_LINES = (
    (re.compile(r"NET/GPUDirectTCPX\b"), "tcpx"),
    (re.compile(r"NET/FasTrak\b"), "tcpxo"),
    (re.compile(r"NET/IB : Using \["), "ib"),
    (re.compile(r"NET/OFI Selected [Pp]rovider is efa\b"), "efa"),
    (re.compile(r"NET/FastSocket\b"), "socket"),
    (re.compile(r"NET/Socket : Using \["), "socket"),
)


def transport_of_network(name: str, ofi_provider: Optional[str] = None) -> str:
    """Our transport name for an NCCL network name ("IB", "IBext_v8", "AWS Libfabric", ...).

    IB covers RoCE too (NCCL drives both through IB verbs); Libfabric is EFA unless aws-ofi-nccl
    said it picked another provider (cxi, tcp), which is then named so it cannot pass for EFA.
    """
    key = name.strip().lower()
    if key.startswith("ib"):  # IB, IBext, IBext_v7/v8 (HPC-X's SHARP plugin)
        return "ib"
    if key.startswith("socket") or key.startswith("fastsocket"):  # GKE's Fast Socket is TCP too
        return "socket"
    if "libfabric" in key:  # "AWS Libfabric" (aws-ofi-nccl < 1.7), "Libfabric"
        return "efa" if ofi_provider in (None, "efa") else f"libfabric-{ofi_provider}"
    if key.startswith("gpudirecttcpx"):  # GPUDirectTCPX, GPUDirectTCPX_v7
        return "tcpx"
    if key.startswith("fastrak"):  # the GPUDirect-TCPXO plugin's network name
        return "tcpxo"
    return key.replace(" ", "-")


def parse_transport(text: str) -> Optional[str]:
    """The transport an NCCL INFO log says NCCL uses between nodes, or None if it does not say.

    NCCL's own "Using network X" lines decide; without them, the networks the channels were
    connected through; without those, the networks that initialised, a fabric winning over
    sockets (NCCL tries the fabric first and logs the socket interface for bootstrap as well).
    Several different answers (one process, several communicators) are joined with "+".
    """
    providers = _OFI_PROVIDER.findall(text)
    provider = providers[-1].lower() if providers else None
    for pattern in (_USING_NETWORK, _CHANNEL_VIA_NET):
        names = [m.group(1) for line in text.splitlines() for m in [pattern.search(line)] if m]
        if names:
            return "+".join(unique(transport_of_network(n, provider) for n in names))
    found = unique(transport for pattern, transport in _NET_INIT_LINES if pattern.search(text))
    fabrics = [t for t in found if t != "socket"]
    return "+".join(fabrics or found) or None


# The fabric NICs NCCL opened: aws-ofi-nccl's "Selected provider is efa, fabric is efa-direct
# (found 16 nics)"; NCCL's IB transport "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ... [RO]".
_OFI_NICS = re.compile(r"NET/OFI Selected [Pp]rovider is [\w-]+.*?\(found (\d+) nics?\)")
_IB_USING = re.compile(r"NET/IB : Using ((?:\[\d+\]\S+\s*)+)")
_IB_DEVICE = re.compile(r"\[\d+\]\S+")


def parse_rails(text: str) -> Optional[int]:
    """How many fabric NICs this process's NCCL found (the last report wins), or None when the
    log does not say (sockets, TCPX, or a log without the network's init lines)."""
    counts = []
    for line in text.splitlines():
        ofi = _OFI_NICS.search(line)
        if ofi:
            counts.append(int(ofi.group(1)))
        ib = _IB_USING.search(line)
        if ib:
            counts.append(len(_IB_DEVICE.findall(ib.group(1))))
    return counts[-1] if counts else None


# NCCL's banner, "NCCL INFO NCCL version 2.19.4+cuda12.2" (init.cc showVersion): written by the
# process that is rank 0 of a communicator, so not by every rank.
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")


def parse_nccl_version(text: str) -> Optional[str]:
    """The NCCL version ("2.19.4") an NCCL INFO log names (the last one), or None."""
    found = _NCCL_VERSION.findall(text)
    return found[-1] if found else None


def loaded_nccl_version(maps: str = "/proc/self/maps") -> Optional[str]:
    """The version of the libnccl this process has loaded, asked of that library itself
    (ncclGetVersion), or None when none is loaded. Not torch.cuda.nccl.version(): that is the
    version torch was compiled against (torch/csrc/cuda/nccl.cpp, NCCL_MAJOR/MINOR/PATCH), not
    the one a preload or the loader picked."""
    try:
        with open(maps) as fh:
            paths = [line.split()[-1] for line in fh if "libnccl.so" in line]
    except OSError:
        return None
    if not paths:
        return None
    import ctypes  # only where a library is loaded: dlopen returns the loaded one

    code = ctypes.c_int()
    try:
        if ctypes.CDLL(paths[0]).ncclGetVersion(ctypes.byref(code)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return nccl_version_from_code(code.value)


def nccl_version_from_code(code: int) -> str:
    """ncclGetVersion's integer as "major.minor.patch": major*10000 + minor*100 + patch from
    NCCL 2.9 on, major*1000 + minor*100 + patch before (nccl.h NCCL_VERSION)."""
    if code >= 20900:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


_echo_whole_log = False  # set by prepare_nccl_logging: the user asked for NCCL's INFO lines


def prepare_nccl_logging(environ: "os._Environ[str] | Dict[str, str]" = os.environ) -> str:
    """Make NCCL write its INIT/NET INFO lines to a per-process file; returns the file pattern.

    Must run before the NCCL communicator is created (NCCL reads these once per process). A
    user's NCCL_DEBUG of INFO or TRACE (and its subsystems) and NCCL_DEBUG_FILE are kept; the
    gate then repeats what NCCL wrote so far on stdout, as NCCL would have printed it. A quieter
    level (the cluster contract sets WARN to keep pod logs readable) is raised to INFO but sent
    to the file, and the gate repeats only the WARN lines, so the pod log stays as quiet.
    """
    global _echo_whole_log
    _echo_whole_log = environ.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE")
    if not _echo_whole_log:
        environ["NCCL_DEBUG"] = "INFO"
        environ["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    elif "NCCL_DEBUG_FILE" in environ:
        _echo_whole_log = False  # the user reads their own file
    environ.setdefault("NCCL_DEBUG_FILE", os.path.join(tempfile.gettempdir(), NCCL_LOG_NAME))
    return environ["NCCL_DEBUG_FILE"]


def read_nccl_log(pattern: Optional[str], pid: Optional[int] = None) -> str:
    """This process's NCCL log text ("" when there is none): %h may be shortened by NCCL, so
    match any host, and this pid."""
    if not pattern:
        return ""
    expanded = pattern.replace("%h", "*").replace("%p", str(pid or os.getpid()))
    text = []
    for path in sorted(glob.glob(expanded)):
        with open(path, errors="replace") as fh:
            text.append(fh.read())
    return "".join(text)


def _injected_log() -> Optional[str]:
    injected = os.environ.get(TEST_NCCL_LOG_ENV)
    if not injected:
        return None
    with open(injected, errors="replace") as fh:
        return fh.read()


def this_rank_nccl_version(device: torch.device) -> Optional[str]:
    """The NCCL this process loaded, before any collective: torch's CUDA build links
    libnccl.so.2 (DT_NEEDED of libtorch_cuda), so it is loaded with torch and can be asked
    (ncclGetVersion) before the first communicator. None on CPU unless a test supplies a log."""
    text = _injected_log()
    if text is not None:
        return parse_nccl_version(text)
    return loaded_nccl_version() if device.type == "cuda" else None


def this_rank_network(device: torch.device
                      ) -> Tuple[Optional[str], Optional[int], Optional[str]]:
    """The transport, fabric NIC count and NCCL version of this process ("gloo", None, None on
    CPU, unless a test supplies a log): the first two from its NCCL log, the version from the
    library it loaded, else from the log (which only a communicator's rank 0 writes it in)."""
    text = _injected_log()
    if text is not None:
        return parse_transport(text), parse_rails(text), parse_nccl_version(text)
    if device.type != "cuda":
        return "gloo", None, None
    text = read_nccl_log(os.environ.get("NCCL_DEBUG_FILE"))
    for line in text.splitlines():  # what the pod log would have shown (prepare_nccl_logging)
        if _echo_whole_log:
            print(line, flush=True)
        elif " NCCL WARN " in line:
            print(line, file=sys.stderr, flush=True)
    return (parse_transport(text), parse_rails(text),
            loaded_nccl_version() or parse_nccl_version(text))
