"""TrainingJob: every Kubernetes object that runs the trainer on a GpuCluster, for any cloud.

It reads only the cluster contract and the settings sections, and every child depends on the
cluster's pools and add-ons (and the PV and job on the file system), so `pulumi up` creates the
job last and `pulumi destroy` deletes it first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pulumi

from infra.contract import GpuCluster
from infra.settings.model.checkpoints import Checkpoints
from infra.settings.model.dataset import Dataset
from infra.settings.model.interconnect import Interconnect
from infra.settings.model.job import Job, JobKind
from infra.settings.model.pools import NodePool
from infra.preemption import SaveEstimate, stop_budget
from workloads import (identity, jobset, kueue, network_policy, node_gate, pod_security,
                       prepare, pytorchjob, service, storage)
from workloads.command import job_command, pytorchjob_command
from workloads.flags import gate_leaves_out, trainer_flags
from workloads.names import PYTORCHJOB_CONTAINER, TRAINER_CONTAINER, JobNames
from workloads.pod import ContainerSpec, job_pool, pod_template
from workloads.watch import watch_commands, why_command


@dataclass(frozen=True)
class TrainingJobArgs:
    cluster: GpuCluster
    job: Job
    checkpoints: Checkpoints
    dataset: Dataset
    # What one checkpoint costs to write (infra/preemption.estimated_save); None: the catalog's
    # object-store figure.
    save_estimate: SaveEstimate | None = None
    # The cluster's Kubernetes minor version: some clouds' spot notice depends on it.
    kubernetes_version: str | None = None
    # Whether the fabric is used and the fabric gate runs (settings' interconnect section).
    interconnect: Interconnect = field(default_factory=Interconnect)
    # The CPU pool a dataset preparation with pool `cpu` runs on (settings' systemPool).
    system_pool: NodePool | None = None


class TrainingJob(pulumi.ComponentResource):
    """Namespace, identity, shared volume, headless service, network policy and the job."""

    job_name: pulumi.Output[str]
    watch_commands: pulumi.Output[list[str]]
    submitted: pulumi.Output[str]  # one line: the job exists, and how to see why it waits

    def __init__(self, name: str, args: TrainingJobArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("torchrec-cloud:workloads:TrainingJob", name, None, opts)
        cluster, job = args.cluster, args.job
        self._cluster = cluster
        names = JobNames.of(job)
        ready = list(cluster.ready)
        fs_ready = cluster.shared_file_system.ready

        def opts_for(*depends_on: pulumi.Resource,
                     aliases: list[pulumi.Alias] | None = None) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(provider=cluster.provider, parent=self,
                                          depends_on=[*ready, *depends_on], aliases=aliases)

        ns = identity.namespace(f"{name}-namespace", names, cluster, opts_for())
        account = identity.service_account(f"{name}-service-account", names, cluster, ns,
                                           opts_for(ns))
        volume = storage.persistent_volume(f"{name}-shared-fs-volume", names, cluster,
                                           opts_for(fs_ready))
        claim = storage.persistent_volume_claim(f"{name}-shared-fs-claim", names, cluster, volume,
                                                opts_for(ns, volume))
        headless = service.headless_service(f"{name}-rendezvous-service", names, opts_for(ns))
        policy = network_policy.same_job_only(f"{name}-network-policy", names, opts_for(ns))
        before_job = [fs_ready, ns, account, volume, claim, headless, policy,
                      *pod_security.fabric_pod_security(f"{name}-fabric-pod-security", names,
                                                        cluster, opts_for(ns))]
        deny = network_policy.deny_egress(f"{name}-egress-deny", names,
                                          cluster.pod_egress_denied, opts_for(ns))
        if deny is not None:  # before any pod of the job, the preparation's included
            before_job.append(deny)
        kube_api = gate_leaves_out(cluster, job, args.interconnect)  # it may leave a node out
        if kube_api:
            before_job += node_gate.node_gate_access(
                f"{name}-node-gate", names, opts_for(ns),
                [dict(pool.node_labels) for pool in cluster.gpu_pools.values()])
        run_id: pulumi.Output[str] | None = None  # the preparation Job's uid, if there is one
        if args.dataset.prepare.enabled:
            # Created before the training job, which it does not hold up: pulumi-kubernetes
            # skips awaiting it, and the training pods wait for its layout.json themselves, in
            # their main container (prepare.waiting_first).
            no_ingress = network_policy.prepare_no_ingress(f"{name}-prepare-network-policy",
                                                           names, opts_for(ns))
            prepare_account = identity.prepare_service_account(
                f"{name}-prepare-service-account", names, cluster, ns, opts_for(ns))
            preparation = prepare.prepare_job(
                names, cluster, job, args.dataset, args.system_pool,
                opts_for(fs_ready, ns, prepare_account, *cluster.preparation.ready, claim,
                         no_ingress, *([deny] if deny is not None else []),
                         aliases=[pulumi.Alias(name=f"{name}-dataset-prepare")]))
            before_job.append(preparation)
            run_id = prepare.job_uid(preparation)

        budget = stop_budget(cluster.cloud, job_pool(cluster, job).spot, job.termination_grace_seconds,
                             args.kubernetes_version)
        flags = trainer_flags(cluster, job, args.checkpoints, args.dataset, budget,
                              args.save_estimate, args.interconnect)
        # Control-plane add-ons follow the control plane's minor, not the nodes' (GKE's may lag).
        version = cluster.kubernetes_version or args.kubernetes_version
        if job.kind == JobKind.PYTORCH_JOB:
            operator = pytorchjob.training_operator(f"{name}-training-operator", version,
                                                    opts_for())
            queue = self._queue(name, names, job, version, ns, opts_for)
            command: list[pulumi.Input[str]] = pytorchjob_command(budget)
            if run_id is not None:  # in the main container: workloads/prepare.py waiting_first
                command = prepare.waiting_first(command, cluster, args.dataset, names, run_id)
            template = pod_template(cluster, job, names, budget, ContainerSpec(
                PYTORCHJOB_CONTAINER, command, flags, pytorchjob.PORT_NAME), kube_api=kube_api,
                pools=[f.pool for f in queue.flavors])
            workload: pulumi.CustomResource = pytorchjob.pytorch_job(
                f"{name}-pytorchjob", names, job, template,
                opts_for(*before_job, operator, *queue.resources), queue=queue.name)
        else:
            controller = jobset.jobset_controller(f"{name}-jobset-controller", version, opts_for())
            queue = self._queue(name, names, job, version, ns, opts_for)
            trainer: list[pulumi.Input[str]] = job_command(job, names, budget)
            if run_id is not None:
                # In the main container too, not an init container: Kueue's JobSet PodsReady
                # counts Ready pods (pkg/controller/jobs/jobset/jobset_controller.go PodsReady),
                # and a pod in its init containers is never Ready, so hours of preparation would
                # be taken for missing capacity and the gang evicted every ready timeout.
                trainer = prepare.waiting_first(trainer, cluster, args.dataset, names, run_id)
            template = pod_template(cluster, job, names, budget, ContainerSpec(
                TRAINER_CONTAINER, trainer, flags, "rendezvous"),
                kube_api=kube_api, pools=[f.pool for f in queue.flavors])
            workload = jobset.job_set(f"{name}-jobset", names, job, TRAINER_CONTAINER, template,
                                      opts_for(*before_job, controller, *queue.resources),
                                      queue=queue.name)

        # Resolved once the job object exists, so a stack output never names a job not yet made.
        self.job_name = workload.id.apply(lambda _: names.job)
        preparing = args.dataset.prepare.enabled
        cloud = cluster.cloud.value
        stack = pulumi.get_stack()  # `torchrec-cloud why --stack <this>` in the outputs
        self.watch_commands = workload.id.apply(
            lambda _: watch_commands(names, job.kind, preparing, cloud, stack))
        self.submitted = workload.id.apply(
            lambda _: f"job {names.job} submitted to namespace {names.namespace}; if its pods "
                      f"do not start, see why: {why_command(names, cloud, stack)}")
        self.register_outputs({"job_name": self.job_name, "watch_commands": self.watch_commands,
                               "submitted": self.submitted})

    def _queue(self, name: str, names: JobNames, job: Job, version: str | None,
               ns: pulumi.Resource, opts_for: Callable[..., pulumi.ResourceOptions]) -> "Queue":
        """Kueue, the job's flavors and queues (workloads/kueue.py); the JobSet waits for them."""
        cluster = self._cluster
        flavor_list = kueue.flavors(names.job, job.pool, cluster.gpu_pools)
        controller = kueue.controller(f"{name}-kueue", version, job.spot_shortage, flavor_list,
                                      opts_for(), job.kind)
        labels = names.common_labels
        made: list[pulumi.Resource] = [controller]
        for flavor in flavor_list:
            made.append(kueue.resource_flavor(f"{name}-flavor-{flavor.name}", flavor, labels,
                                              opts_for(controller)))
        made.append(kueue.cluster_queue(f"{name}-cluster-queue", names.job, flavor_list,
                                        labels, opts_for(*made)))
        # Cluster-scoped, for jobs submitted beside this one (torchrec_cloud/submit.py).
        made.append(kueue.priority_classes(f"{name}-priority-classes", labels, opts_for(controller)))
        made.append(kueue.local_queue(f"{name}-local-queue", names.job, names.namespace,
                                      names.job, labels, opts_for(ns, *made)))
        return Queue(names.job, flavor_list, made)


@dataclass(frozen=True)
class Queue:
    """What the JobSet is queued through: the LocalQueue's name, its flavor (the job's pool;
    workloads/kueue.py) and the objects."""

    name: str
    flavors: list[kueue.Flavor]
    resources: list[pulumi.Resource]
