# SPDX-License-Identifier: Apache-2.0
"""readwritesplit read-your-writes (issue 8), causal_reads=read_your_writes
(the default until issue 16 made it causal_reads=consistent), while
the replicas lag on purpose (CHANGE MASTER TO MASTER_DELAY=1): a read right
after a write in the same session must see the write (it goes to a replica
the monitor saw apply the write's GTID, else to the primary), while a
session that has written nothing still reads from the replicas.

Services (ports st.port(4610..4613)):
  RYW-Service   causal_reads=read_your_writes (the per-session mode)
  None-Service  causal_reads=none: the control, proving the replicas are
                really behind (its reads after writes are stale)
  Hist-Service  lazy_connect=true, max_sescmd_history=4: repeated
                constant-only session commands do not push the session's
                state out of the history
"""

import struct
import time

import pymysql
import pytest

import sluicetest as st
from proxy import running_proxy, rw_service

pytestmark = pytest.mark.sluice_only

PRIMARY_PORT, REPLICA_PORT = st.port(4610), st.port(4611)
RYW_PORT = st.port(4612)
NONE_PORT = st.port(4613)
HIST_PORT = st.port(4614)
LOOPS = 1000

COM_STMT_PREPARE, COM_STMT_EXECUTE, COM_STMT_CLOSE = 0x16, 0x17, 0x19
MYSQL_TYPE_LONGLONG = 0x08
CLIENT_DEPRECATE_EOF = 1 << 24


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS test")
        cur.execute("DROP TABLE IF EXISTS test.ryw")
        cur.execute("CREATE TABLE test.ryw (id INT PRIMARY KEY, v INT)")
    st.wait_replicated()
    extra = (rw_service("RYW-Service", RYW_PORT,
                        "causal_reads=read_your_writes")
             + rw_service("None-Service", NONE_PORT, "causal_reads=none")
             + rw_service("Hist-Service", HIST_PORT,
                          "lazy_connect=true\nmax_sescmd_history=4"))
    yield from running_proxy(tmp_path_factory, PRIMARY_PORT, REPLICA_PORT,
                             extra=extra)


def set_delay(seconds):
    for sid in st.REPLICA_IDS:
        with st.root(sid) as r, r.cursor() as cur:
            cur.execute("STOP SLAVE")
            cur.execute(f"CHANGE MASTER TO MASTER_DELAY={seconds}")
            cur.execute("START SLAVE")


@pytest.fixture
def delayed(proxy):
    """The replicas apply every event one second late."""
    for port in (RYW_PORT, NONE_PORT):
        wait_routes(port)
    set_delay(1)
    try:
        yield
    finally:
        set_delay(0)
        st.wait_replicated()


def wait_routes(port, timeout=20):
    def ok():
        with st.connect(port, connect_timeout=5) as c:
            return st.server_id(c) in st.REPLICA_IDS
    st.wait_until(ok, timeout, interval=0.3, what=f"port {port} to route")


def write_read(cur, i):
    """UPDATE a row to i, read it back: (value read, @@server_id)."""
    cur.execute("REPLACE INTO test.ryw VALUES (%s, %s)", (i % 10, i))
    cur.execute("SELECT MAX(v), @@server_id FROM test.ryw WHERE id = %s",
                (i % 10,))
    return cur.fetchone()


def test_control_without_ryw_reads_stale(delayed):
    """causal_reads=none: the same loop reads stale rows from replicas, so
    the zero below is not luck."""
    with st.connect(NONE_PORT) as conn, conn.cursor() as cur:
        results = [write_read(cur, 100000 + i) for i in range(20)]
    stale = [(i, v, sid) for i, (v, sid) in enumerate(results)
             if v != 100000 + i]
    assert len(stale) >= 10, results
    assert {sid for _, _, sid in stale} <= st.REPLICA_IDS


def test_write_then_read_1000_times(delayed):
    """read_your_writes: 1000 write-then-read pairs, zero stale reads; once the
    replicas have caught up (and the monitor has seen it) the session's
    reads go back to them."""
    start = time.monotonic()
    stale, sids = [], {}
    with st.connect(RYW_PORT) as conn, conn.cursor() as cur:
        for i in range(LOOPS):
            v, sid = write_read(cur, i)
            sids[sid] = sids.get(sid, 0) + 1
            if v != i:
                stale.append((i, v, sid))
        elapsed = time.monotonic() - start
        assert stale == [], f"{len(stale)} stale reads, first {stale[:5]}"
        # how long it took is information, not a pass condition
        print(f"{LOOPS} write-then-read pairs in {elapsed:.1f}s")
        last = LOOPS - 1

        def back_on_replica():
            cur.execute("SELECT v, @@server_id FROM test.ryw WHERE id = %s",
                        (last % 10,))
            v, sid = cur.fetchone()
            assert v == last, (v, sid)   # never stale, even while waiting
            return sid in st.REPLICA_IDS
        st.wait_until(back_on_replica, 15, interval=0.2,
                      what="the session's reads to return to a replica")
    assert sum(sids.values()) == LOOPS, sids


