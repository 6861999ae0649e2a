"""A scenario file turned into what runs: the points of its sweep (or a search's probes), each one
resolved into a plan that nothing downstream reads the scenario again for (VerifyPlan, LoadPlan,
PointPlan); `load_text`/`load_file` validate a file into a Plan, every point checked before the first runs."""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

from pydantic import (
    Field,
    ValidationError,
)

from laglab import limits
from laglab.load.generator import Profile
from laglab.replicators import KINDS
from laglab.replicators.base import ClusterPlan, ReplicatorPlan
from laglab.scenarios.schema import yaml_text
from laglab.scenarios.schema.fields import Section
from laglab.scenarios.schema.scenario import SWEEPABLE, Assertion, Scenario, ScenarioError, Search, Verify
from laglab.scenarios.schema.timeline import Step
from laglab.shaping.params import (
    Impairment,
    Request,
    format_time,
)
from laglab.shaping.ports import ALL, Ports


@dataclass(frozen=True)
class VerifyPlan:
    """RTT from `source` to `to` (and throughput when a rate is set), against what was asked."""

    source: str
    to: str
    rtt_ms: float
    rate_bits: float | None
    tolerances: Verify
    ports: Ports = ALL  # a link shaped on these ports only: its RTT is measured on one of them


@dataclass(frozen=True)
class LoadPlan:
    tool: str  # sysbench | mysqlslap | none
    target: str
    profile: Profile  # sysbench
    warmup: float  # seconds of load before the measured window opens
    seconds: int  # sysbench --time: warm-up and measured window
    threads: int
    queries: int  # mysqlslap
    query: str
    setup: str
    reconnect: bool = False


@dataclass(frozen=True)
class BuffersPlan:
    """The point's TCP buffers: set on `set_on` (none: the lab's), read back on `read` for the record."""

    set_on: tuple[str, ...]
    values: dict[str, tuple[int, int, int]]
    read: tuple[str, ...]


@dataclass(frozen=True)
class PointPlan:
    """A point resolved completely: the runner, the replicators and the summary never go back to the
    scenario (spec -> plan -> apply -> measure -> record -> summarise)."""

    number: int  # 1-based, as the run's files and the report count points
    params: dict[str, object]  # the swept keys' values
    replicator: ReplicatorPlan
    data: Profile  # the data set the replicator prepares once per run
    buffers: BuffersPlan
    shaping: tuple[tuple[str, Request], ...]  # (service, shaping of it) in order
    verify: VerifyPlan
    load: LoadPlan
    duration: float  # the measured window, s (a timeline's steps fall within it)
    timeline: tuple[Step, ...]
    nodes: tuple[str, ...]  # a cluster's members, recorded one by one (empty: not a cluster)
    links: tuple[tuple[str, str], ...]  # link counters recorded for the point (both directions)
    settings: dict  # the point's link, load and replicator as summary.json records them
    assertions: tuple[Assertion, ...]


class Point(Section):
    index: int
    params: dict[str, object]
    scenario: Scenario
    tree: dict = Field(default_factory=dict, exclude=True)  # the raw file it was validated from (probes)

    def plan(self) -> PointPlan:
        s = self.scenario
        cluster, nodes = None, ()
        if s.cluster is not None:
            # Load on the write node; everything the delayed node sends waits `cluster.delay`, so the
            # writer's RTT to it is the delay itself. mysqlslap times its own fixed work: no warm-up.
            nodes = tuple(KINDS[s.replicator.kind].services())  # type: ignore[attr-defined]
            a, b = nodes[s.cluster.write_node - 1], nodes[s.cluster.delayed_node - 1]
            if s.link.matrix is not None:  # the nodes sit in sites: the matrix is all the delay
                shaping, rtt_ms = tuple(s.link.matrix.requests()), s.link.matrix.rtt_ms(a, b)
                sites = {f"{x}-{y}": v["rtt"] for (x, y), v in s.link.matrix.link_settings().items()}
            else:
                shaping = ((b, Request(Impairment(delay=s.cluster.delay))),) if s.cluster.delay else ()
                rtt_ms, sites = s.cluster.delay * 1000, None
            verify = VerifyPlan(a, b, rtt_ms, None, s.verify)
            target, warmup = a, 0.0
            cluster = ClusterPlan(a, b, rtt_ms, sites)
        elif s.link.matrix is not None:
            a, b = s.link.between
            shaping = tuple(s.link.matrix.requests())
            verify = VerifyPlan(a, b, s.link.matrix.rtt_ms(a, b), None, s.verify)
            target, warmup = s.load.target, s.warmup
        else:
            # Half the RTT (and the rate) at each end of the link, as the reference experiments did.
            a, b = s.link.between
            shaping = s.link.requests()
            verify = VerifyPlan(a, b, s.link.rtt * 1000, s.link.rate_bits, s.verify, s.link.selected_ports())
            target, warmup = s.load.target, s.warmup
        load = LoadPlan(
            tool=s.load.tool, target=target, profile=s.load_profile(), warmup=warmup,
            seconds=round(warmup) + s.load.seconds, threads=s.load.threads, queries=s.load.queries,
            query=s.load.query, setup=s.load.setup, reconnect=s.load.reconnect,
        )  # fmt: skip
        asked = s.tcp_buffers
        buffers = BuffersPlan(
            tuple(asked.services) if asked else (), asked.values() if asked else {},
            tuple(dict.fromkeys([*s.link.between, "loadgen", *(asked.services if asked else [])])),
        )  # fmt: skip
        settings = {
            "link": s.link.model_dump(include={"preset", "rtt", "rate", "rate_reverse", "jitter", "loss"}),
            "load": {"tool": s.load.tool, "script": s.load.script, "threads": s.load.threads, "rate_tps": s.load.rate,
                     "seconds": s.load.seconds, "queries": s.load.queries}
            if s.load.replay is None
            else {"tool": "profile", "file": s.load.file, "speed": s.load.speed, "threads": s.load.replay.profile.threads(),
                  "seconds": s.load.seconds},
            "replicator": s.replicator.model_dump(),
        }  # fmt: skip
        return PointPlan(
            number=self.index + 1, params=self.params,
            replicator=ReplicatorPlan(s.replicator.kind, s.replicator.options(), s.link.rtt, cluster),
            data=s.data_profile(),
            buffers=buffers, shaping=shaping, verify=verify, load=load, duration=s.load.duration,
            timeline=tuple(s.timeline), nodes=nodes, links=((a, b), (b, a)), settings=settings,
            assertions=tuple(s.assertions),
        )  # fmt: skip


