# SPDX-License-Identifier: Apache-2.0
"""readwritesplit's optimistic_trx and reuse_prepared_statements on the
real cluster, checked by @@server_id, the data the servers hold, their
status counters and the exact errors the client sees.

Services (ports st.port(5732..5735); 5730/5731 are proxy.py's stock
readconnroute services):
  Opt-Service    optimistic_trx=true, causal_reads=none (a read is never
                 sent to the primary because a replica lags: the mismatch
                 test stops replication)
  Reuse-Service  reuse_prepared_statements=true
  OptC-Service   optimistic_trx=true with the default
                 causal_reads=consistent
  Plain-Service  the defaults (reuse_prepared_statements=false), to
                 show what the reuse saves
"""

import struct

import pymysql
import pytest

import sluicetest as st
from proxy import running_proxy, rw_service

pytestmark = pytest.mark.sluice_only

PRIMARY_PORT, REPLICA_PORT = st.port(5730), st.port(5731)
OPT_PORT = st.port(5732)
REUSE_PORT = st.port(5733)
PLAIN_PORT = st.port(5734)
OPTC_PORT = st.port(5735)

EXTRA = (rw_service("Opt-Service", OPT_PORT,
                    "optimistic_trx=true\ncausal_reads=none")
         + rw_service("Reuse-Service", REUSE_PORT,
                      "reuse_prepared_statements=true\ncausal_reads=none")
         + rw_service("Plain-Service", PLAIN_PORT, "causal_reads=none")
         + rw_service("OptC-Service", OPTC_PORT, "optimistic_trx=true"))


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS test")
        cur.execute("DROP TABLE IF EXISTS test.opt")
        cur.execute("CREATE TABLE test.opt (id INT PRIMARY KEY, "
                    "v VARCHAR(32))")
        cur.execute("INSERT INTO test.opt VALUES (1, 'one'), (2, 'two')")
    st.wait_replicated()
    yield from running_proxy(tmp_path_factory, PRIMARY_PORT, REPLICA_PORT,
                             extra=EXTRA)


def wait_routes(port, timeout=20):
    def ok():
        with st.connect(port, connect_timeout=5) as c:
            return st.server_id(c) in st.REPLICA_IDS
    st.wait_until(ok, timeout, interval=0.3, what=f"port {port} to route")


def status(sid, names):
    """Global status counters of server sid, by name."""
    with st.root(sid) as c, c.cursor() as cur:
        marks = ", ".join(["%s"] * len(names))
        cur.execute("SELECT VARIABLE_NAME, VARIABLE_VALUE FROM "
                    "information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME "
                    f"IN ({marks})", [n.upper() for n in names])
        got = {k.lower(): int(v) for k, v in cur.fetchall()}
    return {n: got[n.lower()] for n in names}


def all_status(names):
    return {sid: status(sid, names) for sid in st.SERVERS}


def delta(before, after):
    return {sid: {n: after[sid][n] - before[sid][n] for n in before[sid]}
            for sid in before}


TRX = ["Com_begin", "Com_commit", "Com_rollback", "Com_insert"]


def test_read_only_transaction_commits_on_one_replica(proxy):
    """BEGIN; reads; COMMIT: all of it on one replica (@@server_id), the
    primary sees no BEGIN or COMMIT; the replica one of each."""
    wait_routes(OPT_PORT)
    with st.connect(OPT_PORT) as conn, conn.cursor() as cur:
        before = all_status(TRX)
        cur.execute("BEGIN")
        sid = st.server_id(conn)
        assert sid in st.REPLICA_IDS
        cur.execute("SELECT v, @@server_id FROM test.opt WHERE id = 1")
        assert cur.fetchall() == (("one", sid),)
        cur.execute("SELECT COUNT(*) FROM test.opt")
        assert cur.fetchone()[0] >= 2
        cur.execute("COMMIT")
        after = all_status(TRX)
    d = delta(before, after)
    assert d[st.PRIMARY_ID]["Com_begin"] == 0, d
    assert d[st.PRIMARY_ID]["Com_commit"] == 0, d
    assert d[sid]["Com_begin"] == 1 and d[sid]["Com_commit"] == 1, d
    other = (st.REPLICA_IDS - {sid}).pop()
    assert d[other]["Com_begin"] == 0, d


