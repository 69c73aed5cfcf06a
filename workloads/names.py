"""Every name the job's Kubernetes objects use, derived once from the settings.

The names are plain strings known before any resource exists, so the rendezvous endpoint and
the watch commands can be written into the pod spec and the stack outputs directly.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.settings.model.job import JOBSET_REPLICATED_JOB, PREPARE_JOB_SUFFIX, Job

RENDEZVOUS_PORT = 29500  # torchrun's default c10d port
TRAINER_CONTAINER = "trainer"
PYTORCHJOB_CONTAINER = "pytorch"  # the training operator finds the container by this name
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


@dataclass(frozen=True)
class JobNames:
    """Object names and labels of one training job."""

    job: str
    namespace: str
    service_account: str

    @classmethod
    def of(cls, job: Job) -> "JobNames":
        return cls(job=job.name, namespace=job.namespace, service_account=job.service_account)

    @property
    def service(self) -> str:
        """The headless service: pod i of an Indexed Job is `<job>-i.<service>`."""
        return self.job

    @property
    def persistent_volume(self) -> str:
        """Cluster-scoped, so it carries the namespace to stay unique in the cluster."""
        return f"{self.namespace}-{self.job}-shared-fs"

    @property
    def claim(self) -> str:
        return f"{self.job}-shared-fs"

    @property
    def network_policy(self) -> str:
        return f"{self.job}-same-job-only"

    @property
    def rendezvous_endpoint(self) -> str:
        """Pod 0's stable DNS name through the headless service, plus the c10d port. JobSet
        names pod i of its replicated job `<jobset>-<replicated job>-<job index>-<i>`."""
        return (f"{self.job}-{JOBSET_REPLICATED_JOB}-0-0.{self.service}.{self.namespace}"
                f".svc.cluster.local:{RENDEZVOUS_PORT}")

    @property
    def prepare_job(self) -> str:
        """The dataset preparation Job's logical name; Pulumi adds `-<8 random>` (workloads/prepare.py)."""
        return f"{self.job}{PREPARE_JOB_SUFFIX}"

    @property
    def prepare_service_account(self) -> str:
        """The preparation's own service account (Job.prepare_service_account)."""
        return f"{self.service_account}{PREPARE_JOB_SUFFIX}"

    @property
    def egress_deny_policy(self) -> str:
        return f"{self.job}-egress-deny"

    @property
    def prepare_network_policy(self) -> str:
        return f"{self.job}-prepare-no-ingress"

    @property
    def prepare_selector(self) -> dict[str, str]:
        """The preparation pod's labels: not the trainer's selector, so neither the headless
        service nor the trainers' network policy takes it for a peer."""
        return {
            "app.kubernetes.io/name": "torchrec-prepare",
            "app.kubernetes.io/instance": self.job,
        }

    @property
    def selector(self) -> dict[str, str]:
        """Labels every pod of this job carries, whichever controller (Job, PyTorchJob) made it."""
        return {
            "app.kubernetes.io/name": "torchrec-trainer",
            "app.kubernetes.io/instance": self.job,
        }

    @property
    def common_labels(self) -> dict[str, str]:
        return {**self.selector, "app.kubernetes.io/managed-by": "pulumi",
                "app.kubernetes.io/part-of": "torchrec-cloud"}
