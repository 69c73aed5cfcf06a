"""`python -m torchrec_cloud status` against a fake Kubernetes API serving recorded objects (the
real kubectl reads it, tests/fake_api.py) and a local folder as the bucket (file://).

Three gangs a user meets: one pending for quota, one running (progress, ETA, checkpoint,
spend), one restarted (a preemption and a fault told apart). The clock is passed in; every age
is measured against the recorded timestamps.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests import waiting_fixtures as fx
from tests.fake_api import FakeApi, api_list, kubeconfig
from tests.test_gpu_metrics import _pod, _pod_list, _pods_path, _proxy, exporter_output
from torchrec_cloud import status
from torchrec_cloud.stack import Outputs, kubeconfig_file, read_outputs
from torchrec_cloud.tensorboard import sync
from workloads.why import Kubectl

ROOT = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)  # two hours after fx.T0
NS_PATH = f"/api/v1/namespaces/{fx.NS}"
JOBSET = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{fx.NS}/jobsets/{fx.JOB}"
WORKLOADS = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{fx.NS}/workloads"
CA_STATUS = "/api/v1/namespaces/kube-system/configmaps/cluster-autoscaler-status"
CA_EVENTS = ("/api/v1/namespaces/kube-system/events?fieldSelector="
             "involvedObject.name%3Dcluster-autoscaler-status")
CA_PODS = ("/api/v1/namespaces/kube-system/pods?labelSelector="
           "app.kubernetes.io%2Fname%3Daws-cluster-autoscaler")
CA_POD = "cluster-autoscaler-aws-cluster-autoscaler-7ff79bc484-pm8g9"
RANK0_LOG = f"{NS_PATH}/pods/{fx.JOB}-node-0-0/log?container=trainer&tailLines=500"
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


def outputs(bucket: Path, cloud: str = "aws") -> Outputs:
    return Outputs(stack=cloud, cloud=cloud, cluster_name="torchrec-cloud-aws", kubeconfig="",
                   checkpoint_uri=f"file://{bucket}", job_name=fx.JOB, job_namespace=fx.NS,
                   checkpoint_location="objectStore", checkpoint_dir=f"file://{bucket}",
                   node_pools={"system": "on-demand", "gpu-ondemand": "on-demand", "gpu-spot": "spot"})


def eks_node(name: str, pool: str, machine: str, *, spot: bool = False, created: str = fx.T0,
             ready: bool = True) -> dict[str, Any]:
    """A Node as EKS registers it: the well-known instance-type label, the managed node group's
    labels, and this stack's pool and capacity labels (infra/aws/node_groups.py)."""
    labels = {"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": machine,
              "eks.amazonaws.com/nodegroup": pool, "torchrec-cloud/pool": pool,
              "eks.amazonaws.com/capacityType": "SPOT" if spot else "ON_DEMAND"}
    if pool.startswith("gpu"):
        labels["torchrec-cloud/capacity"] = "spot" if spot else "on-demand"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "creationTimestamp": created},
            "spec": {"providerID": f"aws:///us-east-1a/i-0{abs(hash(name)) % 10**8:08d}"},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def jobset_with_args(*extra: str, **kwargs: Any) -> dict[str, Any]:
    """fx.jobset with the pod template's trainer args, as workloads/jobset.py renders them for
    the shipped stack files: no --max_steps (the run ends with its synthetic epoch)."""
    js = fx.jobset(**kwargs)
    js["spec"]["replicatedJobs"][0]["template"] = {"spec": {"template": {"spec": {"containers": [
        {"name": "trainer", "command": ["/bin/sh", "-c", "exec python -m trainer.launch "
                                        "--max_restarts=0 -m trainer \"$@\"", "trainer"],
         "args": ["--batch_size=4096", *extra, "--metrics_file=/mnt/fs/runs/dlrm/metrics.jsonl"]}]}}}}
    return js


def ca_status(groups: str) -> dict[str, Any]:
    return fx.autoscaler_status(f'time: "2026-11-26 11:59:00 +0000 UTC"\nautoscalerStatus: "Running"\n'
                                f"nodeGroups:\n{groups}")


def report(api: FakeApi, tmp_path: Path, bucket: Path) -> list[str]:
    text = status.report(outputs(bucket), Kubectl(str(kubeconfig(tmp_path, api.url))), NOW,
                         out_dir=tmp_path / "out")
    return text.splitlines()


def section(lines: list[str], title: str) -> list[str]:
    start = lines.index(title) + 1
    end = next((i for i in range(start, len(lines)) if lines[i] and not lines[i].startswith(" ")),
               len(lines))
    return [line.strip() for line in lines[start:end] if line.strip()]


