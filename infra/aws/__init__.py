"""AWS: EKS with GPU managed node groups, EFA, FSx for Lustre and an S3 checkpoint bucket."""

from infra.aws.component import AwsGpuCluster

__all__ = ["AwsGpuCluster"]
