# SPDX-License-Identifier: Apache-2.0
"""mariadbmon's safety parameters of issue 18 on the real sandbox cluster
(ports 5680-5689): enforce_writable_master, promotion_sql_file and
demotion_sql_file, and auto_failover=safe.

- enforce_writable_master: db1 made read_only=1 by hand; a Sluice with
  the parameter off (the control) and a passive one with it on leave it
  so for well over two monitor intervals, an active one with it on sets
  it back to 0 within two intervals and routes writes to server 1.
- promotion_sql_file / demotion_sql_file: a switchover to db2 runs the
  promotion file on db2 (an INSERT of @@server_id: the row says 2) and
  the demotion file on db1 (SET GLOBAL max_connect_errors, a marker no
  replication carries); back to db1 the other way round. A demotion file
  edited to hold a failing statement aborts the next switchover (the
  REST error names the file, its line and the server's error), db1 stays
  the writable primary. A missing file refuses the monitor at start-up.
- auto_failover=safe: the replicas' replication stopped, rows written on
  db1 and seen by the monitor, db1 killed with SIGKILL: no failover
  (warning and monitor_diagnostics.auto_failover_blocked say why, with
  the number of transactions that would be lost), then db1 restarted and
  replication resumed. With the replicas caught up, db1 killed under a
  writer through readwritesplit: a replica is promoted, the service's
  primary (@@server_id in a transaction) is the promoted one, writes go
  on and no acknowledged row is lost; db1 rejoins and a switchover makes
  it the primary again.

Every Sluice here is its own (the tests order the ones that change the
cluster so at most one active monitor with auto_failover runs at a
time); each test leaves db1 primary, or the sandbox is rebuilt.
"""

import time

import pytest

import proxy as px
import sluicetest as st
from proxy import global_section, mariadbmon_section, rw_service, \
    server_sections

pytestmark = pytest.mark.sluice_only

INTERVAL_MS = 500
RW_PORT = st.port(5680)
ADMIN_PORT = st.port(5681)
T_RW_PORT = st.port(5682)
T_ADMIN_PORT = st.port(5683)
MONITOR = "Cluster-Monitor"


def start(run_dir, params, rw_port, admin_port, extra_global=""):
    """A Sluice with a mariadbmon of `params` over db1..db3 and a
    readwritesplit service on rw_port."""
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    text = global_section(run_dir, admin_port, extra=extra_global)
    text += server_sections((1, 2, 3))
    text += mariadbmon_section("db1,db2,db3", f"{INTERVAL_MS}ms", params)
    text += rw_service("RW", rw_port)
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(text)
    d = px.Daemon(st.sluice_argv("start", cfg), run_dir / "out.log",
                  st.sluice_env())
    d.wait_ports([rw_port, admin_port])
    return d


def log_of(run_dir):
    return (run_dir / "out.log").read_text(errors="replace")


def diag(admin_port):
    status, doc = px.admin_rest(admin_port, "GET", f"monitors/{MONITOR}",
                                timeout=5)
    assert status == 200, (status, doc)
    return doc["data"]["attributes"]["monitor_diagnostics"]


def rw_primary_id(port):
    """@@server_id of the server readwritesplit sends a transaction to."""
    with st.connect(port, connect_timeout=3, read_timeout=5) as c:
        c.begin()
        sid = st.server_id(c)
        c.commit()
        return sid


def error_detail(doc):
    return doc["errors"][0]["detail"] if doc and doc.get("errors") else ""


def stop_all(*daemons):
    problems = []
    for d in daemons:
        if d is not None:
            problems += d.stop()
    return problems


@pytest.fixture(autouse=True)
def leave_db1_primary():
    """Every test leaves db1 primary with db2 and db3 replicating; if one
    did not, the servers are started and the sandbox rebuilt."""
    yield
    for sid in (1, 2, 3):
        try:
            with st.root(sid):
                pass
        except Exception:  # noqa: BLE001 - down: start it
            st.sandbox_cmd("start-server", sid)
    if not st.healthy_topology(1):
        st.sandbox_cmd("stop")
        st.sandbox_cmd("start", "--fresh")
        pytest.fail("the test left the cluster broken; sandbox rebuilt")


