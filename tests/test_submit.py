"""Experiments without redeploying: `torchrec-cloud submit`, `list`, `cancel` and `cost`.

The stack's own JobSet is rendered by the workload layer under mocks (tests/test_workloads.py
run_workload) and served by the fake API server (tests/fake_api.py) to the real kubectl; the
bucket is a local folder (file://). Submitted objects are validated against the official
Kubernetes schemas and the vendored JobSet CRD schema.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from contextlib import redirect_stderr, redirect_stdout
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from infra.settings.model.job import Job, PoolChoice
from tests.fake_api import FakeApi, api_list, kubeconfig
from tests.k8s_manifests import _jobset_jobs, manifest_of, validate_custom_resource
from torchrec_cloud.__main__ import main
from trainer.spend import SpendRecord
from trainer.telemetry import TelemetryMirror

ROOT = Path(__file__).resolve().parent.parent
NS, STACK_JOB = "torchrec", "dlrm"
JOBSETS = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets"
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


@pytest.fixture(scope="module")
def base_jobset() -> dict[str, Any]:
    """The stack's own JobSet as `pulumi up` sends it (workload layer, AWS flavour)."""
    from tests.test_workloads import JOBSET, run_workload

    run = run_workload("aws", Job(trainer_args={"batch_size": 2048}))
    (captured,) = run.run.of_type(JOBSET)
    return manifest_of(captured)


def stack_file(tmp_path: Path) -> Path:
    text = (ROOT / "Pulumi.aws.yaml").read_text()
    text += "  torchrec-cloud:kubernetes: {apiAccessCidrs: [81.2.69.142/32]}\n"
    path = tmp_path / "Pulumi.aws.yaml"
    path.write_text(text)
    return path


def outputs_file(tmp_path: Path, server: str = "http://127.0.0.1:9") -> Path:
    bucket = tmp_path / "bucket"
    bucket.mkdir(exist_ok=True)
    config = kubeconfig(tmp_path, server).read_text()
    estimate = {"items": [
        {"item": "GPU nodes", "usd_per_hour": 43.92, "spot_usd_per_hour": 17.57, "nodes": True},
        {"item": "system nodes", "usd_per_hour": 0.38, "nodes": True},
        {"item": "file system", "usd_per_hour": 0.48},
        {"item": "outbound", "usd_per_hour": 0.05},
        {"item": "control plane", "usd_per_hour": 0.10}]}
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({
        "cloud": "aws", "kubeconfig": config, "job_name": STACK_JOB, "job_namespace": NS,
        "checkpoint_uri": f"file://{bucket}/{STACK_JOB}", "kubernetes_version": "1.33",
        "estimated_cost": estimate}))
    return path


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def submit_args(tmp_path: Path, base: Path | None, *extra: str) -> list[str]:
    return ["submit", "--stack", "aws", "--stack-file", str(stack_file(tmp_path)),
            "--outputs", str(outputs_file(tmp_path)), *(["--base", str(base)] if base else []),
            *extra]


def validate(objects: list[dict[str, Any]]) -> None:
    problems = []
    for obj in objects:
        if obj["kind"] == "JobSet":
            problems += validate_custom_resource(obj)
            checked = _jobset_jobs(obj)
        else:
            checked = [obj]
        for manifest in checked:
            try:
                kubernetes_validate.validate(manifest, "1.33.0", strict=True)
            except kubernetes_validate.ValidationError as error:
                problems.append(f"{manifest['kind']}: {error.message}")
    assert not problems, problems


def container(jobset: dict[str, Any]) -> dict[str, Any]:
    (replicated,) = jobset["spec"]["replicatedJobs"]
    (trainer,) = replicated["template"]["spec"]["template"]["spec"]["containers"]
    return trainer


