# SPDX-License-Identifier: Apache-2.0
"""max_replication_lag (issue 18) with real lag, by @@server_id.

One Sluice: mariadbmon (500 ms) over db1..db3, a readwritesplit service
that says `max_replication_lag=2s` (MaxScale's current name of
max_slave_replication_lag) and a readconnroute service
(router_options=slave) that says the same.

- Lag as mariadbmon measures it: a root session on db2 holds LOCK TABLES
  on a table the primary then writes, so db2's SQL thread waits and its
  Seconds_Behind_Master grows (the REST API shows db2's
  replication_lag > 2). New sessions of both services then never use db2
  (before the lag, the same sessions used both replicas).
- Both replicas lagging that way: no replica qualifies, and new sessions
  of both services read on the primary (MaxScale's fallback), though the
  monitor still has both as Slave. (STOP SLAVE SQL_THREAD would not show
  the lag rule: mariadbmon takes the Slave status from a replica whose
  SQL thread is stopped, so no router chooses it anyway; unknown lag is
  covered by unit.readconnroute.)
- readconnroute's master_accept_reads=false: NoMaster-Service
  (router_options=slave, max_replication_lag=2s) refuses new sessions
  (1105) when every replica lags instead of using the primary, and
  RunNoMaster-Service (router_options=running) spreads sessions over the
  replicas only.
- The REST API shows the value under both names; a PATCH of either name
  changes the one setting.
- Setting both names in one service is a configuration error naming the
  file and line of the second; `--config-check` loads either name alone.
"""

import contextlib
import subprocess
from pathlib import Path

import pymysql
import pytest

import sluicetest as st
from proxy import admin_rest, CONFIG_REFUSED, Daemon, global_section, \
    mariadbmon_section, rw_service, server_sections

pytestmark = [pytest.mark.sluice_only]

RW_PORT = st.port(5132)
RCR_PORT = st.port(5133)
ADMIN_PORT = st.port(5134)
NOMASTER_PORT = st.port(5676)
RUN_NOMASTER_PORT = st.port(5677)
SERVERS = "db1,db2,db3"
SESSIONS = 6


def config(run_dir, rw_params="max_replication_lag=2s"):
    text = global_section(run_dir, ADMIN_PORT) + server_sections()
    text += mariadbmon_section(SERVERS, params="auto_failover=false\n"
                               "auto_rejoin=false\n")
    text += rw_service("RW-Service", RW_PORT, rw_params, SERVERS)
    for name, port, params in (
            ("RCR", RCR_PORT, "router_options=slave\nmax_replication_lag=2s"),
            ("NoMaster", NOMASTER_PORT, "router_options=slave\n"
             "max_replication_lag=2s\nmaster_accept_reads=false"),
            ("RunNoMaster", RUN_NOMASTER_PORT, "router_options=running\n"
             "master_accept_reads=false")):
        text += f"""
[{name}-Service]
type=service
router=readconnroute
{params}
servers={SERVERS}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[{name}-Listener]
type=listener
service={name}-Service
protocol=MariaDBClient
address={st.HOST}
port={port}
"""
    return text


def rest(method, path, body=None):
    """(HTTP status, JSON document or None) of METHOD /v1PATH."""
    return admin_rest(ADMIN_PORT, method, path, body, timeout=10)


def server_attrs(name):
    status, doc = rest("GET", f"/servers/{name}")
    assert status == 200, doc
    return doc["data"]["attributes"]


def service_params(name):
    status, doc = rest("GET", f"/services/{name}")
    assert status == 200, doc
    return doc["data"]["attributes"]["parameters"]


def ids_of_new_sessions(port):
    """@@server_id read by SESSIONS sessions open at the same time (so
    readconnroute's least-connections spreads them)."""
    conns = [st.connect(port) for _ in range(SESSIONS)]
    try:
        return sorted(st.server_id(c) for c in conns)
    finally:
        for c in conns:
            c.close()


@pytest.fixture(scope="module")
def sl(tmp_path_factory):
    run_dir = Path(tmp_path_factory.mktemp("maxlag"))
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(config(run_dir))
    with st.root(1) as c, c.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS test.maxlag "
                    "(id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    st.wait_replicated()
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                    st.sluice_env())
    try:
        daemon.wait_ports([RW_PORT, RCR_PORT, ADMIN_PORT, NOMASTER_PORT,
                           RUN_NOMASTER_PORT])
        st.wait_until(lambda: all(
            "Slave" in server_attrs(f"db{i}")["state"] and
            server_attrs(f"db{i}")["replication_lag"] == 0
            for i in (2, 3)), 30, what="both replicas seen with lag 0")
        yield daemon
    finally:
        for sid in (2, 3):
            with st.root(sid) as c:
                c.cursor().execute("START SLAVE")
        problems = daemon.stop()
        st.wait_until(lambda: st.healthy_topology(1), 60,
                      what="db1 primary, db2 and db3 replicating")
    assert not problems, "\n".join(problems)