def test_write_moves_transaction_to_primary(proxy):
    """BEGIN; SELECT; INSERT; SELECT; COMMIT: the reads before the INSERT
    ran on a replica, were rolled back there and replayed on the primary
    (same answers); the INSERT and what follows are on the primary, the
    row committed and replicated."""
    wait_routes(OPT_PORT)
    with st.root(st.PRIMARY_ID) as r, r.cursor() as cur:
        cur.execute("DELETE FROM test.opt WHERE id >= 10")
    st.wait_replicated()
    with st.connect(OPT_PORT) as conn, conn.cursor() as cur:
        before = all_status(TRX)
        cur.execute("BEGIN")
        cur.execute("SELECT v FROM test.opt WHERE id = 2")
        assert cur.fetchall() == (("two",),)
        # (no @@server_id here: the primary's would differ in the replay)
        cur.execute("INSERT INTO test.opt VALUES (10, 'ten')")
        assert st.server_id(conn) == st.PRIMARY_ID   # in the transaction
        cur.execute("SELECT v FROM test.opt WHERE id = 10")
        assert cur.fetchall() == (("ten",),)
        cur.execute("COMMIT")
        after = all_status(TRX)
        # the session goes on normally: reads on replicas again
        assert st.server_id(conn) in st.REPLICA_IDS
    d = delta(before, after)
    # one replica ran the start and rolled it back at the write (its
    # BEGIN and COMMIT counters also count what replication applies)
    assert sorted(d[sid]["Com_rollback"] for sid in st.REPLICA_IDS) \
        == [0, 1], d
    # the primary: the replayed BEGIN (as START TRANSACTION WITH
    # CONSISTENT SNAPSHOT), the INSERT, the COMMIT
    assert d[st.PRIMARY_ID]["Com_begin"] == 1, d
    assert d[st.PRIMARY_ID]["Com_insert"] == 1, d
    assert d[st.PRIMARY_ID]["Com_commit"] == 1, d
    st.wait_replicated()
    for sid in st.SERVERS:
        with st.root(sid) as c:
            assert st.scalar(c, "SELECT v FROM test.opt WHERE id = 10") \
                == "ten", sid


@pytest.fixture
def replication_stopped():
    for sid in st.REPLICA_IDS:
        with st.root(sid) as c, c.cursor() as cur:
            cur.execute("STOP SLAVE SQL_THREAD")
    try:
        yield
    finally:
        for sid in st.REPLICA_IDS:
            with st.root(sid) as c, c.cursor() as cur:
                cur.execute("START SLAVE SQL_THREAD")
        st.wait_replicated()


def test_moved_transaction_whose_reads_differ_fails(proxy,
                                                    replication_stopped):
    """The row read on the replica changed on the primary before the
    write (replication stopped, so the replica still has the old value):
    the replay on the primary reads another value, the client gets 1105
    'Transaction replay failed' for its INSERT, the session closes, and
    the INSERT never ran anywhere."""
    wait_routes(OPT_PORT)
    conn = st.connect(OPT_PORT)
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("SELECT v FROM test.opt WHERE id = 1")
            assert cur.fetchall() == (("one",),)
            with st.root(st.PRIMARY_ID) as r, r.cursor() as rc:
                rc.execute("UPDATE test.opt SET v = 'uno' WHERE id = 1")
            before = all_status(["Com_insert"])
            with pytest.raises(pymysql.MySQLError) as exc:
                cur.execute("INSERT INTO test.opt VALUES (11, 'eleven')")
            assert st.error_code(exc.value) == 1105, exc.value
            assert "Transaction replay failed" in str(exc.value)
            with pytest.raises(pymysql.MySQLError) as exc:
                cur.execute("SELECT 1")
            assert st.error_code(exc.value) in (2006, 2013), exc.value
    finally:
        st.close_quietly(conn)
    after = all_status(["Com_insert"])
    assert all(after[s]["Com_insert"] == before[s]["Com_insert"]
               for s in st.SERVERS), (before, after)
    with st.root(st.PRIMARY_ID) as r:
        assert st.scalar(r, "SELECT COUNT(*) FROM test.opt "
                            "WHERE id = 11") == 0
    with st.root(st.PRIMARY_ID) as r, r.cursor() as rc:
        rc.execute("UPDATE test.opt SET v = 'one' WHERE id = 1")