@needs_kubectl
def test_a_gang_pending_for_quota_names_the_pool_the_cloud_refused_and_why(tmp_path):
    pods = [fx.trainer_pod(i, unschedulable="0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
            for i in (0, 1)]
    routes = {
        JOBSET: jobset_with_args(),
        f"{NS_PATH}/pods": api_list("PodList", pods),
        f"{NS_PATH}/events": api_list("EventList", [fx.event(
            "TriggeredScaleUp", "pod triggered scale-up: [{eks-gpu-ondemand-a1b2c3d4 0->2 (max: 2)}]")]),
        "/api/v1/nodes": api_list("NodeList", [eks_node("ip-10-0-1-23.ec2.internal", "system", "m6i.xlarge")]),
        CA_STATUS: ca_status('  - name: "eks-torchrec-cloud-aws-gpu-ondemand-3f9a1c-a1b2c3d4-5e6f-7a8b-9c0d-1e2f3a4b5c6d"\n    health:\n      status: "Healthy"\n'
                             "      nodeCounts:\n        registered:\n          total: 0\n"
                             '      cloudProviderTarget: 2\n    scaleUp:\n      status: "InProgress"\n'),
        CA_EVENTS: api_list("EventList", [fx.event("ScaleUpFailed", fx.AWS_PLACEHOLDER, kind="ConfigMap",
                                                   on="cluster-autoscaler-status", namespace="kube-system")]),
        CA_PODS: api_list("PodList", [{"apiVersion": "v1", "kind": "Pod",
                                       "metadata": {"name": CA_POD, "namespace": "kube-system"}}]),
        f"/api/v1/namespaces/kube-system/pods/{CA_POD}/log?sinceSeconds=3600": fx.AWS_VCPU + "\n",
    }
    with FakeApi(routes) as api:
        lines = report(api, tmp_path, tmp_path / "bucket")
    pools = section(lines, "Pools and nodes")
    # No GPU node yet: the stack's node_pools output names the autoscaler's group.
    assert pools[0] == ("gpu-ondemand (on-demand): 0 ready, 0 not ready, 2 pending scale-up")
    assert pools[1].startswith("scale-up failed: no quota: W1126") and "vCPU limit of 0" in pools[1]
    assert pools[2] == "system (on-demand, m6i.xlarge): 1 ready, 0 not ready"
    gang = section(lines, "Gang")
    assert gang[0] == "no Kueue Workload for the job (no queue, or Kueue not installed)"
    assert gang[1] == "pods: 0 running, 2 pending, 0 failed"
    assert gang[2] == ("state: no quota: the cloud refused a new on-demand GPU node because the "
                       "account's quota is used up")
    assert gang[4].startswith('next step: request quota "Running On-Demand P instances"')
    training = section(lines, "Training")
    assert training[0].startswith("metrics: file://") and "does not exist yet" in training[0]
    assert training[1] == f"rank 0's log cannot be read either: Pod/{fx.JOB}-node-0-0 (rank 0) has not started"
    assert "newest complete checkpoint: none yet (no step-N folder with .metadata)" in training
    assert section(lines, "Restarts") == ["no restarts"]
    # One m6i.xlarge for two hours at the catalog's on-demand USD 0.192/h.
    assert section(lines, "Spend (estimate)")[0].startswith("about USD 0.38 so far, USD 0.19/h now (1 nodes")


def _train(step: int) -> dict[str, Any]:
    """A train record as MetricsLogger.record writes it (log_every 100, 8192 samples a step)."""
    return {"event": "train", "step": step, "loss": 0.50 - step / 10000, "auc": 0.70 + step / 10000,
            "samples": 819200, "samples_per_sec": 2048.0, "step_time_ms": 4000.0, "lr": 0.01,
            "time": 1795600000.0 + step}


def _start(step: int, resumed_from: int | None, total: int | None = 1000) -> dict[str, Any]:
    return {"event": "start", "step": step, "resumed_from": resumed_from, "world_size": 16,
            "total_steps": total, "time": 1795600000.0 + step}


def _summary(step: int, preempted: bool) -> dict[str, Any]:
    return {"event": "summary", "step": step, "loss": 0.48, "auc": 0.72, "samples_per_sec": 2000.0,
            "resumed_from": None, "preempted": preempted, "malformed_rows": 0, "world_size": 16,
            "target_reached": False, "time": 1795600000.0 + step}


# Two generations in one file, as trainer/metrics.py appends them: the first started at 0 (the
# shipped job: no --max_steps, one synthetic epoch of 1,000 steps), saved step-200 and was
# preempted at 230; the second resumed from step-200 and trains on.
GENERATIONS = [
    _start(0, None), _train(100), _train(200), {"event": "checkpoint", "step": 200, "dir": "s3://b"},
    _summary(230, preempted=True),
    _start(200, 200), _train(300), {"event": "checkpoint", "step": 300, "dir": "s3://b"},
    {"event": "eval", "step": 300, "loss": 0.46, "auc": 0.7891, "samples": 100000},
    _train(400), {"event": "checkpoint", "step": 400, "dir": "s3://b"},
]


def _metrics(bucket: Path) -> None:
    """metrics.jsonl (GENERATIONS), and two checkpoints: step-300 complete, step-400 still
    being written (no .metadata)."""
    telemetry = bucket / "telemetry"
    telemetry.mkdir(parents=True)
    (telemetry / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in GENERATIONS)
                                             + '{"event": "train", "st')  # an append in flight
    for step, complete in ((300, True), (400, False)):
        folder = bucket / f"step-{step}"
        folder.mkdir()
        (folder / "__0_0.distcp").write_bytes(b"x")
        if complete:
            (folder / ".metadata").write_bytes(b"x")
            when = datetime(2026, 11, 26, 11, 45, tzinfo=timezone.utc).timestamp()
            os.utime(folder / ".metadata", (when, when))
    written = datetime(2026, 11, 26, 11, 58, tzinfo=timezone.utc).timestamp()
    os.utime(telemetry / "metrics.jsonl", (written, written))


def _running_routes(nodes: list[dict[str, Any]], jobset: dict[str, Any],
                    events: list[dict[str, Any]] = ()) -> dict[str, Any]:
    admitted = fx.condition("Admitted", "True", "Admitted", "The workload is admitted")
    workload = fx.kueue_workload(fx.condition("QuotaReserved", "True", "QuotaReserved", ""), admitted)
    workload["status"]["admission"] = {"clusterQueue": "training", "podSetAssignments": [
        {"name": "node", "flavors": {"nvidia.com/gpu": "on-demand"}, "count": 2}]}
    pods = [fx.trainer_pod(i, phase="Running", node=nodes[i]["metadata"]["name"]) for i in (0, 1)]
    return {
        JOBSET: jobset,
        f"{NS_PATH}/pods": api_list("PodList", pods),
        f"{NS_PATH}/events": api_list("EventList", list(events)),
        WORKLOADS: {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadList", "metadata": {},
                    "items": [workload]},
        "/api/v1/nodes": api_list("NodeList", nodes),
        CA_PODS: api_list("PodList", []),
    }


GPU_NODES = [eks_node("ip-10-0-1-10.ec2.internal", "gpu-ondemand", "p4d.24xlarge"),
             eks_node("ip-10-0-1-11.ec2.internal", "gpu-ondemand", "p4d.24xlarge",
                      created="2026-11-26T11:00:00Z"),
             eks_node("ip-10-0-1-23.ec2.internal", "system", "m6i.xlarge")]