def test_dry_run_prints_a_queued_jobset_named_after_name_with_the_stacks_image_and_extra_flags(
        tmp_path, base_jobset):
    base = tmp_path / "base.json"
    running = json.loads(json.dumps(base_jobset))  # as read back while Kueue has admitted it
    pod_spec = running["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["nodeSelector"] = {"eks.amazonaws.com/nodegroup": "gpu"}
    base.write_text(json.dumps(running))
    code, out, err = cli(*submit_args(tmp_path, base, "--name", "lr-sweep-1", "--nodes", "1",
                                      "--priority", "high", "--dry-run", "--",
                                      "--learning_rate=0.01", "--log_every", "50"))
    assert code == 0, err
    objects = list(yaml.safe_load_all(out))
    assert [o["kind"] for o in objects] == ["Service", "NetworkPolicy", "JobSet"]
    validate(objects)
    jobset = objects[-1]
    labels = jobset["metadata"]["labels"]
    assert jobset["metadata"]["name"] == "lr-sweep-1"
    assert labels["kueue.x-k8s.io/queue-name"] == STACK_JOB  # the stack's LocalQueue
    assert labels["kueue.x-k8s.io/priority-class"] == "torchrec-high"
    # Not Pulumi's: a later `pulumi up` neither owns nor deletes it, and the labels tell them apart.
    assert labels["app.kubernetes.io/managed-by"] == "torchrec-cloud"
    assert base_jobset["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "pulumi"
    assert labels["torchrec-cloud/submitted"] == "true" and labels["torchrec-cloud/stack"] == "aws"
    trainer, stack = container(jobset), container(base_jobset)
    assert trainer["image"] == stack["image"]
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod  # Kueue's admission of the base is not copied
    assert pod["serviceAccountName"] == \
        base_jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["serviceAccountName"]
    args = trainer["args"]
    bucket = f"file://{tmp_path}/bucket"
    assert "--learning_rate=0.01" in args and "--log_every=50" in args
    assert "--batch_size=2048" in args  # the stack's own trainerArgs stay
    assert f"--checkpoint_dir={bucket}/lr-sweep-1" in args
    assert f"--telemetry_dir={bucket}/lr-sweep-1/telemetry" in args
    assert any(a.startswith("--metrics_file=") and "/runs/lr-sweep-1/" in a for a in args)
    assert not any(STACK_JOB in a for a in args if a.startswith(("--checkpoint_dir", "--metrics")))
    script = trainer["command"][2]
    assert "--rdzv_id=lr-sweep-1" in script and "--nnodes=1" in script
    assert "--rdzv_endpoint=lr-sweep-1-node-0-0.lr-sweep-1." in script  # its own headless service
    assert jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 1
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert env["TORCHREC_JOB_NAME"] == "lr-sweep-1" and env["TORCHREC_JOB_NODES"] == "1"
    assert env["TORCHREC_JOB_CAPACITY"] == "on-demand"
    assert float(env["TORCHREC_NODE_USD_PER_HOUR"]) > 0


def test_a_stack_owned_or_misspelt_flag_or_too_many_nodes_is_refused_before_anything_exists(
        tmp_path, base_jobset):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(base_jobset))
    code, out, err = cli(*submit_args(tmp_path, base, "--name", "x1", "--dry-run", "--",
                                      "--checkpoint_dir=/tmp/mine"))
    assert code == 1 and out == ""
    # Named as the user gave them to submit (new-user review B4), never with a `pulumi config`
    # fix, which would edit the stack's own job and need `pulumi up`.
    assert "-- --checkpoint_dir=/tmp/mine:" in err and "set by the stack" in err
    code, _, err = cli(*submit_args(tmp_path, base, "--name", "x2", "--dry-run", "--",
                                    "--learning_rat=0.1"))
    assert code == 1 and "did you mean 'learning_rate'" in err
    code, _, err = cli(*submit_args(tmp_path, base, "--name", "x3", "--nodes", "64", "--dry-run"))
    assert code == 1 and "--nodes 64:" in err and "submit again with another value" in err
    # No command that edits the stack's own job; growing the pool is the stack's (walkthrough 1).
    assert "--path job." not in err and "in the stack file" not in err
    code, _, err = cli(*submit_args(tmp_path, base, "--name", "Bad_Name", "--dry-run"))
    assert code == 1 and "--name Bad_Name:" in err and "pulumi config" not in err
    # the stack's queue admits to its job's pool (onDemand here) only
    code, _, err = cli(*submit_args(tmp_path, base, "--name", "x4", "--pool", "spot", "--dry-run"))
    assert code == 1 and "the stack's queue admits jobs to onDemand only" in err


REFUSALS = {
    "misspelt flag": ["--", "--learnin_rate=0.1"],
    "a flag close to a stack-owned one": ["--", "--checkpoint_uri=s3://x"],
    "more nodes than the pool's maxNodes": ["--nodes", "64"],
    "a flag named after the job": ["--", "--metrics_file=/tmp/m"],
    "the checkpoint folder": ["--", "--checkpoint_dir=/tmp/x"],
    "a flag the stack file decides": ["--", "--checkpoint_every=5"],
    "a cluster-wide flag": ["--", "--fabric_gate=off"],
    "a value of the wrong type": ["--", "--batch_size=abc"],
    "a misshapen flag name": ["--", "--Batch-Size=3"],
    "batch_size beside the mlperf recipe": ["--", "--recipe=mlperf", "--batch_size=12"],
    "a flag clashing with the stack file's": ["--", "--embedding_dim=64"],
}


def _commands(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


@pytest.mark.parametrize("extra", REFUSALS.values(), ids=REFUSALS.keys())
def test_a_refusal_is_worded_for_submit_with_every_command_complete(tmp_path, extra):
    """Walkthrough 1 and 10: submit's refusals were the stack file's words with the `pulumi
    config` commands cut out ("did you mean 'learning_rate'?  and ;", "let the pool grow  (quota:
    `torchrec-cloud doctor`)"), and told a submitted job to set job.name or checkpoints.location."""
    base = tmp_path / "base.json"
    base.write_text("{}")  # refused before the base is read
    code, out, err = cli(*submit_args(tmp_path, base, "--name", "x1", "--dry-run", *extra))
    assert code == 1 and out == ""
    head, *lines = err.strip().splitlines()
    assert head == "submit: refused, nothing was created:" and lines
    for line in lines:
        text = line.strip()
        for garbled in ("  ", " and ;", "; ;", ", ;", " ;", "? ;", ": ;", ";;"):
            assert garbled not in text, (garbled, line)
        assert "--path job." not in text  # never a command that edits the stack's own job
        for command in _commands(text):
            words = command.split()
            if command.startswith("pulumi config set"):
                assert words[3:5] == ["--stack", "aws"] and words[5] == "--path" and len(words) == 8, command
            elif command.startswith(("pulumi up", "torchrec-cloud doctor", "pulumi config")):
                assert "--stack aws" in command, command
    if extra == ["--nodes", "64"]:
        (line,) = lines
        assert "at most gpuPools.onDemand.maxNodes (2)" in line
        assert "`pulumi config set --stack aws --path gpuPools.onDemand.maxNodes 64`" in line
        assert "`pulumi up --stack aws`" in line and "`torchrec-cloud doctor --stack aws`" in line
    if "--checkpoint_uri=s3://x" in extra:  # not a rename into another refusal
        assert "did you mean 'checkpoint_dir'? the stack sets it (from checkpoints.location)" in err
    if "--learnin_rate=0.1" in extra:
        assert "did you mean 'learning_rate'? the trainer's flags" in err
    if "--metrics_file=/tmp/m" in extra or "--checkpoint_dir=/tmp/x" in extra:
        assert "named after its --name" in err
        assert "set job.name" not in err and "set checkpoints.location" not in err
    if "--embedding_dim=64" in extra:  # the user gave embedding_dim; the stack file the sizes
        assert "--dense_arch_layer_sizes=512,256,128 (the stack file's job.trainerArgs" in err
        assert "-- --dense_arch_layer_sizes=<value>" in err and "without it" not in err
    if "--fabric_gate=off" in extra:
        assert "-- --fabric_gate=false:" in err and "`pulumi up --stack aws`" in err


def test_the_stack_makes_kueues_workload_priority_classes(tmp_path):
    from tests.test_workloads import run_workload

    run = run_workload("aws", Job())
    groups = [r for r in run.run.resources if r.type == "kubernetes:yaml/v2:ConfigGroup"
              and "priority" in r.name]
    assert len(groups) == 1
    objs = groups[0].inputs["objs"]
    assert {o["metadata"]["name"]: int(o["value"]) for o in objs} == {
        "torchrec-low": 100, "torchrec-normal": 1000, "torchrec-high": 10000}
    assert all(o["kind"] == "WorkloadPriorityClass" for o in objs)


def _spend(bucket: Path, job: str, start: str, end: str, nodes: int, price: float) -> None:
    folder = bucket / job / "telemetry"
    folder.mkdir(parents=True, exist_ok=True)
    record = SpendRecord(job, nodes, "spot", price, 8,
                         clock=lambda: datetime.fromisoformat(end).timestamp())
    record.started = datetime.fromisoformat(start).timestamp()
    record.seeded = True
    (folder / "spend.json").write_bytes(record.snapshot())
    (folder / "metrics.jsonl").write_text(
        json.dumps({"event": "train", "step": 400, "loss": 0.13}) + "\n"
        + json.dumps({"event": "eval", "step": 400, "auc": 0.7712}) + "\n")


@needs_kubectl
def test_submit_list_cancel_and_cost_end_to_end(tmp_path, base_jobset):
    routes: dict[str, Any] = {f"{JOBSETS}/{STACK_JOB}": base_jobset,
                              f"/api/v1/namespaces/default": {
                                  "metadata": {"creationTimestamp": "2026-11-25T12:00:00Z"}}}
    with FakeApi(routes) as api:
        outputs = outputs_file(tmp_path, api.url)
        common = ["--stack", "aws", "--outputs", str(outputs)]
        for name, priority in (("exp-a", "low"), ("exp-b", "high")):
            code, out, err = cli("submit", *common, "--stack-file", str(stack_file(tmp_path)),
                                 "--name", name, "--priority", priority, "--",
                                 "--learning_rate=0.02")
            assert code == 0, err
            assert f"submitted {NS}/{name}" in out
        created = [(path, obj["kind"], obj["metadata"]["name"]) for path, obj in api.created]
        assert (JOBSETS, "JobSet", "exp-a") in created and (JOBSETS, "JobSet", "exp-b") in created
        assert (f"/api/v1/namespaces/{NS}/services", "Service", "exp-a") in created
        validate([obj for _, obj in api.created])

        # The cluster now lists three jobs: the stack's (running), exp-a queued, exp-b finished.
        jobs = {name: api.routes[f"{JOBSETS}/{name}"] for name in ("exp-a", "exp-b")}
        running = {**base_jobset, "status": {"replicatedJobsStatus": [{"name": "node", "active": 2}]}}
        finished = {**jobs["exp-b"], "status": {"conditions": [{"type": "Completed", "status": "True"}]}}
        queued = {**jobs["exp-a"], "spec": {**jobs["exp-a"]["spec"], "suspend": True}}
        api.routes[JOBSETS] = api_list("JobSetList", [running, queued, finished])
        bucket = tmp_path / "bucket"
        _spend(bucket, STACK_JOB, "2026-11-25T13:00:00+00:00", "2026-11-25T15:00:00+00:00", 2, 17.57)
        _spend(bucket, "exp-b", "2026-11-25T23:00:00+00:00", "2026-11-26T01:00:00+00:00", 2, 17.57)
        code, out, err = cli("list", *common)
        assert code == 0, err
        lines = {line.split()[0]: line.split() for line in out.splitlines()[1:4]}
        assert lines[STACK_JOB][1:3] == ["running", "stack"]
        assert lines["exp-a"][1:3] == ["queued", "submit"]
        assert lines["exp-b"][1:3] == ["finished", "submit"]
        # 2 h x 2 nodes x 8 GPUs = 32 GPU-hours, x 2 nodes x 17.57 = 70.28 USD
        assert lines["exp-b"][4:] == ["400", "0.7712", "32.0", "70.28"]

        code, out, err = cli("cancel", *common, "--name", "exp-a")
        assert code == 0, err
        deleted = [path for path, _ in api.deleted]
        assert f"{JOBSETS}/exp-a" in deleted
        assert f"/api/v1/namespaces/{NS}/services/exp-a" in deleted
        assert api.deleted[0][1]["propagationPolicy"] == "Background"  # pods get their grace
        code, _, err = cli("cancel", *common, "--name", STACK_JOB)
        assert code == 1 and "job.suspend" in err

        code, out, err = cli("cost", *common, "--now", "2026-11-26T12:00:00Z")
        assert code == 0, err
    assert "exp-b" in out and "70.28" in out
    by_day = {line.split()[0]: line.split()[1:] for line in out.splitlines()
              if line.startswith("  2026-")}
    # fixed items 1.01/h: 12 h on the 25th, 12 h on the 26th; jobs: 2 h + 1 h on the 25th.
    assert by_day["2026-11-25"][:2] == ["12.12", f"{3 * 2 * 17.57:.2f}"]
    assert by_day["2026-11-26"][:2] == ["12.12", f"{1 * 2 * 17.57:.2f}"]
    assert "about USD 737 a month" in out and "pulumi destroy --stack aws" in out


@needs_kubectl
def test_an_unreachable_cluster_is_explained_once_exits_3_and_leaves_who_made_a_job_unknown(
        tmp_path):
    """Walkthrough 9 and 12: with the API server unreachable, `status` printed the explanation
    twice and exited 0, `list` exited 0 and marked submitted jobs "BY stack" and "ended", and
    `cost` said only that the cluster's creation time cannot be read (and exited 0)."""
    with FakeApi({}) as api:
        url = api.url  # closed when the block ends: connection refused
    outputs = outputs_file(tmp_path, url)
    common = ["--stack", "aws", "--outputs", str(outputs)]
    bucket = tmp_path / "bucket"
    _spend(bucket, STACK_JOB, "2026-11-25T13:00:00+00:00", "2026-11-25T15:00:00+00:00", 2, 17.57)
    _spend(bucket, "exp-b", "2026-11-25T23:00:00+00:00", "2026-11-26T01:00:00+00:00", 2, 17.57)
    explained = "the cluster's API server did not answer"

    code, out, err = cli("status", *common, "--out", str(tmp_path / "out"),
                         "--now", "2026-11-26T12:00:00Z")
    assert code == 3, err
    assert out.count(explained) == 1
    gang = out.split("\nGang\n", 1)[1].splitlines()[0]
    assert "not read" in gang and "under Pools and nodes" in gang

    code, out, err = cli("list", *common)
    assert code == 3, err
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:3]}
    assert rows[STACK_JOB][1:3] == ["unknown", "stack"]  # the stack's own job, by its name
    assert rows["exp-b"][1:3] == ["unknown", "?"]  # not "ended", not the stack's
    assert out.count(explained) == 1

    code, out, err = cli("cost", *common, "--now", "2026-11-26T12:00:00Z")
    assert code == 3, err  # as status and list: printed what it could, the gap in the status
    (line,) = [line for line in out.splitlines() if "fixed items not counted" in line]
    assert explained in line and "pulumi up --stack aws" in line
    assert line.rstrip().endswith("pass --since YYYY-MM-DD, the day the stack was created")
    code, out, err = cli("cost", *common, "--now", "2026-11-26T12:00:00Z", "--since", "2026-11-25")
    assert code == 0, err  # the creation day given: the cluster is not needed
    assert "fixed items not counted" not in out


