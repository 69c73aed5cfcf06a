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
from typing import Any, Callable

from tests.trainer.helpers import REPO

VENV_BIN = REPO / ".venv" / "bin"


@dataclass
class Pod:
    index: int
    name: str
    process: subprocess.Popen | None  # None: Pending (no node for it), its container never ran
    log: Path
    conditions: set[str] = field(default_factory=set)  # e.g. {"DisruptionTarget"}

    def exit_code(self) -> int | None:
        """The container's exit code as the kubelet reports it: 128 + signal when killed."""
        if self.process is None:
            return None
        code = self.process.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code

    def kubelet_stop(self, grace_seconds: float) -> None:
        """SIGTERM to PID 1 only; SIGKILL to everything once the grace runs out."""
        if self.process is None or self.process.poll() is not None:
            return
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            self.lose_node()

    def lose_node(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


def _matches_exit_codes(rule: dict[str, Any], container: str, code: int) -> bool:
    req = rule["onExitCodes"]
    if req.get("containerName") not in (None, container):
        return False
    if req["operator"] == "In":
        return code in req["values"]
    return code != 0 and code not in req["values"]  # NotIn


def job_failure(policy: dict[str, Any], backoff_limit: int, failed_before: int, pod: Pod,
                container: str, namespace: str) -> tuple[str, str] | None:
    """(reason, message) when this failed pod fails its Job, else None (Ignore, or still
    within backoffLimit)."""
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
        if rule["action"] == "FailJob":
            return "PodFailurePolicy", matched
        if rule["action"] == "Ignore":
            return None
        break  # Count: as if no rule matched
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


class SimulatedJobSet:
    """Runs the rendered JobSet's pods here and applies its rules until it completes or fails."""

    def __init__(self, jobset_spec: dict[str, Any], command: list[str], args: list[str],
                 env: dict[str, str], namespace: str, name: str, workdir: Path,
                 processes_per_node: int = 1, join_timeout: int | None = None) -> None:
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
        if join_timeout is not None:  # a rendezvous test need not wait the stack's half hour
            script, found = re.subn(r"join_timeout=\d+", f"join_timeout={join_timeout}", script)
            assert found == 1, script
        self.argv = [command[0], command[1], script, *command[3:], *args]
        self.env = {**env, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "PYTHONPATH": str(REPO),
                    "OMP_NUM_THREADS": "1", "HOME": str(workdir)}
        self.grace = float(self.pod_spec["terminationGracePeriodSeconds"])

    def start_generation(self, generation: int, pending: set[int] = frozenset()) -> list[Pod]:
        """The generation's pods; those in ``pending`` find no node and never start."""
        pods = []
        for index in range(self.nodes):
            name = f"{self.name}-{self.replicated_name}-0-{index}-g{generation}"
            log = self.workdir / f"{name}.log"
            if index in pending:
                log.write_text("Pending: no node has room for this pod\n")
                pods.append(Pod(index, name, None, log))
                continue
            process = subprocess.Popen(
                self.argv, cwd=REPO, start_new_session=True, stdout=log.open("w"),
                stderr=subprocess.STDOUT,
                env={**self.env, "JOB_COMPLETION_INDEX": str(index), "HOSTNAME": name})
            pods.append(Pod(index, name, process, log))
        return pods

    def run(self, disrupt: Callable[[int, list[Pod]], None] | None = None,
            timeout: float = 300.0, pending: Callable[[int], set[int]] = lambda g: set()
            ) -> GangRecord:
        """Generations until the JobSet completes or fails. ``disrupt(generation, pods)`` is
        called while pods run (return to let them go on); ``pending(generation)``: the pods
        that stay Pending in that generation (no capacity)."""
        record = GangRecord()
        deadline = time.monotonic() + timeout
        max_restarts = int(self.failure_policy.get("maxRestarts", 0))
        backoff_limit = int(self.job_spec.get("backoffLimit", 6))
        while True:
            generation = record.generations
            record.generations += 1
            pods = self.start_generation(generation, pending(generation))
            if disrupt is not None:
                disrupt(generation, pods)
            failed: list[Pod] = []
            failure: tuple[str, str] | None = None
            while failure is None:
                assert time.monotonic() < deadline, self.logs(pods)
                for pod in pods:
                    code = pod.exit_code()
                    if code is None or code == 0 or pod in failed:
                        continue
                    failure = job_failure(self.job_spec["podFailurePolicy"], backoff_limit,
                                          len(failed), pod, self.container["name"], self.namespace)
                    failed.append(pod)
                    if failure:
                        break
                if all(p.exit_code() == 0 for p in pods):
                    record.exit_codes.append({p.index: 0 for p in pods})
                    record.outcome = "Completed"
                    return record
                time.sleep(0.05)
            # The child Job failed: every pod that already exited 0 was an early success.
            record.early_successes += [p.name for p in pods if p.exit_code() == 0]
            action = jobset_action(self.failure_policy, *failure)
            record.actions.append(action)
            # BlockingRecreate (or a failed JobSet): delete every pod, with its grace, and wait.
            for pod in pods:
                pod.kubelet_stop(self.grace)
            record.exit_codes.append({p.index: p.exit_code() for p in pods})
            if action == "FailJobSet":
                record.outcome = "Failed"
                return record
            if action == "RestartJobSet":
                record.counted_restarts += 1
                if record.counted_restarts > max_restarts:
                    record.outcome = "Failed"
                    return record

    @staticmethod
    def logs(pods: list[Pod]) -> str:
        return "\n".join(f"--- {p.name} ({p.exit_code()})\n{p.log.read_text()[-3000:]}" for p in pods)
