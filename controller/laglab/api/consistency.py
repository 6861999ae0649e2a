"""GET /api/consistency: wait for the target to catch up, then compare every lab table."""

import pymysql
from flask import Blueprint, current_app

from .. import consistency
from ..errors import ApiError
from ..params import number

bp = Blueprint("consistency", __name__)


@bp.get("/api/consistency")
def check():
    lab = current_app.extensions["laglab"]
    timeout = number("timeout", 30, 1, 600)
    try:
        return consistency.check(lab.source, lab.target, timeout=timeout)
    except pymysql.MySQLError as error:
        raise ApiError(503, f"cannot run the check: {' '.join(str(a) for a in error.args)}") from None
