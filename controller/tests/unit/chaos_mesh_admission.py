"""What the API server and Chaos Mesh's admission webhooks do to a NetworkChaos before it is stored,
written here from their source for the unit tests (the fake API server plays it on every create;
test_chaos_mesh checks every object against it). Chaos Mesh v2.8.3 (tag v2.8.3, commit 60ec97f1f):

- the CRD's structural default (helm/chaos-mesh/crds/chaos-mesh.org_networkchaos.yaml,
  `direction: {default: to}`), applied by the API server;
- the mutating webhook `mnetworkchaos.kb.io` (api/genericwebhook/defaulter.go walks the spec;
  api/v1alpha1/common_webhook.go: a `Duration` or `FloatStr` field left empty takes its `default:`
  tag; api/v1alpha1/networkchaos_types.go: delay.jitter `0ms`, every `correlation` `0`);
- the validating webhook `vnetworkchaos.kb.io` (api/v1alpha1/networkchaos_webhook.go: `Rate` by
  isValidRateUnit: a unit of kbit mbit gbit tbit tbps gbps mbps kbps bps bit after a number that
  strconv.ParseUint reads (base 10, so `1.5mbit` is refused); common_webhook.go: a `Duration` by
  time.ParseDuration, a `FloatStr` by strconv.ParseFloat; NetworkChaosSpec.Validate: a netem
  `from`/`both` direction needs a target and takes no externalTargets);
- the denial as the API server returns it: 403, `admission webhook "vnetworkchaos.kb.io" denied the
  request: ` and the field errors (k8s.io/apimachinery field.Error: `<path>: Invalid value: "<v>": <why>`).
"""

from __future__ import annotations

import copy
import re

WEBHOOK = "vnetworkchaos.kb.io"
RATE_UNITS = ("kbit", "mbit", "gbit", "tbit", "tbps", "gbps", "mbps", "kbps", "bps", "bit")  # its order
# Go's time.ParseDuration: a sequence of decimal numbers with a unit each ("1.5h", "300ms", "-1h2m"),
# or "0"; units ns us µs ms s m h.
GO_DURATION = re.compile(r"^[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$")
GO_FLOAT = re.compile(r"^[-+]?((\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|inf|infinity|nan)$", re.I)
# Where the spec's FloatStr fields sit, each with its correlation (default "0").
FLOAT_FIELDS = {"loss": "loss", "duplicate": "duplicate", "corrupt": "corrupt"}


def defaulted(obj: dict) -> dict:
    """The object as stored after the API server's schema default and the mutating webhook."""
    out = copy.deepcopy(obj)
    spec = out["spec"]
    spec.setdefault("direction", "to")
    if "delay" in spec:
        spec["delay"].setdefault("jitter", "0ms")
        spec["delay"].setdefault("correlation", "0")
        if "reorder" in spec["delay"]:
            spec["delay"]["reorder"].setdefault("correlation", "0")
    for section in FLOAT_FIELDS:
        if section in spec:
            spec[section].setdefault("correlation", "0")
    return out


def _rate_error(value: str) -> str | None:
    text = value.strip().lower()
    for unit in RATE_UNITS:
        if text.endswith(unit):
            number = text[: -len(unit)].strip()
            if re.fullmatch(r"\d+", number) and int(number) < 2**64:
                return None
            return f'parse rate field error:strconv.ParseUint: parsing "{number}": invalid syntax'
    return "parse rate field error:invalid unit"


def errors(obj: dict) -> list[str]:
    """The validating webhook's field errors for a defaulted NetworkChaos (empty: admitted)."""
    spec, out = obj["spec"], []

    def invalid(path: str, value, why: str) -> None:
        out.append(f'{path}: Invalid value: "{value}": {why}')

    if "rate" in spec and (why := _rate_error(str(spec["rate"].get("rate", "")))):
        invalid("spec.rate.rate", spec["rate"].get("rate"), why)
    delay = spec.get("delay")
    if delay is not None:
        for key in ("latency", "jitter"):
            if not GO_DURATION.match(str(delay.get(key, ""))):
                why = f'parse duration field error: time: invalid duration "{delay.get(key, "")}"'
                invalid(f"spec.delay.{key}", delay.get(key), why)
        for path, value in (("spec.delay.correlation", delay.get("correlation")),
                            *((f"spec.delay.reorder.{k}", v) for k, v in (delay.get("reorder") or {}).items()
                              if k != "gap")):  # fmt: skip
            if not GO_FLOAT.match(str(value)):
                invalid(path, value, "parse correlation field error:strconv.ParseFloat: invalid syntax")
    for section, key in FLOAT_FIELDS.items():
        for field in (key, "correlation"):
            if section in spec and not GO_FLOAT.match(str(spec[section].get(field, ""))):
                invalid(f"spec.{section}.{field}", spec[section].get(field), "strconv.ParseFloat: invalid syntax")
    if spec.get("action") != "partition" and spec.get("direction") in ("from", "both"):  # NetworkChaosSpec.Validate
        if spec.get("externalTargets") is not None:
            invalid("spec.direction", spec["direction"],
                    "external targets cannot be used with `from` and `both` direction in netem action yet")  # fmt: skip
        if spec.get("target") is None:
            invalid("spec.direction", spec["direction"],
                    "`from` and `both` direction cannot be used when targets is empty in netem action")  # fmt: skip
    return out


def admit(obj: dict) -> tuple[dict | None, str | None]:
    """(the object as stored, None), or (None, the API server's message for the webhook's denial)."""
    stored = defaulted(obj)
    found = errors(stored)
    if found:
        return None, f'admission webhook "{WEBHOOK}" denied the request: ' + ", ".join(found)
    return stored, None
