"""Request and response bodies of the controller's API, as pydantic models: the same classes validate
what comes in and generate the OpenAPI document (laglab/api/openapi.py), so the two cannot disagree.

Request models forbid unknown fields; a value the model refuses is a 400 naming the field. A value the
model accepts but the lab cannot use (out of range, against a rule across fields) is a 422.
Response models list every field the API returns; nested read-backs from the kernel stay open objects.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, create_model

from laglab import limits
from laglab.faults import ACTIONS
from laglab.load.generator import SCRIPTS
from laglab.load.replay import SPEED, WriteProfile
from laglab.measurement.captures import SNAPLEN, SNAPLEN_RANGE
from laglab.shaping.impairment import KNOBS
from laglab.shaping.matrix import PortItem, integral
from laglab.shaping.params import (
    DIRECTIONS,
    DISTRIBUTIONS,
    PERCENT_PATTERN,
    RATE_PATTERN,
    SERVICE_PATTERN,
    TIME_PATTERN,
)
from laglab.shaping.plan import SEED_MAX
from laglab.shaping.ports import MULTIPORT_SLOTS, PROTOCOLS

Service = Annotated[str, Field(pattern=SERVICE_PATTERN, description="a compose service of this lab")]
Int = Annotated[int, BeforeValidator(integral)]
Time = Annotated[
    str,
    Field(pattern=TIME_PATTERN, description="'125ms', '1.5s', '500us': the unit is required (us, ms, s)"),
]
Percent = Annotated[
    Annotated[str, Field(pattern=PERCENT_PATTERN)] | Annotated[float, Field(ge=0, le=100)],
    Field(description="'0.5%' or 0.5 (meaning 0.5 %)"),
]
# The patterns' messages: what a 400 says when a value is not of the form its field wants.
PATTERN_MESSAGES = {
    TIME_PATTERN: "{value!r} is not a time with its unit, like '20s' or '125ms' (units: us, ms, s, m, h)",
    PERCENT_PATTERN: "{value!r} is not a percentage",
    RATE_PATTERN: "{value!r} is not a rate (units: kbit, Mbit/s, Mbps or mbit = megabits; MB/s = megabytes)",
    SERVICE_PATTERN: "{value!r} is not a service name",
    r"\S": "must not be empty",
}


class Body(BaseModel):
    # strict: a JSON body's types are what the document says ("true" is not a boolean, "5" no number)
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, regex_engine="python-re")


class Query(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, regex_engine="python-re")


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


# --- queries ---
class LagQuery(Query):
    seconds: float = Field(
        30, ge=0, le=86400, description="window length; more than the recorder keeps gives all it keeps"
    )
    since: float = Field(0, ge=0, le=1e11, description="only samples after this epoch")
    replica: Service | None = Field(
        None, description="a cluster member (gr-node2, galera-node3); default: mysql-target"
    )


class EventsQuery(Query):
    since: float = Field(0, ge=0, le=1e11, description="only events after this epoch")


class ConsistencyQuery(Query):
    timeout: float = Field(30, ge=1, le=600, description="seconds to wait for the target")


class PeerQuery(Query):
    peer: Service | None = Field(None, description="only the link to this service")


class ReadbackQuery(Query):
    readback: bool = Field(
        False, description="also read the kernel back (tc, iptables, worker) in the answer; GET always does"
    )


# --- bodies ---
class GeModel(Body):
    """netem's `loss gemodel p [r [1-h [1-k]]]`, one to one (defaults as netem's: r = 1 - p, 1-h = 100 %,
    1-k = 0 %)."""

    p: Percent = Field(description="good -> bad")
    r: Percent | None = Field(None, description="bad -> good")
    one_minus_h: Percent | None = Field(None, alias="1-h", description="loss in the bad state")
    one_minus_k: Percent | None = Field(None, alias="1-k", description="loss in the good state")


Gap = Annotated[
    int,
    BeforeValidator(integral),
    Field(ge=1, le=1000),
    # (the range spelled out for the document too: after a BeforeValidator pydantic writes "ge"/"le",
    # which JSON Schema does not know, and 0 was schema-valid)
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": 1000}),
]
Seed = Annotated[
    int,
    BeforeValidator(integral),
    Field(ge=0, le=SEED_MAX),
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": SEED_MAX}),  # (as Gap's, for the same reason)
]
# A knob's kind (laglab.shaping.impairment.KNOBS) -> the type of its field in a body.
KNOB_TYPES = {
    "time": Time,
    "percent": Percent,
    "rate": Annotated[str, Field(pattern=RATE_PATTERN)],
    "choice": Literal[DISTRIBUTIONS],  # type: ignore[valid-type]
    "gemodel": GeModel,
    "count": Gap,
}


class _Shaping(Body):
    """PUT /api/shaping/<service>: netem's words, tc's units. Ranges and rules across fields are
    checked after this (422): laglab.shaping.params.parse_request. The knobs' fields come from
    laglab.shaping.impairment.KNOBS."""

    peer: Service | None = Field(None, description="only the link to this service")
    direction: Literal[DIRECTIONS] = "egress"  # type: ignore[valid-type]
    duration: Time | None = Field(None, examples=["60s"], description="revert by itself after this long (1s..24h)")
    ports: list[PortItem] | None = Field(
        None, min_length=1, max_length=MULTIPORT_SLOTS, examples=[[3306]],
        description="only the link's packets to or from these ports (a range as '4567-4568'); absent: all of them",
    )  # fmt: skip
    protocol: Literal[PROTOCOLS] | None = Field(None, description="with ports: only tcp or udp (default both)")  # type: ignore[valid-type]


ShapingBody = create_model(
    "ShapingBody",
    __base__=_Shaping,
    __doc__=_Shaping.__doc__,
    **{
        k.name: (KNOB_TYPES[k.kind] | None, Field(None, description=k.help, examples=[k.example] if k.example else None))
        for k in KNOBS
    },
)  # fmt: skip


class LoadBody(Body):
    script: Literal[SCRIPTS] = "oltp_write_only"  # type: ignore[valid-type]
    rate: Int = Field(100, ge=0, le=100000, description="TPS; 0 = unlimited")
    threads: Int = Field(4, ge=1, le=256)
    seconds: Int = Field(600, ge=1, le=86400)
    tables: Int = Field(4, ge=1, le=64)
    rows: Int = Field(10000, ge=1, le=1000000)
    prepare: bool = Field(False, description="sysbench cleanup + prepare first")
    profile: WriteProfile | None = Field(
        None,
        description="replay this write profile (what `laglab profile BINLOG` writes) instead of a sysbench script: "
        "its transactions per second, sizes and parallelism (script, rate, threads, tables and rows are not used)",
    )
    profile_name: str = Field("profile", max_length=200, pattern=r"^[^\x00-\x1f]*$", description="the profile's file name, for the status")  # fmt: skip
    speed: float = Field(1.0, ge=SPEED[0], le=SPEED[1], description="a replay's clock: 2 = twice as fast")


class FaultBody(Body):
    service: Service
    action: Literal[tuple(ACTIONS)]  # type: ignore[valid-type]
    duration: Time | None = Field(
        None, examples=["20s"], description="undo this long after it took effect (not for restart)"
    )


class PartitionBody(Body):
    a: list[Service] = Field(min_length=1, max_length=32)
    b: list[Service] = Field(min_length=1, max_length=32)
    oneway: bool = Field(False, description="only a -> b is cut; b still reaches a")
    duration: Time | None = Field(None, examples=["60s"], description="heal after this long")
    ports: list[PortItem] | None = Field(
        None, min_length=1, max_length=MULTIPORT_SLOTS,
        description="only the packets to or from these ports are cut (a range as '4567-4568'); absent: every packet",
    )  # fmt: skip
    protocol: Literal[PROTOCOLS] | None = Field(None, description="with ports: only tcp or udp (default both)")  # type: ignore[valid-type]


class RunBody(Body):
    scenario: str | None = Field(
        None, pattern=r"\S", max_length=limits.SCENARIO_BYTES, description="the scenario file's YAML text"
    )
    file: str | None = Field(
        None,
        pattern=r"^[a-z0-9][a-z0-9-]{0,62}\.yaml$",
        description="or a shipped scenario by file name (GET /api/scenarios)",
    )
    quick: bool = False
    seed: Seed | None = Field(
        None, description="the links' seed for this run, over the scenario's `seed:` (the same packets dropped in the same order)",
    )  # fmt: skip
    on_lab_servers: bool = Field(
        False, description="a scenario pinned to server versions (`servers:`) runs on the lab's servers anyway; environment.json and the report say which ran in their place",
    )  # fmt: skip


class CaptureBody(Body):
    # No example: the fuzzer's example phase sends it as it is (a capture of the lab's real link).
    link: list[Service] = Field(min_length=2, max_length=2,
                                description="the two services whose link is captured, each side in its own pcap")  # fmt: skip
    for_: Time = Field("30s", alias="for", examples=["30s"],
                       description=f"how long (at most {limits.CAPTURE_SECONDS} s, limit capture_seconds)")  # fmt: skip
    max_bytes: Int = Field(limits.CAPTURE_BYTES, ge=1, le=limits.CAPTURE_BYTES,
                           description="each side's pcap at most (the capture stops when one reaches it)")  # fmt: skip
    snaplen: Int = Field(
        SNAPLEN,
        ge=SNAPLEN_RANGE[0],
        le=SNAPLEN_RANGE[1],
        description="bytes kept of each packet: headers, not the rows",
    )


class VerifyBody(Body):
    from_: Service = Field(alias="from")
    to: Service
    count: Int = Field(20, ge=20, le=1000, description="pings")
    seconds: Int = Field(3, ge=1, le=60, description="iperf3 seconds per direction")
    streams: Int = Field(1, ge=1, le=16)
    throughput: bool = Field(True, description="false: RTT only")


# --- responses ---
class Error(BaseModel):
    error: str = Field(description="what is wrong, starting with the field it is about")
    status: int


class LagSample(Out):
    time: str = Field(description="UTC, ISO 8601, microseconds")
    epoch: float
    status: Literal["ok", "gap"]
    reason: str | None = Field(description="why the sample is a gap")
    lag_seconds: float | None = Field(description="age of the oldest heartbeat not yet on the target; 0 when caught up")
    heartbeat_age_seconds: float | None = Field(description="target now - newest heartbeat on the target")
    heartbeat_seq: int | None
    seconds_behind_source: int | None
    applier_lag_seconds: float | None = Field(description="MySQL: end of apply - original commit")
    transit_seconds: float | None = Field(
        None, description="MySQL, newest applied transaction: original commit -> queued in the relay log"
    )
    queue_seconds: float | None = Field(None, description="queued -> apply started")
    apply_seconds: float | None = Field(None, description="apply started -> ended")
    io_running: str | None
    sql_running: str | None
    replica: str | None = Field(None, description="the node the sample is of")
    certifier_queue: int | None = Field(None, description="GR: transactions waiting for certification")
    applier_queue: int | None = Field(
        None, description="GR: certified, waiting to apply; Galera: wsrep_local_recv_queue"
    )
    flow_control: float | None = Field(None, description="GR: throttled now (0/1); Galera: wsrep_flow_control_paused")


class LagWindow(Out):
    latest: LagSample | None
    replicas: dict[str, LagSample] = Field(description="every recorded replica's latest sample (cluster members too)")
    interval_ms: int
    csv: str
    window_seconds: float
    samples: list[LagSample]
    split_unavailable: str | None = Field(
        None, description="why this replica's lag split (transit, queue, apply) is not measured: its server has no "
        "per-transaction applier timestamps (MariaDB, MySQL before 8.0.1); null where it is, or not yet known",
    )  # fmt: skip


class LabProblem(Out):
    problem: str = Field(description="what is wrong, as a short key (e.g. dtle-hand-back)")
    message: str
    repair: str = Field(description="the one command that repairs it")
    since: float = Field(description="epoch seconds")


class Health(Out):
    """Without the token only `status` and `authenticated` (a probe learns the controller answers)."""

    status: Literal["ok"]
    authenticated: bool = Field(description="the request carried the token; without it the rest is left out")
    problems: list[LabProblem] | None = Field(None, description="what a person must repair now (empty: nothing)")
    restart: dict | None = Field(
        None,
        description="what this controller found at its start and put right: faults undone or re-armed, a run "
        "that a crash interrupted, a state file set aside",
    )
    flavor_setting: str | None = None
    run: str | None = None
    platform: dict | None = Field(
        None,
        description="where the services run: name (docker or kubernetes) and project (compose project or namespace)",
    )
    shaping: dict | None = None
    counters: dict | None = Field(
        None, description="link counters: kind (Counters: the bridge; PodCounters: each pod's loop), last_error"
    )
    recorder: dict | None = None
    token: str | None = Field(None, description="where the API's token came from (LAB_API_TOKEN or generated)")


class TableSummary(Out):
    table: str
    source: dict | None
    target: dict | None
    identical: bool


class Consistency(Out):
    identical: bool
    flavor: str
    gtid: dict
    tables: list[TableSummary]
    differences: list[str]


class ClusterNode(Out):
    service: str
    reachable: bool
    ok: bool | None = None
    state: str | None = Field(None, description="GR MEMBER_STATE or wsrep_local_state_comment")
    role: str | None = Field(None, description="GR: PRIMARY or SECONDARY")
    cluster_size: int | None = Field(None, description="Galera: wsrep_cluster_size")
    component: str | None = Field(None, description="Galera: wsrep_cluster_status")
    error: str | None = None


class Cluster(Out):
    cluster: str
    formed: bool
    nodes: list[ClusterNode]


class Clusters(Out):
    clusters: dict[str, Cluster | None] = Field(description="null: that profile is not running")


class DesiredShaping(Out):
    peer: str | None
    direction: Literal["egress", "ingress", "both"]
    ports: str | None = Field(None, description="only these ports' packets ('3306,4567-4568', '/tcp' for one protocol)")
    expires_in: str | None = None


class ServiceShaping(Out):
    service: str
    backend: str
    desired: list[DesiredShaping]
    kernel: dict[str, dict] | None = Field(
        description="read back from each namespace involved: tc, iptables, worker (null in a PUT's answer "
        "unless ?readback=1: the change is in effect when the answer comes; reading it back costs tens of ms)"
    )


class AllShaping(Out):
    backend: str
    shaping: list[ServiceShaping]


class Container(Out):
    service: str
    container: str
    id: str
    pid: int
    ip: str | None
    running: bool
    shapeable: bool = Field(description="false: the lab's apparatus or a set-up job (label laglab.shaped=never)")
    shaping: list[DesiredShaping]


class Containers(Out):
    containers: list[Container]


class Links(Out):
    csv: str
    latest: list[dict]


class Verified(Out):
    from_: str = Field(alias="from")
    to: str
    backend: str
    requested: dict
    measured: dict


class Event(Out):
    epoch: float
    time: str
    kind: str
    text: str


class Events(Out):
    events: list[Event]


class LoadStatus(Out):
    running: bool
    stopping: bool
    owner: str | None = Field(description="'panel' or the scenario run using the load generator")
    pid: int | None = Field(description="sysbench's process id as the host sees it")
    profile: dict | None
    started: str | None
    seconds: int | None
    latest: dict | None
    error: str | None


class RunOutcome(Out):
    verdict: Literal["PASS", "FAIL", "NOT VALID", "NO CHECKS", "INTERRUPTED", "FAILED", "RUNNING", "PENDING"] = Field(
        description="NOT VALID: a point did not measure what was asked (link, load or a timeline step); "
        "a run that did not finish: its status"
    )
    held: bool = Field(description="PASS or NO CHECKS: `laglab run` exits 0")
    reasons: list[str] = Field(description="why, in words")
    checks: int = Field(description="assertions and a search's expectations judged")
    failed: int


class Run(Out):
    id: str
    scenario: str
    status: Literal["pending", "running", "completed", "failed", "interrupted"]
    reason: str | None
    points: int
    point: int | None
    point_params: dict | None
    point_words: str | None = Field(
        None, description="the point's parameters in words, with units (RTT 250 ms, 300 TPS)"
    )
    step: str
    elapsed_seconds: float
    eta_seconds: float
    results: str
    summary: list[dict] | None
    knees: list[dict] = Field(
        [], description="a search's answer per sweep point: knee, bracket, probes, state (empty without a search)"
    )
    seed: int | None = Field(None, description="the links' seed of this run (asked, or drawn for `random`)")
    outcome: RunOutcome | None = Field(
        None, description="what the run came to, decided once (report.md and `laglab run` read it)"
    )
    links: dict[str, str] | None = Field(
        None, description="GET /api/runs: report files as signed links a browser opens without the token (12 h)"
    )


class CaptureFile(Out):
    file: str
    bytes: int
    captured: int | None = Field(description="tcpdump's count, once it ended")
    received_by_filter: int | None
    dropped_by_kernel: int | None
    link: str | None = Field(None, description="the file as a signed link a browser opens without the token (12 h)")


class Capture(Out):
    id: str
    link: list[str]
    status: Literal["running", "done", "failed"]
    started: str
    ended: str | None
    seconds: float
    elapsed_seconds: float
    max_bytes: int
    snaplen: int
    stopped_by: Literal["duration", "size", "asked", "error"] | None = Field(description="why it ended")
    error: str | None
    folder: str = Field(description="where its files are, in the controller")
    results: str | None = Field(None, description="the same folder as the host sees it (results/...)")
    files: dict[str, CaptureFile] = Field(description="service -> its side's pcap")
    shaping: list[dict] = Field(description="what the link held at the start and at each change (shaping.csv)")
    links: dict[str, str] = Field({}, description="pcaps, shaping.csv and capture.json as signed links")


class Captures(Out):
    captures: list[Capture] = Field(description="running and recent, oldest first")


class Fault(Out):
    id: str
    service: str
    action: str
    duration_seconds: float | None
    asked: str = Field(description="when it was asked (UTC)")
    effect: str | None = Field(description="when the container's state showed it")
    effect_ms: float | None
    undo: str | None = Field(description="the action that undoes it after its duration")
    undone: str | None
    active: bool
    error: str | None


class Faults(Out):
    active: list[Fault]
    recent: list[Fault] = Field(description="newest first")


class Partition(Out):
    id: str
    a: list[str]
    b: list[str]
    oneway: bool
    expires_in: str | None
    ports: str | None = Field(None, description="only these ports' packets are cut ('3306', '/tcp' for one protocol)")


class Partitions(Out):
    partitions: list[Partition]


class MatrixState(Out):
    matrix: dict | None = Field(description="the matrix as set (null: none)")
    links: list[dict] = Field(description="the shaping it makes: service, peer, delay, ...")


class Presets(Out):
    sources: list[dict] = Field(description="each table's source and date")
    presets: dict[str, dict] = Field(description="name -> rtt, up/down rates; region pairs as 'a/b'")


class ScenarioFile(Out):
    file: str
    name: str | None
    description: str | None
    points: int | None
    timeline_steps: int | None
    error: str | None = Field(None, description="why the file does not validate")


class ScenarioFiles(Out):
    scenarios: list[ScenarioFile]


class Runs(Out):
    runs: list[Run]
