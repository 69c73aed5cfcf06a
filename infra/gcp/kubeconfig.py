"""A kubeconfig that authenticates through gke-gcloud-auth-plugin, and the provider built on it.

No static credential is written: the plugin asks gcloud's application-default login for a short
token on each call, so the kubeconfig holds only the endpoint and the cluster CA (still a
secret, as every kubeconfig is treated).
"""

from __future__ import annotations

import json

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

AUTH_PLUGIN = "gke-gcloud-auth-plugin"


def render_kubeconfig(name: str, endpoint: str, ca_certificate: str) -> str:
    """The kubeconfig document (JSON, which is YAML) for one cluster."""
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {
            "server": f"https://{endpoint}", "certificate-authority-data": ca_certificate}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "users": [{"name": name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": AUTH_PLUGIN,
            "installHint": "gcloud components install gke-gcloud-auth-plugin",
            "provideClusterInfo": True,
            "interactiveMode": "Never",
        }}}],
    }, indent=2)


def cluster_kubeconfig(cluster: gcp.container.Cluster) -> pulumi.Output[str]:
    """The cluster's kubeconfig, as a secret."""
    kubeconfig = pulumi.Output.all(
        cluster.name, cluster.endpoint, cluster.master_auth.cluster_ca_certificate,
    ).apply(lambda values: render_kubeconfig(values[0], values[1], values[2]))
    return pulumi.Output.secret(kubeconfig)


def kubernetes_provider(prefix: str, kubeconfig: pulumi.Output[str],
                        ready: list[pulumi.Resource],
                        opts: pulumi.ResourceOptions) -> k8s.Provider:
    """A provider that cannot act before every pool (and `ready`) exists."""
    return k8s.Provider(
        f"{prefix}-k8s",
        kubeconfig=kubeconfig,
        enable_server_side_apply=True,
        delete_unreachable=True,  # destroy from anywhere: docs/security.md "Destroy"
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=ready)),
    )
