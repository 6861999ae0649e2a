"""A load that replays a write profile (#41.2): what `laglab profile` read from a customer's binlog,
written again on the lab's server with its shape (per second its transactions, their sizes from its
quantiles, its large ones as they were, its recorded parallelism) and none of its data.

sysbench runs it (replay.lua, put into loadgen beside the plan this module writes); the controller
first makes the synthetic tables and measures what a transaction and a row cost in this server's
binlog (`calibrate`), so that a transaction of N bytes in the profile is one of N bytes in the replay
whatever the server's version, flavour and settings. After a run, `replayed` reads the bytes the server
wrote for it back with the server's own mysqlbinlog, to be shown beside the profile's figures.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pymysql
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from laglab.errors import Kind, LabError
from laglab.load.binlog_profile import LARGE_BYTES, Reader, excluded, period
from laglab.measurement.stats import percentile
from laglab.replicators.db import Endpoint, connect, quote_identifier
from laglab.shaping.matrix import integral

SCRIPT = Path(__file__).with_name("replay.lua")
DIRECTORY = "/run/laglab/replay"  # in loadgen: the script and its plan
TABLES = 16  # synthetic tables at most (the profile's most written ones)
THREADS = 64  # the recorded parallelism is followed up to this many connections
MAX_SECONDS = 7 * 86400  # one profile's span
MAX_TRANSACTION = 1 << 30  # bytes
SPEED = (0.01, 100.0)

# JSON has one number type (3.0 is the integer 3); strict otherwise: false is no count, "5" no number.
Whole = Annotated[int, BeforeValidator(integral)]
Bytes = Annotated[Whole, Field(ge=0, le=MAX_TRANSACTION)]


class ReplayError(LabError):
    """A profile that cannot be replayed, or a server that could not be prepared for it."""


class _Part(BaseModel):
    # extra keys ignored: a profile holds more figures than a replay reads (they are the report's)
    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)


class Second(_Part):
    t: Whole = Field(ge=0, le=MAX_SECONDS)
    transactions: Whole = Field(ge=0, le=1_000_000)


class LargeTransaction(_Part):
    t: float = Field(ge=0, le=MAX_SECONDS, description="its commit, in seconds from the profile's first")
    bytes: Bytes
    rows: Whole = Field(0, ge=0, le=100_000_000)


class Large(_Part):
    threshold_bytes: Bytes = LARGE_BYTES
    transactions: list[LargeTransaction] = Field(default_factory=list, max_length=10_000)


class TableWidth(_Part):
    name: str = Field(max_length=300)
    rows: Whole = Field(ge=0)
    row_bytes: float | None = Field(None, ge=0, le=MAX_TRANSACTION)


class Parallelism(_Part):
    max: Whole = Field(ge=1)


class WriteProfile(_Part):
    """What a replay reads of `laglab profile`'s output (its other figures are kept for the report)."""

    version: Whole = Field(1, ge=1, le=1)
    span_seconds: Whole = Field(ge=1, le=MAX_SECONDS)
    per_second: list[Second] = Field(max_length=MAX_SECONDS)
    size_quantiles: list[Bytes] = Field(min_length=101, max_length=101, description="transaction bytes at 0..100 %")
    large: Large = Field(default_factory=Large)
    tables: list[TableWidth] = Field(default_factory=list, max_length=100_000)
    parallelism: Parallelism | None = None

    def threads(self) -> int:
        """The connections that replay it: the most transactions the server recorded as able to run at
        once (1 when it recorded none), up to THREADS."""
        return max(1, min(THREADS, self.parallelism.max if self.parallelism else 1))

    def widths(self) -> list[tuple[int, float | None]]:
        """(rows written, row width in the binlog) of the most written tables, up to TABLES."""
        written = sorted((t for t in self.tables if t.rows), key=lambda t: -t.rows)[:TABLES]
        return [(t.rows, t.row_bytes) for t in written] or [(1, None)]


