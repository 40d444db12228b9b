# SPDX-License-Identifier: Apache-2.0
"""Server `rank` and `max_routing_connections` (issue 18), MaxScale 24.02
semantics, on the sandbox (db1 primary, db2 and db3 replicas) by
`@@server_id`.

One Sluice (threads=2, mariadbmon) over db1, db2, db3 with db3
`rank=secondary` and db1 `max_routing_connections=100` (and
`persistpoolmax=4`, `persistmaxtime=5s`) in the file;
readconnroute with `router_options=slave` (RCR-S) and
`router_options=master` (RCR-M), readwritesplit (RWS with
`master_failure_mode=fail_instantly`, and RWS-E with
`master_failure_mode=error_on_write`).

- REST: `parameters.rank` and `parameters.max_routing_connections` as
  loaded, then as changed live by PATCH and by `maxctrl alter server`;
  an invalid rank refused (400, and FILE:LINE in the file).
- readconnroute (MaxScale: primary-rank servers before secondary ones as
  long as they match router_options): 20 sessions all on db2; db2 in
  maintenance (`maxctrl set server`) -> all on db3; db3 PATCHed to
  `primary` -> 20 sessions spread 10/10 over db2 and db3.
- readwritesplit (MaxScale: replicas of the rank of the session's
  primary only): 20 sessions' reads all on db2; db2 in maintenance ->
  the reads go to the primary (db1), never to the secondary db3; db3
  PATCHed to `primary` -> reads on db3; db1 and db3 `secondary` -> the
  reads follow the primary's rank to db3 only, never db2.
- max_routing_connections=2 on db1 (PATCH): two readconnroute master
  sessions connect, the third is refused with 1105 naming the limit
  (`routing_connections_refused` + 1, also in /metrics) and connects once one of the two
  closes (closed at the limit, not pooled: `persistent_connections` 0); db1's processlist never shows more than 2 of the app user's
  connections, sampled all along; meanwhile a readwritesplit session is
  refused naming the limit (fail_instantly), and with error_on_write it
  connects, reads from a replica and its write gets an error; 0 lifts
  the limit (4 at once) and a closing session's connection is pooled
  again.
"""

import re
import subprocess
import threading
import time
import urllib.request

import pymysql
import pytest

import sluicetest as st
from proxy import ADMIN_AUTH, Daemon, admin_rest, global_section, \
    mariadbmon_section, run_sluice, server_sections

pytestmark = [pytest.mark.sluice_only]

BASE = 5690
RCR_S, RCR_M, RWS, ADMIN, RWS_E = (st.port(BASE + i) for i in range(5))
MAXCTRL = st.BUILD_DIR / "bin" / "maxctrl"
N = 20


def config(run_dir):
    text = global_section(run_dir, ADMIN, threads=2)
    text += server_sections()
    text = text.replace("[db1]\ntype=server\n",
                        "[db1]\ntype=server\nmax_routing_connections=100\n"
                        "persistpoolmax=4\npersistmaxtime=5s\n",
                        1)
    text = text.replace("[db3]\ntype=server\n",
                        "[db3]\ntype=server\nrank=secondary\n", 1)
    text += mariadbmon_section("db1,db2,db3", interval="200ms")
    for name, port, router, opts in (
            ("RCR-S", RCR_S, "readconnroute", "router_options=slave"),
            ("RCR-M", RCR_M, "readconnroute", "router_options=master"),
            ("RWS", RWS, "readwritesplit",
             "master_failure_mode=fail_instantly"),
            ("RWS-E", RWS_E, "readwritesplit",
             "master_failure_mode=error_on_write")):
        text += f"""
[{name}]
type=service
router={router}
{opts}
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[{name}-Listener]
type=listener
service={name}
protocol=MariaDBClient
address={st.HOST}
port={port}
"""
    return text


@pytest.fixture(scope="module")
def sluice(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("rank")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(config(run_dir))
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                    st.sluice_env())
    try:
        daemon.wait_ports([RCR_S, RCR_M, RWS, ADMIN, RWS_E])
        st.wait_until(lambda: "Master" in state("db1") and
                      "Slave" in state("db2") and "Slave" in state("db3"),
                      30, what="db1 Master, db2 and db3 Slave")
        yield daemon
    finally:
        problems = daemon.stop()
        assert not problems, problems


def state(name):
    return server(name)["state"]


def server(name):
    status, doc = admin_rest(ADMIN, "GET", f"servers/{name}")
    assert status == 200, doc
    return doc["data"]["attributes"]


def patch(name, **params):
    status, doc = admin_rest(ADMIN, "PATCH", f"servers/{name}", {
        "data": {"attributes": {"parameters": params}}})
    assert status in (200, 204), doc


def metric(name, server_name):
    req = urllib.request.Request(f"http://{st.HOST}:{ADMIN}/metrics")
    req.add_header("Authorization", ADMIN_AUTH)
    with urllib.request.urlopen(req, timeout=30) as resp:
        text = resp.read().decode()
    m = re.search(rf'^{name}{{server="{server_name}"}} (\d+)$', text, re.M)
    assert m, f"{name} for {server_name} not in /metrics"
    return int(m.group(1))


