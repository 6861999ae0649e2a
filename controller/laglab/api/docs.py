"""GET /api/openapi.json: the OpenAPI document of this API."""

from flask import Blueprint

from laglab.api.openapi import document, operation

bp = Blueprint("docs", __name__)


@operation(bp, "GET", "/api/openapi.json", "This document (OpenAPI 3.1)", ok=(200, "application/json"))
def openapi():
    return document()
