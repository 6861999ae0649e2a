"""Packet captures of a link (#40.3): what crossed between two services, as each side saw it.

tcpdump runs in each side's network namespace through the executor (the controller's filesystem
stays, so the pcap is written straight into results/), on eth0, keeping only packets to or from the
other side. Both sides: with the userspace backend the packets are held on the bridge between them,
so the two files' times of one packet differ by the delay; with the kernel backend netem holds them on
the sender's egress before eth0, so both files show a packet at nearly one time, and the delay is
between the sender's application and its eth0 (ping writes its send time into the payload: that is in
the default snap length).

Bounded three ways: a duration (at most limits.CAPTURE_SECONDS; `timeout --signal=INT` ends tcpdump
even if the controller dies), a size per side (watched; the capture stops when a file reaches it), and
the snap length (96 bytes by default: the headers and the first bytes of payload, not the rows).
`shaping.csv` beside the pcaps says what the link held when the capture started and each change while
it ran (the epoch and seconds since the capture's start, which Wireshark shows as "Time since
beginning of capture"). `capture.json` has the rest: asked bounds, why it stopped, tcpdump's counts.
"""

from __future__ import annotations

import csv
import itertools
import json
import logging
import re
import signal
import subprocess
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from laglab import limits
from laglab.errors import Kind, LabError
from laglab.measurement.results import iso, utc_stamp
from laglab.platforms import LabContainer, Platform
from laglab.shaping.executor import Executor
from laglab.shaping.manager import resolve

log = logging.getLogger("laglab.measurement.captures")

SNAPLEN = 96  # Ethernet 14 + IP 20 + TCP 32 (with timestamps) + 30 of payload; ping's timestamp is in it
SNAPLEN_RANGE = (64, 65535)
MIN_SECONDS = 1.0
KEEP = 50  # finished captures this controller lists
COUNTS = re.compile(r"^(\d+) packets? (captured|received by filter|dropped by kernel)", re.M)


class CaptureError(LabError):
    pass


@dataclass
class Side:
    service: str
    file: Path
    proc: subprocess.Popen | None = None
    said: list[str] = field(default_factory=list)  # tcpdump's stderr lines
    listening: threading.Event = field(default_factory=threading.Event)  # it said "listening on"
    heard: threading.Event = field(default_factory=threading.Event)  # it said so, or it ended
    reader: threading.Thread | None = None

    def close(self) -> None:
        """Its pipes, once it has ended (the reader has its last words first)."""
        if self.reader is not None:
            self.reader.join(5)
        for pipe in (self.proc.stdin, self.proc.stderr) if self.proc is not None else ():
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass  # a broken pipe: it had gone

    def counts(self) -> dict[str, int]:
        found = {m.group(2): int(m.group(1)) for m in COUNTS.finditer("\n".join(self.said))}
        return {
            "captured": found.get("captured"),
            "received_by_filter": found.get("received by filter"),
            "dropped_by_kernel": found.get("dropped by kernel"),
        }

    def size(self) -> int:
        try:
            return self.file.stat().st_size
        except OSError:
            return 0


class Capture:
    """One capture of a link: started by Captures.start, ended by its duration, its size bound, stop()
    or an error; its files in `folder`."""

    def __init__(self, id: str, a: str, b: str, folder: Path, seconds: float, max_bytes: int, snaplen: int):
        self.id, self.a, self.b, self.folder = id, a, b, folder
        self.seconds, self.max_bytes, self.snaplen = seconds, max_bytes, snaplen
        self.sides = [Side(a, folder / f"{a}.pcap"), Side(b, folder / f"{b}.pcap")]
        self.started = time.time()
        self.ended: float | None = None
        self.stopped_by: str | None = None  # duration, size, asked, error
        self.error: str | None = None
        self.shaping_rows: list[dict] = []
        self._stop = threading.Event()
        self._done = threading.Event()
        self._unwatch = None

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def told(self, when: float, holds: dict[str, str]) -> None:
        """The link's shaping now (ShapingManager.links.watch): a row each way in shaping.csv."""
        for direction, words in holds.items():
            row = {"epoch": f"{when:.6f}", "time": iso(when), "since_start_s": f"{max(0.0, when - self.started):.6f}",
                   "direction": direction, "shaping": words}  # fmt: skip
            self.shaping_rows.append(row)
            with (self.folder / "shaping.csv").open("a", newline="") as out:
                writer = csv.DictWriter(out, fieldnames=list(row))
                if out.tell() == 0:
                    writer.writeheader()
                writer.writerow(row)

    def stop(self, why: str = "asked") -> None:
        if self.stopped_by is None:
            self.stopped_by = why
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def as_json(self) -> dict:
        elapsed = (self.ended or time.time()) - self.started
        return {
            "id": self.id,
            "link": [self.a, self.b],
            "status": "running" if self.ended is None else ("failed" if self.error else "done"),
            "started": iso(self.started),
            "ended": iso(self.ended) if self.ended else None,
            "seconds": self.seconds,
            "elapsed_seconds": round(min(elapsed, self.seconds + 60), 3),
            "max_bytes": self.max_bytes,
            "snaplen": self.snaplen,
            "stopped_by": self.stopped_by if self.ended is not None else None,
            "error": self.error,
            "folder": self.folder.as_posix(),
            "files": {s.service: {"file": s.file.name, "bytes": s.size(), **s.counts()} for s in self.sides},
            "shaping": self.shaping_rows[-20:],
        }

    def write_meta(self) -> None:
        (self.folder / "capture.json").write_text(json.dumps(self.as_json(), indent=2, sort_keys=True) + "\n")


