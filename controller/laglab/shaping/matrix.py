"""A delay matrix: groups of services (sites, regions) and the link between every two groups, applied
as per-link shaping on each member pair. Region names take their round trips from the presets table
(laglab/shaping/presets.yaml). Pure: the same model validates PUT /api/matrix and a scenario's `link.matrix`,
and expands into shaping requests without touching anything."""

from __future__ import annotations

import itertools
import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from laglab import limits
from laglab.errors import Kind
from laglab.shaping import presets
from laglab.shaping.params import (
    PERCENT_PATTERN,
    RATE_PATTERN,
    SERVICE_PATTERN,
    TIME_PATTERN,
    ParamError,
    Request,
    half_link,
    parse_percent,
    parse_ports,
    parse_rate,
    parse_time,
)
from laglab.shaping.ports import MULTIPORT_SLOTS, PROTOCOLS

GROUP_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
Group = Annotated[str, Field(pattern=GROUP_PATTERN)]


def integral(value):
    """JSON has one number type: 3.0 is the integer 3 (JSON Schema says so too)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# A port of a body (the API's models take it from here).
# JSON has one number type: 3306.0 is the integer 3306 (JSON Schema says so too; the fuzzer sent it).
PortItem = Annotated[
    # Field before the validator: the other order writes `ge`/`le` into the document, not minimum/maximum
    Annotated[int, Field(ge=1, le=65535), BeforeValidator(integral)]
    | Annotated[str, Field(pattern=r"^[0-9]{1,5}(-[0-9]{1,5})?$")],
    Field(description="a port, or a range 'low-high'"),
]
PortList = Annotated[list[PortItem], Field(min_length=1, max_length=MULTIPORT_SLOTS)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="python-re")


class MatrixLink(_Strict):
    """The link between two groups: a round trip (half each way), or a preset's (a region pair like
    'us-east-1/eu-west-1', or an access profile), and optionally jitter, loss and a rate per direction."""

    between: list[Group] = Field(min_length=2, max_length=2)
    rtt: Annotated[str, Field(pattern=TIME_PATTERN)] | None = Field(None, examples=["80ms"])
    preset: str | None = Field(None, max_length=80, examples=["us-east-1/eu-west-1"])
    jitter: Annotated[str, Field(pattern=TIME_PATTERN)] | None = None
    loss: Annotated[str, Field(pattern=PERCENT_PATTERN)] | None = None
    rate: Annotated[str, Field(pattern=RATE_PATTERN)] | None = None
    ports: PortList | None = Field(None, description="only these ports' packets (over the matrix's `ports`)")
    protocol: Literal[PROTOCOLS] | None = None  # type: ignore[valid-type]


class MatrixError(ValueError):
    """A rule across the matrix's keys (a 422 in the API), naming the key path."""


Members = Annotated[list[Annotated[str, Field(pattern=SERVICE_PATTERN)]], Field(min_length=1, max_length=64)]


# A group name as a dict key the document states: patternProperties with no other property allowed, so
# a name like "" is a request the document itself refuses (400), not a 422 to a schema-valid request.
GroupName = Annotated[str, StringConstraints(pattern=GROUP_PATTERN)]
_ONLY_GROUP_NAMES = {"additionalProperties": False}
ByGroup = Annotated[dict[GroupName, Members], Field(json_schema_extra=_ONLY_GROUP_NAMES)]
RegionByGroup = Annotated[dict[GroupName, str], Field(json_schema_extra=_ONLY_GROUP_NAMES)]


