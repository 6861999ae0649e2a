"""Where shaping goes: one service (to everyone, or to `peer`), or both directions of a link."""

from __future__ import annotations

from pydantic import Field, model_validator

from laglab.scenarios.schema.fields import Section
from laglab.shaping.params import SERVICE_PATTERN, Impairment, Request, parse_request


class Target(Section):
    service: str | None = Field(None, pattern=SERVICE_PATTERN)
    peer: str | None = Field(None, pattern=SERVICE_PATTERN)
    link: tuple[str, str] | None = None

    @model_validator(mode="after")
    def _one_target(self):
        if (self.service is None) == (self.link is None):
            raise ValueError("give either service (with an optional peer) or link: [a, b]")
        if self.link is not None and self.peer is not None:
            raise ValueError("peer: only with service; a link names both ends")
        if self.link is not None and self.link[0] == self.link[1]:
            raise ValueError("link: two different services")
        return self

    def keys(self) -> list[tuple[str, str | None]]:
        if self.link is not None:
            a, b = self.link
            return [(a, b), (b, a)]
        return [(self.service, self.peer)]

    def requests(self, body: dict) -> list[tuple[str, Request]]:
        """(service, parsed request) per end: a link's body goes on each end's egress towards the other."""
        return [(service, parse_request({**body, "peer": peer})) for service, peer in self.keys()]

    def requests_of(self, impairment: Impairment) -> list[tuple[str, Request]]:
        """The same, of an impairment parsed before (a step's, a trace row's): nothing parsed at run time."""
        return [(service, Request(impairment, peer=peer)) for service, peer in self.keys()]

    def where(self) -> str:
        return "<->".join(self.link) if self.link else f"{self.service}->{self.peer or 'all'}"

    def receivers(self) -> set[str]:
        if self.link is not None:
            return set(self.link)
        return {self.peer} if self.peer else set()
