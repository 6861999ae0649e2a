"""A scenario file's schema: one flat YAML per experiment, validated before anything runs.

A scenario names the replicator and its options, the data set, the link between two services, the
load, the warm-up, optional sweeps (dotted keys -> values; the cartesian product in file order is
the list of points), `quick` overrides for CI, and assertions checked on every point. Every point
is validated on its own before the first one runs; errors name the key path and the allowed values.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    StrictInt,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from laglab import limits
from laglab.load import replay as replays
from laglab.load.generator import SCRIPTS, Profile, Replay
from laglab.replicators import KINDS, servers
from laglab.scenarios.analysis.knee_search import Criterion, KneeSearch
from laglab.scenarios.schema.fields import METRICS, Seconds, Section, scenario_file
from laglab.scenarios.schema.published import Bottleneck, Reference
from laglab.scenarios.schema.timeline import Step
from laglab.shaping import presets, tcp_buffers
from laglab.shaping.matrix import Matrix, MatrixError
from laglab.shaping.params import (
    ParamError,
    Request,
    format_time,
    half_link,
    parse_percent,
    parse_ports,
    parse_rate,
    parse_time,
)
from laglab.shaping.plan import SEED_MAX
from laglab.shaping.ports import ALL, Ports

SWEEPABLE = (
    "link.rtt",
    "link.rate",
    "link.jitter",
    "link.loss",
    "link.preset",
    "load.rate",
    "load.threads",
    "load.protocol",
    "load",
    "replicator",
    "replicator.kind",
    *(f"replicator.{name}" for cls in KINDS.values() for name in cls.sweepable),
    "cluster.delay",
    "tcp_buffers.wmem",
    "tcp_buffers.rmem",
)


class ScenarioError(ValueError):
    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path, self.message = path, message


class _Replicator(Section):
    """The kind (laglab.replicators.KINDS) and every kind's options, flat as a scenario file writes them;
    each kind owns its own (its `Options` model) and an option of another kind is an error naming it."""

    @model_validator(mode="after")
    def _options_of_the_kind(self):
        for kind, cls in KINDS.items():
            for name in cls.options:
                # (a default value is no choice: the resolved copy of a run names every option)
                default = type(self).model_fields[name].default
                set_here = name in self.model_fields_set and getattr(self, name) != default
                if kind != self.kind and set_here and name not in KINDS[self.kind].options:
                    raise ValueError(f"replicator.{name}: an option of kind {kind}, not {self.kind}")
        return self

    def options(self):
        """The kind's own options (its `Options` model; None for a kind without options)."""
        model = KINDS[self.kind].Options
        return None if model is None else model(**{name: getattr(self, name) for name in model.model_fields})


def _replicator_model() -> type[Section]:
    """The `replicator:` section: `kind` and every kind's Options fields, built from the kinds (a new
    kind's options come with its module; nothing here names them)."""
    fields: dict = {"kind": (Literal[tuple(KINDS)], Field("native", description="what replicates: profiles.md; each option below names its kind"))}  # type: ignore[valid-type]  # fmt: skip
    for cls in KINDS.values():
        for name, info in cls.Options.model_fields.items() if cls.Options is not None else ():
            if name in fields:
                raise TypeError(f"replicator option {name} is declared by two kinds")
            fields[name] = (info.annotation, info)
    return create_model("Replicator", __base__=_Replicator, **fields)


Replicator = _replicator_model()


class Data(Section):
    """The tables the load writes (sysbench's sbtest1..N in the lab database), made before each point."""

    tables: int = Field(4, ge=1, le=64, description="sysbench tables")
    rows: int = Field(10000, ge=1, le=10_000_000, description="rows per table")


