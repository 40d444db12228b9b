# SPDX-License-Identifier: Apache-2.0
"""The transaction_replay_* options with the primary's mariadbd killed
(SIGKILL) in the middle of transactions (issue 19); test_trx_replay.py
checks the same options with only the session's backend connection
killed.

One Sluice: mariadbmon (auto_failover, auto_rejoin, failcount 2 at
500 ms) and one readwritesplit service per setting. Every session opens
its transaction first; then one kill -9 of db1; the monitor promotes a
replica, each session's transaction is replayed there (or not) and the
test goes on with each session, checking the rows on the new primary,
the `@@server_id` that answers and the exact error each client gets.
Then db1 is started again, rejoins, and a switchover makes it primary
again. One failover for all the options keeps the module near 40 s.

  Full     transaction_replay=true (checksum full)
  NoIns    transaction_replay_checksum=no_insert_id
  ResOnly  transaction_replay_checksum=result_only
  Mism     transaction_replay_retry_on_mismatch=true,
           transaction_replay_timeout=20s
  Att1     transaction_replay_retry_on_mismatch=true,
           transaction_replay_attempts=1
  Tmo      transaction_replay_timeout=2s, servers=db1 only (no primary
           to replay on)
  Max      transaction_replay_max_size=200
  Safe     transaction_replay_safe_commit=true (the default), a COMMIT
           in flight at the kill
  NoSafe   transaction_replay_safe_commit=false, the same
  Dl       transaction_replay_retry_on_deadlock=true: the transaction,
           replayed on the new primary, then loses a deadlock there
           against a client of the new primary and is replayed again
each with master_failure_mode=fail_on_write, delayed_retry_timeout=30s.
The COMMITs in flight wait in db1's group commit (binlog_commit_wait_*)
when db1 is killed: written nowhere, their outcome unknown to the client.
"""

import threading
import time

import pymysql
import pytest

import sluicetest as st
from proxy import MonitoredSluice, global_section, mariadbmon_section, \
    rw_service, server_sections

pytestmark = [pytest.mark.slow, pytest.mark.sluice_only]

NAMES = ("Full", "NoIns", "ResOnly", "Mism", "Att1", "Tmo", "Max")
PORTS = {n: st.port(5462 + i) for i, n in enumerate(NAMES)}
PORTS.update({"Safe": st.port(5471), "NoSafe": st.port(5472),
              "Dl": st.port(5469)})
ADMIN_PORT = st.port(5470)
BASE = """transaction_replay=true
master_failure_mode=fail_on_write
delayed_retry_timeout=30s
"""
PARAMS = {
    "Full": BASE,
    "NoIns": BASE + "transaction_replay_checksum=no_insert_id\n",
    "ResOnly": BASE + "transaction_replay_checksum=result_only\n",
    "Mism": BASE + "transaction_replay_retry_on_mismatch=true\n"
                   "transaction_replay_timeout=20s\n",
    "Att1": BASE + "transaction_replay_retry_on_mismatch=true\n"
                   "transaction_replay_attempts=1\n",
    "Tmo": BASE + "transaction_replay_timeout=2s\n",
    "Max": BASE + "transaction_replay_max_size=200\n",
    "Safe": BASE,
    "NoSafe": BASE + "transaction_replay_safe_commit=false\n",
    "Dl": BASE + "transaction_replay_retry_on_deadlock=true\n",
}
INTERVAL_MS, FAILCOUNT = 500, 2


def config(run_dir):
    servers = "db1,db2,db3"
    text = global_section(run_dir, ADMIN_PORT) + server_sections()
    text += mariadbmon_section(servers, f"{INTERVAL_MS}ms", f"""
backend_connect_timeout=2s
backend_read_timeout=3s
auto_failover=true
auto_rejoin=true
failcount={FAILCOUNT}
enforce_read_only_slaves=true
switchover_timeout=20s
failover_timeout=20s
""")
    for n in PORTS:
        text += rw_service(f"{n}-Service", PORTS[n], PARAMS[n],
                           "db1" if n == "Tmo" else servers)
    return text


def primary():
    for sid in st.SERVERS:
        try:
            if not st.read_only(sid):
                return sid
        except Exception:  # noqa: BLE001 - a dead server
            pass
    return None


