"""A write profile read from a binlog (#41.1): what the customer's server wrote, in figures that keep its
shape and none of its data. Input is the text of the real `mysqlbinlog -vv --base64-output=decode-rows`
(or MariaDB's `mariadb-binlog`, same words); the events' header lines and the decoded rows' markers are
read, row values never kept (a value's text is skipped, only its column number counted).

What one transaction is, as the servers write it (the fixtures in tests/unit/fixtures/binlog are
their own output):
- MySQL 5.7+: a `GTID` (or `Anonymous_GTID`) event opens it, with `last_committed` and
  `sequence_number` (the LOGICAL_CLOCK dependency a parallel applier follows) and, from 8.0.2,
  `transaction_length` (its bytes) and `immediate_commit_timestamp` (microseconds);
- MariaDB: `GTID D-S-N trans` (or `ddl`), and its `cid=` when the server group-committed it;
- it ends with an `Xid` event or a `COMMIT` query, or is one DDL query.

Sizes come from the positions (`# at` to the last event's `end_log_pos`) where no transaction_length
says it. Errors come from mysqlbinlog's own words on stderr (`ERROR: ...`): a file that is not a binlog,
one damaged or truncated (with the offset it names), an encrypted one.
"""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from laglab.errors import Kind, LabError
from laglab.measurement.stats import percentile

DDL = ("CREATE ", "ALTER ", "DROP ", "RENAME ", "TRUNCATE ", "GRANT ", "REVOKE ")
LARGE_BYTES = 1 << 20  # a transaction this large or larger counts as large (a batch, not OLTP)
LARGE_LISTED = 10_000  # large transactions listed one by one (time, bytes, rows): a replay writes these

AT = re.compile(r"^# at (\d+)$")
HEADER = re.compile(
    r"^#(\d{6})\s+(\d{1,2}):(\d\d):(\d\d) server id (\d+)\s+end_log_pos (\d+)(?:\s+CRC32 0x[0-9a-f]+)?\s+(\S[^\t]*?)(?:\t(.*))?$"
)
START = re.compile(r"server v (\S+)")
MYSQL_GTID = re.compile(r"last_committed=(\d+)\s+sequence_number=(\d+)")
LENGTH = re.compile(r"transaction_length=(\d+)")
COMMIT_US = re.compile(r"immediate_commit_timestamp=(\d+)")
MARIADB_GTID = re.compile(r"^GTID (\d+-\d+-\d+)(?: cid=(\d+))?(?: (trans|ddl))?")
TABLE_MAP = re.compile(r"^Table_map: `((?:[^`]|``)*)`\.`((?:[^`]|``)*)` mapped to number (\d+)")
ROWS_EVENT = re.compile(r"^(Write|Update|Delete)_rows(?:_v1|_compressed(?:_v1)?)?: table id (\d+)")
ROW = re.compile(r"^### (INSERT INTO|UPDATE|DELETE FROM) `((?:[^`]|``)*)`\.`((?:[^`]|``)*)`")
COLUMN = re.compile(r"^###   @(\d+)=")
ERROR = re.compile(r"^ERROR: (.*)$")
OFFSET = re.compile(r"offset (\d+)")


class BinlogError(LabError):
    """A file the profile cannot read: its name and the offset where it stopped, in the message."""


@dataclass
class Transaction:
    start: int  # its first event's position in the file
    end: int = 0  # the end_log_pos of its last event
    length: int | None = None  # transaction_length, when the server wrote it
    epoch: float = 0.0  # commit time: immediate_commit_timestamp, else the events' second
    rows: int = 0
    statements: int = 0  # row events (a statement's rows) or queries
    events: int = 0
    tables: set[str] = field(default_factory=set)
    last_committed: int | None = None
    sequence_number: int | None = None
    group: str | None = None  # MariaDB's commit id (cid)
    ddl: bool = False

    @property
    def bytes(self) -> int:
        return self.length if self.length is not None else max(0, self.end - self.start)


@dataclass
class TableShape:
    columns: int = 0
    rows: int = 0
    row_event_bytes: int = 0
    kinds: Counter = field(default_factory=Counter)