class Link(Section):
    """The weak link: between two services, or (`matrix`) between groups of services. `preset` fills
    rtt and the rates from the shipped table (laglab/shaping/presets.yaml); keys given here win over it."""

    between: tuple[str, str] = Field(("mysql-source", "mysql-target"), description="the link's two services (a replicator other than native: its own hop, unless given)")  # fmt: skip
    preset: str | None = Field(None, description="a link of the shipped table: `laglab preset` lists them")
    rtt: Seconds(120.0) = Field(0.0, description="round trip; half of it is added each way")
    jitter: Seconds(120.0) = Field(0.0, description="± around the delay (half each way); needs rtt")
    loss: str = Field("0%", description="packet loss each way, e.g. `0.5%`")
    rate: str | None = Field(None, description="bandwidth, tc units (`2mbit`, `512kbit`): first -> second service, and back unless rate_reverse")  # fmt: skip
    rate_reverse: str | None = Field(None, description="bandwidth second -> first service")
    matrix: Matrix | None = Field(None, description="delays between groups of services instead of one link (alone: no rtt, rate, ...)")  # fmt: skip
    ports: list[int | str] | Literal["replication"] | None = Field(None, description="only the link's packets to or from these ports (`[3306]`, a range `4567-4568`), or `replication`: the replicator's own (native and DM 3306, Group Replication 33061, Galera 4567, 4568, 4444, DTLE 8193); absent: every packet. Not with a rate (a rate is the whole link's)")  # fmt: skip
    protocol: Literal["tcp", "udp"] | None = Field(None, description="with ports: only tcp or only udp (default both)")  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, values):
        if isinstance(values, dict) and values.get("preset") is not None:
            try:
                filled = presets.link(str(values["preset"]))
            except KeyError as error:
                raise ValueError(f"preset: {error.args[0]}") from None
            values = {**filled, **values}
        return values

    @model_validator(mode="after")
    def _matrix_alone(self):
        if self.matrix is not None:
            try:
                self.matrix.check()
            except MatrixError as error:
                raise ValueError(f"matrix.{error}") from None
            given = sorted(k for k in self.model_fields_set if k not in ("matrix", "between"))
            if given:
                raise ValueError(f"{given[0]}: a matrix sets every link itself; leave {', '.join(given)} out")
        return self

    @model_validator(mode="after")
    def _ports(self):
        if self.ports is None or self.ports == "replication":
            if self.protocol is not None and self.ports is None:
                raise ValueError("protocol: needs ports")
            return self
        try:
            parse_ports(self.ports, self.protocol)
        except ParamError as error:
            raise ValueError(f"{error.field}: {error.detail}") from None
        if self.rate or self.rate_reverse:
            raise ValueError("ports: a rate shapes every packet of the link; give ports or a rate, not both")
        return self

    def selected_ports(self) -> Ports:
        """The ports as the shaping takes them (`replication` resolved by the scenario first)."""
        return ALL if self.ports in (None, "replication") else parse_ports(self.ports, self.protocol)

    @field_validator("loss", mode="before")
    @classmethod
    def _loss(cls, value):
        try:
            parse_percent("loss", value)
        except ParamError as error:
            raise ValueError(error.detail) from None
        return str(value)

    @field_validator("rate", "rate_reverse", mode="before")
    @classmethod
    def _rate(cls, value, info: ValidationInfo):
        if value is None:
            return None
        try:
            parse_rate(info.field_name, value)
        except ParamError as error:
            raise ValueError(error.detail) from None
        return value

    @property
    def rate_bits(self) -> float | None:
        return parse_rate("rate", self.rate) if self.rate else None

    def requests(self) -> tuple[tuple[str, Request], ...]:
        """What each end of the link gets: half the RTT and jitter (as the reference experiments did), the
        loss, its own rate (the second service sends rate_reverse when there is one)."""
        a, b = self.between
        loss = parse_percent("loss", self.loss)
        ends = ((a, b, self.rate), (b, a, self.rate_reverse or self.rate))
        out = []
        for service, peer, rate in ends:
            rate_bits = parse_rate("rate", rate) if rate else None
            request = half_link(peer, self.rtt, self.jitter, loss, rate_bits, self.selected_ports())
            if request is not None:
                out.append((service, request))
        return tuple(out)

    @model_validator(mode="after")
    def _applicable(self):
        """The rules across fields (jitter needs a round trip) checked before anything runs."""
        if self.matrix is None:
            try:
                self.requests()
            except ParamError as error:
                raise ValueError(str(error)) from None
        return self


class Cluster(Section):
    """A three-node cluster scenario: load on `write_node`, extra delay on everything `delayed_node` sends."""

    write_node: int = Field(1, ge=1, le=3, description="the node the load writes to")
    delayed_node: int = Field(3, ge=1, le=3, description="the node whose sent packets are delayed")
    delay: Seconds(60.0) = Field(0.0, description="the extra one-way delay on delayed_node")


