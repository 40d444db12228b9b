"""Run-time changes through the REST API that take effect at once:
monitors created, stopped, started, relinked and destroyed while Sluice
runs (and persisted across a restart); a server's weight changing
readconnroute's choices for new connections; a service's router_options
changing where new connections go (proven by @@server_id)."""

import base64
import json
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import sluicetest as st
import proxy as px

ADMIN_PORT = st.port(4650)
PRIMARY = st.port(4651)
REPLICA = st.port(4652)
MAXCTRL = st.BUILD_DIR / "bin" / "maxctrl"
BASE = f"http://{st.HOST}:{ADMIN_PORT}/v1"


def start(run_dir):
    text = px.sluice_config(run_dir, PRIMARY, REPLICA)
    text = text.replace("admin_enabled=false",
                        f"admin_host={st.HOST}\nadmin_port={ADMIN_PORT}")
    return px.start_with_admin(run_dir, text, PRIMARY, REPLICA, ADMIN_PORT)


@pytest.fixture(scope="module")
def sluice(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("admin_rt")
    holder = {"proxy": start(run_dir), "dir": run_dir}
    yield holder
    problems = px.stop_proxy(holder["proxy"])
    if problems:
        pytest.fail("proxy shutdown: " + "\n".join(problems), pytrace=False)


def http(method, path, body=None):
    """(status, parsed JSON or None)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method)
    tok = base64.b64encode(b"admin:mariadb").decode()
    req.add_header("Authorization", "Basic " + tok)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text else None


def get(path):
    status, doc = http("GET", path)
    assert status == 200, (path, doc)
    return doc["data"]


def ok(*args):
    proc = subprocess.run([str(MAXCTRL), "-u", "admin", "-p", "mariadb",
                           "--hosts", f"{st.HOST}:{ADMIN_PORT}", *args],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, (args, proc.stderr)
    return proc


def maxctrl_fails(*args):
    proc = subprocess.run([str(MAXCTRL), "-u", "admin", "-p", "mariadb",
                           "--hosts", f"{st.HOST}:{ADMIN_PORT}", *args],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0, args
    return proc.stderr


def state(server):
    return get(f"/servers/{server}")["attributes"]["state"]


def ticks(monitor):
    return get(f"/monitors/{monitor}")["attributes"]["ticks"]


def patch(path, params):
    return http("PATCH", path, {"data": {"attributes": {
        "parameters": params}}})


# ---- monitors ----

def test_monitor_lifecycle_at_run_time(sluice):
    ok("create", "server", "rt-m2", st.HOST, str(st.SERVERS[2]))
    ok("create", "server", "rt-m3", st.HOST, str(st.SERVERS[3]))
    assert "Running" not in state("rt-m2")
    ok("create", "monitor", "RT-Monitor", "basicmon",
       "monitor_interval=200ms", "--servers", "rt-m2",
       "--monitor-user", st.SERVICE_USER,
       "--monitor-password", st.SERVICE_PASSWORD)
    st.wait_until(lambda: "Running" in state("rt-m2"), 60,
                  what="rt-m2 Running through the new monitor")
    assert "Slave" in state("rt-m2")
    mon = get("/monitors/RT-Monitor")
    assert mon["attributes"]["state"] == "Running"
    assert [d["id"] for d in mon["relationships"]["servers"]["data"]] \
        == ["rt-m2"]
    assert (sluice["dir"] / "persist" / "RT-Monitor.cnf").exists()

    # A server belongs to one monitor only.
    assert "Cluster-Monitor" in maxctrl_fails("link", "monitor",
                                              "RT-Monitor", "db1")
    # Link a second server: the monitor is rebuilt over both.
    ok("link", "monitor", "RT-Monitor", "rt-m3")
    st.wait_until(lambda: "Running" in state("rt-m3"), 60,
                  what="rt-m3 Running after link")

    # Stop: the monitor no longer ticks; start: it does again.
    ok("stop", "monitor", "RT-Monitor")
    assert get("/monitors/RT-Monitor")["attributes"]["state"] == "Stopped"
    frozen = ticks("RT-Monitor")
    time.sleep(0.7)
    assert ticks("RT-Monitor") == frozen
    ok("start", "monitor", "RT-Monitor")
    st.wait_until(lambda: ticks("RT-Monitor") >= frozen + 2, 60,
                  what="ticks moving after start")

    # PATCH a parameter: applied live (the monitor is recreated). From
    # 1h to 100ms: six more ticks can only come from the new interval
    # (the deadline just stops waiting; it measures no rate).
    assert patch("/monitors/RT-Monitor",
                 {"monitor_interval": "1h"})[0] == 204
    assert patch("/monitors/RT-Monitor",
                 {"monitor_interval": "100ms"})[0] == 204
    mon = get("/monitors/RT-Monitor")
    assert mon["attributes"]["parameters"]["monitor_interval"] == "100ms"
    assert mon["attributes"]["state"] == "Running"
    before = ticks("RT-Monitor")
    st.wait_until(lambda: ticks("RT-Monitor") >= before + 6, 60,
                  what="ticks at the new 100ms interval")
    status, doc = patch("/monitors/RT-Monitor", {"monitor_interval": "0"})
    assert status == 400 and "monitor_interval" in \
        doc["errors"][0]["detail"]
    ok("unlink", "monitor", "RT-Monitor", "rt-m3")

    # Restart: the monitor comes back from the persist directory.
    problems = px.stop_proxy(sluice["proxy"])
    assert not problems, problems
    sluice["proxy"] = start(sluice["dir"])
    mon = get("/monitors/RT-Monitor")
    assert [d["id"] for d in mon["relationships"]["servers"]["data"]] \
        == ["rt-m2"]
    assert mon["attributes"]["parameters"]["monitor_interval"] == "100ms"
    st.wait_until(lambda: "Running" in state("rt-m2"), 60,
                  what="rt-m2 Running after restart")

    # Destroy: gone, file removed, its servers free to be destroyed.
    assert maxctrl_fails("destroy", "server", "rt-m2")
    ok("destroy", "monitor", "RT-Monitor")
    assert http("GET", "/monitors/RT-Monitor")[0] == 404
    assert not (sluice["dir"] / "persist" / "RT-Monitor.cnf").exists()
    ok("destroy", "server", "rt-m2")
    ok("destroy", "server", "rt-m3")


# ---- live parameters ----

def held_ids(port, n):
    """Open n connections at once; the @@server_id of each."""
    conns = []
    try:
        for _ in range(n):
            conns.append(st.connect(port))
        return [st.server_id(c) for c in conns]
    finally:
        for c in conns:
            c.close()


def test_server_weight_applies_at_once(sluice):
    try:
        assert patch("/servers/db3", {"weight": 0})[0] == 204
        ids = held_ids(REPLICA, 40)
        assert ids.count(2) == 40, ids
        assert patch("/servers/db3", {"weight": 3})[0] == 204
        ids = held_ids(REPLICA, 40)
        # least (sessions + 1) / weight: db3 gets about three quarters
        assert ids.count(3) >= 27 and ids.count(2) >= 7, ids
        # address is not live: stored, flagged as needing a restart
        status, doc = patch("/servers/db3", {"weight": 1,
                                             "address": st.HOST})
        assert status == 200
        assert doc["meta"]["restart_required"] == ["address"]
    finally:
        patch("/servers/db3", {"weight": 1})


def test_service_router_options_apply_at_once(sluice):
    with st.connect(REPLICA) as c:
        old = c
        assert st.server_id(c) in st.REPLICA_IDS
        try:
            status, doc = patch("/services/Replica-Service",
                                {"router_options": "master"})
            assert status == 204, doc
            for _ in range(5):
                with st.connect(REPLICA) as c2:
                    assert st.server_id(c2) == st.PRIMARY_ID
            # A session opened before keeps its server.
            assert st.server_id(old) in st.REPLICA_IDS
            params = get("/services/Replica-Service")["attributes"][
                "parameters"]
            assert params["router_options"] == "master"
            status, doc = patch("/services/Replica-Service",
                                {"router_options": "bogus"})
            assert status == 400 and "router_options" in \
                doc["errors"][0]["detail"]
        finally:
            status, doc = patch("/services/Replica-Service",
                                {"router_options": "slave"})
            assert status == 204, doc
    with st.connect(REPLICA) as c:
        assert st.server_id(c) in st.REPLICA_IDS
