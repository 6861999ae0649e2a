"""GET /api/consistency: wait for the target to catch up, then compare every lab table."""

import logging

import pymysql
from flask import Blueprint

from laglab.api import models, parts
from laglab.api.openapi import operation
from laglab.errors import ApiError
from laglab.replicators import consistency

bp = Blueprint("consistency", __name__)
log = logging.getLogger("laglab")


@operation(
    bp, "GET", "/api/consistency", "Wait for the target to execute the source's GTID set, then compare every lab table",
    query=models.ConsistencyQuery, ok=(200, models.Consistency), errors=(409, 503),
)  # fmt: skip
def check(query: models.ConsistencyQuery):
    lab = parts.lab()
    try:
        with parts.exclusive("consistency"):
            return consistency.check(lab.source, lab.target, timeout=query.timeout)
    except pymysql.MySQLError as error:
        log.warning("consistency check: %s", error)  # the SQL error stays in the log, not in the answer
        code = error.args[0] if error.args else "?"
        raise ApiError(
            503, f"database: the check could not run (MySQL error {code}; see the controller's log)"
        ) from None
