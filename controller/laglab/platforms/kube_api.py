"""The few calls of the Kubernetes API the lab makes, and nothing else: REST through requests, exec
through the API's WebSocket in the `v4.channel.k8s.io` protocol (websocket-client).

In a pod it reads its service account (token, CA, namespace) the way every in-cluster client does;
the token is read again each minute, since bound tokens rotate. `KUBERNETES_API_URL` (with
`KUBERNETES_NAMESPACE` and, for a real cluster, `KUBERNETES_TOKEN_FILE`) points it at another API
server: the unit tests' fake one, or a cluster reached through `kubectl proxy`.

Not the official `kubernetes` client: 7.5 MB of generated models and aiohttp for the dozen calls made
here, imported into a controller whose own CPU is measured (#26); lightkube has no exec.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote, urlencode

import requests

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
CHANNELS = ("v4.channel.k8s.io",)
STDOUT, STDERR, ERROR = 1, 2, 3


class KubeError(RuntimeError):
    """The API server answered with an error Status (or could not be reached: status 0)."""

    def __init__(self, status: int, reason: str, message: str, method: str = "", path: str = ""):
        super().__init__(f"{method} {path}: {status} {reason}: {message}".strip())
        self.status, self.reason, self.message = status, reason, message

    @property
    def not_found(self) -> bool:
        return self.status == 404


@dataclass(frozen=True)
class ExecResult:
    code: int
    output: bytes  # stdout and stderr as they came
    message: str = ""  # the API's words when it ended otherwise than with an exit code


def in_cluster(environ=os.environ) -> bool:
    """Whether this process runs in a pod with a service account (or is pointed at an API server)."""
    if environ.get("KUBERNETES_API_URL"):
        return True
    return bool(environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(f"{SERVICE_ACCOUNT}/token")


class KubeApi:
    def __init__(
        self,
        url: str,
        namespace: str,
        token_file: str | None = None,
        ca_file: str | None = None,
        timeout: float = 10.0,
    ):
        self.url = url.rstrip("/")
        self.namespace = namespace
        self.token_file, self.ca_file, self.timeout = token_file, ca_file, timeout
        self.session = requests.Session()
        self.session.verify = ca_file if ca_file else True
        self._token: tuple[float, str] | None = None  # (monotonic time read, token)
        self._lock = threading.Lock()

    @classmethod
    def from_environment(cls, environ=os.environ, namespace: str | None = None) -> KubeApi:
        """`namespace`: the lab's, when it is not the one this pod runs in (the shaper DaemonSet's)."""
        url = environ.get("KUBERNETES_API_URL")
        if url:
            namespace = namespace or environ.get("KUBERNETES_NAMESPACE", "laglab")
            return cls(url, namespace, environ.get("KUBERNETES_TOKEN_FILE") or None)
        host, port = environ["KUBERNETES_SERVICE_HOST"], environ.get("KUBERNETES_SERVICE_PORT", "443")
        host = f"[{host}]" if ":" in host else host
        if not namespace:
            with open(f"{SERVICE_ACCOUNT}/namespace") as f:
                namespace = f.read().strip()
        return cls(f"https://{host}:{port}", namespace, f"{SERVICE_ACCOUNT}/token", f"{SERVICE_ACCOUNT}/ca.crt")

    # --- REST ---
    def _headers(self) -> dict[str, str]:
        if not self.token_file:
            return {}
        with self._lock:
            if self._token is None or time.monotonic() - self._token[0] > 60:
                with open(self.token_file) as f:
                    self._token = (time.monotonic(), f.read().strip())
            return {"Authorization": f"Bearer {self._token[1]}"}

    def request(
        self, method: str, path: str, params: dict | None = None, body: dict | None = None, content_type: str = ""
    ) -> dict:
        """`content_type`: a PATCH's (application/strategic-merge-patch+json, ...); JSON otherwise."""
        headers = {**self._headers(), **({"Content-Type": content_type} if content_type else {})}
        try:
            answer = self.session.request(
                method, self.url + path, params=params, json=body, headers=headers, timeout=self.timeout
            )
        except requests.RequestException as error:
            raise KubeError(0, "Unreachable", str(error), method, path) from None
        try:
            data = answer.json()
        except ValueError:
            data = {}
        if answer.status_code >= 400:
            raise KubeError(
                answer.status_code,
                str(data.get("reason") or answer.reason),
                str(data.get("message") or answer.text[:300]),
                method,
                path,
            )
        return data

    def delete_until_gone(self, path: str, timeout: float, interval: float) -> bool:
        """DELETE, then GET until the object is gone (a finalizer, such as Chaos Mesh's while it recovers
        the pods, holds it meanwhile): True once gone, False when it is still there after `timeout`.
        Other errors are the API's KubeError."""
        from laglab.deadline import TimedOut, poll

        def gone() -> bool:
            try:
                self.request("GET", path)
            except KubeError as error:
                if error.not_found:
                    return True
                raise
            return False

        try:
            self.request("DELETE", path)
            poll(gone, timeout, interval, what=path)
        except KubeError as error:
            if not error.not_found:
                raise
        except TimedOut:
            return False
        return True

    def pods_path(self, name: str = "") -> str:
        return f"/api/v1/namespaces/{quote(self.namespace)}/pods" + (f"/{quote(name)}" if name else "")

    @staticmethod
    def chaos_path(namespace: str, kind: str, name: str = "") -> str:
        """`kind`: the resource's plural (networkchaos, podchaos: Chaos Mesh's plural is its singular)."""
        base = f"/apis/chaos-mesh.org/v1alpha1/namespaces/{quote(namespace)}/{kind}"
        return base + (f"/{quote(name)}" if name else "")

    def pods(self, selector: str) -> list[dict]:
        return self.request("GET", self.pods_path(), params={"labelSelector": selector}).get("items") or []

    # --- exec ---
    def exec_url(self, pod: str, container: str | None, argv: list[str]) -> str:
        query = [("command", arg) for arg in argv] + [("stdout", "true"), ("stderr", "true")]
        if container:
            query.append(("container", container))
        base = "ws" + self.url[4:] if self.url.startswith("http") else self.url
        return f"{base}{self.pods_path(pod)}/exec?{urlencode(query)}"

    def exec_stream(self, pod: str, container: str | None, argv: list[str], timeout: float | None = None) -> KubeExec:
        import websocket  # here: only a controller on Kubernetes opens one

        options = {"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": self.ca_file} if self.ca_file else {}
        header = [f"{k}: {v}" for k, v in self._headers().items()]
        try:
            socket = websocket.create_connection(
                self.exec_url(pod, container, argv),
                header=header,
                subprotocols=list(CHANNELS),
                sslopt=options,
                timeout=timeout or self.timeout,
            )
        except websocket.WebSocketBadStatusException as error:
            raise KubeError(error.status_code, "Exec", str(error), "GET", f"{self.pods_path(pod)}/exec") from None
        except (OSError, websocket.WebSocketException) as error:
            raise KubeError(0, "Unreachable", str(error), "GET", f"{self.pods_path(pod)}/exec") from None
        return KubeExec(socket)

    def exec(self, pod: str, container: str | None, argv: list[str], timeout: float = 120.0) -> ExecResult:
        execution = self.exec_stream(pod, container, argv, timeout)
        output = b"".join(execution.chunks())
        return ExecResult(execution.code, output, execution.message)


