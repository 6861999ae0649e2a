"""DTLE (ActionTech): the two agents' Nomad configuration and the replication job.

Two agents, `dtle-src` (Nomad server + client, near the source) and `dtle-dst` (client only, near the
target), with Consul beside them. The shipped config binds the dtle API and NATS to 127.0.0.1; a lab
with two agents must bind 0.0.0.0 and advertise the service name, or the agents cannot reach each
other (NATS on 8193 is the data path between them). Formats: etc/dtle/nomad.hcl and
scripts/example.job.hcl of the dtle repository; the job is POSTed to Nomad's /v1/jobs as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JobOptions:
    """The knobs the reference experiments turned (defaults are dtle's)."""

    group_max_size: int = 1  # bytes, not transactions
    group_timeout_ms: int = 100
    repl_chan_buffer_size: int = 32
    chunk_size: int = 2000
    gtid: str = ""  # "" = full copy, then incremental


def agent_config(name: str, server: bool, consul: str = "consul:8500") -> str:
    """nomad.hcl for one agent; `name` is its compose service (also its Nomad node name)."""
    server_block = (
        "server {\n  enabled          = true\n  bootstrap_expect = 1\n}\n"
        if server
        else "server {\n  enabled = false\n}\n"
    )
    return f"""# Rendered by laglab for the {name} agent ({"server + client" if server else "client only"}).
name       = "{name}"
datacenter = "dc1"
data_dir   = "/dtle/var/lib/nomad"
plugin_dir = "/dtle/usr/share/dtle/nomad-plugin"
bind_addr  = "0.0.0.0"
log_level  = "Info"
disable_update_check = true

ports {{
  http = 4646
  rpc  = 4647
  serf = 4648
}}
advertise {{
  http = "{name}:4646"
  rpc  = "{name}:4647"
  serf = "{name}:4648"
}}

{server_block}
client {{
  enabled = true
  options = {{
    "driver.blacklist" = "docker,exec,java,mock,qemu,rawexec,rkt"
  }}
}}

consul {{
  address = "{consul}"
}}

plugin "dtle" {{
  config {{
    data_dir        = "/dtle/var/lib/nomad"
    nats_bind       = "0.0.0.0:8193"
    nats_advertise  = "{name}:8193"
    consul          = ["{consul}"]
    api_addr        = "0.0.0.0:8190"
    nomad_addr      = "{name}:4646"
    publish_metrics = true
    stats_collection_interval = 5
  }}
}}
"""


def _connection(host: str, port: int, user: str, password: str) -> dict:
    return {"Host": host, "Port": port, "User": user, "Password": password}


def job(
    job_id: str,
    schemas: list[str],
    source: tuple[str, int, str, str],
    target: tuple[str, int, str, str],
    options: JobOptions = JobOptions(),
    src_node: str = "dtle-src",
    dst_node: str = "dtle-dst",
) -> dict:
    """The body of POST /v1/jobs: task groups `src` and `dest` pinned to their agents."""

    def group(name: str, node: str, config: dict) -> dict:
        return {
            "Name": name,
            "Count": 1,
            "Constraints": [{"LTarget": "${node.unique.name}", "RTarget": node, "Operand": "="}],
            "Tasks": [{"Name": name, "Driver": "dtle", "Config": config}],
            "RestartPolicy": {"Interval": 600_000_000_000, "Attempts": 3, "Delay": 15_000_000_000, "Mode": "delay"},
        }

    src_config = {
        "ReplicateDoDb": [{"TableSchema": schema} for schema in schemas],
        "GroupMaxSize": options.group_max_size,
        "GroupTimeout": options.group_timeout_ms,
        "ReplChanBufferSize": options.repl_chan_buffer_size,
        "ChunkSize": options.chunk_size,
        "DropTableIfExists": False,
        "Gtid": options.gtid,
        "SrcConnectionConfig": _connection(*source),
        "DestConnectionConfig": _connection(*target),
    }
    return {
        "Job": {
            "ID": job_id,
            "Datacenters": ["dc1"],
            "TaskGroups": [group("src", src_node, src_config), group("dest", dst_node, {"DestType": "mysql"})],
        }
    }


def group_timeout_for(one_way_delay_ms: float) -> int:
    """The reference's rule for a delayed link: GroupTimeout = 2 x one-way delay - 10 ms (at least dtle's 100)."""
    return max(100, round(2 * one_way_delay_ms - 10))