@needs_kubectl
def test_a_running_gang_shows_progress_eta_the_newest_complete_checkpoint_and_spend(tmp_path):
    bucket = tmp_path / "bucket"
    _metrics(bucket)
    saved = tmp_path / "outputs.json"  # as `pulumi stack output --json --show-secrets` prints it
    exporters = {  # each GPU node's DCGM exporter, read through the API server's pod proxy
        _pods_path("aws"): _pod_list(_pod("dcgm-exporter-a1", "ip-10-0-1-10.ec2.internal"),
                                     _pod("dcgm-exporter-b2", "ip-10-0-1-11.ec2.internal")),
        _proxy("aws", "dcgm-exporter-a1"): exporter_output("ip-10-0-1-10.ec2.internal", [90] * 8),
        _proxy("aws", "dcgm-exporter-b2"): exporter_output("ip-10-0-1-11.ec2.internal", [40, 60] * 4),
    }
    default_ns = {"apiVersion": "v1", "kind": "Namespace",  # made with the cluster, 2 h ago
                  "metadata": {"name": "default", "creationTimestamp": fx.T0}}
    with FakeApi({**_running_routes(GPU_NODES, jobset_with_args()), **exporters,
                  "/api/v1/namespaces/default": default_ns}) as api:
        config = kubeconfig(tmp_path, api.url)
        saved.write_text(json.dumps({
            "cloud": "aws", "cluster_name": "torchrec-cloud-aws", "job_name": fx.JOB,
            "job_namespace": fx.NS, "checkpoint_uri": f"file://{bucket}",
            "checkpoint_location": "objectStore", "checkpoint_dir": f"file://{bucket}",
            "node_pools": {"system": "on-demand", "gpu-ondemand": "on-demand", "gpu-spot": "spot"},
            "estimated_cost": {"items": [  # the nodes are priced from the cluster instead
                {"item": "GPU nodes", "usd_per_hour": 43.92, "nodes": True},
                {"item": "control plane", "usd_per_hour": 0.1},
                {"item": "file system", "usd_per_hour": 0.9}]},
            "kubeconfig": config.read_text()}))
        done = subprocess.run(
            [sys.executable, "-m", "torchrec_cloud", "status", "--stack", "aws", "--outputs",
             str(saved), "--now", NOW.isoformat(), "--out", str(tmp_path / "out")],
            cwd=ROOT, env={**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp_path)},
            capture_output=True, text=True,
            timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"stack aws (aws, cluster torchrec-cloud-aws): job {fx.NS}/{fx.JOB}, 2026-11-26 12:00 UTC"
    assert section(lines, "Pools and nodes") == [
        "gpu-ondemand (on-demand, p4d.24xlarge): 2 ready, 0 not ready",
        "system (on-demand, m6i.xlarge): 1 ready, 0 not ready"]
    assert section(lines, "GPU utilisation (DCGM)") == [
        "ip-10-0-1-10.ec2.internal: 90%", "ip-10-0-1-11.ec2.internal: 50%"]
    gang = section(lines, "Gang")
    assert gang[:3] == ["admitted by Kueue (ClusterQueue training, flavor on-demand)",
                        "pods: 2 running, 0 pending, 0 failed", "state: the job is running on 2 pods"]
    # 600 steps left at 8192 samples a step and 2048 samples/s: 4 s a step, 40 minutes.
    assert section(lines, "Training") == [
        "step 400 of 1,000 (40%), 2,048 samples/s, loss 0.4600, AUC 0.7400, eval AUC 0.7891, ETA 40 min",
        f"from file://{bucket}/telemetry/metrics.jsonl, written 2 min ago",
        "newest complete checkpoint: step 300, 2026-11-26 11:45 UTC (15 min ago)"]
    assert section(lines, "Restarts") == ["no restarts"]
    # p4d.24xlarge on-demand USD 21.96/h: one node 2 h, one 1 h; m6i.xlarge USD 0.192/h for 2 h;
    # the control plane and file system (USD 1.00/h) for the cluster's 2 h.
    spent = section(lines, "Spend (estimate)")[0]
    assert spent.startswith(f"about USD {21.96 * 3 + 0.192 * 2 + 2:,.2f} so far, "
                            f"USD {21.96 * 2 + 0.192 + 1:,.2f}/h now (3 nodes")
    assert "plus control plane, file system at USD 1.00/h for the cluster's 2 h 00 min" in spent
    reported = section(lines, "Report")[0]
    try:
        import trainer.report  # noqa: F401  (another part of issue 23 adds it)
    except ImportError:
        assert reported == "report skipped: trainer/report.py is not in this checkout"
    else:
        assert (tmp_path / "out" / "aws" / "training.png").exists(), reported
    assert not list(tmp_path.glob("kubeconfig-aws-*.yaml")), "the kubeconfig copy is left behind"


def rank0_log(records: list[dict[str, Any]], *lines: str) -> str:
    """Rank 0's log as the trainer prints these records (trainer/metrics.py MetricsLogger.record,
    the same code), after `lines`."""
    import contextlib
    import io

    from trainer.metrics import MetricsLogger

    printer, out = MetricsLogger(0, None, None, None), io.StringIO()
    with contextlib.redirect_stdout(out):
        for r in records:
            values = {k: v for k, v in r.items() if k not in ("event", "step", "time")}
            if r["event"] == "checkpoint":
                printer.print(f"checkpoint step-{r['step']}: training paused 0.41s")  # Trainer.save
            else:
                printer.record(r["event"], r["step"], values)
    return "".join(f"{line}\n" for line in lines) + out.getvalue()


@needs_kubectl
def test_without_the_bucket_progress_comes_from_rank_0s_log(tmp_path):
    """The second generation's log: its start line says the total (the shipped job has no
    --max_steps), its train lines the rate."""
    log = rank0_log(GENERATIONS[5:], "resumed from checkpoint step-200")
    routes = {**_running_routes(GPU_NODES, jobset_with_args()), RANK0_LOG: log}
    with FakeApi(routes) as api:
        lines = report(api, tmp_path, tmp_path / "no-bucket")
    training = section(lines, "Training")
    assert "does not exist yet" in training[0]
    assert training[1] == ("step 400 of 1,000 (40%), 2,048 samples/s, loss 0.4600, AUC 0.7400, "
                           "eval AUC 0.7891, ETA 40 min")
    assert training[2] == f"from rank 0's log (Pod/{fx.JOB}-node-0-0)"