@contextlib.contextmanager
def locked(*sids):
    """Root sessions on the replicas `sids` hold LOCK TABLES test.maxlag
    WRITE, so their SQL threads wait on the row the primary then writes
    there and their lag grows as mariadbmon measures it (> 2 s, and still
    Slave); released and caught up afterwards."""
    conns = []
    try:
        for sid in sids:
            conns.append(st.root(sid))
            conns[-1].cursor().execute("LOCK TABLES test.maxlag WRITE")
        with st.root(1) as p:
            p.cursor().execute("INSERT INTO test.maxlag (v) VALUES (1)")
        for sid in sids:
            st.wait_until(lambda: server_attrs(f"db{sid}")[
                "replication_lag"] > 2, 20,
                what=f"mariadbmon to measure db{sid}'s lag > 2 s")
            assert "Slave" in server_attrs(f"db{sid}")["state"]
        yield
    finally:
        for c in conns:
            c.close()   # releases the lock
    st.wait_until(lambda: all(
        server_attrs(f"db{i}")["replication_lag"] == 0 for i in (2, 3)),
        20, what="replicas caught up")


def test_lagging_replica_avoided(sl):
    # Both replicas serve new sessions while neither lags.
    assert set(ids_of_new_sessions(RCR_PORT)) == {2, 3}
    with locked(2):
        assert server_attrs("db3")["replication_lag"] <= 2
        assert ids_of_new_sessions(RCR_PORT) == [3] * SESSIONS
        assert ids_of_new_sessions(RW_PORT) == [3] * SESSIONS
    assert set(ids_of_new_sessions(RCR_PORT)) == {2, 3}


def test_every_replica_lagging_uses_primary(sl):
    """No replica qualifies: new sessions of both services read on the
    primary (MaxScale's fallback), though both replicas are Slave."""
    with locked(2, 3):
        assert ids_of_new_sessions(RCR_PORT) == [1] * SESSIONS
        assert ids_of_new_sessions(RW_PORT) == [1] * SESSIONS
        # master_accept_reads=false: never the primary, so no server
        with pytest.raises(pymysql.MySQLError) as exc:
            st.connect(NOMASTER_PORT).close()
        assert st.error_code(exc.value) == 1105, exc.value
        assert "has no eligible servers" in str(exc.value)
    assert 1 not in ids_of_new_sessions(RCR_PORT)
    assert 1 not in ids_of_new_sessions(NOMASTER_PORT)


def test_master_accept_reads_false_keeps_running_off_the_primary(sl):
    """router_options=running takes every server; master_accept_reads=
    false leaves the primary out (the default would give it a third of
    the sessions)."""
    assert set(ids_of_new_sessions(RUN_NOMASTER_PORT)) == {2, 3}


def config_check(tmp_path, rw_params):
    run_dir = tmp_path
    cfg = run_dir / "check.cnf"
    cfg.write_text(config(run_dir, rw_params))
    return subprocess.run(st.sluice_argv("check", cfg), capture_output=True,
                          text=True, timeout=60, env=st.sluice_env()), cfg


def test_both_names_is_an_error(tmp_path):
    proc, cfg = config_check(tmp_path, "max_replication_lag=2s\n"
                             "max_slave_replication_lag=3s")
    assert proc.returncode == CONFIG_REFUSED, proc.stdout + proc.stderr
    line = next(i for i, l in enumerate(cfg.read_text().splitlines(), 1)
                if l.startswith("max_slave_replication_lag"))
    assert (f"{cfg}:{line}: parameters 'max_replication_lag' and "
            "'max_slave_replication_lag' in service 'RW-Service' are the "
            "same setting") in proc.stderr, proc.stderr
    for params in ("max_replication_lag=2s", "max_slave_replication_lag=2"):
        proc, _ = config_check(tmp_path, params)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_both_names_show_one_setting_and_patch(sl):
    """The REST API shows the value under both names; a PATCH of either
    name changes the one setting (it replaces the other name)."""
    p = service_params("RW-Service")
    assert (p["max_replication_lag"], p["max_slave_replication_lag"]) == \
        ("2s", "2s"), p
    for name, value in (("max_slave_replication_lag", "7s"),
                        ("max_replication_lag", "5s")):
        status, doc = rest("PATCH", "/services/RW-Service", {"data": {
            "attributes": {"parameters": {name: value}}}})
        assert status in (200, 204), doc
        p = service_params("RW-Service")
        assert (p["max_replication_lag"],
                p["max_slave_replication_lag"]) == (value, value), p
