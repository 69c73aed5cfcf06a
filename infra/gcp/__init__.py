"""GCP: GKE with GPU pools, compact placement, Filestore and a Cloud Storage checkpoint bucket."""

from infra.gcp.component import GcpGpuCluster

__all__ = ["GcpGpuCluster"]
