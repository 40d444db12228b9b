# SPDX-License-Identifier: Apache-2.0
"""readwritesplit's master_failure_mode default (fail_on_write, as
MaxScale 24) and strict_tmp_tables (issue 18).

Services (ports st.port(5700..5704)):
  FW-Service    the defaults (master_failure_mode=fail_on_write,
                strict_tmp_tables=true)
  FI-Service    master_failure_mode=fail_instantly
  NT-Service    strict_tmp_tables=false

A server's ERR packet that came before it closed the primary connection
reaches the client byte for byte in both modes; fail_on_write then keeps
the session (the next write connects to the primary again), while
fail_instantly closes it. A connection the server closes without a word
(KILL from another connection) is closed under fail_on_write without a
word too, as the server does to a direct client.
"""

import pymysql
import pytest

import sluicetest as st
from proxy import running_proxy, rw_service

pytestmark = pytest.mark.sluice_only

PRIMARY_PORT, REPLICA_PORT = st.port(5700), st.port(5701)
FW_PORT = st.port(5702)
FI_PORT = st.port(5703)
NT_PORT = st.port(5704)


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    with st.root(st.PRIMARY_ID) as conn:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS test")
            cur.execute("DROP TABLE IF EXISTS test.fw_t")
            cur.execute("CREATE TABLE test.fw_t (id INT PRIMARY KEY, v INT)")
            cur.execute("INSERT INTO test.fw_t VALUES (1, 0)")
    extra = (rw_service("FW-Service", FW_PORT) +
             rw_service("FI-Service", FI_PORT,
                        "master_failure_mode=fail_instantly") +
             rw_service("NT-Service", NT_PORT, "strict_tmp_tables=false"))
    yield from running_proxy(tmp_path_factory, PRIMARY_PORT, REPLICA_PORT,
                             extra=extra)


def raw_answer(conn, sql):
    """Send sql as COM_QUERY and read the socket until the server side
    closes it: the bytes that came back."""
    conn._execute_command(3, sql)
    s = conn._sock
    s.settimeout(2)
    data = b""
    while True:
        try:
            d = s.recv(4096)
        except TimeoutError:
            return data + b"<open>"
        if not d:
            return data + b"<closed>"
        data += d



def primary_value():
    with st.root(st.PRIMARY_ID) as conn:
        return st.scalar(conn, "SELECT v FROM test.fw_t WHERE id = 1")


CLOSED = "server 'db1': connection closed by peer"


def closes_seen(proxy):
    return proxy.daemon.log_path.read_text(errors="replace").count(CLOSED)


def kill_backend(tid, proxy=None):
    """KILL a thread on the primary as root, wait until it is gone and
    (proxy) until Sluice has logged a primary connection's close."""
    seen = closes_seen(proxy) if proxy is not None else 0
    with st.root(st.PRIMARY_ID) as conn:
        with conn.cursor() as cur:
            cur.execute(f"KILL {int(tid)}")

        def gone():
            return st.scalar(conn, "SELECT COUNT(*) FROM information_schema"
                             ".processlist WHERE id = %s", (tid,)) == 0
        st.wait_until(gone, 10, interval=0.05, what=f"thread {tid} to end")
    if proxy is not None:
        st.wait_until(lambda: closes_seen(proxy) > seen, 10, interval=0.05,
                      what="Sluice to see the primary connection close")


@pytest.mark.parametrize("svc", ["FW", "FI"])
def test_server_error_before_close_reaches_the_client(proxy, svc):
    """KILL CONNECTION_ID() makes the primary send ERR 1927 and close:
    the client gets the very packet a direct connection gets; under the
    default fail_on_write the session goes on (a read on a replica, a
    write on a new primary connection, checked in the data), under
    fail_instantly it is closed."""
    direct = pymysql.connect(host=st.HOST, port=st.SERVERS[st.PRIMARY_ID],
                             user=st.APP_USER, password=st.APP_PASSWORD,
                             database="test")
    want = raw_answer(direct, "KILL CONNECTION_ID()")
    assert want.startswith(b"\x1e\x00\x00\x01\xff\x87\x07#70100"), want
    assert want.endswith(b"<closed>"), want
    port = FW_PORT if svc == "FW" else FI_PORT
    conn = st.connect(port, database="test")
    got = raw_answer(conn, "KILL CONNECTION_ID()")
    if svc == "FI":
        assert got == want
        return
    assert got == want.replace(b"<closed>", b"<open>")
    assert st.server_id(conn) in st.REPLICA_IDS
    before = primary_value()
    with conn.cursor() as cur:
        cur.execute("UPDATE fw_t SET v = v + 1 WHERE id = 1")
    conn.commit()
    assert primary_value() == before + 1
    assert st.scalar(conn, "SELECT @@server_id FROM fw_t FOR UPDATE") == \
        st.PRIMARY_ID
    conn.close()


