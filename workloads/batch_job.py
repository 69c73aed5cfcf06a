"""The default training job: an Indexed batch/v1 Job, one pod per GPU node.

Indexed completion gives each pod a stable hostname `<job>-<index>`, which with the headless
service as `subdomain` makes pod 0 the rendezvous host. The podFailurePolicy (GA in Kubernetes
1.31) keeps spot preemptions from using up `backoffLimit` and stops the job at once on a
configuration error. `backoffLimitPerIndex` is not used: a failed rank breaks the whole
rendezvous, so the job-wide limit is what counts, and it needs Kubernetes 1.33.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from infra.settings.model import Job
from workloads.command import CONFIG_ERROR_EXIT_CODE
from workloads.names import TRAINER_CONTAINER, JobNames

batch = k8s.batch.v1

# pulumi-kubernetes would otherwise wait (10 minutes by default) for the Job to complete.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}


def pod_failure_policy() -> batch.PodFailurePolicyArgs:
    return batch.PodFailurePolicyArgs(rules=[
        # Spot reclaim, node drain, eviction: not the trainer's fault, retry without counting.
        batch.PodFailurePolicyRuleArgs(action="Ignore", on_pod_conditions=[
            batch.PodFailurePolicyOnPodConditionsPatternArgs(type="DisruptionTarget",
                                                             status="True")]),
        # Bad trainer flags (see command.py): retrying on every node cannot fix them.
        batch.PodFailurePolicyRuleArgs(action="FailJob", on_exit_codes=(
            batch.PodFailurePolicyOnExitCodesRequirementArgs(
                container_name=TRAINER_CONTAINER, operator="In",
                values=[CONFIG_ERROR_EXIT_CODE]))),
    ])


def indexed_job(name: str, names: JobNames, job: Job,
                template: k8s.core.v1.PodTemplateSpecArgs,
                opts: pulumi.ResourceOptions) -> batch.Job:
    return batch.Job(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.job, namespace=names.namespace,
                                            labels=names.common_labels, annotations=SKIP_AWAIT),
        spec=batch.JobSpecArgs(
            completion_mode="Indexed",
            completions=job.nodes,
            parallelism=job.nodes,
            backoff_limit=job.backoff_limit,
            pod_failure_policy=pod_failure_policy(),
            template=template,
        ),
        # A Job's pod template is immutable and its name fixed: a change means delete, then create.
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            replace_on_changes=["spec"], delete_before_replace=True)),
    )
