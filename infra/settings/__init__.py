"""Stack settings: one typed, validated object read once from the stack file."""

from infra.settings.errors import Problem, SettingsError
from infra.settings.loader import load_settings, settings_from_mapping, with_kubernetes_minor
from infra.settings.model import Settings

__all__ = ["Problem", "Settings", "SettingsError", "load_settings", "settings_from_mapping",
           "with_kubernetes_minor"]
