"""A JobSet gang on this machine: the rendered pod command run as real processes, judged by the
rendered failure rules exactly as Kubernetes and JobSet define them.

Each "pod" is a process group (a container) running the job object's own command and args, as
the program registers them under mocks; only the rendezvous host (pod 0's DNS name -> 127.0.0.1),
the processes per node and the model size are changed. The kubelet's stop is a SIGTERM to the
container's main process (PID 1: the launcher, after the shell's `exec`), then SIGKILL to all
of it when the grace runs out; a lost node is SIGKILL to all of it at once.

The rules, as documented:
- batch/v1 podFailurePolicy (https://kubernetes.io/docs/concepts/workloads/controllers/job/
  #pod-failure-policy): rules are checked in order, the first match wins; `onExitCodes` matches
  a container of that name whose exit code is In (or NotIn, and not 0) the values;
  `onPodConditions` matches a pod condition of that type and status. FailJob fails the Job with
  reason PodFailurePolicy and the message the Job controller writes; Ignore does not count;
  Count, or no match, counts the pod against backoffLimit, and more failures than backoffLimit
  fail the Job with reason BackoffLimitExceeded. A pod that exits 0 completes its index.
- JobSet failurePolicy (kubernetes-sigs/jobset v0.10.1, api/jobset/v1alpha2/jobset_types.go):
  on a child Job's failure the rules are checked in order; a rule matches when the Job's
  failure reason is in onJobFailureReasons (or that list is empty) and one of
  onJobFailureMessagePatterns (RE2) matches its message (or that list is empty). No match means
  RestartJobSet. RestartJobSet counts against maxRestarts (the JobSet fails beyond it);
  RestartJobSetAndIgnoreMaxRestarts does not; FailJobSet fails it. BlockingRecreate deletes
  every pod of the old generation, and waits for them, before creating the new one.
- Kueue (v0.19.2; tasks/manage/setup_wait_for_pods_ready.md, pkg/controller/core/
  workload_controller.go, pkg/controller/jobs/jobset): see KueueRules and
  SimulatedJobSet.run_queued. Suspending a Job deletes its pods after removing their tracking
  finalizer (kubernetes pkg/controller/job/job_controller.go deleteJobPods), so they are never
  counted against backoffLimit; but a deleted pod whose exit matches a FailJob rule still fails
  the Job (getFailJobMessage reads every failed pod), and JobSet runs its failure policy even
  while suspended (jobset pkg/controllers/jobset_controller.go).
- PID 1 of a container gets, from outside its PID namespace, only the signals it has a handler
  for (pid_namespaces(7)): the kubelet's SIGTERM to a launcher that has not installed torch's
  handlers yet (before the rendezvous completes) is dropped, and SIGKILL ends it after the grace.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tests.trainer.helpers import REPO
from tests.warm import popen as warm

VENV_BIN = REPO / ".venv" / "bin"


def catches(pid: int, sig: int) -> bool:
    """Whether the process has a handler for `sig` (the SigCgt mask of /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    (mask,) = [line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")]
    return bool(int(mask, 16) >> (sig - 1) & 1)


def process_state(pid: int) -> str | None:
    """A process's state letter from /proc/PID/stat (Z: ended, not yet waited for), None when
    there is none."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


@dataclass
class Pod:
    index: int
    name: str
    process: subprocess.Popen | None  # None: Pending, no node for it yet
    log: Path
    conditions: set[str] = field(default_factory=set)  # e.g. {"DisruptionTarget"}
    stopped: bool = False  # the kubelet stopped it (deleted), as opposed to exiting by itself

    def exit_code(self) -> int | None:
        """The container's exit code as the kubelet reports it: 128 + signal when killed."""
        if self.process is None:
            return None
        code = self.process.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code

    def kubelet_stop(self, grace_seconds: float) -> None:
        """SIGTERM to PID 1 only, and only if it handles it (PID 1 of a container); SIGKILL to
        everything once the grace runs out. A Pending pod just goes away."""
        if self.process is None or self.process.poll() is not None:
            return
        self.stopped = True
        if catches(self.process.pid, signal.SIGTERM):
            os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            self.lose_node()

    def lose_node(self) -> None:
        """SIGKILL to every process of the pod at once, as when its node goes: the launcher's
        process group and the workers torchrun started in sessions of their own."""
        if self.process is None:
            return
        doomed = descendants(self.process.pid)  # found before the launcher is gone
        for kill in (lambda: os.killpg(self.process.pid, signal.SIGKILL),
                     *(lambda pid=pid: os.kill(pid, signal.SIGKILL) for pid in doomed)):
            try:
                kill()
            except ProcessLookupError:
                pass
        self.process.wait()

    def worker_pids(self) -> list[int]:
        """The trainer processes the pod's launcher (its PID 1, after the shell's exec) started."""
        assert self.process is not None
        return [pid for pid in children(self.process.pid) if _runs_module(pid, "trainer")]


def children(pid: int) -> list[int]:
    """The processes `pid` started: its children, and those the warm server (tests/warm/)
    forked at its request, which are the server's children."""
    try:
        found = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        found = []
    return found + [child for child, _ in warm.started_by(pid) if Path(f"/proc/{child}").exists()]


def descendants(pid: int) -> list[int]:
    found = children(pid)
    return found + [grandchild for child in found for grandchild in descendants(child)]


def _runs_module(pid: int, module: str) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return False
    if b"-m" in argv and argv[argv.index(b"-m") + 1:][:1] == [module.encode()]:
        return True
    return warm.forked_module(pid) == module


def _matches_exit_codes(rule: dict[str, Any], container: str, code: int) -> bool:
    req = rule["onExitCodes"]
    if req.get("containerName") not in (None, container):
        return False
    if req["operator"] == "In":
        return code in req["values"]
    return code != 0 and code not in req["values"]  # NotIn


def first_rule(policy: dict[str, Any], pod: Pod, container: str, namespace: str
               ) -> tuple[str, str] | None:
    """(action, message) of the podFailurePolicy rule this failed pod matches, if any."""
    code = pod.exit_code()
    assert code not in (None, 0)
    for index, rule in enumerate(policy["rules"]):
        if "onExitCodes" in rule and _matches_exit_codes(rule, container, code):
            matched = f"Container {container} for pod {namespace}/{pod.name} failed with exit " \
                      f"code {code} matching {rule['action']} rule at index {index}"
        elif "onPodConditions" in rule and any(
                c["type"] in pod.conditions and c["status"] == "True"
                for c in rule["onPodConditions"]):
            condition = next(c["type"] for c in rule["onPodConditions"] if c["type"] in pod.conditions)
            matched = f"Pod {namespace}/{pod.name} has condition {condition} matching " \
                      f"{rule['action']} rule at index {index}"
        else:
            continue
        return rule["action"], matched
    return None


def job_failure(policy: dict[str, Any], backoff_limit: int, failed_before: int, pod: Pod,
                container: str, namespace: str) -> tuple[str, str] | None:
    """(reason, message) when this failed pod fails its Job, else None (Ignore, or still
    within backoffLimit)."""
    rule = first_rule(policy, pod, container, namespace)
    if rule is not None and rule[0] == "FailJob":
        return "PodFailurePolicy", rule[1]
    if rule is not None and rule[0] == "Ignore":
        return None
    # Count, or no match
    if failed_before + 1 > backoff_limit:
        return "BackoffLimitExceeded", "Job has reached the specified backoff limit"
    return None


def jobset_action(failure_policy: dict[str, Any], reason: str, message: str) -> str:
    for rule in failure_policy.get("rules", []):
        reasons = rule.get("onJobFailureReasons") or []
        patterns = rule.get("onJobFailureMessagePatterns") or []
        if reasons and reason not in reasons:
            continue
        if patterns and not any(re.search(p, message) for p in patterns):
            continue
        return rule["action"]
    return "RestartJobSet"


# --- Kubernetes scheduling and Kueue admission, as documented ---------------------------------

@dataclass(frozen=True)
class NodePool:
    """A GPU pool's nodes as the scheduler sees them (the cluster contract's GpuPool)."""

    key: str
    labels: Mapping[str, str]
    taints: Sequence[Mapping[str, str]]  # key, value, effect


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    for t in tolerations:
        if t.get("effect") not in (None, "", taint["effect"]):
            continue
        if t.get("operator", "Equal") == "Exists" and t.get("key") in (None, taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value") == taint["value"]:
            return True
    return False


def fits(pod_spec: Mapping[str, Any], pool: NodePool) -> bool:
    """Whether the scheduler may bind the pod to a node of the pool: every nodeSelector label,
    one of the required nodeAffinity terms (terms are ORed, expressions ANDed; operator In), and
    a toleration for every NoSchedule/NoExecute taint (kubernetes.io docs: assign-pod-node,
    taint-and-toleration)."""
    if any(pool.labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is not None:
        def term_matches(term: Mapping[str, Any]) -> bool:
            return all(e["operator"] == "In" and pool.labels.get(e["key"]) in e["values"]
                       for e in term.get("matchExpressions", []))
        if not any(term_matches(t) for t in required["nodeSelectorTerms"]):
            return False
    return all(_tolerates(pod_spec.get("tolerations") or [], t) for t in pool.taints
               if t["effect"] in ("NoSchedule", "NoExecute"))


def _duration_seconds(text: str) -> float:
    """A Go duration as Kueue's configuration takes it (e.g. 15m, 90s, 1h30m)."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
    assert parts and "".join(n + u for n, u in parts) == text, text
    return sum(float(n) * units[u] for n, u in parts)


@dataclass(frozen=True)
class KueueRules:
    """Kueue's admission rules, with every value read from the rendered stack: the manager
    Configuration (waitForPodsReady), the ClusterQueue (flavors in order, nominal quotas) and
    the ResourceFlavors.

    - All or nothing: a Workload (the whole JobSet) is admitted into one flavor whose free
      nominal quota covers all of its pods' requests; flavors are tried in the ClusterQueue's
      order (concepts/cluster_queue.md "Flavors and Resources"); until then the JobSet stays
      suspended and has no pods (tasks/run/jobsets.md).
    - On admission Kueue writes the flavor's nodeLabels into the pods' nodeSelector and adds its
      tolerations (concepts/resource_flavor.md), then unsuspends the JobSet.
    - waitForPodsReady: an admitted Workload whose pods are not all Ready `timeout` after
      admission, or again not all Ready for `recoveryTimeout` after having been, is evicted (the
      JobSet suspended, its pods deleted) and requeued after backoffBaseSeconds * 2^(n-1)
      (capped at backoffMaxSeconds) for the n-th requeue; when n would exceed
      backoffLimitCount it is deactivated instead (workload_controller.go
      reconcileNotReadyTimeout, triggerDeactivation; workload.go UpdateRequeueState). Kueue
      never marks the JobSet Failed for this.
    """

    ready_timeout: float
    recovery_timeout: float
    backoff_base: float
    backoff_max: float
    backoff_limit: int | None
    flavors: tuple[tuple[str, float], ...]  # (name, nominal GPU quota), most preferred first
    flavor_specs: Mapping[str, Mapping[str, Any]]
    resource: str = "nvidia.com/gpu"

    @classmethod
    def rendered(cls, config: Mapping[str, Any], cluster_queue: Mapping[str, Any],
                 resource_flavors: Mapping[str, Mapping[str, Any]]) -> "KueueRules":
        # what the fallback once rendered, and this no longer simulates (workloads/kueue.py)
        assert not {"admissionChecksStrategy", "concurrentAdmissionPolicy"} & set(cluster_queue)
        ready = config["waitForPodsReady"]
        requeue = ready.get("requeuingStrategy", {})
        timeout = _duration_seconds(ready.get("timeout", "5m"))
        (group,) = cluster_queue["resourceGroups"]
        resource = group["coveredResources"][0]
        flavors = tuple((f["name"], float(next(r["nominalQuota"] for r in f["resources"]
                                               if r["name"] == resource)))
                        for f in group["flavors"])
        limit = requeue.get("backoffLimitCount")
        return cls(
            ready_timeout=timeout,
            recovery_timeout=_duration_seconds(ready.get("recoveryTimeout") or
                                               ready.get("timeout", "5m")),
            backoff_base=float(requeue.get("backoffBaseSeconds", 60)),
            backoff_max=float(requeue.get("backoffMaxSeconds", 3600)),
            backoff_limit=None if limit is None else int(limit),
            flavors=flavors, flavor_specs=resource_flavors, resource=resource)

    def requeue_delay(self, count: int) -> float:
        return min(self.backoff_base * 2 ** (count - 1), self.backoff_max)

    def matches(self, pod_spec: Mapping[str, Any], flavor: str) -> bool:
        """Kueue skips a flavor whose nodeLabels contradict the pods' nodeSelector or every
        required nodeAffinity term, on the label keys the flavor sets (resource_flavor.md)."""
        labels = self.flavor_specs[flavor].get("nodeLabels") or {}
        if any(k in labels and labels[k] != v
               for k, v in (pod_spec.get("nodeSelector") or {}).items()):
            return False
        required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution"))
        if required is None:
            return True
        return any(all(e["key"] not in labels or (e["operator"] == "In"
                                                  and labels[e["key"]] in e["values"])
                       for e in term.get("matchExpressions", []))
                   for term in required["nodeSelectorTerms"])

    def assign(self, pod_spec: Mapping[str, Any], requests: float) -> str | None:
        """The flavor the whole gang is admitted into now, or None (it stays queued)."""
        for name, quota in self.flavors:
            if requests > quota or not self.matches(pod_spec, name):
                continue  # all or nothing: the gang is never split across flavors
            return name
        return None

    def admitted_pod_spec(self, pod_spec: Mapping[str, Any], flavor: str) -> dict[str, Any]:
        """The pod as the admitted JobSet creates it (podset.Merge: nodeSelector, tolerations)."""
        spec = self.flavor_specs[flavor]
        return {**pod_spec,
                "nodeSelector": {**(pod_spec.get("nodeSelector") or {}),
                                 **(spec.get("nodeLabels") or {})},
                "tolerations": [*(pod_spec.get("tolerations") or []),
                                *(spec.get("tolerations") or [])]}


# Nodes a pool can have at a moment of the simulation's clock (seconds since the start).
Capacity = Callable[[str, float], int]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class GangRecord:
    """What happened, for the assertions."""

    generations: int = 0
    counted_restarts: int = 0
    actions: list[str] = field(default_factory=list)
    exit_codes: list[dict[int, int | None]] = field(default_factory=list)
    early_successes: list[str] = field(default_factory=list)
    outcome: str = ""
    # Kueue (run_queued): (clock seconds, flavor) per admission, (clock seconds, reason) per
    # eviction, the pool each generation's pods were bound to.
    admissions: list[tuple[float, str]] = field(default_factory=list)
    evictions: list[tuple[float, str]] = field(default_factory=list)
    pools: list[str] = field(default_factory=list)


class SimulatedJobSet:
    """Runs the rendered JobSet's pods here and applies its rules until it completes or fails."""

    def __init__(self, jobset_spec: dict[str, Any], command: list[str], args: list[str],
                 env: dict[str, str], namespace: str, name: str, workdir: Path,
                 processes_per_node: int = 1, time_scale: float = 1.0) -> None:
        """`time_scale`: real seconds per second of the rendered durations (the rendezvous
        join timeout, the pod's grace, Kueue's timeouts and backoffs), so that a run measured
        in the stack's minutes takes seconds here, every duration in proportion."""
        (replicated,) = jobset_spec["replicatedJobs"]
        self.job_spec = replicated["template"]["spec"]
        self.pod_spec = self.job_spec["template"]["spec"]
        (self.container,) = self.pod_spec["containers"]
        self.failure_policy = jobset_spec["failurePolicy"]
        self.nodes = int(self.job_spec["completions"])
        self.replicated_name = replicated["name"]
        self.namespace, self.name, self.workdir = namespace, name, workdir
        self.port = free_port()
        script = command[2]
        # Pod 0's DNS name -> this machine; the node's GPUs -> a few CPU processes.
        script, found = re.subn(r"--rdzv_endpoint=[^ ]+", f"--rdzv_endpoint=127.0.0.1:{self.port}", script)
        assert found == 1, script
        script, found = re.subn(r"--nproc_per_node=\d+", f"--nproc_per_node={processes_per_node}", script)
        assert found == 1, script
        self.time_scale = time_scale
        join = re.search(r"join_timeout=(\d+)", script)
        assert join is not None, script
        self.join_timeout = float(join.group(1))  # as rendered, in the stack's seconds
        script = script.replace(join.group(0),
                                f"join_timeout={max(1, round(self.join_timeout * time_scale))}")
        self.argv = [command[0], command[1], script, *command[3:], *args]
        self.env = {**env, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", **warm.environment(),
                    "OMP_NUM_THREADS": "1", "HOME": str(workdir)}
        self.grace = float(self.pod_spec["terminationGracePeriodSeconds"]) * time_scale

    def start_generation(self, generation: int, nodes: int | None = None) -> list[Pod]:
        """The generation's pods; only the first `nodes` get a node and start (default all),
        the rest stay Pending (see bind)."""
        pods = [Pod(index, f"{self.name}-{self.replicated_name}-0-{index}-g{generation}", None,
                    self.workdir / f"{self.name}-{self.replicated_name}-0-{index}-g{generation}.log")
                for index in range(self.nodes)]
        self.bind(pods, self.nodes if nodes is None else nodes)
        return pods

    def bind(self, pods: list[Pod], nodes: int) -> None:
        """Start Pending pods, in index order, while the pool has nodes for them."""
        for pod in pods:
            if pod.process is None and sum(p.process is not None for p in pods) < nodes:
                pod.process = subprocess.Popen(
                    self.argv, cwd=REPO, start_new_session=True, stdout=pod.log.open("w"),
                    stderr=subprocess.STDOUT,
                    env={**self.env, "JOB_COMPLETION_INDEX": str(pod.index), "HOSTNAME": pod.name})

    def run(self, disrupt: Callable[[int, list[Pod]], None] | None = None,
            timeout: float = 300.0, nodes: Callable[[int], int | None] = lambda g: None
            ) -> GangRecord:
        """Generations until the JobSet completes or fails. ``disrupt(generation, pods)`` is
        called while pods run (return to let them go on); ``nodes(generation)``: how many of
        the generation's pods find a node (None: all; the rest stay Pending, no capacity)."""
        record = GangRecord()
        deadline = time.monotonic() + timeout
        while True:
            generation = record.generations
            record.generations += 1
            pods = self.start_generation(generation, nodes(generation))
            if disrupt is not None:
                disrupt(generation, pods)
            failure = self._watch(pods, record, deadline)
            if failure is None or self._restart(pods, record, failure):
                return record

    def _watch(self, pods: list[Pod], record: GangRecord, deadline: float,
               tick: Callable[[list[Pod]], str | None] | None = None
               ) -> tuple[str, str] | str | None:
        """Until the generation completes (None; the record says Completed), its child Job fails
        ((reason, message)) or `tick` evicts it (the reason it returns)."""
        backoff_limit = int(self.job_spec.get("backoffLimit", 6))
        failed: list[Pod] = []
        while True:
            assert time.monotonic() < deadline, self.logs(pods)
            if tick is not None:
                evicted = tick(pods)
                if evicted is not None:
                    return evicted
            for pod in pods:
                code = pod.exit_code()
                if code is None or code == 0 or pod in failed:
                    continue
                failure = job_failure(self.job_spec["podFailurePolicy"], backoff_limit,
                                      len(failed), pod, self.container["name"], self.namespace)
                failed.append(pod)
                if failure:
                    return failure
            if all(p.exit_code() == 0 for p in pods):
                record.exit_codes.append({p.index: 0 for p in pods})
                record.outcome = "Completed"
                return None
            time.sleep(0.05)

    def _restart(self, pods: list[Pod], record: GangRecord, failure: tuple[str, str]) -> bool:
        """JobSet's failure policy for a failed child Job; True when the JobSet is Failed."""
        # The child Job failed: every pod that already exited 0 was an early success.
        record.early_successes += [p.name for p in pods if p.exit_code() == 0]
        action = jobset_action(self.failure_policy, *failure)
        record.actions.append(action)
        # BlockingRecreate (or a failed JobSet): delete every pod, with its grace, and wait.
        for pod in pods:
            pod.kubelet_stop(self.grace)
        record.exit_codes.append({p.index: p.exit_code() for p in pods})
        return self._count(record, action)

    def _count(self, record: GangRecord, action: str) -> bool:
        if action == "FailJobSet":
            record.outcome = "Failed"
            return True
        if action == "RestartJobSet":
            record.counted_restarts += 1
            if record.counted_restarts > int(self.failure_policy.get("maxRestarts", 0)):
                record.outcome = "Failed"
                return True
        return False

    def gpus_per_pod(self, resource: str) -> float:
        resources = self.container.get("resources", {})
        return float((resources.get("requests") or resources.get("limits") or {}).get(resource, 0))

    def pool_of(self, kueue: KueueRules, flavor: str, pools: Mapping[str, NodePool]) -> NodePool:
        """The one pool whose nodes the admitted pods fit (Kubernetes' rules, fits)."""
        spec = kueue.admitted_pod_spec(self.pod_spec, flavor)
        found = [pool for pool in pools.values() if fits(spec, pool)]
        assert len(found) == 1, (flavor, [p.key for p in found])
        return found[0]

    def run_queued(self, kueue: KueueRules, pools: Mapping[str, NodePool], capacity: Capacity,
                   timeout: float = 300.0, watch_evictions: int | None = None) -> GangRecord:
        """The JobSet queued in Kueue (KueueRules), its pods bound to the admitted flavor's pool
        as that pool's nodes exist (`capacity`; a pod without a node stays Pending, its process
        not started), JobSet's rules applied while it runs. A pod is Ready once running (the
        trainer pod has no readiness probe). Ends Completed, Failed or Deactivated, or, after
        `watch_evictions` evictions that left it requeued, Queued: the observer stops
        watching a job that is still waiting (Kueue without a bound never stops by itself).
        The requeue count is never reset when the gang becomes Ready: Kueue clears
        status.requeueState only when a deactivated Workload is reactivated."""
        record = GangRecord()
        start = time.monotonic()
        deadline = start + timeout

        def now() -> float:  # the stack's seconds since the JobSet was created
            return (time.monotonic() - start) / self.time_scale

        gang = self.gpus_per_pod(kueue.resource) * self.nodes
        requeues, requeue_at = 0, 0.0
        while True:
            flavor = None  # queued: the JobSet is suspended and has no pods
            while flavor is None:
                assert time.monotonic() < deadline, record
                if now() >= requeue_at:
                    flavor = kueue.assign(self.pod_spec, gang)
                if flavor is None:
                    time.sleep(0.05)
            admitted_at = now()
            record.admissions.append((admitted_at, flavor))
            pool = self.pool_of(kueue, flavor, pools)
            # PodsReady: False/WaitForStart from admission; True once every pod is Ready;
            # False/WaitForRecovery from the moment one is not any more.
            state = {"ready": False, "ever": False, "since": admitted_at}

            def tick(pods: list[Pod]) -> str | None:
                t = now()
                self.bind(pods, capacity(pool.key, t))
                ready = all(p.process is not None and p.exit_code() in (None, 0) for p in pods)
                if ready:
                    state.update(ready=True, ever=True)
                    return None
                if state["ready"]:
                    state.update(ready=False, since=t)
                limit = kueue.recovery_timeout if state["ever"] else kueue.ready_timeout
                return "PodsReadyTimeout" if t - state["since"] >= limit else None

            while True:  # generations while admitted
                record.generations += 1
                record.pools.append(pool.key)
                pods = self.start_generation(record.generations - 1, capacity(pool.key, now()))
                outcome = self._watch(pods, record, deadline, tick)
                if outcome is None:
                    return record
                if isinstance(outcome, str):
                    break
                if self._restart(pods, record, outcome):
                    return record
            record.evictions.append((now(), outcome))
            if self._evict(pods, record):
                return record
            if kueue.backoff_limit is not None and requeues + 1 > kueue.backoff_limit:
                record.outcome = "Deactivated"  # held with a reason, never Failed
                return record
            requeues += 1
            requeue_at = now() + kueue.requeue_delay(requeues)
            if watch_evictions is not None and len(record.evictions) >= watch_evictions:
                record.outcome = "Queued"  # requeued, backing off: still waiting
                return record

    def _evict(self, pods: list[Pod], record: GangRecord) -> bool:
        """Kueue suspends the JobSet; JobSet suspends its Job; the Job controller deletes the
        pods (the kubelet's stop). They are not counted, but a pod whose exit matches a FailJob
        rule fails the Job, and JobSet runs its failure policy even while suspended. True when
        that leaves the JobSet Failed."""
        for pod in pods:
            pod.kubelet_stop(self.grace)
        record.exit_codes.append({p.index: p.exit_code() for p in pods})
        record.early_successes += [p.name for p in pods if p.exit_code() == 0]
        for pod in pods:
            if pod.exit_code() in (None, 0):
                continue
            rule = first_rule(self.job_spec["podFailurePolicy"], pod, self.container["name"],
                              self.namespace)
            if rule is not None and rule[0] == "FailJob":
                action = jobset_action(self.failure_policy, "PodFailurePolicy", rule[1])
                record.actions.append(action)
                return self._count(record, action)
        return False

    @staticmethod
    def logs(pods: list[Pod]) -> str:
        return "\n".join(f"--- {p.name} ({p.exit_code()})\n"
                         f"{p.log.read_text()[-3000:] if p.log.exists() else '(Pending)'}"
                         for p in pods)
