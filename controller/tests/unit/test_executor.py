"""The executor's kept `tc -batch` (TcBatch) against the real tc binary, in the test's own namespace:
commands that only read or that fail, so nothing of the host changes."""

import subprocess

import pytest

from laglab.shaping.executor import CommandError, Executor, TcBatch

SHOW = ["tc", "qdisc", "show", "dev", "lo"]
MISSING = ["tc", "qdisc", "replace", "dev", "laglab-none0", "root", "handle", "1:", "htb"]
BAD_VALUE = ["tc", "qdisc", "replace", "dev", "lo", "root", "netem", "delay", "soon"]


def test_a_batch_says_which_commands_failed_and_why_and_runs_the_rest():
    batch = TcBatch(TcBatch.ARGV)
    try:
        failures = batch.run([SHOW, MISSING, SHOW, BAD_VALUE], timeout=10)
        assert [cmd for cmd, _ in failures] == [MISSING, BAD_VALUE]
        assert 'Cannot find device "laglab-none0"' in failures[0][1]
        assert "latency" in failures[1][1] or "delay" in failures[1][1], failures[1][1]
        # the same process goes on, its line count in step with tc's
        assert batch.run([SHOW], timeout=10) == []
        assert [cmd for cmd, _ in batch.run([MISSING], timeout=10)] == [MISSING]
        assert batch.alive()
    finally:
        batch.close()
    assert not batch.alive()


def test_a_batch_that_stops_answering_is_a_failure_not_a_hang():
    batch = TcBatch(["sh", "-c", "cat >/dev/null"])  # reads, says nothing: as a hung tc
    try:
        failures = batch.run([SHOW], timeout=0.3)
        assert failures == [(SHOW, "tc -batch stopped (within 0.3s)")]
        assert not batch.alive()  # closed: the next call starts a new one
    finally:
        batch.close()


def test_a_batch_that_exits_is_reported_on_the_command_it_was_given():
    batch = TcBatch(["sh", "-c", "read line; echo 'Error: gone' >&2"])  # reads the first line, then dies
    failures = batch.run([SHOW, SHOW], timeout=5)
    assert failures == [(SHOW, "Error: gone")]


def test_only_single_word_tc_commands_are_accepted():
    executor = Executor(dry_run=True)
    for bad in (["ip", "link"], ["tc", "qdisc show"], ["tc", "qdisc", ""], ["tc", "qdisc", "x\ny"]):
        with pytest.raises(ValueError):
            executor.tc([bad], netns_pid=1234)
    executor.tc([SHOW], netns_pid=1234)
    assert executor.ran == [["nsenter", "--target=1234", "--net", "--", *SHOW]]


def test_a_failed_command_raises_with_tcs_message(monkeypatch):
    """Through Executor.tc, with nsenter bypassed (the unit test has no container to enter)."""
    executor = Executor()
    monkeypatch.setattr(executor, "_enter", lambda pid, argv: list(argv))
    monkeypatch.setattr("laglab.shaping.executor.os.stat", lambda path: type("S", (), {"st_ino": 1})())
    try:
        with pytest.raises(CommandError) as caught:
            executor.tc([SHOW, MISSING], netns_pid=subprocess.os.getpid())
        assert "laglab-none0" in str(caught.value)
        executor.tc([MISSING], netns_pid=subprocess.os.getpid(), check=False)  # check=False: no raise
    finally:
        executor.close()
