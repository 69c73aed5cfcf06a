"""Raise the locked-memory limit, then become the trainer's user: for RDMA on nodes whose
containers start with a small RLIMIT_MEMLOCK.

RDMA (InfiniBand, EFA) registers the trainer's buffers, which pins them and counts against
RLIMIT_MEMLOCK. Where the node gives containers a small limit (AKS: 64 KiB) nothing in a pod
spec raises it, and IPC_LOCK does nothing for a non-root process (capabilities are cleared at
execve for a non-root uid). So such a container starts as root holding only SYS_RESOURCE,
SETUID and SETGID (workloads/pod.py); before anything else runs, the launcher raises the limit
(hard and soft) and drops to the trainer's uid and gid, which removes those capabilities too.
The raised limit is inherited by torchrun's workers.
"""

from __future__ import annotations

import os
import resource

DROP_TO_ENV = "TORCHREC_CLOUD_DROP_TO"  # "uid:gid", set by the workload layer


def raise_locked_memory_and_drop() -> None:
    """If DROP_TO_ENV is set and this process is root: RLIMIT_MEMLOCK unlimited, then
    setgroups/setgid/setuid to it. A no-op otherwise (the usual non-root start)."""
    target = os.environ.get(DROP_TO_ENV)
    if not target or os.geteuid() != 0:
        return
    uid, gid = (int(part) for part in target.split(":"))
    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK,
                           (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):  # no SYS_RESOURCE after all: the most the hard limit allows
        _, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, hard))
        print(f"warning: {DROP_TO_ENV}: could not lift RLIMIT_MEMLOCK (no CAP_SYS_RESOURCE); "
              f"it stays at {hard} bytes, too little for RDMA if that is small", flush=True)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)  # last: after it no capability is left to undo any of this
    if os.getuid() != uid or os.geteuid() != uid:
        raise RuntimeError(f"{DROP_TO_ENV}={target}: could not drop to uid {uid}")