# ---- enforce_writable_master ----

def test_enforce_writable_master(tmp_path):
    wait = 2 * INTERVAL_MS / 1000
    d = None
    try:
        with st.root(1) as c:
            c.cursor().execute("SET GLOBAL read_only=1")
        # the control: the parameter off leaves the primary read-only
        d = start(tmp_path / "off", "enforce_writable_master=false",
                  T_RW_PORT, T_ADMIN_PORT)
        time.sleep(wait * 3)
        assert st.read_only(1)
        problems = stop_all(d)
        d = None
        assert not problems, problems
        # a passive instance never changes the cluster
        d = start(tmp_path / "passive", "enforce_writable_master=true",
                  T_RW_PORT, T_ADMIN_PORT, extra_global="passive=true")
        time.sleep(wait * 3)
        assert st.read_only(1)
        assert "setting read_only=0" not in log_of(tmp_path / "passive")
        problems = stop_all(d)
        d = None
        assert not problems, problems
        # on: read_only back to 0 within two monitor intervals of the
        # first tick, and writes through Sluice reach server 1
        d = start(tmp_path / "on", "enforce_writable_master=true",
                  T_RW_PORT, T_ADMIN_PORT)
        t0 = time.monotonic()
        st.wait_until(lambda: not st.read_only(1), wait + 1, interval=0.05,
                      what="read_only=0 on db1")
        print(f"enforce_writable_master: db1 writable "
              f"{time.monotonic() - t0:.2f}s after Sluice was ready")
        assert "primary 'db1' is read-only, setting read_only=0 " \
               "(enforce_writable_master)" in log_of(tmp_path / "on")
        assert st.read_only(2) and st.read_only(3)
        st.wait_until(lambda: rw_primary_id(T_RW_PORT) == 1, 5,
                      what="readwritesplit's primary to be server 1")
        status, doc = px.admin_rest(T_ADMIN_PORT, "GET",
                                    f"monitors/{MONITOR}")
        assert doc["data"]["attributes"]["parameters"][
            "enforce_writable_master"] == "true"
    finally:
        problems = stop_all(d)
        with st.root(1) as c:
            c.cursor().execute("SET GLOBAL read_only=0")
    assert not problems, problems


# ---- promotion_sql_file, demotion_sql_file ----

@pytest.fixture
def promo_table():
    """test.promo written by the promotion file, which the monitor user
    may INSERT into (MaxScale: the files may need more grants)."""
    with st.root(1) as c, c.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS test.promo "
                    "(sid INT, note VARCHAR(32))")
        cur.execute("DELETE FROM test.promo")
        cur.execute("SELECT host FROM mysql.user WHERE user = %s",
                    (st.SERVICE_USER,))
        hosts = [r[0] for r in cur.fetchall()]
        for h in hosts:
            cur.execute(f"GRANT INSERT ON test.promo TO "
                        f"'{st.SERVICE_USER}'@'{h}'")
    marks = {}
    for sid in (1, 2):
        with st.root(sid) as c:
            marks[sid] = st.scalar(c, "SELECT @@max_connect_errors")
    st.wait_replicated()
    try:
        yield
    finally:
        for sid, v in marks.items():
            with st.root(sid) as c:
                c.cursor().execute(f"SET GLOBAL max_connect_errors={v}")
        with st.root(1) as c, c.cursor() as cur:
            for h in hosts:
                cur.execute(f"REVOKE INSERT ON test.promo FROM "
                            f"'{st.SERVICE_USER}'@'{h}'")
            cur.execute("DROP TABLE test.promo")


def marker(sid):
    with st.root(sid) as c:
        return int(st.scalar(c, "SELECT @@max_connect_errors"))


def promo_rows(sid):
    with st.root(sid) as c, c.cursor() as cur:
        cur.execute("SELECT sid, note FROM test.promo ORDER BY sid")
        return cur.fetchall()


