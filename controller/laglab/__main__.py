"""Runs the controller: `python -m laglab` (waitress on CONTROLLER_LISTEN, default 0.0.0.0:8080 inside
the container; compose publishes it on 127.0.0.1 only)."""

import logging
import os
import signal
import sys

from waitress import serve

from .app import create_app, shutdown
from .config import ConfigError


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        app = create_app()
    except ConfigError as error:
        print(f"laglab: error: {error}", file=sys.stderr)
        return 2
    lab = app.extensions["laglab"]

    def _stop(signum, frame):
        shutdown(app, clear_kernel=os.environ.get("CLEAR_SHAPING_ON_EXIT", "1") != "0")
        sys.exit(0)

    signal.signal(signal.SIGTERM, _stop)
    host, _, port = os.environ.get("CONTROLLER_LISTEN", "0.0.0.0:8080").rpartition(":")
    print(f"laglab controller on {host}:{port}; results in {lab.run.path if lab.run else '-'}", flush=True)
    serve(app, host=host, port=int(port), threads=8, ident="laglab")
    return 0


if __name__ == "__main__":
    sys.exit(main())