def test_fresh_sessions_read_from_replicas(delayed):
    """Sessions that have written nothing read from the replicas (two
    sessions opened in turn: one each) while another session writes."""
    counts = {}
    with st.connect(RYW_PORT) as writer, writer.cursor() as wcur, \
            st.connect(RYW_PORT) as reader1, st.connect(RYW_PORT) as reader2:
        for i in range(30):
            wcur.execute("REPLACE INTO test.ryw VALUES (20, %s)", (i,))
            for reader in (reader1, reader2):
                sid = int(st.scalar(reader, "SELECT @@server_id"))
                counts[sid] = counts.get(sid, 0) + 1
    assert set(counts) == st.REPLICA_IDS, counts
    assert sum(counts.values()) == 60, counts


# ---- the binary protocol, by hand over PyMySQL's connection ----

def _read(conn):
    return conn._read_packet().get_all_data()


def _is_eof(data):
    return data[0] == 0xFE and len(data) < 9


def _skip_defs(conn, n):
    for _ in range(n):
        _read(conn)
    if n and not conn.client_flag & CLIENT_DEPRECATE_EOF:
        assert _is_eof(_read(conn))


def ps_prepare(conn, sql):
    conn._execute_command(COM_STMT_PREPARE, sql.encode())
    data = _read(conn)
    assert data[0] == 0, data
    stmt_id, ncols, nparams = struct.unpack("<IHH", data[1:9])
    _skip_defs(conn, nparams)
    _skip_defs(conn, ncols)
    return stmt_id, nparams


def ps_execute(conn, stmt, args):
    """Execute with BIGINT parameters; rows of BIGINT columns, or None for
    an OK."""
    stmt_id, nparams = stmt
    assert nparams == len(args)
    body = struct.pack("<IBI", stmt_id, 0, 1)
    body += bytes((nparams + 7) // 8) + b"\x01"
    body += bytes([MYSQL_TYPE_LONGLONG, 0]) * nparams
    body += b"".join(struct.pack("<q", a) for a in args)
    conn._execute_command(COM_STMT_EXECUTE, body)
    data = _read(conn)
    if data[0] == 0:
        return None
    ncols = data[0]
    _skip_defs(conn, ncols)
    rows = []
    while True:
        data = _read(conn)
        if _is_eof(data) or (data[0] == 0xFE and
                             conn.client_flag & CLIENT_DEPRECATE_EOF):
            return rows
        nulls = (ncols + 7 + 2) // 8
        rows.append(struct.unpack(f"<{ncols}q",
                                  data[1 + nulls:1 + nulls + 8 * ncols]))


def test_prepared_write_then_read(delayed):
    """The same with server-side prepared statements (COM_STMT_EXECUTE):
    zero stale reads; a fresh session's prepared reads go to replicas."""
    with st.connect(RYW_PORT) as conn:
        write = ps_prepare(conn, "REPLACE INTO test.ryw VALUES (?, ?)")
        read = ps_prepare(conn, "SELECT CAST(v AS SIGNED), @@server_id "
                                "FROM test.ryw WHERE id = ?")
        stale = []
        for i in range(200):
            assert ps_execute(conn, write, [30 + i % 5, i]) is None
            rows = ps_execute(conn, read, [30 + i % 5])
            if not rows or rows[0][0] != i:
                stale.append((i, rows))
        assert stale == [], f"{len(stale)} stale, first {stale[:5]}"
    with st.connect(RYW_PORT) as conn:
        read = ps_prepare(conn, "SELECT COUNT(*), @@server_id "
                                "FROM test.ryw WHERE id = ?")
        sids = {ps_execute(conn, read, [30])[0][1] for _ in range(20)}
    assert sids and sids <= st.REPLICA_IDS, sids


def test_unknown_statement_id_answered_1243(proxy):
    """An execute of a statement the session closed (or never had) gets the
    server's 1243 from the router itself (the id is the router's: a server
    may hold another statement under that number); the session goes on."""
    with st.connect(RYW_PORT) as conn:
        keep = ps_prepare(conn, "SELECT @@server_id + 0 * ?")
        gone = ps_prepare(conn, "SELECT 2 * ?")
        conn._execute_command(COM_STMT_CLOSE, struct.pack("<I", gone[0]))
        for stmt_id in (gone[0], 999):
            with pytest.raises(pymysql.MySQLError) as exc:
                ps_execute(conn, (stmt_id, 1), [1])
            assert st.error_code(exc.value) == 1243
            assert f"Unknown prepared statement handler ({stmt_id}) given " \
                "to mysqld_stmt_execute" in str(exc.value)
        assert ps_execute(conn, keep, [5])[0][0] in st.SERVERS
        assert st.scalar(conn, "SELECT 1") == 1


def test_state_survives_repeated_session_commands(proxy):
    """Connectors repeat SET autocommit=1 / SET NAMES: with a history of 4,
    a replica connected after 30 such commands still gets the session's
    character set, sql_mode and time zone."""
    wait_routes(HIST_PORT)
    with st.connect(HIST_PORT, database="test") as conn, \
            conn.cursor() as cur:
        cur.execute("SET NAMES latin1")
        cur.execute("SET sql_mode = 'ANSI_QUOTES'")
        cur.execute("SET time_zone = '+03:00'")
        for _ in range(25):
            cur.execute("SET autocommit = 1")
        for _ in range(5):
            cur.execute("SET NAMES latin1")
        cur.execute("SELECT @@character_set_client, @@sql_mode, "
                    "@@time_zone, DATABASE(), @@server_id")
        row = cur.fetchone()
    assert row[:4] == ("latin1", "ANSI_QUOTES", "+03:00", "test"), row
    assert row[4] in st.REPLICA_IDS, row