def test_promotion_and_demotion_sql_files(tmp_path, promo_table):
    promo = tmp_path / "promotion.sql"
    demo = tmp_path / "demotion.sql"
    promo.write_text("# run on the promoted server\n\n"
                     "INSERT INTO test.promo VALUES (@@server_id, "
                     "'promoted')\n")
    demo.write_text("# run on the demoted server\n"
                    "SET GLOBAL max_connect_errors=4711\n")
    assert marker(1) != 4711 and marker(2) != 4711
    d = start(tmp_path / "run", f"promotion_sql_file={promo}\n"
              f"demotion_sql_file={demo}\nswitchover_timeout=20s\n"
              "backend_connect_timeout=2s\nbackend_read_timeout=5s",
              T_RW_PORT, T_ADMIN_PORT)
    try:
        status, doc = px.monitor_command(T_ADMIN_PORT, "switchover",
                                         MONITOR, "db2", "db1")
        assert status == 200, (status, doc)
        # the promotion file ran on db2 (once), the demotion file on db1
        assert promo_rows(2) == ((2, "promoted"),)
        assert marker(1) == 4711
        assert marker(2) != 4711
        st.wait_until(lambda: rw_primary_id(T_RW_PORT) == 2, 10,
                      what="readwritesplit's primary to be server 2")
        log = log_of(tmp_path / "run")
        assert f"ran promotion_sql_file '{promo}' on 'db2'" in log
        assert f"ran demotion_sql_file '{demo}' on 'db1'" in log
        # and back: promoted db1 inserts its own id, demoted db2 marked
        with st.root(1) as c:
            c.cursor().execute("SET GLOBAL max_connect_errors=100")
        status, doc = px.monitor_command(T_ADMIN_PORT, "switchover",
                                         MONITOR, "db1", "db2")
        assert status == 200, (status, doc)
        st.wait_until(lambda: len(promo_rows(1)) == 2, 5,
                      what="db1's promotion row")
        assert promo_rows(1) == ((1, "promoted"), (2, "promoted"))
        assert marker(2) == 4711 and marker(1) == 100
        st.wait_until(lambda: st.healthy_topology(1), 20,
                      what="db1 primary again")
        # the file is read at each operation: a failing statement in it
        # aborts the switchover, db1 stays the writable primary
        demo.write_text("SET GLOBAL max_connect_errors=4711\n"
                        "SET GLOBAL no_such_variable=1\n")
        status, doc = px.monitor_command(T_ADMIN_PORT, "switchover",
                                         MONITOR, "db2", "db1")
        assert status != 200, (status, doc)
        detail = error_detail(doc)
        assert f"demotion_sql_file '{demo}' line 2: server 'db1': " \
               "'SET GLOBAL no_such_variable=1' failed: Unknown system " \
               "variable" in detail, detail
        assert "switchover aborted, 'db1' stays the primary" in \
            log_of(tmp_path / "run")
        assert st.healthy_topology(1)
        st.wait_until(lambda: rw_primary_id(T_RW_PORT) == 1, 10,
                      what="readwritesplit's primary to be server 1")
        # db1's promotion row replicated to the re-demoted db2
        st.wait_until(lambda: promo_rows(2) == ((1, "promoted"),
                                                (2, "promoted")), 10,
                      what="db1's promotion row on db2")
    finally:
        problems = stop_all(d)
    assert not problems, problems


@pytest.mark.parametrize("param", ["promotion_sql_file",
                                   "demotion_sql_file"])
def test_missing_sql_file_refused(tmp_path, param):
    """A file that cannot be read refuses the monitor at start-up (the
    section's FILE:LINE and the parameter), as a bad `script` does."""
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir()
    missing = tmp_path / "nope.sql"
    text = global_section(tmp_path, T_ADMIN_PORT) + server_sections()
    text += mariadbmon_section("db1,db2,db3", "500ms", f"{param}={missing}")
    cfg = tmp_path / "bad.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("start", cfg)
    logf = tmp_path / "log" / "sluice.log"
    out += logf.read_text() if logf.exists() else ""
    line = text.splitlines().index(f"[{MONITOR}]") + 1
    assert status == px.CONFIG_REFUSED, out
    assert f"{cfg}:{line}: monitor module 'mariadbmon' refused to create " \
           f"monitor '{MONITOR}'" in out, out
    assert f"parameter '{param}': cannot read '{missing}': No such file " \
           "or directory" in out, out


