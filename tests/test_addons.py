"""Add-ons follow the cluster's Kubernetes minor (infra/addon_versions.py): every minor a cloud
may give a cluster from today to mid-2028 gets a version of every add-on; past the table, the
newest with a warning; older than the table, refused before any resource; and the stacks
install what the table picks. `make check-tables` (infra/table_age.py) ages by its dates.

The stack runs here do not ask a cloud for its versions: `resolve_release` is replaced by one
that returns the minor the test names (the per-cloud listing has its own tests).
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any

import pytest
import time_machine

from infra import addon_versions, table_age
from infra.addon_versions import (ADDON_VERSIONS, CLOUD_ADDONS, NEWEST_RELEASED_MINOR, check_minor,
                                  choose, version_for)
from infra.catalog.cloud import Cloud
from infra.kubernetes_release import Release, minor_key
from infra.settings.errors import SettingsError
from tests.harness import Run, run_stack

# What EKS, AKS and GKE offer between today and mid-2028 (standard, extended support, LTS).
MINORS = tuple(f"1.{n}" for n in range(33, 39))
# Minors released by the table's date that an add-on's published range does not reach yet: the
# table warns for these (the newest version is installed). Adding a row removes the entry here.
KNOWN_GAPS = {
    ("gpu-operator", "1.37"), ("network-operator", "1.37"),  # 26.3.3 / 26.4.0 reach 1.36
    ("jobset", "1.37"),  # newest release v0.12.0 is built against 1.36
    ("cluster-autoscaler", "1.37"),  # no cluster-autoscaler-1.37.x release read yet
}
STACKS = {Cloud.AWS: "aws", Cloud.AZURE: "azure", Cloud.GCP: "gcp"}
HELM = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the program logs with pulumi.log.warn."""
    said: list[str] = []
    monkeypatch.setattr(addon_versions.pulumi.log, "warn", lambda message, *a, **k: said.append(message))
    return said


def _minors_through(newest: str) -> list[str]:
    return [m for m in MINORS if minor_key(m) <= minor_key(newest)]


# --- the table -------------------------------------------------------------------------------
@pytest.mark.parametrize("cloud", list(Cloud))
@pytest.mark.parametrize("minor", MINORS)
def test_every_minor_a_cloud_may_choose_has_a_version_of_each_of_its_addons(cloud: Cloud,
                                                                            minor: str) -> None:
    for addon in CLOUD_ADDONS[cloud]:
        chosen = choose(addon, minor)  # raises for a missing row or a gap inside the table
        assert chosen.row.version
        if minor_key(minor) <= minor_key(NEWEST_RELEASED_MINOR):
            # A released minor is covered by a row, or its gap is known and listed above.
            assert chosen.row.supports(minor) or (addon, minor) in KNOWN_GAPS, (addon, minor)


def test_known_gaps_are_still_gaps() -> None:
    """A row added for a gap must take the gap off the list (so the list never hides one)."""
    for addon, minor in KNOWN_GAPS:
        assert choose(addon, minor).beyond_table, (addon, minor)


def test_every_row_names_its_source_and_a_sane_range() -> None:
    for addon, rows in ADDON_VERSIONS.items():
        assert rows, addon
        for row in rows:
            assert row.source.startswith("https://"), (addon, row)
            assert minor_key(row.oldest) <= minor_key(row.newest), (addon, row)
            assert row.version and not any(c in row.version for c in "^~*>"), (addon, row)


def test_the_newest_version_that_supports_a_minor_wins() -> None:
    assert choose("jobset", "1.32").row.version == "v0.10.1"
    assert choose("jobset", "1.33").row.version == "v0.11.1"
    assert choose("jobset", "1.34").row.version == "v0.12.0"  # v0.10.1/v0.11.1 also support it
    assert choose("jobset", "1.36").row.version == "v0.12.0"


def test_jobset_for_the_minors_clusters_get_today_is_documented_for_them() -> None:
    """The issue: JobSet v0.10.1 (1.32-1.34) ran on 1.35+ clusters."""
    for minor in ("1.35", "1.36"):
        chosen = choose("jobset", minor)
        assert chosen.row.supports(minor) and not chosen.beyond_table


def test_cluster_autoscaler_image_follows_the_minor_and_never_key_errors(warnings: list[str]
                                                                        ) -> None:
    from infra.aws.autoscaler import image_tag

    for row in ADDON_VERSIONS["cluster-autoscaler"]:
        assert row.oldest == row.newest and row.version.startswith(f"v{row.oldest}."), row
    assert image_tag("1.36") == "v1.36.1"
    assert not warnings
    newest = max(ADDON_VERSIONS["cluster-autoscaler"], key=lambda r: minor_key(r.newest))
    assert image_tag("1.39") == newest.version
    assert len(warnings) == 1 and "cluster-autoscaler" in warnings[0]


