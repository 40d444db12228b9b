# SPDX-License-Identifier: Apache-2.0
"""Run-time changes through the REST API that take effect at once:
monitors created, stopped, started, relinked and destroyed while Sluice
runs (and persisted across a restart); a server's weight changing
readconnroute's choices for new connections; a service's router_options
changing where new connections go (proven by @@server_id)."""

import base64
import csv
import json
import os
import re
import stat
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


# ---- passwords stay out of logs, errors and files others can read ----

REPL_PASSWORD = os.environ.get("SLUICE_REPL_PASSWORD", "repl_pw")
SECRET = "Mask-Me-7f3a9"


def replicating_from_db1(sid):
    with st.root(sid) as c, c.cursor() as cur:
        cur.execute("SHOW SLAVE STATUS")
        row = cur.fetchone()
        cols = [d[0] for d in cur.description]
    r = dict(zip(cols, row)) if row else {}
    return (r.get("Master_Port") == st.SERVERS[1] and
            r.get("Slave_IO_Running") == "Yes" and
            r.get("Slave_SQL_Running") == "Yes")


def repair_db3():
    """Point db3 back at db1 by hand (if the rejoin could not)."""
    with st.root(3) as c, c.cursor() as cur:
        cur.execute("STOP SLAVE")
        cur.execute(
            "CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%s, "
            "MASTER_USER='repl', MASTER_PASSWORD=%s, "
            "MASTER_USE_GTID=slave_pos", (st.HOST, st.SERVERS[1],
                                          REPL_PASSWORD))
        cur.execute("START SLAVE")


def test_replication_password_never_shown(sluice):
    """A rejoin whose CHANGE MASTER TO fails (MASTER_USER longer than 128
    characters) used to put MASTER_PASSWORD='...' in the warning, the info
    log and the command's REST error."""
    ok("create", "server", "pw-m1", st.HOST, str(st.SERVERS[1]))
    ok("create", "server", "pw-m3", st.HOST, str(st.SERVERS[3]))
    status, doc = http("POST", "/monitors", {"data": {
        "id": "PW-Monitor", "attributes": {"module": "mariadbmon",
                                           "parameters": {
            "user": st.SERVICE_USER, "password": st.SERVICE_PASSWORD,
            "monitor_interval": "300ms", "replication_user": "u" * 200,
            "replication_password": SECRET}},
        "relationships": {"servers": {"data": [
            {"id": "pw-m1", "type": "servers"},
            {"id": "pw-m3", "type": "servers"}]}}}})
    assert status == 204, doc
    assert patch("/maxscale", {"log_info": True})[0] == 204
    try:
        st.wait_until(lambda: "Master" in state("pw-m1") and
                      "Slave" in state("pw-m3"), 10,
                      what="PW-Monitor to see pw-m1 primary")
        status, doc = http("POST", "/maxscale/modules/mariadbmon/rejoin"
                           "?PW-Monitor&pw-m3")
        detail = doc["errors"][0]["detail"]
        assert status == 400 and "MASTER_PASSWORD='*****'" in detail, doc
        assert "too long for MASTER_USER" in detail
        assert SECRET not in json.dumps(doc)
        mon = get("/monitors/PW-Monitor")["attributes"]["parameters"]
        assert mon["replication_password"] == "*****"
        assert mon["password"] == "*****"
        # This Sluice logs to its stdout (proxy.log); GET /maxscale/logs
        # serves the same lines when the log is a file.
        text = (sluice["dir"] / "proxy.log").read_text(errors="replace")
        assert "info : [mariadbmon] Monitor 'PW-Monitor' on 'pw-m3': " \
            "CHANGE MASTER TO" in text
        assert "MASTER_PASSWORD='*****'" in text
        assert SECRET not in text
        # The monitor's secret is persisted, for Sluice's eyes only.
        persisted = sluice["dir"] / "persist" / "PW-Monitor.cnf"
        assert SECRET in persisted.read_text()
        assert stat.S_IMODE(persisted.stat().st_mode) & 0o077 == 0
        # A working account: the same rejoin now succeeds.
        assert patch("/monitors/PW-Monitor", {
            "replication_user": "repl",
            "replication_password": REPL_PASSWORD})[0] == 204
        st.wait_until(lambda: "Master" in state("pw-m1"), 10,
                      what="PW-Monitor to see pw-m1 primary again")
        status, doc = http("POST", "/maxscale/modules/mariadbmon/rejoin"
                           "?PW-Monitor&pw-m3")
        assert status in (200, 204), doc
        st.wait_until(lambda: replicating_from_db1(3), 30,
                      what="db3 replicating from db1 again")
    finally:
        patch("/maxscale", {"log_info": False})
        if not replicating_from_db1(3):
            repair_db3()
        http("DELETE", "/monitors/PW-Monitor")
        http("DELETE", "/servers/pw-m1")
        http("DELETE", "/servers/pw-m3")
    st.wait_until(lambda: replicating_from_db1(3), 30,
                  what="db3 replicating from db1")