def test_rank_0_keeps_the_jobs_spend_across_generations_in_the_store(tmp_path):
    clock = [1_000_000.0]
    env = {"TORCHREC_JOB_NAME": "exp", "TORCHREC_JOB_NODES": "2", "TORCHREC_JOB_CAPACITY": "spot",
           "TORCHREC_NODE_USD_PER_HOUR": "10", "TORCHREC_NODE_GPUS": "8"}
    store = tmp_path / "store"
    for generation in range(2):
        mirror = TelemetryMirror(f"file://{store}", None, None, 3600)
        mirror.spend = SpendRecord.from_env(env, clock=lambda: clock[0])
        clock[0] += 1800  # half an hour of training
        mirror.sync()
        clock[0] += 600  # a preemption: ten minutes without the gang
    record = json.loads((store / "spend.json").read_text())
    assert len(record["segments"]) == 2
    assert record["node_hours"] == 2.0  # 2 x 0.5 h x 2 nodes
    assert record["gpu_hours"] == 16.0
    assert record["usd"] == 20.0
    assert SpendRecord.from_env({}) is None  # a local run keeps no record


@needs_kubectl
def test_status_says_how_long_the_cluster_has_idled_and_what_that_cost(tmp_path, base_jobset):
    from torchrec_cloud import status
    from torchrec_cloud.stack import read_outputs
    from workloads.why import Kubectl

    done = {**base_jobset, "status": {"conditions": [{"type": "Completed", "status": "True"}]}}
    routes = {JOBSETS: api_list("JobSetList", [done])}
    _spend(tmp_path / "bucket", STACK_JOB, "2026-11-25T13:00:00+00:00", "2026-11-25T15:00:00+00:00",
           2, 17.57)
    with FakeApi(routes) as api:
        outputs = read_outputs("aws", str(outputs_file(tmp_path, api.url)))
        lines = status.standing_section(outputs, Kubectl(str(kubeconfig(tmp_path, api.url))),
                                        lambda uri: __import__("fsspec").core.url_to_fs(uri),
                                        datetime(2026, 11, 26, 15, 0, tzinfo=timezone.utc))
    assert lines[0].startswith("while the stack exists, even idle: about USD 737 a month")
    # idle since the last job's record ended, 24 h ago, at the 1.01/h of fixed items
    assert lines[1].startswith("idle for 24 h 00 min"), lines[1]
    assert "about USD 24.24 of fixed items" in lines[1]
    assert "pulumi destroy --stack aws" in lines[1]


