"""The shaping backends by name (SHAPING_BACKEND), and the names their tests and callers use.
The protocol and what both share: backend.py; one module per backend: kernel.py, userspace.py."""

from __future__ import annotations

from .backend import DEV, UNSHAPED, Applied, Backend, htb_class, htb_class_args, htb_commands
from .chaos_mesh import ChaosMeshBackend
from .daemonset import DaemonSetBackend
from .kernel import KernelBackend
from .userspace import UserspaceBackend, apply_userspace_tc, receiver_rules, restore_input, worker_rules

BACKENDS: dict[str, type] = {
    "kernel": KernelBackend,
    "userspace": UserspaceBackend,
    "chaos-mesh": ChaosMeshBackend,
    "daemonset": DaemonSetBackend,
}

__all__ = [
    "BACKENDS",
    "DEV",
    "UNSHAPED",
    "Applied",
    "Backend",
    "ChaosMeshBackend",
    "DaemonSetBackend",
    "KernelBackend",
    "UserspaceBackend",
    "apply_userspace_tc",
    "htb_class",
    "htb_class_args",
    "htb_commands",
    "receiver_rules",
    "restore_input",
    "worker_rules",
]  # fmt: skip
