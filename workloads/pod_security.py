"""Baseline, less only what the fabric needs: the narrow exemption Pod Security Admission lacks.

Where the fabric needs something outside Pod Security `baseline` (GKE GPUDirect: hostPath
volumes and NET_ADMIN for the rxdm sidecar; AKS InfiniBand: SYS_RESOURCE for the trainer to
raise its locked-memory limit), the job's namespace must enforce `privileged`
(workloads/identity.py): Pod Security Admission judges a whole namespace at one level, and its
only finer exemptions (usernames, runtime classes, namespaces) live in the API server's
AdmissionConfiguration file (https://kubernetes.io/docs/concepts/security/pod-security-admission/#exemptions),
which EKS, AKS and GKE do not let a user set. So a `privileged` namespace would admit any pod:
privileged containers, host namespaces, any host path, any capability.

This ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30),
bound to the job's namespace only, puts baseline back for every pod there, with exactly the
fabric's exceptions: the host paths its volumes name, and per container the capabilities that
container is given beyond baseline's list. Everything else baseline refuses is refused: a
privileged container, the host's network/PID/IPC namespaces, host ports, an Unconfined seccomp
profile, an unmasked /proc.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.contract import GpuCluster
from infra.device_admission import ADMISSION, deny_binding
from workloads.names import PYTORCHJOB_CONTAINER, TRAINER_CONTAINER, JobNames
from workloads.pod import security_context

# Pod Security Standards, baseline, "Capabilities": the allowed additions
# (https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline).
BASELINE_CAPABILITIES = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                         "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                         "SYS_CHROOT")
CONTAINERS = ("object.spec.containers"
              " + (has(object.spec.initContainers) ? object.spec.initContainers : [])"
              " + (has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])")


@dataclass(frozen=True)
class FabricExceptions:
    """What the fabric's pods hold beyond baseline: host paths, and capabilities by container."""

    host_paths: tuple[str, ...]
    capabilities: Mapping[str, tuple[str, ...]]  # container name -> added beyond baseline

    @property
    def any(self) -> bool:
        return bool(self.host_paths or any(self.capabilities.values()))


def _beyond_baseline(added: Iterable[str] | None) -> tuple[str, ...]:
    return tuple(sorted(set(added or ()) - set(BASELINE_CAPABILITIES)))


def fabric_exceptions(cluster: GpuCluster) -> FabricExceptions:
    """Read off the contract: the fabric's hostPath volumes, the trainer's added capabilities
    (both container names: JobSet's and the PyTorchJob's) and each sidecar's."""
    interconnect = cluster.interconnect
    paths = tuple(sorted({v.host_path.path for v in interconnect.volumes if v.host_path}))
    trainer_caps = security_context(cluster).capabilities
    trainer = _beyond_baseline(trainer_caps.add if trainer_caps else None)
    capabilities: dict[str, tuple[str, ...]] = {}
    if trainer:
        capabilities = {TRAINER_CONTAINER: trainer, PYTORCHJOB_CONTAINER: trainer}
    for sidecar in interconnect.sidecars:
        context = sidecar.security_context
        added = context.capabilities.add if context and context.capabilities else None
        if _beyond_baseline(added):
            capabilities[sidecar.name] = _beyond_baseline(added)
    return FabricExceptions(paths, capabilities)


def _cel_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _capability_allowed(exceptions: FabricExceptions) -> str:
    """CEL over `cap` (an added capability) in container `c`."""
    terms = [f"cap in {_cel_list(BASELINE_CAPABILITIES)}"]
    terms += [f"(c.name == '{name}' && cap in {_cel_list(caps)})"
              for name, caps in sorted(exceptions.capabilities.items()) if caps]
    return " || ".join(terms)


def validations(exceptions: FabricExceptions) -> list[tuple[str, str]]:
    """(CEL expression, message) pairs; a pod is admitted when every expression is true."""
    ctx = "has(c.securityContext)"
    seccomp_ok = ("!has({0}.seccompProfile) || !has({0}.seccompProfile.type) || "
                  "{0}.seccompProfile.type != 'Unconfined'")
    return [
        (f"variables.containers.all(c, !{ctx} || !has(c.securityContext.privileged) || "
         "c.securityContext.privileged == false)",
         "privileged containers are refused in the training namespace (baseline)"),
        ("!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && "
         "!(has(object.spec.hostPID) && object.spec.hostPID) && "
         "!(has(object.spec.hostIPC) && object.spec.hostIPC)",
         "the host's network, PID and IPC namespaces are refused in the training namespace"),
        ("!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath) || "
         f"v.hostPath.path in {_cel_list(exceptions.host_paths)})",
         "hostPath volumes are refused in the training namespace, but for the fabric's: "
         + (", ".join(exceptions.host_paths) or "none")),
        (f"variables.containers.all(c, !{ctx} || !has(c.securityContext.capabilities) || "
         "!has(c.securityContext.capabilities.add) || "
         f"c.securityContext.capabilities.add.all(cap, {_capability_allowed(exceptions)}))",
         "capabilities beyond baseline are refused in the training namespace, but for the "
         "fabric's: " + ("; ".join(f"{n}: {', '.join(c)}"
                                    for n, c in sorted(exceptions.capabilities.items()))
                         or "none")),
        ("variables.containers.all(c, !has(c.ports) || "
         "c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
         "host ports are refused in the training namespace (baseline)"),
        ("(!has(object.spec.securityContext) || ("
         + seccomp_ok.format("object.spec.securityContext") + ")) && "
         f"variables.containers.all(c, !{ctx} || ("
         + seccomp_ok.format("c.securityContext") + "))",
         "an Unconfined seccomp profile is refused in the training namespace (baseline)"),
        (f"variables.containers.all(c, !{ctx} || !has(c.securityContext.procMount) || "
         "c.securityContext.procMount == 'Default')",
         "an unmasked /proc is refused in the training namespace (baseline)"),
    ]


def policy_name(names: JobNames) -> str:
    """Cluster-scoped: carries the namespace to stay unique in the cluster."""
    return f"{names.namespace}-{names.job}-fabric-pod-security"


def fabric_pod_security(name: str, names: JobNames, cluster: GpuCluster,
                        opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """The policy and its binding (Deny) on the job's namespace, when the fabric makes that
    namespace enforce `privileged`; nothing otherwise (PSA's baseline already applies)."""
    exceptions = fabric_exceptions(cluster)
    if not exceptions.any:
        return []
    cluster_name = policy_name(names)
    policy = ADMISSION.ValidatingAdmissionPolicy(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=cluster_name, labels=names.common_labels),
        spec=ADMISSION.ValidatingAdmissionPolicySpecArgs(
            failure_policy="Fail",
            match_constraints=ADMISSION.MatchResourcesArgs(resource_rules=[
                ADMISSION.NamedRuleWithOperationsArgs(
                    api_groups=[""], api_versions=["v1"], operations=["CREATE", "UPDATE"],
                    resources=["pods", "pods/ephemeralcontainers"])]),
            variables=[ADMISSION.VariableArgs(name="containers", expression=CONTAINERS)],
            validations=[ADMISSION.ValidationArgs(expression=expression, message=message,
                                                  reason="Forbidden")
                         for expression, message in validations(exceptions)]),
        opts=opts)
    return [policy, deny_binding(f"{name}-binding", policy, cluster_name, "In", names.namespace,
                                 opts, labels=names.common_labels)]