def root_exec(sid, sql, args=None):
    with st.root(sid) as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


@pytest.fixture(scope="module")
def sl(tmp_path_factory):
    root_exec(1, "CREATE DATABASE IF NOT EXISTS test")
    root_exec(1, "CREATE OR REPLACE TABLE test.rk (id INT PRIMARY KEY, "
                 "v VARCHAR(400))")
    root_exec(1, "CREATE OR REPLACE TABLE test.rk_ai (id INT "
                 "AUTO_INCREMENT PRIMARY KEY, v VARCHAR(32))")
    root_exec(1, "INSERT INTO test.rk VALUES (1, 'a'), (2, 'b'), (3, 'c'), "
                 "(4, 'd'), (5, 'e'), (6, 'f')")
    st.wait_replicated()
    run_dir = tmp_path_factory.mktemp("replay_kill")
    s = MonitoredSluice(run_dir, config(run_dir),
                        list(PORTS.values()) + [ADMIN_PORT], ADMIN_PORT)
    try:
        st.wait_until(lambda: "primary is now 'db1'" in s.log(), 30,
                      what="the monitor to see db1 primary")
        yield s
    finally:
        try:
            with st.root(1):
                pass
        except Exception:  # noqa: BLE001 - the test did not get there
            st.sandbox_cmd("start-server", 1)
        if not st.healthy_topology(1):
            try:
                st.wait_until(lambda: primary() not in (None, 1) and all(
                    st.replicates_from(o, primary()) for o in st.SERVERS
                    if o != primary()), 40, what="a healthy cluster")
                s.command("switchover", "Cluster-Monitor", "db1")
            except Exception:  # noqa: BLE001 - rebuilt below
                pass
        problems = s.daemon.stop()
        if not st.healthy_topology(1):
            st.sandbox_cmd("stop")
            st.sandbox_cmd("start", "--fresh")
    assert not problems, "\n".join(problems)


