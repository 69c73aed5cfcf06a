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
- anything else: a crash, counted against the job's retry budget.
"""

CONFIG_ERROR = 2
FABRIC_ERROR = 3
RESUME = 143
NO_RETRY = (CONFIG_ERROR, FABRIC_ERROR)  # statuses that fail the whole job at once