@needs_kubectl
def test_dry_run_without_a_cluster_says_which_live_objects_it_needs_why_and_how_to_render_offline(
        tmp_path, base_jobset):
    # No cluster answers (the outputs' API server is a closed port) and no --base.
    code, out, err = cli(*submit_args(tmp_path, None, "--name", "offline-1", "--dry-run"))
    assert code == 1 and out == ""
    assert "the trainer image `pulumi up` built" in err and "service account" in err
    assert "the JobSet could not be read" in err
    assert f"kubectl get jobset -n {NS} {STACK_JOB} -o json > base.json" in err
    # the offline command is this submit again, as typed, with the two saved files
    assert "--outputs outputs.json --base base.json --name offline-1 --dry-run`" in err
    # No outputs either (no Pulumi CLI here): the same words, and the stack's own job's name.
    code, out, err = cli("submit", "--stack", "aws", "--stack-file", str(stack_file(tmp_path)),
                         "--name", "offline-2", "--dry-run")
    assert code == 2 and out == ""
    assert "the outputs could not be read (the Pulumi CLI is not installed" in err
    assert f"kubectl get jobset -n {NS} {STACK_JOB} -o json > base.json" in err
    # With both saved, it renders with no cluster at all.
    base = tmp_path / "base.json"
    base.write_text(json.dumps(base_jobset))
    code, out, err = cli(*submit_args(tmp_path, base, "--name", "offline-3", "--dry-run"))
    assert code == 0, err
    assert [o["kind"] for o in yaml.safe_load_all(out)] == ["Service", "NetworkPolicy", "JobSet"]


