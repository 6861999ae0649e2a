"""The userspace shaping worker: holds packets queued by iptables NFQUEUE, then accepts or drops them.

One worker per receiving container, started by the controller (through the executor) in the namespace
that holds the lab's bridge, bound to that receiver's own queue (a number derived from the project and
the service). Packets reach it from the raw table's PREROUTING chain on the bridge (userspace.py),
matched on source and destination before conntrack and before the receiver's namespace, so every tool
in the receiver sees the delay. Each source has its own delay, jitter (uniform, normal, pareto,
paretonormal), loss or Gilbert-Elliott model, correlation, reorder, duplicate and corrupt, read as JSON
lines on stdin (`{"10.1.0.2": {"delay": 0.1, ...}, "*": {...}}`) and changed in place without dropping
a packet; a source whose values did not change keeps its state (the Gilbert-Elliott chain, the
correlated draws). Held packets from one source leave in the order they came (jitter never reorders;
TCP on a reordering link measures the reordering, not the latency); `reorder` is the share sent at
once, ahead of them, as netem's. After a change, as netem, a new packet gets the new delay at once and
may overtake those held at the old one.

Pure Python over a raw netlink socket (nfnetlink_queue): one non-blocking loop, select() with a
timeout to the next due packet, verdicts for all due packets sent in one datagram.
Run: python -m laglab.shaping.nfqueue --queue N [--rules JSON]
"""

from __future__ import annotations

import argparse
import errno
import heapq
import json
import os
import random
import select
import socket
import statistics
import struct
import sys
import time

from laglab.shaping.impairment import Impairment

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_PACKET = 2
NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_GSO = 1, 4
NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_PAYLOAD = 1, 2, 10
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NF_DROP, NF_ACCEPT = 0, 1
SOL_NETLINK, NETLINK_NO_ENOBUFS = 270, 5
SO_RCVBUFFORCE = 33


def nlattr(kind: int, data: bytes) -> bytes:
    length = 4 + len(data)
    return struct.pack("=HH", length, kind) + data + b"\0" * ((4 - length % 4) % 4)


def nlmsg(msg: int, queue: int, attrs: bytes, flags: int = NLM_F_REQUEST, seq: int = 0) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, seq, 0) + body


def verdict(queue: int, packet_id: int, decision: int, payload: bytes | None = None) -> bytes:
    """Accept or drop a packet; with `payload`, the packet goes on as these bytes (a corrupted copy)."""
    attrs = nlattr(NFQA_VERDICT_HDR, struct.pack("!II", decision, packet_id))
    return nlmsg(NFQNL_MSG_VERDICT, queue, attrs + (nlattr(NFQA_PAYLOAD, payload) if payload is not None else b""))


def copy_mode_messages(queue: int, whole: bool) -> list[bytes]:
    """Header-only copies with GSO super-packets (cheap, fast), or whole packets with GSO off: the kernel
    then segments packets and completes their checksums before queueing them, so a flipped bit fails the
    receiver's check, as netem's corrupt does, and a duplicate is a real packet."""
    flags = NFQA_CFG_F_FAIL_OPEN | (0 if whole else NFQA_CFG_F_GSO)
    params = nlattr(NFQA_CFG_PARAMS, struct.pack("!IBxxx", 0xFFFF if whole else 20, NFQNL_COPY_PACKET))
    mask = nlattr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO))
    return [
        nlmsg(NFQNL_MSG_CONFIG, queue, params, NLM_F_REQUEST | NLM_F_ACK, 2),
        nlmsg(
            NFQNL_MSG_CONFIG,
            queue,
            mask + nlattr(NFQA_CFG_FLAGS, struct.pack("!I", flags)),
            NLM_F_REQUEST | NLM_F_ACK,
            4,
        ),
    ]


def config_messages(queue: int, maxlen: int) -> list[bytes]:
    return [
        nlmsg(
            NFQNL_MSG_CONFIG,
            queue,
            nlattr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, socket.AF_INET)),
            NLM_F_REQUEST | NLM_F_ACK,
            1,
        ),
        nlmsg(
            NFQNL_MSG_CONFIG,
            queue,
            nlattr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", maxlen)),
            NLM_F_REQUEST | NLM_F_ACK,
            3,
        ),
        # FAIL_OPEN: a full queue accepts, never drops. Header-only copies until a rule needs more.
        *copy_mode_messages(queue, whole=False),
    ]


GONE = (errno.ENOENT,)  # a verdict for a packet the kernel no longer queues (see Worker.receive)


