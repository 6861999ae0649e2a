"""Who may call the API, and from where: the one gate every request passes before a view runs.

The controller holds NET_ADMIN, SYS_ADMIN, the host's PIDs and the Docker socket, and listens on
0.0.0.0:8080 inside its container, so every lab container (pulled third-party images among them) and
every host user reaches it through the bridge. A published address is no authentication; a token is:

- **A token, always.** `LAB_API_TOKEN` (make up writes a random one into .env); when none is set the
  controller makes one itself and keeps it in its state folder (`api-token`, mode 600), as Jupyter does.
  Open without it by design: the dashboard's page and its static files (they hold no data),
  /api/openapi.json, /metrics (Prometheus scrapes with no token; it holds figures, no secret) and
  /api/health (without the token only `status`: a probe learns that the controller answers, nothing more).
- **Host allow-list** (DNS rebinding): a page whose name resolves to 127.0.0.1 sends its own Host.
- **Same origin only**: a browser on another origin (another port of 127.0.0.1 is another origin:
  Grafana on :3000) is refused whatever the method, from its Origin or Sec-Fetch-Site header, so a page
  cannot make a browser start a long or side-effecting GET either.
- **Results links** carry a signature (HMAC of the path and an expiry, keyed by the token), not a
  cookie: cookies ignore the port, so a token cookie for 127.0.0.1 would reach every service there.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import time
from pathlib import Path
from urllib.parse import urlsplit

from flask import request

from laglab import limits
from laglab.api.openapi import OPEN_PATHS
from laglab.errors import error_response

log = logging.getLogger("laglab.access")
TOKEN_FILE = "api-token"  # noqa: S105 - a file name, not a secret
MIN_TOKEN_LENGTH = 16
LINK_SECONDS = 12 * 3600  # how long a signed results link opens its file
PROBES = ("/api/health", "/metrics")  # polled by machines that send no browser headers


def resolve_token(configured: str, state_dir: Path) -> tuple[str, str]:
    """The token the API requires and where it came from (for the log and /api/health): LAB_API_TOKEN,
    else the one this controller made earlier in its state folder, else a new one kept there."""
    if configured:
        return configured, "LAB_API_TOKEN"
    path = Path(state_dir) / TOKEN_FILE
    try:
        kept = path.read_text().strip()
        if len(kept) >= MIN_TOKEN_LENGTH:
            return kept, f"generated earlier: {path}"
    except OSError:
        pass
    token = secrets.token_urlsafe(24)
    if not Path(state_dir).is_dir():
        return token, "generated, kept in memory only (no state folder)"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as f:
        f.write(token + "\n")
    return token, f"generated: {path}"


def shown(token: str) -> str:
    """A token as the log may show it: enough to tell two apart, not enough to use."""
    return token[:4] + "…"


def sign(token: str, path: str, expires: int) -> str:
    return hmac.new(token.encode(), f"{path}\n{expires}".encode(), hashlib.sha256).hexdigest()[:32]


def signed_link(token: str, path: str, now: float | None = None) -> str:
    """`path` (starting /results/) with the query that opens it without a header for LINK_SECONDS."""
    expires = int((now or time.time()) + LINK_SECONDS)
    return f"{path}?expires={expires}&sig={sign(token, path, expires)}"


def _signature_valid(token: str) -> bool:
    expires, given = request.args.get("expires", ""), request.args.get("sig", "")
    if not expires.isdigit() or len(expires) > 12 or not given or int(expires) < time.time():
        return False
    return hmac.compare_digest(given.encode(), sign(token, request.path, int(expires)).encode())


def _cross_origin() -> str | None:
    """Why the request comes from another origin's page, or None. Browsers send Sec-Fetch-Site (same-origin,
    same-site, cross-site, none: typed or bookmarked) and Origin on every fetch but simple same-origin GETs."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        return f"Sec-Fetch-Site: {site[:32]}"
    origin = request.headers.get("Origin")
    if origin is not None and (origin == "null" or urlsplit(origin).netloc != request.host):
        return f"Origin: {origin[:80]}"
    return None


def init_app(app, token: str, allowed_hosts: set[str]) -> None:
    @app.before_request
    def _gate():
        # DNS rebinding: only the names the lab is reached by are served (the test client's 'localhost' too).
        host = request.host.rsplit(":", 1)[0].strip("[]") if request.host else ""
        if host not in allowed_hosts:
            return error_response(
                421,
                f"Host: {host[:64]!r} is not a name of this controller (allowed: {', '.join(sorted(allowed_hosts))})",
            )
        if (request.content_length or 0) > limits.BODY_BYTES:  # before anything reads it
            return error_response(413, f"body: larger than {limits.BODY_BYTES} bytes (limit body)")
        if request.path not in PROBES and (why := _cross_origin()):
            return error_response(403, f"{why}: the API answers pages of its own origin only")
        if request.path in OPEN_PATHS or request.path.startswith("/static/"):
            return None
        given = request.headers.get("Authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return None
        if request.method == "GET" and request.path.startswith("/results/") and _signature_valid(token):
            return None
        return error_response(
            401,
            "Authorization: a valid 'Bearer <token>' header is required (the token is LAB_API_TOKEN in .env; "
            "the laglab command and `./laglab dashboard` use it for you)",
        )


def authorized() -> bool:
    """Whether this request carried the token (views that answer more to it: /api/health)."""
    from flask import current_app

    token = current_app.config["API_TOKEN"]
    given = request.headers.get("Authorization", "")
    return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())
