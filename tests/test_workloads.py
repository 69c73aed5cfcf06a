"""The workload layer on hand-made clusters (tests/fake_cluster.py), one per cloud flavour.

Each scenario runs a tiny program under mocks once (module-scoped) and the tests read what it
registered, so they hold for whatever cloud component hands over a contract like these.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from infra.catalog.cloud import Cloud
from infra.catalog.machines import machine
from infra.settings.model.checkpoints import CheckpointLocation, Checkpoints
from infra.settings.model.dataset import Dataset
from infra.settings.model.job import Job, JobKind, PoolChoice
from tests.fake_cluster import FLAVOURS, IMAGE, FakeCluster, fake_cluster
from tests.harness import ROOT, Captured, RecordingMocks, RecordingMonitor, Run
from tests.k8s_manifests import manifests_of, validate_manifests, write_manifests
from workloads.pytorchjob import TRAINING_OPERATOR_MANIFESTS

KUBERNETES_VERSION = "1.33"
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
ALLOWLIST = Path(__file__).with_name("checkov_allowlist.yaml")
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
PYTORCHJOB = "kubernetes:kubeflow.org/v1:PyTorchJob"


class WorkloadRun:
    """One program run: what it registered, the component's outputs and the fake contract."""

    def __init__(self, run: Run, outputs: dict[str, Any], cluster: FakeCluster) -> None:
        self.run, self.outputs, self.cluster = run, outputs, cluster

    def workload(self) -> Captured:
        found = self.run.of_type(JOBSET) + self.run.of_type(PYTORCHJOB)
        assert len(found) == 1, [r.type for r in found]
        return found[0]

    def child_job_spec(self) -> dict[str, Any]:
        """The JobSet's one replicated Job's spec (batch/v1 JobSpec)."""
        (replicated,) = self.workload().inputs["spec"]["replicatedJobs"]
        return replicated["template"]["spec"]

    def pod_spec(self) -> dict[str, Any]:
        spec = self.workload().inputs["spec"]
        if "replicatedJobs" in spec:
            return self.child_job_spec()["template"]["spec"]
        return spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]

    def container(self) -> dict[str, Any]:
        (container,) = self.pod_spec()["containers"]
        return container

    def argv(self) -> list[str]:
        return [*self.container()["command"], *self.container()["args"]]

    def flags(self) -> dict[str, str]:
        return dict(arg[2:].split("=", 1) for arg in self.container()["args"])


def run_workload(flavour: str, job: Job, checkpoints: Checkpoints = Checkpoints(),
                 dataset: Dataset = Dataset(), interconnect: Any = None,
                 system_pool: Any = None) -> WorkloadRun:
    """A program that is just a fake cluster and the TrainingJob, under the harness's mocks."""
    from workloads.component import TrainingJob, TrainingJobArgs

    pulumi.runtime.settings.set_root_resource(None)
    asyncio.set_event_loop(asyncio.new_event_loop())
    mocks = RecordingMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_all_config({})
    pulumi.runtime.set_mocks(mocks, project="torchrec-cloud", stack=flavour, preview=False,
                             monitor=monitor)
    outputs: dict[str, Any] = {}
    made: list[FakeCluster] = []

    @pulumi.runtime.test
    def program() -> Any:
        cluster = fake_cluster(flavour)
        made.append(cluster)
        extra = {"interconnect": interconnect} if interconnect is not None else {}
        if system_pool is not None:
            extra["system_pool"] = system_pool
        component = TrainingJob("torchrec-training", TrainingJobArgs(
            cluster=cluster.contract, job=job, checkpoints=checkpoints, dataset=dataset, **extra))
        return pulumi.Output.all(component.job_name, component.watch_commands,
                                 component.submitted).apply(
            lambda values: outputs.update(job_name=values[0], watch_commands=values[1],
                                          submitted=values[2]))

    try:
        program()
    finally:
        asyncio.get_event_loop().close()
    return WorkloadRun(Run(flavour, dict(monitor.captured), {}, set(), None), outputs, made[0])


@pytest.fixture(scope="module")
def runs() -> dict[str, WorkloadRun]:
    """Four scenarios, each run once: the defaults per cloud flavour, plus the variants."""
    return {
        "aws": run_workload("aws", Job(trainer_args={"batch_size": 2048,
                                                     "dense_arch_layer_sizes": [512, 256, 128],
                                                     "checkpoint_dir": "/ignored"})),
        "aws-spot": run_workload("aws", Job(pool=PoolChoice.SPOT)),
        "azure": run_workload(
            "azure", Job(),
            Checkpoints(location=CheckpointLocation.SHARED_FILE_SYSTEM, every_steps=200, keep=2),
            Dataset(path="criteo/1tb")),
        "gcp-pytorchjob": run_workload("gcp", Job(kind=JobKind.PYTORCH_JOB, nodes=3),
                                       Checkpoints(enabled=False)),
    }


# --- identity and placement ------------------------------------------------------------------

def test_every_kubernetes_object_uses_the_clusters_provider(runs):
    for scenario in runs.values():
        provider = scenario.run.one("pulumi:providers:kubernetes", scenario.cluster.provider_name)
        objects = [r for r in scenario.run.resources if r.type.startswith("kubernetes:")]
        assert len(objects) >= 7
        for resource in objects:
            assert resource.provider_urn == provider.urn, resource.name


def test_every_child_is_parented_to_the_training_job_component(runs):
    run = runs["aws"].run
    component = run.one("torchrec-cloud:workloads:TrainingJob")
    kube = [r for r in run.resources if r.type.startswith("kubernetes:")]
    assert {r.parent for r in kube} == {component.urn}


def test_pod_requests_every_gpu_and_efa_interface_of_the_machine(runs):
    p4d = machine(Cloud.AWS, "p4d.24xlarge")
    resources = runs["aws"].container()["resources"]
    assert resources["requests"] == resources["limits"]  # Guaranteed QoS
    assert resources["limits"]["nvidia.com/gpu"] == str(p4d.gpu_count)
    assert resources["limits"]["vpc.amazonaws.com/efa"] == str(p4d.efa_interfaces)


def test_cpu_and_memory_leave_headroom_for_the_nodes_daemons(runs):
    for scenario in runs.values():
        node = scenario.cluster.contract.gpu_pools["onDemand"].machine
        limits = scenario.container()["resources"]["limits"]
        assert 0.8 * node.vcpus <= int(limits["cpu"]) < node.vcpus
        memory_gib = int(limits["memory"].removesuffix("Gi"))
        assert 0.8 * node.memory_gib <= memory_gib < node.memory_gib


