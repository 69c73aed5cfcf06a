"""The clouds this program deploys to: the one name every table of the house is keyed by."""

from __future__ import annotations

from enum import Enum


class Cloud(str, Enum):
    """The clouds this program deploys to."""

    AWS = "aws"
    AZURE = "azure"
    GCP = "gcp"