FILE_ADMIN = st.port(4655)
FILE_PRIMARY = st.port(4656)
FILE_REPLICA = st.port(4657)


@pytest.fixture(scope="module")
def file_logging(tmp_path_factory):
    """A second Sluice that logs to LOGDIR/sluice.log (as in production),
    not to its stdout."""
    run_dir = tmp_path_factory.mktemp("admin_files")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    text = px.sluice_config(run_dir, FILE_PRIMARY, FILE_REPLICA).replace(
        "admin_enabled=false",
        f"admin_host={st.HOST}\nadmin_port={FILE_ADMIN}")
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(text)
    daemon = px.Daemon(st.sluice_argv("daemon", cfg), run_dir / "stdout.log",
                       st.sluice_env())
    try:
        daemon.wait_ports([FILE_PRIMARY, FILE_REPLICA, FILE_ADMIN])
        yield run_dir
    finally:
        problems = daemon.stop()
    assert not problems, problems


def http_at(port, method, path, body=None):
    global BASE
    saved, BASE = BASE, f"http://{st.HOST}:{port}/v1"
    try:
        return http(method, path, body)
    finally:
        BASE = saved


def test_files_with_secrets_are_private(file_logging):
    """The log, the admin accounts and a query log created at run time are
    not readable by other users, whatever the umask."""
    run_dir = file_logging
    log = run_dir / "log" / "sluice.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o640
    status, doc = http_at(FILE_ADMIN, "GET", "/maxscale/logs")
    assert status == 200 and doc["data"]["attributes"]["log"]
    assert http_at(FILE_ADMIN, "POST", "/users/inet", {"data": {
        "id": "mode-check", "attributes": {"password": "mc-pw",
                                           "account": "basic"}}})[0] == 204
    passwd = run_dir / "data" / "passwd"
    assert stat.S_IMODE(passwd.stat().st_mode) == 0o600
    assert "mc-pw" not in passwd.read_text()
    status, doc = http_at(FILE_ADMIN, "POST", "/filters", {"data": {
        "id": "Mode-QLA", "attributes": {"module": "qlafilter",
                                         "parameters": {
            "filebase": str(run_dir / "log" / "qla"),
            "log_type": "unified"}}}})
    assert status == 204, doc
    qla = run_dir / "log" / "qla.unified"   # opened with the instance
    assert stat.S_IMODE(qla.stat().st_mode) == 0o640


# ---- paths through the API stay in Sluice's own directories ----

def log_data(query=""):
    status, doc = http_at(FILE_ADMIN, "GET", "/maxscale/logs/data" + query)
    assert status == 200, doc
    assert doc["data"]["id"] == doc["data"]["type"] == "log_data"
    return doc