def test_server_specific_read_cannot_move(proxy):
    """A read whose answer depends on the server (@@server_id) cannot be
    reproduced on the primary: the write after it fails with 1105 and
    the session closes (the documented limit); nothing is written."""
    wait_routes(OPT_PORT)
    conn = st.connect(OPT_PORT)
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            assert st.server_id(conn) in st.REPLICA_IDS
            with pytest.raises(pymysql.MySQLError) as exc:
                cur.execute("INSERT INTO test.opt VALUES (13, 'x')")
            assert st.error_code(exc.value) == 1105, exc.value
    finally:
        st.close_quietly(conn)
    st.wait_replicated()
    with st.root(st.PRIMARY_ID) as r:
        assert st.scalar(r, "SELECT COUNT(*) FROM test.opt "
                            "WHERE id = 13") == 0


def test_lagging_replica_starts_transaction_on_primary(proxy,
                                                      replication_stopped):
    """causal_reads=consistent: the session's own write has not reached
    the replicas, so the BEGIN's wait there fails and the transaction
    runs on the primary from its start (it sees the write; its INSERT
    commits). Afterwards the session's autocommit writes commit at once:
    no transaction was left open on the primary (before the fix the
    BEGIN was re-sent to the primary as a read while the transaction's
    statements went on on the stale replica)."""
    wait_routes(OPTC_PORT)
    with st.connect(OPTC_PORT) as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM test.opt WHERE id BETWEEN 20 AND 29")
        cur.execute("INSERT INTO test.opt VALUES (20, 'twenty')")
        cur.execute("BEGIN")
        assert st.server_id(conn) == st.PRIMARY_ID
        cur.execute("SELECT v FROM test.opt WHERE id = 20")
        assert cur.fetchall() == (("twenty",),)
        cur.execute("INSERT INTO test.opt VALUES (21, 'x')")
        cur.execute("COMMIT")
        cur.execute("INSERT INTO test.opt VALUES (22, 'y')")
        with st.root(st.PRIMARY_ID) as r:
            assert st.scalar(r, "SELECT COUNT(*) FROM test.opt WHERE id "
                                "IN (20, 21, 22)") == 3


def test_autocommit_and_read_only_transactions_unchanged(proxy):
    """Outside optimistic transactions nothing changes: an autocommit
    write goes to the primary, START TRANSACTION READ ONLY stays on a
    replica, a write in an optimistic transaction with nothing read
    before it moves at once."""
    wait_routes(OPT_PORT)
    with st.connect(OPT_PORT) as conn, conn.cursor() as cur:
        cur.execute("REPLACE INTO test.opt VALUES (12, 'twelve')")
        cur.execute("START TRANSACTION READ ONLY")
        assert st.server_id(conn) in st.REPLICA_IDS
        cur.execute("COMMIT")
        cur.execute("BEGIN")
        cur.execute("UPDATE test.opt SET v = 'douze' WHERE id = 12")
        assert cur.rowcount == 1
        assert st.server_id(conn) == st.PRIMARY_ID
        cur.execute("COMMIT")
    with st.root(st.PRIMARY_ID) as r:
        assert st.scalar(r, "SELECT v FROM test.opt WHERE id = 12") \
            == "douze"


# ---- reuse_prepared_statements ----

PS_SQL = "SELECT ?, @@server_id FROM test.opt WHERE id = 1"
PS = ["Com_stmt_prepare", "Com_stmt_close"]


