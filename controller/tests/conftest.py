import pytest

from laglab.app import create_app

TOKEN = "test-token-0123456789abcdef"


def authorized(app):
    """A test client that sends the app's token, as the laglab command does."""
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {app.config['API_TOKEN']}"
    return client


@pytest.fixture
def app(tmp_path):
    return create_app(
        {"TESTING": True, "START_RECORDER": False, "START_SHAPING": False, "STATE_DIR": str(tmp_path)},
        environ={"LAB_API_TOKEN": TOKEN},
    )


@pytest.fixture
def client(app):
    return authorized(app)
