"""Why the gang is not running: each reason a user meets, from the objects the API returns."""

from __future__ import annotations

import pytest

from tests import waiting_fixtures as fx
from workloads import cloud_errors
from workloads.cloud_errors import Refusal
from workloads.waiting import ClusterView, Kind, explain

GKE_NODES = [fx.node("gke-torchrec-system-1a2b")]
EKS_NODES = [fx.node("ip-10-0-1-23.ec2.internal", provider="aws:///us-east-1a/i-0abc")]
AKS_NODES = [fx.node("aks-system-12345678-vmss000000",
                     provider="azure:///subscriptions/0000/resourceGroups/mc/providers/"
                              "Microsoft.Compute/virtualMachineScaleSets/aks-system/virtualMachines/")]


def view(**kwargs) -> ClusterView:
    kwargs.setdefault("jobset", fx.jobset())
    kwargs.setdefault("nodes", GKE_NODES)
    return ClusterView(job=fx.JOB, namespace=fx.NS, **kwargs)


def pending(spot: bool = False, message: str = fx.INSUFFICIENT_GPU, cloud: str = "gcp") -> list[dict]:
    """The gang's two pods as the stack renders them for that cloud's pool, admitted by Kueue to
    that pool's flavor, not yet on a node."""
    pool = "spot" if spot else "onDemand"
    placement = fx.rendered_spec(cloud, (pool,), admitted=pool)
    return [fx.trainer_pod(i, placement=placement, unschedulable=message) for i in (0, 1)]


# --- no quota -------------------------------------------------------------------------------

def test_gke_quota_refusal_says_no_quota_and_where_to_ask():
    verdict = explain(view(pods=pending(), events=[
        fx.event("FailedScheduling", fx.INSUFFICIENT_GPU, source="default-scheduler",
                 type_="Warning", time="2026-11-26T10:00:00Z"),
        fx.event("TriggeredScaleUp", fx.TRIGGERED, time="2026-11-26T10:00:05Z"),
        fx.event("FailedScaleUp", fx.GCE_QUOTA, type_="Warning", time="2026-11-26T10:01:00Z"),
        fx.event("NotTriggerScaleUp", fx.BACKOFF, time="2026-11-26T10:01:30Z"),
    ]))
    assert verdict.kind == Kind.NO_QUOTA
    assert "GCE quota exceeded" in verdict.evidence and "FailedScaleUp" in verdict.evidence
    assert "GPUS_ALL_REGIONS" in verdict.next_step and "NVIDIA_*_GPUS" in verdict.next_step


def test_eks_quota_is_read_from_the_autoscaler_log_and_names_the_p_instance_quota():
    verdict = explain(view(
        nodes=EKS_NODES, pods=pending(cloud="aws", message="0/2 nodes are available: 2 Insufficient nvidia.com/gpu."),
        events=[fx.event("TriggeredScaleUp", "pod triggered scale-up: [{eks-gpu-ondemand-a1b2c3d4 0->2 (max: 2)}]")],
        autoscaler_events=[fx.event("ScaleUpFailed", fx.AWS_PLACEHOLDER, kind="ConfigMap",
                                    on="cluster-autoscaler-status", namespace="kube-system",
                                    type_="Warning")],
        autoscaler_log="I1126 10:00:00.1 1 static_autoscaler.go:300] Starting main loop\n"
                       + fx.AWS_VCPU + "\n"))
    assert verdict.kind == Kind.NO_QUOTA
    assert "vCPU limit of 0" in verdict.evidence
    assert "L-417A185B" in verdict.next_step and "Running On-Demand P instances" in verdict.next_step
    assert "aws service-quotas request-service-quota-increase" in verdict.next_step
    # the number, not a placeholder: 2 pods x p4d.24xlarge's 96 vCPUs
    assert "--desired-value 192 " in verdict.next_step, verdict.next_step


def test_aks_quota_from_the_failed_scale_up_group_event():
    verdict = explain(view(
        nodes=AKS_NODES, pods=pending(cloud="azure"),
        autoscaler_events=[fx.event("FailedToScaleUpGroup", fx.AZURE_QUOTA, kind="ConfigMap",
                                    on="cluster-autoscaler-status", namespace="kube-system",
                                    type_="Warning")]))
    assert verdict.kind == Kind.NO_QUOTA
    assert "exceeding approved standardNDASv4_A100Family Cores quota" in verdict.evidence
    assert "az vm list-usage" in verdict.next_step


