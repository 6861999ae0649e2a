"""The controller's command line.

python -m laglab [serve]                             the controller (waitress on CONTROLLER_LISTEN,
                                                     default 0.0.0.0:8080 inside the container;
                                                     compose publishes it on 127.0.0.1 only)
python -m laglab setup native|group-replication|galera   a profile's one-shot set-up job
python -m laglab semi-sync on|off                    the semi-sync profile's job
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import pymysql

from laglab.config import ConfigError


def serve() -> int:
    from waitress import serve as waitress_serve

    from laglab.api.parts import lab_of
    from laglab.app import MAX_BODY_BYTES, create_app, shutdown

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # A request waits for the GIL while a recorder thread computes: up to the switch interval (5 ms by
    # default) each time. Shorter, a live change's tail stays inside its 10 ms (bench-shaping).
    sys.setswitchinterval(0.001)
    try:
        app = create_app()
    except ConfigError as error:
        print(f"laglab: error: {error}", file=sys.stderr)
        return 2
    import signal

    lab = lab_of(app)

    def _stop(signum, frame):
        shutdown(app, clear_kernel=lab.settings.CLEAR_SHAPING_ON_EXIT != "0")
        sys.exit(0)

    signal.signal(signal.SIGTERM, _stop)
    host, _, port = os.environ.get("CONTROLLER_LISTEN", "0.0.0.0:8080").rpartition(":")
    print(f"laglab controller on {host}:{port}; results in {lab.run.path}", flush=True)
    # Bounded at the socket too: waitress would otherwise buffer up to 1 GiB of body before Flask sees it.
    # Twice the API's limit there, so that a body just over it gets the API's own error shape (api/access).
    waitress_serve(
        app, host=host, port=int(port), threads=8, ident="laglab", max_request_body_size=2 * MAX_BODY_BYTES,
        max_request_header_size=65536, channel_timeout=60,
    )  # fmt: skip
    return 0


def job(args) -> int:
    """A set-up job: its last line says what it did or what went wrong (make up prints it)."""
    from laglab import config
    from laglab.replicators import CLUSTERS, native, setup_job

    prefix = "replication-setup" if args.command == "semi-sync" or args.kind == "native" else "cluster-setup"
    try:
        settings = config.load(os.environ)
        if args.command == "semi-sync":
            return native.semi_sync_command(settings, os.environ, args.state == "on")
        if args.kind == "native":
            setup_job.setup(settings, os.environ)
        else:
            CLUSTERS[args.kind].setup(settings)
    except (RuntimeError, pymysql.MySQLError, ConfigError) as error:
        print(f"{prefix}: error: {error}", flush=True)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m laglab", description="The laglab controller and its jobs.")
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("serve", help="run the controller (the default)")
    setup = commands.add_parser("setup", help="a profile's one-shot set-up job")
    setup.add_argument("kind", choices=["native", "group-replication", "galera"])
    semi = commands.add_parser("semi-sync", help="native replication semi-synchronous or not")
    semi.add_argument("state", choices=["on", "off"])
    args = parser.parse_args(argv)
    if args.command in (None, "serve"):
        return serve()
    return job(args)


if __name__ == "__main__":
    sys.exit(main())
