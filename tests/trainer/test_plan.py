"""The sizing advisor (python -m trainer.plan): torchrec's planner on the MLPerf tables and a
catalog machine, offline on CPU. Its figures are the planner's own, its plan is the faster one
the planner would choose unconstrained, and the stack's torch-free checkpoint estimate bounds
what the plan really puts on a rank."""

import logging
import re

import pytest

from infra.catalog import machine
from trainer.plan import advise
from trainer.sizing import DATA_PARALLEL_MAX_MB, largest_rank_checkpoint_bytes, table_set

MLPERF = table_set("mlperf")
P5 = machine("aws", "p5.48xlarge")


def test_the_advisor_uses_the_planners_faster_plan_and_reports_its_own_memory_stats(caplog):
    """MLPerf on 2 x p5.48xlarge: 18 small tables replicated (data-parallel), the 8 large ones
    sharded; the planner's step estimate equals its unconstrained choice and beats the
    no-data-parallel rule; per-rank HBM and host memory are what torchrec's EmbeddingStats
    prints for the same plan; the torch-free bound the settings use covers the fullest rank."""
    with caplog.at_level(logging.INFO):
        advice = advise(MLPERF, "aws", "p5.48xlarge", 2, debug=True)
    # EmbeddingStats' rank table: "#  <rank>  <HBM GiB> (<ratio>)  <DDR GiB> (<ratio>)  ..."
    printed = {}
    for record in caplog.records:
        match = re.match(r"#\s+(\d+)\s+([\d.]+) \(\d+%\)\s+([\d.]+) \(\d+%\)",
                         record.getMessage())
        if match:
            printed[int(match.group(1))] = (float(match.group(2)), float(match.group(3)))
    assert sorted(printed) == list(range(16))
    for rank in range(16):
        assert (round(advice.hbm_gib[rank], 3), round(advice.ddr_gib[rank], 3)) == printed[rank]

    kinds = list(advice.sharding.values())
    assert kinds.count("data_parallel") == 18
    assert advice.step_ms == pytest.approx(advice.compare["free"], rel=0.02)
    assert advice.step_ms < 0.9 * advice.compare["sharded"]
    assert max(advice.hbm_gib) < P5.gpu_memory_gib
    bound = largest_rank_checkpoint_bytes(MLPERF.rows, 128, "adagrad", DATA_PARALLEL_MAX_MB, 16, 8)
    assert advice.largest_rank_write_gb * 1e9 <= bound
    assert advice.checkpoint_gb > advice.largest_rank_write_gb * 16 * 0.5  # spread, not on one rank