class Reader:
    """Reads one file's mysqlbinlog text, line by line: transactions, tables, the server's version."""

    def __init__(self, name: str):
        self.name = name
        self.server: str | None = None
        self.transactions: list[Transaction] = []
        self.tables: dict[str, TableShape] = defaultdict(TableShape)
        self.table_ids: dict[str, str] = {}
        self.row_format = self.statement_format = False
        self.errors: list[str] = []
        self.at = 0
        self.current: Transaction | None = None
        self._event: str | None = None
        self._rows_event: tuple[str, int] | None = None  # (table, start) of the rows event being read
        self._event_start = 0
        self._row_table: str | None = None

    def feed(self, lines: Iterable[str]) -> Reader:
        for line in lines:
            self.line(line.rstrip("\n"))
        self.close()
        return self

    def line(self, line: str) -> None:
        if line.startswith("###"):
            self._row(line)
            return
        if match := AT.match(line):
            self.at = int(match.group(1))
            if self._rows_event is not None:  # a rows event ends where the next one starts (MariaDB
                table, start = self._rows_event  # writes end_log_pos 0 inside a transaction)
                self.tables[table].row_event_bytes += max(0, self.at - start)
                self._rows_event = None
            return
        if match := HEADER.match(line):
            self._header(match)
            return
        if match := ERROR.match(line):
            self.errors.append(match.group(1))
            return
        current = self.current
        if current is not None and self._event == "Query":
            words = line.strip().upper()
            if words.startswith("BEGIN"):
                return
            if words.startswith("COMMIT"):
                return  # the event that ends it was its header (Query)
            if words and not words.startswith(("SET ", "SET@", "/*!", "USE ", "#")):
                current.statements += 1
                if words.startswith(DDL):
                    current.ddl = True
                else:
                    self.statement_format = True  # a data change written as its statement
                self._event = "Query-counted"  # one statement per Query event

    def _header(self, match: re.Match) -> None:
        day, hour, minute, second = match.group(1), *map(int, match.group(2, 3, 4))
        epoch = datetime.strptime(day, "%y%m%d").replace(hour=hour, minute=minute, second=second, tzinfo=UTC)
        end, kind, rest = int(match.group(6)), match.group(7).strip(), (match.group(8) or "")
        whole = f"{kind}\t{rest}"
        self._event, self._event_start = kind.split(":")[0].split(" ")[0], self.at
        if kind.startswith("Start") or kind.startswith("Format_desc"):
            found = START.search(whole)
            self.server = self.server or (found.group(1) if found else None)
            return
        if kind.startswith(("GTID", "Anonymous_GTID")) and not kind.startswith("GTID_list"):
            self._close_transaction()
            transaction = Transaction(start=self.at, end=end, epoch=epoch.timestamp())
            if found := MYSQL_GTID.search(whole):
                transaction.last_committed, transaction.sequence_number = int(found.group(1)), int(found.group(2))
            if found := LENGTH.search(whole):
                transaction.length = int(found.group(1))
            if found := COMMIT_US.search(whole):
                transaction.epoch = int(found.group(1)) / 1e6
            if found := MARIADB_GTID.match(kind):
                transaction.group, transaction.ddl = found.group(2), found.group(3) == "ddl"
            transaction.events = 1
            self.current = transaction
            return
        current = self.current
        if current is None:
            return  # Previous-GTIDs, Rotate, Binlog_checkpoint, Gtid_list, Stop: not a transaction's
        current.end, current.events = max(current.end, end), current.events + 1
        if current.length is None or not current.epoch:
            current.epoch = max(current.epoch, epoch.timestamp())
        if found := TABLE_MAP.match(kind):
            table = f"{found.group(1)}.{found.group(2)}"
            self.table_ids[found.group(3)] = table
            current.tables.add(table)
        elif found := ROWS_EVENT.match(kind):
            self.row_format = True
            current.statements += 1 if "STMT_END_F" in whole else 0
            table = self.table_ids.get(found.group(2))
            if table is not None:
                self._rows_event = (table, self.at)
        elif kind.startswith("Xid") or "Xid = " in whole:
            if kind.startswith("Query"):  # a DDL's Query event carries the Xid in MySQL 8
                current.ddl = True
                current.statements += 1
            self._close_transaction()
        elif kind.startswith("Query") and current.ddl:
            current.statements += 1
            self._close_transaction()

    def _row(self, line: str) -> None:
        current = self.current
        if current is None:
            return
        if found := ROW.match(line):
            table = f"{found.group(2)}.{found.group(3)}"
            kind = {"INSERT INTO": "insert", "UPDATE": "update", "DELETE FROM": "delete"}[found.group(1)]
            current.rows += 1
            self.tables[table].rows += 1
            self.tables[table].kinds[kind] += 1
            self._row_table = table
        elif (found := COLUMN.match(line)) and self._row_table is not None:
            shape = self.tables[self._row_table]
            shape.columns = max(shape.columns, int(found.group(1)))

    def _close_transaction(self) -> None:
        if self.current is not None:
            self.transactions.append(self.current)
            self.current = None

    def close(self) -> None:
        if self.current is not None and self.current.events > 1:
            self._close_transaction()  # the file ended inside it (a binlog still being written)
        self.current = None


