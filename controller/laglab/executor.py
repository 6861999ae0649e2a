"""The one way the controller runs a command, and the only place that enters a container's network
namespace (`nsenter --target PID --net`). Commands are argv lists, never shell strings.

`Executor(dry_run=True)` records the argv it would run and runs nothing: unit tests compare the
recorded lists against golden argv. A real executor keeps nothing (the counters alone run a few
commands a second, for as long as the controller runs).
"""

from __future__ import annotations

import io
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field


class NamespaceGone(OSError):
    """The PID no longer belongs to the container it was resolved for: nothing is run."""


class CommandError(RuntimeError):
    def __init__(self, argv: list[str], returncode: int, stderr: str):
        super().__init__(f"{' '.join(argv)}: exit {returncode}: {stderr.strip()[:500]}")
        self.argv, self.returncode, self.stderr = argv, returncode, stderr


def in_netns(pid: int, argv: list[str]) -> list[str]:
    """argv run inside the network namespace of process `pid` (the controller's filesystem stays)."""
    if not isinstance(pid, int) or pid <= 1:
        raise ValueError(f"not a container process id: {pid!r}")
    return ["nsenter", f"--target={pid}", "--net", "--", *argv]


@dataclass
class Executor:
    dry_run: bool = False
    timeout: float = 30.0
    ran: list[list[str]] = field(default_factory=list)
    # pid -> whether it still is a lab container's process (Containers.owns); checked before entering
    owns: Callable[[int], bool] | None = None

    def _enter(self, pid: int, argv: list[str]) -> list[str]:
        full = in_netns(pid, argv)
        if self.owns is not None and not self.owns(pid):
            raise NamespaceGone(f"process {pid} is no longer a container of this lab; not entering it")
        return full

    def run(
        self,
        argv: list[str],
        netns_pid: int | None = None,
        check: bool = True,
        timeout: float | None = None,
        stdin: str | None = None,
    ) -> str:
        """Runs argv (inside `netns_pid`'s network namespace if given), `stdin` fed to it; returns stdout."""
        full = self._enter(netns_pid, argv) if netns_pid is not None else list(argv)
        if not all(isinstance(a, str) for a in full):
            raise TypeError(f"argv must be strings: {full!r}")
        if self.dry_run:
            self.ran.append(full)
            return ""
        done = subprocess.run(
            full, input=stdin, capture_output=True, text=True, timeout=timeout or self.timeout, check=False
        )
        if check and done.returncode != 0:
            raise CommandError(full, done.returncode, done.stderr)
        return done.stdout

    def spawn(self, argv: list[str], netns_pid: int, talks: bool = False) -> subprocess.Popen | DryRunProcess:
        """Starts a long-running helper inside `netns_pid`'s network namespace, with a pipe on its stdin
        for live settings; `talks`: a pipe on its stdout too (a shaping worker says when it is ready)."""
        full = self._enter(netns_pid, argv)
        if self.dry_run:
            self.ran.append(full)
            return DryRunProcess()
        stdout = subprocess.PIPE if talks else subprocess.DEVNULL
        return subprocess.Popen(full, stdin=subprocess.PIPE, stdout=stdout, text=True, bufsize=1)


class DryRunProcess:
    """What `spawn` returns in dry-run mode: a process that runs forever and reads its stdin into memory."""

    pid = 0
    returncode = None

    def __init__(self):
        self.stdin = io.StringIO()
        self.stdout = io.StringIO("ready\n")

    def poll(self):
        return None

    def wait(self, timeout=None):
        return 0

    def kill(self):
        pass
