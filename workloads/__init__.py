"""The cloud-free workload layer: Kubernetes objects that run the trainer on any GpuCluster.

Never imports a cloud SDK; everything it knows about the cloud comes through infra.contract.
The component lives in workloads/component.py (`from workloads.component import TrainingJob`);
this file imports nothing, so the laptop's readers of the cluster (workloads.waiting,
workloads.why, `python -m torchrec_cloud status`) do not load Pulumi, and no module of the
package imports back through it.
"""