def parse_packets(data: bytes, tolerate: tuple[int, ...] = ()):
    """Yields (packet_id, source address, payload) for each queued packet in a netlink datagram (the
    payload is the IPv4 header only, or the whole packet when the queue copies whole packets). An error
    message raises, unless its code is in `tolerate`."""
    offset = 0
    while offset + 16 <= len(data):
        length, kind, _flags, _seq, _pid = struct.unpack_from("=IHHII", data, offset)
        if length < 16:
            break
        if kind == NLMSG_ERROR:
            code = -struct.unpack_from("=i", data, offset + 16)[0]
            if code and code not in tolerate:
                raise OSError(code, f"nfnetlink_queue: {os.strerror(code)}")
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            packet_id, source, payload = None, None, b""
            pos = offset + 20  # nlmsghdr + nfgenmsg
            end = offset + length
            while pos + 4 <= end:
                alen, akind = struct.unpack_from("=HH", data, pos)
                if alen < 4:
                    break
                akind &= 0x7FFF
                if akind == NFQA_PACKET_HDR:
                    packet_id = struct.unpack_from("!I", data, pos + 4)[0]
                elif akind == NFQA_PAYLOAD and alen >= 4 + 16:
                    source = socket.inet_ntoa(data[pos + 16 : pos + 20])
                    payload = data[pos + 4 : pos + alen]
                pos += (alen + 3) & ~3
            if packet_id is not None:
                yield packet_id, source, payload
        offset += (length + 3) & ~3


_STANDARD = statistics.NormalDist()


def _normal(u: float) -> float:
    return _STANDARD.inv_cdf(min(max(u, 1e-9), 1 - 1e-9))


def _pareto(u: float) -> float:
    """Pareto with alpha 3 (iproute2's pareto table), in standard deviations from its mean."""
    x = (1.0 - min(u, 1 - 1e-9)) ** (-1 / 3)
    return (x - 1.5) / 0.75**0.5


# A draw u in [0, 1) -> offset in units of the jitter, cut at 4 sigma as netem's tables are.
DISTRIBUTIONS = {
    "uniform": lambda u: 2.0 * u - 1.0,
    "normal": _normal,
    "pareto": _pareto,
    # iproute2 builds this table as a quarter normal and three quarters pareto.
    "paretonormal": lambda u: 0.25 * _normal(u) + 0.75 * _pareto(u),
}


class Rule:
    """One source's impairments. With `correlation` c, successive draws lean on each other, separately
    for jitter, loss and reorder: a Gaussian AR(1) (z = c * z_prev + sqrt(1 - c^2) * N(0, 1)) mapped
    back to a uniform draw, so the asked loss ratio, reorder share and jitter spread hold whatever c
    is. (netem's own `(1 - c) * random + c * last` squeezes the draws towards the middle: a correlated
    20 % loss drops far fewer than 20 %.)"""

    __slots__ = (
        "bad",
        "correlation",
        "corrupt",
        "counter",
        "delay",
        "distribution",
        "duplicate",
        "gap",
        "gemodel",
        "jitter",
        "last",
        "loss",
        "reorder",
        "rng",
        "seed",
        "spec",
    )  # fmt: skip

    def __init__(self, impairment: Impairment, seed: int | None = None):
        self.spec, self.seed = impairment, seed
        # A seeded link draws from its own generator: the same packets lost, in the same order, in every
        # run with that seed, whatever the other links do. Unseeded: the worker's shared one.
        self.rng = None if seed is None else random.Random(seed)
        s = impairment
        self.delay, self.jitter, self.loss = s.delay, s.jitter, s.loss
        self.distribution = s.distribution or "uniform"
        self.correlation, self.reorder, self.gemodel = s.correlation, s.reorder, s.gemodel  # p, r, 1-h, 1-k
        self.duplicate, self.corrupt, self.gap = s.duplicate, s.corrupt, s.gap
        self.bad = False  # the Gilbert-Elliott chain's state
        self.counter = 0  # packets delayed since the last one reordered (reorder's gap)
        self.last = {k: 0.0 for k in ("jitter", "loss", "reorder", "duplicate", "corrupt")}  # previous z of each

    @property
    def whole(self) -> bool:
        """Whether the worker needs whole packets for this rule (to duplicate or corrupt them)."""
        return bool(self.duplicate or self.corrupt)

    def duplicated(self, rng: random.Random) -> bool:
        return bool(self.duplicate) and self.draw(rng, "duplicate") < self.duplicate

    def corrupted(self, rng: random.Random) -> bool:
        return bool(self.corrupt) and self.draw(rng, "corrupt") < self.corrupt

    def draw(self, rng: random.Random, what: str) -> float:
        if not self.correlation:
            return rng.random()
        c = self.correlation
        z = c * self.last[what] + (1.0 - c * c) ** 0.5 * rng.gauss(0.0, 1.0)
        self.last[what] = z
        return _STANDARD.cdf(z)

    def lost(self, rng: random.Random) -> bool:
        if self.gemodel:
            return self._gilbert_elliott(rng)
        return bool(self.loss) and self.draw(rng, "loss") < self.loss

    def _gilbert_elliott(self, rng: random.Random) -> bool:
        """As netem's loss_gilb_ell: move between the states, lose with the loss of the state the packet
        found (1-k in the good state, 1-h in the bad one)."""
        p, r, one_minus_h, one_minus_k = self.gemodel
        if self.bad:
            if rng.random() < r:
                self.bad = False
            return rng.random() < one_minus_h
        if rng.random() < p:
            self.bad = True
        return rng.random() < one_minus_k

    def goes_at_once(self, rng: random.Random) -> bool:
        """netem's reorder: this share is sent without the delay, ahead of the packets held; with a gap N,
        only a packet that follows N-1 delayed ones may be (netem's `counter < gap - 1`)."""
        if not self.reorder:
            return False
        if self.gap > 1 and self.counter < self.gap - 1:
            self.counter += 1
            return False
        if self.draw(rng, "reorder") < self.reorder:
            self.counter = 0
            return True
        self.counter += 1
        return False

    def hold_for(self, rng: random.Random) -> float:
        if not self.jitter:
            return self.delay
        offset = max(-4.0, min(4.0, DISTRIBUTIONS[self.distribution](self.draw(rng, "jitter"))))
        return max(0.0, self.delay + self.jitter * offset)


