"""What the identity that runs `pulumi up --stack gcp` needs: one predefined role per kind of
resource the program registers, and the permission of that role each kind is created with.

Kept true by tests/test_gcp.py, which runs the program under mocks in its configurations and
finds a row here for every `gcp:` (and docker-build) resource type registered, and finds the
same roles in docs/gcp.md's table. Permissions: https://cloud.google.com/iam/docs/
roles-permissions (each role's page lists what it holds).

No project-wide Service Account User: creating a cluster and node pools that run as the node
account needs iam.serviceAccounts.actAs on that account only, and the run grants it to its own
deployer on that account (infra/gcp/identity.py let_the_deployer_act_as) with the
iam.serviceAccounts.setIamPolicy that Service Account Admin already gives (it sets the job
account's workload identity binding too). That role can still set the policy of the project's
other service accounts: a deployer that must not should be given a custom role made from the
permissions below, or run by an administrator who grants the two service account bindings.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Needs:
    role: str
    permissions: tuple[str, ...]  # the calls that create (or change) this kind of resource


# Pulumi type token -> the role and permissions the deployer uses for it.
DEPLOYER_NEEDS: dict[str, Needs] = {
    "gcp:compute/network:Network": Needs("roles/compute.networkAdmin",
                                         ("compute.networks.create",)),
    "gcp:compute/subnetwork:Subnetwork": Needs("roles/compute.networkAdmin",
                                               ("compute.subnetworks.create",)),
    "gcp:compute/router:Router": Needs("roles/compute.networkAdmin", ("compute.routers.create",)),
    "gcp:compute/routerNat:RouterNat": Needs("roles/compute.networkAdmin",
                                             ("compute.routers.update",)),
    # Network Admin cannot create firewall rules.
    "gcp:compute/firewall:Firewall": Needs("roles/compute.securityAdmin",
                                           ("compute.firewalls.create",)),
    "gcp:container/cluster:Cluster": Needs("roles/container.admin",
                                           ("container.clusters.create",)),
    "gcp:container/nodePool:NodePool": Needs("roles/container.admin",
                                             ("container.clusters.update",)),
    "gcp:filestore/instance:Instance": Needs("roles/file.editor", ("file.instances.create",)),
    "gcp:serviceaccount/account:Account": Needs("roles/iam.serviceAccountAdmin",
                                                ("iam.serviceAccounts.create",)),
    # The job account's workload identity binding and the deployer's own actAs on the nodes'.
    "gcp:serviceaccount/iAMMember:IAMMember": Needs("roles/iam.serviceAccountAdmin",
                                                    ("iam.serviceAccounts.setIamPolicy",)),
    "gcp:projects/iAMMember:IAMMember": Needs("roles/resourcemanager.projectIamAdmin",
                                              ("resourcemanager.projects.setIamPolicy",)),
    "gcp:storage/bucket:Bucket": Needs("roles/storage.admin", ("storage.buckets.create",)),
    "gcp:storage/bucketIAMMember:BucketIAMMember": Needs("roles/storage.admin",
                                                         ("storage.buckets.setIamPolicy",)),
    "gcp:artifactregistry/repository:Repository": Needs(
        "roles/artifactregistry.admin", ("artifactregistry.repositories.create",)),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": Needs(
        "roles/artifactregistry.admin", ("artifactregistry.repositories.setIamPolicy",)),
    "docker-build:index:Image": Needs("roles/artifactregistry.admin",
                                      ("artifactregistry.repositories.uploadArtifacts",)),
}
# Calling the enabled APIs at all (serviceusage.services.use).
API_USE_ROLE = "roles/serviceusage.serviceUsageConsumer"


def deployer_roles() -> list[str]:
    """Every role the deployer needs, sorted."""
    return sorted({n.role for n in DEPLOYER_NEEDS.values()} | {API_USE_ROLE})
