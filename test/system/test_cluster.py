# SPDX-License-Identifier: Apache-2.0
"""cluster= on a service (issue 18): its servers are the monitor's and
follow it at run time.

One Sluice: mariadbmon over db1..db3 and a readwritesplit service that
says `cluster=Cluster-Monitor` (no servers=; causal_reads=none, so
a read after the test's own write is routed by role alone). Checked by `@@server_id`
and data:

- writes (an INSERT of @@server_id, read back on the server) reach db1
  and reads reach a replica; the service's REST relationships list the
  monitor's three servers;
- db3 taken out of the monitor through the REST API: the service has
  db1 and db2 only and new sessions never read on db3; put back, new
  sessions read on db3 again; relinking the service's own servers is
  refused (400), as is destroying the monitor; a service created through
  the REST API with cluster= follows it too;
- a switchover to db2 through the monitor: writes reach db2; back to db1
  (the sandbox is left healthy, rebuilt if it cannot be);
- `cluster=` with `servers=` or with an unknown monitor: refused with
  FILE:LINE.
"""

import json
import subprocess
from pathlib import Path

import pytest

import sluicetest as st
from proxy import admin_rest, CONFIG_REFUSED, Daemon, global_section, \
    mariadbmon_section, monitor_command, server_sections

pytestmark = [pytest.mark.sluice_only]

RW_PORT = st.port(5135)
ADMIN_PORT = st.port(5136)
SESSIONS = 6


def config(run_dir, service_extra=""):
    text = global_section(run_dir, ADMIN_PORT) + server_sections()
    text += mariadbmon_section("db1,db2,db3", params="""
auto_failover=false
auto_rejoin=true
enforce_read_only_slaves=true
switchover_timeout=20s
""")
    text += f"""
[RW-Service]
type=service
router=readwritesplit
cluster=Cluster-Monitor
# where reads go, not what they see: the test's own write just before a
# read would otherwise send it to the primary while a replica catches up
causal_reads=none
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
{service_extra}
[RW-Listener]
type=listener
service=RW-Service
protocol=MariaDBClient
address={st.HOST}
port={RW_PORT}
"""
    return text


def rest(method, path, body=None):
    return admin_rest(ADMIN_PORT, method, path, body, timeout=30)


def monitor_sees(primary):
    """Sluice's monitor has db`primary` Master and the others Slave."""
    for sid in st.SERVERS:
        status, doc = rest("GET", f"/servers/db{sid}")
        state = doc["data"]["attributes"]["state"]
        if ("Master" if sid == primary else "Slave") not in state:
            return False
    return True


def wait_for(primary):
    st.wait_until(lambda: st.healthy_topology(primary) and
                  monitor_sees(primary), 30,
                  what=f"db{primary} primary, for the sandbox and Sluice")


def service_servers(name="RW-Service"):
    status, doc = rest("GET", f"/services/{name}")
    assert status == 200, doc
    return sorted(e["id"] for e in doc["data"]["relationships"]
                  ["servers"]["data"])


def set_monitor_servers(*names):
    status, doc = rest("PATCH", "/monitors/Cluster-Monitor/relationships/"
                       "servers", {"data": [{"id": n, "type": "servers"}
                                            for n in names]})
    assert status in (200, 204), doc


def write_lands_on():
    """The @@server_id an INSERT through the service stored, read back on
    the writable server (the value the server that ran it wrote)."""
    with st.connect(RW_PORT) as c, c.cursor() as cur:
        cur.execute("INSERT INTO test.cluster (sid) VALUES (@@server_id)")
        row_id = cur.lastrowid
    for sid in st.SERVERS:
        if not st.read_only(sid):
            with st.root(sid) as r:
                return st.scalar(r, "SELECT sid FROM test.cluster "
                                 "WHERE id = %s", (row_id,))
    raise AssertionError("no writable server")


def read_ids():
    """@@server_id read by SESSIONS sessions open at once."""
    conns = [st.connect(RW_PORT) for _ in range(SESSIONS)]
    try:
        return {st.server_id(c) for c in conns}
    finally:
        for c in conns:
            c.close()


@pytest.fixture(scope="module")
def sl(tmp_path_factory):
    run_dir = Path(tmp_path_factory.mktemp("cluster"))
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(config(run_dir))
    with st.root(1) as c:
        c.cursor().execute("CREATE TABLE IF NOT EXISTS test.cluster "
                           "(id INT AUTO_INCREMENT PRIMARY KEY, sid INT)")
    st.wait_replicated()
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                    st.sluice_env())
    try:
        daemon.wait_ports([RW_PORT, ADMIN_PORT])
        wait_for(1)
        yield daemon
    finally:
        try:
            st.wait_until(lambda: st.healthy_topology(1), 30,
                          what="db1 primary")
        except AssertionError:
            monitor_command(ADMIN_PORT, "switchover", "Cluster-Monitor",
                            "db1")
        problems = daemon.stop()
        if not st.healthy_topology(1):
            st.sandbox_cmd("stop")
            st.sandbox_cmd("start", "--fresh")
    assert not problems, "\n".join(problems)