def test_spot_job_tolerates_and_requires_the_spot_pool(runs):
    spec = runs["aws-spot"].pod_spec()
    spot_taint = FLAVOURS["aws"].spot_taint
    assert {"key": spot_taint.key, "operator": "Equal", "value": spot_taint.value,
            "effect": "NoSchedule"} in spec["tolerations"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": "eks.amazonaws.com/nodegroup", "operator": "In", "values": ["gpuspot"]}]}]


def test_on_demand_job_requires_the_on_demand_pool_and_tolerates_gpu_nodes(runs):
    spec = runs["azure"].pod_spec()
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "kubernetes.azure.com/agentpool", "operator": "In", "values": ["gpu"]}]
    assert not any(t["key"] == FLAVOURS["azure"].spot_taint.key for t in spec["tolerations"])
    assert any(t["key"] == "nvidia.com/gpu" for t in runs["gcp-pytorchjob"].pod_spec()["tolerations"])


def test_workload_identity_binding_is_on_the_service_account_and_pods(runs):
    scenario = runs["azure"]
    account = scenario.run.one("kubernetes:core/v1:ServiceAccount")
    assert account.inputs["metadata"]["annotations"] == FLAVOURS["azure"].annotations
    pod_labels = scenario.child_job_spec()["template"]["metadata"]["labels"]
    assert pod_labels["azure.workload.identity/use"] == "true"
    assert scenario.pod_spec()["serviceAccountName"] == account.inputs["metadata"]["name"]
    env = {e["name"]: e.get("value") for e in scenario.container()["env"]}
    assert env["AZURE_STORAGE_ACCOUNT_NAME"] == "torchrecckpt"


