"""TCP probes run in a namespace as `python -c PROGRAM ARGS` (the lab's servers have no python; the
controller's, or User-mode Linux's, runs them through nsenter / ip netns exec)."""

# LISTEN PORT COUNT: accept (and close) COUNT connections on PORT, giving up after 120 s without one.
LISTEN = """import socket, select, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(64)
print("listening", flush=True)
for _ in range(int(sys.argv[2])):
    if not select.select([s], [], [], 120)[0]:
        break
    s.accept()[0].close()
"""
# CONNECT HOST PORT COUNT: each connect's time in ms (SYN -> SYN/ACK: one round trip of that port's
# packets), as a JSON list.
CONNECT = """import json, socket, sys, time
out = []
for _ in range(int(sys.argv[3])):
    start = time.monotonic()
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    out.append(round((time.monotonic() - start) * 1000, 3))
print(json.dumps(out))
"""
