import socket

import pytest

from laglab import config


def test_defaults_without_env_file():
    settings = config.load({})
    assert settings.DB_FLAVOR == "mysql"
    assert settings.HEARTBEAT_INTERVAL_MS == 100
    assert settings.CONTROLLER_BIND == "127.0.0.1"
    assert settings.db_image == "mysql:8.4"


def test_environment_overrides_env_file():
    settings = config.load({"DB_FLAVOR": "mariadb"}, {"DB_FLAVOR": "mysql", "MARIADB_IMAGE": "mariadb:10.11"})
    assert settings.DB_FLAVOR == "mariadb"
    assert settings.db_image == "mariadb:10.11"


def test_empty_value_means_default():
    assert config.load({}, {"HEARTBEAT_INTERVAL_MS": ""}).HEARTBEAT_INTERVAL_MS == 100


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("DB_FLAVOR", "postgres", "DB_FLAVOR: 'postgres' is not a known flavour; use one of mysql, mariadb"),
        ("HEARTBEAT_INTERVAL_MS", "5", "HEARTBEAT_INTERVAL_MS: 5 is out of range 10..60000"),
        ("HEARTBEAT_INTERVAL_MS", "fast", "HEARTBEAT_INTERVAL_MS: 'fast' is not a whole number"),
        ("CONTROLLER_PORT", "70000", "CONTROLLER_PORT: 70000 is out of range 1..65535"),
        ("CONTROLLER_BIND", "localhost:1", "CONTROLLER_BIND: 'localhost:1' is not an IPv4 address"),
        ("MYSQL_IMAGE", "Bad Image", "MYSQL_IMAGE: 'Bad Image' is not an image reference"),
        ("REPL_PASSWORD", "a'b", "REPL_PASSWORD: must not contain quotes, backslashes, backticks, $ or newlines"),
        ("LAB_DATABASE", "lab-db", "LAB_DATABASE: 'lab-db' must be 1-32 letters, digits or underscores"),
    ],
)
def test_bad_values_name_the_variable(name, value, message):
    with pytest.raises(config.ConfigError) as caught:
        config.load({name: value})
    assert str(caught.value) == message
    assert caught.value.variable == name


def test_env_file_parsing(tmp_path):
    env = tmp_path / ".env"
    env.write_text(
        "# comment\n\nDB_FLAVOR=mariadb\nexport SOURCE_PORT=1234\nLAB_PASSWORD='x y'\nCONTROLLER_PORT=9000 # note\n"
    )
    assert config.read_env_file(env) == {
        "DB_FLAVOR": "mariadb",
        "SOURCE_PORT": "1234",
        "LAB_PASSWORD": "x y",
        "CONTROLLER_PORT": "9000",
    }


def test_env_file_syntax_error_names_the_line(tmp_path):
    env = tmp_path / ".env"
    env.write_text("DB_FLAVOR=mysql\nnot a line\n")
    with pytest.raises(config.ConfigError, match=r"\.env line 2: expected KEY=VALUE"):
        config.read_env_file(env)


def test_port_in_use_is_reported():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        settings = config.load({"TARGET_PORT": str(port)})
        others = {settings.CONTROLLER_PORT, settings.SOURCE_PORT}  # whatever holds them on this host
        errors = config.port_conflicts(settings, own_ports=others)
        assert [str(e) for e in errors] == [f"TARGET_PORT: port {port} is in use by another program"]
        assert config.port_conflicts(settings, own_ports={port, *others}) == []


def test_same_port_twice_is_reported():
    settings = config.load({"SOURCE_PORT": "20001", "TARGET_PORT": "20001"})
    errors = config.port_conflicts(settings, own_ports={20001, settings.CONTROLLER_PORT})
    assert [str(e) for e in errors] == ["TARGET_PORT: port 20001 is also SOURCE_PORT"]


def test_check_command_prints_shell_assignments(tmp_path, capsys, monkeypatch):
    env = tmp_path / ".env"
    env.write_text("MYSQL_ROOT_PASSWORD=a b\n")
    monkeypatch.delenv("MYSQL_ROOT_PASSWORD", raising=False)
    assert config.main(["check", "--env-file", str(env)]) == 0
    out = capsys.readouterr().out
    assert "MYSQL_ROOT_PASSWORD='a b'\n" in out
    assert "DB_FLAVOR=mysql\n" in out


def test_check_command_fails_with_the_variable(tmp_path, capsys, monkeypatch):
    env = tmp_path / ".env"
    env.write_text("DB_FLAVOR=oracle\n")
    monkeypatch.delenv("DB_FLAVOR", raising=False)
    assert config.main(["check", "--env-file", str(env)]) == 2
    assert "DB_FLAVOR: 'oracle' is not a known flavour" in capsys.readouterr().err


def test_settings_has_one_typed_attribute_per_variable():
    annotations = config.Settings.__annotations__
    assert list(annotations) == [v.name for v in config.VARIABLES]
    settings = config.load({})
    for var in config.VARIABLES:
        assert type(getattr(settings, var.name)).__name__ == annotations[var.name], var.name
    assert settings.HEARTBEAT_INTERVAL_MS == 100 and settings.db_image == "mysql:8.4"


@pytest.mark.parametrize("token", ["short", "s3cret", "has a space in it 0123", "quote'quote'quote'quote"])
def test_a_short_or_odd_token_is_refused(token):
    with pytest.raises(config.ConfigError) as caught:
        config.load({"LAB_API_TOKEN": token})
    assert caught.value.variable == "LAB_API_TOKEN" and "16" in str(caught.value)