def test_submitted_service_and_policy_are_the_stacks_own_rendering_in_the_base_jobsets_namespace(
        tmp_path, base_jobset):
    """One path: the Service and NetworkPolicy of a submitted job are what workloads/service.py
    and workloads/network_policy.py give the stack's own job under `pulumi up`, for its name;
    and a job.namespace edited in the stack file since the last `pulumi up` does not move a
    submitted job out of the namespace of the base JobSet and its Kueue queue."""
    from tests.test_workloads import run_workload

    own = run_workload("aws", Job(trainer_args={"batch_size": 2048}))
    (service,) = own.run.of_type("kubernetes:core/v1:Service")
    (policy,) = [p for p in own.run.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
                 if "prepare" not in p.inputs["metadata"]["name"]]  # not the preparation's
    stack_path = stack_file(tmp_path)
    edited = yaml.safe_load(stack_path.read_text())  # one key per map, as `pulumi config set` writes
    edited["config"]["torchrec-cloud:job"] = {"namespace": "edited-ns"}
    stack_path.write_text(yaml.safe_dump(edited, sort_keys=False))
    base = tmp_path / "base.json"
    base.write_text(json.dumps(base_jobset))
    code, out, err = cli("submit", "--stack", "aws", "--stack-file", str(stack_path),
                         "--outputs", str(outputs_file(tmp_path)), "--base", str(base),
                         "--name", STACK_JOB + "-b", "--dry-run")
    assert code == 0, err
    submitted_service, submitted_policy, jobset = yaml.safe_load_all(out)
    assert {o["metadata"]["namespace"] for o in (submitted_service, submitted_policy, jobset)} \
        == {base_jobset["metadata"]["namespace"]} == {NS}

    def renamed(obj: dict[str, Any]) -> dict[str, Any]:
        """The stack's own object's spec with the submitted job's selector."""
        text = json.dumps(manifest_of(obj)["spec"], sort_keys=True)
        return json.loads(text.replace(f'"{STACK_JOB}"', f'"{STACK_JOB}-b"'))

    assert submitted_service["spec"] == renamed(service)
    assert submitted_policy["spec"] == renamed(policy)


