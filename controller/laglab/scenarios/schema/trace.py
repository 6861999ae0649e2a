"""Network traces: a time series of shaping for one link, read once at validation into rows of
(offset seconds, PUT /api/shaping body), replayed by the timeline.

Two formats:
- CSV with a header. The first column is the time (`t` or `t_s` in seconds, `t_ms` in milliseconds);
  the others any of delay, rtt, jitter, loss, rate. A bare column name takes values with units as the
  API does ('40ms', '1%', '2mbit'); a unit suffix makes bare numbers (`delay_ms`, `rtt_ms`,
  `jitter_ms`, `loss_pct`, `rate_kbit`, `rate_mbit`). `delay` is each direction's one-way delay (RTT =
  2 x delay); `rtt` is split half each way, as a scenario's `link.rtt`. An empty cell leaves that
  impairment out of the row; a row with nothing set clears the link. Each row holds until the next.
- Mahimahi's delivery-opportunity traces (mm-link): one line per 1500-byte packet the link may
  deliver, the millisecond it may; the file repeats. Read as a rate per `bin` (1 s by default); a bin
  with no opportunity becomes tc's lowest rate, 8 kbit.
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

from laglab import limits
from laglab.shaping.params import ParamError, format_rate, parse_percent, parse_rate, parse_time

MTU_BITS = 1500 * 8
MIN_STEP = 0.1  # seconds between two rows: a change takes tens of ms to apply
MAX_ROWS = 100_000
_COLUMNS = {
    "delay": ("delay", ""),
    "delay_ms": ("delay", "ms"),
    "delay_us": ("delay", "us"),
    "rtt": ("rtt", ""),
    "rtt_ms": ("rtt", "ms"),
    "jitter": ("jitter", ""),
    "jitter_ms": ("jitter", "ms"),
    "loss": ("loss", ""),
    "loss_pct": ("loss", "%"),
    "rate": ("rate", ""),
    "rate_bit": ("rate", "bit"),
    "rate_kbit": ("rate", "kbit"),
    "rate_mbit": ("rate", "mbit"),
}
_TIME_COLUMNS = {"t": 1.0, "t_s": 1.0, "time": 1.0, "t_ms": 1e-3}


class TraceError(ValueError):
    pass


def read(path: Path, fmt: str | None = None, bin_seconds: float = 1.0) -> tuple[list[tuple[float, dict]], float]:
    """(rows, period): rows of (offset, shaping body); period = how long one pass lasts."""
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise TraceError(f"cannot read {path}: {error.strerror or error}") from None
    fmt = fmt or ("csv" if str(path).endswith(".csv") else "mahimahi")
    return parse_mahimahi(text, bin_seconds) if fmt == "mahimahi" else parse_csv(text)


def parse_csv(text: str) -> tuple[list[tuple[float, dict]], float]:
    reader = csv.reader(io.StringIO(text))
    header = [h.strip().lower() for h in next(reader, [])]
    if not header or header[0] not in _TIME_COLUMNS:
        raise TraceError(f"the first column must be the time ({', '.join(_TIME_COLUMNS)}), got {header[:1]}")
    unknown = [h for h in header[1:] if h not in _COLUMNS]
    if unknown:
        raise TraceError(f"unknown column {unknown[0]!r}; columns: {', '.join(_COLUMNS)}")
    if len(header) < 2:
        raise TraceError("no shaping column (delay, rtt, jitter, loss, rate)")
    scale = _TIME_COLUMNS[header[0]]
    rows: list[tuple[float, dict]] = []
    for line, cells in enumerate(reader, start=2):
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise TraceError(f"line {line}: {len(cells)} cells for {len(header)} columns")
        try:
            t = float(cells[0]) * scale
        except ValueError:
            raise TraceError(f"line {line}: {cells[0]!r} is not a number of {header[0]}") from None
        if rows and t < rows[-1][0] + MIN_STEP - 1e-9:
            raise TraceError(f"line {line}: t must grow by at least {MIN_STEP:g}s a row")
        if t < 0:
            raise TraceError(f"line {line}: t must not be negative")
        body = {}
        for name, cell in zip(header[1:], cells[1:], strict=True):
            if cell.strip():
                key, unit = _COLUMNS[name]
                body.update(_value(line, key, cell.strip() + unit))
        rows.append((t, body))
        if len(rows) > MAX_ROWS:
            raise TraceError(f"more than {MAX_ROWS} rows")
    if not rows:
        raise TraceError("no rows")
    step = rows[-1][0] - rows[-2][0] if len(rows) > 1 else 1.0
    return rows, rows[-1][0] + step


def _value(line: int, key: str, value: str) -> dict:
    """One cell as body fields (rtt becomes each direction's delay), checked as the API checks them."""
    try:
        if key in ("delay", "jitter"):
            return {key: f"{parse_time(key, value) * 1000:g}ms"}
        if key == "rtt":
            return {"delay": f"{parse_time('delay', value) * 1000 / 2:g}ms"}
        if key == "loss":
            parse_percent(key, value)
            return {key: value if value.endswith("%") else f"{value}%"}
        return {key: format_rate(parse_rate(key, value))}
    except ParamError as error:
        raise TraceError(f"line {line}: {error.message}") from None


def normalise(row: dict) -> dict:
    """An inline row's fields as a shaping body: `rtt` becomes each direction's delay (half of it)."""
    body = {k: v for k, v in row.items() if k != "rtt"}
    if row.get("rtt") is not None:
        if "delay" in row:
            raise TraceError("give delay (one way) or rtt, not both")
        body.update(_value(0, "rtt", str(row["rtt"])).items())
    return body


MIN_BIN = 0.1  # seconds: a Mahimahi trace read as a rate per bin changes the shaping once a bin


def parse_mahimahi(text: str, bin_seconds: float = 1.0) -> tuple[list[tuple[float, dict]], float]:
    stamps = []
    for line, raw in enumerate(text.splitlines(), start=1):
        raw = raw.strip()
        if not raw:
            continue
        if not re.fullmatch(r"\d+", raw):
            raise TraceError(f"line {line}: {raw[:20]!r} is not a millisecond count (Mahimahi format)")
        stamps.append(int(raw))
        if len(stamps) > 10_000_000:
            raise TraceError("more than 10,000,000 delivery opportunities")
    if not stamps:
        raise TraceError("no delivery opportunities")
    if stamps != sorted(stamps):
        raise TraceError("timestamps must not decrease")
    if not bin_seconds >= MIN_BIN:  # 0 divided by below; 1 us made 6*10^7 bins (#54)
        raise TraceError(
            f"bin: at least {MIN_BIN * 1000:g}ms (a shaping change {1 / MIN_BIN:g} times a second at most)"
        )
    bins = max(1, math.ceil(stamps[-1] / 1000 / bin_seconds - 1e-9))
    if bins > limits.TIMELINE_EVENTS:  # counted before any is made
        raise TraceError(f"{bins} bins of {bin_seconds:g} s: at most {limits.TIMELINE_EVENTS} (limit timeline_events)")
    counts = [0] * bins
    for stamp in stamps:
        counts[min(bins - 1, int(stamp / 1000 / bin_seconds))] += 1
    rows = [
        (i * bin_seconds, {"rate": format_rate(max(8e3, n * MTU_BITS / bin_seconds))}) for i, n in enumerate(counts)
    ]
    return rows, bins * bin_seconds
