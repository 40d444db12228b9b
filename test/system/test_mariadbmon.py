# SPDX-License-Identifier: Apache-2.0
"""mariadbmon on the real sandbox cluster: roles whatever the config order,
a stopped replica, switchover, automatic failover under a write load with
no acknowledged write lost, auto_rejoin of the old primary,
verify_master_failure, servers_no_promotion, and a diverged old primary
left alone.

One Sluice for the module (servers listed db3,db1,db2; db3 in
servers_no_promotion, so a failover must pick db2 although db3 comes first
in config order). Module commands go through the REST API as a user
would call them: POST /v1/maxscale/modules/mariadbmon/CMD?ARGS as the
admin user (what `maxctrl call command` does). The tests run in file
order and each leaves db1 primary; the last one (diverged primary) and any
test that leaves the cluster otherwise rebuild the sandbox from scratch.
Servers are killed, stopped and started with scripts/sandbox
kill-server/stop-server/start-server.
"""

import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

import sluicetest as st
from proxy import MonitoredSluice, global_section, mariadbmon_section, \
    readconnroute_services, server_sections

pytestmark = pytest.mark.sluice_only

INTERVAL_MS = 500
FAILCOUNT = 2
PRIMARY_PORT = st.port(4350)
REPLICA_PORT = st.port(4351)
ADMIN_PORT = st.port(4352)


def config(run_dir):
    servers = "db3,db1,db2"
    text = global_section(run_dir, ADMIN_PORT) + server_sections((3, 1, 2))
    text += mariadbmon_section(servers, f"{INTERVAL_MS}ms", f"""
backend_connect_timeout=2s
backend_read_timeout=3s
auto_failover=true
auto_rejoin=true
failcount={FAILCOUNT}
enforce_read_only_slaves=true
servers_no_promotion=db3
switchover_timeout=20s
failover_timeout=20s
""")
    text += readconnroute_services(servers, PRIMARY_PORT, REPLICA_PORT)
    return text


def error_detail(doc):
    return doc["errors"][0]["detail"] if doc and doc.get("errors") else ""


def primary_id(port=PRIMARY_PORT):
    with st.connect(port, connect_timeout=3, read_timeout=5) as c:
        return st.server_id(c)


def wait_topology(primary, timeout=30, port=PRIMARY_PORT):
    """primary writable, both others replicating from it, and Sluice
    routing new primary sessions (on `port`) to it."""
    others = [s for s in (1, 2, 3) if s != primary]
    st.wait_until(lambda: not st.read_only(primary) and all(
        st.replicates_from(s, primary) for s in others), timeout,
        what=f"db{primary} primary with db{others} replicating from it")
    st.wait_until(lambda: primary_id(port) == primary, timeout,
                  what=f"the master service to reach db{primary}")


@pytest.fixture(scope="module")
def sl(tmp_path_factory):
    with st.root(1) as c:
        c.cursor().execute("CREATE TABLE IF NOT EXISTS test.mmon "
                           "(id INT PRIMARY KEY, tag VARCHAR(32))")
        c.cursor().execute("DELETE FROM test.mmon")
    st.wait_replicated()
    run_dir = tmp_path_factory.mktemp("mariadbmon")
    s = MonitoredSluice(run_dir, config(run_dir), [PRIMARY_PORT, REPLICA_PORT, ADMIN_PORT],
                        ADMIN_PORT)
    try:
        wait_topology(1)
        yield s
    finally:
        problems = s.daemon.stop()
        if not st.healthy_topology(1):
            st.sandbox_cmd("stop")
            st.sandbox_cmd("start", "--fresh")
    assert not problems, "\n".join(problems)


@pytest.fixture(autouse=True)
def restore(sl):
    """Each test leaves db1 primary; if one did not, repair by a
    switchover (or, failing that, a fresh sandbox)."""
    yield
    if st.healthy_topology(1):
        return
    for sid in (1, 2, 3):
        try:
            with st.root(sid):
                pass
        except Exception:  # noqa: BLE001
            st.sandbox_cmd("start-server", sid)
    status, doc = sl.command("switchover", "Cluster-Monitor", "db1")
    if status != 200 or not st.healthy_topology(1):
        problems = sl.daemon.stop(check_exit=False)
        st.sandbox_cmd("stop")
        st.sandbox_cmd("start", "--fresh")
        pytest.fail(f"test left the cluster broken ({status} {doc}); "
                    "sandbox rebuilt, later tests in this module are void"
                    + "".join("\n" + p for p in problems))