def test_a_preempted_generations_summary_in_the_log_is_not_a_finished_run():
    from torchrec_cloud.progress import progress, records_from_log, total_steps

    # The first generation's log: preempted at 230, after its train line at 200.
    records = records_from_log(rank0_log(GENERATIONS[:5]))
    assert records[-1]["event"] == "summary" and records[-1]["preempted"] is True
    found = progress(records, total_steps(records, jobset_with_args()))
    assert found is not None and not found.finished
    assert found.line() == "step 200 of 1,000 (20%), 2,048 samples/s, loss 0.4800, AUC 0.7200, ETA 53 min"
    # The same generation run to its end: its summary is the newest record and not preempted.
    finished = records_from_log(rank0_log([*GENERATIONS[:3], _summary(1000, preempted=False)]))
    assert progress(finished, 1000).line() == ("step 1,000 of 1,000 (100%), 2,048 samples/s, "
                                               "loss 0.4800, AUC 0.7200, finished")


def test_a_summary_followed_by_newer_records_is_not_where_the_run_stands():
    from torchrec_cloud.progress import progress, total_steps

    # Preempted at 230 (its summary), then the next generation trained on to 400.
    assert progress(GENERATIONS, total_steps(GENERATIONS, None)).line() == (
        "step 400 of 1,000 (40%), 2,048 samples/s, loss 0.4600, AUC 0.7400, eval AUC 0.7891, "
        "ETA 40 min")
    # A finished run of 1,000 steps, then a re-run to 2,000 (a larger --max_steps).
    done = [_start(0, None), _train(900), _train(1000), _summary(1000, preempted=False)]
    assert progress(done, total_steps(done, None)).finished
    rerun = [*done, _start(1000, 1000, total=2000)]
    waiting = progress(rerun, total_steps(rerun, None))
    assert not waiting.finished and waiting.line().startswith("step 1,000 of 2,000 (50%)")
    rerun.append(_train(1100))
    going = progress(rerun, total_steps(rerun, None))
    assert not going.finished
    # 900 steps left at 4 s a step (the window counts from the train record at 1,000).
    assert going.line().startswith("step 1,100 of 2,000 (55%)") and going.line().endswith("ETA 1 h 00 min")


def test_total_steps_falls_back_to_the_jobs_max_steps_for_a_trainer_without_a_start_total():
    from torchrec_cloud.progress import total_steps

    old = [r for r in GENERATIONS if r["event"] != "start"]
    assert total_steps(old, jobset_with_args("--max_steps=5000")) == 5000
    assert total_steps(old, jobset_with_args()) is None
    assert total_steps(GENERATIONS, jobset_with_args("--max_steps=5000")) == 1000  # the trainer's


def test_checkpoints_on_the_shared_file_system_are_reported_from_the_trainers_records(tmp_path):
    """checkpoints.location sharedFileSystem: the trainer saves under <mount>/checkpoints/<job>
    (workloads/flags.py), which a laptop cannot list; the bucket still has the metrics."""
    from dataclasses import replace

    bucket = tmp_path / "bucket"
    _metrics(bucket)
    (bucket / "step-300").rename(bucket / "elsewhere")  # nothing of the bucket's may be read as a checkpoint
    shared = replace(outputs(bucket), checkpoint_location="sharedFileSystem",
                     checkpoint_dir="/mnt/fs/checkpoints/dlrm")
    found = status.read_telemetry(shared, lambda uri: fsspec_local(uri))
    training = status.progress_section(None, found, None, NOW, shared)
    assert training[-2:] == [
        "checkpoints: on the shared file system (/mnt/fs/checkpoints/dlrm), not readable from here",
        f"newest checkpoint save started: step 400 (from file://{bucket}/telemetry/metrics.jsonl; "
        "it completes in the background)"]
    # Without the bucket, rank 0's log has the save lines.
    from torchrec_cloud.progress import newest_save, records_from_log

    assert newest_save(records_from_log(rank0_log(GENERATIONS[5:]))) == 400
    assert newest_save(records_from_log("resumed from checkpoint step-200\n")) == 200


def fsspec_local(uri: str):
    import fsspec

    return fsspec.core.url_to_fs(uri)


def test_spend_adds_the_stacks_fixed_hourly_items_over_the_clusters_age(tmp_path):
    """The nodes alive now, each from its creation, plus what infra/estimate.py prices by the
    hour besides nodes (file system, NAT, control plane, checkpoints) from the stack's
    estimated_cost output, over the age of the cluster's `default` namespace."""
    from dataclasses import replace

    from infra.estimate import estimate_output
    from tests.test_estimate import settings

    cost = json.loads(json.dumps(estimate_output(settings("aws"))))  # as the outputs file holds it
    items = {i["item"]: i["usd_per_hour"] for i in cost["items"]}
    assert {"file system", "outbound", "control plane"} <= set(items)
    fixed = sum(v for k, v in items.items() if k not in ("GPU nodes", "system nodes"))
    nodes = [eks_node("ip-10-0-1-23.ec2.internal", "system", "m6i.xlarge")]
    default_ns = {"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": "default", "creationTimestamp": "2026-11-26T08:00:00Z"}}

    def read(path: str) -> str:
        assert path == "/api/v1/namespaces/default"
        return json.dumps(default_ns)

    from workloads.waiting import ClusterView

    view = ClusterView(job=fx.JOB, namespace=fx.NS, cloud="aws", nodes=nodes)
    line = status.spend_section(view, replace(outputs(tmp_path), estimated_cost=cost), read, NOW)[0]
    names = ", ".join(k for k in items if k not in ("GPU nodes", "system nodes"))
    # The m6i.xlarge for its two hours; the fixed items for the cluster's four.
    assert line.startswith(f"about USD {0.192 * 2 + fixed * 4:,.2f} so far, USD {0.192 + fixed:,.2f}/h now "
                           f"(1 nodes alive now")
    assert f"plus {names} at USD {fixed:,.2f}/h for the cluster's 4 h 00 min" in line
    assert "nodes already removed, disks and per-GB traffic are not in it" in line
    # A stack from before the export: the nodes only, and it says so.
    older = status.spend_section(view, outputs(tmp_path), read, NOW)[0]
    assert older.startswith("about USD 0.38 so far") and "no estimated_cost output" in older