def q(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def error_of(conn, *sqls):
    """Run sqls; the error code of the first that fails, else None."""
    try:
        for sql in sqls:
            q(conn, sql)
    except pymysql.MySQLError as exc:
        return st.error_code(exc), str(exc)
    return None


def test_primary_killed_mid_transaction(sl):
    c = {}
    for name in ("full_ok", "full_mism", "full_ai", "noins_ai",
                 "resonly_ai", "resonly_lii", "mism", "att1", "tmo",
                 "max", "safe", "nosafe", "dl"):
        svc = {"full": "Full", "noins": "NoIns", "resonly": "ResOnly",
               "mism": "Mism", "att1": "Att1", "tmo": "Tmo",
               "max": "Max", "safe": "Safe",
               "nosafe": "NoSafe", "dl": "Dl"}[name.split("_")[0]]
        c[name] = st.connect(PORTS[svc], connect_timeout=10, read_timeout=60)
    try:
        for conn in c.values():
            q(conn, "START TRANSACTION")
        assert q(c["full_ok"], "SELECT v FROM test.rk WHERE id = 1") == \
            (("a",),)
        q(c["full_ok"], "INSERT INTO test.rk VALUES (101, 'full_ok')")
        assert q(c["full_mism"], "SELECT v FROM test.rk WHERE id = 2") == \
            (("b",),)
        q(c["full_mism"], "INSERT INTO test.rk VALUES (111, 'full_mism')")
        for name in ("full_ai", "noins_ai", "resonly_ai", "resonly_lii"):
            q(c[name], f"INSERT INTO test.rk_ai (v) VALUES ('{name}')")
        for name in ("noins_ai", "resonly_lii"):
            assert q(c[name], "SELECT LAST_INSERT_ID()")[0][0] > 0
        assert q(c["mism"], "SELECT v FROM test.rk WHERE id = 3") == \
            (("c",),)
        q(c["mism"], "INSERT INTO test.rk VALUES (121, 'mism')")
        assert q(c["att1"], "SELECT v FROM test.rk WHERE id = 4") == \
            (("d",),)
        q(c["att1"], "INSERT INTO test.rk VALUES (131, 'att1')")
        q(c["tmo"], "INSERT INTO test.rk VALUES (141, 'tmo')")
        q(c["max"], "INSERT INTO test.rk VALUES (151, '" + "x" * 300 + "')")
        q(c["safe"], "INSERT INTO test.rk VALUES (161, 'safe')")
        q(c["nosafe"], "INSERT INTO test.rk VALUES (171, 'nosafe')")
        q(c["dl"], "UPDATE test.rk SET v = 'dl1' WHERE id = 5")
        # committed by others after those reads and inserts, before the
        # crash: rows 2-4 change, and an AUTO_INCREMENT id is taken, so a
        # replayed insert gets another id than the original
        root_exec(1, "UPDATE test.rk SET v = 'changed' WHERE id IN (2, 3, 4)")
        root_exec(1, "INSERT INTO test.rk_ai (v) VALUES ('other')")
        st.wait_replicated()
        # Safe and NoSafe COMMIT now: db1 holds both in its group commit
        # (before the binary log) until it dies
        root_exec(1, "SET GLOBAL binlog_commit_wait_usec = 60000000")
        root_exec(1, "SET GLOBAL binlog_commit_wait_count = 100")
        commits = {}

        def commit(name):
            commits[name] = error_of(c[name], "COMMIT")
        threads = [threading.Thread(target=commit, args=(n,))
                   for n in ("safe", "nosafe")]
        for t in threads:
            t.start()

        def both_waiting():
            return len(root_exec(
                1, "SELECT ID FROM information_schema.PROCESSLIST WHERE "
                   "USER = 'app' AND INFO = 'COMMIT'")) == 2
        st.wait_until(both_waiting, 10, interval=0.05,
                      what="the two COMMITs waiting on db1")

        t_kill = time.monotonic()
        st.sandbox_cmd("kill-server", 1)
        st.wait_until(lambda: primary() not in (None, 1),
                      FAILCOUNT * INTERVAL_MS / 1000 + 15, interval=0.05,
                      what="a replica promoted")
        new = primary()
        # retry_on_mismatch: the row read goes back to what was read, on
        # the new primary; the replay, retried, then matches
        time.sleep(1)
        root_exec(new, "UPDATE test.rk SET v = 'c' WHERE id = 3")

        # full: replayed on the new primary, goes on there
        assert q(c["full_ok"], "SELECT @@server_id") == ((new,),)
        q(c["full_ok"], "INSERT INTO test.rk VALUES (102, 'full_ok')")
        q(c["full_ok"], "COMMIT")
        # full: the replay read different data
        e = error_of(c["full_mism"],
                     "INSERT INTO test.rk VALUES (112, 'full_mism')")
        assert e and e[0] == 1105 and "differ" in e[1], e
        # full: the replayed INSERT's OK carries another insert id
        e = error_of(c["full_ai"], "COMMIT")
        assert e and e[0] == 1105 and "differ" in e[1], e
        # no_insert_id: OK packets and LAST_INSERT_ID() left out
        assert error_of(c["noins_ai"], "COMMIT") is None
        # result_only: OK packets left out ...
        assert error_of(c["resonly_ai"], "COMMIT") is None
        # ... but not the result of SELECT LAST_INSERT_ID()
        e = error_of(c["resonly_lii"], "COMMIT")
        assert e and e[0] == 1105 and "differ" in e[1], e
        # retry_on_mismatch: retried until the row matched again
        q(c["mism"], "INSERT INTO test.rk VALUES (122, 'mism')")
        q(c["mism"], "COMMIT")
        # attempts=1: one replay, it differed, no retry
        t0 = time.monotonic()
        e = error_of(c["att1"], "INSERT INTO test.rk VALUES (132, 'att1')")
        assert e and e[0] == 1105 and "differ" in e[1], e
        assert time.monotonic() - t0 < 5
        # timeout: no primary in the service (db1 only) within 2 s
        e = error_of(c["tmo"], "INSERT INTO test.rk VALUES (142, 'tmo')")
        assert e and e[0] == 1105 and \
            "transaction_replay_timeout" in e[1], e
        assert 1.5 < time.monotonic() - t_kill < 30
        # max_size: a transaction larger than that is not replayed: the
        # session is closed, as by a crashed server, and nothing of it
        # is committed (before: its next statements went to the new
        # primary outside any transaction and committed without 151)
        e = error_of(c["max"], "INSERT INTO test.rk VALUES (152, 'max')",
                     "COMMIT")
        assert e and e[0] in (2006, 2013), e
        # retry_on_deadlock after a failover: the transaction (row 5)
        # is replayed on the new primary; there it waits for row 6, held
        # by a client of the new primary that has written more (InnoDB
        # rolls back the smaller transaction) and then asks for row 5:
        # the deadlock's victim is dl's replayed transaction, replayed
        # again after the other commits; dl's client sees no error
        deadlocks = sl.log().count("Deadlock (1213) on")
        dl = {}
        with st.root(new) as other, other.cursor() as ocur:
            ocur.execute("START TRANSACTION")
            ocur.execute("INSERT INTO test.rk VALUES (181, 'o'), "
                         "(182, 'o'), (183, 'o'), (184, 'o'), (185, 'o')")
            ocur.execute("UPDATE test.rk SET v = 'o6' WHERE id = 6")

            def dl_update():
                dl["update"] = error_of(
                    c["dl"], "UPDATE test.rk SET v = 'dl2' WHERE id = 6")
            t_dl = threading.Thread(target=dl_update)
            t_dl.start()
            st.wait_until(lambda: root_exec(
                new, "SELECT COUNT(*) FROM information_schema."
                     "INNODB_LOCK_WAITS")[0][0] >= 1, 20, interval=0.05,
                what="dl's replayed transaction waiting for row 6")
            ocur.execute("UPDATE test.rk SET v = 'o5' WHERE id = 5")
            ocur.execute("COMMIT")
            t_dl.join(60)
            assert not t_dl.is_alive()
        assert dl["update"] is None, dl
        assert q(c["dl"], "SELECT @@server_id") == ((new,),)
        q(c["dl"], "COMMIT")
        assert sl.log().count("Deadlock (1213) on") == deadlocks + 1
        # its changes last, over the other client's committed ones
        assert root_exec(new, "SELECT id, v FROM test.rk WHERE id IN "
                              "(5, 6, 181, 185) ORDER BY id") == \
            ((5, "dl1"), (6, "dl2"), (181, "o"), (185, "o"))
        # safe_commit: the COMMIT's outcome is unknown, so it is not
        # replayed: 2013, and (db1 died before its binary log had it) the
        # row is nowhere; without safe_commit the transaction is
        # replayed on the new primary and the COMMIT succeeds
        for t in threads:
            t.join(60)
            assert not t.is_alive()
        assert commits["safe"] and commits["safe"][0] == 2013, commits
        assert commits["nosafe"] is None, commits
    finally:
        try:   # a failure before the kill: db1 must not keep waiting
            root_exec(1, "SET GLOBAL binlog_commit_wait_count = 0")
            root_exec(1, "SET GLOBAL binlog_commit_wait_usec = 100000")
        except pymysql.MySQLError:
            pass   # killed, as it should be: restarted with the defaults
        for conn in c.values():
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closed by the proxy
                pass

    ids = {r[0] for r in root_exec(new, "SELECT id FROM test.rk")}
    assert {101, 102, 121, 122, 171} <= ids
    assert not ids & {111, 112, 131, 132, 141, 142, 151, 152, 161}, \
        sorted(ids)
    ai = [r[0] for r in root_exec(new, "SELECT v FROM test.rk_ai")]
    assert sorted(ai) == ["noins_ai", "other", "resonly_ai"]
    assert root_exec(new, "SELECT v FROM test.rk WHERE id = 3") == (("c",),)

    # db1 back: rejoins, then primary again by a switchover
    st.sandbox_cmd("start-server", 1)
    st.wait_until(lambda: st.replicates_from(1, new) and st.read_only(1),
                  40, what="db1 rejoined")
    deadline = time.monotonic() + 60
    while primary() != 1:
        status, doc = sl.command("switchover", "Cluster-Monitor", "db1")
        assert status == 200 or time.monotonic() < deadline, (status, doc)
        if status != 200:
            time.sleep(2)
    st.wait_until(lambda: st.healthy_topology(1), 30, what="db1 primary")