def maxctrl(*args):
    proc = subprocess.run([str(MAXCTRL), "-u", "admin", "-p", "mariadb",
                           "--hosts", f"{st.HOST}:{ADMIN}", *args],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def maintenance(name, on):
    maxctrl("set" if on else "clear", "server", name, "maintenance")
    st.wait_until(lambda: ("Maintenance" in state(name)) == on, 10,
                  what=f"{name} maintenance={on}")


@pytest.fixture
def reset(sluice):
    """Each test starts from the file's ranks and no maintenance."""
    yield
    for name in ("db1", "db2", "db3"):
        if "Maintenance" in state(name):
            maintenance(name, False)
    patch("db1", rank="primary", max_routing_connections="100")
    patch("db2", rank="primary")
    patch("db3", rank="secondary")


def rcr_ids(port, n=N):
    """@@server_id of n sessions held open together (so least-connections
    spreads them as it would live sessions)."""
    conns = [st.connect(port) for _ in range(n)]
    try:
        return [st.server_id(c) for c in conns]
    finally:
        for c in conns:
            c.close()


def rws_read_ids(conns):
    return [st.scalar(c, "SELECT @@server_id") for c in conns]


def test_rank_in_rest_and_config(sluice, tmp_path, reset):
    assert server("db3")["parameters"]["rank"] == "secondary"
    assert server("db2")["parameters"]["rank"] == "primary"
    assert server("db1")["parameters"]["max_routing_connections"] == "100"
    assert server("db2")["parameters"]["max_routing_connections"] == "0"
    patch("db2", rank="secondary", max_routing_connections=7)
    assert server("db2")["parameters"]["rank"] == "secondary"
    assert server("db2")["parameters"]["max_routing_connections"] == "7"
    maxctrl("alter", "server", "db2", "rank", "primary",
            "max_routing_connections", "0")
    assert server("db2")["parameters"]["rank"] == "primary"
    assert server("db2")["parameters"]["max_routing_connections"] == "0"
    # hostile values: refused, nothing changed
    for bad in ({"rank": "tertiary"}, {"max_routing_connections": -1},
                {"max_routing_connections": "many"}):
        status, doc = admin_rest(ADMIN, "PATCH", "servers/db2", {
            "data": {"attributes": {"parameters": bad}}})
        assert status == 400, (bad, doc)
    assert server("db2")["parameters"]["rank"] == "primary"
    assert server("db2")["parameters"]["max_routing_connections"] == "0"
    # the file: an invalid rank is refused with FILE:LINE
    cfg = tmp_path / "bad.cnf"
    text = config(tmp_path).replace("rank=secondary", "rank=tertiary")
    cfg.write_text(text)
    status, out = run_sluice("check", cfg)
    line = next(i for i, t in enumerate(text.splitlines(), 1)
                if t == "rank=tertiary")
    assert status != 0, out
    assert f"{cfg}:{line}:" in out and "rank" in out, out


def test_readconnroute_rank(sluice, reset):
    # db3 secondary: every replica session on db2
    assert rcr_ids(RCR_S) == [2] * N
    # no primary-rank replica: the secondary one, not the primary
    maintenance("db2", True)
    assert rcr_ids(RCR_S) == [3] * N
    maintenance("db2", False)
    assert rcr_ids(RCR_S) == [2] * N
    # both primary rank: least connections spreads them evenly
    patch("db3", rank="primary")
    ids = rcr_ids(RCR_S)
    assert ids.count(2) == N // 2 and ids.count(3) == N // 2, ids
    # and back, through maxctrl
    maxctrl("alter", "server", "db3", "rank", "secondary")
    assert rcr_ids(RCR_S) == [2] * N


def test_readwritesplit_rank(sluice, reset):
    conns = [st.connect(RWS) for _ in range(N)]
    try:
        assert rws_read_ids(conns) == [2] * N
        # MaxScale: a session's replicas have its primary's rank; with db2
        # gone the reads go to the primary, never to the secondary db3
        maintenance("db2", True)
        assert rws_read_ids(conns) == [1] * N
        fresh = [st.connect(RWS) for _ in range(N)]
        try:
            assert rws_read_ids(fresh) == [1] * N
        finally:
            for c in fresh:
                c.close()
        # db3 promoted to primary rank: it takes the reads, live
        patch("db3", rank="primary")
        assert rws_read_ids(conns) == [3] * N
        maintenance("db2", False)
    finally:
        for c in conns:
            c.close()
    # both replicas primary rank: new sessions' reads use both
    conns = [st.connect(RWS) for _ in range(N)]
    try:
        ids = rws_read_ids(conns)
        assert set(ids) == {2, 3}, ids
    finally:
        for c in conns:
            c.close()
    # the primary secondary: its sessions read from secondary replicas only
    patch("db1", rank="secondary")
    patch("db3", rank="secondary")
    conns = [st.connect(RWS) for _ in range(N)]
    try:
        assert rws_read_ids(conns) == [3] * N
        # writes still go to the primary
        with conns[0].cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("SELECT @@server_id")
            assert cur.fetchone() == (1,)
            cur.execute("COMMIT")
    finally:
        for c in conns:
            c.close()


def app_conns_on_db1():
    with st.root(1) as r, r.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.processlist "
                    "WHERE user = %s", (st.APP_USER,))
        return cur.fetchone()[0]


