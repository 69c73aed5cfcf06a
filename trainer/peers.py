"""Telling a lost peer from a crash: what a collective raises when another rank went away.

A spot node reclaimed without notice, or a peer pod SIGKILLed, shows up on the survivors as a
failed collective: NCCL raises ``torch.distributed.DistBackendError`` (a ``DistError``), the
c10d store a ``DistStoreError``/``DistNetworkError``, and gloo a plain ``RuntimeError`` from its
TCP transport, e.g. "[gloo/transport/tcp/pair.cc:553] Connection closed by peer [10.0.0.7]:4476"
(seen with torch 2.13 when the peer process was SIGKILLed). NCCL's own words for a peer gone
("remote process exited or there was a network error", ncclRemoteError; "Watchdog caught
collective operation timeout"; a communicator aborted) are recognised in any RuntimeError too,
since wrappers (TorchRec awaitables, DCP) may re-raise them as plain errors. Those are not the
trainer's fault: the survivors exit with the resume status so the whole gang restarts from its
newest checkpoint. When the watchdog tears the process down instead (SIGABRT, the default
TORCH_NCCL_ASYNC_ERROR_HANDLING=3), the launcher maps the abort to the same status
(trainer/launch.py).
"""

from __future__ import annotations

import re

# gloo's TCP transport messages (third_party/gloo/gloo/transport/tcp/pair.cc) and its timeouts.
_GLOO_TRANSPORT = re.compile(
    r"gloo/transport/.*(Connection closed by peer|Connection reset by peer|Broken pipe"
    r"|Connection refused|Socket closed)|Timed out waiting \d+ms for (send|recv) operation",
    re.IGNORECASE | re.DOTALL,
)
# ProcessGroupNCCL's messages (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, NCCLUtils.hpp)
# and NCCL's ncclRemoteError text.
_NCCL_LOST_PEER = re.compile(
    r"remote process exited or there was a network error|ncclRemoteError"
    r"|Watchdog caught collective operation timeout|NCCL communicator was aborted",
    re.IGNORECASE,
)


def is_lost_peer(error: BaseException) -> bool:
    """True when ``error`` says another rank or node is gone, not that this rank failed."""
    import torch.distributed as dist

    if isinstance(error, (dist.DistError, ConnectionError)):
        return True
    if not isinstance(error, RuntimeError):
        return False
    text = str(error)
    return bool(_GLOO_TRANSPORT.search(text) or _NCCL_LOST_PEER.search(text))
