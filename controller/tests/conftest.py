import pytest

TOKEN = "test-token-0123456789abcdef"


def authorized(app):
    """A test client that sends the app's token, as the laglab command does."""
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {app.config['API_TOKEN']}"
    return client


@pytest.fixture
def make_app(tmp_path):
    """The controller's app over a complete lab of fakes (tests/unit/fakes.py fake_app); keyword
    arguments replace parts of the lab."""
    from .unit.fakes import fake_app

    return lambda **given: fake_app(tmp_path, environ={"LAB_API_TOKEN": TOKEN}, **given)


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def client(app):
    return authorized(app)
