"""A run's folder under results/ and the CSV series written into it as samples are taken."""

from __future__ import annotations

import csv
import json
import logging
import platform
import threading
import time
from pathlib import Path


def utc_stamp(epoch: float | None = None) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if epoch is None else epoch))


def iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int((epoch % 1) * 1e6):06d}Z"


class Run:
    """One run folder: results/<UTC start>-<name>/ with run.json and CSV series."""

    def __init__(self, root: Path, name: str, meta: dict | None = None):
        self.started = time.time()
        Path(root).mkdir(parents=True, exist_ok=True)
        self.path = Path(root) / f"{utc_stamp(self.started)}-{name}"
        suffix = 1
        while True:  # mkdir itself decides: two controllers sharing results/ may start a run in one second
            try:
                self.path.mkdir()
                break
            except FileExistsError:
                suffix += 1
                self.path = Path(root) / f"{utc_stamp(self.started)}-{name}-{suffix}"
        self.meta = {
            "name": name,
            "started": iso(self.started),
            "host": platform.node(),
            "kernel": platform.release(),
            **(meta or {}),
        }
        self.write_json("run.json", self.meta)

    def write_json(self, filename: str, data: dict) -> None:
        tmp = self.path / f".{filename}.tmp"
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.path / filename)

    def series(self, filename: str, columns: list[str]) -> Series:
        return Series(self.path / filename, columns)


class Series:
    """A CSV file that gets one flushed row per sample: a crash loses at most the sample being taken."""

    def __init__(self, path: Path, columns: list[str]):
        self.path = path
        self.columns = columns
        self._lock = threading.Lock()
        self._file = path.open("a", newline="", buffering=1)
        self._writer = csv.DictWriter(self._file, fieldnames=columns, extrasaction="ignore")
        if self._file.tell() == 0:
            self._writer.writeheader()
            self._file.flush()

    def append(self, row: dict) -> None:
        with self._lock:
            self._writer.writerow({k: "" if v is None else v for k, v in row.items()})
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


class Fanout:
    """Hands every sample a recorder takes to its subscribers (a scenario run streams its own files
    from them), so nobody has to copy samples out of a bounded in-memory buffer afterwards."""

    def __init__(self, name: str):
        self.name = name
        self._subscribers: list = []
        self._lock = threading.Lock()

    def subscribe(self, fn) -> None:
        with self._lock:
            self._subscribers.append(fn)

    def unsubscribe(self, fn) -> None:
        with self._lock:
            if fn in self._subscribers:
                self._subscribers.remove(fn)

    def publish(self, item) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for fn in subscribers:
            try:
                fn(item)
            except Exception:  # a subscriber's failure must not stop the recorder
                logging.getLogger("laglab").exception("%s subscriber failed", self.name)