class Load(Section):
    """What writes on the source while each point is measured."""

    tool: Literal["sysbench", "mysqlslap", "profile", "none"] = Field("sysbench", description="`profile`: the replay of a write profile (`file`); `none`: no load (a timeline alone)")  # fmt: skip
    file: str | None = Field(None, description="profile: the write profile `laglab profile BINLOG` wrote (JSON), under the scenarios folder")  # fmt: skip
    speed: float = Field(1.0, ge=replays.SPEED[0], le=replays.SPEED[1], description="profile: its clock, 2 = twice as fast (its rates doubled, its bursts twice as often)")  # fmt: skip
    script: Literal[SCRIPTS] = Field("oltp_write_only", description="the sysbench script")  # type: ignore[valid-type]
    threads: int = Field(4, ge=1, le=1024, description="client connections (mysqlslap: --concurrency)")
    rate: int = Field(0, ge=0, le=1_000_000, description="transactions per second (sysbench --rate); 0 = unlimited")
    duration: Seconds(86400.0) = Field(60.0, description="the measured window of each point (sysbench --time)")
    # Where sysbench sends the lab's account: the lab's own servers only (a cluster point writes to its node).
    target: Literal["mysql-source", "mysql-target"] = Field("mysql-source", description="the server the load writes to")  # fmt: skip
    protocol: Literal["plain", "compressed", "tls"] = Field("plain", description="the client protocol (sysbench --mysql-compression / --mysql-ssl)")  # fmt: skip
    reconnect: bool = Field(False, description="start sysbench again (every second) when the server drops it, until duration is over; each restart is counted")  # fmt: skip
    query: str = Field("INSERT INTO laglab_slap (c) VALUES ('abcde')", description="mysqlslap: the statement, run `queries` times once (duration is not used)")  # fmt: skip
    queries: int = Field(500, ge=1, le=10_000_000, description="mysqlslap: how many")
    # SQL the server runs before mysqlslap (over PyMySQL: no client program reads it, so `\\! cmd` is SQL
    # the server refuses, not a command).
    setup: str = Field(
        "CREATE TABLE IF NOT EXISTS laglab_slap (id BIGINT AUTO_INCREMENT PRIMARY KEY, c CHAR(5))", max_length=10_000,
        description="mysqlslap: SQL the server runs first",
    )  # fmt: skip

    _replay: Replay | None = PrivateAttr(None)

    @property
    def seconds(self) -> int:
        """sysbench --time takes whole seconds."""
        return max(1, round(self.duration))

    @model_validator(mode="after")
    def _profile(self, info: ValidationInfo):
        if self.tool != "profile":
            if self.file is not None:
                raise ValueError("file: only with tool: profile")
            return self
        if self.file is None:
            raise ValueError(
                "file: tool profile replays a write profile: give its file (`laglab profile BINLOG -o FILE`)"
            )
        path = scenario_file(self.file, info)
        try:
            raw = json.loads(path.read_text())
            self._replay = Replay(replays.parse_profile(raw, self.file), self.speed, self.file, replays.figures(raw))
        except replays.ReplayError as error:
            raise ValueError(error.message) from None
        except (OSError, ValueError) as error:
            raise ValueError(f"file: {self.file}: {getattr(error, 'strerror', None) or error}") from None
        return self

    @property
    def replay(self) -> Replay | None:
        return self._replay


class Verify(Section):
    """The link measured before each point (ping and iperf3 inside the lab) against what was asked: a
    point whose link is off by more than these fails its verification."""

    rtt_tolerance_ms: float = Field(5.0, ge=0, description="the measured RTT may differ from the asked one by this many ms ...")  # fmt: skip
    rtt_tolerance_pct: float = Field(10.0, ge=0, description="... or by this share of it, whichever is larger")
    rate_tolerance_pct: float = Field(15.0, ge=0, description="measured goodput below the asked rate by at most this")
    throughput_seconds: int = Field(2, ge=1, le=30, description="iperf3 seconds per direction")


def compare(measured: float | None, op: str, value: float) -> bool:
    """`measured op value`; nothing measured never holds."""
    if measured is None:
        return False
    return {"<": measured < value, "<=": measured <= value, ">": measured > value, ">=": measured >= value}[op]


class Assertion(Section):
    """A check every point must pass, written `lag_slope > 0.01` (metric, op, number); the report's
    verdict and `laglab run`'s exit code follow them."""

    metric: Literal[METRICS]  # type: ignore[valid-type]
    op: Literal["<", "<=", ">", ">="]
    value: float

    def holds(self, measured: float | None) -> bool:
        return compare(measured, self.op, self.value)

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"


