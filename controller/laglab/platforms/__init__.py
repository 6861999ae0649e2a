"""The platforms the lab runs on, by name (LAB_PLATFORM). A platform is one module here and one line
in `_MODULES`: docker.py (compose's containers), kubernetes.py (the pods of the lab's namespace)."""

from __future__ import annotations

import importlib
import os

from laglab.platforms.base import Bridge, LabContainer, Platform, PlatformError, ServiceState, Unsupported

__all__ = [
    "DEFAULT",
    "NAMES",
    "Bridge",
    "LabContainer",
    "Platform",
    "PlatformError",
    "ServiceState",
    "Unsupported",
    "choose",
    "create",
]
_MODULES = {
    "docker": ("docker", "DockerPlatform"),
    "kubernetes": ("kubernetes", "KubernetesPlatform"),
}  # name -> (module here, class): imported when chosen
NAMES = tuple(_MODULES)
DEFAULT = "docker"


def create(name: str, project: str, environ=None) -> Platform:
    """The platform `name` for this lab (compose project or namespace), configured from `environ`."""
    if name not in _MODULES:
        raise PlatformError(f"platform: {name!r} is not one of {', '.join(NAMES)}")
    module, cls = _MODULES[name]
    made = getattr(importlib.import_module(f".{module}", __name__), cls)
    return made.create(project, os.environ if environ is None else environ)


def choose(setting: str, environ) -> str:
    """auto: Kubernetes when the controller runs in a pod with a service account (or is pointed at
    an API server), Docker elsewhere."""
    if setting != "auto":
        return setting
    from laglab.platforms.kube_api import in_cluster

    return "kubernetes" if in_cluster(environ) else "docker"
