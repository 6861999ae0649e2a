"""The API's one error shape: {"error": "<message naming the field>", "status": <http status>}.

Flask is imported where a response is made, not at the top: shaping and faults raise LabError, and
the kernel suite runs shaping inside User-mode Linux, whose root has no Flask."""

from __future__ import annotations

import enum
import logging

log = logging.getLogger("laglab")


class Kind(enum.Enum):
    """What went wrong, in the lab's words. Domain code says which; only this module says which HTTP
    status answers it (STATUS)."""

    MALFORMED = "malformed"  # not of the form the document describes (type, units, pattern)
    NOT_FOUND = "not found"  # no such service, fault, run, partition
    CONFLICT = "conflict"  # the lab's state does not allow it now (not running, in progress, the apparatus)
    INVALID = "invalid"  # well-formed, but out of range or against a rule across fields
    FAILED = "failed"  # a call the lab made (Docker, tc, iptables) failed
    UNAVAILABLE = "unavailable"  # a part of the lab this needs is not running in this controller
    TIMED_OUT = "timed out"  # it did not take effect in time


STATUS = {
    Kind.MALFORMED: 400,
    Kind.NOT_FOUND: 404,
    Kind.CONFLICT: 409,
    Kind.INVALID: 422,
    Kind.FAILED: 502,
    Kind.UNAVAILABLE: 503,
    Kind.TIMED_OUT: 504,
}
KIND_OF_STATUS = {status: kind for kind, status in STATUS.items()}


class LabError(Exception):
    """Something the lab refuses or cannot do: its kind, and a message that starts with the field it is
    about. The API answers every one in the one error shape, with the status STATUS gives its kind."""

    def __init__(self, kind: Kind, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


class ApiError(LabError):
    """Raised by the API layer itself (a request it refuses before any part of the lab is asked): the
    one place besides STATUS where an HTTP status is written."""

    def __init__(self, status: int, message: str):
        super().__init__(KIND_OF_STATUS.get(status, Kind.FAILED), message)
        self.status = status


def status_of(error: LabError) -> int:
    return error.status if isinstance(error, ApiError) else STATUS[error.kind]


def bad_request(field: str, message: str) -> ApiError:
    return ApiError(400, f"{field}: {message}")


def error_response(status: int, message: str, headers: dict | None = None):
    from flask import jsonify

    response = jsonify({"error": message, "status": status})
    response.status_code = status
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def init_app(app) -> None:
    from werkzeug.exceptions import HTTPException

    @app.errorhandler(LabError)
    def _api_error(error: LabError):
        return error_response(status_of(error), error.message)

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException):
        # werkzeug's own headers matter: a 405 must say which methods are allowed (Allow, RFC 9110).
        headers = {k: v for k, v in error.get_headers() if k.lower() != "content-type"}
        if error.code == 413:
            from laglab.limits import BODY_BYTES

            return error_response(413, f"body: larger than {BODY_BYTES} bytes (limit body)", headers)
        return error_response(error.code or 500, error.description or error.name, headers)

    @app.errorhandler(Exception)
    def _unexpected(error: Exception):
        # The log has the traceback; the answer names no path, SQL or internal message.
        log.exception("unhandled error")
        return error_response(500, f"internal error ({type(error).__name__}); the controller's log has the details")