def spot_stack_file(tmp_path: Path) -> Path:
    """The shipped AWS stack with its job on the spot pool, checkpoints.everySeconds unset."""
    path = stack_file(tmp_path)
    text = path.read_text()
    assert "everySeconds" not in text
    path.write_text(text.replace("    nodes: 2\n", "    nodes: 2\n    pool: spot\n"))
    return path


def test_a_job_submitted_to_a_spot_stack_without_every_seconds_gets_flags_the_trainer_accepts(
        tmp_path, base_jobset):
    """checkpoints.everySeconds unset (the default) on a spot stack: the submitted job saves by
    time at the cadence the stack derives, and the trainer parses its command line."""
    from infra.cadence import checkpoints_in_effect
    from torchrec_cloud.submit import submission_settings
    from trainer.config import config_from_flags

    base = tmp_path / "base.json"
    base.write_text(json.dumps(base_jobset))
    path = spot_stack_file(tmp_path)
    code, out, err = cli("submit", "--stack", "aws", "--stack-file", str(path), "--outputs",
                         str(outputs_file(tmp_path)), "--base", str(base), "--name", "spot-1",
                         "--dry-run")
    assert code == 0, err
    args = container(list(yaml.safe_load_all(out))[-1])["args"]
    settings = submission_settings(path, "aws", "spot-1", None, None, {})
    seconds = checkpoints_in_effect(settings).every_seconds
    assert seconds and f"--checkpoint_every_seconds={seconds}" in args
    config = config_from_flags(args, world_size=16)
    assert config.checkpoint_every_seconds == seconds


