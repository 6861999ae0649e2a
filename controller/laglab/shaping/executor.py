"""The one way the controller runs a command, and the only place that enters a container's network
namespace (`nsenter --target PID --net`). Commands are argv lists, never shell strings.

`Executor(dry_run=True)` records the argv it would run and runs nothing: unit tests compare the
recorded lists against golden argv. A real executor keeps nothing of what it ran (the counters alone
run a few commands a second, for as long as the controller runs); what it keeps is one `tc -batch`
process per namespace that shaping changes (`Executor.tc`), so a live change is a line written to it,
not a process started (a process costs ~3 ms here and ~100 ms in User-mode Linux).
"""

from __future__ import annotations

import io
import os
import select
import subprocess
import threading
import time
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
    _batches: dict[int, TcBatch] = field(default_factory=dict, repr=False)
    _batches_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

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

    def tc(self, commands: list[list[str]], netns_pid: int, check: bool = True) -> None:
        """tc commands (argv lists starting with "tc") run in `netns_pid`'s namespace, in order, through
        the `tc -force -batch -` kept running there (started on first use, restarted if it died). With
        `check`, the first command that failed raises CommandError with tc's message; the others still ran."""
        for cmd in commands:
            if cmd[:1] != ["tc"] or not all(isinstance(a, str) and a and not any(c.isspace() for c in a) for a in cmd):
                raise ValueError(f"not a tc command of single words: {cmd!r}")
        full = self._enter(netns_pid, TcBatch.ARGV)  # the ownership check, on every call
        if self.dry_run:
            self.ran.extend(in_netns(netns_pid, cmd) for cmd in commands)
            return
        namespace = os.stat(f"/proc/{netns_pid}/ns/net").st_ino  # a recycled PID is another namespace
        with self._batches_lock:
            for pid in [p for p in self._batches if p != netns_pid and not os.path.exists(f"/proc/{p}")]:
                self._batches.pop(pid).close()  # its container is gone: let its namespace go too
            batch = self._batches.get(netns_pid)
            if batch is None or not batch.alive() or batch.namespace != namespace:
                if batch is not None:
                    batch.close()
                batch = self._batches[netns_pid] = TcBatch(full, namespace)
        failures = batch.run(commands, timeout=self.timeout)
        if check and failures:
            cmd, message = failures[0]
            raise CommandError(in_netns(netns_pid, cmd), 1, message)

    def close(self) -> None:
        """Ends the kept `tc -batch` processes (a stopping controller; each also ends on its stdin's EOF)."""
        with self._batches_lock:
            batches, self._batches = list(self._batches.values()), {}
        for batch in batches:
            batch.close()

    def spawn(
        self, argv: list[str], netns_pid: int, talks: bool = False, tells: bool = False
    ) -> subprocess.Popen | DryRunProcess:
        """Starts a long-running helper inside `netns_pid`'s network namespace, with a pipe on its stdin
        for live settings; `talks`: a pipe on its stdout too (a shaping worker says when it is ready);
        `tells`: a pipe on its stderr (tcpdump says there when it listens and what it captured)."""
        full = self._enter(netns_pid, argv)
        if self.dry_run:
            self.ran.append(full)
            return DryRunProcess()
        stdout = subprocess.PIPE if talks else subprocess.DEVNULL
        stderr = subprocess.PIPE if tells else None
        return subprocess.Popen(full, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr, text=True, bufsize=1)


class TcBatch:
    """One `tc -force -batch -` in a namespace. Each command is a line; after them, a sentinel line that
    fails on purpose: a subcommand tc does not know, refused before any netlink message (a missing
    device would not do: the kernel looks for a module of that name, a usermode helper each time). tc
    writes every failure to stderr, unbuffered and in order, as its message then `Command failed
    -:LINE`, so the sentinel's failure line means every command before it has been done, and the lines
    before it say which failed and why."""

    ARGV = ["tc", "-force", "-batch", "-"]
    SENTINEL = "qdisc laglab-sync"

    def __init__(self, argv: list[str], namespace: int = 0):
        self.namespace = namespace
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, bufsize=0
        )
        self.line = 0  # tc counts the lines it has read
        self.pending = b""
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, commands: list[list[str]], timeout: float) -> list[tuple[list[str], str]]:
        """Runs them; returns (command, tc's message) for each that failed."""
        with self.lock:
            first = self.line + 1
            text = "".join(" ".join(cmd[1:]) + "\n" for cmd in commands) + self.SENTINEL + "\n"
            self.line += len(commands) + 1
            try:
                self.proc.stdin.write(text.encode())
            except OSError as error:
                self.close()
                return [(commands[0], f"tc -batch has gone: {error}")] if commands else []
            failures, message, seen = [], [], first - 1
            deadline = time.monotonic() + timeout
            while True:
                line = self._readline(deadline)
                if line is None:  # tc exited or hung: the command after the last one it reported failed
                    self.close()
                    stopped = commands[min(seen - first + 1, len(commands) - 1)] if commands else ["tc"]
                    return [*failures, (stopped, " ".join(message) or f"tc -batch stopped (within {timeout:g}s)")]
                if line.startswith("Command failed -:"):
                    seen = int(line.rsplit(":", 1)[1])
                    if seen == self.line:
                        return failures
                    if first <= seen < self.line:
                        failures.append((commands[seen - first], " ".join(message)))
                    message = []
                else:
                    message.append(line)

    def _readline(self, deadline: float) -> str | None:
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stderr], [], [], left)[0]:
                return None
            chunk = os.read(self.proc.stderr.fileno(), 65536)
            if not chunk:
                return None
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode(errors="replace").strip()

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # tc ends on EOF
        except OSError:
            pass  # it had gone already (a broken pipe)
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


class DryRunProcess:
    """What `spawn` returns in dry-run mode: a process that runs forever and reads its stdin into memory."""

    pid = 0
    returncode = None

    def __init__(self):
        self.stdin = io.StringIO()
        self.stdout = io.StringIO("ready\n")
        self.stderr = io.StringIO("")

    def poll(self):
        return None

    def wait(self, timeout=None):
        return 0

    def kill(self):
        pass
