"""Acting on a failed verdict: the nodes it leaves out, tainted by rank 0 (trainer/node_taint.py)
within the bound, or the reason it cannot (the exit status then is FABRIC_ERROR).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Tuple

from trainer.exit_codes import FABRIC_ERROR, NODE_LEFT_OUT
from trainer.gate.judge import GateResult
from trainer.node_taint import KubeApi, KubeApiError, leave_out

if TYPE_CHECKING:
    from trainer.config import TrainConfig


def nodes_to_leave_out(result: GateResult) -> List[str]:
    """The nodes a failed verdict leaves out: those a problem of their own names, else (the
    bandwidth under a floor, which names none) every node of the gang. A degraded link lowers
    every rank's figure alike, so on 2 nodes the bad one cannot be told apart; fresh nodes
    heal it without a human, and the bound (--fabric_max_nodes_left_out, taints already on
    nodes counted) stops a fabric that is slow everywhere from draining the pool."""
    return list(result.bad_nodes or result.nodes)


def act_on(cfg: "TrainConfig", result: GateResult) -> Tuple[int, List[str], Optional[str]]:
    """Rank 0's action on a failed verdict: (exit status, nodes tainted, why not left out)."""
    nodes = nodes_to_leave_out(result)
    if not nodes:
        return FABRIC_ERROR, [], "no node to leave out"
    api = KubeApi.from_environment()
    if api is None:
        return FABRIC_ERROR, [], "no Kubernetes API access to leave the node out"
    try:
        tainted, refused = leave_out(api, nodes, cfg.fabric_max_nodes_left_out)
    except KubeApiError as err:
        return FABRIC_ERROR, [], f"could not taint the node: {err}"
    if refused:
        return FABRIC_ERROR, [], refused
    return NODE_LEFT_OUT, tainted or nodes, None
