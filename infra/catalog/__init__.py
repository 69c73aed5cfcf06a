"""The catalog: every fact the program plans from that no API tells it, kept as data, one
module per kind of fact, each the one place that fact lives. Import each name from its module;
this file imports nothing.

- cloud.py: `Cloud`, the clouds this program deploys to.
- machines.py: the machine table (`Machine`, `MACHINES`, `machine`, `find_machine`), the fabric
  each offers (`Interconnect`) and the bandwidths a planner reads from a machine.
- gpus.py: each GPU model's rated throughput and bandwidth (`GpuModel`).
- node_times.py: how long a new node takes to join and an idle one lingers, per cloud.
- stop_notices.py: what a node is told before it stops (`StopNotice`, `stop_notice`).
- storage.py: how fast a checkpoint reaches each object store, and the shared file systems'
  tiers, sizes and throughput (FSx for Lustre, Azure NetApp Files, Filestore).
- gate_floors.py: what the fabric gate accepts (published nccl-tests figures, `fabric_floor`,
  the GPU matmul floor).
- planning.py: recorded training runs and rates the run estimate and the sizing advisor plan from.

Sources per entry are in docs/catalog-sources.md; prices are on-demand list prices in USD per
hour in the reference regions (us-east-1, eastus, us-central1) and drift, so treat the cost
outputs as estimates. Last checked 2026-11 (see the sources file for the date and what could
not be verified). The prices of what the stack creates besides its machines are infra/prices.py's.
"""
