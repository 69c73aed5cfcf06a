"""Where a file copied from the stack's bucket may land on this machine: inside its folder, never
above it.

Anything running in the trainer's pod can write the bucket (it holds the job's write identity),
so a key is hostile input to the laptop: `telemetry/tensorboard/../../../__main__.py` copied to
`target / key` would overwrite this checkout, which the next `pulumi up` runs with the
deployer's cloud credentials. Every command that copies from the store to this machine maps
keys to paths with `local_path` (tensorboard today; status and logs read into memory only).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

# A Windows drive ("C:") or a name Windows reads as a device path; refused on every system so
# that a bucket's listing means the same thing on every laptop.
_DRIVE = re.compile(r"^[A-Za-z]:")


class UnsafeKey(ValueError):
    """A bucket key that would land outside the target folder; the message names it."""


def local_path(target: Path, relative_key: str) -> Path:
    """`target / relative_key`, refused (UnsafeKey) when the key is absolute, holds `..`, `.`,
    an empty segment, a backslash, a NUL or a drive letter, or when the path resolves (through
    a symbolic link already in `target`) outside `target`."""
    reason = ""
    if not relative_key:
        reason = "empty"
    elif "\\" in relative_key or "\x00" in relative_key:
        reason = "holds a backslash or NUL"
    elif relative_key.startswith("/") or _DRIVE.match(relative_key):
        reason = "is absolute"
    else:
        parts = relative_key.split("/")
        if any(p in ("", ".", "..") for p in parts):
            reason = "holds '..', '.' or an empty segment"
    if reason:
        raise UnsafeKey(f"key {relative_key!r} {reason}: not copied")
    path = target.joinpath(*PurePosixPath(relative_key).parts)
    root = target.resolve()
    resolved = path.resolve()
    if resolved != root and root not in resolved.parents:
        raise UnsafeKey(f"key {relative_key!r} resolves to {resolved}, outside {root} (a "
                        "symbolic link on the way): not copied")
    return path
