"""List prices of what the stack creates besides its machines: the one table infra/estimate.py
reads. The machines' own prices live in infra/catalog/machines.py.

Every figure is a public list price in USD for the catalog's reference regions (us-east-1,
eastus, us-central1), checked 2026-11; each says where it comes from and whether a stored copy
of a source confirmed it (`verified`). Prices drift and differ by region: the estimate names the
region its prices are for. Rows per figure: docs/catalog-sources.md, "Other prices".
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.catalog.cloud import Cloud

# How the three clouds turn a monthly list price into an hourly one (AWS and Azure bill 730
# hours a month in their calculators; Google's "per month" prices are 730 hours too).
HOURS_PER_MONTH = 730.0
PRICE_REGIONS = {Cloud.AWS: "us-east-1", Cloud.AZURE: "eastus", Cloud.GCP: "us-central1"}


@dataclass(frozen=True)
class Price:
    """One list price: `usd` per `unit`, where it comes from, and whether a stored copy of the
    source showed this very figure (False: from memory or a third party, to re-check)."""

    usd: float
    unit: str
    source: str
    verified: bool = True


# --- Control planes ---------------------------------------------------------------------------
EKS_CLUSTER_HOUR = {
    # upgradePolicy.supportType (infra/aws/cluster.py support_type). A cluster merely set to
    # EXTENDED pays standard until its minor leaves standard support; the estimate counts the
    # extended fee once kubernetes.extendedSupport accepts it, as a bound.
    "STANDARD": Price(0.10, "cluster-hour", "https://aws.amazon.com/eks/pricing/ (not in a stored "
                      "copy; cortexlabs/cortex PR #783 'Update EKS price to $0.10 per hour')",
                      verified=False),
    "EXTENDED": Price(0.60, "cluster-hour", "AWS notice quoted in WGBH-MLA/chowda issue 217: "
                      "'clusters ... in extended support will be charged at $0.60 per cluster "
                      "hour'; https://docs.aws.amazon.com/eks/latest/userguide/enable-extended-support.html"),
}
AKS_TIER_HOUR = {
    # sku.tier (infra/azure/cluster.py control_plane_tier): Standard, Premium with LTS.
    "Standard": Price(0.10, "cluster-hour", "https://azure.microsoft.com/pricing/details/kubernetes-service/ "
                      "(quoted by techmarmot.com's AKS tier table: Standard $0.10 per cluster/hour)"),
    "Premium": Price(0.60, "cluster-hour", "https://azure.microsoft.com/pricing/details/kubernetes-service/ "
                     "(Premium = Standard + Long-Term Support; figure not in a stored copy)",
                     verified=False),
}
# Regional cluster: GKE's free tier credit applies "only to zonal and Autopilot clusters"
# (infra/gcp/cluster.py).
GKE_CLUSTER_HOUR = Price(0.10, "cluster-hour", "https://cloud.google.com/kubernetes-engine/pricing "
                         "(cluster management fee; cited in infra/gcp/cluster.py)")

# --- Outbound paths (what infra/<cloud>/network.py creates) -----------------------------------
# AWS: one NAT gateway in the GPU zone with one Elastic IP; the S3 gateway endpoint is free.
AWS_NAT_GATEWAY_HOUR = Price(0.045, "gateway-hour", "https://aws.amazon.com/vpc/pricing/ "
                             "(us-east-1 $0.045/h, quoted by cloudburn.io and basavytix.com 2026; "
                             "plus $0.045 per GB processed, not counted)")
AWS_PUBLIC_IPV4_HOUR = Price(0.005, "address-hour", "https://aws.amazon.com/vpc/pricing/ (public "
                             "IPv4 $0.005/h, quoted by cloudburn.io 2026)")
# GCP: Cloud NAT on a Cloud Router, one AUTO_ONLY external address (64 ports per VM by default:
# one address serves the nodes here).
GCP_NAT_PER_VM_HOUR = Price(0.0014, "VM-hour", "https://cloud.google.com/nat/pricing ($0.0014 x "
                            "VMs using the gateway, up to 32)")
GCP_NAT_MAX_HOUR = Price(0.044, "gateway-hour", "https://cloud.google.com/nat/pricing (more than "
                         "32 VMs: $0.044)")
GCP_NAT_VM_CAP = 32
GCP_NAT_IP_HOUR = Price(0.005, "address-hour", "https://cloud.google.com/nat/pricing (external IP "
                        "used by a NAT gateway $0.005/h)")
# Azure: no NAT gateway; AKS's default outboundType loadBalancer makes a Standard Load Balancer
# with one public IP in the node resource group (infra/azure/cluster.py sets no outboundType).
AZURE_LOAD_BALANCER_HOUR = Price(0.025, "hour", "https://azure.microsoft.com/pricing/details/load-balancer/ "
                                 "(Standard, first 5 rules; not in a stored copy)", verified=False)
AZURE_PUBLIC_IP_HOUR = Price(0.005, "address-hour", "https://azure.microsoft.com/pricing/details/ip-addresses/ "
                             "(Standard static IPv4; not in a stored copy)", verified=False)
# Azure's registry bills a daily fee (Standard SKU, infra/azure/registry.py); ECR and Artifact
# Registry bill storage only (cents a month for one image).
ACR_STANDARD_DAY = Price(0.667, "day", "https://azure.microsoft.com/pricing/details/container-registry/ "
                         "(Standard $0.667/day; not in a stored copy)", verified=False)

# --- Shared file systems ----------------------------------------------------------------------
# FSx for Lustre, per GB-month of provisioned capacity, by deployment type and MB/s/TiB.
FSX_LUSTRE_GB_MONTH = {
    ("PERSISTENT_2", 125): Price(0.145, "GB-month", "https://aws.amazon.com/fsx/lustre/pricing/ "
                                 "(quoted by c3x.dev: ~$0.145/GB-month SSD 125 MB/s/TiB)"),
    ("PERSISTENT_2", 250): Price(0.210, "GB-month", "https://aws.amazon.com/fsx/lustre/pricing/",
                                 verified=False),
    ("PERSISTENT_2", 500): Price(0.340, "GB-month", "https://aws.amazon.com/fsx/lustre/pricing/",
                                 verified=False),
    ("PERSISTENT_2", 1000): Price(0.600, "GB-month", "https://aws.amazon.com/fsx/lustre/pricing/",
                                  verified=False),
    ("PERSISTENT_1", 50): Price(0.140, "GB-month", "https://aws.amazon.com/fsx/lustre/pricing/",
                                verified=False),
    ("PERSISTENT_1", 100): Price(0.190, "GB-month", "https://aws.amazon.com/fsx/lustre/pricing/",
                                 verified=False),
    ("PERSISTENT_1", 200): Price(0.290, "GB-month", "https://aws.amazon.com/fsx/lustre/pricing/",
                                 verified=False),
    ("SCRATCH_2", None): Price(0.140, "GB-month", "https://aws.amazon.com/fsx/lustre/pricing/ "
                               "(quoted by learning-aws.readthedocs.io: Scratch 2 ~$0.140/GB-month)"),
}
# Azure NetApp Files, per GiB-hour of capacity pool, by service level.
ANF_GIB_HOUR = {
    "Standard": Price(0.000202, "GiB-hour", "https://azure.microsoft.com/pricing/details/netapp/",
                      verified=False),
    "Premium": Price(0.000403, "GiB-hour", "https://learn.microsoft.com/azure/azure-netapp-files/"
                     "azure-netapp-files-cost-model ('billed at $0.000403 per GiB/hour' for Premium)"),
    "Ultra": Price(0.000538, "GiB-hour", "https://azure.microsoft.com/pricing/details/netapp/",
                   verified=False),
}
# Filestore, per GiB-month of provisioned capacity, by tier (default performance), us-central1:
# the "monthly price" column of a stored copy of https://cloud.google.com/filestore/docs/service-tiers
# (ja: Basic HDD $0.16, Basic SSD $0.30, Zonal lower capacity band $0.25, Zonal higher capacity
# band "formerly High Scale SSD" $0.25, Enterprise $0.45 per GiB). HIGH_SCALE_SSD is that higher
# band of Zonal (10-100 TiB), so the same price. Regional, Enterprise's successor, is not in that
# table: Enterprise's figure, unverified. The pricing page's us-west1 example ($0.000274/GiB-h
# Basic HDD, ~$0.20) is an older or other-region figure.
_TIERS = "https://cloud.google.com/filestore/docs/service-tiers (stored copy, us-central1)"
FILESTORE_GIB_MONTH = {
    "BASIC_HDD": Price(0.16, "GiB-month", _TIERS),
    "BASIC_SSD": Price(0.30, "GiB-month", _TIERS),
    "ZONAL": Price(0.25, "GiB-month", _TIERS),
    "REGIONAL": Price(0.45, "GiB-month", f"{_TIERS}: Enterprise's price; Regional not listed",
                      verified=False),
    "HIGH_SCALE_SSD": Price(0.25, "GiB-month", f"{_TIERS}: the Zonal 10-100 TiB band that "
                            "replaces it"),
}

# --- Checkpoint storage (object store, standard class) ------------------------------------------
OBJECT_STORE_GB_MONTH = {
    Cloud.AWS: Price(0.023, "GB-month", "https://aws.amazon.com/s3/pricing/ (S3 Standard $0.023, "
                     "quoted by learning-aws.readthedocs.io)"),
    Cloud.AZURE: Price(0.0184, "GB-month", "https://azure.microsoft.com/pricing/details/storage/blobs/ "
                       "(hot LRS; not in a stored copy)", verified=False),
    Cloud.GCP: Price(0.020, "GB-month", "https://cloud.google.com/storage/pricing (us-central1 "
                     "Standard $0.020)"),
}


def per_hour(price: Price, quantity: float = 1.0) -> float:
    """USD per hour of `quantity` units at `price` (monthly and daily prices spread over hours)."""
    per_unit = {"GB-month": 1 / HOURS_PER_MONTH, "GiB-month": 1 / HOURS_PER_MONTH,
                "day": 1 / 24}.get(price.unit, 1.0)
    return price.usd * per_unit * quantity
