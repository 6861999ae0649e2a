"""The userspace shaping worker: holds packets queued by iptables NFQUEUE, then accepts or drops them.

Runs inside one receiving container's network namespace (started by the executor through nsenter),
bound to queue 0 of that namespace. Packets reach it from INPUT rules matched on their source
address; each source has its own delay, jitter (uniform, normal, pareto, paretonormal), loss, correlation and
reorder, read as JSON lines on stdin (`{"10.1.0.2": {"delay": 0.1, "jitter": 0.0, "loss": 0.0,
"distribution": "uniform", "correlation": 0.0, "reorder": 0.0}, "*": {...}}`) and changed in place
without dropping a packet. Held packets from one source leave in the order they came (jitter never
reorders; TCP on a reordering link measures the reordering, not the latency); `reorder` is the share
sent at once, ahead of them, as netem's.

Pure Python over a raw netlink socket (nfnetlink_queue): one non-blocking loop, select() with a
timeout to the next due packet, verdicts for all due packets sent in one datagram.
Run: python -m laglab.shaping.nfqueue [--queue 0]
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


def verdict(queue: int, packet_id: int, decision: int) -> bytes:
    return nlmsg(NFQNL_MSG_VERDICT, queue, nlattr(NFQA_VERDICT_HDR, struct.pack("!II", decision, packet_id)))


def config_messages(queue: int, maxlen: int) -> list[bytes]:
    return [
        nlmsg(
            NFQNL_MSG_CONFIG,
            queue,
            nlattr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, socket.AF_INET)),
            NLM_F_REQUEST | NLM_F_ACK,
            1,
        ),
        # Copy the IPv4 header only: the source address picks the rule.
        nlmsg(
            NFQNL_MSG_CONFIG,
            queue,
            nlattr(NFQA_CFG_PARAMS, struct.pack("!IBxxx", 20, NFQNL_COPY_PACKET)),
            NLM_F_REQUEST | NLM_F_ACK,
            2,
        ),
        nlmsg(
            NFQNL_MSG_CONFIG,
            queue,
            nlattr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", maxlen)),
            NLM_F_REQUEST | NLM_F_ACK,
            3,
        ),
        # GSO: take whole super-packets (fewer verdicts); FAIL_OPEN: a full queue accepts, never drops.
        nlmsg(
            NFQNL_MSG_CONFIG,
            queue,
            nlattr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO))
            + nlattr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO)),
            NLM_F_REQUEST | NLM_F_ACK,
            4,
        ),
    ]


def parse_packets(data: bytes):
    """Yields (packet_id, source address) for each queued packet in a netlink datagram."""
    offset = 0
    while offset + 16 <= len(data):
        length, kind, _flags, _seq, _pid = struct.unpack_from("=IHHII", data, offset)
        if length < 16:
            break
        if kind == NLMSG_ERROR:
            code = -struct.unpack_from("=i", data, offset + 16)[0]
            if code:
                raise OSError(code, f"nfnetlink_queue: {os.strerror(code)}")
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            packet_id, source = None, None
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
                pos += (alen + 3) & ~3
            if packet_id is not None:
                yield packet_id, source
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

    __slots__ = ("bad", "correlation", "delay", "distribution", "gemodel", "jitter", "last", "loss", "reorder")

    def __init__(
        self, delay=0.0, jitter=0.0, loss=0.0, distribution="uniform", correlation=0.0, reorder=0.0, gemodel=None
    ):
        self.delay, self.jitter, self.loss = float(delay), float(jitter), float(loss)
        self.distribution = distribution or "uniform"
        self.correlation, self.reorder = float(correlation), float(reorder)
        self.gemodel = tuple(float(v) for v in gemodel) if gemodel else None  # p, r, 1-h, 1-k
        self.bad = False  # the Gilbert-Elliott chain's state
        self.last = {"jitter": 0.0, "loss": 0.0, "reorder": 0.0}  # the previous z of each draw

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
        """netem's reorder: this share is sent without the delay, ahead of the packets held."""
        return bool(self.reorder) and self.draw(rng, "reorder") < self.reorder

    def hold_for(self, rng: random.Random) -> float:
        if not self.jitter:
            return self.delay
        offset = max(-4.0, min(4.0, DISTRIBUTIONS[self.distribution](self.draw(rng, "jitter"))))
        return max(0.0, self.delay + self.jitter * offset)


class Worker:
    def __init__(self, queue: int, maxlen: int = 65536):
        self.queue = queue
        self.rules: dict[str, Rule] = {}
        self.rng = random.Random()
        self.held: list[tuple[float, int, int]] = []  # (due, order, packet id)
        self.last_due: dict[str, float] = {}
        self.order = 0
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 * 2**20)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 2**20)
        self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
        self.sock.bind((0, 0))
        for message in config_messages(queue, maxlen):
            self.sock.send(message)
            list(parse_packets(self.sock.recv(65536)))  # the ack, or raises the error it carries
        self.sock.setblocking(False)

    def set_rules(self, spec: dict) -> None:
        self.rules = {source: Rule(**values) for source, values in spec.items()}

    def receive(self, now: float) -> list[bytes]:
        out = []
        while True:
            try:
                data = self.sock.recv(262144)
            except BlockingIOError:
                return out
            except OSError as error:
                if error.errno == errno.ENOBUFS:
                    continue
                raise
            for packet_id, source in parse_packets(data):
                rule = self.rules.get(source) or self.rules.get("*")
                if rule is None:
                    out.append(verdict(self.queue, packet_id, NF_ACCEPT))
                    continue
                if rule.lost(self.rng):
                    out.append(verdict(self.queue, packet_id, NF_DROP))
                    continue
                if rule.goes_at_once(self.rng):
                    out.append(verdict(self.queue, packet_id, NF_ACCEPT))
                    continue
                due = max(now + rule.hold_for(self.rng), self.last_due.get(source, 0.0))
                self.last_due[source] = due
                if due <= now:
                    out.append(verdict(self.queue, packet_id, NF_ACCEPT))
                else:
                    self.order += 1
                    heapq.heappush(self.held, (due, self.order, packet_id))

    def release(self, now: float, everything: bool = False) -> list[bytes]:
        out = []
        while self.held and (everything or self.held[0][0] <= now):
            out.append(verdict(self.queue, heapq.heappop(self.held)[2], NF_ACCEPT))
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
            timeout = max(0.0, self.held[0][0] - now) if self.held else 1.0
            readable, _, _ = select.select([self.sock, control_fd], [], [], timeout)
            now = time.monotonic()
            out = self.receive(now) if self.sock in readable else []
            if control_fd in readable:
                chunk = os.read(control_fd, 65536)
                if not chunk:  # the controller went away: let every held packet go, then stop
                    self.send(out + self.release(now, everything=True))
                    return
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        self.set_rules(json.loads(line))
            out += self.release(now)
            if out:
                self.send(out)


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
