"""The trainer's exit statuses: the contract between the trainer, its launcher and the job's
failure rules (workloads/). One place, so the Kubernetes rules and the code cannot disagree.

- 0: training reached its end (max_steps or its epochs). Nothing else exits 0.
- CONFIG_ERROR (2): a bad flag or a missing dataset; retrying cannot help, the job fails at once.
- FABRIC_ERROR (3): the fabric gate found the interconnect unusable (wrong transport, bandwidth
  under the machine's floor, or a slow GPU/link); retrying on the same nodes cannot help, the job
  fails at once with the gate's one-line verdict in its log.
- RESUME (143): stopped for preemption (SIGTERM on any rank, or a lost peer); whatever could be
  saved is saved, and the whole gang should restart and resume. 143 is 128 + SIGTERM, what a
  shell reports for a process stopped by the kubelet's SIGTERM, and it lies in the 128-255 range
  that Kubeflow's training operator treats as retryable (restartPolicy ExitCode).
- NODE_LEFT_OUT (200): the fabric gate found one or more nodes slow or broken (a GPU failing
  its health check, a wrong transport or missing fabric NICs on that node, a much slower rank),
  tainted them `status-taint.cluster-autoscaler.kubernetes.io/torchrec-cloud-unhealthy:NoSchedule` and stopped; nothing was trained or saved.
  The whole gang restarts on other nodes without using the retry budget (the gate itself bounds
  how many nodes it leaves out, then exits FABRIC_ERROR). 200 lies in the 128-255 range the
  training operator retries (restartPolicy ExitCode) and above 128 + 64 (SIGRTMAX on Linux),
  so no death by a signal reads as it.
- anything else: a crash, counted against the job's retry budget.
"""

CONFIG_ERROR = 2
FABRIC_ERROR = 3
RESUME = 143
NODE_LEFT_OUT = 200
NO_RETRY = (CONFIG_ERROR, FABRIC_ERROR)  # statuses that fail the whole job at once
