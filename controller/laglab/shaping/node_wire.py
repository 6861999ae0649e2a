"""What the controller and the laglab shaper on each node (node_shaper.py) exchange, as Kubernetes
objects: the controller's ConfigMap `laglab-shaping` (a generation and the desired entries, written by
shaping/daemonset.py) and each shaper's `laglab-shaper-<node>` (the generation it holds). One module
both import, so neither imports the other."""

from __future__ import annotations

import json

from laglab.platforms.kube_api import KubeApi, KubeError
from laglab.shaping.plan import Entry

DESIRED = "laglab-shaping"  # the controller's ConfigMap: {"generation", "entries"} in desired.json


class WireError(ValueError):
    """The desired state cannot be read as the controller writes it (a ConfigMap edited by hand, or by
    anyone the Role lets write it): the shaper answers this generation with the error, applying nothing."""

    def __init__(self, generation: int, message: str):
        super().__init__(message)
        self.generation = generation


def status_name(node: str) -> str:
    return f"laglab-shaper-{node}"[:253]


def configmap(api: KubeApi, name: str) -> dict | None:
    try:
        return api.request("GET", f"/api/v1/namespaces/{api.namespace}/configmaps/{name}")
    except KubeError as error:
        if error.not_found:
            return None
        raise


def write_configmap(api: KubeApi, name: str, key: str, value: dict, labels: dict | None = None) -> None:
    """Create or replace a ConfigMap of one JSON document (the API's answer to a lost race: try again)."""
    path = f"/api/v1/namespaces/{api.namespace}/configmaps"
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "laglab", **(labels or {})}},
        "data": {key: json.dumps(value, sort_keys=True)},
    }
    current = configmap(api, name)
    if current is None:
        api.request("POST", path, body=body)
    else:
        body["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
        api.request("PUT", f"{path}/{name}", body=body)


def read_desired(api: KubeApi) -> tuple[int, list[Entry]]:
    """The generation and its entries, each held to the API's own rules (params.parse_request: ranges,
    units, rules across fields) as if a PUT had sent it: `delay: 1e308` raised OverflowError in a
    backend and the shaper never answered. WireError says which entry and why."""
    from laglab.shaping.params import parse_request

    found = configmap(api, DESIRED)
    if found is None:
        return 0, []
    try:
        desired = json.loads((found.get("data") or {}).get("desired.json") or "{}")
        generation = int(desired.get("generation", 0))
        items = list(desired.get("entries", []))
    except (TypeError, ValueError, AttributeError) as error:
        raise WireError(0, f"{DESIRED}: desired.json: {error}") from None
    entries = []
    for number, item in enumerate(items):
        try:
            entry = Entry.from_wire(item)
            parse_request({**entry.shaping.to_json(), "peer": entry.peer, "direction": item.get("direction")})
        except Exception as error:
            raise WireError(generation, f"{DESIRED}: entries.{number}: {error}") from None
        entries.append(entry)
    return generation, entries
