"""Schemathesis hooks for the API conformance run (test_api_conformance.py): every operation is fuzzed,
and the ones that act on containers or start long work are narrowed to what the lab can take while
the other operations are fuzzed beside them (issue #22: leaving them out left their races unfound).

- POST /api/faults acts on `fuzz-target` only: a container of the `fuzz` profile that nothing else
  uses (the test starts it and removes it), never a server the suites after this one need.
- POST /api/load runs for at most 3 s and never rebuilds the lab's data set (`prepare` would drop and
  load up to 64 tables of a million rows); a replayed profile's transactions are at most 1 MiB and its
  seconds at most 200 transactions (the document allows 1 GiB and a million: loadgen and the server
  would spend the run writing them).
- POST /api/runs never names a shipped scenario (they run for minutes) and runs quick.
- POST /api/captures captures `fuzz-target` <-> `loadgen` only (tcpdump reads, it changes nothing in
  them), for at most 2 s, so that the four at once (limit captures) come free again within the run.
"""

import re

import schemathesis

from laglab.shaping.params import TIME_PATTERN

FAULT_TARGET = "fuzz-target"


SERVICE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")  # the document's pattern (laglab.shaping.params)
CAPTURED = ["fuzz-target", "loadgen"]
TIME = re.compile(TIME_PATTERN)  # the document's times (with spaces, any case): every valid one becomes 2 s


@schemathesis.hook
def map_body(context, body):
    """Narrows a body without ever repairing one: schemathesis also sends bodies that break the
    document on purpose and expects them refused, so a field it made invalid stays invalid (a CI run
    reported POST /api/load "schema-violating request accepted" after this hook had put a valid
    `prepare` and `seconds` in place of the invalid ones)."""
    operation = context.operation
    if operation is None or not isinstance(body, dict):
        return body
    key = (operation.method.upper(), operation.path)
    if key == ("POST", "/api/faults"):
        service = body.get("service")
        if isinstance(service, str) and SERVICE.match(service):
            body["service"] = FAULT_TARGET
        elif "service" in body:
            body["service"] = "-not a service-"  # invalid stays invalid, and never names a real container
    elif key == ("POST", "/api/load"):
        if body.get("prepare") is True:
            body["prepare"] = False
        seconds = body.get("seconds")
        whole = isinstance(seconds, int | float) and not isinstance(seconds, bool) and float(seconds).is_integer()
        if "seconds" not in body or (whole and seconds > 3):  # 2053.0 is a whole number too
            body["seconds"] = 3
        if isinstance(body.get("profile"), dict):
            narrow_profile(body["profile"])
    elif key == ("POST", "/api/captures"):
        pair = body.get("link")
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(s, str) and SERVICE.match(s) for s in pair):
            body["link"] = list(CAPTURED) if pair[0] != pair[1] else [CAPTURED[0], CAPTURED[0]]
        elif isinstance(pair, list):
            body["link"] = ["-not a service-" if isinstance(s, str) else s for s in pair]  # invalid stays invalid
        duration = body.get("for")
        if "for" not in body or (isinstance(duration, str) and TIME.match(duration)):
            body["for"] = "2s"  # a valid time of any length becomes 2 s (one outside the limit was a 422 anyway)
    elif key == ("POST", "/api/runs"):
        if isinstance(body.get("file"), str):
            body["file"] = "fuzz-" + body["file"][-50:]  # still of the document's form; never a shipped file
        if "quick" not in body or isinstance(body.get("quick"), bool):
            body["quick"] = True
    return body


def _lower(item: dict, key: str, most: int) -> None:
    """A whole number over `most` becomes `most` (still valid); anything else, or no key, is left as it was."""
    value = item.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool) and value > most:
        item[key] = most


def narrow_profile(profile: dict) -> None:
    quantiles = profile.get("size_quantiles")
    if isinstance(quantiles, list):
        for index, value in enumerate(quantiles):
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 1 << 20:
                quantiles[index] = 1 << 20
    large = profile.get("large")
    listed = large.get("transactions") if isinstance(large, dict) else None
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, dict):
            _lower(item, "bytes", 1 << 20)
            _lower(item, "rows", 10_000)
    seconds = profile.get("per_second")
    for second in seconds if isinstance(seconds, list) else []:
        if isinstance(second, dict):
            _lower(second, "transactions", 200)
