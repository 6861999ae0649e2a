"""A stand-in for `timeout --signal=INT N tcpdump ... -w FILE host IP` where no tcpdump is installed (this
host; the lab's images and the User-mode Linux guest have the real one, tests/integration/test_captures.py
and tests/kernel run it). It answers as tcpdump 4.99 does, its words from tcpdump.c (4.99.3, Debian
bookworm's): "listening on %s, link-type %s (%s), snapshot length %d bytes" on stderr once capturing,
the savefile's 24-byte header (pcap-savefile(5): magic a1b2c3d4, version 2.4, snaplen, LINKTYPE_ETHERNET)
written at once, and on SIGINT (or its duration, as timeout sends it) the three counts of `info()`
("%u packet%s captured", "received by filter", "dropped by kernel") and exit 0. A missing interface
fails as tcpdump does: "tcpdump: eth9: No such device exists" and exit 1.

FAKE_TCPDUMP_RATE: bytes a second it appends (16-byte record headers and zeros), to test the size bound.
"""

import os
import signal
import struct
import sys
import time


def main(argv: list[str]) -> int:
    seconds = float(argv[argv.index("--signal=INT") + 1]) if "--signal=INT" in argv else 3600.0
    args = argv[argv.index("tcpdump") + 1 :]
    device, snaplen, path = args[args.index("-i") + 1], int(args[args.index("-s") + 1]), args[args.index("-w") + 1]
    if device != "eth0":
        print(f"tcpdump: {device}: No such device exists", file=sys.stderr, flush=True)
        return 1
    stopped = []
    signal.signal(signal.SIGINT, lambda *_: stopped.append(True))
    rate = float(os.environ.get("FAKE_TCPDUMP_RATE", "0"))
    packets = 0
    with open(path, "wb", buffering=0) as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1))
        print(f"tcpdump: listening on {device}, link-type EN10MB (Ethernet), snapshot length {snaplen} bytes",
              file=sys.stderr, flush=True)  # fmt: skip
        end = time.monotonic() + seconds
        while not stopped and time.monotonic() < end:
            time.sleep(0.05)
            if rate:
                size = max(1, int(rate * 0.05) - 16)
                now = time.time()
                out.write(struct.pack("<IIII", int(now), int(now % 1 * 1e6), size, size) + bytes(size))
                packets += 1
    print(f"{packets} packets captured\n{packets} packets received by filter\n0 packets dropped by kernel",
          file=sys.stderr, flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
