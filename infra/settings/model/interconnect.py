"""`interconnect`: placement, the fabric between GPU nodes and the fabric gate."""

from __future__ import annotations

from pydantic import Field

from infra.settings.model.section import Section


class Interconnect(Section):
    """Placement and the low-latency fabric between GPU nodes."""

    placement: bool = Field(
        True,
        description=(
            "Pack GPU nodes close together (AWS cluster placement group, Azure proximity "
            "placement group, GCP compact placement). Needs exactly one GPU zone."
        ),
    )
    fabric: bool = Field(
        True,
        description=(
            "Use the machine's fabric (AWS EFA, Azure InfiniBand, GCP GPUDirect). The machine "
            "must have one."
        ),
    )
    gate: bool = Field(
        True,
        description=(
            "Run the fabric gate before training: collectives across all ranks, NCCL's "
            "transport and bus bandwidth, a GPU health check. With fabric on, a bad node is "
            "tainted and left out (the gang restarts elsewhere, not counted), and so is every "
            "node of the gang when bandwidth is under the machine's floor (infra/catalog/gate_floors.py), "
            "up to --fabric_max_nodes_left_out nodes, then the job fails; otherwise it reports."
        ),
    )
