"""What a controller that starts finds left by one that died (SIGKILL, the OOM killer, a host reboot)
and puts right before it serves: the record of it, for /api/health and `laglab status`.

The parts keep their own state on disk (shaping.json, faults.json, run.json in the state folder) and
each restores its own (ShapingManager.start, FaultManager.recover, runs.recover_orphan); this module only
holds what they report and the one rule for a state file that cannot be read: set aside, never a crash.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from laglab.measurement.results import iso

log = logging.getLogger("laglab.state.recovery")


@dataclass
class Restart:
    """What this start restored, undid or set aside (empty lists: the last stop was clean)."""

    at: float = field(default_factory=time.time)
    faults: list[str] = field(default_factory=list)
    run: str | None = None
    shaping: list[str] = field(default_factory=list)
    set_aside: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, part: str, text: str) -> None:
        with self._lock:
            getattr(self, part).append(text)
        log.warning("at start: %s: %s", part, text)

    def as_json(self) -> dict:
        return {
            "at": iso(self.at),
            "faults": list(self.faults),
            "run": self.run,
            "shaping": list(self.shaping),
            "set_aside": list(self.set_aside),
        }


def read_state(path: Path, restart: Restart | None, default):
    """A state file's JSON; a missing one is `default`; one that cannot be read is set aside and counts
    as `default`."""
    path = Path(path)
    if not path.exists():
        return default
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        set_aside(path, restart, error)
        return default


def set_aside(path: Path, restart: Restart | None, error: Exception) -> None:
    """Renamed `<name>.unreadable-<epoch>` (kept for a person to look at), and said."""
    aside = path.with_name(f"{path.name}.unreadable-{int(time.time())}")
    try:
        path.replace(aside)
    except OSError:
        aside = path
    text = f"{path.name} could not be read ({type(error).__name__}: {str(error)[:120]}); kept as {aside.name}"
    if restart is not None:
        restart.add("set_aside", text)
    else:
        log.error("%s", text)


def write_state(path: Path, data) -> None:
    """Written whole or not at all (a crash mid-write leaves the previous file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)