class KubeExec:
    """One exec's WebSocket: its output as it comes, then its exit code from the error channel's Status
    (`Success`; `Failure` with reason NonZeroExitCode and the code as an ExitCode cause; any other
    Failure is a message and code -1)."""

    def __init__(self, socket):
        self.socket = socket
        self.code: int = -1
        self.message = ""

    def chunks(self) -> Iterator[bytes]:
        import websocket

        try:
            while True:
                try:
                    opcode, data = self.socket.recv_data()
                except websocket.WebSocketConnectionClosedException:
                    break
                if opcode == websocket.ABNF.OPCODE_CLOSE:
                    break
                if not data:
                    continue
                channel, payload = data[0], data[1:]
                if channel in (STDOUT, STDERR) and payload:
                    yield payload
                elif channel == ERROR and payload:
                    self._status(json.loads(payload))
        finally:  # close() is a no-op once the server's close frame was answered: shutdown() frees the socket
            try:
                self.socket.close(timeout=1)
            finally:
                self.socket.shutdown()

    def _status(self, status: dict) -> None:
        if status.get("status") == "Success":
            self.code = 0
            return
        causes = (status.get("details") or {}).get("causes") or []
        codes = [c.get("message") for c in causes if c.get("reason") == "ExitCode"]
        if status.get("reason") == "NonZeroExitCode" and codes and str(codes[0]).isdigit():
            self.code = int(codes[0])
        else:
            self.code, self.message = -1, str(status.get("message") or status)

    def pid(self, timeout: float = 5.0) -> int | None:
        """A process in a pod has no PID the controller could see (it holds no host namespace)."""
        return None
