# SPDX-License-Identifier: Apache-2.0
"""Backend connection pooling (issue 18): `persistpoolmax` and
`persistmaxtime` on servers.

One Sluice per event model (pinned and shared, `threads=1` so both
clients of a test run on the one worker and its one pool), basicmon over
the sandbox and two more server objects at db1's address: `db1b`
(persistmaxtime=2s) and `db1c` (persistpoolmax=2). Services:
readconnroute to the primary over db1 (RCR, `kernel_forwarding=off`:
kernel-forwarded sessions never give their connections to the pool),
over db1b (RCRB) and db1c (RCRC), and readwritesplit over db1, db2, db3
(RWS). REST API on the fourth port of each block.

- A client sets a user variable, `sql_mode`, a temporary table, another
  default database and a PREPAREd statement, then quits; the next
  client (readconnroute) is served by the same server connection
  (`CONNECTION_ID()` equal, `reused_connections` + 1,
  `persistent_connections` back to 0) and sees none of it: `@v IS NULL`,
  the global sql_mode, no table (1146), its login's database, the
  statement unknown (1243), `@@server_id` 1; the first client's
  `GET_LOCK` is held while its connection is pooled and free once the
  second client's reset ran. The same through
  readwritesplit: the primary's connection is reused (the id read in a
  transaction) and neither it nor a replica shows the first client's
  state.
- Four clients on RCRC quit: the pool keeps 2 (`persistent_connections`,
  and db1's processlist of RCRC's connections), the other 2 are closed.
- RCRB's pooled connection is closed after 2 s (persistmaxtime): gone
  from db1's processlist, `pool_expired_connections` + 1.
- Pooled connections killed on the server (`KILL` as root): the pool
  notices at once (`persistent_connections` 0 with no client asking),
  the next client gets a fresh connection (another id) with no error,
  `pool_lost_connections` + 1.
- db1 put in maintenance: its pool is emptied (the processlist too).
- A connection parked by PyMySQL is not reused by the mariadb CLI
  (other capability flags): the CLI gets a fresh connection with no
  error and the pooled one is closed (`pool_lost_connections`).
- /metrics shows the pool gauge and the reuse counter as REST does.
- A client quitting inside a transaction: its connection is closed, not
  pooled.
- A third Sluice, event_model=shared with 4 workers: 8 clients connect,
  check their session is clean, dirty it and quit, 40 times each,
  through readconnroute and readwritesplit at once: no error, every
  session clean, connections reused, no pool above its bound.
"""

import re
import threading
import urllib.request

import pytest

import sluicetest as st
from proxy import ADMIN_AUTH, Daemon, admin_rest, global_section, \
    server_sections

pytestmark = [pytest.mark.sluice_only]

BLOCKS = {"pinned": 5540, "shared": 5550}


def config(run_dir, model, base):
    text = global_section(run_dir, st.port(base + 4), threads=1,
                          extra=f"event_model={model}\nlog_debug=true")
    text += server_sections().replace(
        "[db1]\ntype=server\n",
        "[db1]\ntype=server\npersistpoolmax=4\n", 1)
    text += f"""
[db1b]
type=server
address={st.HOST}
port={st.SERVERS[1]}
persistpoolmax=4
persistmaxtime=2s

[db1c]
type=server
address={st.HOST}
port={st.SERVERS[1]}
persistpoolmax=2

[Mon]
type=monitor
module=basicmon
servers=db1,db2,db3,db1b,db1c
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
monitor_interval=200ms
"""
    # basicmon makes only the first writable server Master
    for name, servers, port, opt in (("RCR", "db1", base, "master"),
                                     ("RCRB", "db1b", base + 1, "running"),
                                     ("RCRC", "db1c", base + 2, "running")):
        text += f"""
[{name}]
type=service
router=readconnroute
router_options={opt}
kernel_forwarding=off
servers={servers}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[{name}-Listener]
type=listener
service={name}
protocol=MariaDBClient
address={st.HOST}
port={st.port(port)}
"""
    text += f"""
[RWS]
type=service
router=readwritesplit
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[RWS-Listener]
type=listener
service=RWS
protocol=MariaDBClient
address={st.HOST}
port={st.port(base + 3)}
"""
    return text