def test_a_minor_beyond_the_table_gets_the_newest_version_and_a_warning(warnings: list[str]
                                                                        ) -> None:
    assert version_for("jobset", "1.38") == "v0.12.0"
    assert warnings == [
        "jobset v0.12.0 is verified for Kubernetes 1.34-1.36 only; installing it anyway (the "
        f"newest in infra/addon_versions.py, last checked {addon_versions.CHECKED_ON}). "
        "Recheck its release notes and add a row."]


def test_a_minor_inside_the_table_warns_nothing(warnings: list[str]) -> None:
    assert version_for("jobset", "1.35") == "v0.12.0"
    assert version_for("aws-fsx-csi-driver", "1.35") == "1.17.0"
    assert warnings == []


@pytest.mark.parametrize("cloud", list(Cloud))
def test_a_minor_older_than_the_table_is_refused_naming_the_addon(cloud: Cloud) -> None:
    with pytest.raises(SettingsError) as refused:
        check_minor(cloud, "1.20")
    problems = refused.value.problems
    assert {p.path for p in problems} == {"kubernetes.version"}
    assert {p.value for p in problems} == {"1.20"}
    named = " ".join(p.allowed for p in problems)
    assert "jobset" in named and "choose 1.32 or newer" in named
    if cloud == Cloud.AWS:
        assert "cluster-autoscaler supports Kubernetes 1.30 and later" in named


def test_choose_refuses_an_older_minor_itself() -> None:
    with pytest.raises(SettingsError, match="jobset supports Kubernetes 1.32 and later"):
        choose("jobset", "1.31")


# --- the stacks install what the table picks ---------------------------------------------------
def _run(cloud: Cloud, minor: str, monkeypatch: pytest.MonkeyPatch,
         expect_error: bool = False, **overrides: Any) -> Run:
    """The shipped stack with kubernetes.version = `minor`, the cloud's listing not asked."""
    import infra.clouds

    # GKE names a build of the minor; EKS and AKS the minor
    build = "{}.5-gke.1000" if cloud == Cloud.GCP else "{}"
    monkeypatch.setattr(infra.clouds, "resolve_release", lambda settings, previous: Release(
        minor=settings.kubernetes.version, exact=build.format(settings.kubernetes.version)))
    return run_stack(STACKS[cloud], {"kubernetes": {"version": minor}, **overrides},
                     expect_error=expect_error)


def _jobset_url(run: Run) -> str:
    files = [c.inputs["file"] for c in run.of_type(CONFIG_FILE) if "jobset" in c.name]
    assert len(files) == 1, files
    return files[0]