# A searchable knob -> which end of it is sought by default: the highest write rate (or client count,
# or RTT) that keeps the criterion, the lowest link rate that does.
SEARCHABLE = {"load.rate": "highest", "load.threads": "highest", "link.rtt": "highest", "link.rate": "lowest"}


class Search(Section):
    """`search:` the knee of one knob instead of a list of its values (analysis/knee_search.py): probes grow from
    `from` (or shrink from `to`, for the lowest) until `until` fails, then bisect to `resolution`.
    Values in the knob's own units: TPS, threads, '250ms', '2mbit'."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    param: Literal[tuple(SEARCHABLE)]  # type: ignore[valid-type]
    low: int | float | str = Field(alias="from", description="the range's low end, in the knob's units")
    high: int | float | str = Field(alias="to", description="the range's high end")
    until: str = Field("lag_slope < 0.005", description="what a probe must keep to count as sustained: `<metric> <op> <number>`")  # fmt: skip
    resolution: str | float = Field("5%", description="bisect until the bracket is this narrow")
    goal: Literal["highest", "lowest"] | None = Field(None, description="default: the highest load.rate, load.threads or link.rtt, the lowest link.rate")  # fmt: skip
    max_probes: int = Field(12, ge=2, le=40, description="probes per search at most")
    expect: list[str] = Field([], description="what the knee must be, `knee >= 100` in the knob's units (TPS, threads, ms, Mbit/s); a failed one fails the run")  # fmt: skip

    @field_validator("expect")
    @classmethod
    def _expect(cls, value):
        for item in value:
            if not re.fullmatch(r"\s*knee\s*(<=|>=|<|>)\s*-?[\d.]+\s*", item):
                raise ValueError(f"{item!r} is not 'knee <op> <number>' (e.g. 'knee >= 100')")
        return value

    def unit_number(self, raw) -> float:
        """A probe's value in a reader's unit: TPS, threads, ms, Mbit/s (what `expect` compares)."""
        number = self.number(raw)
        return {"link.rate": number / 1e6, "link.rtt": number * 1000}.get(self.param, number)

    def expectations(self, knee) -> list[dict]:
        out = []
        for item in self.expect:
            m = re.fullmatch(r"\s*knee\s*(<=|>=|<|>)\s*(-?[\d.]+)\s*", item)
            measured = None if knee is None else self.unit_number(knee)
            out.append({"expectation": item.strip(), "knee": measured, "passed": compare(measured, m[1], float(m[2]))})
        return out

    @field_validator("until")
    @classmethod
    def _until(cls, value):
        try:
            Criterion.parse(value)
        except ValueError as error:
            raise ValueError(str(error).removeprefix("until: ")) from None
        return value

    @field_validator("resolution")
    @classmethod
    def _resolution(cls, value):
        try:
            fraction = parse_percent("resolution", value) if isinstance(value, str) else float(value)
        except ParamError as error:
            raise ValueError(error.detail) from None
        if not 0 < fraction < 1:
            raise ValueError(f"{value!r} is not a fraction between 0 and 1 (write it like '5%')")
        return value

    @model_validator(mode="after")
    def _range(self):
        for name in ("low", "high"):
            try:
                self.number(getattr(self, name))
            except (ParamError, ValueError, TypeError) as error:
                detail = getattr(error, "detail", str(error))
                raise ValueError(f"{'from' if name == 'low' else 'to'}: {detail}") from None
        if not 0 < self.number(self.low) < self.number(self.high):
            raise ValueError(f"to: must be above from ({self.low} .. {self.high})")
        return self

    def number(self, raw) -> float:
        """A value of the knob as the search counts it: TPS, threads, seconds, bits per second."""
        if self.param == "link.rate":
            return parse_rate("from", raw)
        if self.param == "link.rtt":
            if not isinstance(raw, str):
                raise ValueError(f"{raw!r} has no unit; write it like '250ms'")
            return parse_time("from", raw, high=120.0)
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ValueError(f"{raw!r} is not a number")
        return float(raw)

    def value(self, number: float):
        """A probe's value as a scenario writes it."""
        if self.param == "link.rate":  # whole kbit/s, written in Mbit/s from 1 Mbit/s up
            return f"{number / 1e6:g}mbit" if number >= 1e6 else f"{number / 1000:g}kbit"
        if self.param == "link.rtt":
            return f"{number * 1000:g}ms"
        return int(number)

    def rounding(self, number: float) -> float:
        """The knob's step: whole TPS or threads, whole kbit/s, tenths of a ms."""
        if self.param == "link.rate":
            return round(number / 1000) * 1000.0
        if self.param == "link.rtt":
            return round(number * 10000) / 10000
        return float(max(1, round(number)))

    @property
    def highest(self) -> bool:
        return (self.goal or SEARCHABLE[self.param]) == "highest"

    @property
    def criterion(self) -> Criterion:
        return Criterion.parse(self.until)

    def knee_search(self) -> KneeSearch:
        fraction = parse_percent("resolution", self.resolution) if isinstance(self.resolution, str) else self.resolution
        return KneeSearch(
            self.number(self.low), self.number(self.high), resolution=float(fraction), highest=self.highest,
            max_probes=self.max_probes, rounding=self.rounding,
        )  # fmt: skip

    def describe(self) -> str:
        goal = "highest" if self.highest else "lowest"
        return (
            f"the {goal} {self.param} from {self.low} to {self.high} with {self.until} (resolution {self.resolution})"
        )


