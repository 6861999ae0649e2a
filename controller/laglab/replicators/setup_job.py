"""The replication-setup job (`python -m laglab job native`, run by make up and on Kubernetes as a Job):
the source prepared, every replica configured (the first one handed back from DTLE when DTLE held it),
semi-sync off. Composes the native replicator's steps with DTLE's job state, so neither module imports
the other's set-up."""

from __future__ import annotations

from laglab.replicators.db import Endpoint, executed_gtids, lab_endpoints, server_dialect, wait_connect
from laglab.replicators.dtle import dtle_job_state
from laglab.replicators.native import configure_target, own_server_id, prepare_source, say, set_semi_sync, wait_running


def setup(settings, environ) -> None:
    source, target = lab_endpoints(settings, environ)
    replicas = replica_endpoints(target, environ)
    src = wait_connect(source, 180)
    dst = wait_connect(target, 180)
    dialect = server_dialect(src)
    target_dialect = server_dialect(dst)
    if dialect.flavor != target_dialect.flavor:
        raise RuntimeError(f"source is {dialect.flavor} but target is {target_dialect.flavor}")
    if dialect.version == target_dialect.version:
        say(f"{dialect.describe()} on both servers")
    else:  # a cross-version pair (SOURCE_IMAGE / TARGET_IMAGE): each server is spoken to in its own words
        say(f"{dialect.describe()} replicating to {target_dialect.describe()}")
        if target_dialect.version < dialect.version:
            say(
                "WARNING: the replica is older than its source; MySQL and MariaDB support replication to the same or a newer version only"
            )
    prepare_source(src, settings.REPL_USER, settings.REPL_PASSWORD)
    # Inside the lab the replica reaches the source by service name on 3306.
    inside = Endpoint("mysql-source", 3306, "", "", "mysql-source")
    source_executed = None if dialect.is_mariadb else executed_gtids(src, dialect)
    for ordinal, replica in enumerate(replicas):
        conn = dst if ordinal == 0 else wait_connect(replica, 180)
        replica_dialect = target_dialect if ordinal == 0 else server_dialect(conn)
        if len(replicas) > 1 or environ.get("LAGLAB_TARGET_STATEFULSET"):
            own_server_id(conn, replica_dialect, 2 + ordinal)  # one StatefulSet's pods share one target.cnf
        if ordinal == 0:  # mysql-target: the one DTLE may hand back to
            action = configure_target(
                conn, replica_dialect, inside, settings.REPL_USER, settings.REPL_PASSWORD, source_executed,
                dtle_job=dtle_job_state,
            )  # fmt: skip
        else:
            action = configure_target(conn, replica_dialect, inside, settings.REPL_USER, settings.REPL_PASSWORD)
        wait_running(conn, 60)
        say(f"{replica.name}: replica {action}; IO and SQL threads running" if len(replicas) > 1
            else f"replica {action}; IO and SQL threads running")  # fmt: skip
    # Asynchronous unless the semi-sync profile's job turns semi-sync on after this one.
    if set_semi_sync(source, target, False, settings.SEMI_SYNC_TIMEOUT_MS)["enabled"] is False:
        say("semi-sync off")


def replica_endpoints(target: Endpoint, environ) -> list[Endpoint]:
    """The replicas to set up: mysql-target, or on Kubernetes every pod of the StatefulSet that
    LAGLAB_TARGET_STATEFULSET names (its spec.replicas, read through the API): pod k is reached as
    <name>-k.<name> (its headless Service) and is the lab's service <name> for k = 0, <name>-k after."""
    name = environ.get("LAGLAB_TARGET_STATEFULSET")
    if not name:
        return [target]
    from laglab.platforms.kube_api import KubeApi, KubeError
    from laglab.platforms.kubernetes import statefulset_replicas

    try:
        count = statefulset_replicas(KubeApi.from_environment(environ), name)
    except KubeError as error:
        raise RuntimeError(f"reading statefulset {name}'s replicas: {error.message}") from None
    return [
        Endpoint(f"{name}-{k}.{name}", target.port, target.user, target.password, name if k == 0 else f"{name}-{k}")
        for k in range(max(1, count))
    ]