def read_profile(path: Path) -> WriteProfile:
    try:
        return parse_profile(json.loads(Path(path).read_text()), str(path))
    except OSError as error:
        raise ReplayError(Kind.NOT_FOUND, f"profile: {path}: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise ReplayError(Kind.INVALID, f"profile: {path} is not JSON ({error.msg} at line {error.lineno})") from None


def parse_profile(data: object, name: str = "profile") -> WriteProfile:
    try:
        return WriteProfile.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "profile"
        raise ReplayError(
            Kind.INVALID,
            f"profile: {name}: {where}: {first['msg']} (a profile is what `laglab profile BINLOG` writes)",
        ) from None


def table_name(index: int) -> str:
    return f"laglab_replay_{index + 1}"


@dataclass(frozen=True)
class Costs:
    """Bytes in this server's binlog: a one-row transaction with an empty pad (`overhead` + `rowcost`),
    and what each further row costs beyond its pad (`rowcost`)."""

    overhead: int
    rowcost: int


def plan_text(profile: WriteProfile, speed: float, costs: Costs) -> str:
    """The plan replay.lua reads: figures, tables, the quantiles, then one line per second with writes."""
    large: dict[int, list[LargeTransaction]] = {}
    for item in profile.large.transactions:
        large.setdefault(int(item.t), []).append(item)
    lines = [
        "laglab-replay 1",
        f"span {profile.span_seconds}",
        f"speed {speed:g}",
        f"overhead {costs.overhead}",
        f"rowcost {costs.rowcost}",
    ]
    for index, (rows, width) in enumerate(profile.widths()):
        lines.append(f"table {table_name(index)} {rows} {width if width else 0:g}")
    lines.append("quantiles " + " ".join(str(q) for q in profile.size_quantiles))
    for second in sorted(profile.per_second, key=lambda s: s.t):
        big = large.pop(second.t, [])
        small = max(0, second.transactions - len(big))
        if small or big:
            lines.append(" ".join([f"second {second.t} {small}", *map(_large, big)]))
    for t, big in sorted(large.items()):  # listed large ones in a second per_second missed
        lines.append(" ".join([f"second {t} 0", *map(_large, big)]))
    return "\n".join(lines) + "\n"


def _large(item: LargeTransaction) -> str:
    """bytes:rows:offset, the offset its commit's fraction of its second (the batch keeps its moment)."""
    return f"{item.bytes}:{item.rows}:{item.t - int(item.t):.3f}"


def binlog_end(cursor) -> tuple[str, int] | None:
    """(file, size) of the server's last binlog file: where the next transaction will be written."""
    cursor.execute("SHOW BINARY LOGS")
    rows = cursor.fetchall()
    if not rows:
        return None
    name, size = list(rows[-1].values())[:2]  # Log_name, File_size (then Encrypted, from MySQL 8.0.14)
    return str(name), int(size)


def start_position(endpoint: Endpoint) -> tuple[str, int] | None:
    with connect(endpoint, timeout=5.0) as conn, conn.cursor() as cursor:
        return binlog_end(cursor)


def calibrate(endpoint: Endpoint, database: str, tables: int, tries: int = 5) -> Costs:
    """Makes the synthetic tables (empty) and measures the binlog bytes of a one-row transaction with no
    pad and of one with ten rows of 500 bytes each (5 KB: one rows event, under its 8 KiB split). Other writers (pt-heartbeat, every second) only add
    bytes between two readings, never remove them: the least of a few tries is the transaction's own."""
    table = table_name(0)
    try:
        with connect(endpoint, timeout=5.0, read_timeout=60.0) as conn, conn.cursor() as cursor:
            cursor.execute(f"USE {quote_identifier(database)}")
            for index in range(tables):
                cursor.execute(f"DROP TABLE IF EXISTS {table_name(index)}")
                cursor.execute(
                    f"CREATE TABLE {table_name(index)} (id BIGINT AUTO_INCREMENT PRIMARY KEY, pad MEDIUMBLOB NOT NULL)"
                )
            if binlog_end(cursor) is None:
                raise ReplayError(Kind.UNAVAILABLE, f"{endpoint.name} writes no binlog: a replay needs log_bin on")

            def cost(statement: str) -> int:
                least = None
                for _ in range(tries):
                    before = binlog_end(cursor)
                    cursor.execute(statement)
                    after = binlog_end(cursor)
                    if before and after and before[0] == after[0]:
                        least = after[1] - before[1] if least is None else min(least, after[1] - before[1])
                if least is None:
                    raise ReplayError(Kind.UNAVAILABLE, f"{endpoint.name}: its binlog rotated while measured")
                return least

            one = cost(f"INSERT INTO {table} (pad) VALUES ('')")
            ten = cost(f"INSERT INTO {table} (pad) VALUES " + ",".join(["(REPEAT('a', 500))"] * 10))
            cursor.execute(f"TRUNCATE TABLE {table}")
    except pymysql.MySQLError as error:
        raise ReplayError(Kind.UNAVAILABLE, f"{endpoint.name}: preparing the replay: {error}") from None
    rowcost = max(1, round((ten - one - 5_000) / 9))
    return Costs(overhead=max(0, one - rowcost), rowcost=rowcost)


# --- the figures a profile and a replay are compared by ---
def figures(profile: dict) -> dict:
    """The figures of a profile (`laglab profile`'s output) that a replay should come back with."""
    size = profile.get("transaction_bytes") or {}
    large = profile.get("large") or {}
    return {
        "transactions": profile.get("transactions"),
        "span_seconds": profile.get("span_seconds"),
        "bytes_per_second": profile.get("bytes_per_second"),
        "transaction_bytes_p50": size.get("p50"),
        "transaction_bytes_p99": size.get("p99"),
        "transaction_bytes_max": size.get("max"),
        "large": large.get("count"),
        "large_period_seconds": large.get("period_seconds"),
        "parallelism_max": (profile.get("parallelism") or {}).get("max"),
    }


LAB_TABLES = ("laglab_meta.*",)  # the lab's own writes (the lag recorder's heartbeat): not the replay's


def measured(reader: Reader, seconds: float) -> dict:
    """The same figures from the replay's own binlog (read by the server's mysqlbinlog), over the
    window it ran, the lab's own heartbeat left out: bytes per second over `seconds`, not over the first
    to the last transaction."""
    written = [t for t in reader.transactions if not (t.tables and all(excluded(n, LAB_TABLES) for n in t.tables))]
    sizes = [t.bytes for t in written]
    if not sizes:
        return {"transactions": 0}
    first = min(t.epoch for t in written)
    large = [t.epoch - first for t in written if t.bytes >= LARGE_BYTES]
    return {
        "transactions": len(sizes),
        "span_seconds": round(seconds, 1),
        "bytes_per_second": round(sum(sizes) / max(seconds, 1e-9), 1),
        "transaction_bytes_p50": percentile(sizes, 50),
        "transaction_bytes_p99": percentile(sizes, 99),
        "transaction_bytes_max": max(sizes),
        "large": sum(1 for s in sizes if s >= LARGE_BYTES),
        "large_period_seconds": period(large),
    }


def decoder(is_mariadb: bool, folder: str, files: list[str], start: int, stop: int) -> list[str]:
    """The server's own decoder over the files a window wrote, from `start` in the first to `stop` in the
    last: headers only (no row is decoded, sizes and times are in the headers)."""
    tool = "mariadb-binlog" if is_mariadb else "mysqlbinlog"
    return [
        tool, "--base64-output=decode-rows", f"--start-position={start}", f"--stop-position={stop}",
        *(f"{folder}/{name}" for name in files),
    ]  # fmt: skip


def binlog_files(cursor, since: str) -> list[str]:
    cursor.execute("SHOW BINARY LOGS")
    names = [str(next(iter(row.values()))) for row in cursor.fetchall()]
    return names[names.index(since) :] if since in names else names[-1:]


def replayed(platform, service: str, endpoint: Endpoint, start: tuple[str, int], seconds: float) -> dict:
    """What the server wrote since `start` (binlog file, position), read back by its own decoder in its
    container: the replay's figures, as independent of replay.lua as the binlog is."""
    with connect(endpoint, timeout=5.0) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT @@log_bin_basename AS basename, @@version AS version")
        found = cursor.fetchone()
        basename, version = found["basename"], found["version"]
        end = binlog_end(cursor)
        files = binlog_files(cursor, start[0])
    if end is None:
        return {"error": "the server wrote no binlog"}
    argv = decoder("mariadb" in str(version).lower(), str(Path(basename).parent), files, start[1], end[1])
    reader = Reader(service)
    execution = platform.exec_stream(service, argv)
    buffer = ""
    for chunk in execution.chunks():
        buffer += chunk.decode(errors="replace")
        *lines, buffer = buffer.split("\n")
        for line in lines:
            reader.line(line)
    if buffer:
        reader.line(buffer)
    reader.close()
    return measured(reader, seconds)


def speed_words(speed: float) -> str:
    """' at 2x' for a replay's speed; '' at 1x."""
    return "" if math.isclose(speed, 1.0) else f" at {speed:g}x"