def test_a_stack_deployed_before_the_per_node_mark_does_not_count_its_nodes_as_fixed_items(tmp_path):
    """A stack last deployed before infra/estimate.py marked its per-node items exports the same
    items without "nodes": status reads only outputs, so it must still leave the GPU and system
    nodes out of the fixed items (with no node alive, a day of the cluster costs only them)."""
    from dataclasses import replace

    from infra.estimate import estimate_output
    from tests.test_estimate import settings
    from torchrec_cloud.pools import fixed_items
    from workloads.waiting import ClusterView

    cost = json.loads(json.dumps(estimate_output(settings("aws"))))
    for item in cost["items"]:  # the shape such a stack holds: the same items, unmarked
        item.pop("nodes", None)
    names = [i["item"] for i in cost["items"]]
    assert "GPU nodes" in names and "system nodes" in names
    fixed = {i["item"]: i["usd_per_hour"] for i in cost["items"]
             if i["item"] not in ("GPU nodes", "system nodes")}
    default_ns = {"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": "default", "creationTimestamp": "2026-11-25T12:00:00Z"}}
    view = ClusterView(job=fx.JOB, namespace=fx.NS, cloud="aws", nodes=[])
    line = status.spend_section(view, replace(outputs(tmp_path), estimated_cost=cost),
                                lambda path: json.dumps(default_ns), NOW)[0]
    rate = sum(fixed.values())
    assert line.startswith(f"about USD {rate * 24:,.2f} so far, USD {rate:,.2f}/h now (0 nodes")
    assert f"plus {', '.join(fixed)} at USD {rate:,.2f}/h for the cluster's 24 h 00 min" in line
    # Its GPU nodes with a spot price, under whatever name: a node item, not a fixed one.
    renamed = {"items": [{"item": "GPU nodes (2 x p5.48xlarge)", "usd_per_hour": 110.0,
                          "spot_usd_per_hour": 40.0}, {"item": "outbound", "usd_per_hour": 0.05}]}
    assert fixed_items(renamed) == [("outbound", 0.05)]


def test_capacity_block_nodes_are_labelled_and_priced_as_on_demand():
    from infra.catalog.machines import machine
    from torchrec_cloud.pools import pools, spend
    from workloads.waiting import ClusterView

    node = eks_node("ip-10-0-1-40.ec2.internal", "gpu-ondemand", "p5.48xlarge")
    node["metadata"]["labels"]["eks.amazonaws.com/capacityType"] = "CAPACITY_BLOCK"
    view = ClusterView(job=fx.JOB, namespace=fx.NS, cloud="aws", nodes=[node])
    assert pools(view)[0][0].line() == ("gpu-ondemand (capacity block (priced as on-demand), "
                                        "p5.48xlarge): 1 ready, 0 not ready")
    assert spend(view.nodes, "aws", NOW).usd == pytest.approx(2 * machine("aws", "p5.48xlarge").on_demand_usd_per_hour)


def test_autoscaler_groups_of_pools_without_nodes_are_named_after_the_stacks_pools():
    """A pool scaling up from zero has no node to name it: the stack's node_pools output does.
    EKS names the Auto Scaling group eks-<node group>-<uuid> (the node group carries the stack
    prefix and a digest, infra/aws/node_groups.py gpu_node_group_name); GKE has one group per
    zone."""
    from torchrec_cloud.pools import pools
    from workloads.waiting import ClusterView

    configured = {"system": "on-demand", "gpu-ondemand": "on-demand", "gpu-spot": "spot"}
    eks_group = "eks-torchrec-cloud-aws-gpu-spot-3f9a1c-c6c5b3d2-1a2b-3c4d-5e6f-7a8b9c0d1e2f"
    view = ClusterView(job=fx.JOB, namespace=fx.NS, cloud="aws",
                       nodes=[eks_node("ip-10-0-1-23.ec2.internal", "system", "m6i.xlarge")],
                       autoscaler_status=ca_status(
                           f'  - name: "{eks_group}"\n    health:\n      status: "Healthy"\n'
                           "      nodeCounts:\n        registered:\n          total: 0\n"
                           '      cloudProviderTarget: 2\n    scaleUp:\n      status: "InProgress"\n'))
    assert [p.line() for p in pools(view, configured)[0]] == [
        "gpu-spot (spot): 0 ready, 0 not ready, 2 pending scale-up",
        "system (on-demand, m6i.xlarge): 1 ready, 0 not ready"]
    assert [p.name for p in pools(view)[0]] == [eks_group, "system"]  # without the output
    zonal = "".join(
        f'  - name: "https://www.googleapis.com/compute/v1/projects/my-project/zones/{zone}/'
        f'instanceGroups/gke-torchrec-cloud-gcp-gpu-ondemand-5c2a9e1f-grp"\n    health:\n'
        '      status: "Healthy"\n      nodeCounts:\n        registered:\n          total: 0\n'
        '      cloudProviderTarget: 1\n    scaleUp:\n      status: "InProgress"\n'
        for zone in ("us-central1-a", "us-central1-b"))
    gke = ClusterView(job=fx.JOB, namespace=fx.NS, cloud="gcp", autoscaler_status=ca_status(zonal))
    assert [p.line() for p in pools(gke, configured)[0]] == [
        "gpu-ondemand (on-demand): 0 ready, 0 not ready, 2 pending scale-up"]


def _job_event(reason: str, message: str, time: str) -> dict[str, Any]:
    """The Job controller's Warning event on a failed child Job (job_controller.go)."""
    return fx.event(reason, message, on=f"{fx.JOB}-node-0", kind="Job", source="job-controller",
                    type_="Warning", time=time)