# ---- auto_failover=safe ----

SAFE_PARAMS = f"""auto_failover=safe
auto_rejoin=true
failcount=2
enforce_read_only_slaves=true
backend_connect_timeout=1s
backend_read_timeout=3s
failover_timeout=20s
switchover_timeout=20s
"""


@pytest.fixture(scope="module")
def safe_table():
    with st.root(1) as c:
        c.cursor().execute("CREATE TABLE IF NOT EXISTS test.safe "
                           "(id INT PRIMARY KEY, tag VARCHAR(32))")
        c.cursor().execute("DELETE FROM test.safe")
    st.wait_replicated()


@pytest.mark.parametrize("value", ["on", "off", "TRUE", "0", "safe"])
def test_auto_failover_values(tmp_path, value):
    """MaxScale 24.02's values load; anything else is refused."""
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir()
    text = global_section(tmp_path, T_ADMIN_PORT) + server_sections()
    text += mariadbmon_section("db1,db2,db3", "500ms",
                               f"auto_failover={value}")
    cfg = tmp_path / "af.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("check", cfg)
    assert status == 0, out
    text = text.replace(f"auto_failover={value}", "auto_failover=maybe")
    cfg.write_text(text)
    status, out = px.run_sluice("check", cfg)
    line = text.splitlines().index("auto_failover=maybe") + 1
    assert status == px.CONFIG_REFUSED, out
    assert f"{cfg}:{line}: invalid value 'maybe' for parameter " \
        "'auto_failover'" in out, out


def test_safe_no_failover_when_transactions_would_be_lost(tmp_path,
                                                           safe_table):
    d = start(tmp_path, SAFE_PARAMS, RW_PORT, ADMIN_PORT)
    killed = False
    try:
        st.wait_until(lambda: rw_primary_id(RW_PORT) == 1, 10,
                      what="readwritesplit's primary to be server 1")
        assert diag(ADMIN_PORT)["auto_failover_blocked"] is None
        for sid in (2, 3):
            with st.root(sid) as c:
                c.cursor().execute("STOP SLAVE")
        with st.connect(RW_PORT) as c, c.cursor() as cur:
            for i in range(5):
                cur.execute("INSERT INTO test.safe VALUES (%s, 'behind')",
                            (i + 1,))
        with st.root(1) as c:
            pos = st.scalar(c, "SELECT @@gtid_binlog_pos")

        def seen():
            info = {s["name"]: s for s in diag(ADMIN_PORT)["server_info"]}
            return info["db1"]["gtid_binlog_pos"] == pos
        st.wait_until(seen, 5, what=f"the monitor to see db1 at {pos}")
        st.sandbox_cmd("kill-server", 1)
        killed = True
        st.wait_until(lambda: diag(ADMIN_PORT)["auto_failover_blocked"], 10,
                      what="auto_failover=safe to hold the failover back")
        why = diag(ADMIN_PORT)["auto_failover_blocked"]
        assert "would lose transactions of primary 'db1' (last seen " \
               f"gtid_binlog_pos {pos})" in why, why
        assert "5 transaction(s) would be lost" in why, why
        # well past failcount: nobody promoted, the reason logged once
        time.sleep(2 * 2 * INTERVAL_MS / 1000 * 3)
        assert st.read_only(2) and st.read_only(3)
        log = log_of(tmp_path)
        assert "failover: promoting" not in log
        assert log.count("not failing over (auto_failover=safe)") == 1, log
        assert "5 transaction(s) would be lost; a manual failover is " \
               "still possible" in log
        # MaxScale's failover-safe command applies the same rule
        status, doc = px.monitor_command(ADMIN_PORT, "failover-safe",
                                         MONITOR)
        assert status != 200, (status, doc)
        assert "5 transaction(s) would be lost" in error_detail(doc), doc
        assert st.read_only(2) and st.read_only(3)
    except BaseException:
        stop_all(d)
        raise
    finally:
        if killed:
            st.sandbox_cmd("start-server", 1)
        for sid in (2, 3):
            with st.root(sid) as c:
                try:
                    c.cursor().execute("START SLAVE")
                except Exception:  # noqa: BLE001 - the fixture repairs
                    pass
    try:
        st.wait_until(lambda: st.healthy_topology(1), 30,
                      what="db1 primary again, replicas replicating")
        st.wait_until(lambda: rw_primary_id(RW_PORT) == 1, 10,
                      what="readwritesplit's primary to be server 1")
        st.wait_until(lambda: diag(ADMIN_PORT)["auto_failover_blocked"]
                      is None, 5, what="the reason cleared")
        st.wait_replicated()
        assert st.ids_on(2, "test.safe", "behind") == {1, 2, 3, 4, 5}
    finally:
        problems = stop_all(d)
    assert not problems, problems


