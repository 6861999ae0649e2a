"""The write profile read from a binlog (laglab/load/binlog_profile.py), against the real tools' output:
tests/unit/fixtures/binlog/mysql-9.7.4-row.txt is `mysqlbinlog -vv --base64-output=decode-rows` 9.7.4-2
(Debian's, the lab's MySQL image) on a binlog written by its server for five transactions (CREATE
DATABASE, CREATE TABLE, one INSERT, a transaction of two INSERTs and an UPDATE, one DELETE);
mysql-9.7.4-errors.txt is the same mysqlbinlog's stderr on a text file, that binlog cut at 1100 bytes,
and a file that starts with an encrypted binlog's magic (0xfd 'bin'). mariadb-11.8.9-row.txt and
mariadb-11.8.9-errors.txt: MariaDB 11.8.9's server and `mariadb-binlog` (Debian's, the lab's 11.8 image)
for the same statements, a text file and that binlog cut at 1100 bytes."""

from pathlib import Path

import pytest

from laglab.load.binlog_profile import BinlogError, Reader, check, profile

FIXTURES = Path(__file__).parent / "fixtures" / "binlog"


def read(name: str) -> Reader:
    return Reader(name).feed((FIXTURES / name).read_text().splitlines())


def test_mysqls_binlog_gives_each_transaction_its_size_rows_and_clock():
    reader = read("mysql-9.7.4-row.txt")
    assert reader.server == "9.7.4-2"
    # transaction_length as the server wrote it in each GTID event
    assert [t.bytes for t in reader.transactions] == [185, 278, 304, 763, 597]
    assert [t.rows for t in reader.transactions] == [0, 0, 1, 3, 1]
    assert [t.statements for t in reader.transactions] == [1, 1, 1, 2, 1]
    assert [t.ddl for t in reader.transactions] == [True, True, False, False, False]
    assert [(t.last_committed, t.sequence_number) for t in reader.transactions] == [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 4),
        (4, 5),
    ]
    assert reader.transactions[0].epoch == 1795839452.123951  # immediate_commit_timestamp, in microseconds


def test_the_profile_keeps_the_shape_and_none_of_the_rows():
    made = profile([read("mysql-9.7.4-row.txt")])
    assert (made["transactions"], made["bytes"], made["rows"], made["ddl"], made["format"]) == (5, 2127, 5, 2, "row")
    assert made["transaction_bytes"]["max"] == 763 and made["transaction_rows"]["max"] == 3
    assert made["tables"] == [{"name": "shop.orders", "columns": 4, "rows": 5, "row_bytes": 172.2,
                               "kinds": {"insert": 3, "update": 1, "delete": 1}}]  # fmt: skip
    # row bytes: the row events (58 + 370 + 82 + 351 bytes by their positions) over their 5 rows
    assert made["parallelism"] == {"source": "last_committed/sequence_number", "mean": 1.0, "max": 1}
    assert made["large"]["count"] == 0 and sum(c for _, c in made["size_histogram"]) == 5
    text = str(made)
    assert "alice" not in text and "xxxx" not in text and "10.50" not in text  # no row value leaves it
    hidden = profile([read("mysql-9.7.4-row.txt")], anonymize=True)
    assert "shop" not in str(hidden["tables"]) and hidden["tables"][0]["name"].count("t_") == 2


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (0, "not a binary log file"),
        (1, "damaged or truncated"),
        (3, "an encrypted binary log"),
    ],
)
def test_mysqlbinlogs_errors_name_the_file_and_the_offset(line, words):
    said = (FIXTURES / "mysql-9.7.4-errors.txt").read_text().splitlines()
    lines = said[line : line + 2] if line == 1 else [said[line]]
    reader = Reader("binlog.000002").feed(lines)
    with pytest.raises(BinlogError) as caught:
        check("binlog.000002", reader, returncode=1)
    message = caught.value.message
    assert message.startswith("file: binlog.000002: " + words), message
    assert ("at offset 1075:" if line == 1 else "offset 0") in message