@needs_kubectl
def test_a_restarted_gang_tells_a_preemption_from_a_fault(tmp_path):
    js = jobset_with_args()
    js["spec"]["failurePolicy"] = {"maxRestarts": 3}
    js["status"].update({"restarts": 3, "restartsCountTowardsMax": 1})
    events = [
        _job_event("PodFailurePolicy", f"Container trainer for pod {fx.NS}/{fx.JOB}-node-0-1-x7k2p "
                   "failed with exit code 143 matching FailJob rule at index 1", "2026-11-26T10:20:00Z"),
        _job_event("PodFailurePolicy", f"Pod {fx.NS}/{fx.JOB}-node-0-0-b8d4q has condition "
                   "DisruptionTarget matching FailJob rule at index 2", "2026-11-26T10:50:00Z"),
        _job_event("BackoffLimitExceeded", "Job has reached the specified backoff limit",
                   "2026-11-26T11:30:00Z"),
    ]
    with FakeApi(_running_routes(GPU_NODES, js, events)) as api:
        lines = report(api, tmp_path, tmp_path / "bucket")
    restarts = section(lines, "Restarts")
    assert restarts[0] == ("3 restarts of the gang: 1 counted of maxRestarts 3 (faults), 2 not "
                           "counted (preemptions, lost nodes, nodes left out)")
    assert restarts[1] == ("remembered by the cluster (events last about an hour): "
                           "2 preemption or lost node, 1 trainer fault")
    assert restarts[2].startswith(f"preemption or lost node: Job/{fx.JOB}-node-0 PodFailurePolicy")
    assert "exit code 143" in restarts[2]
    assert restarts[3].startswith("not counted against maxRestarts")
    assert restarts[4].startswith("preemption or lost node:") and "DisruptionTarget" in restarts[4]
    assert restarts[6].startswith(f"trainer fault: Job/{fx.JOB}-node-0 BackoffLimitExceeded")
    assert restarts[7].startswith("counted against maxRestarts")


def test_exit_codes_are_read_as_trainer_exit_codes_defines_them():
    from torchrec_cloud.restarts import Cause, cause_of_exit
    from trainer import exit_codes

    assert cause_of_exit(exit_codes.RESUME) == Cause.PREEMPTION
    assert cause_of_exit(exit_codes.NODE_LEFT_OUT) == Cause.NODE_LEFT_OUT
    assert cause_of_exit(exit_codes.CONFIG_ERROR) == Cause.CONFIG
    assert cause_of_exit(exit_codes.FABRIC_ERROR) == Cause.FABRIC
    assert cause_of_exit(1) == Cause.FAULT  # torchrun's status for a crashed worker


@needs_kubectl
def test_an_unreachable_cluster_still_prints_the_bucket_sections(tmp_path):
    bucket = tmp_path / "bucket"
    _metrics(bucket)
    with FakeApi({}) as api:
        url = api.url
    lines = status.report(outputs(bucket), Kubectl(str(kubeconfig(tmp_path, url))), NOW).splitlines()
    first = section(lines, "Pools and nodes")[0]
    # Explained: an address outside kubernetes.apiAccessCidrs, or no cluster, each with its fix.
    assert first.startswith("cannot read the cluster: the cluster's API server did not answer")
    assert "pulumi config set --stack aws --path 'kubernetes.apiAccessCidrs[1]'" in first
    assert "pulumi up --stack aws" in first
    # The total comes from the trainer's start record, so the ETA needs no job.
    assert section(lines, "Training")[0] == ("step 400 of 1,000 (40%), 2,048 samples/s, loss 0.4600, "
                                             "AUC 0.7400, eval AUC 0.7891, ETA 40 min")
    assert "newest complete checkpoint: step 300" in section(lines, "Training")[-1]


def test_outputs_come_from_a_saved_file_and_the_kubeconfig_copy_is_private_and_removed(tmp_path):
    saved = tmp_path / "outputs.json"
    saved.write_text(json.dumps({"cloud": "gcp", "cluster_name": "c", "job_name": "dlrm",
                                 "checkpoint_uri": "gs://b/dlrm/", "kubeconfig": "apiVersion: v1\n"}))
    out = read_outputs("gcp", str(saved))
    assert (out.telemetry_uri, out.job_namespace) == ("gs://b/dlrm/telemetry", "torchrec")
    with kubeconfig_file(out) as path:
        assert Path(path).read_text() == "apiVersion: v1\n"
        assert Path(path).stat().st_mode & 0o777 == 0o600
    assert not Path(path).exists()
    saved.write_text(json.dumps({"cloud": "gcp"}))
    with pytest.raises(Exception, match="lack kubeconfig, job_name; has `pulumi up --stack gcp` finished"):
        read_outputs("gcp", str(saved))


def test_tensorboard_copies_only_new_or_grown_event_files(tmp_path):
    import fsspec

    source = tmp_path / "bucket" / "telemetry" / "tensorboard"
    source.mkdir(parents=True)
    (source / "events.out.tfevents.1.rank0").write_bytes(b"a" * 10)
    fs = fsspec.filesystem("file")
    target = tmp_path / "out" / "aws"
    assert sync(fs, str(source), target) == ["events.out.tfevents.1.rank0"]
    assert sync(fs, str(source), target) == []
    (source / "events.out.tfevents.1.rank0").write_bytes(b"a" * 20)  # the writer appended
    (source / "eval").mkdir()
    (source / "eval" / "events.out.tfevents.2.rank0").write_bytes(b"b")
    assert sync(fs, str(source), target) == ["eval/events.out.tfevents.2.rank0",
                                            "events.out.tfevents.1.rank0"]
    assert (target / "events.out.tfevents.1.rank0").read_bytes() == b"a" * 20


def test_tensorboard_keeps_copying_while_it_runs_and_stops_with_it(tmp_path):
    """A running job's event files grow: while TensorBoard (here a process that waits for the
    grown file to arrive, then exits) runs, the copy is repeated; none after it exits."""
    import fsspec

    from torchrec_cloud.tensorboard import serve

    source = tmp_path / "bucket" / "telemetry" / "tensorboard"
    source.mkdir(parents=True)
    event = source / "events.out.tfevents.1.rank0"
    event.write_bytes(b"a" * 10)
    target = tmp_path / "out" / "aws"
    fs = fsspec.filesystem("file")
    assert sync(fs, str(source), target) == [event.name]  # the first copy, before TensorBoard
    calls: list[list[str]] = []

    def resync() -> list[str]:
        copied = sync(fs, str(source), target)
        calls.append(copied)
        return copied

    event.write_bytes(b"a" * 20)  # the trainer's mirror appended
    copy = target / event.name
    waits = (f"import pathlib, time\np = pathlib.Path({str(copy)!r})\nfor _ in range(200):\n"
             "    if p.stat().st_size == 20: raise SystemExit(7)\n    time.sleep(0.05)\n")
    assert serve([sys.executable, "-c", waits], resync, every=0.2) == 7
    assert calls and calls[0] == [event.name]  # the grown file was copied while it ran
    after = len(calls)
    event.write_bytes(b"a" * 30)
    import time

    time.sleep(0.6)
    assert len(calls) == after and copy.stat().st_size == 20  # stopped with TensorBoard