def test_log_data_pages_backwards(file_logging):
    """GET /maxscale/logs/data (MaxScale's log entries): the newest page
    ends with what was just logged, prev links page backwards without gaps
    or overlap, priority filters, and bad parameters are 400s."""
    assert http_at(FILE_ADMIN, "POST", "/maxscale/logs/flush")[0] == 204
    doc = log_data()
    log = doc["data"]["attributes"]["log"]
    assert 1 < len(log) <= 50
    assert log[-1]["priority"] == "notice"
    assert log[-1]["message"] == "[admin] log rotated through the REST API"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d",
                        log[-1]["timestamp"])
    ids = [int(e["id"]) for e in log]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    text = (file_logging / "log" / "sluice.log").read_bytes()
    for e in log:   # an id is the offset of the entry's line in the file
        line = text[int(e["id"]):].split(b"\n", 1)[0].decode()
        assert line.startswith(e["timestamp"]) and \
            line.endswith(e["message"]), (e, line)
    # the six entries up to the flush, as two pages of three (a cursor
    # just past its offset keeps later lines out)
    cur = int(log[-1]["id"]) + 1
    six = [e["id"] for e in log_data(f"?page[cursor]={cur}&page[size]=6")
           ["data"]["attributes"]["log"]]
    assert len(six) == 6 and six[-1] == log[-1]["id"]
    newest = log_data(f"?page%5Bcursor%5D={cur}&page%5Bsize%5D=3")
    prev = newest["links"]["prev"]
    assert "page%5Bcursor%5D=" in prev
    older = log_data(prev.split("/v1/maxscale/logs/data", 1)[1])
    got = [e["id"] for e in older["data"]["attributes"]["log"] +
           newest["data"]["attributes"]["log"]]
    assert got == six, (got, six)
    # a cursor is an id: the entries before it
    before = log_data(f"?page[cursor]={six[-1]}&page[size]=2")
    assert [e["id"] for e in before["data"]["attributes"]["log"]] == six[3:5]
    notices = log_data("?priority=notice&page[size]=20")
    assert notices["data"]["attributes"]["log"]
    assert {e["priority"] for e in notices["data"]["attributes"]["log"]} \
        == {"notice"}
    assert "priority=notice" in notices["links"]["self"]
    for bad in ("?page[size]=0", "?page[size]=x", "?page[cursor]=-1",
                "?priority=loud", "?priority=notice,"):
        status, doc = http_at(FILE_ADMIN, "GET", "/maxscale/logs/data" + bad)
        assert status == 400 and doc["errors"][0]["detail"], (bad, doc)
    # MaxScale's other name for the same resource
    alias = http_at(FILE_ADMIN, "GET", "/maxscale/logs/entries?page[size]=2")
    assert alias[0] == 200 and len(alias[1]["data"]["attributes"]["log"]) == 2


def audit_rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def raw_http(port, method, path, body=None, auth=b"admin:mariadb"):
    req = urllib.request.Request(
        f"http://{st.HOST}:{port}/v1{path}", method=method,
        data=json.dumps(body).encode() if body is not None else None)
    req.add_header("Authorization",
                   "Basic " + base64.b64encode(auth).decode())
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_admin_audit_file(file_logging):
    """admin_audit (turned on at run time): one CSV row per request with
    user, client, URI, method and code, passwords masked; excluded methods
    left out except failed logins; the file must lie under logdir."""
    audit = file_logging / "log" / "admin_audit.csv"
    try:
        status, doc = http_at(FILE_ADMIN, "PATCH", "/maxscale", {"data": {
            "attributes": {"parameters": {"admin_audit": True}}}})
        assert status == 204, doc
        assert raw_http(FILE_ADMIN, "GET", "/servers") == 200
        assert raw_http(FILE_ADMIN, "POST", "/users/inet", {"data": {
            "id": "audited", "attributes": {"password": "s3cret-pw",
                                            "account": "basic"}}}) == 204
        assert raw_http(FILE_ADMIN, "GET", "/servers",
                        auth=b"admin:wrong") == 401
        rows = audit_rows(audit)
        assert rows[0] == ["Timestamp", "Duration", "User", "Host", "URI",
                           "Method", "Status", "Response code", "Body"]
        got = [(r[2], r[3], r[4], r[5], r[7]) for r in rows[1:]]
        assert got[-3:] == [
            ("admin", "127.0.0.1", "/v1/servers", "GET", "200"),
            ("admin", "127.0.0.1", "/v1/users/inet", "POST", "204"),
            ("admin", "127.0.0.1", "/v1/servers", "GET", "401")], got
        assert "s3cret-pw" not in audit.read_text()
        assert json.loads(rows[-2][8])["data"]["attributes"]["password"] \
            == "*****"
        status, doc = http_at(FILE_ADMIN, "PATCH", "/maxscale", {"data": {
            "attributes": {"parameters": {
                "admin_audit_exclude_methods": "GET"}}}})
        assert status == 204, doc
        n = len(audit_rows(audit))
        assert raw_http(FILE_ADMIN, "GET", "/servers") == 200
        assert raw_http(FILE_ADMIN, "GET", "/servers",
                        auth=b"admin:wrong") == 401
        rows = audit_rows(audit)
        assert len(rows) == n + 1 and rows[-1][7] == "401", rows[-2:]
        # outside logdir and admin_secure_paths: refused, file unchanged
        status, doc = http_at(FILE_ADMIN, "PATCH", "/maxscale", {"data": {
            "attributes": {"parameters": {
                "admin_audit_file": "/etc/sluice-audit.csv"}}}})
        assert status == 403, doc
        assert not os.path.exists("/etc/sluice-audit.csv")
        status, doc = http_at(FILE_ADMIN, "PATCH", "/maxscale", {"data": {
            "attributes": {"parameters": {
                "admin_audit_exclude_methods": "GETT"}}}})
        assert status == 400, doc
    finally:
        http_at(FILE_ADMIN, "PATCH", "/maxscale", {"data": {"attributes": {
            "parameters": {"admin_audit": False,
                           "admin_audit_exclude_methods": ""}}}})
        http_at(FILE_ADMIN, "DELETE", "/users/inet/audited")
    n = len(audit_rows(audit))
    assert raw_http(FILE_ADMIN, "POST", "/maxscale/logs/flush") == 204
    assert len(audit_rows(audit)) == n   # off: nothing more


