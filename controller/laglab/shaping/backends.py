"""The shaping backends by name (SHAPING_BACKEND), and the names their tests and callers use.
The protocol and what both share: backend.py; one module per backend: kernel.py, userspace.py."""

from __future__ import annotations

from laglab.config import ConfigError
from laglab.shaping.backend import DEV, UNSHAPED, Applied, Backend, htb_class, htb_class_args, htb_commands
from laglab.shaping.chaos_mesh import ChaosMeshBackend
from laglab.shaping.daemonset import DaemonSetBackend
from laglab.shaping.kernel import KernelBackend
from laglab.shaping.userspace import UserspaceBackend, apply_userspace_tc, receiver_rules, restore_input, worker_rules

BACKENDS: dict[str, type] = {
    "kernel": KernelBackend,
    "userspace": UserspaceBackend,
    "chaos-mesh": ChaosMeshBackend,
    "daemonset": DaemonSetBackend,
}


def netem_available(executor) -> bool:
    """Whether this kernel has sch_netem: try it on a throw-away dummy link in the controller's own namespace."""
    probe = "laglab-probe"
    executor.run(["ip", "link", "del", probe], check=False)
    if executor.run(["ip", "link", "add", probe, "type", "dummy"], check=False) is None:
        return False
    try:
        executor.run(["tc", "qdisc", "add", "dev", probe, "root", "netem", "delay", "1ms"])
        return True
    except Exception:
        return False
    finally:
        executor.run(["ip", "link", "del", probe], check=False)


def choose(setting: str, netem: bool | None, platform: str = "docker"):
    """auto: on Docker kernel netem where the kernel has it, the userspace backend elsewhere; on
    Kubernetes Chaos Mesh. A backend of the other platform is refused naming the variable."""
    if setting == "auto":
        name = "chaos-mesh" if platform == "kubernetes" else ("kernel" if netem else "userspace")
    else:
        name = setting
    if (name in ("chaos-mesh", "daemonset")) != (platform == "kubernetes"):
        raise ConfigError("SHAPING_BACKEND", f"{name} does not shape on the {platform} platform")
    return BACKENDS[name]()


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
    "choose",
    "htb_class",
    "htb_class_args",
    "htb_commands",
    "netem_available",
    "receiver_rules",
    "restore_input",
    "worker_rules",
]  # fmt: skip


def helper_pids(backend) -> list[int]:
    """The PIDs of a backend's helper processes (the userspace backend's workers; none for the others):
    their CPU is the lab's own load in a measured window."""
    workers = getattr(backend, "workers", {})
    return [proc.pid for _queue, proc in list(workers.values()) if proc is not None and proc.pid]