# --- no capacity ----------------------------------------------------------------------------

def test_gke_spot_stockout_offers_on_demand():
    verdict = explain(view(pods=pending(spot=True), events=[
        fx.event("TriggeredScaleUp", fx.TRIGGERED, time="2026-11-26T10:00:05Z"),
        fx.event("FailedScaleUp", fx.GCE_STOCKOUT, type_="Warning", time="2026-11-26T10:01:00Z"),
    ]))
    assert verdict.kind == Kind.NO_CAPACITY
    assert "spot" in verdict.reason
    assert "job.pool onDemand" in verdict.next_step


def test_gke_pool_exhausted_in_the_status_configmap():
    verdict = explain(view(pods=pending(), events=[fx.event("NotTriggerScaleUp", fx.BACKOFF)],
                           autoscaler_status=fx.autoscaler_status(fx.GCE_POOL_EXHAUSTED)))
    assert verdict.kind == Kind.NO_CAPACITY
    assert "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS" in verdict.evidence
    assert "gpuZones" in verdict.next_step


def test_aks_zonal_allocation_failure_in_the_status_configmap():
    verdict = explain(view(nodes=AKS_NODES, pods=pending(spot=True, cloud="azure"),
                           autoscaler_status=fx.autoscaler_status(fx.AZURE_ALLOCATION)))
    assert verdict.kind == Kind.NO_CAPACITY
    assert "aks-gpuspot-98036146-vmss" in verdict.evidence and "ZonalAllocationFailed" in verdict.evidence


def test_eks_spot_insufficient_capacity_from_the_log():
    verdict = explain(view(nodes=EKS_NODES, pods=pending(spot=True, cloud="aws"), autoscaler_log=fx.AWS_ICE))
    assert verdict.kind == Kind.NO_CAPACITY
    assert "InsufficientInstanceCapacity" in verdict.evidence


def test_a_failed_scale_up_without_the_cloud_s_words_still_says_it_failed():
    verdict = explain(view(nodes=EKS_NODES, pods=pending(cloud="aws"), autoscaler_events=[
        fx.event("ScaleUpFailed", fx.AWS_PLACEHOLDER, kind="ConfigMap",
                 on="cluster-autoscaler-status", namespace="kube-system", type_="Warning")]))
    assert verdict.kind == Kind.SCALE_UP_FAILED
    assert "placeholder-cannot-be-fulfilled" in verdict.evidence
    assert "describe-scaling-activities" in verdict.next_step


@pytest.mark.parametrize("text, refusal, cloud", [
    ("An error occurred (VcpuLimitExceeded) when calling the RunInstances operation", Refusal.NO_QUOTA, "aws"),
    ("An error occurred (InsufficientInstanceCapacity) when calling the RunInstances operation", Refusal.NO_CAPACITY, "aws"),
    ("We currently do not have sufficient p5.48xlarge capacity in the Availability Zone you requested (us-east-1a).", Refusal.NO_CAPACITY, "aws"),
    ("Code=\"QuotaExceeded\" Message=\"Preflight validation check for resource(s) for container service failed\"", Refusal.NO_QUOTA, "azure"),
    ("Code=\"AllocationFailed\" Message=\"Allocation failed.\"", Refusal.NO_CAPACITY, "azure"),
    ("Code=\"SkuNotAvailable\" Message=\"The requested VM size Standard_ND96asr_v4 is currently not available in location 'eastus' zones '2'\"", Refusal.NO_CAPACITY, "azure"),
    ("Code=\"OverconstrainedAllocationRequest\"", Refusal.NO_CAPACITY, "azure"),
    ("Instance creation failed: Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally.", Refusal.NO_QUOTA, "gcp"),
    ("QUOTA_EXCEEDED: Quota 'NVIDIA_H100_GPUS' exceeded.", Refusal.NO_QUOTA, "gcp"),
    ("ZONE_RESOURCE_POOL_EXHAUSTED", Refusal.NO_CAPACITY, "gcp"),
    ("a2-highgpu-8g: stockout in us-central1-a", Refusal.NO_CAPACITY, "gcp"),
])
def test_each_cloud_s_code_reads_as_quota_or_capacity(text, refusal, cloud):
    found = cloud_errors.match(text)
    assert found is not None and (found.refusal, found.cloud) == (refusal, cloud)