class Pooled:
    def __init__(self, daemon, base):
        self.daemon = daemon
        self.rcr = st.port(base)
        self.rcrb = st.port(base + 1)
        self.rcrc = st.port(base + 2)
        self.rws = st.port(base + 3)
        self.admin = st.port(base + 4)

    def stats(self, server):
        status, doc = admin_rest(self.admin, "GET", f"servers/{server}")
        assert status == 200, doc
        return doc["data"]["attributes"]["statistics"]

    def metric(self, name, server):
        req = urllib.request.Request(f"http://{st.HOST}:{self.admin}/metrics")
        req.add_header("Authorization", ADMIN_AUTH)
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read().decode()
        m = re.search(rf'^{name}{{server="{server}"}} (\d+)$', text, re.M)
        assert m, f"{name} for {server} not in /metrics"
        return int(m.group(1))

    def wait_no_sessions(self, timeout=10):
        """Every session closed (its connections parked or closed)."""
        st.wait_until(lambda: admin_rest(self.admin, "GET", "sessions")[1]
                      ["data"] == [], timeout, what="no sessions")

    def wait_pooled(self, server, n, timeout=10):
        st.wait_until(lambda: self.stats(server)["persistent_connections"]
                      == n, timeout,
                      what=f"{n} pooled connections to {server}")


@pytest.fixture(scope="module", params=sorted(BLOCKS))
def pooled(request, tmp_path_factory):
    model = request.param
    base = BLOCKS[model]
    run_dir = tmp_path_factory.mktemp(f"pool-{model}")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(config(run_dir, model, base))
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                    st.sluice_env())
    try:
        daemon.wait_ports([st.port(base + i) for i in range(5)])
        p = Pooled(daemon, base)

        def state(name):
            return admin_rest(p.admin, "GET", f"servers/{name}")[1][
                "data"]["attributes"]["state"]
        st.wait_until(lambda: "Master" in state("db1") and
                      "Running" in state("db1b") and
                      "Running" in state("db1c"), 20,
                      what="db1 Master, db1b and db1c Running")
        yield p
    finally:
        problems = daemon.stop()
        assert not problems, problems


def processlist_ids(db, user=st.APP_USER):
    """The connection ids of `user` on sandbox server `db`."""
    with st.root(db) as r, r.cursor() as cur:
        cur.execute("SELECT id FROM information_schema.processlist "
                    "WHERE user = %s", (user,))
        return {row[0] for row in cur.fetchall()}


def lock_free():
    with st.root(1) as r:
        return st.scalar(r, "SELECT IS_FREE_LOCK('pool_lock')")


def dirty(conn):
    """Leave every kind of session state behind (and a user lock)."""
    with conn.cursor() as cur:
        cur.execute("SET @v := 42")
        cur.execute("SET SESSION sql_mode = 'ANSI'")
        cur.execute("CREATE TEMPORARY TABLE test.pool_tmp (a INT)")
        cur.execute("INSERT INTO test.pool_tmp VALUES (1)")
        cur.execute("USE sbtest")
        cur.execute("PREPARE pool_stmt FROM 'SELECT 1'")
        cur.execute("SELECT GET_LOCK('pool_lock', 0)")
        assert cur.fetchone() == (1,)
        cur.execute("SELECT @v, @@session.sql_mode, DATABASE()")
        assert cur.fetchone() == (42, "REAL_AS_FLOAT,PIPES_AS_CONCAT,"
                                  "ANSI_QUOTES,IGNORE_SPACE,ANSI", "sbtest")


def assert_clean(conn):
    """None of dirty()'s state: the login's database is `test`."""
    with conn.cursor() as cur:
        cur.execute("SELECT @v IS NULL, @@session.sql_mode = "
                    "@@global.sql_mode, DATABASE()")
        assert cur.fetchone() == (1, 1, "test")
        with pytest.raises(Exception) as exc:
            cur.execute("SELECT * FROM test.pool_tmp")
        assert st.error_code(exc.value) == 1146
        with pytest.raises(Exception) as exc:
            cur.execute("EXECUTE pool_stmt")
        assert st.error_code(exc.value) == 1243


def test_reuse_readconnroute(pooled):
    before = pooled.stats("db1")
    a = st.connect(pooled.rcr, database="test")
    assert st.server_id(a) == 1
    first = st.scalar(a, "SELECT CONNECTION_ID()")
    dirty(a)
    a.close()
    pooled.wait_pooled("db1", before["persistent_connections"] + 1)
    assert first in processlist_ids(1)
    assert lock_free() == 0   # the pooled connection still holds it

    b = st.connect(pooled.rcr, database="test")
    try:
        assert st.server_id(b) == 1
        assert st.scalar(b, "SELECT CONNECTION_ID()") == first
        after = pooled.stats("db1")
        assert after["reused_connections"] == before["reused_connections"] + 1
        assert after["persistent_connections"] == \
            before["persistent_connections"]
        assert pooled.metric("sluice_server_pool_reused_total", "db1") == \
            after["reused_connections"]
        assert pooled.metric("sluice_server_pooled_connections", "db1") == \
            after["persistent_connections"]
        assert_clean(b)
        assert lock_free() == 1   # released by the reset
        # the reused connection works as usual
        assert st.scalar(b, "SELECT COUNT(*) FROM information_schema."
                            "schemata WHERE schema_name = 'test'") == 1
    finally:
        b.close()