def test_servers_are_the_monitors(sl):
    assert service_servers() == ["db1", "db2", "db3"]
    assert write_lands_on() == 1
    assert read_ids() == {2, 3}


def test_follows_monitor_at_run_time(sl):
    set_monitor_servers("db1", "db2")
    try:
        assert service_servers() == ["db1", "db2"]
        assert read_ids() == {2}
        assert write_lands_on() == 1
        status, doc = rest("PATCH", "/services/RW-Service/relationships/"
                           "servers", {"data": [{"id": "db1",
                                                 "type": "servers"}]})
        assert status == 400, doc
        assert "cluster" in json.dumps(doc), doc
        status, doc = rest("DELETE", "/monitors/Cluster-Monitor")
        assert status == 400, doc
    finally:
        set_monitor_servers("db1", "db2", "db3")
    assert service_servers() == ["db1", "db2", "db3"]
    st.wait_until(lambda: read_ids() == {2, 3}, 20,
                  what="new sessions to read on db2 and db3 again")


def test_service_created_at_run_time(sl):
    """POST /v1/services with cluster=: the monitor's servers, following
    it; with relationships.servers as well: refused."""
    def create(name, rel=None):
        data = {"id": name, "type": "services", "attributes": {
            "router": "readconnroute", "parameters": {
                "cluster": "Cluster-Monitor", "router_options": "slave",
                "user": st.SERVICE_USER, "password": st.SERVICE_PASSWORD}}}
        if rel:
            data["relationships"] = {"servers": {"data": [
                {"id": r, "type": "servers"} for r in rel]}}
        return rest("POST", "/services", {"data": data})

    status, doc = create("RT-Both", ["db1"])
    assert status == 400, doc
    assert "has both 'cluster' and 'servers'" in json.dumps(doc), doc
    status, doc = create("RT-Cluster")
    assert status in (200, 201, 204), doc
    try:
        assert service_servers("RT-Cluster") == ["db1", "db2", "db3"]
        set_monitor_servers("db1", "db3")
        assert service_servers("RT-Cluster") == ["db1", "db3"]
        assert service_servers() == ["db1", "db3"]
    finally:
        set_monitor_servers("db1", "db2", "db3")
        rest("DELETE", "/services/RT-Cluster")
    assert service_servers() == ["db1", "db2", "db3"]
    wait_for(1)


def test_follows_a_switchover(sl):
    status, doc = monitor_command(ADMIN_PORT, "switchover",
                                  "Cluster-Monitor", "db2")
    assert status in (200, 204), doc
    try:
        wait_for(2)
        assert write_lands_on() == 2
        assert read_ids() == {1, 3}
    finally:
        status, doc = monitor_command(ADMIN_PORT, "switchover",
                                      "Cluster-Monitor", "db1")
    assert status in (200, 204), doc
    wait_for(1)
    assert write_lands_on() == 1
    assert read_ids() == {2, 3}


@pytest.mark.parametrize("extra,message", [
    ("servers=db1,db2", "service 'RW-Service' has both 'cluster' and "
     "'servers'; use one"),
    ("targets=db1", "service 'RW-Service' has both 'cluster' and "
     "'targets'; use one"),
])
def test_cluster_with_servers_refused(tmp_path, extra, message):
    cfg = tmp_path / "check.cnf"
    text = config(tmp_path, extra)
    cfg.write_text(text)
    proc = subprocess.run(st.sluice_argv("check", cfg), capture_output=True,
                          text=True, timeout=60, env=st.sluice_env())
    line = text.splitlines().index("cluster=Cluster-Monitor") + 1
    assert proc.returncode == CONFIG_REFUSED, proc.stdout + proc.stderr
    assert f"{cfg}:{line}: {message}" in proc.stderr, proc.stderr


def test_unknown_monitor_refused(tmp_path):
    cfg = tmp_path / "check.cnf"
    text = config(tmp_path).replace("cluster=Cluster-Monitor",
                                    "cluster=No-Such-Monitor")
    cfg.write_text(text)
    proc = subprocess.run(st.sluice_argv("check", cfg), capture_output=True,
                          text=True, timeout=60, env=st.sluice_env())
    line = text.splitlines().index("cluster=No-Such-Monitor") + 1
    assert proc.returncode == CONFIG_REFUSED, proc.stdout + proc.stderr
    assert (f"{cfg}:{line}: parameter 'cluster' of service 'RW-Service' "
            "refers to unknown monitor 'No-Such-Monitor'") in proc.stderr, \
        proc.stderr
