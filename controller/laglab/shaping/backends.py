"""The shaping backends by name (SHAPING_BACKEND), and the names their tests and callers use.
The protocol and what both share: backend.py; one module per backend: kernel.py, userspace.py."""

from __future__ import annotations

from .backend import CHAIN, DEV, UNSHAPED, Applied, Backend, htb_class, htb_class_args, htb_commands
from .kernel import KernelBackend
from .userspace import UserspaceBackend, apply_userspace_tc, iptables_restore_input, worker_rules

BACKENDS: dict[str, type] = {"kernel": KernelBackend, "userspace": UserspaceBackend}

__all__ = [
    "BACKENDS", "CHAIN", "DEV", "UNSHAPED", "Applied", "Backend", "KernelBackend", "UserspaceBackend",
    "apply_userspace_tc", "htb_class", "htb_class_args", "htb_commands", "iptables_restore_input", "worker_rules",
]  # fmt: skip
