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


def test_rules_keep_order_per_source():
    rule = nfqueue.Rule(delay=0.1, jitter=0.05)
    import random

    holds = [rule.hold_for(random.Random(1)) for _ in range(100)]
    assert all(0.05 <= h <= 0.15 for h in holds)
    assert nfqueue.Rule(delay=0.1).hold_for(random.Random(1)) == 0.1
