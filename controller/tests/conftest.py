import pytest

from laglab.app import create_app


@pytest.fixture
def app():
    return create_app({"TESTING": True, "START_RECORDER": False, "START_SHAPING": False}, environ={})


@pytest.fixture
def client(app):
    return app.test_client()
