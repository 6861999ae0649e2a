"""The container actions, as `docker kill -s KILL | stop | start | restart | pause | unpause` do them
(each platform does them its own way: platforms/<name>.py `act`)."""

from __future__ import annotations

from laglab.faults.base import Action, register
from laglab.platforms import ServiceState


def _running(state: ServiceState) -> bool:
    return state.running and not state.paused


def _down(state: ServiceState) -> bool:
    return not state.running


register(Action(
    "kill", reached=_down, needs=_running, needs_text="running",
    undo="start", description="SIGKILL to the container's main process (a crash: no clean shutdown)",
))  # fmt: skip
register(Action(
    "stop", reached=_down, needs=_running, needs_text="running",
    undo="start", description="SIGTERM, then SIGKILL after 30 s (a clean shutdown)",
))  # fmt: skip
register(Action(
    "start", reached=_running, needs=_down, needs_text="stopped",
    undo="stop", description="start a stopped container",
))  # fmt: skip
register(Action(
    "restart", reached=_running, needs=_running, needs_text="running",
    undo=None, description="stop (clean) and start again",
))  # fmt: skip
register(Action(
    "pause", reached=lambda s: s.paused, needs=_running, needs_text="running",
    undo="unpause", description="freeze every process (cgroup freezer): connections stay open, nothing answers",
))  # fmt: skip
register(Action(
    "unpause", reached=_running, needs=lambda s: s.paused,
    needs_text="paused", undo="pause", description="thaw a paused container",
))  # fmt: skip