def test_ctrl_c_during_a_slow_copy_leaves_at_once(tmp_path, monkeypatch):
    """Ctrl-C while a copy is downloading a large event file: TensorBoard is stopped and the
    command returns within a short bound, not when the download ends. The signal is given to
    the copy thread, as the kernel may (any thread that does not block it): the main thread,
    waiting for TensorBoard, must still see it (torchrec_cloud/child_wait.py; under load a
    blocking wait slept through it until TensorBoard ended, 60 s here)."""
    import signal
    import threading
    import time

    from torchrec_cloud import tensorboard

    monkeypatch.setattr(tensorboard, "JOIN_S", 0.5)
    copying, release = threading.Event(), threading.Event()
    copier: list[int] = []

    def slow_copy() -> list[str]:
        copier.append(threading.get_ident())
        copying.set()
        release.wait(60)  # a download that takes a minute
        return []

    def ctrl_c() -> None:
        if copying.wait(30):  # the terminal's Ctrl-C, received by the copy thread
            signal.pthread_kill(copier[0], signal.SIGINT)

    threading.Thread(target=ctrl_c, daemon=True).start()
    started = time.monotonic()
    try:
        code = tensorboard.serve([sys.executable, "-c", "import time; time.sleep(60)"],
                                 slow_copy, every=0.1)
        took = time.monotonic() - started
        assert copying.is_set() and not release.is_set()  # the copy was still under way
    finally:
        release.set()
    assert code == 0 and took < 10, took


# What `kubectl logs` asks before it reads a pod's log: the core API's discovery documents.
DISCOVERY = {
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
         "verbs": ["get", "list"], "shortNames": ["po"]},
        {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]}]},
}


@needs_kubectl
def test_logs_prints_rank_0s_log_through_kubectl_with_the_stacks_kubeconfig(tmp_path):
    pods = [fx.trainer_pod(i, phase="Running", node=GPU_NODES[i]["metadata"]["name"]) for i in (1, 0)]
    line = "[train] step 400  loss 0.4600  auc 0.7400\n"
    routes = {**DISCOVERY, f"{NS_PATH}/pods": api_list("PodList", pods),
              f"{NS_PATH}/pods/{fx.JOB}-node-0-0": pods[1],
              f"{NS_PATH}/pods/{fx.JOB}-node-0-0/log": line}
    saved = tmp_path / "outputs.json"
    with FakeApi(routes) as api:
        saved.write_text(json.dumps({"cloud": "aws", "job_name": fx.JOB, "job_namespace": fx.NS,
                                     "kubeconfig": kubeconfig(tmp_path, api.url).read_text()}))
        done = subprocess.run([sys.executable, "-m", "torchrec_cloud", "logs", "--stack", "aws",
                               "--outputs", str(saved)], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp_path)},
                              timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == line
    asked = [r for r in api.requests if "/log" in r]
    assert asked == [f"{NS_PATH}/pods/{fx.JOB}-node-0-0/log?container=trainer&tailLines=200"]
    assert not list(tmp_path.glob("kubeconfig-aws-*.yaml"))


def test_tensorboard_sync_only_copies_the_buckets_event_files(tmp_path):
    source = tmp_path / "bucket" / "telemetry" / "tensorboard"
    source.mkdir(parents=True)
    (source / "events.out.tfevents.1.rank0").write_bytes(b"event")
    saved = tmp_path / "outputs.json"
    saved.write_text(json.dumps({"cloud": "aws", "job_name": fx.JOB, "kubeconfig": "x",
                                 "checkpoint_uri": f"file://{tmp_path / 'bucket'}"}))
    args = [sys.executable, "-m", "torchrec_cloud", "tensorboard", "--stack", "aws", "--outputs",
            str(saved), "--sync-only", "--out", str(tmp_path / "tb")]
    first = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    again = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.stdout == f"1 files copied to {tmp_path / 'tb' / 'aws'}\n"
    assert again.stdout == f"0 files copied to {tmp_path / 'tb' / 'aws'}\n"
    assert (tmp_path / "tb" / "aws" / "events.out.tfevents.1.rank0").read_bytes() == b"event"