def check(name: str, reader: Reader, returncode: int = 0) -> None:
    """mysqlbinlog's own words on what it could not read, as a BinlogError naming the file and offset."""
    said = " ".join(reader.errors)
    if not reader.errors and returncode == 0:
        return
    offset = OFFSET.search(said)
    at = int(offset.group(1)) if offset else 0
    if "magic number" in said or "not a binary log" in said.lower():
        why = "not a binary log file: its first bytes (offset 0) are not a binlog's magic number"
    elif "encrypted" in said:
        why = ("an encrypted binary log (offset 0): mysqlbinlog reads one only through the server that holds "
               "its key (--read-from-remote-server); profile it there, or a decrypted copy")  # fmt: skip
    elif "truncated" in said or "Could not read entry" in said or "read error" in said:
        why = f"damaged or truncated at offset {at}: the events from there on cannot be read"
    else:
        why = f"the decoder stopped (offset {at}): {said or f'exit {returncode}'}"
    raise BinlogError(Kind.INVALID, f"file: {name}: {why} (mysqlbinlog said: {said[:300] or '-'})")


def stats(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None, "mean": None}
    return {
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values),
        "mean": round(sum(values) / len(values), 3),
    }


def histogram(values: list[int]) -> list[list[int]]:
    """[[bucket low (a power of two), count], ...]: the size distribution a replay draws from."""
    counts = Counter(1 << max(0, int(math.log2(v))) if v > 0 else 0 for v in values)
    return [[low, counts[low]] for low in sorted(counts)]


def quantiles(values: list[int]) -> list[int]:
    """The values at 0, 1, ... 100 % (101 figures, nearest rank): the size distribution a replay draws
    from, fine enough that its p50 and p99 come back (a power-of-two histogram would blur them 2x)."""
    if not values:
        return []
    ordered = sorted(values)
    return [ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] for q in range(101)]


def period(times: list[float]) -> float | None:
    """The median time between bursts of large transactions, from their commit times (s): one burst is
    the large ones less than a second apart. None with fewer than two bursts."""
    ordered = sorted(times)
    starts = [b for a, b in itertools.pairwise(ordered) if b - a > 1.0]
    starts = ordered[:1] + starts
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    return round(statistics.median(gaps), 2) if gaps else None


def parallelism(transactions: list[Transaction]) -> dict | None:
    """How many transactions a LOGICAL_CLOCK applier could run at once, as the server recorded: a
    transaction may start once every one up to its last_committed has committed, so it runs beside
    the earlier ones whose sequence_number is above its last_committed."""
    clocked = [(t.last_committed, t.sequence_number) for t in transactions if t.sequence_number is not None]
    if not clocked:
        groups = Counter(t.group for t in transactions if t.group)
        if not groups:
            return None
        sizes = list(groups.values())
        return {"source": "MariaDB commit ids (cid)", "mean": round(sum(sizes) / len(sizes), 3), "max": max(sizes)}
    beside = []
    for index, (last, _seq) in enumerate(clocked):
        beside.append(1 + sum(1 for _, seq in clocked[max(0, index - 256) : index] if seq > last))
    return {"source": "last_committed/sequence_number", "mean": round(sum(beside) / len(beside), 3), "max": max(beside)}


def anonymous(name: str) -> str:
    """A schema or table name replaced by a stable token (the same name gives the same token)."""
    return "t_" + hashlib.sha256(name.encode()).hexdigest()[:10]


