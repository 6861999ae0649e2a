"""The hosts' TCP buffers (net.ipv4.tcp_wmem and tcp_rmem: min, default, max bytes), per network
namespace: read for environment.json and every point, and set for a scenario's `tcp_buffers:`.

They bound a stream at distance: a sender keeps at most its send buffer in flight per round trip, so
one stream at 100 ms RTT with Linux's 4 MiB wmem max carries at most ~335 Mbit/s whatever the link
(measured here: 8 iperf3 streams at 100 ms, 2.18 Gbit/s with the defaults, 10.1 with 64 MiB).

A new network namespace starts with the host's values. Docker mounts /proc/sys read-only in every
container, the controller's included; the controller writes them from a mount namespace of its own
(unshare) where /proc/sys is remounted read-write, entered into the container's network namespace,
so the write lands in that namespace alone. For the whole lab, .env's LAB_TCP_WMEM / LAB_TCP_RMEM
set them at container start instead (compose `sysctls`, make up).
"""

from __future__ import annotations

import re

KEYS = {"wmem": "net.ipv4.tcp_wmem", "rmem": "net.ipv4.tcp_rmem"}
_SIZE = re.compile(r"^(\d+)\s*(|k|kib|m|mib|g|gib)$", re.I)
_UNITS = {"": 1, "k": 1024, "kib": 1024, "m": 2**20, "mib": 2**20, "g": 2**30, "gib": 2**30}
MAX_BYTES = 2**31 - 1  # the kernel keeps them as int


class BufferError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def size(field: str, text: str) -> int:
    m = _SIZE.match(text.strip())
    if not m:
        raise BufferError(field, f"{text!r} is not a size in bytes (like 4194304, 4MiB or 64M)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def parse(field: str, value: object) -> tuple[int, int, int]:
    """'4096 16384 4194304' or '4096 16384 64MiB' (min default max, as sysctl writes them) -> bytes."""
    if not isinstance(value, str):
        raise BufferError(field, f"expected 'min default max' like '4096 16384 64MiB', got {value!r}")
    parts = value.split()
    if len(parts) != 3:
        raise BufferError(field, f"{value!r} is not three sizes 'min default max' (e.g. '4096 16384 64MiB')")
    low, default, high = (size(field, p) for p in parts)
    if not 0 < low <= default <= high <= MAX_BYTES:
        raise BufferError(field, f"{value!r}: need 0 < min <= default <= max <= {MAX_BYTES}")
    return low, default, high


def text(triple: tuple[int, int, int]) -> str:
    return " ".join(str(v) for v in triple)


def read_argv() -> list[str]:
    return ["cat", "/proc/sys/net/ipv4/tcp_wmem", "/proc/sys/net/ipv4/tcp_rmem"]


def parse_read(out: str) -> dict[str, str]:
    lines = [" ".join(line.split()) for line in out.splitlines() if line.strip()]
    return {"wmem": lines[0], "rmem": lines[1]}


def write_argv(values: dict[str, tuple[int, int, int]]) -> list[str]:
    """The command that sets them, run in the container's network namespace: a mount namespace of its
    own where /proc/sys is writable; the values are sysctl's arguments, never part of the script."""
    settings = [f"{KEYS[name]}={text(triple)}" for name, triple in values.items()]
    script = 'mount -o remount,rw,bind /proc/sys /proc/sys && exec sysctl -q -w "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *settings]


def read(executor, pid: int) -> dict[str, str]:
    """{"wmem": "4096 16384 4194304", "rmem": ...} of the network namespace of `pid`."""
    return parse_read(executor.run(read_argv(), netns_pid=pid))


def write(executor, pid: int, values: dict[str, tuple[int, int, int]]) -> dict[str, str]:
    """Sets them in `pid`'s network namespace and returns what it then reads there."""
    executor.run(write_argv(values), netns_pid=pid)
    return read(executor, pid)


def max_bytes(found: dict[str, str], name: str = "wmem") -> int | None:
    try:
        return int(found[name].split()[2])
    except (KeyError, IndexError, ValueError):
        return None
