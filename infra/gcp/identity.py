"""Google service accounts: one for the nodes (minimal roles), one for the job (workload identity).

Nodes get only what GKE needs to ship logs and metrics; cloud access for pods goes through the
job's own account, bound to exactly one Kubernetes service account, never through the nodes.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

# The node account's project roles: Kubernetes Engine Default Node Service Account, which
# GKE now advises instead of the four legacy roles (logging, monitoring, metadata): it holds
# what a node needs to ship logs and metrics and nothing more
# (https://cloud.google.com/kubernetes-engine/docs/how-to/hardening-your-cluster#use_least_privilege_sa,
# https://cloud.google.com/kubernetes-engine/security/configure-node-service-accounts,
# https://cloud.google.com/iam/docs/roles-permissions/container#container.defaultNodeServiceAccount).
# The default compute account has Editor: far too much. Image pulls: reader on the stack's
# repository only (infra/gcp/registry.py). Image streaming (the GPU pools' gcfs_config) also
# needs a custom node account to hold Service Usage Consumer in the project of the images
# (https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming, "Requirements").
NODE_ROLES = {"default-node": "roles/container.defaultNodeServiceAccount",
              "service-usage": "roles/serviceusage.serviceUsageConsumer"}


def account_id(prefix: str, suffix: str) -> str:
    """A service account id: 6-30 characters, lowercase letters, digits and '-'."""
    head = prefix[: 30 - len(suffix) - 1].rstrip("-")
    return f"{head}-{suffix}"


def workload_pool(project: str) -> str:
    """The project's workload identity pool, which GKE creates with the first such cluster."""
    return f"{project}.svc.id.goog"


def kubernetes_member(project: str, namespace: str, service_account: str) -> str:
    """The IAM member for one Kubernetes service account through workload identity."""
    return f"serviceAccount:{workload_pool(project)}[{namespace}/{service_account}]"


def create_node_account(prefix: str, project: str,
                        opts: pulumi.ResourceOptions) -> gcp.serviceaccount.Account:
    """The GPU and system nodes' identity: GKE's default node role, and what image streaming
    needs."""
    account = gcp.serviceaccount.Account(
        f"{prefix}-nodes",
        account_id=account_id(prefix, "nodes"),
        display_name=f"{prefix} GKE nodes",
        opts=opts,
    )
    for key, role in NODE_ROLES.items():
        gcp.projects.IAMMember(
            f"{prefix}-nodes-{key}",
            project=project,
            role=role,
            member=account.member,
            opts=opts,
        )
    return account


def _workload_account(prefix: str, role_name: str, account_suffix: str, display_name: str,
                      project: str, namespace: str, service_account: str,
                      after: list[pulumi.Resource], opts: pulumi.ResourceOptions
                      ) -> tuple[gcp.serviceaccount.Account, gcp.serviceaccount.IAMMember]:
    """A Google service account that only the Kubernetes `<namespace>/<service_account>` can act
    as (workload identity), and that binding; the binding waits for `after` (the cluster: the
    workload pool exists only once a cluster enables it)."""
    account = gcp.serviceaccount.Account(
        f"{prefix}-{role_name}", account_id=account_id(prefix, account_suffix),
        display_name=display_name, opts=opts)
    binding = gcp.serviceaccount.IAMMember(
        f"{prefix}-{role_name}-workload-identity",
        service_account_id=account.name,
        role="roles/iam.workloadIdentityUser",
        member=kubernetes_member(project, namespace, service_account),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=after)),
    )
    return account, binding


def create_job_account(prefix: str, project: str, namespace: str, service_account: str,
                       after: list[pulumi.Resource],
                       opts: pulumi.ResourceOptions
                       ) -> tuple[gcp.serviceaccount.Account, gcp.serviceaccount.IAMMember]:
    """The job's identity and the binding that lets only `<namespace>/<service_account>` act
    as it (the job waits for the binding: without it the pod's storage calls are refused)."""
    return _workload_account(prefix, "job", "job", f"{prefix} training job (workload identity)",
                             project, namespace, service_account, after, opts)


def create_prepare_account(prefix: str, project: str, namespace: str, service_account: str,
                           after: list[pulumi.Resource], opts: pulumi.ResourceOptions
                           ) -> tuple[gcp.serviceaccount.Account, gcp.serviceaccount.IAMMember]:
    """The dataset preparation's own identity, which only `<namespace>/<service_account>`
    (Job.prepare_service_account) can act as: the caller grants it read on the source bucket
    and nothing else, so the preparation cannot write checkpoints."""
    return _workload_account(prefix, "prepare", "prep",
                             f"{prefix} dataset preparation (workload identity)",
                             project, namespace, service_account, after, opts)


# The deployer acts as the node account only (iam.serviceAccounts.actAs, which creating a
# cluster and node pools that run as it needs), not as every account of the project: a
# project-wide Service Account User could act as the default compute account (Editor). The
# grant is made by the run itself, right after it creates the account, with the
# iam.serviceAccounts.setIamPolicy the deployer already holds to create it (docs/gcp.md,
# infra/gcp/deployer.py); the cluster and pools wait for it.
ACT_AS_ROLE = "roles/iam.serviceAccountUser"


def deployer_member(email: str) -> str:
    """The IAM member of the credentials Pulumi runs with: a user, or a service account."""
    kind = "serviceAccount" if email.endswith(".gserviceaccount.com") else "user"
    return f"{kind}:{email}"


def let_the_deployer_act_as(prefix: str, account: gcp.serviceaccount.Account,
                            opts: pulumi.ResourceOptions) -> gcp.serviceaccount.IAMMember:
    """Service Account User on `account` alone for whoever runs `pulumi up` (the OpenID
    userinfo of Pulumi's Google credentials)."""
    me = gcp.organizations.get_client_open_id_user_info_output(
        opts=pulumi.InvokeOutputOptions(provider=opts.provider, parent=opts.parent))
    return gcp.serviceaccount.IAMMember(
        f"{prefix}-deployer-acts-as-nodes",
        service_account_id=account.name,
        role=ACT_AS_ROLE,
        member=me.email.apply(deployer_member),
        opts=opts,
    )