def test_an_unrelated_message_is_no_cloud_refusal():
    assert cloud_errors.match("Scale-up: setting group ng size to 2 instead of 0 (max: 2)") is None


# --- the autoscaler -------------------------------------------------------------------------

def test_waiting_for_a_spot_node_while_the_autoscaler_adds_it():
    verdict = explain(view(pods=pending(spot=True), events=[
        fx.event("FailedScheduling", fx.INSUFFICIENT_GPU, source="default-scheduler"),
        fx.event("TriggeredScaleUp", fx.TRIGGERED, time="2026-11-26T10:00:05Z")]))
    assert verdict.kind == Kind.SCALING_UP
    assert "spot" in verdict.reason and "0->2 (max: 2)" in verdict.evidence


def test_pool_at_max_size_says_which_setting_to_raise():
    verdict = explain(view(pods=pending(), events=[
        fx.event("TriggeredScaleUp", fx.TRIGGERED, time="2026-11-26T10:00:05Z"),
        fx.event("NotTriggerScaleUp", fx.MAX_SIZE, time="2026-11-26T10:03:00Z")]))
    assert verdict.kind == Kind.NO_SCALE_UP
    assert "gpuPools.onDemand.maxNodes" in verdict.next_step


def test_no_pool_fits_the_pod():
    verdict = explain(view(pods=pending(), events=[fx.event("NotTriggerScaleUp", fx.NO_FIT)]))
    assert verdict.kind == Kind.NO_SCALE_UP
    assert "node affinity" in verdict.evidence and "describe pod dlrm-node-0-0" in verdict.next_step


def test_insufficient_gpu_before_the_autoscaler_speaks():
    verdict = explain(view(pods=pending()))
    assert verdict.kind == Kind.UNSCHEDULABLE
    assert "Insufficient nvidia.com/gpu" in verdict.evidence and "free GPU" in verdict.reason


def test_events_of_an_earlier_generation_s_pods_are_not_evidence():
    old = fx.event("FailedScaleUp", fx.GCE_QUOTA, on="dlrm-node-0-0-previous", type_="Warning")
    verdict = explain(view(pods=pending(), events=[old]))
    assert verdict.kind == Kind.UNSCHEDULABLE


def test_events_k8s_io_shape_reads_the_same():
    verdict = explain(view(pods=pending(), events=[fx.new_event("FailedScaleUp", fx.GCE_QUOTA)]))
    assert verdict.kind == Kind.NO_QUOTA and "GCE quota exceeded" in verdict.evidence


# --- admission, the health gate, the image, the preparation ---------------------------------

def test_kueue_quota_smaller_than_the_gang():
    reserved = fx.condition("QuotaReserved", "False", "ExceedsMaxQuota", fx.KUEUE_MAX)
    verdict = explain(view(jobset=fx.jobset(suspend=True, queue="training"),
                           workloads=[fx.kueue_workload(reserved)]))
    assert verdict.kind == Kind.ADMISSION
    assert "Workload/jobset-dlrm-3c9a1 QuotaReserved=False" in verdict.evidence
    assert "> maximum capacity (8)" in verdict.evidence and "nominalQuota" in verdict.next_step


def test_kueue_quota_held_by_other_workloads():
    reserved = fx.condition("QuotaReserved", "False", "Pending", fx.KUEUE_WAIT)
    verdict = explain(view(jobset=fx.jobset(suspend=True, queue="training"),
                           workloads=[fx.kueue_workload(reserved)]))
    assert verdict.kind == Kind.ADMISSION and "frees up" in verdict.next_step


def test_kueue_admission_checks_pending():
    reserved = fx.condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue gpu")
    admitted = fx.condition("Admitted", "False", "NoChecks", "The workload has not all checks ready")
    verdict = explain(view(jobset=fx.jobset(suspend=True, queue="training"),
                           workloads=[fx.kueue_workload(reserved, admitted)]))
    assert verdict.kind == Kind.ADMISSION and "admission checks" in verdict.reason


def test_suspended_without_a_queue_points_at_the_setting():
    verdict = explain(view(jobset=fx.jobset(suspend=True)))
    assert verdict.kind == Kind.SUSPENDED and "job.suspend false" in verdict.next_step


