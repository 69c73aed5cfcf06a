"""Where each cloud's NVIDIA DCGM exporter runs, and what it exports: one place for the stack
that installs it (infra/aws/addons.py, infra/azure/addons.py) and the laptop that reads it
(torchrec_cloud/gpu_metrics.py). No Pulumi import: `status` reads this without the SDKs.

- AWS: NVIDIA's own Helm chart `dcgm-exporter` (NVIDIA/dcgm-exporter, deployment/), release
  RELEASE in kube-system beside the NVIDIA device plugin. Its pods carry the chart's selector
  labels `app.kubernetes.io/name: dcgm-exporter` (deployment/templates/_helpers.tpl
  `dcgm-exporter.selectorLabels`) and listen on `service.port` 9400.
- Azure: the GPU Operator (which already installs the driver and device plugin there) deploys its
  own exporter, enabled by default (gpu-operator v25.10.0 deployments/gpu-operator/values.yaml
  `dcgmExporter.enabled: true`): DaemonSet and Service `nvidia-dcgm-exporter`, pod label
  `app: nvidia-dcgm-exporter`, port 9400, in the operator's namespace
  (assets/state-dcgm-exporter/0400_service.yaml, 0800_daemonset.yaml). A second exporter from
  the chart would run a second embedded DCGM host engine on the same GPUs for nothing.
- GCP: GKE's managed DCGM package (infra/gcp/cluster.py MONITORED_COMPONENTS) runs its exporter
  in gke-managed-system and sends its samples to Cloud Monitoring (Managed Service for
  Prometheus). The pod proxy would need no Service, but it cannot be used here: GKE gives that
  exporter no documented label or port to find it by (GKE owns and may change it), and the
  private cluster's control plane reaches the nodes only on 443, 10250 and the webhook ports
  (infra/gcp/network.py, the control-plane-to-webhooks firewall rule), so
  pods/<pod>:9400/proxy would time out. So the metrics are read in Cloud Monitoring.
"""

from __future__ import annotations

from dataclasses import dataclass

METRICS_PORT = 9400  # the chart's service.port and the GPU Operator's exporter port
AWS_RELEASE = "dcgm-exporter"  # Helm release name = chart name, so the chart's fullname is this
GPU_OPERATOR_NAMESPACE = "gpu-operator"


@dataclass(frozen=True)
class Exporter:
    """How the API server's pod proxy reaches one cloud's exporter pods."""

    namespace: str
    pod_selector: str  # a Kubernetes label selector, as `labelSelector=` takes it
    port: int = METRICS_PORT


EXPORTERS: dict[str, Exporter] = {
    "aws": Exporter("kube-system", f"app.kubernetes.io/name={AWS_RELEASE}"),
    "azure": Exporter(GPU_OPERATOR_NAMESPACE, "app=nvidia-dcgm-exporter"),
}

# Why there is no exporter to read on a cloud, for `status` to print instead of a figure.
NOT_PROXIED: dict[str, str] = {
    "gcp": ("GKE's managed DCGM exporter runs in gke-managed-system with no label to find it "
            "by, and the private control plane reaches the nodes only on 443, 10250 and the "
            "webhook ports, not the exporter's 9400: its GPU metrics are in Cloud Monitoring: "
            "see the cluster's Observability tab (GPU), or PromQL DCGM_FI_DEV_GPU_UTIL in "
            "Metrics Explorer"),
}

# The counters the AWS exporter collects: the chart's default list (the ConfigMap in
# deployment/templates/metrics-configmap.yaml at 4.5.3-4.8.2, which the DaemonSet mounts over
# /etc/dcgm-exporter/default-counters.csv; values.yaml holds no list) without
# - its DCGM_FI_PROF_* profiling fields, which need CAP_SYS_ADMIN
#   (internal/pkg/capabilities/capabilities.go: "Required for profiling metrics"), so the
#   exporter runs with no capability at all;
# - DCGM_FI_DEV_ENC_UTIL and DCGM_FI_DEV_DEC_UTIL (video encoder and decoder: training uses
#   neither);
# - DCGM_FI_DEV_VGPU_LICENSE_STATUS (no vGPU here).
# Format: DCGM field, Prometheus type, help (the chart's `customMetrics`).
COUNTERS = """\
# DCGM FIELD, Prometheus metric type, help message
DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).
DCGM_FI_DEV_MEMORY_TEMP, gauge, Memory temperature (in C).
DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).
DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy consumption since boot (in mJ).
DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter, Total number of PCIe retries.
DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).
DCGM_FI_DEV_MEM_COPY_UTIL, gauge, Memory utilization (in %).
DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.
DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).
DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_FB_RESERVED, gauge, Framebuffer memory reserved (in MiB).
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, counter, Total number of NVLink bandwidth counters for all lanes.
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for uncorrectable errors
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for correctable errors
DCGM_FI_DEV_ROW_REMAP_FAILURE, gauge, Whether remapping of rows has failed
DCGM_FI_DRIVER_VERSION, label, Driver Version
"""
