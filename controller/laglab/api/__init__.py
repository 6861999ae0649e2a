"""HTTP API: one blueprint per resource; openapi.py documents every route (a test keeps them in step)."""

from laglab.api import captures, clusters, consistency, dashboard, docs, faults, health, lag, matrix, runs, shaping

BLUEPRINTS = (
    health.bp,
    lag.bp,
    consistency.bp,
    clusters.bp,
    shaping.bp,
    matrix.bp,
    faults.bp,
    captures.bp,
    runs.bp,
    dashboard.bp,
    docs.bp,
)
