"""Defaults that differ per cloud: the reference setup (2 nodes of 8 x A100 40 GB) on each.

A stack file only states what differs from these; the merged result is then validated like any
user value, so a default can never silently break a rule.
"""

from __future__ import annotations

import copy
from typing import Any

from infra.catalog.cloud import Cloud

CLOUD_DEFAULTS: dict[Cloud, dict[str, Any]] = {
    Cloud.AWS: {
        "region": "us-east-1",
        "zones": ["us-east-1a", "us-east-1b"],
        "gpuZones": ["us-east-1a"],
        "systemPool": {"machineType": "m6i.xlarge"},
        "gpuPools": {
            "onDemand": {"machineType": "p4d.24xlarge"},
            "spot": {"machineType": "p4d.24xlarge"},
        },
        "sharedFileSystem": {"kind": "fsx-lustre"},
        "aws": {},
    },
    Cloud.AZURE: {
        "region": "eastus",
        "zones": ["1"],
        "gpuZones": ["1"],
        "systemPool": {"machineType": "Standard_D4s_v5"},
        "gpuPools": {
            "onDemand": {"machineType": "Standard_ND96asr_v4"},
            "spot": {"machineType": "Standard_ND96asr_v4"},
        },
        "sharedFileSystem": {"kind": "azure-netapp-files"},
        # AKSInfinibandSupport keeps each GPU pool on one InfiniBand network; a proximity
        # placement group on top only narrows where Azure may find ND capacity (docs/azure.md).
        "interconnect": {"placement": False},
        "azure": {},
    },
    Cloud.GCP: {
        "region": "us-central1",
        "zones": ["us-central1-a"],
        "gpuZones": ["us-central1-a"],
        "systemPool": {"machineType": "e2-standard-4"},
        "gpuPools": {
            "onDemand": {"machineType": "a2-highgpu-8g"},
            "spot": {"machineType": "a2-highgpu-8g"},
        },
        "sharedFileSystem": {"kind": "filestore"},
        # A2 machines talk over gVNIC TCP; GPUDirect-TCPX/TCPXO needs an A3 machine.
        "interconnect": {"fabric": False},
        "gcp": {},
    },
}

# Sections every stack gets even when the file does not mention them.
COMMON_DEFAULTS: dict[str, Any] = {"kubernetes": {}}


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge override into a copy of base; override wins, dicts merge key by key."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def with_cloud_defaults(raw: dict[str, Any]) -> dict[str, Any]:
    """The stack file's values over the defaults of the cloud it names (unknown cloud: as is)."""
    try:
        cloud = Cloud(raw.get("cloud"))
    except ValueError:
        return raw
    defaults = _merge(COMMON_DEFAULTS, CLOUD_DEFAULTS[cloud])
    return _merge(defaults, raw)