def test_a_node_left_out_by_the_health_gate_is_named():
    bad = fx.node("gke-torchrec-gpu-ondemand-9f8e", taints=[
        {"key": "status-taint.cluster-autoscaler.kubernetes.io/torchrec-cloud-unhealthy", "value": "true",
         "effect": "NoSchedule"}])
    verdict = explain(view(nodes=[*GKE_NODES, bad],
                           pods=pending(message=fx.UNHEALTHY_TAINT_MESSAGE),
                           events=[fx.event("TriggeredScaleUp", fx.TRIGGERED)]))
    assert verdict.kind == Kind.NODE_LEFT_OUT
    assert "gke-torchrec-gpu-ondemand-9f8e" in verdict.reason
    assert ("kubectl taint nodes gke-torchrec-gpu-ondemand-9f8e "
            "status-taint.cluster-autoscaler.kubernetes.io/torchrec-cloud-unhealthy-") in verdict.next_step


def test_a_node_with_the_gates_pre_2026_11_taint_is_named_with_the_command_that_clears_it():
    """A cluster made by an earlier release keeps nodes tainted `torchrec-cloud/unhealthy`: not a
    status taint, so the autoscaler's template keeps it and the pool may never grow for the gang."""
    old = fx.node("ip-10-0-1-7.ec2.internal", taints=[
        {"key": "torchrec-cloud/unhealthy", "value": "fabric-gate", "effect": "NoSchedule"}])
    message = ("0/3 nodes are available: 1 node(s) had untolerated taint "
               "{torchrec-cloud/unhealthy: fabric-gate}, 2 Insufficient nvidia.com/gpu.")
    verdict = explain(view(nodes=[*GKE_NODES, old], pods=pending(message=message)))
    assert verdict.kind == Kind.NODE_LEFT_OUT
    assert "autoscaler" in verdict.reason and "ip-10-0-1-7.ec2.internal" in verdict.reason
    assert "kubectl taint nodes ip-10-0-1-7.ec2.internal torchrec-cloud/unhealthy-" \
        in verdict.next_step
    assert "kubectl delete node ip-10-0-1-7.ec2.internal" in verdict.next_step


def test_image_pull_back_off_comes_before_capacity():
    pods = [fx.trainer_pod(0, node="n1", waiting=(
                "trainer", "ImagePullBackOff",
                'Back-off pulling image "registry.example.com/torchrec/trainer:0123abcd"')),
            fx.trainer_pod(1, unschedulable=fx.INSUFFICIENT_GPU)]
    verdict = explain(view(pods=pods, events=[fx.event("FailedScaleUp", fx.GCE_QUOTA, on="dlrm-node-0-1")]))
    assert verdict.kind == Kind.IMAGE_PULL
    assert "Back-off pulling image" in verdict.evidence and "job.image" in verdict.next_step


def test_dataset_preparation_still_running():
    """The trainer pods run (their main container waits for layout.json, so Kueue sees them
    Ready) while the preparation pod has not finished: that is what they wait for."""
    pods = [fx.trainer_pod(i, phase="Running", node=f"n{i}") for i in (0, 1)]
    verdict = explain(view(pods=[*pods, fx.prepare_pod("Running")]))
    assert verdict.kind == Kind.PREPARING
    assert "dlrm-prepare-1a2b3c4d-x7k2p Running" in verdict.evidence
    assert "2 trainer pods Running" in verdict.evidence
    assert "app.kubernetes.io/name=torchrec-prepare" in verdict.next_step
    done = explain(view(pods=[*pods, fx.prepare_pod("Succeeded")]))
    assert done.kind == Kind.RUNNING


# --- not waiting ----------------------------------------------------------------------------

def test_running_completed_failed_and_missing():
    running = [fx.trainer_pod(i, phase="Running", node=f"n{i}") for i in (0, 1)]
    assert explain(view(pods=running)).kind == Kind.RUNNING
    done = fx.jobset(conditions=[fx.condition("Completed", "True", "AllJobsCompleted", "jobset completed successfully")])
    assert explain(view(jobset=done)).kind == Kind.COMPLETED
    failed = fx.jobset(conditions=[fx.condition("Failed", "True", "FailedJobs", "jobset failed due to: exit code 2")])
    verdict = explain(view(jobset=failed))
    assert verdict.kind == Kind.FAILED and "exit code 2" in verdict.evidence
    assert explain(view(jobset=None)).kind == Kind.NOT_FOUND


# --- a gang Kueue holds or requeues (Kueue v0.19.2 Workload status) ---------------------------