class Plan(Section):
    """The points to measure; with a `search:`, the points are the searches (one per sweep point) and
    each one's probes are made as it goes (`probe`)."""

    scenario: Scenario
    sweep: dict[str, list]
    points: list[Point]
    quick: bool
    base_dir: Path | None = Field(None, exclude=True)

    @property
    def search(self) -> Search | None:
        return self.scenario.search

    def most_points(self) -> int:
        """Points measured at most: every sweep point, or every search's most probes."""
        if self.search is None:
            return len(self.points)
        return len(self.points) * self.search.knee_search().most_probes()

    def probe(self, group: Point, value: float, window_factor: int, index: int) -> Point:
        """A search's probe as a point of the run: the group's scenario with the knob at `value`, and
        the measured window `window_factor` times as long (an undecided probe's repeat)."""
        tree = copy.deepcopy(group.tree)
        _set(tree, self.search.param, self.search.value(value))
        if window_factor > 1:
            _set(tree, "load.duration", format_time(group.scenario.load.duration * window_factor))
        params = {**group.params, self.search.param: self.search.value(value)}
        try:
            scenario = Scenario.model_validate(tree, context={"base_dir": self.base_dir})
        except ValidationError as error:
            raise _format_errors(error, prefix=f"search probe ({_describe(params)}): ") from None
        return Point(index=index, params=params, scenario=scenario, tree=tree)

    def eta_seconds(self) -> float:
        """The run's length; with a search, its longest (every search takes its most probes)."""
        per_point = []
        for p in self.points:
            if p.scenario.cluster is not None:  # mysqlslap runs to completion: a rough guess
                per_point.append(20 + p.scenario.load.queries / max(1, p.scenario.load.threads) * 0.05)
                continue
            verify = 3 + (2 * p.scenario.verify.throughput_seconds + 2 if p.scenario.link.rate else 0)
            per_point.append(10 + verify + p.scenario.warmup + p.scenario.load.seconds)
        probes = 1 if self.search is None else self.search.knee_search().most_probes()
        return sum(per_point) * probes + 30  # data preparation check, consistency check


def _set(tree: dict, dotted: str, value) -> None:
    if dotted == "replicator":  # a whole replicator set-up per point
        tree["replicator"] = value
        return
    node = tree
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ScenarioError(dotted, f"{part} is not a section")
    node[parts[-1]] = value