def test_reuse_readwritesplit(pooled):
    a = st.connect(pooled.rws, database="test")
    with a.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("SELECT CONNECTION_ID(), @@server_id")
        first, sid = cur.fetchone()
        cur.execute("COMMIT")
    assert sid == 1
    dirty(a)
    reused = pooled.stats("db1")["reused_connections"]
    a.close()
    pooled.wait_no_sessions()
    assert pooled.stats("db1")["persistent_connections"] >= 1

    b = st.connect(pooled.rws, database="test")
    try:
        with b.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("SELECT CONNECTION_ID(), @@server_id")
            assert cur.fetchone() == (first, 1)
            cur.execute("COMMIT")
        assert pooled.stats("db1")["reused_connections"] == reused + 1
        # a read goes to a replica: its connection is clean too
        with b.cursor() as cur:
            cur.execute("SELECT @v IS NULL, @@server_id")
            isnull, rsid = cur.fetchone()
        assert isnull == 1 and rsid in st.REPLICA_IDS
        assert_clean(b)
    finally:
        b.close()


def test_pool_bounded(pooled):
    clients = [st.connect(pooled.rcrc, database="test") for _ in range(4)]
    ids = {st.scalar(c, "SELECT CONNECTION_ID()") for c in clients}
    assert len(ids) == 4
    for c in clients:
        c.close()
    pooled.wait_pooled("db1c", 2)
    # the other two were closed, not left open
    st.wait_until(lambda: len(ids & processlist_ids(1)) == 2, 10,
                  what="2 of the 4 connections left on db1")
    stats = pooled.stats("db1c")
    assert stats["max_pool_size"] == 2
    c = st.connect(pooled.rcrc, database="test")
    try:
        assert st.scalar(c, "SELECT CONNECTION_ID()") in ids
    finally:
        c.close()


def test_persistmaxtime(pooled):
    before = pooled.stats("db1b")
    a = st.connect(pooled.rcrb, database="test")
    first = st.scalar(a, "SELECT CONNECTION_ID()")
    a.close()
    pooled.wait_pooled("db1b", 1)
    assert first in processlist_ids(1)
    st.wait_until(lambda: first not in processlist_ids(1), 10,
                  what="the pooled connection closed at persistmaxtime")
    after = pooled.stats("db1b")
    assert after["persistent_connections"] == 0
    assert after["pool_expired_connections"] == \
        before["pool_expired_connections"] + 1


def test_killed_pooled_connection(pooled):
    before = pooled.stats("db1")
    a = st.connect(pooled.rcr, database="test")
    first = st.scalar(a, "SELECT CONNECTION_ID()")
    a.close()
    pooled.wait_no_sessions()
    assert pooled.stats("db1")["persistent_connections"] >= 1
    # every pooled connection of db1 is killed: none may be handed out
    with st.root(1) as r, r.cursor() as cur:
        cur.execute("SELECT id FROM information_schema.processlist WHERE "
                    "user = %s AND command = 'Sleep'", (st.APP_USER,))
        victims = {row[0] for row in cur.fetchall()}
        assert first in victims
        for v in victims:
            cur.execute(f"KILL {int(v)}")
    # noticed without any client asking: the pooled sockets are watched
    pooled.wait_pooled("db1", 0)
    b = st.connect(pooled.rcr, database="test")
    try:
        assert st.server_id(b) == 1
        assert st.scalar(b, "SELECT CONNECTION_ID()") not in victims
        assert st.scalar(b, "SELECT @v IS NULL") == 1
    finally:
        b.close()
    st.wait_until(lambda: pooled.stats("db1")["pool_lost_connections"] >=
                  before["pool_lost_connections"] + 1, 10,
                  what="the killed connection counted as lost")


def test_maintenance_empties_pool(pooled):
    a = st.connect(pooled.rcr, database="test")
    first = st.scalar(a, "SELECT CONNECTION_ID()")
    a.close()
    pooled.wait_no_sessions()
    assert pooled.stats("db1")["persistent_connections"] >= 1
    status, doc = admin_rest(pooled.admin, "PUT",
                             "servers/db1/set?state=maintenance")
    assert status in (200, 204), doc
    try:
        pooled.wait_pooled("db1", 0)
        st.wait_until(lambda: first not in processlist_ids(1), 10,
                      what="the pooled connection closed on db1")
    finally:
        status, doc = admin_rest(pooled.admin, "PUT",
                                 "servers/db1/clear?state=maintenance")
        assert status in (200, 204), doc
    st.wait_until(lambda: "Maintenance" not in admin_rest(
        pooled.admin, "GET", "servers/db1")[1]["data"]["attributes"]["state"],
        10, what="db1 out of maintenance")


