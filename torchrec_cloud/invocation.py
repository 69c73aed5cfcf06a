"""The commands a message prints, as the user can paste them from where they are.

`torchrec-cloud` is a console script of this project (pyproject.toml), which every make target
installs into .venv (`pip install --no-deps -e .`): `.venv/bin/torchrec-cloud`. It is on the
shell's path only inside an activated venv, so a message that printed a bare `torchrec-cloud
list` would fail with "command not found" after `make status`. Here: the bare name when the
shell finds this very script, else the script's path, else this Python with `-m torchrec_cloud`;
paths inside the working folder relative to it (`.venv/bin/...`), others absolute.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SCRIPT = "torchrec-cloud"


def typed(path: Path | str, command: bool = False) -> str:
    """A path as a user types it here: relative to the working folder when inside it (a
    command there as ./name, which the shell would otherwise look up on the PATH)."""
    path = Path(os.path.abspath(path))  # keeps the venv's own names (no symlink resolution)
    try:
        relative = str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
    return f"./{relative}" if command and "/" not in relative else relative


def _python() -> Path:
    return Path(os.path.abspath(sys.executable))


def cli(rest: str) -> str:
    """`<how to run torchrec-cloud here> <rest>`, e.g. cli("list --stack aws")."""
    script = _python().parent / SCRIPT
    found = shutil.which(SCRIPT)
    if script.exists() and found and Path(found).resolve() == script.resolve():
        prefix = SCRIPT
    elif script.exists():
        prefix = typed(script, command=True)
    else:
        prefix = f"{typed(_python(), command=True)} -m torchrec_cloud"
    return f"{prefix} {rest}".strip()


def as_run_here(text: str) -> str:
    """A message written with the bare `torchrec-cloud <verb>` (the settings' rules, which
    `pulumi up` prints too) with each such command as it runs here."""
    prefix = cli("")
    return text if prefix == SCRIPT else text.replace(f"`{SCRIPT} ", f"`{prefix} ")


def pip_install(rest: str) -> str:
    """`<this Python> -m pip install <rest>`: the install goes where the command runs."""
    return f"{typed(_python(), command=True)} -m pip install {rest}"


def requirements(name: str) -> str:
    """`-r <the project's requirements file>`, its path as typed from here."""
    return f"-r {typed(PROJECT_ROOT / name)}"


def pins(*names: str, file: str = "requirements.txt") -> str:
    """The pinned `name==version` of each package, as the project's requirements file pins it
    (the one place a version is written)."""
    found: dict[str, str] = {}
    for line in (PROJECT_ROOT / file).read_text(encoding="utf-8").splitlines():
        requirement = line.split("#", 1)[0].strip()
        name, sep, _ = requirement.partition("==")
        if sep:
            found[name.strip().lower()] = requirement
    return " ".join(found[name] for name in names)


def make(target: str) -> str:
    """`make <target>`, with `-C <project>` when run from another folder."""
    here = Path.cwd().resolve() == PROJECT_ROOT
    return f"make {target}" if here else f"make -C {typed(PROJECT_ROOT)} {target}"