def test_a_file_with_no_transaction_is_refused():
    with pytest.raises(BinlogError, match="no transaction"):
        profile(
            [
                Reader("empty").feed(
                    [
                        "# at 4",
                        "#261128  4:17:31 server id 1  end_log_pos 127 CRC32 0x5dc5bd2d \tStart: binlog v 4, server v 9.7.4-2 created 261128",
                    ]
                )
            ]
        )


def test_the_flavour_is_read_from_the_servers_own_header(tmp_path):
    """mysql-9.7.4-head.bin: the first 80 bytes of a binlog MySQL 9.7.4 wrote (magic 0xfe 'bin', then its
    Format_description event with the server version at byte 25). MariaDB writes its own version
    there ('10.11.6-MariaDB-...'): the same bytes with that version are read as MariaDB's."""
    from laglab.load.binlog_profile import VERSION_AT, decoder_argv, written_by

    head = (FIXTURES / "mysql-9.7.4-head.bin").read_bytes()
    assert head[VERSION_AT : VERSION_AT + 7] == b"9.7.4-2"
    mysql, mariadb = tmp_path / "binlog.000001", tmp_path / "mariadb-bin.000001"
    mysql.write_bytes(head)
    mariadb.write_bytes(head[:VERSION_AT] + b"10.11.6-MariaDB-0+deb12u1-log".ljust(50, b"\0") + head[VERSION_AT + 50 :])
    assert (written_by(mysql), written_by(mariadb)) == ("mysql", "mariadb")
    images = {"mysql": "laglab/mysql:9.7-debian", "mariadb": "laglab/loadgen:dev"}
    assert decoder_argv(mariadb, "mariadb", images, lambda tool: None) == [
        "docker", "run", "--rm", "--network", "none", "-v", f"{tmp_path}:/binlogs:ro", "laglab/loadgen:dev",
        "mariadb-binlog", "-vv", "--base64-output=decode-rows", "/binlogs/mariadb-bin.000001",
    ]  # fmt: skip
    assert decoder_argv(mysql, "mysql", images, lambda tool: f"/usr/bin/{tool}")[:1] == ["mysqlbinlog"]


def test_a_missing_file_is_named():
    from laglab.load.binlog_profile import read_file

    with pytest.raises(BinlogError, match=r"file: /nonexistent/binlog\.000001: no such file"):
        read_file("/nonexistent/binlog.000001", {})


def test_mariadbs_binlog_reads_the_same_workload_the_same_way():
    """MariaDB writes `GTID 0-1-N ddl|trans`, the DDL's Query with a lowercase xid, Annotate_rows, and
    end_log_pos 0 for the events inside a transaction: sizes come from the positions."""
    reader = read("mariadb-11.8.9-row.txt")
    assert reader.server == "11.8.9-MariaDB-0+deb13u1"
    assert [t.ddl for t in reader.transactions] == [True, True, False, False, False]
    assert [t.rows for t in reader.transactions] == [0, 0, 1, 3, 1]
    assert [t.statements for t in reader.transactions] == [1, 1, 1, 2, 1]
    assert [t.bytes for t in reader.transactions] == [129, 229, 290, 841, 538]  # `# at` GTID to the last end_log_pos
    made = profile([reader])
    assert made["tables"][0]["kinds"] == {"insert": 3, "update": 1, "delete": 1} and made["tables"][0]["columns"] == 4
    assert made["tables"][0]["row_bytes"] > 0 and made["parallelism"] is None  # no group commit recorded (no cid)


@pytest.mark.parametrize(("line", "words"), [(0, "not a binary log file"), (1, "damaged or truncated at offset 1065")])
def test_mariadb_binlogs_errors_name_the_file_and_the_offset(line, words):
    said = (FIXTURES / "mariadb-11.8.9-errors.txt").read_text().splitlines()
    reader = Reader("mariadb-bin.000003").feed(said[line:] if line else said[:1])
    with pytest.raises(BinlogError) as caught:
        check("mariadb-bin.000003", reader, returncode=1)
    assert caught.value.message.startswith("file: mariadb-bin.000003: " + words), caught.value.message
