"""`make check-tables`: warn when a dated table of this program was last read against its
sources more than six months ago. Not part of `make test` (a test must not fail because the
calendar moved); meant for a scheduled job. Always exits 0: it warns, a person rechecks.

The tables and their recorded dates:
- infra/addon_versions.py CHECKED_ON: add-on versions per Kubernetes minor; also lists the rows
  whose range was not read from a source (`verified=False`).
- infra/kubernetes_versions.py CHECKED_ON (or, until it records one, AKS_CALENDAR_DATE): the
  clouds' Kubernetes calendars, advice only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import date
from types import ModuleType

from infra import addon_versions, kubernetes_versions

MAX_AGE_MONTHS = 6


@dataclass(frozen=True)
class DatedTable:
    path: str
    checked_on: date | None  # None: the module records no date


def _months_before(day: date, months: int) -> date:
    """The same day `months` earlier (the month's last day where it is shorter)."""
    year, month = divmod(day.year * 12 + day.month - 1 - months, 12)
    month += 1
    for last in (day.day, 30, 29, 28):
        try:
            return date(year, month, min(day.day, last))
        except ValueError:
            continue
    raise AssertionError("unreachable")


def _recorded(module: ModuleType, *names: str) -> date | None:
    for name in names:
        value = getattr(module, name, None)
        if isinstance(value, date):
            return value
    return None


def tables() -> list[DatedTable]:
    return [
        DatedTable("infra/addon_versions.py", _recorded(addon_versions, "CHECKED_ON")),
        DatedTable("infra/kubernetes_versions.py",
                   _recorded(kubernetes_versions, "CHECKED_ON", "AKS_CALENDAR_DATE")),
    ]


def warnings(today: date) -> list[str]:
    """One line per table older than MAX_AGE_MONTHS (or undated), plus unverified add-on rows."""
    limit = _months_before(today, MAX_AGE_MONTHS)
    lines = []
    for table in tables():
        if table.checked_on is None:
            lines.append(f"{table.path}: records no date it was last checked; add one")
        elif table.checked_on < limit:
            lines.append(f"{table.path}: last checked {table.checked_on.isoformat()}, more than "
                         f"{MAX_AGE_MONTHS} months before {today.isoformat()}; reread its "
                         "sources and update the rows and the date")
    for addon, rows in addon_versions.ADDON_VERSIONS.items():
        for row in rows:
            if not row.verified:
                lines.append(f"infra/addon_versions.py: {addon} {row.version} ({row.range}) was "
                             f"not read from its source: {row.source}")
    return lines


def main() -> int:
    found = warnings(date.today())
    for line in found:
        print(f"warning: {line}", file=sys.stderr)
    if not found:
        print("dated tables: all checked within the last "
              f"{MAX_AGE_MONTHS} months")
    return 0


if __name__ == "__main__":
    sys.exit(main())