def test_fabric_environment_devices_and_capabilities_come_from_the_contract(runs):
    azure = runs["azure"].container()
    env = {e["name"]: e.get("value") for e in azure["env"]}
    assert env["UCX_TLS"] == "rc"
    assert azure["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
    gcp = runs["gcp-pytorchjob"].container()
    assert "add" not in gcp["securityContext"]["capabilities"]
    assert set(gcp["resources"]["limits"]) == {"cpu", "memory", "nvidia.com/gpu"}


def test_pods_run_locked_down(runs):
    for scenario in runs.values():
        spec, container = scenario.pod_spec(), scenario.container()
        context = container["securityContext"]
        assert context["runAsNonRoot"] and context["runAsUser"] == 1000
        assert context["allowPrivilegeEscalation"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        assert "hostNetwork" not in spec and spec["automountServiceAccountToken"] is False
        assert container["image"] == IMAGE
        # The workload-identity token is projected 0600 for the pod's user; with fsGroup 1000
        # it is 0640 group 1000, readable by the trainer after an Azure root start drops to 1000.
        assert spec["securityContext"]["fsGroup"] == 1000


def test_trainer_user_gets_its_folders_on_the_shared_file_system(runs):
    """A fresh FSx/ANF/Filestore root is root-owned 755: without this the trainer cannot write
    its metrics, TensorBoard logs or file-system checkpoints."""
    for scenario in runs.values():
        (init,) = scenario.pod_spec()["initContainers"]
        mount = scenario.cluster.contract.shared_file_system.mount_path
        script = init["command"][-1]
        for folder in (f"{mount}/runs/dlrm", f"{mount}/checkpoints/dlrm"):
            assert folder in script
        assert "chown 1000:1000" in script and "-R" not in script  # one folder, not the volume
        assert {"name": "shared-fs", "mountPath": mount} in init["volumeMounts"]
        assert scenario.flags()["metrics_file"].startswith(f"{mount}/runs/dlrm/")


def test_folder_preparation_runs_as_root_with_only_chown(runs):
    for scenario in runs.values():
        (init,) = scenario.pod_spec()["initContainers"]
        context = init["securityContext"]
        assert context["runAsUser"] == 0 and context["runAsNonRoot"] is False
        assert context["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
        assert context["allowPrivilegeEscalation"] is False and context["privileged"] is False
        assert context["readOnlyRootFilesystem"] is True


def test_namespace_admits_no_more_than_the_pods_need(runs):
    for name, scenario in runs.items():
        (namespace,) = scenario.run.of_type("kubernetes:core/v1:Namespace")
        labels = namespace.inputs["metadata"]["labels"]
        needs_capability = bool(scenario.cluster.contract.interconnect.capabilities)
        expected = "privileged" if needs_capability else "baseline"
        assert labels["pod-security.kubernetes.io/enforce"] == expected, name
        assert labels["pod-security.kubernetes.io/warn"] == "restricted"


# --- the job --------------------------------------------------------------------------------

def test_job_runs_one_indexed_pod_per_node_as_one_gang(runs):
    scenario = runs["aws"]
    jobset = scenario.workload().inputs["spec"]
    (replicated,) = jobset["replicatedJobs"]
    assert replicated["replicas"] == 1
    spec = scenario.child_job_spec()
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == 2
    assert spec["backoffLimit"] == 0  # any counted failure ends this generation of the gang
    assert jobset["failurePolicy"]["maxRestarts"] == 3  # job.backoffLimit: crashes only
    # Every old pod is gone before the new generation starts: a clean rendezvous every time.
    assert jobset["failurePolicy"]["restartStrategy"] == "BlockingRecreate"
    assert jobset["successPolicy"] == {"operator": "All"}


def test_pod_grace_comes_from_the_pool_s_stop_budget(runs):
    from infra.preemption import stop_budget

    on_demand = runs["aws"].pod_spec()["terminationGracePeriodSeconds"]
    assert on_demand == stop_budget("aws", False, 120).pod_grace_seconds == 120
    spot = runs["aws-spot"]
    budget = stop_budget("aws", True, 120)
    assert spot.pod_spec()["terminationGracePeriodSeconds"] == budget.pod_grace_seconds
    assert f"--shutdown_timeout={budget.shutdown_timeout_seconds}" in spot.container()["command"][2]
    assert spot.flags()["save_deadline_seconds"] == str(budget.save_deadline_seconds)
    assert (budget.save_deadline_seconds < budget.shutdown_timeout_seconds
            < budget.pod_grace_seconds <= budget.notice.notice_seconds)


def test_preemption_restarts_the_gang_without_using_the_retry_budget(runs):
    from trainer.exit_codes import NODE_LEFT_OUT, RESUME

    spot = runs["aws-spot"]
    rules = spot.child_job_spec()["podFailurePolicy"]["rules"]
    assert {"action": "FailJob", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]} in rules
    assert {"action": "FailJob", "onExitCodes": {
        "containerName": "trainer", "operator": "In", "values": [RESUME, NODE_LEFT_OUT]}} in rules
    jobset_rules = spot.workload().inputs["spec"]["failurePolicy"]["rules"]
    assert jobset_rules[-1]["action"] == "RestartJobSetAndIgnoreMaxRestarts"
    assert jobset_rules[-1]["onJobFailureReasons"] == ["PodFailurePolicy"]
    assert spot.pod_spec()["restartPolicy"] == "Never"


def test_bad_trainer_flags_fail_the_job_at_once(runs):
    scenario = runs["aws"]
    rules = scenario.child_job_spec()["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "FailJob", "onExitCodes": {
        "containerName": "trainer", "operator": "In", "values": [2, 3]}}  # flags, fabric gate
    first = scenario.workload().inputs["spec"]["failurePolicy"]["rules"][0]
    assert first["action"] == "FailJobSet"
    assert re.search(first["onJobFailureMessagePatterns"][0],
                     "Container trainer for pod torchrec/dlrm-node-0-1-x7k2p failed with exit "
                     "code 2 matching FailJob rule at index 0")
    assert re.search(first["onJobFailureMessagePatterns"][0],
                     "Container trainer for pod torchrec/dlrm-node-0-0-x7k2p failed with exit "
                     "code 3 matching FailJob rule at index 0")
    assert not re.search(first["onJobFailureMessagePatterns"][0],
                         "Container trainer for pod torchrec/dlrm-node-0-1-x7k2p failed with exit "
                         "code 143 matching FailJob rule at index 1")
    script = scenario.container()["command"][2]
    assert "parse_config" in script and "|| exit 2" in script
    assert script.index("parse_config") < script.index("exec python -m trainer.launch")


def test_jobset_controller_is_installed_pinned_before_the_job(runs):
    scenario = runs["aws"]
    controller = scenario.run.one("kubernetes:yaml/v2:ConfigFile")
    assert controller.inputs["file"].endswith("/workloads/manifests/jobset-v0.12.0.yaml")  # vendored
    assert scenario.run.waits_for(scenario.workload(), controller)


def test_rendezvous_endpoint_is_pod_zero_through_the_headless_service(runs):
    scenario = runs["aws"]
    service = scenario.run.one("kubernetes:core/v1:Service")
    spec = service.inputs["spec"]
    assert spec["clusterIP"] == "None"
    assert spec["publishNotReadyAddresses"] is True
    assert [p["port"] for p in spec["ports"]] == [29500]
    pod_labels = scenario.child_job_spec()["template"]["metadata"]["labels"]
    assert spec["selector"].items() <= pod_labels.items()
    name = service.inputs["metadata"]["name"]
    network = scenario.workload().inputs["spec"]["network"]
    assert network["subdomain"] == name and network["enableDNSHostnames"] is True
    script = scenario.container()["command"][2]
    assert f"--rdzv_endpoint=dlrm-node-0-0.{name}.torchrec.svc.cluster.local:29500" in script
    for option in ("--nnodes=2", "--nproc_per_node=8", "--rdzv_backend=c10d", "--rdzv_id=dlrm",
                   "--max_restarts=0", "-m trainer"):
        assert option in script


def test_user_flags_pass_through_and_lists_are_comma_joined(runs):
    flags = runs["aws"].flags()
    assert flags["batch_size"] == "2048"
    assert flags["dense_arch_layer_sizes"] == "512,256,128"


def test_checkpoints_go_to_the_bucket_uri_by_default(runs):
    flags = runs["aws"].flags()
    assert flags["checkpoint_dir"] == FLAVOURS["aws"].checkpoint_uri  # the user's value is replaced
    assert flags["checkpoint_every"] == "500" and flags["keep_checkpoints"] == "3"
    assert "dataset_path" not in flags  # synthetic data


def test_checkpoints_on_the_shared_file_system_go_under_the_mount_path(runs):
    flags = runs["azure"].flags()
    assert flags["checkpoint_dir"] == "/mnt/shared/checkpoints/dlrm"
    assert flags["checkpoint_every"] == "200" and flags["keep_checkpoints"] == "2"
    assert flags["dataset_path"] == "/mnt/shared/criteo/1tb"
    assert flags["metrics_file"].startswith("/mnt/shared/")
    assert flags["tensorboard_dir"].startswith("/mnt/shared/")


def test_disabled_checkpoints_pass_no_checkpoint_flags(runs):
    flags = runs["gcp-pytorchjob"].flags()
    assert not {"checkpoint_dir", "checkpoint_every", "keep_checkpoints"} & flags.keys()


def test_metrics_and_tensorboard_are_mirrored_to_the_checkpoint_bucket_on_every_cloud(runs):
    # A laptop reads them there (python -m torchrec_cloud status / tensorboard); the shared file
    # system is mounted in the cluster only. Wherever checkpoints go, and even without them.
    from infra.settings.rules import WORKLOAD_OWNED_FLAGS
    from workloads.flags import STACK_OWNED

    for name in ("aws", "azure", "gcp-pytorchjob"):
        flags = runs[name].flags()
        uri = FLAVOURS[name.split("-")[0]].checkpoint_uri
        assert flags["telemetry_dir"] == f"{uri}/telemetry", name
        assert flags["metrics_file"] and flags["tensorboard_dir"]  # what it mirrors
        assert list(runs[name].container()["args"]).count(
            f"--telemetry_dir={flags['telemetry_dir']}") == 1
    assert "telemetry_dir" in STACK_OWNED and "telemetry_dir" in WORKLOAD_OWNED_FLAGS


def test_every_flag_the_stack_passes_is_one_the_settings_refuse_in_trainer_args(runs):
    """A trainerArgs key the stack also passes would pass `make check` and then be overridden
    (the stack's flags come last); the settings refuse exactly the flags the stack passes, so
    the check names it instead. The multi-hot flags, owned only with dataset.prepare's
    multiHotSizes, have their own rule (prepare_owns_the_multi_hot_flags)."""
    from infra.settings.rules import WORKLOAD_OWNED_FLAGS
    from workloads.flags import STACK_OWNED

    passed: set[str] = set()
    for scenario in runs.values():
        passed |= set(scenario.flags())
    # less the user's trainerArgs: the defaults', and the "aws" run's own
    passed -= {*Job().trainer_args, "batch_size", "dense_arch_layer_sizes"}
    # Every kind the stack passes is seen: checkpoints, data, telemetry, planner, an enforcing
    # gate with its floors across nodes.
    assert {"checkpoint_dir", "dataset_path", "telemetry_dir", "inter_host_gb_per_sec",
            "fabric_floor_gbps", "fabric_max_nodes_left_out"} <= passed
    assert passed <= set(WORKLOAD_OWNED_FLAGS), passed - set(WORKLOAD_OWNED_FLAGS)
    assert STACK_OWNED == set(WORKLOAD_OWNED_FLAGS)


def test_shared_memory_is_a_bounded_memory_volume(runs):
    volumes = {v["name"]: v for v in runs["aws"].pod_spec()["volumes"]}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    assert volumes["dshm"]["emptyDir"]["sizeLimit"].endswith("Gi")
    mounts = {m["mountPath"]: m["name"] for m in runs["aws"].container()["volumeMounts"]}
    assert mounts["/dev/shm"] == "dshm" and mounts["/mnt/shared"] == "shared-fs"


# --- storage --------------------------------------------------------------------------------

def test_fsx_volume_is_a_csi_volume_with_the_file_systems_handle(runs):
    volume = runs["aws"].run.one("kubernetes:core/v1:PersistentVolume").inputs["spec"]
    source = FLAVOURS["aws"].source
    assert volume["csi"] == {"driver": source.driver, "volumeHandle": source.volume_handle,
                             "volumeAttributes": dict(source.volume_attributes)}
    assert volume["mountOptions"] == ["flock"]


def test_nfs_volume_points_at_the_export(runs):
    volume = runs["azure"].run.one("kubernetes:core/v1:PersistentVolume").inputs["spec"]
    assert volume["nfs"] == {"server": "10.1.2.4", "path": "/shared"}
    assert "nconnect=8" in volume["mountOptions"]


def test_claim_binds_exactly_the_static_volume_and_data_is_retained(runs):
    run = runs["azure"].run
    volume = run.one("kubernetes:core/v1:PersistentVolume").inputs
    claim = run.one("kubernetes:core/v1:PersistentVolumeClaim").inputs
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["spec"]["accessModes"] == claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volume["spec"]["storageClassName"] == claim["spec"]["storageClassName"] == ""
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"]
    assert volume["spec"]["claimRef"] == {"namespace": claim["metadata"]["namespace"],
                                          "name": claim["metadata"]["name"]}
    assert volume["spec"]["capacity"] == {"storage": "2400Gi"}
    assert claim["spec"]["resources"]["requests"] == {"storage": "2400Gi"}


# --- ordering -------------------------------------------------------------------------------

def test_job_waits_for_the_pools_the_add_ons_and_the_file_system(runs):
    for scenario in runs.values():
        run, cluster = scenario.run, scenario.cluster
        workload = scenario.workload()
        for name in (*cluster.ready_names, cluster.file_system_name):
            assert run.waits_for(workload, run.named(name)), f"{workload.name} before {name}"
        for kind in ("PersistentVolumeClaim", "Service", "ServiceAccount", "NetworkPolicy"):
            assert run.waits_for(workload, run.one(f"kubernetes:core/v1:{kind}")
                                 if kind != "NetworkPolicy"
                                 else run.one("kubernetes:networking.k8s.io/v1:NetworkPolicy"))


def test_every_kubernetes_object_waits_for_the_pools_and_add_ons(runs):
    run, cluster = runs["aws"].run, runs["aws"].cluster
    for resource in (r for r in run.resources if r.type.startswith("kubernetes:")):
        for name in cluster.ready_names:
            assert name in {run.by_urn[u].name for u in resource.dependencies}, resource.name


def test_persistent_volume_waits_for_the_file_system(runs):
    run = runs["gcp-pytorchjob"].run
    volume = run.one("kubernetes:core/v1:PersistentVolume")
    assert run.waits_for(volume, run.named(runs["gcp-pytorchjob"].cluster.file_system_name))


# --- network ------------------------------------------------------------------------------

def test_only_the_jobs_own_pods_may_connect_to_it(runs):
    scenario = runs["aws"]
    policy = scenario.run.one("kubernetes:networking.k8s.io/v1:NetworkPolicy").inputs["spec"]
    selector = policy["podSelector"]["matchLabels"]
    pod_labels = scenario.child_job_spec()["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()
    assert policy["ingress"] == [{"from": [{"podSelector": {"matchLabels": selector}}]}]
    assert "ports" not in policy["ingress"][0]  # rendezvous and NCCL ports alike
    assert policy["egress"] == [{}]  # object store, DNS, registry


# --- PyTorchJob -----------------------------------------------------------------------------

def test_pytorchjob_is_elastic_and_waits_for_the_training_operator(runs):
    scenario = runs["gcp-pytorchjob"]
    assert not scenario.run.of_type(JOBSET)
    job = scenario.workload()
    spec = job.inputs["spec"]
    assert spec["elasticPolicy"] == {"rdzvBackend": "c10d", "minReplicas": 3, "maxReplicas": 3,
                                     "maxRestarts": 0}
    assert spec["nprocPerNode"] == "8"
    worker = spec["pytorchReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 3
    container = scenario.container()
    assert container["name"] == "pytorch"
    assert container["ports"][0]["name"] == "pytorchjob-port"
    # The operator comes from vendored, pinned manifests (kustomize v2 cannot fetch git URLs).
    [operator] = [c for c in scenario.run.of_type("kubernetes:yaml/v2:ConfigFile")
                  if "training-operator" in c.name]
    path = Path(operator.inputs["file"])
    assert path.is_file() and path.name == "training-operator-v1.9.4.yaml"
    docs = [d for d in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader) if d]
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [image] = [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert image == "ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489"  # pinned tag
    crds = {d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"}
    assert "pytorchjobs.kubeflow.org" in crds
    assert scenario.run.waits_for(job, operator)


def test_a_suspended_job_creates_no_pods_until_set_back(runs):
    """job.suspend: JobSet's spec.suspend and the training operator's runPolicy.suspend (the
    Job controller creates no pods); absent otherwise, so upgrading never changes a running
    job's spec."""
    assert "suspend" not in runs["aws"].workload().inputs["spec"]
    assert "suspend" not in runs["gcp-pytorchjob"].workload().inputs["spec"]["runPolicy"]
    jobset = run_workload("aws", Job(suspend=True))
    assert jobset.workload().inputs["spec"]["suspend"] is True
    assert validate_manifests(jobset.run, KUBERNETES_VERSION)  # against JobSet's CRD schema
    pytorch = run_workload("gcp", Job(kind=JobKind.PYTORCH_JOB, suspend=True))
    assert pytorch.workload().inputs["spec"]["runPolicy"]["suspend"] is True
    docs = yaml.load_all(TRAINING_OPERATOR_MANIFESTS.read_text(), Loader=yaml.CSafeLoader)
    [crd] = [d for d in docs if d and d["kind"] == "CustomResourceDefinition"
             and d["metadata"]["name"] == "pytorchjobs.kubeflow.org"]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["runPolicy"]["properties"]["suspend"]["type"] == "boolean"


def test_pytorchjob_shares_the_pod_template_of_the_indexed_job(runs):
    job_pod, elastic_pod = runs["aws"].pod_spec(), runs["gcp-pytorchjob"].pod_spec()
    shared = {"securityContext", "volumes", "serviceAccountName", "restartPolicy",
              "automountServiceAccountToken", "terminationGracePeriodSeconds"}
    for key in shared:
        # The API token volume is on both: the gate may leave a bad GPU's node out, fabric or not.
        assert job_pod[key] == elastic_pod[key], key


# --- outputs --------------------------------------------------------------------------------

def test_outputs_name_the_job_and_how_to_follow_it(runs):
    outputs = runs["aws"].outputs
    assert outputs["job_name"] == "dlrm"
    assert ("kubectl -n torchrec get pods -l jobset.sigs.k8s.io/jobset-name=dlrm -w"
            in outputs["watch_commands"])
    assert any("batch.kubernetes.io/job-completion-index=0" in c and "logs -f" in c
               for c in outputs["watch_commands"])
    elastic = runs["gcp-pytorchjob"].outputs["watch_commands"]
    assert any("get pytorchjob dlrm" in c for c in elastic)


def test_the_outputs_say_how_to_see_why_the_job_waits(runs):
    outputs = runs["aws"].outputs
    why = ".venv/bin/python -m torchrec_cloud why --stack aws"  # the user's command line
    assert outputs["watch_commands"][-1] == why
    assert outputs["submitted"] == ("job dlrm submitted to namespace torchrec; if its pods do "
                                    f"not start, see why: {why}")


def test_workloads_never_import_a_cloud_sdk():
    sources = (ROOT / "workloads").rglob("*.py")
    pattern = re.compile(r"^\s*(import|from)\s+pulumi_(aws|eks|azure_native|gcp)\b", re.M)
    offenders = [p.name for p in sources if pattern.search(p.read_text())]
    assert not offenders


# --- manifests and security scan --------------------------------------------------------------

def test_manifests_are_valid_kubernetes(runs):
    for scenario in runs.values():
        manifests = validate_manifests(scenario.run, KUBERNETES_VERSION)
        kinds = {m["kind"] for m in manifests}
        assert {"Namespace", "ServiceAccount", "PersistentVolume", "PersistentVolumeClaim",
                "Service", "NetworkPolicy"} <= kinds
        assert kinds & {"JobSet", "PyTorchJob"}
    # The gate's node access, checked against the official schemas too (workloads/node_gate.py).
    assert {"ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"} <= {
        m["kind"] for m in validate_manifests(runs["aws"].run, KUBERNETES_VERSION)}


def checkov_failures(runs: dict[str, Any], tmp_path: Path) -> list[str]:
    """checkov over every scenario's rendered manifests, less the allowlist (each entry with
    its reason): the checks that failed."""
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: `make test` installs it "
                    "(python3 -m venv .venv-checkov && .venv-checkov/bin/pip install checkov)")
    for key, scenario in runs.items():
        write_manifests(scenario.run, tmp_path / key)
    return checkov_directory_failures(tmp_path)


def checkov_directory_failures(tmp_path: Path) -> list[str]:
    """checkov over the manifests under `tmp_path`, less the allowlist: the checks that
    failed, each ending "in <file path under tmp_path> (<resource>)"."""
    allow = yaml.safe_load(ALLOWLIST.read_text())["skip"]
    assert all(entry.get("reason") for entry in allow), "every skipped check needs a reason"
    # --skip-download: the checks are checkov's own, offline (no platform key here); without
    # it checkov first tries to fetch guideline IDs from the network, retrying.
    result = subprocess.run(
        [str(CHECKOV), "-d", str(tmp_path), "--framework", "kubernetes", "--quiet", "--compact",
         "-o", "json", "--skip-download", "--skip-check", ",".join(entry["id"] for entry in allow)],
        capture_output=True, text=True, timeout=300)
    report = json.loads(result.stdout or "{}")
    reports = report if isinstance(report, list) else [report]
    failed = [f"{c['check_id']} {c['check_name']} in {c['file_path']} ({c['resource']})"
              for r in reports for c in r.get("results", {}).get("failed_checks", [])]
    assert failed or result.returncode == 0, result.stderr[-2000:]
    return failed


@pytest.fixture(scope="module")
def checkov_scan(runs, gpudirect_runs, tmp_path_factory) -> dict[str, list[str]]:
    """One checkov run (a few seconds of CPU each) over the manifests of both tests below:
    its failures per group, `runs` (every scenario as rendered) and `gpudirect` (the A3 pods
    with the rxdm sidecar set apart)."""
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: `make test` installs it "
                    "(python3 -m venv .venv-checkov && .venv-checkov/bin/pip install checkov)")
    root = tmp_path_factory.mktemp("checkov")
    for key, scenario in runs.items():
        write_manifests(scenario.run, root / "runs" / key)
    for key, scenario in gpudirect_runs.items():
        for path in write_manifests(scenario.run, root / "gpudirect" / key):
            path.write_text(yaml.safe_dump(without_native_sidecars(yaml.safe_load(
                path.read_text())), sort_keys=False))
    failed = checkov_directory_failures(root)
    groups = {group: [f for f in failed if f" in /{group}/" in f] for group in ("runs", "gpudirect")}
    assert sum(map(len, groups.values())) == len(failed), failed  # each failure has its group
    return groups


def test_checkov_finds_no_failed_check(runs, checkov_scan):
    failed = checkov_scan["runs"]
    assert not failed, "checkov failed checks:\n  " + "\n  ".join(failed)
    assert len(manifests_of(runs["aws"].run)) >= 7


def test_manifest_conversion_restores_what_the_wire_changed():
    from tests.k8s_manifests import SECRET_SIG, clean

    wire = {"replicas": 2.0, "ratio": 0.5, "token": {SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270",
                                                       "value": "s3cr3t"}, "gone": None,
            "items": [1.0, None]}
    assert clean(wire) == {"replicas": 2, "ratio": 0.5, "token": "s3cr3t", "items": [1]}


def test_the_fabric_gate_enforces_the_machine_s_transport_and_floor_when_the_fabric_is_used(runs):
    from infra.catalog.gate_floors import gpu_matmul_floor_tflops

    p4d = machine(Cloud.AWS, "p4d.24xlarge")
    flags = runs["aws"].flags()
    floor = p4d.fabric_floor(Job().nodes)  # infra/catalog/gate_floors.py: per machine and node count
    assert flags["fabric_gate"] == "enforce"
    assert flags["fabric_transport"] == "efa"
    assert float(flags["fabric_floor_gbps"]) == floor.all_reduce_gbps
    assert float(flags["fabric_all_to_all_floor_gbps"]) == floor.all_to_all_gbps > 0
    assert flags["fabric_gate_sizes"].split(",")[-1] == str(floor.size)  # judged at the plateau
    assert float(flags["gpu_matmul_floor_tflops"]) == gpu_matmul_floor_tflops(p4d) > 0
    assert int(flags["fabric_rails"]) == p4d.efa_interfaces  # every EFA device NCCL must find


def test_the_gate_may_taint_nodes_only_through_a_policy_bound_to_the_job_s_account(runs):
    from trainer.node_taint import TAINT_KEY, TOKEN_DIR

    scenario = runs["aws"]
    (role,) = scenario.run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    assert role.inputs["rules"] == [{"apiGroups": [""], "resources": ["nodes"],
                                     "verbs": ["get", "list", "patch"]}]
    (binding,) = scenario.run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    account = scenario.run.one("kubernetes:core/v1:ServiceAccount").inputs["metadata"]
    assert binding.inputs["subjects"] == [{"kind": "ServiceAccount", "name": account["name"],
                                           "namespace": account["namespace"]}]
    (policy,) = scenario.run.of_type(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    spec = policy.inputs["spec"]
    assert spec["matchConditions"][0]["expression"] == (
        f"request.userInfo.username == 'system:serviceaccount:{account['namespace']}:"
        f"{account['name']}'")
    assert spec["matchConstraints"]["resourceRules"][0]["resources"] == ["nodes"]
    assert any(TAINT_KEY in v["expression"] for v in spec["validations"])
    (policy_binding,) = scenario.run.of_type(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
    assert policy_binding.inputs["spec"] == {"policyName": policy.inputs["metadata"]["name"],
                                             "validationActions": ["Deny"]}
    # The token reaches the trainer container only; the pod knows its node; no toleration.
    pod = scenario.pod_spec()
    assert pod["automountServiceAccountToken"] is False
    assert {"name": "kube-api-access", "mountPath": TOKEN_DIR, "readOnly": True} in \
        scenario.container()["volumeMounts"]
    assert all(m["name"] != "kube-api-access" for c in pod["initContainers"]
               for m in c.get("volumeMounts", []))
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in \
        scenario.container()["env"]
    keys = [t.get("key") for t in pod["tolerations"]]
    assert TAINT_KEY not in keys and all(keys)  # no toleration, no key-less wildcard either


def test_without_a_fabric_the_gate_reports_it_but_leaves_out_a_bad_gpu_s_node():
    """The shipped GCP A2 stack (fabric false): transport and bandwidth are only reported, but
    a GPU that fails the health check (or the matmul floor) has its node left out, as on a
    fabric stack (issue 32: a bad GPU was only reported there, never left out)."""
    from infra.catalog.gate_floors import gpu_matmul_floor_tflops
    from infra.settings.model.interconnect import Interconnect

    without = run_workload("gcp", Job(), interconnect=Interconnect(fabric=False))
    flags = without.flags()
    assert flags["fabric_gate"] == "report"
    a2 = without.cluster.contract.gpu_pools[Job().pool.value].machine
    assert float(flags["gpu_matmul_floor_tflops"]) == gpu_matmul_floor_tflops(a2) > 0
    assert int(flags["fabric_max_nodes_left_out"]) >= 2
    assert without.run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    assert without.run.of_type(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    assert any(v["name"] == "kube-api-access" for v in without.pod_spec()["volumes"])
    assert "fabric_floor_gbps" not in flags and "fabric_rails" not in flags
    off = run_workload("aws", Job(), interconnect=Interconnect(gate=False))
    assert off.flags()["fabric_gate"] == "off"
    assert not off.run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")


# --- GCP A3: GPUDirect's pod pieces from the contract (tests/fake_cluster.py "gcp-a3*") -------

@pytest.fixture(scope="module")
def gpudirect_runs() -> dict[str, WorkloadRun]:
    """A3 High (TCPX) and A3 Mega (TCPXO) as JobSets, and A3 High as a PyTorchJob."""
    return {
        "gcp-a3": run_workload("gcp-a3", Job()),
        "gcp-a3-mega": run_workload("gcp-a3-mega", Job()),
        "gcp-a3-pytorchjob": run_workload("gcp-a3", Job(kind=JobKind.PYTORCH_JOB, nodes=3),
                                          Checkpoints(enabled=False)),
    }


def pod_metadata(scenario: WorkloadRun) -> dict[str, Any]:
    spec = scenario.workload().inputs["spec"]
    if "replicatedJobs" in spec:
        return scenario.child_job_spec()["template"]["metadata"]
    return spec["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]


def test_gpudirect_rxdm_runs_as_a_native_sidecar_so_the_batch_pod_can_complete(gpudirect_runs):
    for name, scenario in gpudirect_runs.items():
        spec = scenario.pod_spec()
        sidecar = scenario.cluster.contract.interconnect.sidecars[0]
        prepare, rxdm = spec["initContainers"]
        assert prepare["name"] == "prepare-shared-fs" and "restartPolicy" not in prepare, name
        assert rxdm["name"] == sidecar.name and rxdm["restartPolicy"] == "Always", name
        assert [c["name"] for c in spec["containers"]] == [scenario.container()["name"]], name
        assert spec["restartPolicy"] == "Never"  # the trainer's exit is the pod's end


def test_gpudirect_annotations_volumes_and_mounts_come_from_the_contract(gpudirect_runs):
    for name, scenario in gpudirect_runs.items():
        fabric = scenario.cluster.contract.interconnect
        assert pod_metadata(scenario)["annotations"] == dict(fabric.pod_annotations), name
        volumes = {v["name"] for v in scenario.pod_spec()["volumes"]}
        assert {v.name for v in fabric.volumes} <= volumes
        assert {"shared-fs", "dshm", "tmp"} <= volumes  # the pod's own stay
        mounts = {(m["name"], m["mountPath"]) for m in scenario.container()["volumeMounts"]}
        assert {(m.name, m.mount_path) for m in fabric.trainer_volume_mounts} <= mounts
        assert ("tmp", "/tmp") in mounts and ("dshm", "/dev/shm") in mounts
        env = {e["name"]: e.get("value") for e in scenario.container()["env"]}
        assert {k: env[k] for k in fabric.env} == dict(fabric.env)


def test_the_gpudirect_trainer_runs_as_root_as_google_s_nccl_container_and_stays_locked_down(
        gpudirect_runs):
    """Every Google TCPX/TCPXO reference runs its NCCL container as root (container-engine-
    accelerators gpudirect-tcpx(o)/nccl-test*.yaml); here the trainer does too, with the
    reference's capabilities (the runtime's defaults, which a root needs in folders uid 1000
    owns, less NET_RAW and MKNOD; IPC_LOCK on TCPX) and nothing else loosened."""
    from infra.gcp.interconnect import REFERENCE_DEFAULT_CAPABILITIES as kept

    added = {"gcp-a3": sorted([*kept, "IPC_LOCK"]), "gcp-a3-mega": sorted(kept),
             "gcp-a3-pytorchjob": sorted([*kept, "IPC_LOCK"])}
    for name, scenario in gpudirect_runs.items():
        context = scenario.container()["securityContext"]
        assert context["runAsUser"] == 0 and context["runAsGroup"] == 0, name
        assert context["runAsNonRoot"] is False, name
        assert context["readOnlyRootFilesystem"] is True and context["privileged"] is False
        assert context["allowPrivilegeEscalation"] is False
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        assert context["capabilities"].get("add") == added[name], name
        assert context["capabilities"]["drop"] == ["ALL"]
        env = {e["name"]: e.get("value") for e in scenario.container()["env"]}
        assert "TORCHREC_CLOUD_DROP_TO" not in env  # stays root: NCCL runs in the workers
        pod_context = scenario.pod_spec()["securityContext"]
        assert pod_context["runAsNonRoot"] is True and pod_context["runAsUser"] == 1000
        (prepare, rxdm) = scenario.pod_spec()["initContainers"]
        assert prepare["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
        assert rxdm["securityContext"]["runAsUser"] == 0  # overrides the pod's uid for itself
        assert rxdm["securityContext"]["privileged"] is False
        assert "NET_ADMIN" in rxdm["securityContext"]["capabilities"]["add"]


def test_other_clouds_trainers_stay_non_root(runs):
    for name in ("aws", "gcp-pytorchjob"):
        context = runs[name].container()["securityContext"]
        assert context["runAsUser"] == 1000 and context["runAsNonRoot"] is True, name


def test_the_gpudirect_gate_requires_torch_s_own_nccl_and_nothing_preloads_another(
        gpudirect_runs, runs):
    for name, scenario in gpudirect_runs.items():
        flags = scenario.flags()
        assert flags["fabric_gate"] == "enforce", name
        assert flags["fabric_nccl_version"] == "2.29.7", name  # infra/gcp/interconnect.py
        env = {e["name"]: e.get("value") for e in scenario.container()["env"]}
        assert "LD_PRELOAD" not in env, name
    assert "fabric_nccl_version" not in runs["aws"].flags()  # EFA: torch's own NCCL
    # A user's image brings its own torch and NCCL: not checked against this image's pin.
    own = run_workload("gcp-a3", Job(image="registry.example/team/trainer:1"))
    assert own.flags()["fabric_gate"] == "enforce" and "fabric_nccl_version" not in own.flags()


def test_the_gpudirect_pods_pass_checkov_but_for_the_root_they_need(checkov_scan):
    """With the rxdm sidecar set apart (Google's manifest, its own test), the A3 pod fails only
    the check a root trainer fails by design (uid 0 and the added capability are allowed by
    tests/checkov_allowlist.yaml)."""
    root_by_design = {"CKV_K8S_23"}  # Minimize the admission of root containers
    failed = checkov_scan["gpudirect"]
    assert {f.split()[0] for f in failed} == root_by_design, "\n".join(failed)


def without_native_sidecars(node: Any) -> Any:
    """The manifest less its native sidecars (init containers with restartPolicy Always): the
    rxdm is Google's image by tag, with Google's security context, and judged apart."""
    if isinstance(node, dict):
        return {key: ([c for c in value if c.get("restartPolicy") != "Always"]
                      if key == "initContainers" else without_native_sidecars(value))
                for key, value in node.items()}
    if isinstance(node, list):
        return [without_native_sidecars(item) for item in node]
    return node


def test_gpudirect_namespace_enforces_privileged_pod_security(gpudirect_runs, runs):
    for scenario in gpudirect_runs.values():
        assert scenario.cluster.contract.interconnect.privileged_pod_security
        (namespace,) = scenario.run.of_type("kubernetes:core/v1:Namespace")
        labels = namespace.inputs["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
        assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    # GCP without a fabric keeps baseline and a plain pod.
    plain = runs["gcp-pytorchjob"]
    (namespace,) = plain.run.of_type("kubernetes:core/v1:Namespace")
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert "annotations" not in pod_metadata(plain)


def test_gpudirect_manifests_are_valid_kubernetes(gpudirect_runs):
    for scenario in gpudirect_runs.values():
        kinds = {m["kind"] for m in validate_manifests(scenario.run, KUBERNETES_VERSION)}
        assert kinds & {"JobSet", "PyTorchJob"}


def test_a_fabric_sidecar_that_would_block_the_job_s_end_is_refused():
    from types import SimpleNamespace

    import pulumi_kubernetes as k8s

    from infra.contract import InterconnectSpec
    from workloads.pod import fabric_sidecars

    plain = k8s.core.v1.ContainerArgs(name="rxdm", image="example/rxdm:1")
    cluster = SimpleNamespace(interconnect=InterconnectSpec(pod_resources={}, env={},
                                                            sidecars=[plain]))
    with pytest.raises(ValueError, match="restart_policy 'Always'"):
        fabric_sidecars(cluster)  # type: ignore[arg-type]


KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"


def test_spot_shortage_wait_queues_on_the_spot_flavor_only_and_the_pod_follows_the_flavor():
    """policy wait: one flavor (the spot pool), no capacity check; the pod requires a GPU pool
    node but no longer pins one, so Kueue's flavor nodeSelector decides."""
    from infra.settings.model.job import SpotShortage

    scenario = run_workload("gcp", Job(pool=PoolChoice.SPOT, spot_shortage=SpotShortage()))
    (queue,) = scenario.run.of_type(f"{KUEUE}:ClusterQueue")
    (group,) = queue.inputs["spec"]["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["dlrm-spot"]
    assert "admissionChecksStrategy" not in queue.inputs["spec"]
    terms = scenario.pod_spec()["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) == 1  # the spot pool's labels: still a GPU node of the job's pool


def test_kueue_waits_for_capacity_without_a_bound_by_default():
    """backoffLimitCount null: Kueue requeues without end (RequeuingStrategy, v1beta2). A bound
    would count PodsReady timeouts over the job's whole life, never reset when the gang runs,
    so a multi-day spot run would be held after enough reclaims."""
    from infra.settings.model.job import SpotShortage

    config = kueue_config(run_workload("aws", Job(pool=PoolChoice.SPOT)))
    strategy = config["waitForPodsReady"]["requeuingStrategy"]
    assert "backoffLimitCount" not in strategy
    bounded = kueue_config(run_workload("aws", Job(
        pool=PoolChoice.SPOT, spot_shortage=SpotShortage(max_wait_minutes=240))))
    # 30-minute attempts with 1, 2, 4, 5, 5 ... minute backoffs: 6 requeues fit 240 minutes.
    assert bounded["waitForPodsReady"]["requeuingStrategy"]["backoffLimitCount"] == 6


def test_kueue_gives_each_machine_its_cold_start_and_requeues_before_scale_down():
    """The PodsReady timeout is the machine's node join time (infra/catalog/node_times.py): 30 minutes for
    p4d and A2, 45 for an ND with InfiniBand (its OFED and GPU drivers built on the node); the
    requeue backoff cap stays below the autoscaler's scale-down-unneeded-time, so the nodes a
    timed-out attempt brought up are still there when the gang is admitted again."""
    from infra.aws.autoscaler import values

    for flavour, minutes in (("aws", 30), ("azure", 45), ("gcp", 30)):
        ready = kueue_config(run_workload(flavour, Job(pool=PoolChoice.SPOT)))["waitForPodsReady"]
        assert (ready["timeout"], ready["recoveryTimeout"]) == (f"{minutes}m", f"{minutes}m")
        unneeded = values("c", "us-east-1", "1.34", "arn", {})["extraArgs"][
            "scale-down-unneeded-time"]
        assert ready["requeuingStrategy"]["backoffMaxSeconds"] < int(unneeded.rstrip("m")) * 60


def kueue_config(scenario: WorkloadRun) -> dict[str, Any]:
    (release,) = [r for r in scenario.run.of_type("kubernetes:helm.sh/v3:Release")
                  if r.inputs["chart"].endswith("/kueue")]
    return yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])


def test_a_suspended_job_is_left_out_of_kueue_so_it_stays_suspended():
    """job.suspend true: Kueue would unsuspend a queue-labelled job on admission; without the
    label, and with manageJobsWithoutQueueName false, Kueue leaves it alone, suspended."""
    for kind in JobKind:
        scenario = run_workload("aws", Job(kind=kind, pool=PoolChoice.SPOT, suspend=True))
        job = scenario.workload()
        assert "kueue.x-k8s.io/queue-name" not in job.inputs["metadata"]["labels"], kind
        spec = job.inputs["spec"]
        assert (spec.get("suspend") if kind == JobKind.JOB_SET
                else spec["runPolicy"]["suspend"]) is True, kind
        assert kueue_config(scenario)["manageJobsWithoutQueueName"] is False
        validate_manifests(scenario.run, KUBERNETES_VERSION)


def test_a_running_job_is_queued_in_kueue_for_both_kinds(runs):
    """Both job kinds carry the LocalQueue's label, Kueue's manager enables the kind's
    integration (kubeflow.org/pytorchjob for the PyTorchJob), and the job waits for the queue;
    the Kueue objects validate against their CRD schemas."""
    for key, framework in (("aws-spot", "jobset.x-k8s.io/jobset"),
                           ("gcp-pytorchjob", "kubeflow.org/pytorchjob")):
        scenario = runs[key]
        job = scenario.workload()
        (local,) = scenario.run.of_type(f"{KUEUE}:LocalQueue")
        (queue,) = scenario.run.of_type(f"{KUEUE}:ClusterQueue")
        assert job.inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == \
            local.inputs["metadata"]["name"]
        assert kueue_config(scenario)["integrations"]["frameworks"] == [framework]
        for earlier in (local, queue):
            assert scenario.run.waits_for(job, earlier), (key, earlier.name)
        assert "suspend" not in job.inputs["spec"].get("runPolicy", job.inputs["spec"])
        validate_manifests(scenario.run, KUBERNETES_VERSION)


def test_the_rendezvous_outwaits_every_machines_cold_start() -> None:
    """Kueue's ready timeout (a machine's node_ready_minutes) must end a partial gang's wait
    first: it frees the nodes the gang holds, where a rendezvous timeout only restarts it."""
    from infra.catalog.machines import MACHINES
    from workloads.command import RENDEZVOUS_JOIN_TIMEOUT_SECONDS

    slowest = max(m.node_ready_minutes for m in MACHINES if m.gpu_count)
    assert slowest * 60 < RENDEZVOUS_JOIN_TIMEOUT_SECONDS, slowest


def test_the_planner_is_given_the_machines_bandwidths_from_the_catalog() -> None:
    """torchrec's planner costs a plan with the machine's own HBM, NVLink and network figures,
    not its defaults (12.5 GB/s between hosts), and a user cannot override them by accident."""
    from infra.catalog.machines import gpu_hbm_gb_s, inter_host_gb_s_per_gpu
    from workloads.flags import STACK_OWNED

    scenario = run_workload("aws", Job())
    args = scenario.container()["args"]
    machine = scenario.cluster.contract.gpu_pools[Job().pool.value].machine
    assert f"--inter_host_gb_per_sec={inter_host_gb_s_per_gpu(machine, True):g}" in args
    if gpu_hbm_gb_s(machine):
        assert f"--hbm_gb_per_sec={gpu_hbm_gb_s(machine):g}" in args
    assert {"hbm_gb_per_sec", "intra_host_gb_per_sec", "inter_host_gb_per_sec"} <= set(STACK_OWNED)


@pytest.mark.parametrize("flavour", ["aws", "gcp"])
def test_without_the_fabric_the_planner_is_given_the_primary_nic_s_sockets(flavour: str) -> None:
    """interconnect.fabric false: NCCL goes over plain sockets on the pod network's NIC, so the
    planner costs the all-to-all at that figure, the one the run estimate uses, not the
    fabric's rated speed (p4d: 100 of 400 Gbit/s)."""
    from infra.catalog.machines import inter_host_gb_s_per_gpu
    from infra.settings.model.interconnect import Interconnect

    on = run_workload(flavour, Job())
    off = run_workload(flavour, Job(), interconnect=Interconnect(fabric=False))
    machine = off.cluster.contract.gpu_pools[Job().pool.value].machine
    sockets = inter_host_gb_s_per_gpu(machine, False)
    assert f"--inter_host_gb_per_sec={sockets:g}" in off.container()["args"]
    assert sockets == machine.socket_gbps / 8 / machine.gpu_count
    if machine.interconnect.value != "none":  # a fabric machine loses its fabric's share
        assert sockets < inter_host_gb_s_per_gpu(machine, True)
        assert f"--inter_host_gb_per_sec={sockets:g}" not in on.container()["args"]
