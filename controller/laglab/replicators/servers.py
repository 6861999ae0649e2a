"""The server versions a scenario is about (`servers: {source: mysql:5.7, target: mysql:8.0}`): what an
image name promises, and whether the lab's running servers keep that promise. The lab is brought up
with them by `make up SOURCE_IMAGE=... TARGET_IMAGE=...` (scripts/images resolves, or builds the
Debian stand-in of the same version line, or says that none can be had here); a run on other versions
is refused, never run in their place."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pymysql

from laglab.errors import Kind, LabError
from laglab.replicators.db import Endpoint, parse_version, server_version

IMAGE = r"^[a-z0-9][a-z0-9._/:@-]{0,254}$"
ROLES = {"source": "mysql-source", "target": "mysql-target"}


@dataclass(frozen=True)
class Promise:
    """What an image name says of its server: the flavour and the leading parts of its version (none
    for `mysql:latest`)."""

    image: str
    flavor: str
    version: tuple[int, ...]

    @classmethod
    def of(cls, image: str) -> Promise:
        name, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
        flavor = "mariadb" if "mariadb" in name else "mysql"
        match = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", tag)
        version = tuple(int(part) for part in match.groups() if part is not None) if match else ()
        return cls(image, flavor, version)

    def kept_by(self, reported: str) -> bool:
        """Whether a server reporting `reported` (SELECT VERSION()) is what the image promises."""
        flavor = "mariadb" if "mariadb" in reported.lower() else "mysql"
        return flavor == self.flavor and parse_version(reported)[: len(self.version)] == self.version


def unkept(servers: dict[str, str | None], reported: dict[str, str]) -> list[str]:
    """For each role the scenario pins (`source`, `target`): why the running server is not that one.
    `reported`: the services' own versions (mysql-source, mysql-target)."""
    out = []
    for role, image in servers.items():
        if not image:
            continue
        service = ROLES[role]
        if not Promise.of(image).kept_by(reported[service]):
            out.append(f"servers.{role}: the scenario is about {image}, but {service} runs {reported[service]}")
    return out


def check(servers: dict[str, str | None], reported: dict[str, str]) -> None:
    """Raises CONFLICT naming the `make up` that brings the lab up with the pinned servers, and the
    override that runs on the lab's servers anyway (the report then says which ran in their place)."""
    problems = unkept(servers, reported)
    if problems:
        asked = " ".join(f"{role.upper()}_IMAGE={image}" for role, image in servers.items() if image)
        raise LabError(
            Kind.CONFLICT,
            "; ".join(problems)
            + f". Bring the lab up with them ({asked} in .env, then make clean && make up) and run again"
            " (docs/profiles.md, Versions: which versions this machine can run), or run it on these servers"
            " anyway: laglab run FILE --on-lab-servers (the report says which ran in their place).",
        )


def instead(servers: dict[str, str | None], reported: dict[str, str], images: dict[str, str | None]) -> list[dict]:
    """A run on the lab's servers in place of the pinned ones (--on-lab-servers): per role whose server
    is not the asked one, the service, the image asked, the version that ran and its image (a lab's
    `-debian` image is Debian's stand-in of another version line)."""
    out = []
    for role, image in servers.items():
        service = ROLES[role]
        if image and not Promise.of(image).kept_by(reported[service]):
            ran = images.get(service)
            out.append({"service": service, "asked": image, "ran": reported[service], "image": ran,
                        "stand_in": bool(ran and ran.endswith("-debian"))})  # fmt: skip
    return out


def reported(endpoints: list[Endpoint]) -> dict[str, str]:
    """The servers' own versions (SELECT VERSION()), by service."""
    out = {}
    for endpoint in endpoints:
        try:
            out[endpoint.name] = server_version(endpoint)
        except pymysql.MySQLError as error:
            raise LabError(
                Kind.UNAVAILABLE, f"{endpoint.name}: not answering, its version is unknown ({error})"
            ) from None
    return out
