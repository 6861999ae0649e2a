"""The platform seam: every implementation (and the one fake) answers the whole interface, with the
interface's parameters; the registry names what it knows."""

import inspect

import pytest

from laglab import platforms
from laglab.platforms.base import Platform
from laglab.platforms.docker import DockerPlatform
from laglab.platforms.kubernetes import KubernetesPlatform

from .fakes import FakePlatform

METHODS = [n for n, v in vars(Platform).items() if callable(v) and not n.startswith("_")]


@pytest.mark.parametrize("implementation", [DockerPlatform, KubernetesPlatform, FakePlatform])
def test_an_implementation_answers_the_whole_interface(implementation):
    assert {"list", "running", "exec", "act", "state", "owns", "bridge"} <= set(METHODS)
    for name in METHODS:
        ours, theirs = inspect.signature(getattr(Platform, name)), inspect.signature(getattr(implementation, name))
        assert list(theirs.parameters) == list(ours.parameters), f"{implementation.__name__}.{name}"


def test_the_registry_creates_docker_and_names_what_it_knows():
    assert isinstance(platforms.create("docker", "laglab"), DockerPlatform)
    with pytest.raises(platforms.PlatformError, match="platform: 'k8s' is not one of docker"):
        platforms.create("k8s", "laglab")


def test_a_service_not_running_is_named_with_the_hint():
    fake = FakePlatform.running_services("mysql-source")
    with pytest.raises(platforms.PlatformError, match=r"dm-master not running \(make up PROFILE=dm\)"):
        fake.running("mysql-source", "dm-master", hint="make up PROFILE=dm")


def test_docker_places_every_service_on_the_engines_host_asking_once():
    from .fakes import FakeDocker

    docker = FakeDocker(
        {"a" * 64: {"service": "mysql-source", "pid": 1101}, "b" * 64: {"service": "loadgen", "pid": 1102}}
    )
    platform = DockerPlatform("laglab", client=docker)
    assert platform.nodes() == {"mysql-source": "lab-host", "loadgen": "lab-host"}
    platform.nodes()
    assert docker.infos == 1
