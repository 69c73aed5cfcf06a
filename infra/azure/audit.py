"""Kubernetes audit logs of the AKS cluster, kept in a Log Analytics workspace (issue 33).

AKS writes the API server's audit log only where a diagnostic setting sends it
(https://learn.microsoft.com/azure/aks/monitor-aks, "AKS control plane/resource logs"). The
category is `kube-audit-admin`: every create, update, patch and delete, without the get and list
events that `kube-audit` adds, which Microsoft recommends for cost because the operators' own
reads dominate that volume (same page, "kube-audit-admin ... excludes the get and list audit
events"). Resource-specific tables (`AKSAuditAdmin`; log_analytics_destination_type Dedicated),
as Microsoft recommends for new settings.

The workspace lives in the checkpoint group (`<prefix>-ckpt-rg`) and is kept on `pulumi
destroy` with the checkpoints (checkpoints.retainOnDestroy), so who changed what in a cluster
outlives it; a later `up` finds it and imports it (infra/azure/storage.py find_kept_store), as
it does the checkpoint account. RETENTION_DAYS is the retention Log Analytics includes in the
ingestion price (https://learn.microsoft.com/azure/azure-monitor/logs/data-retention-configure).
The diagnostic setting itself belongs to the cluster and goes with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import containerservice as aks
from pulumi_azure_native import monitor, operationalinsights

AUDIT_CATEGORY = "kube-audit-admin"
RETENTION_DAYS = 30
DIAGNOSTIC_SETTING = "kube-audit"


def workspace_name(prefix: str) -> str:
    return f"{prefix}-audit"


@dataclass
class Audit:
    workspace: operationalinsights.Workspace
    setting: monitor.DiagnosticSetting


def create_audit(prefix: str, cluster: aks.ManagedCluster, kept_group: pulumi.Input[str],
                 retain: bool, tags: dict[str, str], opts: pulumi.ResourceOptions,
                 found_workspace_id: str | None = None) -> Audit:
    """The kept workspace (imported when a destroy left it) and the cluster's diagnostic
    setting that sends kube-audit-admin there."""
    kept = pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(
            retain_on_delete=retain,
            **({"import_": found_workspace_id} if found_workspace_id else {})))
    workspace = operationalinsights.Workspace(
        f"{prefix}-audit",
        resource_group_name=kept_group,
        workspace_name=workspace_name(prefix),
        sku=operationalinsights.WorkspaceSkuArgs(
            name=operationalinsights.WorkspaceSkuNameEnum.PER_GB2018),
        retention_in_days=RETENTION_DAYS,
        tags=tags,
        opts=kept,
    )
    setting = monitor.DiagnosticSetting(
        f"{prefix}-kube-audit",
        name=DIAGNOSTIC_SETTING,
        resource_uri=cluster.id,
        workspace_id=workspace.id,
        log_analytics_destination_type="Dedicated",
        logs=[monitor.DiagnosticsLogSettingsArgs(category=AUDIT_CATEGORY, enabled=True)],
        opts=opts,
    )
    return Audit(workspace=workspace, setting=setting)