def tcpdump_argv(peer_ip: str, seconds: float, snaplen: int, file: Path) -> list[str]:
    """tcpdump on eth0 for `seconds` at most (SIGINT, which tcpdump ends on cleanly, its file whole),
    only packets to or from the peer, handed over by the kernel as they come (--immediate-mode: else
    libpcap's ring gives them a block at a time, and the last second's packets were lost at a stop:
    110 of 120 pings on the lab) and written as they come (-U), by root (-Z root: the controller's
    results folder is root's), no promiscuous mode (-p): this namespace's own traffic."""
    return ["timeout", "--signal=INT", f"{seconds:.3f}".rstrip("0").rstrip("."), "tcpdump", "-i", "eth0", "-n", "-p", "--immediate-mode", "-U", "-Z", "root",
            "-s", str(snaplen), "-w", str(file), "host", peer_ip]  # fmt: skip


class Captures:
    """The captures of this controller: at most limits.CAPTURES running at once, one per link."""

    def __init__(self, platform: Platform, executor: Executor, shaping=None, root: Path | str = "results"):
        self.platform, self.executor, self.shaping = platform, executor, shaping
        self.root = Path(root)
        self.items: OrderedDict[str, Capture] = OrderedDict()
        self.lock = threading.Lock()
        self._ids = itertools.count(1)

    def start(self, a: str, b: str, seconds: float, max_bytes: int | None = None, snaplen: int = SNAPLEN,
              folder: Path | None = None) -> Capture:  # fmt: skip
        """Starts capturing the link a <-> b; returns once both sides listen. `folder`: where the files
        go (a run's own; default results/captures/<id>/)."""
        max_bytes = limits.CAPTURE_BYTES if max_bytes is None else max_bytes
        self._check(a, b, seconds, max_bytes, snaplen)
        ends = self._ends(a, b)
        with self.lock:
            running = [c for c in self.items.values() if c.running]
            if len(running) >= limits.CAPTURES:
                raise CaptureError(Kind.CONFLICT, f"capture: {len(running)} captures are running, at most "
                                   f"{limits.CAPTURES} (limit captures): wait for one or stop it")  # fmt: skip
            same = [c for c in running if {c.a, c.b} == {a, b}]
            if same:
                raise CaptureError(Kind.CONFLICT, f"link: capture {same[0].id} of {a}<->{b} is running; stop it first")
            id = f"{utc_stamp()}-{next(self._ids)}-{a}-{b}"[:120]
            folder = Path(folder) if folder is not None else self.root / "captures" / id
            folder.mkdir(parents=True, exist_ok=True)
            capture = self.items[id] = Capture(id, a, b, folder, seconds, max_bytes, snaplen)
            for gone in [k for k, c in self.items.items() if not c.running][:-KEEP] if len(self.items) > KEEP else []:
                self.items.pop(gone)
        try:
            self._spawn(capture, ends)
        except Exception as error:
            self._end(capture, "error", f"{type(error).__name__}: {error}")
            raise CaptureError(Kind.FAILED, f"capture: tcpdump did not start: {error}") from None
        if self.shaping is not None:
            capture._unwatch = self.shaping.links.watch(a, b, capture.told, time.time())
        threading.Thread(target=self._watch, args=(capture,), name=f"capture-{id}", daemon=True).start()
        return capture

    def _check(self, a: str, b: str, seconds: float, max_bytes: int, snaplen: int) -> None:
        if a == b:
            raise CaptureError(Kind.INVALID, f"link: {a} twice; a link is two services")
        if not MIN_SECONDS <= seconds <= limits.CAPTURE_SECONDS:
            raise CaptureError(Kind.INVALID, f"for: {seconds:g}s is not within {MIN_SECONDS:g}..{limits.CAPTURE_SECONDS} "
                               "seconds (tcpdump takes a moment to start; limit capture_seconds)")  # fmt: skip
        if not 1 <= max_bytes <= limits.CAPTURE_BYTES:
            raise CaptureError(Kind.INVALID, f"max_bytes: {max_bytes} is not within 1..{limits.CAPTURE_BYTES} "
                               "(limit capture_bytes, per side)")  # fmt: skip
        if not SNAPLEN_RANGE[0] <= snaplen <= SNAPLEN_RANGE[1]:
            raise CaptureError(Kind.INVALID, f"snaplen: {snaplen} is not within {SNAPLEN_RANGE[0]}..{SNAPLEN_RANGE[1]}")

    def _ends(self, a: str, b: str) -> list[LabContainer]:
        """The link's two containers: this lab's, shapeable (never the apparatus), running, entered."""
        lab = self.platform.list()
        out = []
        for service in (a, b):
            resolve(lab, service, "link")  # this lab's, never the apparatus, running (as shaping asks)
            container = lab[service]
            if not container.entered:
                raise CaptureError(Kind.INVALID, f"link: captures need the controller in the containers' network "
                                   f"namespaces, which it does not enter on {self.platform.name} (kubectl debug "
                                   "with tcpdump there)")  # fmt: skip
            if not container.reachable:
                raise CaptureError(Kind.CONFLICT, f"link: service {service!r} is not running")
            out.append(container)
        return out

    def _spawn(self, capture: Capture, ends: list[LabContainer]) -> None:
        for side, here, there in ((capture.sides[0], ends[0], ends[1]), (capture.sides[1], ends[1], ends[0])):
            argv = tcpdump_argv(there.ip, capture.seconds, capture.snaplen, side.file)
            side.proc = self.executor.spawn(argv, here.pid, tells=True)
            side.reader = threading.Thread(target=_read_stderr, args=(side,), daemon=True)
            side.reader.start()
        deadline = time.monotonic() + 10
        for side in capture.sides:
            side.heard.wait(max(0.0, deadline - time.monotonic()))
            if not side.listening.is_set():
                said = " ".join(side.said)[-300:] or "nothing"
                for each in capture.sides:
                    if each.proc is not None and each.proc.poll() is None:
                        each.proc.kill()
                        each.proc.wait(timeout=5)
                    if each.proc is not None:
                        each.close()
                raise RuntimeError(f"{side.service}: tcpdump was not listening within 10 s (it said: {said})")

    def _watch(self, capture: Capture) -> None:
        deadline = capture.started + capture.seconds
        while not capture._stop.wait(0.2):
            if all(s.proc.poll() is not None for s in capture.sides):
                capture.stopped_by = capture.stopped_by or ("duration" if time.time() >= deadline - 1 else "error")
                break
            if any(s.size() >= capture.max_bytes for s in capture.sides):
                capture.stop("size")
        error = None
        for side in capture.sides:
            if side.proc.poll() is None:
                side.proc.send_signal(signal.SIGINT)  # timeout passes it on; tcpdump writes its counts
        for side in capture.sides:
            try:
                side.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                side.proc.kill()
                side.proc.wait(timeout=5)
            side.close()
            if side.proc.returncode not in (0, 124, -signal.SIGINT, 130) and side.counts()["captured"] is None:
                error = f"{side.service}: tcpdump exit {side.proc.returncode}: {' '.join(side.said)[-300:]}"
        self._end(capture, capture.stopped_by or "duration", error)

    def _end(self, capture: Capture, why: str, error: str | None) -> None:
        if capture._unwatch is not None:
            capture._unwatch()
        capture.stopped_by = capture.stopped_by or why
        capture.error = error
        capture.ended = time.time()
        try:  # before it is done: whoever waited for it reads capture.json next
            capture.write_meta()
        except OSError as failure:
            log.error("capture %s: writing capture.json failed: %s", capture.id, failure)
        capture._done.set()

    def find(self, id: str) -> Capture:
        capture = self.items.get(id)
        if capture is None:
            raise CaptureError(Kind.NOT_FOUND, f"capture: no capture {id[:120]!r} in this controller")
        return capture

    def forget(self, id: str) -> None:
        """Off the list (an ended capture; its files stay)."""
        with self.lock:
            self.items.pop(id, None)

    def stop_all(self, timeout: float = 15.0) -> None:
        """A stopping controller: every capture ends now, its files whole."""
        for capture in list(self.items.values()):
            capture.stop("asked")
        for capture in list(self.items.values()):
            capture.wait(timeout)


def _read_stderr(side: Side) -> None:
    for line in side.proc.stderr:
        line = line.strip()
        if line:
            side.said.append(line[:300])
            del side.said[:-20]
            if line.startswith("tcpdump: listening on") or line.startswith("listening on"):
                side.listening.set()
                side.heard.set()
    side.heard.set()  # it ended: whoever waits for it to listen reads why