def test_safe_fails_over_when_nothing_is_lost(tmp_path, safe_table):
    d = start(tmp_path, SAFE_PARAMS, RW_PORT, ADMIN_PORT)
    w = None
    new = None
    try:
        st.wait_until(lambda: rw_primary_id(RW_PORT) == 1, 10,
                      what="readwritesplit's primary to be server 1")
        w = st.Writer(RW_PORT, "test.safe", "safe", 100000)
        w.start()
        time.sleep(1.5)
        assert len(w.acked) > 20
        t_kill = time.monotonic()
        st.sandbox_cmd("kill-server", 1)

        def promoted():
            nonlocal new
            for sid in (2, 3):
                if not st.read_only(sid):
                    new = sid
                    return True
            return False
        st.wait_until(promoted, 2 * INTERVAL_MS / 1000 + 10, interval=0.05,
                      what="a replica promoted")
        took = time.monotonic() - t_kill
        other = 5 - new
        st.wait_until(lambda: st.replicates_from(other, new), 10,
                      what=f"db{other} replicating from db{new}")
        st.wait_until(lambda: rw_primary_id(RW_PORT) == new, 10,
                      what=f"readwritesplit's primary to be server {new}")
        n = len(w.acked)
        st.wait_until(lambda: len(w.acked) > n + 10, 10,
                      what="writes resuming through Sluice")
        w.stop()
        acked = set(w.acked)
        lost = acked - st.ids_on(new, "test.safe", "safe")
        print(f"auto_failover=safe: db{new} promoted {took:.2f}s after the "
              f"kill; {len(acked)} acked writes, {len(lost)} lost, "
              f"{w.errors} client errors")
        assert not lost, sorted(lost)[:10]
        assert f"failover: promoting 'db{new}'" in log_of(tmp_path)
    except BaseException:
        stop_all(d)
        raise
    finally:
        if w is not None:
            w.stop()
        st.sandbox_cmd("start-server", 1)
    try:
        # auto_rejoin, or an operator's repair if db1 kept a transaction
        # nobody acknowledged (kill -9), then back to db1
        try:
            st.wait_until(lambda: st.replicates_from(1, new), 20,
                          what=f"db1 rejoined under db{new}")
        except AssertionError:
            st.repair_diverged(1, new, ["test.safe"])
            st.wait_until(lambda: st.replicates_from(1, new), 20,
                          what=f"db1 rejoined under db{new} after repair")
        status, doc = px.monitor_command(ADMIN_PORT, "switchover", MONITOR,
                                         "db1")
        assert status == 200, (status, doc)
        st.wait_until(lambda: st.healthy_topology(1), 20,
                      what="db1 primary again")
        st.wait_until(lambda: rw_primary_id(RW_PORT) == 1, 10,
                      what="readwritesplit's primary to be server 1")
    finally:
        problems = stop_all(d)
    assert not problems, problems
