# SPDX-License-Identifier: Apache-2.0
"""What travels through Sluice arrives intact: a 20 MiB value (a command
split over 16 MiB packets, and a row that is), binary prepared statements
(C client) and SQL PREPARE/EXECUTE (CLI), multi-statements and a stored
procedure's multiple result sets, LOAD DATA LOCAL INFILE, COM_INIT_DB,
COM_CHANGE_USER and COM_PING."""

import hashlib
import os
import uuid

import pymysql
import pytest
from pymysql.constants import CLIENT

import sluicetest as st
from proxy import running_proxy

PRIMARY_PORT, REPLICA_PORT = st.port(4120), st.port(4121)
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    yield from running_proxy(tmp_path_factory, PRIMARY_PORT, REPLICA_PORT)


@pytest.fixture(scope="module")
def schema():
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS test.blobs, test.loaded")
        cur.execute("CREATE TABLE test.blobs (id INT PRIMARY KEY, "
                    "b LONGBLOB)")
        cur.execute("CREATE TABLE test.loaded (id INT PRIMARY KEY, "
                    "name VARCHAR(64))")
        cur.execute("DROP PROCEDURE IF EXISTS test.two_results")
        cur.execute("CREATE PROCEDURE test.two_results() BEGIN "
                    "SELECT 1 AS a; SELECT 'x' AS b, 2 AS c; END")
        cur.execute(f"GRANT EXECUTE ON PROCEDURE test.two_results TO "
                    f"'{st.APP_USER}'@'%'")
    st.wait_replicated()


def test_20mib_value_round_trips(proxy, schema):
    data = os.urandom(20 * MIB)
    digest = hashlib.sha256(data).hexdigest()
    with st.connect(proxy.primary_port, max_allowed_packet=64 * MIB) as conn:
        with conn.cursor() as cur:
            cur.execute("REPLACE INTO test.blobs VALUES (1, %s)", (data,))
            cur.execute("SELECT b FROM test.blobs WHERE id = 1")
            (back,) = cur.fetchone()
        assert len(back) == len(data)
        assert hashlib.sha256(back).hexdigest() == digest
        # The server stored exactly these bytes, and the session is in
        # sync after the big packets.
        assert st.scalar(conn, "SELECT SHA2(b, 256) FROM test.blobs "
                         "WHERE id = 1") == digest
        assert st.server_id(conn) == st.PRIMARY_ID


def test_20mib_value_read_through_replica(proxy, schema):
    data = os.urandom(20 * MIB)
    with st.connect(st.SERVERS[1], max_allowed_packet=64 * MIB) as direct:
        with direct.cursor() as cur:
            cur.execute("REPLACE INTO test.blobs VALUES (2, %s)", (data,))
    st.wait_replicated()
    with st.connect(proxy.replica_port, max_allowed_packet=64 * MIB) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT b FROM test.blobs WHERE id = 2")
            (back,) = cur.fetchone()
    assert hashlib.sha256(back).digest() == hashlib.sha256(data).digest()


def test_binary_prepared_statements_c_client(proxy, schema):
    proc = st.c_client(proxy.primary_port, "ps")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK"


def test_sql_prepare_execute_cli(proxy):
    proc = st.cli("PREPARE s FROM 'SELECT ? + ?, @@server_id'; "
                  "SET @a = 40, @b = 2; EXECUTE s USING @a, @b; "
                  "DEALLOCATE PREPARE s", port=proxy.primary_port)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["42", str(st.PRIMARY_ID)]


def test_stored_procedure_two_result_sets(proxy, schema):
    with st.connect(proxy.primary_port, database="test") as conn:
        with conn.cursor() as cur:
            cur.execute("CALL test.two_results()")
            assert cur.fetchall() == ((1,),)
            assert cur.nextset()
            assert cur.fetchall() == (("x", 2),)
            # Then the CALL's own OK; nothing after it.
            while cur.nextset():
                assert not cur.fetchall()
        assert st.server_id(conn) == st.PRIMARY_ID


def test_multi_statement(proxy):
    with st.connect(proxy.replica_port,
                    client_flag=CLIENT.MULTI_STATEMENTS) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT 1; SELECT 2, 3; SELECT @@server_id")
            assert cur.fetchall() == ((1,),)
            assert cur.nextset()
            assert cur.fetchall() == ((2, 3),)
            assert cur.nextset()
            assert cur.fetchone()[0] in st.REPLICA_IDS
            assert not cur.nextset()
        assert st.scalar(conn, "SELECT 'in sync'") == "in sync"


def test_load_data_local_infile(proxy, schema, tmp_path):
    path = tmp_path / "rows.tsv"
    path.write_text("".join(f"{i}\tname-{i}\n" for i in range(1, 1001)))
    with st.connect(proxy.primary_port, local_infile=True) as conn:
        with conn.cursor() as cur:
            cur.execute("DELETE FROM test.loaded")
            cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE "
                        "test.loaded (id, name)")
            assert cur.rowcount == 1000
            cur.execute("SELECT COUNT(*), SUM(id), MAX(name) "
                        "FROM test.loaded")
            assert cur.fetchone() == (1000, 500500, "name-999")


def test_init_db(proxy):
    with st.connect(proxy.replica_port) as conn:
        assert st.scalar(conn, "SELECT DATABASE()") is None
        conn.select_db("test")
        assert st.scalar(conn, "SELECT DATABASE()") == "test"
        with pytest.raises(pymysql.err.OperationalError) as err:
            conn.select_db("mysql")
        assert st.error_code(err.value) == 1044
        assert st.scalar(conn, "SELECT DATABASE()") == "test"


def test_use_cli(proxy):
    proc = st.cli("USE test; SELECT DATABASE(), @@server_id",
                  port=proxy.primary_port)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["test", str(st.PRIMARY_ID)]


@pytest.mark.parametrize("port_attr", ["primary_port", "replica_port"])
def test_change_user(proxy, port_attr):
    port = getattr(proxy, port_attr)
    proc = st.c_client(port, "change_user", st.APP_USER, st.APP_PASSWORD,
                       "test")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [f"{st.APP_USER}@%", "test"]


def test_change_user_to_other_account(proxy):
    user = "other_" + uuid.uuid4().hex[:8]
    with st.root(st.PRIMARY_ID) as root, root.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'other_pw'")
        cur.execute(f"GRANT SELECT ON test.* TO '{user}'@'%'")
    try:
        proc = st.c_client(proxy.primary_port, "change_user", user,
                           "other_pw", "test")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == [f"{user}@%", "test"]
    finally:
        with st.root(st.PRIMARY_ID) as root, root.cursor() as cur:
            cur.execute(f"DROP USER '{user}'@'%'")


def test_change_user_wrong_password(proxy):
    proc = st.c_client(proxy.primary_port, "change_user", st.APP_USER,
                       "wrong")
    assert proc.returncode == 1
    assert "error 1045" in proc.stderr, proc.stderr


@pytest.mark.parametrize("port_attr", ["primary_port", "replica_port"])
def test_ping(proxy, port_attr):
    port = getattr(proxy, port_attr)
    proc = st.c_client(port, "ping")
    assert proc.returncode == 0, proc.stderr
    with st.connect(port) as conn:
        conn.ping(reconnect=False)
        assert st.server_id(conn) > 0
