"""GPUDirect's cluster-side Kubernetes objects, created through the cluster's provider:

- per GPU VPC, a GKENetworkParamSet (which VPC and subnet, NIC handed whole to the pod) and a
  Network object the pods name in their `networking.gke.io/interfaces` annotation, as
  cluster-toolkit's gke-cluster applies them (modules/scheduler/gke-cluster/templates/
  gke-network-paramset.yaml.tftpl and network-object.yaml.tftpl);
- the NCCL plugin installer DaemonSet of each GPUDirect flavour in use, which copies NCCL, the
  plugin and its config files into the node's /home/kubernetes/bin/nvidia/lib64;
- the NRI device injector DaemonSet, which puts the GPUs into the rxdm sidecar named by the
  pod's `devices.gke.io/container.<name>` annotation.
The DaemonSets are the blueprints' manifests (examples/gke-a3-highgpu/nccl-tcpx-installer.yaml.tftpl,
examples/gke-a3-megagpu/nccl-tcpxo-installer.yaml.tftpl, examples/gke-a3-*/nri-device-injector.yaml,
themselves copies of GoogleCloudPlatform/container-engine-accelerators' gpudirect-tcpx,
gpudirect-tcpxo and nri_device_injector manifests), with images pinned and volumes that no
container mounts left out. They are privileged, host-PID, host-network node agents in
kube-system, like the GPU driver installer GKE itself runs there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_kubernetes as k8s

from infra.addon_versions import version_for
from infra.catalog.cloud import Cloud
from infra.catalog.machines import Interconnect, machine
from infra.gcp.interconnect import GPUDIRECT, GpuDirect, gpu_network_name, gpudirect_for
from infra.gcp.network import GpuNetwork
from infra.settings.model.stack_file import Settings

core = k8s.core.v1
meta = k8s.meta.v1

NETWORKING_API = "networking.gke.io/v1"
NAMESPACE = "kube-system"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
# The blueprints' manifests (pinned by digest there already).
PAUSE_IMAGE = ("gke.gcr.io/pause:3.8@sha256:"
               "880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830")
NRI_INJECTOR_IMAGE = ("gcr.io/gke-release/nri-device-injector@sha256:"
                      "6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970")
# TCPXO's pre-installation step runs its script in the host's namespaces (nsenter -at 1): the
# image supplies only nsenter. The references name Docker Hub's "ubuntu"; here the same image
# comes from mirror.gcr.io, Google's cache of Docker Hub, whose pulls "do not count against
# Docker Hub rate limits" and which is "kept in sync with Docker Hub"
# (https://cloud.google.com/artifact-registry/docs/pull-cached-dockerhub-images). Not a
# digest: no registry could be asked for one from where this was written, and a digest copied
# from elsewhere would be unchecked; the release tag keeps nsenter's major version.
NSENTER_IMAGE = "mirror.gcr.io/library/ubuntu:24.04"

INSTALLER_NAMES = {Interconnect.GPUDIRECT_TCPX: "nccl-tcpx-installer",
                   Interconnect.GPUDIRECT_TCPXO: "nccl-tcpxo-installer"}
# Each flavour's rows in infra/addon_versions.py (the installer image's tag).
ADDON_NAMES = {Interconnect.GPUDIRECT_TCPX: "gpudirect-tcpx",
               Interconnect.GPUDIRECT_TCPXO: "gpudirect-tcpxo"}


def installer_image(direct: GpuDirect, kubernetes_version: str) -> str:
    """The installer image at the tag the table gives the cluster's minor. The pod's rxdm
    sidecar (direct.rxdm_image) is coupled to that tag ("The tcpxo-daemon version is coupled
    with the NCCL plugin installer version"), so a second row needs its own GpuDirect pair."""
    tag = version_for(ADDON_NAMES[direct.interconnect], kubernetes_version)
    repository, pinned = direct.installer_image.rsplit(":", 1)
    if tag != pinned:
        raise ValueError(f"infra/addon_versions.py picks {repository}:{tag} for Kubernetes "
                         f"{kubernetes_version}, but infra/gcp/interconnect.py pairs its rxdm "
                         f"image with {pinned} only")
    return f"{repository}:{tag}"

# nccl-tcpxo-installer.yaml.tftpl, "pre-installation": opens the node's firewall to TCP, loads
# the dmabuf import helper, and exposes the NICs' aperture BARs (PCI id 1ae0:0084) under
# /dev/aperture_devices for the pods (NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY).
TCPXO_PRE_INSTALL = """/sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT && modprobe import-helper
sudo mkdir -p /dev/aperture_devices
while IFS= read -r line; do
  BDF=$( echo "$line" | awk '{print $1}' );
  target_aperture_path="/dev/aperture_devices/$BDF"
  host_aperture_device=$(readlink -f "/sys/bus/pci/devices/$BDF");
  sudo mkdir -p $target_aperture_path;
  sudo umount -R $target_aperture_path;
  sudo mount --bind $host_aperture_device $target_aperture_path;
done < <(lspci -nn -D | grep '1ae0:0084')
if [ -d /dev/aperture_devices ]; then
    chmod -R a+r /dev/aperture_devices/
    chmod a+rw /dev/aperture_devices/*/resource*
fi
"""


def _install_script(folder: str, chmod: bool) -> str:
    return ("set -ex\n"
            + ("chmod 755 /scripts/container_entry.sh\n" if chmod else "")
            + "/scripts/container_entry.sh install --install-nccl\n"
            "mkdir -p /usr/local/nvidia/lib64\n"
            f"cp -r /var/lib/{folder}/lib64/. /usr/local/nvidia/lib64\n"
            'echo "installation finishes"\n')


def _host(name: str, path: str) -> core.VolumeArgs:
    return core.VolumeArgs(name=name, host_path=core.HostPathVolumeSourceArgs(path=path))


def _node_agent(name: str, accelerators: Sequence[str], volumes: list[core.VolumeArgs],
                init_containers: list[core.ContainerArgs], containers: list[core.ContainerArgs]
                ) -> k8s.apps.v1.DaemonSetSpecArgs:
    """The shape every reference DaemonSet here shares: on the GPU nodes only, every taint
    tolerated, node-critical, host network and PID."""
    labels = {"k8s-app": name}
    return k8s.apps.v1.DaemonSetSpecArgs(
        selector=meta.LabelSelectorArgs(match_labels=labels),
        update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(type="RollingUpdate"),
        template=core.PodTemplateSpecArgs(
            metadata=meta.ObjectMetaArgs(labels={"name": name, **labels}),
            spec=core.PodSpecArgs(
                priority_class_name="system-node-critical",
                affinity=core.AffinityArgs(node_affinity=core.NodeAffinityArgs(
                    required_during_scheduling_ignored_during_execution=core.NodeSelectorArgs(
                        node_selector_terms=[core.NodeSelectorTermArgs(match_expressions=[
                            core.NodeSelectorRequirementArgs(
                                key=ACCELERATOR_LABEL, operator="In", values=list(accelerators)),
                        ])]),
                )),
                tolerations=[core.TolerationArgs(operator="Exists")],
                host_network=True,
                host_pid=True,
                volumes=volumes,
                init_containers=init_containers or None,
                containers=containers,
            ),
        ),
    )


def _privileged() -> core.SecurityContextArgs:
    return core.SecurityContextArgs(privileged=True)


def _requests() -> core.ResourceRequirementsArgs:
    return core.ResourceRequirementsArgs(requests={"cpu": "150m"})


def nccl_installer_spec(direct: GpuDirect, accelerators: Sequence[str], image: str
                        ) -> k8s.apps.v1.DaemonSetSpecArgs:
    """The NCCL plugin installer: init containers copy the libraries to the node, then a pause
    container keeps the pod (and the DaemonSet's readiness) in place."""
    name = INSTALLER_NAMES[direct.interconnect]
    tcpx = direct.interconnect == Interconnect.GPUDIRECT_TCPX
    mounts = [core.VolumeMountArgs(name="var-lib", mount_path="/var/lib"),
              core.VolumeMountArgs(name="library-dir-host", mount_path="/usr/local")]
    volumes = [_host("var-lib", "/var/lib"), _host("library-dir-host", "/home/kubernetes/bin")]
    if tcpx:  # the A3 High blueprint's installer also shares the node's /run/tcpx
        mounts.append(core.VolumeMountArgs(name="tcpx-run", mount_path="/run/tcpx"))
        volumes.append(_host("tcpx-run", "/run/tcpx"))
    installer = core.ContainerArgs(
        name=name,
        image=image,
        resources=_requests(),
        security_context=_privileged(),
        volume_mounts=mounts,
        command=["/bin/sh", "-c"],
        args=[_install_script("tcpx" if tcpx else "tcpxo", chmod=not tcpx)],
    )
    pre_install = [] if tcpx else [core.ContainerArgs(
        name="pre-installation",
        image=NSENTER_IMAGE,
        security_context=_privileged(),
        command=["nsenter", "-at", "1", "--", "sh", "-c", TCPXO_PRE_INSTALL],
    )]
    return _node_agent(name, accelerators, volumes, [*pre_install, installer],
                       [core.ContainerArgs(name="pause", image=PAUSE_IMAGE)])


def device_injector_spec(accelerators: Sequence[str]) -> k8s.apps.v1.DaemonSetSpecArgs:
    """NRI device injector (nri-device-injector.yaml)."""
    return _node_agent(
        "device-injector", accelerators,
        volumes=[_host("nri", "/var/run/nri"), _host("dev", "/dev")],
        init_containers=[],
        containers=[core.ContainerArgs(
            name="device-injector",
            image=NRI_INJECTOR_IMAGE,
            resources=_requests(),
            security_context=_privileged(),
            volume_mounts=[core.VolumeMountArgs(name="dev", mount_path="/dev"),
                           core.VolumeMountArgs(name="nri", mount_path="/var/run/nri")],
        )],
    )


def network_param_set(net: GpuNetwork) -> dict[str, pulumi.Input[str]]:
    """GKENetworkParamSet spec: the whole NIC goes to the pod (NetDevice, as gke-cluster's
    template sets for gVNIC networks)."""
    return {"vpc": net.network.name, "vpcSubnet": net.subnetwork.name, "deviceMode": "NetDevice"}


def gpudirect_in_use(settings: Settings) -> dict[Interconnect, list[str]]:
    """The GPUDirect flavours the GPU pools use (none with interconnect.fabric off), each with
    the accelerator types of its pools: where its DaemonSets run."""
    in_use: dict[Interconnect, set[str]] = {}
    for pool in settings.gpu_pools_by_key.values():
        gpu = machine(Cloud.GCP, pool.machine_type)
        direct = gpudirect_for(gpu, settings.interconnect.fabric)
        if direct is not None and gpu.gcp_accelerator_type:
            in_use.setdefault(direct.interconnect, set()).add(gpu.gcp_accelerator_type)
    return {kind: sorted(types) for kind, types in in_use.items()}


def gpu_nics_needed(in_use: Mapping[Interconnect, Sequence[str]]) -> int:
    """How many GPU VPCs the pools need: the most NICs of any flavour in use."""
    return max((GPUDIRECT[kind].nics for kind in in_use), default=0)


def create_gpudirect_objects(prefix: str, in_use: Mapping[Interconnect, Sequence[str]],
                             gpu_networks: Sequence[GpuNetwork], kubernetes_version: str,
                             opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """Everything above for the GPUDirect flavours in use (gpudirect_in_use); the job waits
    for all of them (contract `ready`)."""
    made: list[pulumi.Resource] = []
    for net in gpu_networks:
        name = gpu_network_name(net.nic)
        params = k8s.apiextensions.CustomResource(
            f"{prefix}-gke-network-param-set-{name}",
            api_version=NETWORKING_API, kind="GKENetworkParamSet",
            metadata=meta.ObjectMetaArgs(name=name),
            spec=network_param_set(net),
            opts=opts)
        network = k8s.apiextensions.CustomResource(
            f"{prefix}-gke-network-{name}",
            api_version=NETWORKING_API, kind="Network",
            metadata=meta.ObjectMetaArgs(name=name),
            spec={"type": "Device", "parametersRef": {
                "group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name}},
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[params])))
        made += [params, network]
    for kind, accelerators in in_use.items():
        direct = GPUDIRECT[kind]
        name = INSTALLER_NAMES[kind]
        made.append(k8s.apps.v1.DaemonSet(
            f"{prefix}-{name}",
            metadata=meta.ObjectMetaArgs(name=name, namespace=NAMESPACE,
                                         labels={"k8s-app": name}),
            spec=nccl_installer_spec(direct, accelerators,
                                     installer_image(direct, kubernetes_version)),
            opts=opts))
    if in_use:
        every = sorted({a for accelerators in in_use.values() for a in accelerators})
        made.append(k8s.apps.v1.DaemonSet(
            f"{prefix}-nri-device-injector",
            metadata=meta.ObjectMetaArgs(name="device-injector", namespace=NAMESPACE,
                                         labels={"k8s-app": "device-injector"}),
            spec=device_injector_spec(every),
            opts=opts))
    return made
