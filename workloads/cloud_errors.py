"""The clouds' words for "no quota" and "no capacity", as they reach the Kubernetes API.

A cloud's refusal to create a node reaches the cluster as text: in the autoscaler's pod events
(GKE), in the autoscaler's status ConfigMap and its events (every Cluster Autoscaler), or only in
the autoscaler's log (EKS: upstream Cluster Autoscaler logs the Auto Scaling group's failed
activity and reports the group as "placeholder-cannot-be-fulfilled" without the EC2 reason).
These patterns turn that text into one of two answers a user can act on. Each pattern cites where
its words come from; the texts are matched case-insensitively, anywhere in the message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class Refusal(str, Enum):
    NO_QUOTA = "no_quota"
    NO_CAPACITY = "no_capacity"
    NO_RESERVATION = "no_reservation"  # the targeted capacity reservation is full or not active


@dataclass(frozen=True)
class CloudPattern:
    refusal: Refusal
    cloud: str  # "aws", "azure" or "gcp"
    pattern: re.Pattern[str]
    likely: bool = False  # the text names no cause; capacity is the likely one


def _p(refusal: Refusal, cloud: str, regex: str, likely: bool = False) -> CloudPattern:
    return CloudPattern(refusal, cloud, re.compile(regex, re.IGNORECASE), likely)


Q, C, R = Refusal.NO_QUOTA, Refusal.NO_CAPACITY, Refusal.NO_RESERVATION

PATTERNS: tuple[CloudPattern, ...] = (
    # AWS. EC2 error codes (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html):
    # VcpuLimitExceeded, MaxSpotInstanceCountExceeded, InstanceLimitExceeded are quotas;
    # InsufficientInstanceCapacity is capacity. The texts are EC2's launch errors as an Auto
    # Scaling group's failed activity repeats them (EC2 user guide, "Troubleshoot instance launch
    # issues": "You have requested more vCPU capacity than your current vCPU limit of 0 allows";
    # "We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you
    # requested"; Auto Scaling troubleshooting: "There is no Spot capacity available that matches
    # your request"). Cluster Autoscaler logs the activity as "ASG %s scaling failed with
    # description: %s" (cloudprovider/aws/auto_scaling_groups.go, isNodeGroupAvailable).
    _p(Q, "aws", r"VcpuLimitExceeded"),
    _p(Q, "aws", r"requested more vCPU capacity than your current vCPU limit"),
    _p(Q, "aws", r"MaxSpotInstanceCountExceeded|InstanceLimitExceeded"),
    # Reservations (aws.capacityReservation): EC2's ReservationCapacityExceeded, "The targeted
    # Capacity Reservation does not [have] enough available instance capacity" (errors-overview);
    # a Capacity Block launches nothing before its start ("when the reservation begins, you can
    # use the Capacity Block", EC2 user guide, capacity-blocks-using; its state is "scheduled"
    # until then, capacity-blocks-view) and a full or inactive reservation is refused as
    # InsufficientInstanceCapacity naming the reservation. Listed before plain capacity: the
    # answer is the reservation, not the zone.
    _p(R, "aws", r"ReservationCapacityExceeded"),
    _p(R, "aws", r"InsufficientInstanceCapacity.{0,200}\b(capacity reservation|capacity block)"),
    _p(R, "aws", r"\b(capacity reservation|capacity block)\b.{0,120}\b(not (yet )?active|"
                 r"scheduled|not in the active state)"),
    _p(C, "aws", r"InsufficientInstanceCapacity"),
    _p(C, "aws", r"do not have sufficient \S+ capacity"),
    _p(C, "aws", r"no Spot capacity available"),
    # Azure. Quota: Resource Manager's quota error ("Operation could not be completed as it
    # results in exceeding approved {family} Cores quota", learn.microsoft.com/azure/
    # azure-resource-manager/troubleshooting/error-resource-quota) and AKS's QuotaExceeded
    # (learn.microsoft.com/troubleshoot/azure/azure-kubernetes/create-upgrade-delete/
    # error-code-quotaexceeded). Capacity: AllocationFailed, ZonalAllocationFailed,
    # OverconstrainedAllocationRequest, OverconstrainedZonalAllocationRequest (learn.microsoft.com/
    # troubleshoot/azure/virtual-machines/windows/allocation-failure) and SkuNotAvailable, the size
    # not offered in that region or zone now (azure-resource-manager/troubleshooting/
    # error-sku-not-available). AKS's Cluster Autoscaler puts the scale set's error into its
    # "FailedToScaleUpGroup" event and its status ConfigMap (core/scaleup/orchestrator/executor.go).
    _p(Q, "azure", r"\bQuotaExceeded\b"),
    _p(Q, "azure", r"exceeding approved .{0,80}quota"),
    _p(C, "azure", r"\b(Zonal)?AllocationFailed\b"),
    _p(C, "azure", r"\bOverconstrained(Zonal)?AllocationRequest\b"),
    _p(C, "azure", r"\bSkuNotAvailable\b"),
    # What AKS's Cluster Autoscaler itself reports for a scale set VM that failed to provision
    # (kubernetes/autoscaler cluster-autoscaler/cloudprovider/azure azure_scale_set.go and
    # azure_scale_set_instance_cache.go, instanceStatusFromVM): ErrorClass OutOfResources, code
    # "provisioning-state-failed", "Azure failed to provision a node for this node group". It
    # reaches the ScaleUpFailed event ("Failed adding %v nodes to group %v due to
    # OutOfResource.provisioning-state-failed; source errors: ...", clusterstate/clusterstate.go)
    # and the status ConfigMap's backoffInfo. Azure's own code is not in it: most often a
    # stock-out (AllocationFailed), so "likely"; the activity log has the exact one.
    _p(C, "azure", r"provisioning-state-failed|Azure failed to provision a node", likely=True),
    # GCP. GKE's autoscaler writes a pod event "Node scale up in zones %v associated with this pod
    # failed: %v. Pod is at risk of not being scheduled." with "GCE quota exceeded" or "GCE out of
    # resources" (GKE cluster-autoscaler pkg/visibility events, failedScaleUpReason); its
    # visibility log ids are scale.up.error.quota.exceeded and scale.up.error.out.of.resources
    # (cloud.google.com/kubernetes-engine/docs/how-to/cluster-autoscaler-visibility). Compute
    # Engine codes: QUOTA_EXCEEDED (e.g. "Quota 'GPUS_ALL_REGIONS' exceeded", the status
    # ConfigMap's backoffInfo in clusterstate/utils/status_test.yaml), and ZONE_RESOURCE_POOL_
    # EXHAUSTED(_WITH_DETAILS) / RESOURCE_POOL_EXHAUSTED (cloudprovider/gce/autoscaling_gce_client.go,
    # isResourcePoolExhaustedErrorCode; cloud.google.com/compute/docs/troubleshooting/
    # troubleshooting-resource-availability, a "stockout").
    _p(Q, "gcp", r"GCE quota exceeded"),
    _p(Q, "gcp", r"\bQUOTA_EXCEEDED\b|scale\.up\.error\.quota\.exceeded"),
    _p(Q, "gcp", r"Quota '[A-Z0-9_]+' exceeded|GPUS_ALL_REGIONS"),
    _p(C, "gcp", r"GCE out of resources|scale\.up\.error\.out\.of\.resources"),
    _p(C, "gcp", r"\b(ZONE_)?RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS)?\b"),
    _p(C, "gcp", r"does not have enough resources available to fulfill the request|stockout"),
)


def match(text: str) -> CloudPattern | None:
    """The first pattern found in `text`; quotas are listed before capacity in each cloud, so a
    message that names both (a spot request refused for quota) reads as quota, and a
    reservation's refusal before the zone's."""
    for candidate in PATTERNS:
        if candidate.pattern.search(text):
            return candidate
    return None
