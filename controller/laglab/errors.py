"""The API's one error shape: {"error": "<message naming the field>", "status": <http status>}.

Flask is imported where a response is made, not at the top: shaping and faults raise LabError, and
the kernel suite runs shaping inside User-mode Linux, whose root has no Flask."""

from __future__ import annotations

import logging

log = logging.getLogger("laglab")


class LabError(Exception):
    """Something the lab refuses or cannot do, with the HTTP status that says so and a message that
    starts with the field it is about. The API answers every one in the one error shape."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class ApiError(LabError):
    """Raised by the API layer itself (a request it refuses before any part of the lab is asked)."""


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
        return error_response(error.status, error.message)

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException):
        # werkzeug's own headers matter: a 405 must say which methods are allowed (Allow, RFC 9110).
        headers = {k: v for k, v in error.get_headers() if k.lower() != "content-type"}
        return error_response(error.code or 500, error.description or error.name, headers)

    @app.errorhandler(Exception)
    def _unexpected(error: Exception):
        # The log has the traceback; the answer names no path, SQL or internal message.
        log.exception("unhandled error")
        return error_response(500, f"internal error ({type(error).__name__}); the controller's log has the details")
