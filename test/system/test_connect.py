# SPDX-License-Identifier: Apache-2.0
"""Routing through readconnroute, proven by @@server_id with three
different clients (mariadb CLI, PyMySQL, the C client), for both event
models: Primary-Service reaches db1, Replica-Service db2 or db3, replica
connections spread over both replicas, writes on a replica fail with 1290
and writes through the primary replicate."""

import threading
import uuid

import pymysql
import pytest

import sluicetest as st
from proxy import running_proxy

PORTS = {"pinned": (st.port(4100), st.port(4101)),
         "shared": (st.port(4102), st.port(4103))}


@pytest.fixture(scope="module", params=sorted(PORTS))
def proxy(request, tmp_path_factory):
    primary, replica = PORTS[request.param]
    yield from running_proxy(tmp_path_factory, primary, replica,
                             event_model=request.param)


@pytest.fixture(scope="module")
def table():
    """test.connect_t, created directly on the primary and replicated."""
    with st.root(st.PRIMARY_ID) as conn:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS test.connect_t "
                        "(id VARCHAR(64) PRIMARY KEY, v INT)")
    st.wait_replicated()
    return "test.connect_t"


def cli_server_id(port):
    proc = st.cli("SELECT @@server_id", port=port)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.strip())


def pymysql_server_id(port):
    with st.connect(port) as conn:
        return st.server_id(conn)


def c_server_id(port):
    proc = st.c_client(port, "server_id")
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.strip())


CLIENTS = {"cli": cli_server_id, "pymysql": pymysql_server_id,
           "c": c_server_id}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_primary_service_reaches_primary(proxy, client):
    assert CLIENTS[client](proxy.primary_port) == st.PRIMARY_ID


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_replica_service_reaches_a_replica(proxy, client):
    assert CLIENTS[client](proxy.replica_port) in st.REPLICA_IDS


def test_replica_connections_spread_over_both_replicas(proxy):
    """Ten concurrent connections: least-connections routing must use both
    replicas, and evenly (5/5 when nothing else is connected)."""
    conns = []
    try:
        for _ in range(10):
            conns.append(st.connect(proxy.replica_port))
        ids = [st.server_id(c) for c in conns]
    finally:
        for c in conns:
            c.close()
    assert set(ids) == st.REPLICA_IDS, ids
    assert min(ids.count(i) for i in st.REPLICA_IDS) >= 4, ids


def test_concurrent_connects_spread(proxy):
    """The same, with the ten connections opened from ten threads."""
    ids, errors = [], []
    barrier = threading.Barrier(10, timeout=30)

    def worker():
        try:
            with st.connect(proxy.replica_port) as conn:
                ids.append(st.server_id(conn))
                barrier.wait()
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=worker) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert set(ids) == st.REPLICA_IDS, ids


def test_write_through_replica_service_fails_read_only(proxy, table):
    with st.connect(proxy.replica_port, autocommit=True) as conn:
        with pytest.raises(pymysql.err.OperationalError) as err:
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {table} VALUES (%s, 1)",
                            (str(uuid.uuid4()),))
        assert st.error_code(err.value) == 1290, err.value
        # The session survives the error.
        assert st.server_id(conn) in st.REPLICA_IDS


def test_write_through_replica_service_fails_cli(proxy, table):
    proc = st.cli(f"INSERT INTO {table} VALUES ('cli-{uuid.uuid4()}', 1)",
                  port=proxy.replica_port)
    assert proc.returncode != 0
    assert st.cli_error_code(proc) == 1290, proc.stderr


def test_write_through_primary_replicates(proxy, table):
    key = str(uuid.uuid4())
    with st.connect(proxy.primary_port, autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table} VALUES (%s, 7)", (key,))
            assert cur.rowcount == 1
    for sid in sorted(st.REPLICA_IDS):
        with st.connect(st.SERVERS[sid]) as direct:
            st.wait_until(lambda: st.scalar(
                direct, f"SELECT v FROM {table} WHERE id = %s", (key,)) == 7,
                15, what=f"row {key} on db{sid}")
