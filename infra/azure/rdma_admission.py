"""Only the job's namespace may ask for `rdma/ib`, the node's InfiniBand HCAs.

The RDMA shared device plugin hands every HCA of a node to any pod that requests one `rdma/ib`
([aks-ib] rdmaHcaMax 63, infra/azure/interconnect.py), and InfiniBand traffic bypasses Cilium:
the job's NetworkPolicy does not cover it. A ResourceQuota cannot say "zero everywhere but
here" (it is per namespace, and a namespace created later has none), so a
ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30;
https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/) denies a
pod that requests or limits `rdma/ib` in any container or init container, bound to every
namespace except the job's (`kubernetes.io/metadata.name`, which the API server sets to the
namespace's name and nobody can change). The policy itself is infra/device_admission.py's, which
AWS uses for EFA.
"""

from __future__ import annotations

import pulumi

from infra.azure.interconnect import RDMA_RESOURCE
from infra.device_admission import restrict_device

SHORT = "rdma-ib"


def restrict_rdma(prefix: str, job_namespace: str,
                  opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """The policy and its binding (Deny); the job waits for both."""
    return restrict_device(prefix, SHORT, RDMA_RESOURCE,
                           "every InfiniBand HCA of the node, outside network policy",
                           job_namespace, opts)
