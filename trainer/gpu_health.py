"""A short GPU health check per rank before training: the checks of NVIDIA DCGM's level-1
diagnostics that need no extra daemon, read through NVML where the image has its Python binding
(nvidia-ml-py, imported as pynvml), and a matmul throughput floor (trainer/fabric_gate.py times
it). A failing GPU fails its node, which the gate leaves out, not the job.

What each reading means (NVML API reference, nvml.h):
- uncorrected volatile ECC errors since the driver loaded: memory that returned bad data;
- retired pages pending (A100 and older) or a row remap pending / failed (A100 and newer): the
  GPU needs a reset, or has run out of spare rows;
- clock event reasons HW slowdown, HW thermal / power brake slowdown, SW thermal slowdown: the
  GPU is throttled now, so it would hold the whole gang back.
XID errors are kernel log lines; NVML reports only new ones to a registered event set, so they
are not read here (the matmul floor catches a GPU an XID left crippled).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import List, Optional

log = logging.getLogger("trainer.gpu_health")

# nvml.h clocksEventReasons bits (nvmlClocksThrottleReason* in older headers).
HW_SLOWDOWN = 0x08
SW_THERMAL = 0x20
HW_THERMAL = 0x40
HW_POWER_BRAKE = 0x80
THROTTLED = {HW_SLOWDOWN: "HW slowdown", SW_THERMAL: "SW thermal slowdown",
             HW_THERMAL: "HW thermal slowdown", HW_POWER_BRAKE: "HW power brake slowdown"}


@dataclass
class GpuReadings:
    """What NVML said about one GPU; None where the GPU or driver does not support it."""

    index: int
    uncorrected_ecc: Optional[int] = None
    retired_pages_pending: Optional[bool] = None
    row_remap_pending: Optional[bool] = None
    row_remap_failed: Optional[bool] = None
    clock_event_reasons: Optional[int] = None


def judge_gpu(r: GpuReadings) -> List[str]:
    """The problems in one GPU's readings ([] = healthy): a pure function, fed by tests."""
    problems = []
    if r.uncorrected_ecc:
        problems.append(f"GPU {r.index}: {r.uncorrected_ecc} uncorrected ECC errors")
    if r.retired_pages_pending:
        problems.append(f"GPU {r.index}: retired pages pending (needs a reset)")
    if r.row_remap_failed:
        problems.append(f"GPU {r.index}: row remapping failed (no spare rows)")
    elif r.row_remap_pending:
        problems.append(f"GPU {r.index}: row remap pending (needs a reset)")
    reasons = [name for bit, name in THROTTLED.items() if (r.clock_event_reasons or 0) & bit]
    if reasons:
        problems.append(f"GPU {r.index}: throttled ({', '.join(reasons)})")
    return problems


def read_gpu(index: int) -> Optional[GpuReadings]:
    """NVML's readings for GPU `index`, or None where NVML's binding is not in the image."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        log.warning("GPU health: nvidia-ml-py is not installed; only the matmul floor is checked")
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:  # no driver library in reach: not the GPU's fault
        log.warning("GPU health: NVML did not start (%s); only the matmul floor is checked", error)
        return None
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        readings = GpuReadings(index=index)

        def ask(name: str, call):  # one unsupported query must not hide the others
            try:
                setattr(readings, name, call())
            except pynvml.NVMLError:
                pass

        ask("uncorrected_ecc", lambda: pynvml.nvmlDeviceGetTotalEccErrors(
            handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC))
        ask("retired_pages_pending", lambda: pynvml.nvmlDeviceGetRetiredPagesPendingStatus(
            handle) == pynvml.NVML_FEATURE_ENABLED)
        try:  # (corrected rows, uncorrected rows, remap pending, remap failure occurred)
            _, _, pending, failed = pynvml.nvmlDeviceGetRemappedRows(handle)
            readings.row_remap_pending, readings.row_remap_failed = bool(pending), bool(failed)
        except pynvml.NVMLError:
            pass
        ask("clock_event_reasons",
            lambda: pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
        return readings
    finally:
        pynvml.nvmlShutdown()


def gpu_problems(device_type: str, index: int) -> List[str]:
    """This rank's GPU problems; on CPU the check is skipped, with one log line."""
    if device_type != "cuda":
        log.info("GPU health check skipped: no GPU (CPU run)")
        return []
    readings = read_gpu(index)
    return judge_gpu(readings) if readings is not None else []
