"""The lab's container list: one `/containers/json` call a read, an inspect only where the PID is not
known to be the container's process any more."""

from laglab.platforms.docker import ContainerEvents, DockerPlatform

from .fakes import FakeDocker, fake_proc

SOURCE, TARGET, SETUP = "a" * 64, "b" * 64, "c" * 64


def lab(tmp_path, proc=None):
    docker = FakeDocker({
        SOURCE: {"service": "mysql-source", "pid": 101},
        TARGET: {"service": "mysql-target", "pid": 102},
        SETUP: {"service": "replication-setup", "pid": 0, "state": "exited"},
    })  # fmt: skip
    fake_proc(tmp_path, 101, SOURCE)
    fake_proc(tmp_path, 102, TARGET)
    return docker.api, DockerPlatform("laglab", client=docker, proc=str(proc or tmp_path))


def test_a_running_container_is_inspected_once_and_an_exited_one_never(tmp_path):
    api, containers = lab(tmp_path)
    first = containers.list()
    assert (first["mysql-source"].pid, first["mysql-target"].pid) == (101, 102)
    assert (first["replication-setup"].running, first["replication-setup"].pid) == (False, 0)
    assert first["mysql-source"].name == "laglab-mysql-source-1" and first["mysql-source"].ip == "10.0.0.2"
    for _ in range(5):
        assert containers.list() == first
    assert api.listed == 6 and sorted(api.inspected) == [SOURCE, TARGET]


def test_a_restarted_container_is_inspected_again(tmp_path):
    api, containers = lab(tmp_path)
    containers.list()
    api.lab[TARGET]["pid"] = 202  # a restart keeps the ID; the old PID is gone
    fake_proc(tmp_path, 202, TARGET)
    (tmp_path / "102" / "cgroup").unlink()
    assert containers.list()["mysql-target"].pid == 202
    assert api.inspected.count(TARGET) == 2 and api.inspected.count(SOURCE) == 1
    assert containers.owns(202) and not containers.owns(102)


def test_a_pid_reused_with_another_start_time_is_not_trusted(tmp_path):
    api, containers = lab(tmp_path)
    containers.list()
    fake_proc(tmp_path, 101, SOURCE, started=5000)  # the same PID, a new process of the same container
    containers.list()
    assert api.inspected.count(SOURCE) == 2


def test_a_paused_container_is_running_with_its_pid_and_a_stopped_one_is_not(tmp_path):
    api, containers = lab(tmp_path)
    containers.list()
    api.lab[SOURCE]["state"] = "paused"
    api.lab[TARGET]["state"] = "exited"
    now = containers.list()
    assert (now["mysql-source"].running, now["mysql-source"].pid) == (True, 101)
    assert (now["mysql-target"].running, now["mysql-target"].pid) == (False, 0)
    assert not containers.owns(102)


def test_without_a_readable_proc_every_read_inspects(tmp_path):
    api, containers = lab(tmp_path, proc=tmp_path / "nowhere")
    containers.list()
    containers.list()
    assert api.inspected.count(SOURCE) == 2


def test_a_recent_list_is_reused_within_max_age(tmp_path):
    api, containers = lab(tmp_path)
    containers.list()
    containers.list(max_age=60)
    assert api.listed == 1


def test_a_container_removed_between_the_list_and_the_inspect_is_not_running(tmp_path):
    api, containers = lab(tmp_path)
    api.gone.add(TARGET)
    now = containers.list()
    assert (now["mysql-target"].running, now["mysql-target"].pid) == (False, 0)
    assert now["mysql-source"].pid == 101


def test_a_watched_list_comes_from_memory_until_an_event_says_something_changed(tmp_path):
    """Issue #22: every live change listed the containers through the Docker API. With Docker's event
    stream followed, a list is read again only after an event of this project's containers."""
    from ..polling import wait_until

    api, containers = lab(tmp_path)
    docker = containers.client
    containers.watch()
    try:
        wait_until(lambda: containers.events.watching, 5, 0.01, "the event stream followed")
        assert docker.event_filters == {
            "type": "container", "label": "com.docker.compose.project=laglab", "event": list(ContainerEvents.NAMES),
        }  # fmt: skip
        first = containers.list()
        for _ in range(5):
            assert containers.list() == first
        assert api.listed == 1
        api.lab[TARGET]["pid"] = 202  # mysql-target restarts: a new process, the old one gone
        fake_proc(tmp_path, 202, TARGET)
        (tmp_path / "102" / "cgroup").unlink()
        docker.emit("restart", TARGET)
        wait_until(lambda: containers.list()["mysql-target"].pid == 202, 5, 0.01, "the restart seen")
        listed = api.listed
        containers.list()
        assert api.listed == listed  # and from memory again
        docker.streams[-1].close()  # the daemon went away: every call lists until the stream is back
        wait_until(
            lambda: len(docker.streams) == 2 and containers.events.watching, 5, 0.05, "the stream followed again"
        )
        containers.list()
        containers.list()
        assert api.listed == listed + 1
    finally:
        containers.unwatch()