class TcpBuffers(Section):
    """`tcp_buffers:` the services' net.ipv4.tcp_wmem / tcp_rmem ('min default max', as sysctl writes
    them; sizes may carry KiB/MiB/GiB), set in each one's network namespace for the points (and put
    back after the run). Unset: what the lab has (.env's LAB_TCP_WMEM / LAB_TCP_RMEM, else the host's)."""

    wmem: str | None = None
    rmem: str | None = None
    services: list[str] = Field(["mysql-source", "mysql-target", "loadgen"], min_length=1)

    @field_validator("wmem", "rmem")
    @classmethod
    def _triple(cls, value, info: ValidationInfo):
        if value is not None:
            try:
                tcp_buffers.parse(info.field_name, value)
            except tcp_buffers.BufferError as error:
                raise ValueError(error.message) from None
        return value

    def values(self) -> dict[str, tuple[int, int, int]]:
        return {name: tcp_buffers.parse(name, getattr(self, name)) for name in ("wmem", "rmem") if getattr(self, name)}


class Servers(Section):
    """The server versions the scenario is about, as image names: a cross-version pair is the upgrade
    path customers ask about. The lab must run them (SOURCE_IMAGE / TARGET_IMAGE in .env, then make
    up); a run on other versions is refused."""

    source: str | None = Field(None, pattern=servers.IMAGE, description="mysql-source's image, e.g. `mysql:5.7`, `mariadb:10.5`")  # fmt: skip
    target: str | None = Field(None, pattern=servers.IMAGE, description="mysql-target's image, e.g. `mysql:8.0`, `mariadb:11.8`")  # fmt: skip

    @model_validator(mode="after")
    def _one_flavour(self):
        flavors = {servers.Promise.of(image).flavor for image in (self.source, self.target) if image}
        if len(flavors) > 1:
            raise ValueError("servers: source and target replicate within one flavour (MySQL or MariaDB)")
        return self


WORD = r"^[A-Za-z][A-Za-z -]{0,39}$"


class VerdictWords(Section):
    """What the outcome means for this scenario, in its words: a ticket's check holding means the
    symptom reproduced, not that replication is fine. report.md's title, `laglab run`'s closing line and
    the dashboard print them in capitals; NOT VALID, INTERRUPTED and FAILED are never reworded."""

    model_config = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    held: str = Field("PASS", alias="pass", pattern=WORD, description="said when every check held, e.g. `reproduced`")  # fmt: skip
    failed: str = Field("FAIL", alias="fail", pattern=WORD, description="said when a check did not hold, e.g. `not reproduced`")  # fmt: skip

    def words(self) -> tuple[str, str]:
        return self.held, self.failed


