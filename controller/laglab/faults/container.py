"""The container actions, as `docker kill -s KILL | stop | start | restart | pause | unpause` do them."""

from __future__ import annotations

from .base import Action, register


def _running(state: dict) -> bool:
    return bool(state.get("Running")) and not state.get("Paused")


def _down(state: dict) -> bool:
    return not state.get("Running")


register(Action(
    "kill", lambda c: c.kill(signal="SIGKILL"), reached=_down, needs=_running, needs_text="running",
    undo="start", description="SIGKILL to the container's main process (a crash: no clean shutdown)",
))  # fmt: skip
register(Action(
    "stop", lambda c: c.stop(timeout=30), reached=_down, needs=_running, needs_text="running",
    undo="start", description="SIGTERM, then SIGKILL after 30 s (a clean shutdown)",
))  # fmt: skip
register(Action(
    "start", lambda c: c.start(), reached=_running, needs=_down, needs_text="stopped",
    undo="stop", description="start a stopped container",
))  # fmt: skip
register(Action(
    "restart", lambda c: c.restart(timeout=30), reached=_running, needs=_running, needs_text="running",
    undo=None, description="stop (clean) and start again",
))  # fmt: skip
register(Action(
    "pause", lambda c: c.pause(), reached=lambda s: bool(s.get("Paused")), needs=_running, needs_text="running",
    undo="unpause", description="freeze every process (cgroup freezer): connections stay open, nothing answers",
))  # fmt: skip
register(Action(
    "unpause", lambda c: c.unpause(), reached=_running, needs=lambda s: bool(s.get("Paused")),
    needs_text="paused", undo="pause", description="thaw a paused container",
))  # fmt: skip