class Matrix(_Strict):
    groups: ByGroup = Field(min_length=2, max_length=16, description="group -> its services")
    regions: RegionByGroup | None = Field(
        None, description="group -> a region of the presets table: every pair of groups gets its round trip"
    )
    links: list[MatrixLink] = Field([], max_length=120, description="explicit links (win over regions)")
    ports: PortList | None = Field(
        None,
        description="every link holds only these ports' packets (3306: the binlog stream), unless it names its own",
    )
    protocol: Literal[PROTOCOLS] | None = None  # type: ignore[valid-type]

    def check(self) -> Matrix:
        """The rules across keys, which the schema cannot say: raises MatrixError naming the key."""
        try:
            return self._check()
        except ValueError as error:
            raise MatrixError(str(error)) from None

    def _check(self) -> Matrix:
        for key, names in (("groups", self.groups), ("regions", self.regions or {})):
            for name in names:
                if not re.fullmatch(GROUP_PATTERN, name):
                    raise ValueError(f"{key}: {name[:32]!r} is not a group name (letters, digits, . _ -)")
        seen: dict[str, str] = {}
        for group, services in self.groups.items():
            if not services:
                raise ValueError(f"groups.{group}: name at least one service")
            for service in services:
                if service in seen:
                    raise ValueError(f"groups.{group}: {service} is already in {seen[service]}")
                seen[service] = group
        for index, link in enumerate(self.links):
            for end in link.between:
                if end not in self.groups:
                    raise ValueError(f"links.{index}.between: no group {end!r} (groups: {', '.join(self.groups)})")
            if link.between[0] == link.between[1]:
                raise ValueError(f"links.{index}.between: two different groups")
            if (link.rtt is None) == (link.preset is None):
                raise ValueError(f"links.{index}: give rtt or preset")
            if link.preset is not None:
                try:
                    presets.link(link.preset)
                except KeyError as error:
                    raise ValueError(f"links.{index}.preset: {error.args[0]}") from None
        if self.regions is not None:
            missing = [g for g in self.groups if g not in self.regions]
            if missing:
                raise ValueError(f"regions: no region for group {missing[0]}")
        # The work it asks, before any of it is built (#54: 16 groups of 64, every pair linked, built
        # 983,040 requests, 14 s of the GIL, before a service was looked up).
        linked = {tuple(sorted(link.between)) for link in self.links}
        if self.regions is not None:
            linked |= {tuple(sorted((a, b))) for a, b in itertools.combinations(self.groups, 2)
                       if self.regions[a] != self.regions[b]}  # fmt: skip
        pairs = sum(len(self.groups[a]) * len(self.groups[b]) for a, b in linked)
        if pairs > limits.MATRIX_PAIRS:
            raise ValueError(
                f"groups: {pairs} member pairs to shape; at most {limits.MATRIX_PAIRS} (limit matrix_pairs)"
            )
        if self.regions is not None:
            for a, b in itertools.combinations(self.groups, 2):
                if self.regions[a] != self.regions[b]:
                    try:
                        presets.region_rtt_ms(self.regions[a], self.regions[b])
                    except KeyError as error:
                        raise ValueError(f"regions: {error.args[0]}") from None
        return self

    def link_settings(self) -> dict[tuple[str, str], dict]:
        """(group, group) -> {rtt, jitter, loss, rate, rate_reverse} for every linked pair (both orders
        point at the same settings, with the rates swapped for the reverse)."""
        out: dict[tuple[str, str], dict] = {}
        if self.regions is not None:
            for a, b in itertools.combinations(self.groups, 2):
                if self.regions[a] != self.regions[b]:
                    out[(a, b)] = {"rtt": f"{presets.region_rtt_ms(self.regions[a], self.regions[b]):g}ms",
                                   "ports": self.ports, "protocol": self.protocol}  # fmt: skip
        for link in self.links:
            settings = presets.link(link.preset) if link.preset else {"rtt": link.rtt}
            settings.update({k: v for k, v in (("jitter", link.jitter), ("loss", link.loss)) if v})
            own = link.ports is not None
            settings.update(ports=link.ports if own else self.ports, protocol=link.protocol if own else self.protocol)
            if link.rate:
                settings["rate"] = settings["rate_reverse"] = link.rate
            a, b = link.between
            out.pop((b, a), None)
            out[(a, b)] = settings
        return out

    def requests(self) -> list[tuple[str, Request]]:
        """(service, shaping of its link to the peer) for every member pair of every linked groups: half
        the round trip each way, as a scenario's link does. ParamError for a value out of range."""
        out = []
        for (a, b), settings in self.link_settings().items():
            ports = parse_ports(settings.get("ports"), settings.get("protocol"))
            if ports and (settings.get("rate") or settings.get("rate_reverse")):
                raise ParamError("ports", f"the link {a} <-> {b} has a rate and ports: a rate shapes every packet of a "
                                 "link, ports select some; name ports on the links without a rate", Kind.INVALID)  # fmt: skip
            for x in self.groups[a]:
                for y in self.groups[b]:
                    for service, peer, rate in ((x, y, settings.get("rate")), (y, x, settings.get("rate_reverse"))):
                        request = half_link(
                            peer,
                            rtt=parse_time("rtt", settings["rtt"], high=120.0),
                            jitter=parse_time("jitter", settings["jitter"]) if settings.get("jitter") else 0.0,
                            loss=parse_percent("loss", settings["loss"]) if settings.get("loss") else 0.0,
                            rate=parse_rate("rate", rate) if rate else None,
                            ports=ports,
                        )
                        if request is not None:
                            out.append((service, request))
        return out

    def bodies(self) -> list[tuple[str, dict]]:
        """requests() in the API's words: (service, PUT /api/shaping body with its peer)."""
        return [(service, {"peer": r.peer, **r.shaping.to_json(), **({"ports": r.ports.text()} if r.ports else {})})
                for service, r in self.requests()]  # fmt: skip

    def rtt_ms(self, service_a: str, service_b: str) -> float:
        """The round trip asked between two services (0 when their groups are not linked)."""
        group = {s: g for g, members in self.groups.items() for s in members}
        settings = self.link_settings()
        pair = settings.get((group.get(service_a), group.get(service_b))) or settings.get(
            (group.get(service_b), group.get(service_a))
        )
        return parse_time("rtt", pair["rtt"]) * 1000 if pair else 0.0