def ps_prepare(conn, sql):
    """COM_STMT_PREPARE by hand: (statement id, parameter count)."""
    conn._execute_command(0x16, sql.encode())
    data = conn._read_packet().get_all_data()
    if data[0] == 0xFF:
        raise AssertionError(f"PREPARE failed: {data!r}")
    stmt_id, ncols, nparams = struct.unpack("<IHH", data[1:9])
    for n in (nparams, ncols):
        for _ in range(n):
            conn._read_packet()
        if n and not conn.client_flag & (1 << 24):   # DEPRECATE_EOF
            conn._read_packet()
    return stmt_id, nparams


def ps_execute(conn, stmt_id, value):
    """COM_STMT_EXECUTE with one BIGINT parameter: the rows' two 8-byte
    integer columns."""
    body = struct.pack("<IBI", stmt_id, 0, 1) + b"\x00\x01"
    body += bytes([0x08, 0]) + struct.pack("<q", value)
    conn._execute_command(0x17, body)
    first = conn._read_packet().get_all_data()
    if first[0] == 0xFF:
        raise AssertionError(f"EXECUTE failed: {first!r}")
    ncols = first[0]
    for _ in range(ncols):
        conn._read_packet()
    if not conn.client_flag & (1 << 24):
        conn._read_packet()
    rows = []
    while True:
        data = conn._read_packet().get_all_data()
        if data[0] == 0xFE and len(data) < 0xFFFFFF:
            return rows
        nulls = (ncols + 7 + 2) // 8
        rows.append(struct.unpack("<qq", data[1 + nulls:17 + nulls]))


def ps_close(conn, stmt_id):
    """COM_STMT_CLOSE (no answer)."""
    conn._execute_command(0x19, struct.pack("<I", stmt_id))


def test_same_text_prepared_twice_reaches_servers_once(proxy):
    """Two PREPAREs of one text: the second is answered from the first
    (the same statement id, as MaxScale gives it), each server counts one
    COM_STMT_PREPARE, and executes through the id run on a replica with
    the client's values. Without reuse (Plain-Service) each server counts
    two and the ids differ."""
    wait_routes(REUSE_PORT)
    with st.connect(REUSE_PORT) as conn:
        before = all_status(PS)
        id1, n1 = ps_prepare(conn, PS_SQL)
        id2, n2 = ps_prepare(conn, PS_SQL)
        mid = all_status(PS)
        assert (n1, n2) == (1, 1)
        assert id1 == id2
        for i in range(4):
            [(v, sid)] = ps_execute(conn, id2 if i % 2 else id1, 100 + i)
            assert v == 100 + i and sid in st.REPLICA_IDS
        d = delta(before, mid)
        assert all(d[s]["Com_stmt_prepare"] == 1 for s in st.SERVERS), d
        # another text is prepared on the servers, with its own id
        id3, _ = ps_prepare(conn, PS_SQL + " AND 1 = 1")
        assert id3 != id1
        assert ps_execute(conn, id3, 7)[0][0] == 7
        d = delta(before, all_status(PS))
        assert all(d[s]["Com_stmt_prepare"] == 2 for s in st.SERVERS), d
    with st.connect(PLAIN_PORT) as conn:
        before = all_status(PS)
        id1, _ = ps_prepare(conn, PS_SQL)
        id2, _ = ps_prepare(conn, PS_SQL)
        d = delta(before, all_status(PS))
        assert id1 != id2
        assert all(d[s]["Com_stmt_prepare"] == 2 for s in st.SERVERS), d
        assert ps_execute(conn, id2, 9)[0][0] == 9


def test_closed_statement_stays_open_for_reuse(proxy):
    """COM_STMT_CLOSE leaves the statement open on the servers (MaxScale's
    documented behaviour): no server counts a close, and the next PREPARE
    of the text is answered without one, its id still executing."""
    wait_routes(REUSE_PORT)
    with st.connect(REUSE_PORT) as conn:
        before = all_status(PS)
        id1, _ = ps_prepare(conn, PS_SQL)
        ps_close(conn, id1)
        assert st.scalar(conn, "SELECT 1") == 1   # the close is passed
        id2, _ = ps_prepare(conn, PS_SQL)
        assert id2 == id1
        assert ps_execute(conn, id2, 42)[0][0] == 42
        d = delta(before, all_status(PS))
    assert all(d[s]["Com_stmt_prepare"] == 1 for s in st.SERVERS), d
    assert all(d[s]["Com_stmt_close"] == 0 for s in st.SERVERS), d


