"""The controller's API in Python, for the laglab command (laglab.cli), the benchmarks and the tests:
where the controller is and its token come from the environment and the env file (LAGLAB_ENV_FILE,
default .env), handled here once. Standard library only.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from laglab import config

ROOT = Path(__file__).resolve().parents[3]


def env_file(environ: Mapping[str, str] | None = None) -> Path:
    """The env file the lab was configured with: LAGLAB_ENV_FILE, else the checkout's .env."""
    environ = os.environ if environ is None else environ
    return Path(environ.get("LAGLAB_ENV_FILE") or ROOT / ".env")


def settings(environ: Mapping[str, str] | None = None) -> config.Settings:
    """The validated configuration as `make up` sees it: environment over the env file over defaults."""
    environ = os.environ if environ is None else environ
    path = env_file(environ)
    return config.load(environ, config.read_env_file(path) if path.exists() else {})


@dataclass
class Response:
    status_code: int
    text: str
    headers: dict = field(default_factory=dict)

    def json(self):
        return json.loads(self.text) if self.text else None

    @property
    def ok(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def error(self) -> str:
        """The API's error message ({"error", "status"}), or the raw body."""
        try:
            return str(self.json().get("error", self.text))
        except (ValueError, AttributeError):
            return self.text


class Client:
    def __init__(self, base: str, token: str = "", timeout: float = 60.0):
        self.base, self.token, self.timeout = base.rstrip("/"), token, timeout

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, timeout: float = 60.0) -> Client:
        s = settings(environ)
        return cls(f"http://{s.CONTROLLER_BIND}:{s.CONTROLLER_PORT}", s.LAB_API_TOKEN, timeout)

    def request(self, method: str, path: str, json_body=None, timeout: float | None = None, headers=None) -> Response:
        data = None if json_body is None else json.dumps(json_body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)  # noqa: S310 - http(s) only
        if not self.base.startswith(("http://", "https://")):
            raise ValueError(f"not an http URL: {self.base!r}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as answer:  # noqa: S310
                return Response(answer.status, answer.read().decode(errors="replace"), dict(answer.headers))
        except urllib.error.HTTPError as answer:
            return Response(answer.code, answer.read().decode(errors="replace"), dict(answer.headers))

    def get(self, path: str, **kwargs) -> Response:
        return self.request("GET", path, **kwargs)

    def put(self, path: str, json=None, **kwargs) -> Response:
        return self.request("PUT", path, json_body=json, **kwargs)

    def post(self, path: str, json=None, **kwargs) -> Response:
        return self.request("POST", path, json_body=json, **kwargs)

    def delete(self, path: str, **kwargs) -> Response:
        return self.request("DELETE", path, **kwargs)
