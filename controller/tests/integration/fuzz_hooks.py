"""Schemathesis hooks for the API conformance run (test_api_conformance.py): every operation is fuzzed,
and the ones that act on containers or start long work are narrowed to what the lab can take while
the other operations are fuzzed beside them (issue #22: leaving them out left their races unfound).

- POST /api/faults acts on `fuzz-target` only: a container of the `fuzz` profile that nothing else
  uses (the test starts it and removes it), never a server the suites after this one need.
- POST /api/load runs for at most 3 s and never rebuilds the lab's data set (`prepare` would drop and
  load up to 64 tables of a million rows).
- POST /api/runs never names a shipped scenario (they run for minutes) and runs quick.
"""

import schemathesis

FAULT_TARGET = "fuzz-target"


@schemathesis.hook
def map_body(context, body):
    operation = context.operation
    if operation is None or not isinstance(body, dict):
        return body
    key = (operation.method.upper(), operation.path)
    if key == ("POST", "/api/faults"):
        body["service"] = FAULT_TARGET
    elif key == ("POST", "/api/load"):
        body["prepare"] = False
        body["seconds"] = min(int(body.get("seconds", 3)) if isinstance(body.get("seconds"), int) else 3, 3)
    elif key == ("POST", "/api/runs"):
        if isinstance(body.get("file"), str):
            body["file"] = "fuzz-" + body["file"][-50:]  # still of the document's form; never a shipped file
        body["quick"] = True
    return body