@pytest.mark.parametrize("minor", ["1.33", "1.35", "1.38"])
def test_aws_installs_the_table_versions_for_its_minor(minor: str, warnings: list[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(Cloud.AWS, minor, monkeypatch)
    releases = {r.inputs["name"]: r.inputs for r in run.of_type(HELM)}
    for chart in ("nvidia-device-plugin", "aws-fsx-csi-driver", "aws-node-termination-handler",
                  "dcgm-exporter"):
        assert releases[chart]["version"] == choose(chart, minor).row.version, chart
    if "aws-efa-k8s-device-plugin" in releases:
        assert (releases["aws-efa-k8s-device-plugin"]["version"]
                == choose("aws-efa-k8s-device-plugin", minor).row.version)
    image = releases["cluster-autoscaler"]["values"]["image"]
    assert image["tag"] == choose("cluster-autoscaler", minor).row.version
    assert _jobset_url(run).endswith(f"/jobset-{choose('jobset', minor).row.version}.yaml")
    beyond = sorted(a for a in CLOUD_ADDONS[Cloud.AWS] if choose(a, minor).beyond_table)
    for addon in beyond:
        if addon != "training-operator":  # installed only for job.kind pytorchjob
            assert any(w.startswith(f"{addon} ") for w in warnings), (addon, warnings)


@pytest.mark.parametrize("minor", ["1.33", "1.36"])
def test_azure_installs_the_table_versions_for_its_minor(minor: str, warnings: list[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(Cloud.AZURE, minor, monkeypatch)
    releases = {r.inputs["name"]: r.inputs for r in run.of_type(HELM)}
    assert releases["gpu-operator"]["version"] == choose("gpu-operator", minor).row.version
    if "network-operator" in releases:
        assert (releases["network-operator"]["version"]
                == choose("network-operator", minor).row.version)
    assert _jobset_url(run).endswith(f"/jobset-{choose('jobset', minor).row.version}.yaml")
    assert not any(w.startswith(("gpu-operator ", "network-operator ")) for w in warnings)


@pytest.mark.parametrize(("minor", "machine"), [("1.33", "a3-highgpu-8g"),
                                                 ("1.37", "a3-megagpu-8g")])
def test_gcp_installs_the_table_versions_for_its_minor(minor: str, machine: str,
                                                       warnings: list[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(Cloud.GCP, minor, monkeypatch,
               gpuPools={"onDemand": {"machineType": machine}, "spot": {"machineType": machine}},
               interconnect={"placement": False, "fabric": True})
    assert _jobset_url(run).endswith(f"/jobset-{choose('jobset', minor).row.version}.yaml")
    installers = [d for d in run.of_type("kubernetes:apps/v1:DaemonSet") if "installer" in d.name]
    assert len(installers) == 1  # GPUDirect-TCPX on A3 High, -TCPXO on A3 Mega
    for installer in installers:
        image = installer.inputs["spec"]["template"]["spec"]["initContainers"][-1]["image"]
        addon = "gpudirect-tcpx" if "nccl-tcpx-installer" in installer.name else "gpudirect-tcpxo"
        assert image.endswith(":" + choose(addon, minor).row.version)
    assert any(w.startswith("jobset ") for w in warnings) == (minor == "1.37")


def test_gcp_gpudirect_installer_tags_match_the_rxdm_pairing() -> None:
    """The table's installer tag is the one infra/gcp/interconnect.py pairs its rxdm image with."""
    from infra.gcp.gpudirect import installer_image
    from infra.gcp.interconnect import GPUDIRECT

    for direct in GPUDIRECT.values():
        assert installer_image(direct, "1.35") == direct.installer_image


def test_pytorchjob_installs_the_table_training_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(Cloud.GCP, "1.35", monkeypatch, job={"kind": "PyTorchJob"})
    files = [c.inputs["file"] for c in run.of_type(CONFIG_FILE) if "training-operator" in c.name]
    version = choose("training-operator", "1.35").row.version
    assert len(files) == 1 and files[0].endswith(f"/training-operator-{version}.yaml")


def test_a_stack_older_than_the_table_stops_before_any_resource(monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    run = _run(Cloud.AWS, "1.31", monkeypatch, expect_error=True)
    assert isinstance(run.error, SettingsError), run.error
    assert "jobset supports Kubernetes 1.32 and later" in str(run.error)
    assert not [r for r in run.resources if not r.type.startswith("pulumi:")]


# --- make check-tables ------------------------------------------------------------------------
def _at(day: date) -> Any:
    return time_machine.travel(datetime(day.year, day.month, day.day, 12, tzinfo=timezone.utc),
                               tick=False)


def test_check_tables_is_quiet_about_dates_within_six_months(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.setattr(addon_versions, "CHECKED_ON", date(2026, 11, 26))
    monkeypatch.setattr(table_age.kubernetes_versions, "CHECKED_ON", date(2026, 12, 1),
                        raising=False)
    with _at(date(2027, 5, 26)):
        lines = table_age.warnings(date.today())
    assert not [line for line in lines if "last checked" in line]


def test_check_tables_warns_for_a_table_older_than_six_months(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture
                                                              ) -> None:
    monkeypatch.setattr(addon_versions, "CHECKED_ON", date(2026, 11, 26))
    monkeypatch.setattr(table_age.kubernetes_versions, "CHECKED_ON", date(2026, 11, 26),
                        raising=False)
    with _at(date(2027, 5, 27)):
        assert table_age.main() == 0  # a warning, never a failure: it runs on a schedule
    err = capsys.readouterr().err
    assert ("warning: infra/addon_versions.py: last checked 2026-11-26, more than 6 months "
            "before 2027-05-27") in err
    assert "infra/kubernetes_versions.py: last checked 2026-11-26" in err


def test_check_tables_lists_rows_never_read_from_their_source() -> None:
    lines = table_age.warnings(date(2026, 11, 26))
    unverified = [(a, r.version) for a, rows in ADDON_VERSIONS.items() for r in rows
                  if not r.verified]
    for addon, version in unverified:
        assert any(f"{addon} {version}" in line and "not read" in line for line in lines)


def test_six_months_before_the_end_of_a_month() -> None:
    assert table_age._months_before(date(2027, 8, 31), 6) == date(2027, 2, 28)
    assert table_age._months_before(date(2028, 8, 31), 6) == date(2028, 2, 29)
    assert table_age._months_before(date(2027, 3, 15), 6) == date(2026, 9, 15)