def test_other_client_capabilities(pooled):
    """A connection parked by a PyMySQL client cannot serve the mariadb
    CLI (other capability flags: the server's answers would not be in
    the form the CLI expects): the CLI gets a fresh connection, no
    error, and the pooled one is closed."""
    a = st.connect(pooled.rcr, database="test")
    first = st.scalar(a, "SELECT CONNECTION_ID()")
    a.close()
    pooled.wait_no_sessions()
    before = pooled.stats("db1")
    assert before["persistent_connections"] >= 1
    proc = st.cli("SELECT @@server_id, CONNECTION_ID(), @v IS NULL",
                  port=pooled.rcr, database="test")
    assert proc.returncode == 0, proc.stderr
    sid, cid, clean = proc.stdout.split()
    assert (sid, clean) == ("1", "1")
    assert int(cid) != first
    after = pooled.stats("db1")
    assert after["pool_lost_connections"] >= \
        before["pool_lost_connections"] + 1
    st.wait_until(lambda: first not in processlist_ids(1), 10,
                  what="the unusable pooled connection closed")


def test_open_transaction_not_pooled(pooled):
    """A client that quits inside a transaction: its connection is closed
    (the server rolls the transaction back), never pooled."""
    before = pooled.stats("db1")
    a = st.connect(pooled.rcr, database="test")
    with a.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("SELECT CONNECTION_ID()")
        first = cur.fetchone()[0]
    a.close()
    pooled.wait_no_sessions()
    st.wait_until(lambda: first not in processlist_ids(1), 10,
                  what="the connection closed")
    assert pooled.stats("db1")["persistent_connections"] <= \
        before["persistent_connections"]


CHURN_BASE = 5560


@pytest.fixture(scope="module")
def churn(tmp_path_factory):
    """event_model=shared with 4 workers: pooled connections parked by
    one worker, their events handled by any, taken by sessions of any."""
    run_dir = tmp_path_factory.mktemp("pool-churn")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    text = global_section(run_dir, st.port(CHURN_BASE + 4), threads=4,
                          extra="event_model=shared")
    text += server_sections().replace(
        "[db1]\ntype=server\n",
        "[db1]\ntype=server\npersistpoolmax=8\n", 1).replace(
        "[db2]\ntype=server\n",
        "[db2]\ntype=server\npersistpoolmax=8\n", 1).replace(
        "[db3]\ntype=server\n",
        "[db3]\ntype=server\npersistpoolmax=8\n", 1)
    text += f"""
[Mon]
type=monitor
module=basicmon
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
monitor_interval=200ms

[RCR]
type=service
router=readconnroute
router_options=master
kernel_forwarding=off
servers=db1
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[RCR-Listener]
type=listener
service=RCR
protocol=MariaDBClient
address={st.HOST}
port={st.port(CHURN_BASE)}

[RWS]
type=service
router=readwritesplit
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[RWS-Listener]
type=listener
service=RWS
protocol=MariaDBClient
address={st.HOST}
port={st.port(CHURN_BASE + 1)}
"""
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(text)
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                    st.sluice_env())
    try:
        daemon.wait_ports([st.port(CHURN_BASE), st.port(CHURN_BASE + 1),
                           st.port(CHURN_BASE + 4)])
        p = Pooled(daemon, CHURN_BASE)
        st.wait_until(lambda: "Master" in admin_rest(
            p.admin, "GET", "servers/db1")[1]["data"]["attributes"]["state"],
            20, what="db1 is Master")
        yield p
    finally:
        problems = daemon.stop()
        assert not problems, problems


def test_shared_model_churn(churn):
    """8 clients connect, check they see a clean session, dirty it and
    quit, 40 times each, through readconnroute and readwritesplit at
    once, on 4 workers sharing one event queue: no error, every session
    clean, and connections were reused."""
    errors = []

    def client(port, rounds):
        try:
            for _ in range(rounds):
                c = st.connect(port, database="test")
                with c.cursor() as cur:
                    cur.execute("SELECT @v IS NULL, @@session.sql_mode = "
                                "@@global.sql_mode, DATABASE()")
                    row = cur.fetchone()
                    if row != (1, 1, "test"):
                        errors.append(f"not clean: {row}")
                    cur.execute("SET @v := 1")
                    cur.execute("SET SESSION sql_mode = 'ANSI'")
                    cur.execute("USE sbtest")
                c.close()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=client,
                                args=(st.port(CHURN_BASE + i % 2), 40))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors[:5]
    reused = sum(churn.stats(s)["reused_connections"]
                 for s in ("db1", "db2", "db3"))
    assert reused > 0
    churn.wait_no_sessions()
    for s in ("db1", "db2", "db3"):
        assert churn.stats(s)["persistent_connections"] <= 8