def corrupt_copy(payload: bytes, rng: random.Random) -> bytes:
    """One random bit flipped anywhere in the packet, checksums left as they were (netem's corrupt)."""
    data = bytearray(payload)
    data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


class Worker:
    def __init__(self, queue: int, maxlen: int = 65536, connect: bool = True):
        self.queue = queue
        self.rules: dict[str, Rule] = {}
        self.rng = random.Random()
        self.held: list[tuple[float, int, int, bytes | None, bytes | None]] = []  # due, order, id, verdict, dup
        self.last_due: dict[str, float] = {}
        self.order = 0
        self.whole = False  # whole packets copied to us (a rule duplicates or corrupts)
        self.duplicates: list[bytes] = []  # copies to send once their originals have gone
        self.backlog: list[bytes] = []  # datagrams read while waiting for a config ack
        self.sock = self.raw = None
        if connect:
            self._connect(maxlen)

    def _connect(self, maxlen: int) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 * 2**20)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 2**20)
        self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
        self.sock.bind((0, 0))
        self._configure(config_messages(self.queue, maxlen))
        # Duplicates go out as IP packets from the bridge's namespace, routed to the receiver.
        self.raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)

    def _configure(self, messages: list[bytes]) -> None:
        """Config messages, each waited for its ack (or the error it carries). Packets queued meanwhile
        are kept for receive(): a packet without a verdict would stay in the queue for good."""
        self.sock.setblocking(True)
        try:
            for message in messages:
                self.sock.send(message)
                while True:
                    data = self.sock.recv(262144)
                    if struct.unpack_from("=H", data, 4)[0] == NLMSG_ERROR:
                        list(parse_packets(data))
                        break
                    self.backlog.append(data)
        finally:
            self.sock.setblocking(False)

    def set_rules(self, spec: dict) -> None:
        """A source whose values did not change keeps its Rule, and with it the state of its draws (the
        Gilbert-Elliott chain's state, the correlated draws' last values, reorder's gap counter): a change
        on one link reset every link's state before."""
        rules = {}
        for source, values in spec.items():
            values = dict(values)
            seed = values.pop("seed", None)
            fresh = Rule(Impairment.from_wire(values), seed)
            old = self.rules.get(source)
            if old is not None and old.spec == fresh.spec and old.seed == fresh.seed:
                rules[source] = old
            else:
                # As netem: a packet that arrives after a change gets the new delay at once, and may
                # overtake packets held at the old one (a lowered delay shows on the next packet, not
                # once the held ones have gone). Between changes a source's packets keep their order.
                rules[source] = fresh
                self.last_due.pop(source, None)
        self.rules = rules
        whole = any(rule.whole for rule in self.rules.values())
        if whole != self.whole:
            self.whole = whole
            if self.raw is not None:  # connected (a unit test's worker has no sockets)
                self._configure(copy_mode_messages(self.queue, whole))

    def receive(self, now: float) -> list[bytes]:
        out = []
        while True:
            try:
                data = self.backlog.pop(0) if self.backlog else self.sock.recv(262144)
            except BlockingIOError:
                return out
            except OSError as error:
                if error.errno == errno.ENOBUFS:
                    continue
                raise
            # ENOENT answers a verdict on a packet the kernel dropped from the queue itself: its sender's
            # interface went away (a shaped container died while we held its packets). Not a reason to
            # stop shaping every other sender to this receiver (it printed a traceback and the worker died).
            for packet_id, source, payload in parse_packets(data, tolerate=GONE):
                rule = self.rules.get(source) or self.rules.get("*")
                if rule is None:
                    out.append(verdict(self.queue, packet_id, NF_ACCEPT))
                    continue
                rng = rule.rng or self.rng
                if rule.lost(rng):
                    out.append(verdict(self.queue, packet_id, NF_DROP))
                    continue
                whole = len(payload) > 20  # the queue copied the whole packet
                duplicate = payload if whole and rule.duplicated(rng) else None
                changed = corrupt_copy(payload, rng) if whole and rule.corrupted(rng) else None
                if rule.goes_at_once(rng):
                    out.append(self._accept(packet_id, changed, duplicate))
                    continue
                due = max(now + rule.hold_for(rng), self.last_due.get(source, 0.0))
                self.last_due[source] = due
                if due <= now:
                    out.append(self._accept(packet_id, changed, duplicate))
                else:
                    self.order += 1
                    heapq.heappush(self.held, (due, self.order, packet_id, changed, duplicate))

    def _accept(self, packet_id: int, changed: bytes | None, duplicate: bytes | None) -> bytes:
        if duplicate is not None:
            self.duplicates.append(duplicate)
        return verdict(self.queue, packet_id, NF_ACCEPT, changed)

    def send_duplicates(self) -> None:
        for packet in self.duplicates:
            try:
                self.raw.sendto(packet, (socket.inet_ntoa(packet[16:20]), 0))
            except OSError:
                pass  # a duplicate that cannot go is a duplicate lost, never a reason to stop
        self.duplicates.clear()

    def release(self, now: float, everything: bool = False) -> list[bytes]:
        out = []
        while self.held and (everything or self.held[0][0] <= now):
            _, _, packet_id, changed, duplicate = heapq.heappop(self.held)
            out.append(self._accept(packet_id, changed, duplicate))
        return out

    def send(self, messages: list[bytes]) -> None:
        for start in range(0, len(messages), 512):
            chunk = b"".join(messages[start : start + 512])
            while True:
                try:
                    self.sock.send(chunk)
                    break
                except BlockingIOError:
                    select.select([], [self.sock], [], 0.01)

    def run(self, control) -> None:
        control_fd = control.fileno()
        os.set_blocking(control_fd, False)
        pending = b""
        while True:
            now = time.monotonic()
            timeout = 0.0 if self.backlog else max(0.0, self.held[0][0] - now) if self.held else 1.0
            readable, _, _ = select.select([self.sock, control_fd], [], [], timeout)
            now = time.monotonic()
            # New rules first: the packets read in the same wake-up already get them (a change is in
            # effect for the first packet that reaches the queue after it).
            if control_fd in readable:
                chunk = os.read(control_fd, 65536)
                if not chunk:  # the controller went away: let every held packet go, then stop
                    self.send(self.receive(now) + self.release(now, everything=True))
                    self.send_duplicates()
                    return
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        self.set_rules(json.loads(line))
            out = self.receive(now) if self.sock in readable or self.backlog else []
            out += self.release(now)
            if out:
                self.send(out)
            if self.duplicates:  # after their originals' verdicts
                self.send_duplicates()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="laglab userspace shaping worker (NFQUEUE)")
    parser.add_argument("--queue", type=int, default=0)
    parser.add_argument("--rules", default="{}", help="initial rules as JSON")
    args = parser.parse_args(argv)
    worker = Worker(args.queue)
    worker.set_rules(json.loads(args.rules))
    print("ready", flush=True)  # bound to its queue: the controller's request is in effect from now on
    try:
        worker.run(sys.stdin)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