@pytest.fixture(scope="module")
def spot_stacks() -> dict[int, Any]:
    """The shipped AWS stack on the spot pool under `pulumi up` (the whole program under
    mocks), as it renders with 2 nodes and with 1."""
    from tests.harness import run_stack

    return {nodes: run_stack("aws", overrides={"job": {"pool": "spot", "nodes": nodes}})
            for nodes in (2, 1)}


def _stack_jobset(run: Any) -> dict[str, Any]:
    from tests.harness import JOBSET

    (captured,) = run.of_type(JOBSET)
    return manifest_of(captured)


def _submitted_args(tmp_path: Path, run: Any, name: str, nodes: int | None) -> list[str]:
    """What `submit --name NAME [--nodes K]` renders against the stack `run` made."""
    from torchrec_cloud.stack import Outputs
    from torchrec_cloud.submit import render, submission_settings

    outputs = Outputs.of("aws", run.outputs)
    settings = submission_settings(spot_stack_file(tmp_path), "aws", name, nodes, None, {})
    objects = render(settings, outputs, _stack_jobset(run), None, outputs.kubernetes_version)
    return container(objects[-1])["args"]


def test_a_job_submitted_with_the_stacks_own_name_nodes_and_pool_gets_exactly_its_flags(
        tmp_path, spot_stacks):
    """One path: `submit` renders a job's stack flags with the function `pulumi up` renders the
    stack's own job's with, so the same name, nodes and pool give the same command line."""
    stack = spot_stacks[2]
    own = container(_stack_jobset(stack))["args"]
    assert _submitted_args(tmp_path, stack, stack.outputs["job_name"], None) == own


def test_a_job_submitted_with_other_nodes_gets_the_write_share_and_cadence_for_its_nodes(
        tmp_path, spot_stacks):
    """One node submitted beside the 2-node stack: its flags are those `pulumi up` gives a
    1-node job (its ranks' share of the store's throughput, the cadence derived for its
    throughput and save, no fabric floor), not the 2-node job's copied."""
    from infra.preemption import estimated_save
    from torchrec_cloud.submit import submission_settings
    from workloads.flags import write_mb_per_sec_per_rank

    two, one = spot_stacks[2], spot_stacks[1]
    submitted = _submitted_args(tmp_path, two, two.outputs["job_name"], 1)
    assert submitted == container(_stack_jobset(one))["args"]

    def value(args: list[str], flag: str) -> str:
        (found,) = [a.split("=", 1)[1] for a in args if a.startswith(f"--{flag}=")]
        return found

    settings = submission_settings(spot_stack_file(tmp_path), "aws", "dlrm", 1, None, {})
    share = write_mb_per_sec_per_rank("aws", settings.job, estimated_save(settings))
    assert value(submitted, "checkpoint_write_mb_per_sec") == f"{share:g}"
    stack_args = container(_stack_jobset(two))["args"]
    assert value(submitted, "checkpoint_every") != value(stack_args, "checkpoint_every")
    assert not any(a.startswith("--fabric_floor_gbps=") for a in submitted)  # one node: none


def test_every_flag_stack_flags_passes_is_one_a_submitted_job_gets_for_itself():
    """PER_JOB_FLAGS names every flag stack_flags may pass (checkpoints on, a dataset, spot), so
    none of them is copied from the stack's JobSet into a job of another name or size."""
    from infra.preemption import stop_budget
    from infra.settings.model.checkpoints import Checkpoints
    from infra.settings.model.dataset import Dataset
    from workloads.flags import PER_JOB_FLAGS, STACK_OWNED, stack_flags

    job = Job(name="exp", nodes=1, pool=PoolChoice.SPOT)
    flags = stack_flags(job, "s3://bucket/exp", "/mnt/shared", "aws", Checkpoints(),
                        Dataset(path="criteo/prepared"), stop_budget("aws", True, 30), None)
    names = {str(f)[2:].split("=", 1)[0] for f in flags}
    assert names == set(PER_JOB_FLAGS) and names <= STACK_OWNED
    assert "--checkpoint_dir=s3://bucket/exp" in flags
    assert "--telemetry_dir=s3://bucket/exp/telemetry" in flags