def _format_errors(error: ValidationError, prefix: str = "") -> ScenarioError:
    first = error.errors()[0]
    path = ".".join(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    named = message.split(": ", 1)[0] if ": " in message else None
    if named is not None and named.startswith(path) and " " not in named:  # a rule across keys names its key
        path, message = message.split(": ", 1)
    elif named is not None and " " not in named and "'" not in named:  # a rule of a section names a key in it
        path, message = f"{path}.{named}", message.split(": ", 1)[1]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    elif first["type"] == "literal_error":
        message = message.replace("Input should be", "must be one of")
    return ScenarioError(f"{prefix}{path}" or "scenario", message)


def load_text(text: str, quick: bool = False, source: str = "scenario", base_dir: Path | None = None) -> Plan:
    """Parse, apply `quick` overrides if asked, expand the sweep, validate every point. Files the
    scenario names (a timeline's traces) are read from `base_dir`, the scenarios folder."""
    context = {"base_dir": base_dir}
    if len(text.encode()) > limits.SCENARIO_BYTES:
        raise ScenarioError(source, f"is {len(text.encode())} bytes; at most {limits.SCENARIO_BYTES} (limit scenario)")
    try:
        raw = yaml_text.parse(text)  # measured before it is built (#54: merge keys expanded to an OOM)
    except yaml_text.YamlRefused as error:
        raise ScenarioError(source, str(error)) from None
    if not isinstance(raw, dict):
        raise ScenarioError(source, "must be a mapping of keys")
    raw = copy.deepcopy(raw)
    sweep = raw.pop("sweep", None) or {}
    quick_overrides = raw.pop("quick", None) or {}
    if not isinstance(sweep, dict):
        raise ScenarioError("sweep", "must map dotted keys to lists of values")
    if not isinstance(quick_overrides, dict):
        raise ScenarioError("quick", "must map dotted keys to values")
    if quick:
        quick_overrides = copy.deepcopy(quick_overrides)
        sweep = {**sweep, **(quick_overrides.pop("sweep", None) or {})}
        for dotted, value in quick_overrides.items():
            _set(raw, dotted, value)
    for dotted, values in sweep.items():
        if dotted not in SWEEPABLE:
            raise ScenarioError(f"sweep.{dotted}", f"cannot be swept; sweepable keys: {', '.join(SWEEPABLE)}")
        if not isinstance(values, list) or not values:
            raise ScenarioError(f"sweep.{dotted}", "must be a non-empty list")
    try:
        base = Scenario.model_validate(raw, context=context)
    except ValidationError as error:
        raise _format_errors(error) from None
    if base.reference is not None:
        keyed = [(f"reference.figures.{i}", [f.by, *f.at]) for i, f in enumerate(base.reference.figures)]
        keyed += [(f"reference.shapes.{i}", shape.keys()) for i, shape in enumerate(base.reference.shapes)]
        for where, keys in keyed:
            for key in keys:
                # a swept key, or a key inside one swept as whole sections (replicator.kind of `replicator`)
                if key not in sweep and not any(key.startswith(f"{swept}.") for swept in sweep):
                    raise ScenarioError(where, f"{key} is not a swept key (swept: {', '.join(sweep) or 'none'})")
    search = base.search
    if search is not None:
        _check_search(search, sweep, base)
    # The plan's size before any of it is built: three lists of 1000 values would be 10^9 points.
    size = math.prod(len(values) for values in sweep.values())
    probes = search.knee_search().most_probes() if search is not None else 1
    if size * probes > limits.POINTS:
        counts = " x ".join(str(len(v)) for v in sweep.values()) or "1"
        raise ScenarioError(
            "sweep",
            f"{counts} values{f' x {probes} probes' if search is not None else ''} = {size * probes} points; "
            f"at most {limits.POINTS} in one run (limit points): split it into several runs",
        )
    points = []
    for index, combo in enumerate(itertools.product(*sweep.values()) if sweep else [()]):
        params = dict(zip(sweep, combo, strict=True))
        tree = copy.deepcopy(raw)
        for dotted, value in params.items():
            _set(tree, dotted, value)
        try:
            # A search's either end, checked at every sweep point before anything runs.
            ends = [search.low, search.high] if search is not None else [None]
            for end in ends:
                if end is not None:
                    _set(tree, search.param, search.value(search.number(end)))
                scenario = Scenario.model_validate(tree, context=context)
            points.append(Point(index=index, params=params, scenario=scenario, tree=tree))
        except ValidationError as error:
            raise _format_errors(error, prefix=f"sweep point {index + 1} ({_describe(params)}): ") from None
    return Plan(scenario=base, sweep=sweep, points=points, quick=quick, base_dir=base_dir)


def _check_search(search: Search, sweep: dict, base: Scenario) -> None:
    """What a search needs of the rest of the file."""
    if search.param in sweep:
        raise ScenarioError(f"sweep.{search.param}", "is searched (search.param): leave it out of the sweep")
    kinds = [base.replicator.kind] + [
        v.get("kind", "native") if isinstance(v, dict) else v for v in sweep.get("replicator", [])
    ] + list(sweep.get("replicator.kind", []))  # fmt: skip
    for kind in kinds:
        if kind in KINDS and not KINDS[kind].records_lag:
            raise ScenarioError("search", f"decides on the heartbeat's lag slope, which {kind} does not record")
    if base.load.tool != "sysbench":
        raise ScenarioError("search", "needs a load that runs for load.duration (sysbench)")
    if search.param == "link.rate" and base.link.matrix is not None:
        raise ScenarioError("search.param", "link.rate with a matrix: the matrix sets every link's rate")


def load_file(path: Path, quick: bool = False) -> Plan:
    """A scenario file; the files it names are under its scenarios folder: its own folder, or for one in
    scenarios/tickets/ (`scenario new`'s) the scenarios folder above it, as the controller reads them."""
    folder = Path(path).resolve().parent
    base = folder.parent if folder.name == "tickets" else folder
    return load_text(Path(path).read_text(), quick=quick, source=str(path), base_dir=base)


def _describe(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "no sweep"


def describe_point(point: Point) -> str:
    """The point's swept values in a reader's words (`--plan`, the run's progress and events)."""
    from laglab.scenarios.report import words

    return words.params(point.params) if point.params else "no sweep"