HOSTS_ADMIN = st.port(5663)
HOSTS_PRIMARY = st.port(5664)
HOSTS_REPLICA = st.port(5665)


def test_admin_hosts_and_gui(tmp_path):
    """admin_readonly_hosts: 127.0.0.1 may read, not write (403), while
    admin_readwrite_hosts names another address; admin_secure_gui without
    TLS keeps the dashboard off (403); admin_gui=false answers 404."""
    run_dir = tmp_path / "hosts"
    text = px.sluice_config(run_dir, HOSTS_PRIMARY, HOSTS_REPLICA).replace(
        "admin_enabled=false",
        f"admin_host={st.HOST}\nadmin_port={HOSTS_ADMIN}\n"
        "admin_readwrite_hosts=127.0.0.2\n"
        "admin_readonly_hosts=127.0.0.0/24, ::1\n"
        "admin_secure_gui=true")
    prx = px.start_with_admin(run_dir, text, HOSTS_PRIMARY, HOSTS_REPLICA,
                              HOSTS_ADMIN)
    try:
        assert raw_http(HOSTS_ADMIN, "GET", "/servers") == 200
        assert raw_http(HOSTS_ADMIN, "PATCH", "/maxscale", {"data": {
            "attributes": {"parameters": {"log_info": False}}}}) == 403
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(f"http://{st.HOST}:{HOSTS_ADMIN}/",
                                   timeout=10)
        assert exc.value.code == 403
        assert "HTTPS only" in exc.value.read().decode()
    finally:
        problems = px.stop_proxy(prx)
    assert not problems, problems
    # the dashboard off altogether; a bad host list refused with its line
    text = text.replace("admin_secure_gui=true", "admin_gui=false")
    prx = px.start_with_admin(run_dir, text, HOSTS_PRIMARY, HOSTS_REPLICA,
                              HOSTS_ADMIN)
    try:
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(f"http://{st.HOST}:{HOSTS_ADMIN}/",
                                   timeout=10)
        assert exc.value.code == 404
    finally:
        problems = px.stop_proxy(prx)
    assert not problems, problems
    cfg = run_dir / "bad.cnf"
    cfg.write_text(text.replace("admin_readonly_hosts=127.0.0.0/24, ::1",
                                "admin_readonly_hosts=10.0.%.1"))
    status, out = px.run_sluice("check", cfg)
    assert status == px.CONFIG_REFUSED, out
    assert "parameter 'admin_readonly_hosts'" in out and \
        "'%' stands only for any address" in out, out


