"""The platforms the lab runs on, by name. A second platform is one module here and one line in
`_MODULES`; the Docker one is the only one today (Kubernetes: #23)."""

from __future__ import annotations

import importlib

from .base import Bridge, LabContainer, Platform, PlatformError, ServiceState

__all__ = ["DEFAULT", "NAMES", "Bridge", "LabContainer", "Platform", "PlatformError", "ServiceState", "create"]
_MODULES = {"docker": ("docker", "DockerPlatform")}  # name -> (module here, class): imported when chosen
NAMES = tuple(_MODULES)
DEFAULT = "docker"


def create(name: str, project: str) -> Platform:
    if name not in _MODULES:
        raise PlatformError(f"platform: {name!r} is not one of {', '.join(NAMES)}")
    module, cls = _MODULES[name]
    return getattr(importlib.import_module(f".{module}", __name__), cls)(project)
