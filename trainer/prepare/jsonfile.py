"""One way to write the preparation's small JSON files (markers, layout.json, the verdict):
whole or not at all, so a reader never sees half a file and a run killed mid-write leaves the
old one."""

from __future__ import annotations

import json
import os
from typing import Any, Optional


def write_json(path: str, body: Any, indent: Optional[int] = None) -> None:
    with open(path + ".tmp", "w") as fh:
        json.dump(body, fh, indent=indent)
    os.replace(path + ".tmp", path)