def test_reuse_is_per_default_database(proxy):
    """The same text after USE of another database names other tables: it
    is prepared again (a table only that database has proves where the
    second statement reads)."""
    wait_routes(REUSE_PORT)
    with st.root(st.PRIMARY_ID) as r, r.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS test2")
        cur.execute("CREATE TABLE IF NOT EXISTS test2.opt (id INT "
                    "PRIMARY KEY, v VARCHAR(32))")
        cur.execute("REPLACE INTO test2.opt VALUES (1, 'other')")
        cur.execute("GRANT ALL ON test2.* TO %s@'%%'", (st.APP_USER,))
    st.wait_replicated()
    sql = ("SELECT CAST(? AS SIGNED), CAST(LENGTH(v) AS SIGNED) FROM opt "
           "WHERE id = 1")
    try:
        with st.connect(REUSE_PORT, database="test") as conn:
            before = all_status(PS)
            id1, _ = ps_prepare(conn, sql)
            assert ps_execute(conn, id1, 1) == [(1, len("one"))]
            conn.select_db("test2")
            id2, _ = ps_prepare(conn, sql)
            assert id2 != id1
            assert ps_execute(conn, id2, 2) == [(2, len("other"))]
            conn.select_db("test")
            id3, _ = ps_prepare(conn, sql)   # back: the first again
            assert id3 == id1
            d = delta(before, all_status(PS))
        assert all(d[s]["Com_stmt_prepare"] == 2 for s in st.SERVERS), d
    finally:
        with st.root(st.PRIMARY_ID) as r, r.cursor() as cur:
            cur.execute("REVOKE ALL ON test2.* FROM %s@'%%'",
                        (st.APP_USER,))
            cur.execute("DROP DATABASE test2")


def ps_execute_ok(conn, stmt_id, value):
    """COM_STMT_EXECUTE with one BIGINT parameter of a statement that
    answers OK: its affected rows."""
    body = struct.pack("<IBI", stmt_id, 0, 1) + b"\x00\x01"
    body += bytes([0x08, 0]) + struct.pack("<q", value)
    conn._execute_command(0x17, body)
    data = conn._read_packet().get_all_data()
    if data[0] == 0xFF:
        code = struct.unpack("<H", data[1:3])[0]
        raise pymysql.err.OperationalError(code, data[9:].decode())
    assert data[0] == 0x00, data
    return data[1]


def test_prepared_write_moves_transaction(proxy):
    """Binary protocol in an optimistic transaction: a prepared SELECT
    runs on the replica, the prepared INSERT moves the transaction (the
    SELECT replayed on the primary with the primary's statement id) and
    commits there."""
    wait_routes(OPT_PORT)
    with st.root(st.PRIMARY_ID) as r, r.cursor() as cur:
        cur.execute("DELETE FROM test.opt WHERE id >= 30")
    st.wait_replicated()
    with st.connect(OPT_PORT) as conn, conn.cursor() as cur:
        sel, _ = ps_prepare(conn, "SELECT ?, CAST(id AS SIGNED) FROM "
                                  "test.opt WHERE id = 2")
        ins, _ = ps_prepare(conn, "INSERT INTO test.opt VALUES (?, 'ps')")
        before = all_status(TRX)
        cur.execute("BEGIN")
        assert ps_execute(conn, sel, 5) == [(5, 2)]
        assert ps_execute_ok(conn, ins, 30) == 1
        cur.execute("COMMIT")
        d = delta(before, all_status(TRX))
    assert sorted(d[sid]["Com_rollback"] for sid in st.REPLICA_IDS) \
        == [0, 1], d
    assert d[st.PRIMARY_ID]["Com_commit"] == 1, d
    with st.root(st.PRIMARY_ID) as r:
        assert st.scalar(r, "SELECT v FROM test.opt WHERE id = 30") == "ps"