def test_submit_runs_on_make_clis_set_plus_the_two_packages_its_message_names(tmp_path, base_jobset):
    """Where `make cli` / `make status` made .venv (no Pulumi SDK), submit's message names
    pulumi and pulumi-kubernetes at requirements.txt's pins; with those two added, submit
    renders (--dry-run) importing nothing else."""
    from tests.test_cli import _requirement_closure, modules_outside
    from torchrec_cloud.__main__ import SUBMIT_PACKAGES, missing_module_hint
    from torchrec_cloud.invocation import pins

    assert pins(*SUBMIT_PACKAGES) == "pulumi==3.272.0 pulumi-kubernetes==4.34.2"
    assert f"-m pip install {pins(*SUBMIT_PACKAGES)}`" in missing_module_hint("pulumi", "submit")
    wanted = tmp_path / "submit.txt"
    wanted.write_text(f"-r {ROOT / 'requirements-cli.txt'}\n" + "\n".join(pins(*SUBMIT_PACKAGES).split()))
    base = tmp_path / "base.json"
    base.write_text(json.dumps(base_jobset))
    found, outside = modules_outside(
        [submit_args(tmp_path, base, "--name", "light-1", "--dry-run", "--", "--learning_rate=0.01")],
        _requirement_closure(wanted), tmp_path)
    assert found["codes"] == [0], found["err"]
    assert not outside, f"submit imported {outside}, beyond requirements-cli.txt and {SUBMIT_PACKAGES}"
def _last_values(args: list[str]) -> dict[str, str]:
    """What argparse sees: the last value of each repeated flag."""
    return {arg[2:].split("=", 1)[0]: arg.split("=", 1)[1] for arg in args if "=" in arg}


def _gate_submission(machine: Any, nodes: int) -> Any:
    from infra.preemption import stop_budget
    from infra.settings.model.checkpoints import Checkpoints
    from infra.settings.model.dataset import Dataset
    from workloads.submitted import Submission

    return Submission(job=Job(name="exp", nodes=nodes, pool=PoolChoice.ON_DEMAND), stack="aws",
                      queue="dlrm", bucket_root="s3://bucket", budget=stop_budget("aws", False, 30),
                      machine=machine, checkpoints=Checkpoints(), dataset=Dataset(),
                      save_estimate=None, mount="/mnt/shared")


def _gated_base(machine: Any, nodes: int, gang_gate_flags: Any) -> list[str]:
    return ["--fabric_gate=enforce", f"--fabric_transport={machine.fabric_transport}",
            *gang_gate_flags(machine, nodes), "--inter_host_gb_per_sec=50"]


@pytest.mark.parametrize("submitted_nodes", [1, 2, 3])
def test_a_submitted_job_of_another_size_gets_every_gang_gate_flag_for_its_own_nodes(submitted_nodes):
    """Every flag gang_gate_flags returns follows the node count: a job submitted beside a
    4-node stack gets each one's value for its own nodes (and none the stack's size alone has),
    on every catalog machine with a fabric; the gate's other flags as the stack has them."""
    from infra.catalog.machines import MACHINES, Interconnect
    from workloads.flags import gang_gate_flags
    from workloads.submitted import trainer_args

    fabric = [m for m in MACHINES if m.has_gpus and m.interconnect != Interconnect.NONE]
    assert fabric
    for machine in fabric:
        base = _gated_base(machine, 4, gang_gate_flags)
        got = _last_values(trainer_args(base, _gate_submission(machine, submitted_nodes)))
        own = _last_values(gang_gate_flags(machine, submitted_nodes))
        stack_only = set(_last_values(gang_gate_flags(machine, 4))) - set(own)
        assert {name: got.get(name) for name in own} == own, machine.name
        assert not stack_only & set(got), (machine.name, stack_only & set(got))
        assert got["fabric_transport"] == machine.fabric_transport
        assert got["inter_host_gb_per_sec"] == "50"


def test_a_new_gate_flag_that_follows_the_node_count_needs_no_second_list(monkeypatch):
    """A maintainer adds a per-size flag to gang_gate_flags (and the settings own it): a job
    submitted beside the stack gets its value for its own nodes, not the stack's copied."""
    from infra.catalog.cloud import Cloud
    from infra.catalog.machines import machine as catalog_machine
    from workloads import flags, submitted

    original = flags.gang_gate_flags

    def with_new_flag(machine: Any, nodes: int, enforced: bool = True) -> list[str]:
        return [*original(machine, nodes, enforced), f"--fabric_new_bound={nodes}"]

    monkeypatch.setattr(flags, "gang_gate_flags", with_new_flag)
    monkeypatch.setattr(submitted, "gang_gate_flags", with_new_flag)
    monkeypatch.setattr(submitted, "STACK_OWNED", submitted.STACK_OWNED | {"fabric_new_bound"})
    p5 = catalog_machine(Cloud.AWS, "p5.48xlarge")
    args = submitted.trainer_args(_gated_base(p5, 4, with_new_flag), _gate_submission(p5, 2))
    assert _last_values(args)["fabric_new_bound"] == "2"