def blocked_kill(proxy, port_or_direct):
    """A LOCK TABLE blocked behind another session's lock, its primary
    thread killed by root: the raw bytes its client got."""
    holder = st.connect(FW_PORT, database="test")
    with holder.cursor() as cur:
        cur.execute("LOCK TABLE fw_t WRITE")
    if port_or_direct == "direct":
        victim = pymysql.connect(host=st.HOST,
                                 port=st.SERVERS[st.PRIMARY_ID],
                                 user=st.APP_USER,
                                 password=st.APP_PASSWORD, database="test")
    else:
        victim = st.connect(port_or_direct, database="test")
    sql = "LOCK /*fwblk*/ TABLE fw_t WRITE"
    victim._execute_command(3, sql)
    with st.root(st.PRIMARY_ID) as root:
        def running():
            return st.scalar(root, "SELECT id FROM information_schema"
                             ".processlist WHERE info = %s", (sql,))
        st.wait_until(running, 10, interval=0.05, what="the LOCK to wait")
        tid = running()
    kill_backend(tid, None if port_or_direct == "direct" else proxy)
    got = read_all(victim)
    with holder.cursor() as cur:
        cur.execute("UNLOCK TABLES")
    holder.close()
    return got


def read_all(conn):
    s = conn._sock
    s.settimeout(5)
    data = b""
    while True:
        d = s.recv(4096)
        if not d:
            return data + b"<closed>"
        data += d


def test_killed_without_a_word(proxy):
    """The server closes a connection killed from elsewhere without an
    error packet (checked on a direct connection): under fail_on_write
    the client's connection is closed the same way (its library reports
    2013, as with the server itself); fail_instantly sends 1927."""
    assert blocked_kill(proxy, "direct") == b"<closed>"
    assert blocked_kill(proxy, FW_PORT) == b"<closed>"
    got = blocked_kill(proxy, FI_PORT)
    assert got[4:7] == b"\xff\x87\x07" and got.endswith(b"<closed>"), got


def tmp_session(port):
    """A session with a temporary table on the primary; returns it and
    its primary connection's thread id."""
    conn = st.connect(port, database="test")
    with conn.cursor() as cur:
        cur.execute("CREATE TEMPORARY TABLE fw_tmp (id INT)")
        cur.execute("INSERT INTO fw_tmp VALUES (1), (2)")
    conn.commit()
    with conn.cursor() as cur:
        cur.execute("SELECT @@server_id, CONNECTION_ID(), COUNT(*) "
                    "FROM fw_tmp")
        sid, tid, n = cur.fetchone()
    assert (sid, n) == (st.PRIMARY_ID, 2)
    return conn, tid


def test_strict_tmp_tables_closes_the_session(proxy):
    """strict_tmp_tables=true (the default): the primary connection that
    has the session's temporary table is killed: the session is closed
    (its next statement fails with a lost connection), never sent on to
    a new primary connection where the table does not exist."""
    conn, tid = tmp_session(FW_PORT)
    kill_backend(tid, proxy)
    with pytest.raises(pymysql.MySQLError) as exc:
        st.scalar(conn, "SELECT COUNT(*) FROM fw_tmp")
    assert st.error_code(exc.value) in (2013, 2006), exc.value
    conn.close()


def test_strict_tmp_tables_false_reconnects(proxy):
    """strict_tmp_tables=false: the session goes on on a new primary
    connection; the temporary table is gone with the old one (1146) and
    can be made again there."""
    conn, tid = tmp_session(NT_PORT)
    kill_backend(tid, proxy)
    with pytest.raises(pymysql.MySQLError) as exc:
        st.scalar(conn, "SELECT COUNT(*) FROM fw_tmp")
    assert st.error_code(exc.value) == 1146, exc.value
    with conn.cursor() as cur:
        cur.execute("CREATE TEMPORARY TABLE fw_tmp (id INT)")
        cur.execute("INSERT INTO fw_tmp VALUES (7)")
        cur.execute("SELECT @@server_id, CONNECTION_ID() <> %s, SUM(id) "
                    "FROM fw_tmp", (tid,))
        assert cur.fetchone() == (st.PRIMARY_ID, 1, 7)
    conn.close()


def test_strict_tmp_tables_after_drop_reconnects(proxy):
    """strict_tmp_tables=true holds only while temporary tables exist:
    once the session dropped its table, a lost primary connection is
    replaced as usual (a write goes on, checked in the data)."""
    conn, tid = tmp_session(FW_PORT)
    with conn.cursor() as cur:
        cur.execute("DROP TEMPORARY TABLE fw_tmp")
    kill_backend(tid, proxy)
    before = primary_value()
    with conn.cursor() as cur:
        cur.execute("UPDATE fw_t SET v = v + 1 WHERE id = 1")
    conn.commit()
    assert primary_value() == before + 1
    assert st.scalar(conn, "SELECT @@server_id FROM fw_t FOR UPDATE") == \
        st.PRIMARY_ID
    conn.close()
