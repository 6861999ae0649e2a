"""A fake Kubernetes API server with Chaos Mesh in it, in process, over real HTTP: the endpoints the
controller's Kubernetes platform and Chaos Mesh backend call, answering as the real ones do.

- Pods: list by label selector (`key`, `key=value`, `key!=value`, `key in (a,b)`), get; a pod taken
  away (`remove_pod`) is gone from both, as a deleted pod is.
- Exec: the WebSocket upgrade in the `v4.channel.k8s.io` protocol; output on channel 1, then the
  error channel's Status: `Success`, or `Failure` / `NonZeroExitCode` with the code as an `ExitCode`
  cause (what the kubelet's exec sends), then a close frame.
- NetworkChaos and PodChaos: create (409 AlreadyExists for a taken name), get, list by label
  selector, delete. A NetworkChaos is admitted as the API server and Chaos Mesh's webhooks admit it
  (chaos_mesh_admission.py, from their source: stored with their defaults, or 403 with the denial:
  `1.5mbit`); a spec field in `unknown_spec_fields` is pruned from it, as the API server prunes what
  an older Chaos Mesh's CRD does not declare (`rate` before 2.7.0); Chaos Mesh's webhook refuses any change of a spec (403, its message); its
  controller adds the `chaos-mesh/records` finalizer and moves the status on as time passes: after
  `inject_after` seconds Selected and AllInjected, a container record per selected pod with phase
  Injected and an Apply event. A failed apply is retried every `retry_every` seconds, as Chaos Mesh
  requeues it (records/controller.go): each failure a Failed Apply event in the record and an event of
  reason Failed. A pod on a node listed in `no_netem` fails every time (chaos-daemon's words when
  sch_netem is missing); one in `flaky` fails that many times (chaos-daemon unreachable), then is
  injected; `status_conflicts` adds the condition controller's "Failed to update conditions" event
  (also reason Failed) to each injection. A deleted object keeps its deletionTimestamp until `recover_after` seconds have
  passed (AllRecovered), then is gone.
- Events: list by field selector on the involved object's name and kind.
- The kubelet's readiness: a pod in `not_ready` (its probe failing, its containers running) stays in
  phase Running with condition Ready False.
- Ephemeral containers: PATCH of a pod's `ephemeralcontainers` subresource as a strategic merge patch
  (415 for another body type, as the API server), merged by name; changing one that exists is 422
  (they may not be changed). The kubelet's side: its status waits (ContainerCreating) for
  `tools_after` seconds, then runs; an image in `bad_images` waits in ErrImagePull. Exec into a
  container the pod does not run is a 400 naming it.
- StatefulSets: `add_statefulset` makes its pods (name-0 .. name-(n-1), each with the
  `statefulset.kubernetes.io/pod-name` label and an owner reference, as the StatefulSet controller
  does) and answers GET of the object; a path in `forbidden` answers 403 in RBAC's words.

`requests` logs every call as (method, path, query, body) for the tests to compare exactly.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json
import re
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from . import chaos_mesh_admission as admission

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
NETEM_MISSING = (
    "Failed to apply chaos: rpc error: code = Unknown desc = error code: 2, msg: Error: Specified qdisc not found."
)


def pod(name: str, service: str, node: str, ip: str, ready: bool = True, labels: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "laglab",
            "uid": f"uid-{name}",
            "labels": {"app.kubernetes.io/name": service, **(labels or {})},
        },
        "spec": {"nodeName": node, "containers": [{"name": service.split("-")[0], "image": f"image-of-{service}"}]},
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def selects(selector: str, labels: dict) -> bool:
    for term in filter(None, re.split(r",(?![^()]*\))", selector or "")):
        term = term.strip()
        if m := re.fullmatch(r"([\w./-]+)\s+in\s+\(([^)]*)\)", term):
            if labels.get(m[1]) not in [v.strip() for v in m[2].split(",")]:
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.rstrip("=")) != value:
                return False
        elif term not in labels:
            return False
    return True


def status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}  # fmt: skip


class FakeKube:
    def __init__(self, namespace: str = "laglab", inject_after: float = 0.3, recover_after: float = 0.3):
        self.namespace = namespace
        self.inject_after, self.recover_after = inject_after, recover_after
        self.pods: dict[str, dict] = {}
        self.chaos: dict[str, dict[str, dict]] = {"networkchaos": {}, "podchaos": {}}
        self.events: list[dict] = []
        self.configmaps: dict[str, dict] = {}
        self.statefulsets: dict[str, dict] = {}
        self.forbidden: set[str] = set()  # paths RBAC denies the caller (403 Forbidden)
        self.tools_after = 0.2  # seconds from an ephemeral container's creation to running
        self.bad_images: set[str] = set()  # images the kubelet cannot pull
        self._ephemeral_at: dict[tuple[str, str], float] = {}  # (pod, container) -> when added
        self.content_type = ""  # of the request being answered
        self.no_netem: set[str] = set()  # nodes whose kernel lacks sch_netem
        self.unknown_spec_fields: set[str] = set()  # what an older Chaos Mesh's CRD lacks ({"rate"}: 2.6)
        self.not_ready: set[str] = set()  # pods whose readiness probe fails, their containers running
        self.flaky: dict[str, int] = {}  # pod -> applies that fail before one succeeds (chaos-daemon restarting)
        self.status_conflicts = False  # the condition controller's "Failed to update conditions" on each inject
        self.retry_every = 0.02  # Chaos Mesh requeues a failed apply (records/controller.go: needRetry)
        self.chaos_mesh_installed = True  # False: its CRDs are not in the cluster (404 as for any unknown path)
        self.restart_after = 0.3  # a killed container is ready again this long after the kill
        self.down_until: dict[str, float] = {}  # pod -> when it is ready again (PodChaos)
        self.requests: list[tuple[str, str, dict, dict | None]] = []
        self.exec_calls: list[tuple[str, dict]] = []
        self.exec_answer = lambda pod, argv: (b"", 0)  # -> (output, exit code)
        self.lock = threading.RLock()
        self._uids = itertools.count(1)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- the cluster, for tests ---
    def add_pod(self, *args, **kwargs) -> dict:
        made = pod(*args, **kwargs)
        with self.lock:
            self.pods[made["metadata"]["name"]] = made
            if made["status"]["conditions"][0]["status"] != "True":
                self.down_until[made["metadata"]["name"]] = float("inf")
        return made

    def add_statefulset(self, name: str, replicas: int, node_of=lambda k: f"node-{k}", ip_of=lambda k: f"10.0.9.{k}"):
        """A StatefulSet of `replicas` pods, as its controller makes them."""
        with self.lock:
            self.statefulsets[name] = {
                "apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": name, "namespace": self.namespace, "uid": f"uid-sts-{name}"},
                "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel"},
            }  # fmt: skip
        for k in range(replicas):
            made = self.add_pod(f"{name}-{k}", name, node_of(k), ip_of(k),
                                labels={"statefulset.kubernetes.io/pod-name": f"{name}-{k}"})  # fmt: skip
            made["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name,
                                                    "uid": f"uid-sts-{name}", "controller": True}]  # fmt: skip

    def remove_pod(self, name: str) -> None:
        with self.lock:
            self.pods.pop(name)

    def calls(self, method: str | None = None, prefix: str = "") -> list[tuple[str, str, dict, dict | None]]:
        with self.lock:
            return [r for r in self.requests if (method is None or r[0] == method) and r[1].startswith(prefix)]

    def objects(self, kind: str = "networkchaos") -> dict[str, dict]:
        with self.lock:
            self._advance()
            return copy.deepcopy(self.chaos[kind])

    # --- Chaos Mesh's controller, moved on by time ---
    def _advance(self) -> None:
        now = time.monotonic()
        for kind, objects in self.chaos.items():
            for name, obj in list(objects.items()):
                meta = obj["metadata"]
                if meta.get("deletionTimestamp"):
                    if now - obj["_deleted"] >= self.recover_after:
                        del objects[name]
                        if kind == "podchaos" and obj["spec"]["action"] == "pod-failure":
                            for target in self._selected(obj):
                                self.down_until.pop(target["metadata"]["name"], None)
                    else:
                        obj["status"]["conditions"] = self._conditions(obj, recovered=False)
                    continue
                if now - obj["_created"] >= self.inject_after and not obj["status"].get("experiment"):
                    self._inject(kind, obj)
                elif obj["status"].get("experiment") and now - obj["_tried"] >= self.retry_every:
                    if any(r["phase"] != "Injected" for r in obj["status"]["experiment"]["containerRecords"]):
                        self._apply(kind, obj)

        for name, target in self.pods.items():
            ready = now >= self.down_until.get(name, 0.0) and name not in self.not_ready
            target["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
            self._kubelet(name, target)

    def _selected(self, obj: dict) -> list[dict]:
        sel = obj["spec"]["selector"]
        expressions = ",".join(f"{e['key']} in ({','.join(e['values'])})" for e in sel.get("expressionSelectors") or [])
        labels = ",".join(f"{k}={v}" for k, v in (sel.get("labelSelectors") or {}).items())
        selector = ",".join(filter(None, [labels, expressions]))
        return [p for p in self.pods.values() if selects(selector, p["metadata"]["labels"])]

    def _inject(self, kind: str, obj: dict) -> None:
        """Chaos Mesh's records controller, first pass: a container record per selected pod, each apply
        recorded in the record's events (Succeeded or Failed, operation Apply) and a failed one as an
        event of reason Failed ("Failed to apply chaos: ..."); _advance retries the failed ones."""
        records = [{"id": f"{self.namespace}/{target['metadata']['name']}", "selectorKey": ".", "phase": "Not Injected",
                    "injectedCount": 0, "recoveredCount": 0, "events": []} for target in self._selected(obj)]  # fmt: skip
        obj["status"]["experiment"] = {"containerRecords": records, "desiredPhase": "Run"}
        self._apply(kind, obj)
        if kind == "podchaos":  # the kubelet's view: not ready while failed, or until a killed one restarted
            until = float("inf") if obj["spec"]["action"] == "pod-failure" else time.monotonic() + self.restart_after
            for target in self._selected(obj):
                self.down_until[target["metadata"]["name"]] = until
        if self.status_conflicts:  # condition/controller.go: an update conflict, also with reason Failed
            self._event(obj, "Normal", "Failed to update conditions: Operation cannot be fulfilled on "
                        f'{kind}.chaos-mesh.org "{obj["metadata"]["name"]}": the object has been modified; please '
                        "apply your changes to the latest version and try again")  # fmt: skip

    def _apply(self, kind: str, obj: dict) -> None:
        """One apply of every record not yet injected (records/controller.go: a failure is a record event,
        an event, and a retry later)."""
        obj["_tried"] = time.monotonic()
        for record in obj["status"]["experiment"]["containerRecords"]:
            if record["phase"] == "Injected":
                continue
            name = record["id"].split("/", 1)[1]
            target = self.pods.get(name)
            if kind == "networkchaos" and target is not None and target["spec"]["nodeName"] in self.no_netem:
                error = f"{NETEM_MISSING.removeprefix('Failed to apply chaos: ')} (pod {name})"
            elif self.flaky.get(name):
                self.flaky[name] -= 1
                error = (
                    'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while '
                    f'dialing: dial tcp 10.0.0.9:31767: connect: connection refused" (pod {name})'
                )
            else:
                error = None
            stamp = "2026-11-26T00:00:02Z"
            if error is None:
                record.update(phase="Injected", injectedCount=record["injectedCount"] + 1)
                record["events"].append({"type": "Succeeded", "operation": "Apply", "timestamp": stamp})
            else:
                record["events"].append({"type": "Failed", "operation": "Apply", "message": error, "timestamp": stamp})
                self._event(obj, "Warning", f"Failed to apply chaos: {error}")
        obj["status"]["conditions"] = self._conditions(obj, recovered=False)

    def _event(self, obj: dict, kind: str, message: str) -> None:
        self.events.append({
            "metadata": {"name": f"{obj['metadata']['name']}.{next(self._uids)}", "namespace": self.namespace},
            "involvedObject": {"kind": obj["kind"], "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
                               "namespace": self.namespace},
            "reason": "Failed", "type": kind, "message": message,
        })  # fmt: skip

    @staticmethod
    def _conditions(obj: dict, recovered: bool) -> list[dict]:
        records = (obj["status"].get("experiment") or {}).get("containerRecords") or []
        injected = bool(records) and all(r["phase"] == "Injected" for r in records)
        gone = bool(obj["metadata"].get("deletionTimestamp"))
        return [
            {"type": "Selected", "status": "True" if records else "False"},
            {"type": "AllInjected", "status": "True" if injected and not gone else "False"},
            {"type": "AllRecovered", "status": "True" if recovered else "False"},
            {"type": "Paused", "status": "False"},
        ]

    # --- HTTP ---
    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                url = urlsplit(self.path)
                query = {k: v if len(v) > 1 else v[0] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                if self.headers.get("Upgrade", "").lower() == "websocket":
                    return self._exec(url.path, parse_qs(url.query))
                with fake.lock:
                    fake.requests.append((method, url.path, query, body))
                    fake._advance()
                    fake.content_type = self.headers.get("Content-Type", "")
                    code, answer = fake.answer(method, url.path, query, body)
                self._send(code, answer)

            def _exec(self, path: str, query: dict) -> None:
                m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/exec", path)
                with fake.lock:
                    fake.requests.append(("EXEC", path, {k: v for k, v in query.items()}, None))
                    target = fake.pods.get(m[2]) if m else None
                if target is None:
                    return self._send(404, status(404, "NotFound", f'pods "{m[2] if m else path}" not found'))
                container = (query.get("container") or [None])[0]
                if container is not None and container not in fake.running_containers(target):
                    return self._send(400, status(400, "BadRequest",
                                                  f"container {container} is not valid for pod {m[2]}"))  # fmt: skip
                if "v4.channel.k8s.io" not in self.headers.get("Sec-WebSocket-Protocol", ""):
                    return self._send(400, status(400, "BadRequest", "no supported channel protocol"))
                accept = base64.b64encode(
                    hashlib.sha1((self.headers["Sec-WebSocket-Key"] + GUID).encode(), usedforsecurity=False).digest()
                )
                self.send_response(101, "Switching Protocols")
                self.send_header("Upgrade", "websocket")
                self.send_header("Connection", "Upgrade")
                self.send_header("Sec-WebSocket-Accept", accept.decode())
                self.send_header("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
                self.end_headers()
                argv = query.get("command", [])
                fake.exec_calls.append((m[2], query))
                output, code = fake.exec_answer(m[2], argv)
                if output:
                    self._frame(0x2, b"\x01" + output)
                if code == 0:
                    result = {"metadata": {}, "status": "Success"}
                else:
                    result = {"metadata": {}, "status": "Failure",
                              "message": f"command terminated with non-zero exit code: exit status {code}",
                              "reason": "NonZeroExitCode",
                              "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}  # fmt: skip
                self._frame(0x2, b"\x03" + json.dumps(result).encode())
                self._frame(0x8, struct.pack("!H", 1000))
                self.close_connection = True

            def _frame(self, opcode: int, payload: bytes) -> None:
                head = bytes([0x80 | opcode])
                n = len(payload)
                if n < 126:
                    head += bytes([n])
                elif n < 65536:
                    head += bytes([126]) + struct.pack("!H", n)
                else:
                    head += bytes([127]) + struct.pack("!Q", n)
                self.wfile.write(head + payload)
                self.wfile.flush()

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_DELETE(self):
                self._route("DELETE")

            def do_PUT(self):
                self._route("PUT")

            def do_PATCH(self):
                self._route("PATCH")

        return Handler

    def running_containers(self, target: dict) -> list[str]:
        names = [c["name"] for c in target["spec"]["containers"]]
        for state in target["status"].get("ephemeralContainerStatuses") or []:
            if "running" in state["state"]:
                names.append(state["name"])
        return names

    def _ephemeral(self, name: str, body: dict | None) -> tuple[int, dict]:
        patch_types = ("application/json-patch+json", "application/merge-patch+json",
                       "application/apply-patch+yaml", "application/strategic-merge-patch+json")  # fmt: skip
        if self.content_type.split(";")[0] not in patch_types:
            return 415, status(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                               f"accepted media types include: {', '.join(patch_types)}")  # fmt: skip
        target = self.pods.get(name)
        if target is None:
            return 404, status(404, "NotFound", f'pods "{name}" not found')
        have = {c["name"]: c for c in target["spec"].get("ephemeralContainers") or []}
        for container in ((body or {}).get("spec") or {}).get("ephemeralContainers") or []:
            if container["name"] in have and have[container["name"]] != container:
                return 422, status(422, "Invalid", f'Pod "{name}" is invalid: spec.ephemeralContainers: Forbidden: '
                                   f'existing ephemeral containers "{container["name"]}" may not be changed')  # fmt: skip
            if container["name"] not in have:
                target["spec"].setdefault("ephemeralContainers", []).append(copy.deepcopy(container))
                self._ephemeral_at[(name, container["name"])] = time.monotonic()
        self._advance()
        return 200, copy.deepcopy(target)

    def _kubelet(self, name: str, target: dict) -> None:
        """The ephemeral containers' status, as the kubelet reports it."""
        statuses = []
        for container in target["spec"].get("ephemeralContainers") or []:
            added = self._ephemeral_at[(name, container["name"])]
            if container["image"] in self.bad_images:
                state = {"waiting": {"reason": "ErrImagePull", "message": f'failed to pull and unpack image "{container["image"]}": '
                                     "failed to resolve reference: not found"}}  # fmt: skip
            elif time.monotonic() - added < self.tools_after:
                state = {"waiting": {"reason": "ContainerCreating"}}
            else:
                state = {"running": {"startedAt": "2026-11-26T00:00:02Z"}}
            statuses.append({"name": container["name"], "image": container["image"], "ready": False, "state": state})
        if statuses:
            target["status"]["ephemeralContainerStatuses"] = statuses

    def answer(self, method: str, path: str, query: dict, body: dict | None) -> tuple[int, dict]:
        ns = re.escape(self.namespace)
        if path in self.forbidden:
            resource, name = path.rstrip("/").split("/")[-2:]
            group = path.split("/")[2] if path.startswith("/apis/") else ""
            return 403, status(403, "Forbidden", f'{resource}{"." + group if group else ""} "{name}" is forbidden: '
                               f'User "system:serviceaccount:{self.namespace}:default" cannot {method.lower()} '
                               f'resource "{resource}" in API group "{group}" in the namespace "{self.namespace}"')  # fmt: skip
        if m := re.fullmatch(rf"/apis/apps/v1/namespaces/{ns}/statefulsets/([^/]+)", path):
            if method == "GET" and m[1] in self.statefulsets:
                return 200, copy.deepcopy(self.statefulsets[m[1]])
            return 404, status(404, "NotFound", f'statefulsets.apps "{m[1]}" not found')
        if (
            m := re.fullmatch(rf"/api/v1/namespaces/{ns}/pods/([^/]+)/ephemeralcontainers", path)
        ) and method == "PATCH":
            return self._ephemeral(m[1], body)
        if m := re.fullmatch(rf"/api/v1/namespaces/{ns}/pods(?:/([^/]+))?", path):
            if m[1]:
                found = self.pods.get(m[1])
                return (200, found) if found else (404, status(404, "NotFound", f'pods "{m[1]}" not found'))
            items = [p for p in self.pods.values() if selects(query.get("labelSelector", ""), p["metadata"]["labels"])]
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        if path == f"/api/v1/namespaces/{self.namespace}/events":
            wanted = dict(t.split("=", 1) for t in filter(None, query.get("fieldSelector", "").split(",")))
            items = [
                e for e in self.events
                if all(e["involvedObject"].get(k.split(".", 1)[1]) == v for k, v in wanted.items())
            ]  # fmt: skip
            return 200, {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": items}
        if m := re.fullmatch(rf"/api/v1/namespaces/{ns}/configmaps(?:/([^/]+))?", path):
            return self._configmap(method, m[1], body)
        chaos = rf"/apis/chaos-mesh.org/v1alpha1/namespaces/{ns}/(networkchaos|podchaos)(?:/([^/]+))?"
        if self.chaos_mesh_installed and (m := re.fullmatch(chaos, path)):
            return self._chaos(method, m[1], m[2], query, body)
        return 404, status(404, "NotFound", "the server could not find the requested resource")

    def _configmap(self, method: str, name: str | None, body: dict | None) -> tuple[int, dict]:
        """ConfigMaps: create (409 when taken), get, replace with optimistic concurrency (409 Conflict
        on a stale resourceVersion, as the API server answers)."""
        if method == "POST" and name is None:
            name = body["metadata"]["name"]
            if name in self.configmaps:
                return 409, status(409, "AlreadyExists", f'configmaps "{name}" already exists')
            made = copy.deepcopy(body)
            made["metadata"]["resourceVersion"] = str(next(self._uids))
            self.configmaps[name] = made
            return 201, made
        if name not in self.configmaps:
            return 404, status(404, "NotFound", f'configmaps "{name}" not found')
        if method == "GET":
            return 200, copy.deepcopy(self.configmaps[name])
        if method == "PUT":
            current = self.configmaps[name]
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return 409, status(409, "Conflict", f'Operation cannot be fulfilled on configmaps "{name}": '
                                   "the object has been modified; please apply your changes to the latest version "
                                   "and try again")  # fmt: skip
            made = copy.deepcopy(body)
            made["metadata"]["resourceVersion"] = str(next(self._uids))
            self.configmaps[name] = made
            return 200, made
        return 405, status(405, "MethodNotAllowed", f"{method} is not allowed")

    def _chaos(self, method: str, kind: str, name: str | None, query: dict, body: dict | None) -> tuple[int, dict]:
        objects = self.chaos[kind]
        word = f"{kind}.chaos-mesh.org"
        clean = lambda obj: {k: v for k, v in obj.items() if not k.startswith("_")}  # noqa: E731
        if method == "GET" and name is None:
            items = [
                clean(o)
                for o in objects.values()
                if selects(query.get("labelSelector", ""), o["metadata"].get("labels") or {})
            ]
            return 200, {"kind": f"{body_kind(kind)}List", "apiVersion": "chaos-mesh.org/v1alpha1", "items": items}
        if method == "POST" and name is None:
            new = copy.deepcopy(body)
            name = new["metadata"]["name"]
            if name in objects:
                return 409, status(409, "AlreadyExists", f'{word} "{name}" already exists')
            for field in self.unknown_spec_fields:  # pruned: not in the installed CRD's schema
                new["spec"].pop(field, None)
            if kind == "networkchaos":  # the schema's default, the mutating webhook, the validating one
                new, denied = admission.admit(new)
                if denied:
                    return 403, status(403, "Forbidden", denied)
            new["metadata"].update(uid=f"chaos-uid-{next(self._uids)}", finalizers=["chaos-mesh/records"],
                                   creationTimestamp="2026-11-26T00:00:00Z")  # fmt: skip
            new["status"], new["_created"] = {}, time.monotonic()
            objects[name] = new
            return 201, clean(new)
        if name not in objects:
            return 404, status(404, "NotFound", f'{word} "{name}" not found')
        obj = objects[name]
        if method == "GET":
            return 200, clean(obj)
        if method == "PUT":
            if body.get("spec") != obj["spec"]:
                hook = "vnetworkchaos.kb.io" if kind == "networkchaos" else "vpodchaos.kb.io"
                return 403, status(
                    403, "Forbidden", f'admission webhook "{hook}" denied the request: Cannot update chaos spec'
                )
            obj["metadata"]["labels"] = body["metadata"].get("labels")
            return 200, clean(obj)
        if method == "DELETE":
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = "2026-11-26T00:00:01Z"
                obj["_deleted"] = time.monotonic()
            return 200, clean(obj)
        return 405, status(405, "MethodNotAllowed", f"{method} is not allowed")


def body_kind(kind: str) -> str:
    return {"networkchaos": "NetworkChaos", "podchaos": "PodChaos"}[kind]
