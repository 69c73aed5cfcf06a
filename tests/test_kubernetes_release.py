"""Which Kubernetes version a run gives the cluster (infra/kubernetes_release.py): the cloud's
own answer on a first run, the live cluster's version on every later one."""

from __future__ import annotations

import pytest

from infra.kubernetes_release import Offered, Release, choose_release, minor_of
from infra.settings.errors import SettingsError

TODAY = Offered(minors=("1.33", "1.34", "1.35"), default="1.34", where="EKS in us-east-1",
                how_to_list="aws eks describe-cluster-versions")


def never_asked() -> Offered:
    raise AssertionError("a live cluster's version must not depend on what the cloud offers today")


def refusal(setting: str | None, live: str | None, offered=lambda: TODAY) -> str:
    with pytest.raises(SettingsError) as caught:
        choose_release(setting, live, offered)
    (problem,) = caught.value.problems
    assert problem.path == "kubernetes.version" and problem.value == setting
    return problem.allowed


@pytest.mark.parametrize(("version", "minor"), [
    ("1.35", "1.35"), ("1.35.2", "1.35"), ("v1.35.2-eks-1234", "1.35"), ("1.36.3-gke.1200", "1.36")])
def test_every_cloud_s_version_string_reads_as_its_minor(version: str, minor: str) -> None:
    assert minor_of(version) == minor


def test_a_first_run_without_a_setting_takes_the_cloud_s_default() -> None:
    assert choose_release(None, None, lambda: TODAY) == Release(minor="1.34")


def test_a_first_run_takes_the_exact_build_the_cloud_names() -> None:
    gke = Offered(minors=("1.36", "1.37"), default="1.37.2-gke.300", where="GKE REGULAR",
                  how_to_list="gcloud", exact={"1.36": "1.36.9-gke.100", "1.37": "1.37.2-gke.300"})
    assert choose_release(None, None, lambda: gke).version == "1.37.2-gke.300"
    assert choose_release("1.36", None, lambda: gke).version == "1.36.9-gke.100"


def test_a_pinned_minor_the_cloud_offers_is_created() -> None:
    assert choose_release("1.35", None, lambda: TODAY).minor == "1.35"


def test_a_pinned_minor_the_cloud_no_longer_offers_is_refused_naming_what_it_offers() -> None:
    allowed = refusal("1.31", None)
    assert "1.33, 1.34, 1.35" in allowed and "default 1.34" in allowed
    assert "aws eks describe-cluster-versions" in allowed and "Nothing was created" in allowed


def test_a_minor_newer_than_any_offered_is_refused_too() -> None:
    assert "1.33, 1.34, 1.35" in refusal("1.40", None)


def test_a_live_cluster_keeps_its_version_without_asking_the_cloud() -> None:
    kept = choose_release(None, "1.31.4", never_asked)
    assert kept == Release(minor="1.31", exact="1.31.4", kept=True)


def test_a_setting_equal_to_the_live_minor_keeps_the_live_build() -> None:
    kept = choose_release("1.31", "1.31.4", never_asked)
    assert kept.kept and kept.version == "1.31.4"
    # ...and says the setting asked for it, so pools lagging the control plane follow it;
    # an unset setting keeps the cluster as it is, pools included.
    assert kept.pinned and not choose_release(None, "1.31.4", never_asked).pinned


def test_the_next_minor_upgrades_the_live_cluster_if_the_cloud_offers_it() -> None:
    upgrade = choose_release("1.35", "1.34.2", lambda: TODAY)
    assert upgrade == Release(minor="1.35", upgrade_from="1.34")


def test_an_upgrade_skipping_a_minor_is_refused_naming_the_next_step() -> None:
    assert "next upgrade is to 1.34" in refusal("1.35", "1.33.1")


def test_when_the_next_minor_left_the_list_the_lowest_offered_one_is_the_next_step() -> None:
    """A cluster on 1.32 after the cloud dropped 1.33: AKS lets an unsupported version skip
    to a supported one; refusing both 1.33 and 1.34 would leave no way forward."""
    later = Offered(minors=("1.34", "1.35"), default="1.35", where="AKS in westeurope",
                    how_to_list="az aks get-versions")
    assert choose_release("1.34", "1.32.7", lambda: later) == Release(
        minor="1.34", upgrade_from="1.32")
    assert "next upgrade is to 1.34" in refusal("1.35", "1.32.7", lambda: later)


def test_a_cluster_the_cloud_upgraded_past_the_setting_is_kept_with_a_notice() -> None:
    """GKE's channels (and EKS at the end of support) upgrade a live cluster themselves; the
    next unchanged `pulumi up` must not ask for a downgrade no cloud performs, nor stop."""
    kept = choose_release("1.34", "1.35.1-gke.100", never_asked)
    assert (kept.minor, kept.exact, kept.kept, kept.upgrade_from) == (
        "1.35", "1.35.1-gke.100", True, None)
    assert kept.notice is not None and "set kubernetes.version to 1.35" in kept.notice.lower()


def test_an_upgrade_to_a_minor_the_cloud_does_not_offer_is_refused() -> None:
    assert "1.33, 1.34, 1.35" in refusal("1.36", "1.35.0")