def test_gke_pools_are_matched_to_the_autoscalers_groups_and_spot_is_read_from_gkes_label():
    from torchrec_cloud.pools import pools
    from workloads.waiting import ClusterView

    def gke_node(name: str, pool: str, machine: str, spot: bool) -> dict[str, Any]:
        labels = {"cloud.google.com/gke-nodepool": pool, "torchrec-cloud/pool": pool,
                  "node.kubernetes.io/instance-type": machine,
                  **({"cloud.google.com/gke-spot": "true"} if spot else {})}
        return {"metadata": {"name": name, "labels": labels, "creationTimestamp": fx.T0},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    view = ClusterView(job=fx.JOB, namespace=fx.NS, cloud="gcp", nodes=[
        gke_node("gke-torchrec-gpu-spot-4f1d2c3b-x1", "gpu-spot", "a2-highgpu-8g", True),
        gke_node("gke-torchrec-gpu-ondemand-9f8e-a1", "gpu-ondemand", "a2-highgpu-8g", False),
        gke_node("gke-torchrec-system-1a2b-z9", "system", "e2-standard-4", False)],
        autoscaler_status=fx.autoscaler_status(fx.GCE_POOL_EXHAUSTED))
    found, unnamed = pools(view)
    by_name = {p.name: p for p in found}
    assert sorted(by_name) == ["gpu-ondemand", "gpu-spot", "system"]
    assert by_name["gpu-spot"].line() == "gpu-spot (spot, a2-highgpu-8g): 1 ready, 0 not ready"
    assert by_name["gpu-ondemand"].failure.startswith(
        "no capacity: node group https://www.googleapis.com/compute/v1/projects/my-project/zones/"
        "us-central1-a/instanceGroups/gke-torchrec-gpu-ondemand-grp scale-up Backoff: "
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS")
    assert not by_name["gpu-spot"].failure and unnamed == []
    # Spot nodes at the catalog's spot price, the others on-demand, each for its two hours.
    from infra.catalog.machines import machine
    from torchrec_cloud.pools import spend

    a2, e2 = machine("gcp", "a2-highgpu-8g"), machine("gcp", "e2-standard-4")
    s = spend(view.nodes, "gcp", NOW)
    assert s.usd == pytest.approx(2 * (a2.spot_usd_per_hour + a2.on_demand_usd_per_hour
                                       + e2.on_demand_usd_per_hour))
    assert a2.spot_usd_per_hour < a2.on_demand_usd_per_hour and s.unpriced == []


def test_tensorboard_without_tensorboard_installed_keeps_the_copy_and_says_how_to_add_it(
        tmp_path, monkeypatch, capsys):
    """New-user review B1: in the venv `make status` builds (requirements-cli.txt) the verb
    copied the files, then died on `No module named 'tensorboard'`."""
    import argparse
    import importlib.util

    from torchrec_cloud import tensorboard as tb

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorboard" else real(name, *a))
    monkeypatch.setattr(tb, "read_outputs", lambda stack, path: object())
    monkeypatch.setattr(tb, "sync_stack", lambda outputs, out: (tmp_path / "tb" / "aws", ["x"]))
    monkeypatch.setattr(tb, "serve", lambda *a: pytest.fail("no TensorBoard to start"))
    args = argparse.Namespace(stack="aws", outputs=None, out=str(tmp_path / "tb"),
                              sync_only=False, port=0, sync_every=60)
    assert tb.run(args) == 2
    said = capsys.readouterr().err
    assert "pip install tensorboard==2.21.0" in said and str(tmp_path / "tb" / "aws") in said
    pins = (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert tb.TENSORBOARD_PIN in pins  # one viewer version


def test_the_unreachable_fix_adds_the_next_api_range_and_never_overwrites_one(tmp_path):
    """New-user review C4: the command hard-coded apiAccessCidrs[1], overwriting the second
    range of a stack that lists two."""
    from torchrec_cloud.kube import api_ranges_in_stack_file, unreachable

    (tmp_path / "Pulumi.two.yaml").write_text(
        "config:\n  torchrec-cloud:kubernetes:\n    apiAccessCidrs: [81.2.69.142/32, 81.2.69.0/28]\n")
    assert api_ranges_in_stack_file("two", tmp_path) == 2
    assert api_ranges_in_stack_file("absent", tmp_path) == 1
    said = unreachable("two", "dial tcp 1.2.3.4:443: i/o timeout", listed=2)
    assert said is not None and "'kubernetes.apiAccessCidrs[2]'" in said


def test_an_unreachable_cluster_still_prints_what_the_stack_costs_a_month_and_how_to_stop_it(
        tmp_path):
    """A destroyed-looking or unreachable cluster is when a forgotten stack is most likely: the
    monthly cost of what stays comes from the stack (its estimated_cost output, else its stack
    file), not from the cluster, and is printed with the `pulumi destroy` command."""
    from dataclasses import replace

    from tests.test_check import write_stack

    bucket = tmp_path / "bucket"
    _metrics(bucket)
    with FakeApi({}) as api:
        url = api.url
    cost = {"items": [{"item": "GPU nodes", "usd_per_hour": 65.5},
                      {"item": "system nodes", "usd_per_hour": 0.4},
                      {"item": "file system", "usd_per_hour": 0.6}]}
    read = Kubectl(str(kubeconfig(tmp_path, url)))
    lines = status.report(replace(outputs(bucket), estimated_cost=cost), read, NOW).splitlines()
    standing = section(lines, "While the stack exists")
    assert standing[0] == ("while the stack exists, even idle: about USD 730 a month (USD 1.00/h: "
                           "system nodes, file system) until `pulumi destroy --stack aws` "
                           "(checkpoints are kept)")
    # A stack from before the estimated_cost output: priced from its stack file.
    root = tmp_path / "project"
    root.mkdir()
    (root / "Pulumi.yaml").write_text((Path(status.__file__).parent.parent / "Pulumi.yaml").read_text())
    write_stack(root, "aws")
    line = status.standing_without_cluster(outputs(bucket), root)[0]
    assert line.startswith("while the stack exists, even idle: about USD ") and " a month " in line
    assert "`pulumi destroy --stack aws`" in line
def test_a_queued_gang_s_line_names_the_workload_condition_that_holds_it() -> None:
    """status reads Kueue's Workload through the waiting module (workload_admission): quota
    not reserved names QuotaReserved, reserved but checks pending names Admitted, one admitted
    names its ClusterQueue and flavor."""
    from torchrec_cloud.status import _admission
    from workloads.waiting import ClusterView

    def workload(*conditions: dict[str, str], admission: dict | None = None) -> dict:
        return {"metadata": {"name": "jobset-dlrm-1a2b3", "ownerReferences": [
                    {"kind": "JobSet", "name": "dlrm"}]},
                "status": {"conditions": list(conditions), **({"admission": admission}
                                                              if admission else {})}}

    def line(wl: dict) -> str:
        return _admission(ClusterView("dlrm", "torchrec", workloads=[wl]))

    pending = {"type": "QuotaReserved", "status": "False", "reason": "Pending",
               "message": "couldn't assign flavors to pod set workers: insufficient quota"}
    assert line(workload(pending)) == (
        "not admitted by Kueue: Workload/jobset-dlrm-1a2b3 QuotaReserved=False (Pending): "
        "couldn't assign flavors to pod set workers: insufficient quota")
    checks = {"type": "Admitted", "status": "False", "reason": "NoReservation",
              "message": "The workload has not all checks ready"}
    assert line(workload({**pending, "status": "True"}, checks)) == (
        "not admitted by Kueue: Workload/jobset-dlrm-1a2b3 Admitted=False (NoReservation): "
        "The workload has not all checks ready")
    assert line(workload()) == ("not admitted by Kueue: Workload/jobset-dlrm-1a2b3 "
                                "QuotaReserved=False (): not yet considered")
    admitted = workload({"type": "Admitted", "status": "True"}, admission={
        "clusterQueue": "dlrm", "podSetAssignments": [{"flavors": {"nvidia.com/gpu": "dlrm-spot"}}]})
    assert line(admitted) == "admitted by Kueue (ClusterQueue dlrm, flavor dlrm-spot)"