class Sampler(threading.Thread):
    """The most app connections db1 shows, sampled every 10 ms over one
    root connection until stopped."""

    def __init__(self):
        super().__init__(daemon=True)
        self.most = 0
        self.samples = 0
        self.error = None
        self.done = threading.Event()

    def run(self):
        try:
            with st.root(1) as r, r.cursor() as cur:
                while not self.done.is_set():
                    cur.execute("SELECT COUNT(*) FROM "
                                "information_schema.processlist "
                                "WHERE user = %s", (st.APP_USER,))
                    self.most = max(self.most, cur.fetchone()[0])
                    self.samples += 1
                    time.sleep(0.01)
        except Exception as exc:   # reported by the test
            self.error = exc

    def settle(self, n=3):
        """Wait for n more samples (the state now has been seen)."""
        want = self.samples + n
        st.wait_until(lambda: self.samples >= want or self.error, 10,
                      what="processlist samples")
        assert self.error is None, self.error

    def stop(self):
        self.done.set()
        self.join(10)
        assert self.error is None, self.error


def test_max_routing_connections(sluice, reset):
    # the earlier tests' pooled connections expire (persistmaxtime=5s)
    st.wait_until(lambda: app_conns_on_db1() == 0 and
                  server("db1")["statistics"]["connections"] == 0, 30,
                  what="no app connection on db1")
    patch("db1", max_routing_connections=2)
    refused = server("db1")["statistics"]["routing_connections_refused"]
    sampler = Sampler()
    sampler.start()
    held = []
    try:
        held = [st.connect(RCR_M) for _ in range(2)]
        assert [st.server_id(c) for c in held] == [1, 1]
        assert server("db1")["statistics"]["connections"] == 2
        sampler.settle()
        with pytest.raises(pymysql.err.MySQLError) as exc:
            st.connect(RCR_M)
        assert st.error_code(exc.value) == 1105, exc.value
        assert "max_routing_connections" in str(exc.value), exc.value
        stats = server("db1")["statistics"]
        assert stats["routing_connections_refused"] == refused + 1
        assert metric("sluice_server_routing_connections_refused_total",
                      "db1") == refused + 1
        sampler.settle()
        # readwritesplit, master_failure_mode=fail_instantly: the
        # session is refused, naming the limit
        with pytest.raises(pymysql.err.MySQLError) as exc:
            st.connect(RWS)
        assert st.error_code(exc.value) == 1105, exc.value
        assert "max_routing_connections" in str(exc.value), exc.value
        # error_on_write: the client connects and reads (replicas); a
        # write, needing a primary connection, gets an error
        rws = st.connect(RWS_E)
        try:
            assert st.scalar(rws, "SELECT @@server_id") in (2, 3)
            with pytest.raises(pymysql.err.MySQLError):
                with rws.cursor() as cur:
                    cur.execute("CREATE TABLE IF NOT EXISTS "
                                "test.rank_limit (a INT)")
            assert st.scalar(rws, "SELECT @@server_id") in (2, 3)
        finally:
            st.close_quietly(rws)
        assert app_conns_on_db1() == 2
        # one closes: at the limit its connection is closed, not pooled
        # (a pooled one would keep the slot for its thread only), and the
        # next client gets a connection
        held.pop().close()
        # at once, not when a pooled one would expire (persistmaxtime 5s)
        st.wait_until(lambda: server("db1")["statistics"]["connections"]
                      < 2, 2.5, what="a slot free on db1")
        assert server("db1")["statistics"]["persistent_connections"] == 0
        st.wait_until(lambda: app_conns_on_db1() == 1, 10,
                      what="the closed connection gone from db1")
        third = st.connect(RCR_M)
        held.append(third)
        assert st.server_id(third) == 1
        sampler.settle()
        sampler.stop()
        assert sampler.samples >= 9
        assert sampler.most == 2, sampler.most
        # the limit lifted: more than 2 at once
        patch("db1", max_routing_connections=0)
        held += [st.connect(RCR_M) for _ in range(2)]
        assert [st.server_id(c) for c in held] == [1] * 4
        assert app_conns_on_db1() == 4
        # below the limit connections are pooled again
        held.pop().close()
        st.wait_until(lambda: server("db1")["statistics"]
                      ["persistent_connections"] == 1, 10,
                      what="a pooled connection to db1")
    finally:
        sampler.stop()
        for c in held:
            st.close_quietly(c)