def test_a_deactivated_workload_is_held_and_says_how_to_reactivate_it():
    evicted = fx.condition("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded",
                           fx.DEACTIVATED_MESSAGE)
    reserved = fx.condition("QuotaReserved", "False", "Pending", fx.DEACTIVATED_MESSAGE)
    verdict = explain(view(jobset=fx.jobset(suspend=True, queue="training"), workloads=[
        fx.kueue_workload(reserved, others=(evicted,), active=False)]))
    assert verdict.kind == Kind.HELD
    assert "waiting for admission" not in verdict.reason and "frees up" not in verdict.next_step
    assert "DeactivatedDueToRequeuingLimitExceeded" in verdict.evidence
    assert verdict.next_step.endswith(
        "kubectl -n torchrec patch workload jobset-dlrm-3c9a1 --type merge "
        """-p '{"spec":{"active":true}}'""")


def test_a_gang_in_requeue_backoff_says_when_and_why_without_any_pod():
    """During the backoff the pods are deleted: the reason comes from the events about the
    gang's earlier pods and the autoscaler's status ConfigMap."""
    evicted = fx.condition("Evicted", "True", "PodsReadyTimeout", fx.PODS_READY_TIMEOUT_MESSAGE)
    requeued = fx.condition("Requeued", "False", "PodsReadyTimeout", fx.PODS_READY_TIMEOUT_MESSAGE)
    reserved = fx.condition("QuotaReserved", "False", "Pending", fx.PODS_READY_TIMEOUT_MESSAGE)
    workload = fx.kueue_workload(reserved, others=(evicted, requeued), requeue_state={
        "count": 2, "requeueAt": "2026-11-26T10:20:00Z"})
    verdict = explain(view(
        jobset=fx.jobset(suspend=True, queue="training"), pods=[], workloads=[workload],
        events=[fx.event("TriggeredScaleUp", fx.TRIGGERED, on="dlrm-node-0-0-x7k2p",
                         time="2026-11-26T10:00:05Z"),
                fx.event("FailedScaleUp", fx.GCE_STOCKOUT, on="dlrm-node-0-0-x7k2p",
                         type_="Warning", time="2026-11-26T10:01:00Z")],
        autoscaler_status=fx.autoscaler_status(fx.GCE_POOL_EXHAUSTED)))
    assert verdict.kind == Kind.REQUEUED
    assert "2026-11-26T10:20:00Z" in verdict.reason and "requeue 2" in verdict.reason
    assert "no capacity" in verdict.reason
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in verdict.evidence  # the newest refusal: the ConfigMap
    assert "gpuZones" in verdict.next_step


def test_a_gang_in_requeue_backoff_with_no_refusal_says_it_is_retried():
    evicted = fx.condition("Evicted", "True", "PodsReadyTimeout", fx.PODS_READY_TIMEOUT_MESSAGE)
    workload = fx.kueue_workload(fx.condition("QuotaReserved", "False", "Pending", ""),
                                 others=(evicted,), requeue_state={
                                     "count": 1, "requeueAt": "2026-11-26T10:02:00Z"})
    verdict = explain(view(jobset=fx.jobset(suspend=True, queue="training"), workloads=[workload]))
    assert verdict.kind == Kind.REQUEUED
    assert "Kueue tries again at 2026-11-26T10:02:00Z" in verdict.next_step


# --- which pool the pod is for, as the stack renders it ---------------------------------------

@pytest.mark.parametrize("cloud", ["aws", "azure", "gcp"])
def test_spot_is_read_from_the_rendered_placement_not_from_tolerations(cloud):
    from workloads.waiting.pods import on_spot as _on_spot

    def pod(pools, admitted):
        return fx.trainer_pod(0, placement=fx.rendered_spec(cloud, pools, admitted))

    assert _on_spot(pod(("spot",), "spot"))
    assert _on_spot(pod(("spot",), None))  # before admission: its only affinity term is spot
    # spot shortage policy onDemand: the pod tolerates both pools; the admitted flavor decides
    assert _on_spot(pod(("spot", "onDemand"), "spot"))
    assert not _on_spot(pod(("spot", "onDemand"), "onDemand"))
    assert not _on_spot(pod(("onDemand",), "onDemand"))


def test_a_gke_spot_pod_has_no_spot_toleration_and_still_reads_as_spot():
    spec = fx.rendered_spec("gcp", ("spot",), "spot")
    assert not any("spot" in str(t.get("key")) for t in spec["tolerations"])
    assert spec["nodeSelector"]["cloud.google.com/gke-spot"] == "true"