def test_roles_any_config_order(sl):
    log = sl.log()
    assert "Server 'db1' changed state: Down -> Master, Running" in log
    for sid in (2, 3):
        assert (f"Server 'db{sid}' changed state: Down -> Slave, Running"
                in log)
    assert "primary is now 'db1'" in log
    for _ in range(6):
        with st.connect(REPLICA_PORT) as c:
            assert st.server_id(c) in (2, 3)
    assert primary_id() == 1


def test_stopped_replica_marked_down(sl):
    st.sandbox_cmd("stop-server", 3)
    try:
        # the deadline only stops waiting (failcount ticks of 500 ms)
        st.wait_until(lambda: "Server 'db3' changed state: Slave, Running "
                      "-> Down" in sl.log(), 60, what="db3 marked Down")
        for _ in range(6):
            with st.connect(REPLICA_PORT) as c:
                assert st.server_id(c) == 2
    finally:
        st.sandbox_cmd("start-server", 3)
    st.wait_until(lambda: st.replicates_from(3, 1), 20, what="db3 back")


def test_switchover_and_back(sl):
    failures = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                with st.connect(REPLICA_PORT, connect_timeout=3) as c:
                    for _ in range(5):
                        st.scalar(c, "SELECT COUNT(*) FROM test.mmon")
            except Exception as exc:  # noqa: BLE001 - must not happen
                failures.append(repr(exc))
            time.sleep(0.02)

    w = st.Writer(PRIMARY_PORT, "test.mmon", "switchover", 100000)
    w.start()
    readers = [threading.Thread(target=reader, daemon=True)
               for _ in range(2)]
    for r in readers:
        r.start()
    time.sleep(1)
    # servers_no_promotion: db3 is refused by name.
    status, doc = sl.command("switchover", "Cluster-Monitor", "db3")
    assert status == 400 and "servers_no_promotion" in error_detail(doc), \
        (status, doc)
    # without credentials the command is refused and nothing moves
    req = urllib.request.Request(
        f"http://{st.HOST}:{ADMIN_PORT}/v1/maxscale/modules/mariadbmon/"
        "switchover?Cluster-Monitor&db2&db1", data=b"", method="POST")
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=30)
    assert exc.value.code == 401
    assert primary_id() == 1
    status, doc = sl.command("switchover", "Cluster-Monitor", "db2", "db1")
    assert (status, doc) == (200, {"meta": {"primary": "db2"}})
    wait_topology(2)
    time.sleep(1)
    w.stop()
    stop.set()
    for r in readers:
        r.join(timeout=10)
    assert not failures, failures[:3]
    st.wait_until(
        lambda: set(w.acked) <= st.ids_on(2, "test.mmon", "switchover"), 10,
        what="acknowledged writes on db2")
    assert len(w.acked) > 20
    status, doc = sl.command("switchover", "Cluster-Monitor", "db1")
    assert (status, doc) == (200, {"meta": {"primary": "db1"}})
    wait_topology(1)
    assert set(w.acked) <= st.ids_on(1, "test.mmon", "switchover")


def test_failover_then_rejoin(sl):
    w = st.Writer(PRIMARY_PORT, "test.mmon", "failover", 200000)
    w.start()
    time.sleep(1.5)
    before = len(w.acked)
    assert before > 20
    t_kill = time.monotonic()
    st.sandbox_cmd("kill-server", 1)
    try:
        # A replica is promoted within failcount x interval + margin: db2,
        # as db3 is in servers_no_promotion (though first in config).
        st.wait_until(lambda: not st.read_only(2), FAILCOUNT * INTERVAL_MS
                      / 1000 + 5, interval=0.05, what="db2 promoted")
        promoted = time.monotonic() - t_kill
        st.wait_until(lambda: st.replicates_from(3, 2), 10,
                      what="db3 replicating from db2")
        assert st.read_only(3)
        st.wait_until(lambda: primary_id() == 2, 10,
                      what="master service to reach db2")
        n_after = len(w.acked)
        st.wait_until(lambda: len(w.acked) > n_after + 10, 10,
                      what="writes resuming through Sluice")
        w.stop()
        acked = set(w.acked)
        lost = acked - st.ids_on(2, "test.mmon", "failover")
        print(f"failover: promoted {promoted:.2f}s after kill; "
              f"{len(acked)} acked writes, {len(lost)} lost, "
              f"{w.errors} client errors")
        assert not lost, f"acknowledged writes lost: {sorted(lost)[:10]}"
        log = sl.log()
        assert "failover: promoting 'db2'" in log
        assert "primary 'db1' down for" in log
    finally:
        w.stop()
        # auto_rejoin: db1 comes back as a read-only replica of db2.
        st.sandbox_cmd("start-server", 1)
    st.wait_until(lambda: st.replicates_from(1, 2) and st.read_only(1), 20,
                  what="db1 rejoined as a replica of db2")
    assert "rejoining 'db1'" in sl.log()
    with st.connect(PRIMARY_PORT) as c:
        assert st.server_id(c) == 2
        c.cursor().execute("INSERT INTO test.mmon VALUES (299999, 'rejoin')")
    st.wait_until(lambda: st.ids_on(1, "test.mmon", "rejoin") == {299999}, 10,
                  what="new write replicated to the rejoined db1")
    status, doc = sl.command("switchover", "Cluster-Monitor", "db1")
    assert status == 200, (status, doc)
    wait_topology(1)


