"""The worker's netlink encoding and decoding (the packet loop itself runs in the integration tests)."""

import socket
import struct

from laglab.shaping import nfqueue


def packet_message(packet_id: int, source: str) -> bytes:
    hdr = nfqueue.nlattr(nfqueue.NFQA_PACKET_HDR, struct.pack("!IHB", packet_id, 0x0800, 1) + b"\0")
    ip_header = bytes(12) + socket.inet_aton(source) + socket.inet_aton("10.0.0.3")
    payload = nfqueue.nlattr(nfqueue.NFQA_PAYLOAD, ip_header)
    return nfqueue.nlmsg(nfqueue.NFQNL_MSG_PACKET, 0, hdr + payload)


def test_parse_two_packets_in_one_datagram():
    data = packet_message(7, "10.0.0.2") + packet_message(8, "10.0.0.9")
    assert list(nfqueue.parse_packets(data)) == [(7, "10.0.0.2"), (8, "10.0.0.9")]


def test_verdict_message_layout():
    message = nfqueue.verdict(0, 7, nfqueue.NF_ACCEPT)
    length, kind, _flags = struct.unpack_from("=IHH", message)
    assert length == len(message) == 16 + 4 + 12
    assert kind == (3 << 8) | nfqueue.NFQNL_MSG_VERDICT
    assert struct.unpack_from("!II", message, 24) == (nfqueue.NF_ACCEPT, 7)


def test_jitter_spreads_holds_within_the_asked_bounds():
    import random

    rng = random.Random(1)  # one generator for all draws, as the worker has
    holds = [nfqueue.Rule(delay=0.1, jitter=0.05).hold_for(rng) for _ in range(1000)]
    assert all(0.05 <= h <= 0.15 for h in holds)
    assert max(holds) - min(holds) > 0.09  # spread over the whole range, not one repeated value
    assert nfqueue.Rule(delay=0.1).hold_for(rng) == 0.1


class FakeSocket:
    def __init__(self, datagrams):
        self.datagrams = list(datagrams)

    def recv(self, size):
        if not self.datagrams:
            raise BlockingIOError
        return self.datagrams.pop(0)


def worker_with(datagrams, rules):
    import random

    worker = object.__new__(nfqueue.Worker)  # no netlink socket: the packet logic only
    worker.queue, worker.rng, worker.held, worker.last_due, worker.order = 0, random.Random(7), [], {}, 0
    worker.sock = FakeSocket(datagrams)
    worker.set_rules(rules)
    return worker


def verdict_ids(messages):
    return [struct.unpack_from("!II", m, 24)[1] for m in messages]


def test_jitter_never_reorders_packets_of_one_source():
    """Each packet's hold is drawn anew, yet a packet never leaves before an earlier one of its source."""
    worker = worker_with([], {"10.0.0.2": {"delay": 0.1, "jitter": 0.05}, "10.0.0.9": {"delay": 0.01}})
    for i in range(300):
        source = "10.0.0.2" if i % 3 else "10.0.0.9"
        worker.sock.datagrams.append(packet_message(i, source))
        assert worker.receive(now=i * 0.001) == []
    released = []
    for step in range(1, 2000):
        released += verdict_ids(worker.release(now=step * 0.001))
    assert sorted(released) == list(range(300))
    from_two = [i for i in released if i % 3]
    assert from_two == sorted(from_two)  # in arrival order
    assert released != sorted(released)  # while the other source, with less delay, overtakes them