def test_runtime_paths_restricted(sluice, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text("keep me")
    log_dir = sluice["dir"] / "log"

    def create_filter(name, module, params):
        return http("POST", "/filters", {"data": {
            "id": name, "attributes": {"module": module,
                                       "parameters": params}}})

    for params in ({"filebase": str(outside / "qla")},
                   {"filebase": str(log_dir / ".." / "data" / "qla")},
                   {"filebase": "relative/qla"}):
        status, doc = create_filter("Bad-QLA", "qlafilter",
                                    dict(params, log_type="unified"))
        assert status == 403, (params, doc)
        assert "'filebase'" in doc["errors"][0]["detail"]
    assert http("GET", "/filters/Bad-QLA")[0] == 404
    assert not list(outside.glob("qla*"))
    assert not (sluice["dir"] / "data" / "qla.unified").exists()
    status, doc = create_filter("Bad-Regex", "regexfilter", {
        "match": "x", "replace": "y", "log_file": str(victim)})
    assert status == 403 and "'log_file'" in doc["errors"][0]["detail"]
    assert victim.read_text() == "keep me"

    # A listener's socket: a stale socket is unlinked before bind, so an
    # arbitrary path would delete that file.
    for path in (victim, log_dir / "sluice.cnf.victim"):
        if path != victim:
            path.write_text("keep me too")
        status, doc = http("POST", "/listeners", {"data": {
            "id": "Bad-Sock", "attributes": {"parameters": {
                "socket": str(path)}},
            "relationships": {"services": {"data": [
                {"id": "Replica-Service", "type": "services"}]}}}})
        assert status == 403 and "'socket'" in \
            doc["errors"][0]["detail"], doc
        assert path.read_text().startswith("keep me")

    # Inside logdir: allowed, and a PATCH may not move it out.
    status, doc = create_filter("Good-QLA", "qlafilter", {
        "filebase": str(log_dir / "good"), "log_type": "unified"})
    assert status == 204, doc
    try:
        assert (log_dir / "good.unified").exists()
        status, doc = patch("/filters/Good-QLA",
                            {"filebase": str(outside / "moved")})
        assert status == 403 and "'filebase'" in \
            doc["errors"][0]["detail"]
        assert get("/filters/Good-QLA")["attributes"]["parameters"][
            "filebase"] == str(log_dir / "good")
        assert not list(outside.glob("moved*"))
    finally:
        assert http("DELETE", "/filters/Good-QLA")[0] == 204


PW_ADMIN = st.port(4658)
PW_PRIMARY = st.port(4659)
PW_REPLICA = st.port(4660)
# openssl passwd -6 -salt abcdefgh mariadb
MARIADB_HASH = ("$6$abcdefgh$ke7uvnE3vkRrRnpufh6yU5EaDZn030.S1aoNCAXACZ7mY3"
                "eeK9LCsj5Y8mEjjyaMcJbsuJ4kULvJLaMHrAQm90")


def test_passwd_entries_without_account_ignored(tmp_path):
    """A hand-written DATADIR/passwd with incomplete entries: each is
    refused with an error in the log, the others work (before the fix an
    entry without "account" crashed Sluice at the first login as it)."""
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir()
    (tmp_path / "data" / "passwd").write_text(json.dumps([
        {"name": "admin", "account": "admin", "password": MARIADB_HASH},
        {"name": "noacc", "password": MARIADB_HASH},
        {"name": "badacc", "account": "root", "password": MARIADB_HASH},
        {"account": "basic", "password": MARIADB_HASH},
        {"name": "nopw", "account": "basic"},
        7,
        {"name": "viewer", "account": "basic", "password": MARIADB_HASH},
    ]))
    text = px.sluice_config(tmp_path, PW_PRIMARY, PW_REPLICA).replace(
        "admin_enabled=false", f"admin_host={st.HOST}\nadmin_port={PW_ADMIN}")
    prx = px.start_with_admin(tmp_path, text, PW_PRIMARY, PW_REPLICA,
                              PW_ADMIN)
    try:
        base = f"http://{st.HOST}:{PW_ADMIN}/v1"

        def call(user, method="GET", path="/users/inet"):
            req = urllib.request.Request(base + path, method=method)
            tok = base64.b64encode(f"{user}:mariadb".encode()).decode()
            req.add_header("Authorization", "Basic " + tok)
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return resp.status, json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read() or b"null")

        for user in ("noacc", "badacc", "nopw"):
            status, doc = call(user)
            assert status == 401 and doc["errors"], user
        status, doc = call("viewer")
        assert status == 200
        assert {u["id"] for u in doc["data"]} == {"admin", "viewer"}
        assert call("viewer", "DELETE", "/users/inet/admin")[0] == 403
        assert call("admin")[0] == 200
        log = prx.daemon.log_path.read_text(errors="replace")
        for entry in (2, 3, 4, 5, 6):
            assert f"account entry {entry} " in log, entry
        assert "'noacc') ignored" in log
        with st.connect(PW_PRIMARY) as c:
            assert st.server_id(c) == st.PRIMARY_ID
    finally:
        problems = px.stop_proxy(prx)
    assert not problems, problems
