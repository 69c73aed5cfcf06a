"""The typed shape of a stack file: every setting, its default and its per-field rule, one
module per section of `Pulumi.<stack>.yaml`. Import each name from its module; this file
imports nothing.

Keys are camelCase in `Pulumi.<stack>.yaml` (Pulumi's convention) and snake_case here. Each
field's description is the documentation docs/settings.md is generated from. Rules that involve
more than one field, or a cloud's API limits, live in `infra/settings/rules.py` and
`infra/<cloud>/rules.py`; defaults that differ per cloud live in `infra/settings/defaults.py`.

- section.py: `Section`, the base of every block (camelCase keys, unknown keys refused, no
  `true` for a number: `NUMBER_FIELDS`).
- stack_file.py: `Settings`, the whole file (cloud, region, zones, tags and every section).
- kubernetes.py: `kubernetes` (the control plane); api_access.py: which addresses
  `kubernetes.apiAccessCidrs` may name.
- pools.py: `systemPool` and `gpuPools` (on-demand, spot, a GCP reservation).
- interconnect.py: `interconnect` (placement, fabric, the fabric gate).
- shared_file_system.py: `sharedFileSystem` (FSx for Lustre, Azure NetApp Files, Filestore).
- checkpoints.py: `checkpoints`.
- dataset.py: `dataset` and `dataset.prepare`.
- job.py: `job` (the training job, its pool choice and spot shortage policy).
- quota.py: `quota`.
- cloud_options.py: `aws`, `azure` and `gcp`, each cloud's own settings.
"""