# --- rule order -------------------------------------------------------------------------------

def test_a_pool_pinned_by_the_gate_s_taint_says_node_left_out_not_raise_max_nodes():
    bad = fx.node("gke-torchrec-gpu-ondemand-9f8e", taints=[
        {"key": "status-taint.cluster-autoscaler.kubernetes.io/torchrec-cloud-unhealthy", "value": "true",
         "effect": "NoSchedule"}])
    verdict = explain(view(nodes=[*GKE_NODES, bad], pods=pending(message=fx.UNHEALTHY_TAINT_MESSAGE),
                           events=[fx.event("NotTriggerScaleUp", fx.MAX_SIZE)]))
    assert verdict.kind == Kind.NODE_LEFT_OUT
    assert "maxNodes" in verdict.next_step and "gke-torchrec-gpu-ondemand-9f8e" in verdict.reason


# --- Azure's provisioning failure, EC2 reservations, EC2 quotas by family ---------------------

def test_aks_provisioning_state_failed_reads_as_likely_no_capacity_with_the_activity_log():
    verdict = explain(view(
        nodes=AKS_NODES, pods=pending(spot=True, cloud="azure"),
        autoscaler_events=[fx.event("ScaleUpFailed", fx.AZURE_PROVISIONING_FAILED, kind="ConfigMap",
                                    on="cluster-autoscaler-status", namespace="kube-system",
                                    type_="Warning")]))
    assert verdict.kind == Kind.NO_CAPACITY and "likely a stock-out" in verdict.reason
    assert "provisioning-state-failed" in verdict.evidence
    # the node resource group, from the AKS node's providerID
    assert "az monitor activity-log list -g mc --status Failed --offset 1h" in verdict.next_step


def test_a_full_capacity_reservation_names_the_reservation_not_the_zone():
    verdict = explain(view(nodes=EKS_NODES, pods=pending(cloud="aws"),
                           autoscaler_log=fx.AWS_RESERVATION_FULL))
    assert verdict.kind == Kind.NO_CAPACITY and "reservation" in verdict.reason
    assert "aws ec2 describe-capacity-reservations" in verdict.next_step
    assert "StartDate" in verdict.next_step


@pytest.mark.parametrize("text", [
    "An error occurred (ReservationCapacityExceeded) when calling the RunInstances operation",
    "InsufficientInstanceCapacity - Insufficient capacity in the targeted capacity reservation cr-0123",
    "The Capacity Block cr-0123456789abcdef0 is not active yet",
])
def test_reservation_refusals_read_as_reservation(text):
    found = cloud_errors.match(text)
    assert found is not None and found.refusal == Refusal.NO_RESERVATION


@pytest.mark.parametrize("instance, quota, code, other", [
    ("p5.48xlarge", "All P5 Spot Instance Requests", "L-C4BD4855", "L-7212CCBC"),
    ("p4d.24xlarge", "All P4, P3 and P2 Spot Instance Requests", "L-7212CCBC", "L-C4BD4855"),
])
def test_eks_spot_quota_is_named_by_instance_family(instance, quota, code, other):
    text = (f"W1126 10:01:02.345678 1 auto_scaling_groups.go:555] ASG eks-gpu-spot-a1b2 scaling "
            f"failed with description: Launching a new EC2 instance. Status Reason: Could not "
            f"launch Spot Instances. MaxSpotInstanceCountExceeded - Max spot instance count "
            f"exceeded ({instance}). Launching EC2 instance failed.")
    verdict = explain(view(nodes=EKS_NODES, pods=pending(spot=True, cloud="aws"), autoscaler_log=text))
    assert verdict.kind == Kind.NO_QUOTA
    assert f'"{quota}" ({code})' in verdict.next_step
    assert f"--quota-code {code} " in verdict.next_step and other not in verdict.next_step


def test_eks_spot_quota_family_from_the_pool_s_accelerator_label():
    """The vCPU-limit text names no instance type; the pod's placement does (the shipped AWS
    stack's p4d pool: k8s.amazonaws.com/accelerator=nvidia-a100)."""
    verdict = explain(view(nodes=EKS_NODES, pods=pending(spot=True, cloud="aws"),
                           autoscaler_log=fx.AWS_VCPU))
    assert "All P4, P3 and P2 Spot Instance Requests" in verdict.next_step
