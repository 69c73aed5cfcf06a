"""AKS's settings rules: the spot price cap, Azure NetApp Files sizes, checkpoints on the
NetApp volume, an az:// source's resource group.

Each is a rule as in infra/settings/rules.py (a function of the whole settings yielding the
problems it finds), run on every stack by infra/settings/all_rules.py check_all: a rule here
also refuses an Azure-only setting on another cloud. Imports no pulumi or cloud SDK: `make check`
runs it on requirements-check.txt alone.
"""

from __future__ import annotations

from collections.abc import Iterator

from infra.catalog.cloud import Cloud
from infra.catalog.machines import find_machine
from infra.settings.errors import Problem, set_command
from infra.settings.model.checkpoints import CheckpointLocation
from infra.settings.model.shared_file_system import AzureNetAppFiles
from infra.settings.model.stack_file import Settings
from infra.settings.rules import TIB, Rule


def spot_price_is_azure_only(s: Settings) -> Iterator[Problem]:
    price = s.gpu_pools.spot.max_price
    if s.cloud != Cloud.AZURE and price != -1:
        yield Problem("gpuPools.spot.maxPrice", price,
                      "only Azure takes a spot price cap; leave it at -1 on "
                      f"{s.cloud.value}")
    elif price != -1 and price <= 0:
        yield Problem("gpuPools.spot.maxPrice", price, "-1 (up to on-demand) or a price > 0")
    elif price != -1 and s.gpu_pools.spot.enabled:
        # Azure evicts (or never allocates) a spot VM whose price is above its maxPrice: a cap
        # below the list spot price means the pool most likely never gets a node.
        found = find_machine(s.cloud, s.gpu_pools.spot.machine_type)
        if found is not None and found.spot_usd_per_hour and price < found.spot_usd_per_hour:
            yield Problem("gpuPools.spot.maxPrice", price,
                          f"below {found.name}'s spot list price {found.spot_usd_per_hour:g}/h "
                          "(infra/catalog/machines.py): Azure would allocate no node at this cap; "
                          f"`{set_command('gpuPools.spot.maxPrice', -1)}` (up to on-demand) or "
                          f"a cap of at least {found.spot_usd_per_hour:g}")


def netapp_sizes(s: Settings) -> Iterator[Problem]:
    fs = s.shared_file_system
    if not isinstance(fs, AzureNetAppFiles):
        return
    if fs.pool_size_tib < 1:
        yield Problem("sharedFileSystem.poolSizeTib", fs.pool_size_tib,
                      "a capacity pool is at least 1 TiB, in whole TiB")
    if not 50 <= fs.volume_size_gib <= 100 * TIB:
        yield Problem("sharedFileSystem.volumeSizeGib", fs.volume_size_gib,
                      "a volume is 50 GiB to 100 TiB (102400 GiB)")
    elif fs.volume_size_gib > fs.pool_size_tib * TIB:
        yield Problem("sharedFileSystem.volumeSizeGib", fs.volume_size_gib,
                      f"at most the capacity pool's {fs.pool_size_tib * TIB} GiB")


def prepare_source_resource_group_is_azure_only(s: Settings) -> Iterator[Problem]:
    if s.cloud != Cloud.AZURE and s.dataset.prepare.source_resource_group:
        yield Problem("dataset.prepare.sourceResourceGroup",
                      s.dataset.prepare.source_resource_group,
                      "Azure only (the resource group of an az:// source's storage account)")


def netapp_checkpoints_are_not_kept_on_destroy(s: Settings) -> Iterator[Problem]:
    """`pulumi destroy` deletes the Azure NetApp Files volume, and a volume's snapshots go with
    it (https://learn.microsoft.com/azure/azure-netapp-files/snapshots-introduction: snapshots
    live in the volume); only the checkpoint account is kept. So retainOnDestroy (the default)
    cannot be honoured for checkpoints on the volume: said, instead of a `make check` that
    promises what destroy then deletes."""
    if (s.cloud != Cloud.AZURE or not s.checkpoints.enabled
            or s.checkpoints.location != CheckpointLocation.SHARED_FILE_SYSTEM
            or not s.checkpoints.retain_on_destroy):
        return
    yield Problem(
        "checkpoints.location", s.checkpoints.location.value,
        "checkpoints on the Azure NetApp Files volume are deleted by `pulumi destroy` with the "
        "volume and its snapshots, while checkpoints.retainOnDestroy (true by default) asks to "
        "keep them. Keep them in the storage account, which destroy leaves and which keeps 7 "
        "days of deleted or overwritten versions: `pulumi config set --path checkpoints.location "
        "objectStore`; or accept that destroy deletes them: `pulumi config set --path "
        "checkpoints.retainOnDestroy false`")


RULES: tuple[Rule, ...] = (
    spot_price_is_azure_only,
    netapp_sizes,
    prepare_source_resource_group_is_azure_only,
    netapp_checkpoints_are_not_kept_on_destroy,
)