def lock_monitor_user(sid, lock):
    """(Un)lock the sluice account on one server only (not replicated)
    and drop its connections, so only Sluice loses that server."""
    verb = "LOCK" if lock else "UNLOCK"
    with st.root(sid) as c, c.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin=0")
        for host in ("%", "localhost"):
            cur.execute(f"ALTER USER '{st.SERVICE_USER}'@'{host}' "
                        f"ACCOUNT {verb}")
        if lock:
            cur.execute("SELECT id FROM information_schema.PROCESSLIST "
                        "WHERE USER = %s", (st.SERVICE_USER,))
            for (cid,) in cur.fetchall():
                try:
                    cur.execute(f"KILL CONNECTION {cid}")
                except Exception:  # noqa: BLE001 - already gone
                    pass


def test_verify_master_failure(sl):
    # Writes on db1 directly keep the replicas receiving events: with
    # master_failure_timeout (10 s by default) an idle primary would be
    # failed over once that much time passed without one
    # (test_master_failure_timeout covers that side).
    stop = threading.Event()

    def write():
        with st.root(1) as c, c.cursor() as cur:
            n = 499000
            while not stop.is_set():
                cur.execute("INSERT INTO test.mmon VALUES (%s, 'verify')",
                            (n,))
                c.commit()
                n += 1
                time.sleep(0.2)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    lock_monitor_user(1, True)
    try:
        st.wait_until(lambda: "primary 'db1' is unreachable" in sl.log(),
                      10, what="monitor losing db1")
        # Well past failcount intervals: still no failover, because both
        # replicas' IO threads are connected to db1 and receiving events.
        time.sleep(FAILCOUNT * INTERVAL_MS / 1000 * 3)
        assert writer.is_alive()
        assert st.read_only(2) and st.read_only(3)
        assert st.replicates_from(2, 1) and st.replicates_from(3, 1)
        assert "not failing over: primary 'db1' is unreachable from " \
               "Sluice but replica" in sl.log()
    finally:
        stop.set()
        writer.join(10)
        lock_monitor_user(1, False)
    wait_topology(1)


def test_diverged_old_primary_left_alone(sl, tmp_path):
    st.sandbox_cmd("kill-server", 1)
    st.wait_until(lambda: not st.read_only(2), 10, what="db2 promoted")
    st.wait_until(lambda: st.replicates_from(3, 2), 10, what="db3 moved")
    # db1 returns with a transaction of its own that db2 never saw (run
    # from --init-file, before anyone can connect): it has diverged.
    init = tmp_path / "diverge.sql"
    init.write_text("INSERT INTO test.mmon VALUES (399999, 'diverged');\n")
    st.sandbox_cmd("start-server", 1, f"--init-file={init}")
    st.wait_until(lambda: "not rejoining server 'db1'" in sl.log(), 10,
                  what="the diverged-primary log line")
    time.sleep(2)
    assert st.replica_source(1) is None, "diverged db1 was made a replica"
    assert st.ids_on(1, "test.mmon", "diverged") == {399999}
    assert st.ids_on(2, "test.mmon", "diverged") == set()
    assert primary_id() == 2
    # Repair: the restore fixture cannot switch back to a diverged server,
    # so rebuild the sandbox here (Sluice stops first).
    problems = sl.daemon.stop()
    st.sandbox_cmd("stop")
    st.sandbox_cmd("start", "--fresh")
    assert not problems, "\n".join(problems)
