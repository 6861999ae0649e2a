"""GET /api/openapi.json: the OpenAPI document of this API."""

from flask import Blueprint

from ..openapi import document

bp = Blueprint("docs", __name__)


@bp.get("/api/openapi.json")
def openapi():
    return document()
