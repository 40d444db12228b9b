# SPDX-License-Identifier: Apache-2.0
"""The transaction_replay_* family and master_reconnection on the real
cluster, each checked by the data the primary holds and the exact error
codes the client sees.

A replay is forced the way a crash of the primary's connection looks to
the proxy: root on db1 runs KILL CONNECTION on the proxy's backend
connection of the session (found through its open transaction in
information_schema.INNODB_TRX, or as the only `app` connection). No
sysbench, no load: every test is a handful of statements.

Services (ports st.port(5104..5114); 5102/5103 are proxy.py's stock
readconnroute services; 5100-5101 belong to test_switchover):
  Full      transaction_replay=true (checksum full)
  NoIns     transaction_replay_checksum=no_insert_id
  ResOnly   transaction_replay_checksum=result_only
  Mism      transaction_replay_retry_on_mismatch=true,
            transaction_replay_timeout=8s
  Tmo       transaction_replay_timeout=2s, delayed_retry_timeout=30s
  DlOn      transaction_replay_retry_on_deadlock=true
  DlOff     transaction_replay=true only
  NoMR      master_reconnection=false, master_failure_mode=fail_on_write
  MR        master_failure_mode=fail_on_write (master_reconnection on)
  SafeOn    transaction_replay=true (transaction_replay_safe_commit=true)
  SafeOff   transaction_replay_safe_commit=false
and, in a second proxy with event_model=shared (5115-5117), DlOn again
(the module's own proxy uses SLUICE_TEST_EVENT_MODEL, pinned by default).
"""

import threading
import time

import pymysql
import pytest

import sluicetest as st
from proxy import running_proxy, rw_service, start_proxy, stop_proxy

pytestmark = pytest.mark.sluice_only

PRIMARY_PORT, REPLICA_PORT = st.port(5102), st.port(5103)
PORTS = {name: st.port(5104 + i) for i, name in enumerate(
    ("Full", "NoIns", "ResOnly", "Mism", "Tmo", "DlOn", "DlOff", "NoMR",
     "MR", "SafeOn", "SafeOff"))}
REPLAY = "transaction_replay=true\n"
PARAMS = {
    "Full": REPLAY,
    "NoIns": REPLAY + "transaction_replay_checksum=no_insert_id",
    "ResOnly": REPLAY + "transaction_replay_checksum=result_only",
    "Mism": REPLAY + "transaction_replay_retry_on_mismatch=true\n"
                     "transaction_replay_timeout=8s",
    "Tmo": REPLAY + "transaction_replay_timeout=2s\n"
                    "delayed_retry_timeout=30s",
    "DlOn": REPLAY + "transaction_replay_retry_on_deadlock=true",
    "DlOff": REPLAY,
    "NoMR": "master_reconnection=false\nmaster_failure_mode=fail_on_write",
    "MR": "master_failure_mode=fail_on_write",
    "SafeOn": REPLAY,
    "SafeOff": REPLAY + "transaction_replay_safe_commit=false",
}
EXTRA = "".join(rw_service(f"{n}-Service", PORTS[n], PARAMS[n])
                for n in PORTS)


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS test")
        cur.execute("DROP TABLE IF EXISTS test.rp, test.rp_ai, test.rp_dl, "
                    "test.rp_nopk")
        cur.execute("CREATE TABLE test.rp (id INT PRIMARY KEY, "
                    "v VARCHAR(32))")
        cur.execute("CREATE TABLE test.rp_ai (id INT AUTO_INCREMENT "
                    "PRIMARY KEY, v VARCHAR(32))")
        cur.execute("CREATE TABLE test.rp_dl (id INT PRIMARY KEY, v INT)")
        cur.execute("CREATE TABLE test.rp_nopk (v VARCHAR(32))")
    st.wait_replicated()
    yield from running_proxy(tmp_path_factory, PRIMARY_PORT, REPLICA_PORT,
                             extra=EXTRA)


def wait_routes(port, timeout=20):
    def ok():
        with st.connect(port, connect_timeout=5) as c:
            return st.server_id(c) in st.REPLICA_IDS
    st.wait_until(ok, timeout, interval=0.3, what=f"port {port} to route")