class Scenario(Section):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$", description="the results folder's suffix: lower case, digits, -")  # fmt: skip
    description: str = Field("", description="the ticket and its symptom: report.md's first paragraph")
    expected: str = Field("", max_length=2000, description="what a user should see when it reproduces (the outcome in words), or `exploratory: ...`; report.md and `laglab scenario list` show it")  # fmt: skip
    onset: Seconds(86400.0) | None = Field(None, description="when the ticket says the symptom starts (`10m`): a run whose load stops before it cannot show it, and the report says so")  # fmt: skip
    verdict: VerdictWords = Field(VerdictWords(), description="the outcome in the ticket's words: `{pass: reproduced, fail: not reproduced}` (`scenario new` writes it)")  # fmt: skip
    replicator: Replicator = Replicator()
    data: Data = Data()
    link: Link = Link()
    load: Load = Load()
    warmup: Seconds(3600.0) = Field(5.0, description="load before the measured window of each point (not counted)")
    verify: Verify = Verify()
    cluster: Cluster | None = None
    timeline: list[Step] = Field([], description="changes during the measured window, each step one kind: shaping, clear, partition, heal, fault, trace, capture")  # fmt: skip
    assertions: list[Assertion] = []
    reference: Reference | None = None
    search: Search | None = None
    bottleneck: Bottleneck = Bottleneck()
    tcp_buffers: TcpBuffers | None = None
    servers: Servers | None = Field(None, description="the server versions the scenario is about (a cross-version pair); the lab must run them")  # fmt: skip
    seed: Annotated[StrictInt, Field(ge=0, le=SEED_MAX)] | Literal["random"] = Field("random", description="the seed of every link's random decisions (loss, jitter and the other drawn knobs): one seed, the same packets dropped in the same order in every run (userspace backend; netem's own seed where the kernel has it). `random`: one is drawn, and recorded in run.json like a given one")  # fmt: skip

    @model_validator(mode="after")
    def _cluster_rules(self):
        # The weak link of a replicator that is not native: where its own hops are, unless the file says.
        kind = KINDS[self.replicator.kind]
        if "between" not in self.link.model_fields_set:
            self.link.between = kind.default_link
        if self.link.ports == "replication":  # the replicator's own ports, this point's kind
            self.link.ports = list(kind.ports)
            if self.link.rate or self.link.rate_reverse:
                raise ValueError("link.ports: a rate shapes every packet of the link; give ports or a rate, not both")
        if kind.clustered and self.cluster is None:
            raise ValueError(f"cluster: required when replicator.kind is {self.replicator.kind}")
        if self.cluster is not None and not kind.clustered:
            clustered = [name for name, cls in KINDS.items() if cls.clustered]
            raise ValueError(f"cluster: only with replicator.kind {' or '.join(clustered)}")
        if self.cluster is not None:
            if self.link.matrix is not None and self.cluster.delay:
                raise ValueError("cluster.delay: the matrix sets the delays; leave cluster.delay out")
            if self.cluster.write_node == self.cluster.delayed_node:
                raise ValueError("cluster.delayed_node: must not be the write_node")
            if self.load.tool in ("sysbench", "profile"):
                raise ValueError("load.tool: cluster scenarios run mysqlslap (or none)")
        if self.timeline and self.load.tool == "mysqlslap":
            raise ValueError("timeline: needs a load that runs for load.duration (sysbench or none), not mysqlslap")
        changes = 0
        for index, step in enumerate(self.timeline):
            count = step.count_within(self.load.duration)
            if not count:
                raise ValueError(
                    f"timeline.{index}.at: {format_time(step.at)} is not within the measured window "
                    f"(load.duration {format_time(self.load.duration)})"
                )
            changes += count * step.kind.changes_per_occurrence(step, self.load.duration)
            if changes > limits.TIMELINE_EVENTS:
                raise ValueError(
                    f"timeline.{index}: the timeline schedules more than {limits.TIMELINE_EVENTS} changes in "
                    f"load.duration {format_time(self.load.duration)} (repeats and trace rows counted); fewer "
                    "repeats, a longer every or a shorter trace"
                )
        return self

    def load_profile(self) -> Profile:
        load = self.load
        if load.replay is not None:
            return Profile.replaying(load.replay, load.target, load.protocol)
        return self.data_profile()

    def data_profile(self) -> Profile:
        """The sysbench data set of `data:` (prepared once per run, a replay's tables are its own)."""
        load = self.load
        return Profile(
            load.script, self.data.tables, self.data.rows, load.threads, load.rate, load.target, load.protocol
        )

    @field_validator("assertions", mode="before")
    @classmethod
    def _assertions(cls, value):
        out = []
        for item in value or []:
            if isinstance(item, str):
                match = re.fullmatch(r"\s*(\w+)\s*(<=|>=|<|>)\s*(-?[\d.]+)\s*", item)
                if not match:
                    raise ValueError(f"{item!r} is not '<metric> <op> <number>' (metrics: {', '.join(METRICS)})")
                item = {"metric": match.group(1), "op": match.group(2), "value": float(match.group(3))}
            out.append(item)
        return out