def excluded(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def profile(readers: list[Reader], anonymize: bool = False, exclude: Iterable[str] = ()) -> dict:
    """The profile of one or more files' transactions (in their order). No row value is in it.
    `exclude`: tables (`schema.table`, globs) whose transactions are left out when they wrote nothing
    else: a monitor's heartbeat (pt-heartbeat's, the lab's own laglab_meta) is not the application."""
    exclude = tuple(exclude)
    transactions = [
        t for r in readers for t in r.transactions
        if not (exclude and t.tables and all(excluded(name, exclude) for name in t.tables))
    ]  # fmt: skip
    if not transactions:
        names = ", ".join(r.name for r in readers)
        raise BinlogError(Kind.INVALID, f"file: {names}: no transaction in it (only a binlog's header events)")
    first = min(t.epoch for t in transactions)
    per_second: dict[int, Counter] = defaultdict(Counter)
    for t in transactions:
        second = int(t.epoch - first)
        per_second[second].update(transactions=1, bytes=t.bytes, events=t.events, rows=t.rows)
    span = max(per_second) + 1
    sizes = [t.bytes for t in transactions]
    large = [t for t in transactions if t.bytes >= LARGE_BYTES]
    at_seconds = sorted({int(t.epoch - first) for t in large})
    tables: dict[str, TableShape] = defaultdict(TableShape)
    for reader in readers:
        for name, shape in reader.tables.items():
            if excluded(name, exclude):
                continue
            merged = tables[name]
            merged.columns = max(merged.columns, shape.columns)
            merged.rows += shape.rows
            merged.row_event_bytes += shape.row_event_bytes
            merged.kinds.update(shape.kinds)
    shown = (lambda n: ".".join(anonymous(p) for p in n.split(".", 1))) if anonymize else (lambda n: n)
    rows_fmt = any(r.row_format for r in readers)
    stmt_fmt = any(r.statement_format for r in readers)
    return {
        "version": 1,
        "files": [r.name for r in readers],
        "servers": sorted({r.server for r in readers if r.server}),
        "format": "mixed" if rows_fmt and stmt_fmt else "row" if rows_fmt else "statement",
        "anonymized": anonymize,
        "excluded": list(exclude),
        "span_seconds": span,
        "transactions": len(transactions),
        "bytes": sum(sizes),
        "events": sum(t.events for t in transactions),
        "rows": sum(t.rows for t in transactions),
        "bytes_per_second": round(sum(sizes) / span, 1),
        "per_second": [
            {"t": s, **{k: per_second[s][k] for k in ("transactions", "bytes", "events", "rows")}} for s in range(span)
        ],
        "transaction_bytes": stats(sizes),
        "transaction_rows": stats([t.rows for t in transactions]),
        "transaction_statements": stats([t.statements for t in transactions]),
        "size_histogram": histogram(sizes),
        "size_quantiles": quantiles([t.bytes for t in transactions if t.bytes < LARGE_BYTES]),
        "large": {
            "threshold_bytes": LARGE_BYTES,
            "count": len(large),
            "fraction": round(len(large) / len(transactions), 6),
            "at_seconds": at_seconds,
            "period_seconds": period([t.epoch - first for t in large]),
            "transactions": [  # t: seconds from the first commit, to the millisecond
                {"t": round(t.epoch - first, 3), "bytes": t.bytes, "rows": t.rows} for t in large[:LARGE_LISTED]
            ],
        },
        "ddl": sum(1 for t in transactions if t.ddl),
        "tables": [
            {
                "name": shown(name),
                "columns": s.columns,
                "rows": s.rows,
                "kinds": dict(s.kinds),
                "row_bytes": round(s.row_event_bytes / s.rows, 1) if s.rows else None,
            }
            for name, s in sorted(tables.items())
        ],
        "parallelism": parallelism(transactions),
    }


# --- reading files: the decoder each flavour's binlogs need, on this host or in the lab's image ---
DECODE = ["-vv", "--base64-output=decode-rows"]
MAGIC, ENCRYPTED_MAGIC = b"\xfebin", b"\xfdbin"
VERSION_AT, VERSION_BYTES = 4 + 19 + 2, 50  # magic, the Format_description event's header, binlog version


def written_by(path) -> str:
    """'mariadb' or 'mysql', from the server version in the file's Format_description event (a MySQL
    binlog's mysqlbinlog cannot read MariaDB's GTID and annotate events, nor the other way round)."""
    with open(path, "rb") as f:
        head = f.read(VERSION_AT + VERSION_BYTES)
    if head[:4] == MAGIC and b"MariaDB" in head[VERSION_AT:]:
        return "mariadb"
    return "mysql"


def decoder_argv(path, flavor: str, images: dict[str, str], which, start: int | None = None) -> list[str]:
    """The decoder on this host (`mysqlbinlog`, `mariadb-binlog`) when it has one, else the one in the
    lab's image (`images`: flavour -> image), run with no network and the file's folder read-only.
    `start`: the first event's position (the decoder's --start-position), for a part of the file."""
    from pathlib import Path

    tool = "mariadb-binlog" if flavor == "mariadb" else "mysqlbinlog"
    path = Path(path).resolve()
    decode = [*DECODE, *([f"--start-position={start}"] if start is not None else [])]
    if which(tool):
        return [tool, *decode, str(path)]
    return ["docker", "run", "--rm", "--network", "none", "-v", f"{path.parent}:/binlogs:ro", images[flavor],
            tool, *decode, f"/binlogs/{path.name}"]  # fmt: skip


def read_file(path, images: dict[str, str], which=None, start: int | None = None) -> Reader:
    """One binlog file read by its flavour's decoder, its output streamed into a Reader (a binlog of
    gigabytes is never held whole); BinlogError with the decoder's words when it could not read it."""
    import shutil
    import subprocess
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        raise BinlogError(Kind.NOT_FOUND, f"file: {path}: no such file")
    flavor = written_by(path)
    argv = decoder_argv(path, flavor, images, which or shutil.which, start)
    reader = Reader(path.name)
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace") as proc:
        reader.feed(proc.stdout)
        said = proc.stderr.read()
    reader.errors += [line[7:] if line.startswith("ERROR: ") else line for line in said.splitlines() if line.strip()]
    reader.errors = [e for e in reader.errors if not e.startswith(("WARNING", "mysqlbinlog: [Warning]"))]
    check(str(path), reader, proc.returncode)
    return reader
