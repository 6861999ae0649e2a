"""A run's TCP buffers (`tcp_buffers:`): set in the services' namespaces for the points that ask, what
they were before remembered (in the run's marker too, for a controller that dies) and put back at the
end; and what each point's services have, read back for the point's record."""

from __future__ import annotations

from typing import TYPE_CHECKING

from laglab.platforms.base import Unsupported, measurable
from laglab.scenarios.plan import BuffersPlan
from laglab.shaping import tcp_buffers

if TYPE_CHECKING:
    from laglab.platforms import Platform
    from laglab.shaping.executor import Executor


class BufferSwitch:
    def __init__(self, platform: Platform, executor: Executor, marker):
        self.platform, self.executor, self.marker = platform, executor, marker
        self.before: dict[str, dict[str, str]] = {}  # service -> TCP buffers before the run set them

    def set_for(self, plan: BuffersPlan, check) -> dict[str, dict[str, str]]:
        """The point's tcp_buffers set where it asks (the values before remembered for the cleanup), and
        what the link's services and the load generator have, read back: the point records them."""
        found = {c.service: c for c in self.platform.list().values() if c.running and c.service in plan.read}
        if plan.set_on:
            check("setting TCP buffers")
            for service in plan.set_on:
                container = found.get(service) or self.platform.running(service, hint="tcp_buffers.services")[0]
                if not measurable(container):
                    raise Unsupported(
                        f"tcp_buffers.services: {service} is the lab's apparatus (the controller or a set-up job); "
                        "its namespace is not tuned"
                    )
                if not container.entered:
                    raise Unsupported(
                        "tcp_buffers: set only where the controller enters the containers (Docker); on Kubernetes "
                        "set the pods' securityContext.sysctls"
                    )
                if service not in self.before:
                    self.before[service] = tcp_buffers.read(self.executor, container.pid)
                    self.marker.buffers_before(service, self.before[service])
                tcp_buffers.write(self.executor, container.pid, plan.values)
        return {s: tcp_buffers.read(self.executor, c.pid) for s, c in sorted(found.items()) if c.entered}

    def restore(self) -> None:
        """What the run changed is put back (a restarted container has the lab's own values anyway)."""
        if not self.before:
            return
        found = self.platform.list()
        for service, before in list(self.before.items()):
            container = found.get(service)
            if container is not None and container.running and container.entered:
                values = {name: tcp_buffers.parse(name, before[name]) for name in ("wmem", "rmem")}
                tcp_buffers.write(self.executor, container.pid, values)
            del self.before[service]
