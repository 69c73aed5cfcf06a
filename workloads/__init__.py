"""The cloud-free workload layer: Kubernetes objects that run the trainer on any GpuCluster.

Never imports a cloud SDK; everything it knows about the cloud comes through infra.contract.
The component is imported on first use, so the laptop's readers of the cluster
(workloads.waiting, workloads.why, `python -m torchrec_cloud status`) do not load Pulumi.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TrainingJob", "TrainingJobArgs"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from workloads import component

        return getattr(component, name)
    raise AttributeError(f"module 'workloads' has no attribute {name!r}")
