"""Which Kubernetes version the cluster gets: asked of the cloud at run time, kept once live.

Nothing here is dated. A first `pulumi up` creates the cluster at the cloud's own default, or at
the minor `kubernetes.version` pins when the cloud offers it today (each cloud's list comes from
its API when the program runs: infra/<cloud>/versions.py). Once the cluster exists, later runs
keep the version it runs, without asking what the cloud would create today, so a minor that has
since left the cloud's list never stops an update. The version changes only when the user sets
a newer minor, one minor at a time, as EKS, AKS and GKE all require of a control-plane upgrade.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from infra.settings.errors import Problem, SettingsError


def minor_of(version: str) -> str:
    """"1.35", "1.35.2", "v1.35.2-eks-1234" or "1.35.3-gke.1200" -> "1.35"."""
    major, minor = version.lstrip("v").split(".")[:2]
    return f"{int(major)}.{int(minor.split('-')[0])}"


def minor_key(minor: str) -> tuple[int, int]:
    major, number = minor_of(minor).split(".")
    return int(major), int(number)


@dataclass(frozen=True)
class Offered:
    """What the cloud creates today, as its API said when the program ran."""

    minors: tuple[str, ...]  # every minor a new cluster may have, any order
    default: str  # the minor the cloud picks when none is asked for
    where: str  # "EKS in us-east-1": who said so, for messages
    how_to_list: str  # the command a user runs to see the same list
    exact: Mapping[str, str] = field(default_factory=dict)  # minor -> build to create (GKE)

    def sorted_minors(self) -> list[str]:
        return sorted(set(self.minors), key=minor_key)


@dataclass(frozen=True)
class Release:
    """The version the program gives the cluster on this run."""

    minor: str  # "1.35": what the settings, rules and add-on choices read
    exact: str | None = None  # the full version where one is known ("1.35.3-gke.1200")
    kept: bool = False  # True: the live cluster runs it, nothing was asked of the cloud
    upgrade_from: str | None = None  # the live minor this run upgrades from
    notice: str | None = None  # a warning for the user: the setting lags what the cluster runs

    @property
    def version(self) -> str:
        return self.exact or self.minor


def choose_release(setting: str | None, live: str | None,
                   offered: Callable[[], Offered]) -> Release:
    """The version for this run. `setting` is kubernetes.version (None: the cloud's default),
    `live` what the cluster runs now (None: there is no cluster yet), `offered` asks the cloud
    (called only when a version must be created). A refusal is a SettingsError raised before
    any resource is registered."""
    if live is not None:
        live_minor = minor_of(live)
        if setting is None or minor_key(setting) == minor_key(live_minor):
            return Release(minor=live_minor, exact=live, kept=True)
        if minor_key(setting) < minor_key(live_minor):
            # The cloud upgraded the cluster itself (GKE's release channels always do; EKS at
            # the end of a minor's support; AKS with an auto-upgrade channel). No cloud goes
            # back, so refusing would only block every later run: keep it and say so.
            return Release(minor=live_minor, exact=live, kept=True, notice=(
                f"kubernetes.version is {setting} but the cluster already runs {live} (the "
                f"cloud upgraded it; no cloud downgrades a control plane): kept {live_minor}. "
                f"Set kubernetes.version to {live_minor}, or remove it, to silence this"))
        following = f"{minor_key(live_minor)[0]}.{minor_key(live_minor)[1] + 1}"
        if minor_key(setting) == minor_key(following):
            target = _offered_minor(setting, offered())
            return Release(minor=following, exact=target.exact.get(following),
                           upgrade_from=live_minor)
        today = offered()
        step = _next_step(live_minor, today)
        if minor_key(setting) != minor_key(step):
            raise SettingsError([Problem(
                "kubernetes.version", setting,
                f"one minor at a time: the cluster runs {live}, so the next upgrade is to "
                f"{step}; apply that with `pulumi up`, then set the next one")])
        return Release(minor=step, exact=today.exact.get(step), upgrade_from=live_minor)
    if setting is None:
        today = offered()
        return Release(minor=minor_of(today.default), exact=today.exact.get(minor_of(today.default)))
    today = _offered_minor(setting, offered())
    return Release(minor=setting, exact=today.exact.get(setting))


def _next_step(live_minor: str, offered: Offered) -> str:
    """The minor an upgrade from `live_minor` goes to: the next one, or, when the cloud no longer
    offers it, the lowest offered minor above (AKS: "you can only skip multiple versions when
    upgrading from an unsupported version back to a supported version",
    learn.microsoft.com/azure/aks/upgrade-aks-cluster)."""
    major, number = minor_key(live_minor)
    newer = [m for m in offered.sorted_minors() if minor_key(m) > (major, number)]
    following = f"{major}.{number + 1}"
    return following if following in newer or not newer else newer[0]


def _offered_minor(setting: str, offered: Offered) -> Offered:
    if any(minor_key(m) == minor_key(setting) for m in offered.minors):
        return offered
    listed = ", ".join(offered.sorted_minors()) or "none"
    raise SettingsError([Problem(
        "kubernetes.version", setting,
        f"a minor {offered.where} creates today: {listed} (default {minor_of(offered.default)}; "
        f"remove the setting to take the default). Listed by `{offered.how_to_list}`. "
        "Nothing was created")])
