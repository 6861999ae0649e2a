"""The delay matrix and the presets: PUT/GET/DELETE /api/matrix, GET /api/presets."""

from flask import Blueprint

from laglab.api import models, parts
from laglab.api.openapi import operation
from laglab.api.shaping import manager
from laglab.errors import ApiError
from laglab.shaping import presets
from laglab.shaping.matrix import Matrix, MatrixError

bp = Blueprint("matrix", __name__)


def _shown(matrix: Matrix | None) -> dict:
    if matrix is None:
        return {"matrix": None, "links": []}
    links = [{"service": service, **body} for service, body in matrix.bodies()]
    return {"matrix": matrix.model_dump(mode="json", exclude_none=True), "links": links}


@operation(
    bp, "PUT", "/api/matrix", "Set the delay matrix between groups of services (replaces the previous one)",
    body=Matrix, ok=(200, models.MatrixState), errors=(404, 409, 422, 502, 503),
    description="Each linked pair of groups gets half its round trip on each direction of every member pair; "
    "`regions` takes the round trips from GET /api/presets' table.",
)  # fmt: skip
def put(body: Matrix):
    try:
        body.check()
    except MatrixError as error:
        raise ApiError(422, str(error)) from None
    manager().set_matrix(body)
    return _shown(body)


@operation(bp, "GET", "/api/matrix", "The delay matrix in force", ok=(200, models.MatrixState), errors=(503,))
def get():
    return _shown(parts.shaping_view().matrix())


@operation(bp, "DELETE", "/api/matrix", "Remove the delay matrix's shaping", ok=(204, None), errors=(502, 503))
def delete():
    manager().set_matrix(None)
    return "", 204


@operation(
    bp, "GET", "/api/presets", "Named link presets and region round trips, with their sources", ok=(200, models.Presets)
)
def index():
    return {"sources": presets.sources(), "presets": presets.profiles()}
