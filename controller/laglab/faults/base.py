"""What a fault action is, and the registry the API, the scenario schema and the manager read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from laglab.errors import LabError
from laglab.platforms import ServiceState


class FaultError(LabError):
    """A fault the lab refuses or that failed."""


@dataclass(frozen=True)
class Action:
    """One action on a service's container.

    The platform does it by its name (`Platform.act`); `reached` says from the container's state that it
    took effect; `needs` is the state it must start from (its message when not); `undo` names the action
    that reverses it once its duration is over (None: no duration makes sense, as for restart)."""

    name: str
    reached: Callable[[ServiceState], bool]
    needs: Callable[[ServiceState], bool]
    needs_text: str
    undo: str | None
    description: str

    @property
    def disrupts(self) -> bool:
        """It takes a running service out of service (kill, stop, pause): without a duration it stays in
        force until `fault undo` (or the action that reverses it) ends it. start and unpause do not."""
        return self.undo is not None and not self.reached(ServiceState(running=True))


ACTIONS: dict[str, Action] = {}


def register(action: Action) -> Action:
    ACTIONS[action.name] = action
    return action
