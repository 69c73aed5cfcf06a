"""torchrec-cloud: settings -> cloud GPU cluster -> training job -> stack outputs."""

import pulumi

from infra.addon_versions import check_minor
from infra.cadence import checkpoints_in_effect
from infra.clouds import build_cluster, resolve_release
from infra.contract import GpuClusterArgs
from infra.estimate import estimate_output
from infra.naming import resource_prefix
from infra.preemption import estimated_save
from infra.previous_run import read_previous_run
from infra.settings.loader import load_settings, with_kubernetes_minor
from workloads.component import TrainingJob, TrainingJobArgs
from workloads.flags import checkpoint_dir

settings = load_settings()  # a bad stack file stops here, before any resource exists
previous = read_previous_run()  # this stack's outputs from its last `pulumi up`, if any
# The cloud's version today, or the one the live cluster runs; refused before any resource.
release = resolve_release(settings, previous)
settings = with_kubernetes_minor(settings, release.minor)
check_minor(settings.cloud, release.minor)  # a minor older than an add-on supports: refused here
# Names unique per stack (a hash when the stack's name is cut), kept as deployed on a live stack.
args = GpuClusterArgs(settings=settings,
                      name_prefix=resource_prefix(previous.text("name_prefix"), previous.live),
                      release=release, previous=previous)
cluster = build_cluster(args)
kubernetes_version = cluster.kubernetes_version or release.version
job = TrainingJob(
    f"{args.name_prefix}-training",
    # The save cadence derived from one save's time where the stack file leaves it unset.
    TrainingJobArgs(cluster=cluster, job=settings.job, checkpoints=checkpoints_in_effect(settings),
                    dataset=settings.dataset, save_estimate=estimated_save(settings),
                    kubernetes_version=cluster.node_version or kubernetes_version,
                    interconnect=settings.interconnect, system_pool=settings.system_pool),
)

pulumi.export("cloud", settings.cloud.value)
pulumi.export("name_prefix", args.name_prefix)  # the next `up` of this live stack keeps it
pulumi.export("cluster_name", cluster.name)
pulumi.export("kubernetes_version", kubernetes_version)
pulumi.export("kubeconfig", pulumi.Output.secret(cluster.kubeconfig))
pulumi.export("file_system_id", cluster.shared_file_system.file_system_id)
pulumi.export("checkpoint_uri", cluster.checkpoints.uri)
# Where the trainer saves (objectStore: checkpoint_uri; sharedFileSystem: checkpoint_dir on the
# file system, which `status` cannot list from a laptop); workloads/flags.py checkpoint_dir.
pulumi.export("checkpoint_location", settings.checkpoints.location.value)
pulumi.export("checkpoint_dir", checkpoint_dir(cluster, settings.checkpoints, settings.job))
# The node pools by name, with their capacity: `status` names the autoscaler's node groups
# after them, a pool scaling up from zero nodes included.
pulumi.export("node_pools", {settings.system_pool.name: "on-demand",
                             **{p.name: "spot" if p.spot else "on-demand"
                                for p in cluster.gpu_pools.values()}})
pulumi.export("trainer_image", cluster.trainer_image)
pulumi.export("job_name", job.job_name)
pulumi.export("job_namespace", settings.job.namespace)  # `python -m torchrec_cloud status` reads it
pulumi.export("watch_commands", job.watch_commands)
# Hourly items, the most the pools may reach, and one run of the job (infra/estimate.py).
pulumi.export("estimated_cost", estimate_output(settings))
for output_name, value in cluster.exports.items():
    pulumi.export(output_name, value)
# `pulumi up` lists outputs sorted by name (pulumi/pulumi pkg/backend/display, StableKeys), so
# this name makes it the last line: the job is submitted, and how to see why it waits.
pulumi.export("why_waiting", job.submitted)