def root_exec(sql, args=None):
    with st.root(st.PRIMARY_ID) as r, r.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def trx_backend_ids():
    """db1's thread ids of the proxy's connections (user app) that have
    an open transaction."""
    return [r[0] for r in root_exec(
        "SELECT p.ID FROM information_schema.PROCESSLIST p JOIN "
        "information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID "
        "WHERE p.USER = 'app'")]


def app_backend_ids():
    return [r[0] for r in root_exec(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'app'")]


def kill_trx_backend():
    """KILL CONNECTION the one proxy connection on db1 in a transaction:
    to the proxy, the primary's connection failed mid-transaction."""
    ids = []

    def one():
        # INNODB_TRX is a cache InnoDB refreshes every 0.1 s at most
        ids[:] = trx_backend_ids()
        return len(ids) == 1
    st.wait_until(one, 5, interval=0.15, what="one proxy transaction")
    root_exec(f"KILL CONNECTION {ids[0]}")
    return ids[0]


def no_app_connections():
    st.wait_until(lambda: not app_backend_ids(), 10,
                  what="no app connections left on db1")


def primary_rows(sql, args=None):
    return root_exec(sql, args)


def set_row(i, v):
    root_exec("REPLACE INTO test.rp VALUES (%s, %s)", (i, v))


# ---- transaction_replay_checksum ----

def test_changed_read_aborts_replay_with_full_checksum(proxy):
    """A transaction read a row another session then changed: its replay
    reads different data, so the client gets 1105 (checksum mismatch),
    the session closes and nothing of the transaction is committed."""
    wait_routes(PORTS["Full"])
    no_app_connections()
    set_row(1, "before")
    root_exec("DELETE FROM test.rp WHERE id = 2")
    with st.connect(PORTS["Full"]) as c, c.cursor() as cur:
        cur.execute("START TRANSACTION")
        cur.execute("SELECT v, @@server_id FROM test.rp WHERE id = 1")
        assert cur.fetchone() == ("before", st.PRIMARY_ID)
        set_row(1, "after")   # another session, committed
        kill_trx_backend()
        with pytest.raises(pymysql.MySQLError) as exc:
            cur.execute("INSERT INTO test.rp VALUES (2, 'trx')")
        assert st.error_code(exc.value) == 1105
        assert "differ" in str(exc.value)
        with pytest.raises(pymysql.MySQLError):   # the session is closed
            cur.execute("SELECT 1")
    assert primary_rows("SELECT COUNT(*) FROM test.rp WHERE id = 2") \
        == ((0,),)


def replay_auto_increment(port, extra_stmt=None):
    """A transaction inserting into an AUTO_INCREMENT table, replayed: the
    replay's insert id differs from the original (InnoDB does not reuse
    the rolled-back one). Returns the rows of the table after COMMIT, or
    raises the client's error."""
    root_exec("DELETE FROM test.rp_ai")
    no_app_connections()
    with st.connect(port) as c, c.cursor() as cur:
        cur.execute("START TRANSACTION")
        cur.execute("INSERT INTO test.rp_ai (v) VALUES ('x')")
        first_id = cur.lastrowid
        if extra_stmt:
            cur.execute(extra_stmt)
            cur.fetchall()
        kill_trx_backend()
        cur.execute("INSERT INTO test.rp_ai (v) VALUES ('y')")
        cur.execute("COMMIT")
        rows = primary_rows("SELECT id, v FROM test.rp_ai ORDER BY id")
        assert first_id not in [r[0] for r in rows]   # really replayed
        return rows


def test_insert_id_mismatch_fails_with_full(proxy):
    wait_routes(PORTS["Full"])
    with pytest.raises(pymysql.MySQLError) as exc:
        replay_auto_increment(PORTS["Full"])
    assert st.error_code(exc.value) == 1105
    assert primary_rows("SELECT COUNT(*) FROM test.rp_ai") == ((0,),)


def test_insert_id_ignored_with_no_insert_id(proxy):
    """Only the OK packet's insert id differs: no_insert_id replays the
    transaction and both rows arrive, committed once."""
    wait_routes(PORTS["NoIns"])
    rows = replay_auto_increment(PORTS["NoIns"])
    assert [r[1] for r in rows] == ["x", "y"]


def test_last_insert_id_result_ignored_only_with_no_insert_id(proxy):
    """SELECT LAST_INSERT_ID() in the transaction: its result set differs
    on replay. result_only compares result sets (1105); no_insert_id
    leaves out the results of statements using LAST_INSERT_ID()."""
    wait_routes(PORTS["ResOnly"])
    with pytest.raises(pymysql.MySQLError) as exc:
        replay_auto_increment(PORTS["ResOnly"], "SELECT LAST_INSERT_ID()")
    assert st.error_code(exc.value) == 1105
    assert primary_rows("SELECT COUNT(*) FROM test.rp_ai") == ((0,),)
    rows = replay_auto_increment(PORTS["NoIns"], "SELECT LAST_INSERT_ID()")
    assert [r[1] for r in rows] == ["x", "y"]


# ---- transaction_replay_retry_on_mismatch, transaction_replay_timeout ----

def test_retry_on_mismatch_replays_until_data_matches(proxy):
    """The row the transaction read is changed, then changed back 1 s
    later: the replays differ until then, and with retry_on_mismatch (and
    transaction_replay_timeout=8s) the transaction goes through with its
    data (without the retry, the first test's 1105)."""
    wait_routes(PORTS["Mism"])
    root_exec("DELETE FROM test.rp WHERE id = 3")
    set_row(1, "before")
    no_app_connections()
    with st.connect(PORTS["Mism"]) as c, c.cursor() as cur:
        cur.execute("START TRANSACTION")
        cur.execute("SELECT v FROM test.rp WHERE id = 1")
        assert cur.fetchone() == ("before",)
        set_row(1, "changed")
        kill_trx_backend()
        back = threading.Timer(1.0, set_row, (1, "before"))
        back.start()
        t0 = time.monotonic()
        try:
            cur.execute("INSERT INTO test.rp VALUES (3, 'mism')")
        finally:
            back.join()
        waited = time.monotonic() - t0
        cur.execute("COMMIT")
    assert 0.8 < waited < 8, waited
    assert primary_rows("SELECT v FROM test.rp WHERE id = 3") \
        == (("mism",),)


def test_replay_timeout_ends_wait_for_primary(proxy):
    """No primary (db1 read_only: the monitor finds none) after the
    primary connection was lost mid-transaction: the client gets 1105
    'transaction_replay_timeout exceeded' after about 2 s, not after the
    30 s of delayed_retry_timeout, and nothing is committed."""
    wait_routes(PORTS["Tmo"])
    root_exec("DELETE FROM test.rp WHERE id = 4")
    no_app_connections()
    with st.connect(PORTS["Tmo"]) as c, c.cursor() as cur:
        cur.execute("START TRANSACTION")
        cur.execute("INSERT INTO test.rp VALUES (4, 'tmo')")
        root_exec("SET GLOBAL read_only = 1")
        try:
            time.sleep(2.5)   # > monitor_interval: db1 no longer Master
            kill_trx_backend()
            t0 = time.monotonic()
            with pytest.raises(pymysql.MySQLError) as exc:
                cur.execute("INSERT INTO test.rp VALUES (5, 'tmo')")
            waited = time.monotonic() - t0
        finally:
            root_exec("SET GLOBAL read_only = 0")
    assert st.error_code(exc.value) == 1105
    assert "transaction_replay_timeout" in str(exc.value)
    assert 0.5 < waited < 6, waited
    assert primary_rows("SELECT COUNT(*) FROM test.rp WHERE id IN (4, 5)") \
        == ((0,),)


def test_replay_timeout_between_replayed_statements(proxy):
    """The replay's first statement waits about 3 s for a row lock another
    session took (queued behind the original transaction, it gets the lock
    when the kill rolls that back, and keeps it 3 s):
    transaction_replay_timeout=2s has passed when the answer comes, so the
    rest is not replayed: 1105, and nothing of the transaction is
    committed."""
    wait_routes(PORTS["Tmo"])
    set_row(8, "free")
    root_exec("DELETE FROM test.rp WHERE id = 9")
    no_app_connections()
    locker = st.root(st.PRIMARY_ID)

    def lock_for_3s():
        with locker.cursor() as lcur:
            lcur.execute("START TRANSACTION")
            lcur.execute("SELECT v FROM test.rp WHERE id = 8 FOR UPDATE")
            time.sleep(3)
            lcur.execute("ROLLBACK")
    try:
        with st.connect(PORTS["Tmo"]) as c, c.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("UPDATE test.rp SET v = 'trx' WHERE id = 8")
            cur.execute("INSERT INTO test.rp VALUES (9, 'trx')")
            holder = threading.Thread(target=lock_for_3s)
            holder.start()
            try:
                st.wait_until(lambda: primary_rows(
                    "SELECT COUNT(*) FROM information_schema."
                    "INNODB_LOCK_WAITS")[0][0] >= 1, 10,
                    what="the locker queued")
                kill_trx_backend()
                t0 = time.monotonic()
                with pytest.raises(pymysql.MySQLError) as exc:
                    cur.execute("SELECT COUNT(*) FROM test.rp")
                waited = time.monotonic() - t0
            finally:
                holder.join(30)
    finally:
        locker.close()
    assert st.error_code(exc.value) == 1105
    assert "transaction_replay_timeout" in str(exc.value)
    assert 1.5 < waited < 6, waited
    assert primary_rows("SELECT v FROM test.rp WHERE id IN (8, 9) "
                        "ORDER BY id") == (("free",),)


# ---- transaction_replay_retry_on_deadlock ----

def deadlock(port):
    """Two clients through the proxy lock rows 1 and 2 of rp_dl in
    opposite orders: InnoDB rolls one back with 1213. Each adds its own
    amount to both rows. Returns the errors the clients saw."""
    root_exec("REPLACE INTO test.rp_dl VALUES (1, 0), (2, 0)")
    no_app_connections()
    errors = []
    a = st.connect(port)
    b = st.connect(port)
    try:
        ca, cb = a.cursor(), b.cursor()
        ca.execute("START TRANSACTION")
        cb.execute("START TRANSACTION")
        ca.execute("UPDATE test.rp_dl SET v = v + 1 WHERE id = 1")
        cb.execute("UPDATE test.rp_dl SET v = v + 10 WHERE id = 2")

        def second(cur, row, amount):
            try:
                cur.execute(f"UPDATE test.rp_dl SET v = v + {amount} "
                            f"WHERE id = {row}")
                cur.execute("COMMIT")
            except pymysql.MySQLError as exc:
                errors.append(st.error_code(exc))
        ta = threading.Thread(target=second, args=(ca, 2, 1))
        ta.start()
        # a waits for b's lock on row 2 before b asks for row 1
        st.wait_until(lambda: primary_rows(
            "SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS")
            [0][0] >= 1, 10, what="a lock wait")
        second(cb, 1, 10)
        ta.join(30)
        assert not ta.is_alive()
    finally:
        a.close()
        b.close()
    return errors


def test_deadlock_replayed_with_retry_on_deadlock(proxy):
    """The victim's transaction is replayed: neither client sees 1213 and
    both transactions' changes are committed (1 + 10 on each row)."""
    wait_routes(PORTS["DlOn"])
    errors = deadlock(PORTS["DlOn"])
    assert errors == []
    assert primary_rows("SELECT id, v FROM test.rp_dl ORDER BY id") \
        == ((1, 11), (2, 11))


def test_deadlock_replayed_in_shared_model(proxy, tmp_path):
    """event_model=shared replays too: the replay runs on a session timer
    (sl_session_add_timer, under the session's lock), so the victim's
    transaction is replayed and neither client sees 1213 (before session
    timers replay was off in the shared model and the 1213 came through)."""
    port = st.port(5117)
    shared = start_proxy(tmp_path, st.port(5115), st.port(5116),
                         event_model="shared",
                         extra=rw_service("DlShared-Service", port,
                                          PARAMS["DlOn"]))
    try:
        wait_routes(port)
        assert deadlock(port) == []
        assert primary_rows("SELECT id, v FROM test.rp_dl ORDER BY id") \
            == ((1, 11), (2, 11))
    finally:
        problems = stop_proxy(shared)
    assert not problems, problems


def test_deadlock_replay_that_differs_answers_1213(proxy):
    """A deadlock victim whose replay reads different data (a row it read
    was changed and committed by another client in between) gets the
    deadlock the server gave it (1213, SQLSTATE 40001), not ERROR 1105,
    and its session goes on: the transaction was rolled back, the
    application retries it on the same connection. (Before: ERROR 1105
    Transaction replay failed, session closed.)"""
    port = PORTS["DlOn"]
    wait_routes(port)
    root_exec("REPLACE INTO test.rp_dl VALUES (1, 0), (2, 0), (3, 0), "
              "(4, 0), (5, 0), (6, 0)")
    no_app_connections()
    errors = []
    a = st.connect(port)
    b = st.connect(port)
    try:
        ca, cb = a.cursor(), b.cursor()
        ca.execute("START TRANSACTION")
        cb.execute("START TRANSACTION")
        ca.execute("UPDATE test.rp_dl SET v = v + 1 WHERE id = 1")
        ca.execute("SELECT v FROM test.rp_dl WHERE id = 3")
        assert ca.fetchall() == ((0,),)
        # b is the heavier transaction: InnoDB rolls a back
        for row in (2, 4, 5, 6):   # (one IN list would scan and lock all)
            cb.execute(f"UPDATE test.rp_dl SET v = v + 10 WHERE id = {row}")
        # another client commits a change to the row a read
        root_exec("UPDATE test.rp_dl SET v = 5 WHERE id = 3")

        def a_second():
            try:
                ca.execute("UPDATE test.rp_dl SET v = v + 1 WHERE id = 2")
                ca.execute("COMMIT")
            except pymysql.MySQLError as exc:
                errors.append(st.error_code(exc))
        ta = threading.Thread(target=a_second)
        ta.start()
        st.wait_until(lambda: primary_rows(
            "SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS")
            [0][0] >= 1, 10, what="a lock wait")
        cb.execute("UPDATE test.rp_dl SET v = v + 10 WHERE id = 1")
        cb.execute("COMMIT")
        ta.join(30)
        assert not ta.is_alive()
        assert errors == [1213]
        # the same connection goes on, outside any transaction
        ca.execute("SELECT @@in_transaction")
        assert ca.fetchall() == ((0,),)
        ca.execute("START TRANSACTION")
        ca.execute("UPDATE test.rp_dl SET v = v + 1 WHERE id = 1")
        ca.execute("SELECT @@server_id")
        assert ca.fetchall() == ((st.PRIMARY_ID,),)
        ca.execute("UPDATE test.rp_dl SET v = v + 1 WHERE id = 2")
        ca.execute("COMMIT")
    finally:
        a.close()
        b.close()
    rows = primary_rows("SELECT id, v FROM test.rp_dl WHERE id <= 3 "
                        "ORDER BY id")
    root_exec("DELETE FROM test.rp_dl WHERE id > 2")   # deadlock()'s rows
    assert rows == ((1, 11), (2, 11), (3, 5))


def test_deadlock_reaches_client_without_retry(proxy):
    wait_routes(PORTS["DlOff"])
    errors = deadlock(PORTS["DlOff"])
    assert errors == [1213]
    # only the survivor's changes: 1 on both rows, or 10 on both
    rows = primary_rows("SELECT id, v FROM test.rp_dl ORDER BY id")
    assert rows in (((1, 1), (2, 1)), ((1, 10), (2, 10)))


# ---- master_reconnection ----

def lose_primary_connection_then_write(port):
    """A session that wrote once loses its primary connection (KILL on
    db1, no transaction open), then writes again."""
    root_exec("DELETE FROM test.rp WHERE id IN (6, 7)")
    no_app_connections()
    c = st.connect(port)
    try:
        with c.cursor() as cur:
            cur.execute("INSERT INTO test.rp VALUES (6, @@server_id)")
            ids = app_backend_ids()
            assert len(ids) == 1, ids
            root_exec(f"KILL CONNECTION {ids[0]}")
            st.wait_until(lambda: not app_backend_ids(), 10,
                          what="the killed connection gone")
            time.sleep(1.0)   # the proxy has seen the close (at once: EOF)
            cur.execute("INSERT INTO test.rp VALUES (7, @@server_id)")
            return cur
    finally:
        c.close()


def test_master_reconnection_reconnects(proxy):
    wait_routes(PORTS["MR"])
    lose_primary_connection_then_write(PORTS["MR"])
    assert primary_rows("SELECT id, v FROM test.rp WHERE id IN (6, 7) "
                        "ORDER BY id") == ((6, "1"), (7, "1"))


def test_master_reconnection_false_closes_on_next_write(proxy):
    """master_reconnection=false: the session does not connect to a primary
    again: the next write gets 1105 and the session is closed; the row is
    not written."""
    wait_routes(PORTS["NoMR"])
    with pytest.raises(pymysql.MySQLError) as exc:
        lose_primary_connection_then_write(PORTS["NoMR"])
    assert st.error_code(exc.value) == 1105
    assert "No master" in str(exc.value)
    assert primary_rows("SELECT id FROM test.rp WHERE id IN (6, 7)") \
        == ((6,),)


# ---- transaction_replay_safe_commit ----

def replica_exec(sql):
    for sid in sorted(st.REPLICA_IDS):
        with st.root(sid) as r, r.cursor() as cur:
            cur.execute(sql)


@pytest.fixture
def commit_hangs():
    """COMMIT on db1 waits for a semi-sync ACK that does not come (the
    sandbox runs semi-sync; the replicas' IO threads are stopped) for up
    to 3 s: the window in which the proxy loses the connection."""
    # every write from here waits out the ACK timeout: this one before
    root_exec("DELETE FROM test.rp_nopk")
    # semi-sync is back ON (a timed-out wait turns it OFF until a replica
    # has caught up): only then does a COMMIT wait
    st.wait_until(lambda: root_exec(
        "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_status'")[0][1]
        == "ON", 20, interval=0.2, what="semi-sync ON on db1")
    root_exec("SET GLOBAL rpl_semi_sync_master_timeout = 3000")
    replica_exec("STOP SLAVE IO_THREAD")
    try:
        yield
    finally:
        root_exec("SET GLOBAL rpl_semi_sync_master_timeout = 2000")
        replica_exec("START SLAVE IO_THREAD")
        st.wait_replicated()


def commit_lost(port):
    """INSERT a row into a table without a key in a transaction and
    COMMIT it; while the COMMIT waits on db1, KILL its connection. Returns
    the client's error code (None: the COMMIT succeeded) and the number of
    copies of the row on db1 once the server has finished the commit."""
    no_app_connections()
    code = None
    with st.connect(port) as c, c.cursor() as cur:
        cur.execute("START TRANSACTION")
        cur.execute("INSERT INTO test.rp_nopk VALUES ('once')")
        result = {}

        def commit():
            try:
                cur.execute("COMMIT")
            except pymysql.MySQLError as exc:
                result["code"] = st.error_code(exc)
        t = threading.Thread(target=commit)
        t.start()
        ids = []

        def waiting():
            ids[:] = [r[0] for r in root_exec(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE "
                "USER = 'app' AND STATE LIKE '%semi-sync%'")]
            return len(ids) == 1
        st.wait_until(waiting, 5, what="COMMIT waiting for an ACK")
        root_exec(f"KILL CONNECTION {ids[0]}")
        t.join(30)
        assert not t.is_alive()
        code = result.get("code")
    # the killed COMMIT finishes on db1 when its ACK wait times out
    st.wait_until(lambda: not [r for r in root_exec(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'app' "
        "AND STATE LIKE '%semi-sync%'")], 10, what="the ACK waits over")
    return code, primary_rows("SELECT COUNT(*) FROM test.rp_nopk")[0][0]


def test_safe_commit_does_not_replay_a_lost_commit(proxy, commit_hangs):
    """The COMMIT's answer was lost and the transaction did commit on the
    server: with safe_commit (the default) the client gets 2013 (outcome
    unknown) and the row exists once."""
    wait_routes(PORTS["SafeOn"])
    code, copies = commit_lost(PORTS["SafeOn"])
    assert code == 2013
    assert copies == 1


def test_no_safe_commit_replays_a_lost_commit(proxy, commit_hangs):
    """transaction_replay_safe_commit=false: the transaction is replayed
    and committed again; the client sees no error, and (as MaxScale
    documents for this setting) a transaction the lost COMMIT did commit
    is committed twice: the row exists twice."""
    wait_routes(PORTS["SafeOff"])
    code, copies = commit_lost(PORTS["SafeOff"])
    assert code is None
    assert copies == 2
