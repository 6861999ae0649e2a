"""Faults injected into the lab's containers: one registry of actions (base.py), each kind of fault
one module that registers its actions (container.py: kill, stop, start, restart, pause, unpause), and
the manager that injects them, undoes them after their duration and keeps the recent ones."""

from laglab.faults import container  # noqa: F401 - registers the container actions
from laglab.faults.base import ACTIONS, Action, FaultError
from laglab.faults.manager import Fault, FaultManager

__all__ = ["ACTIONS", "Action", "Fault", "FaultError", "FaultManager"]
