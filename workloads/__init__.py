"""The cloud-free workload layer: Kubernetes objects that run the trainer on any GpuCluster.

Never imports a cloud SDK; everything it knows about the cloud comes through infra.contract.
"""

from workloads.component import TrainingJob, TrainingJobArgs

__all__ = ["TrainingJob", "TrainingJobArgs"]
