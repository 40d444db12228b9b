# SPDX-License-Identifier: Apache-2.0
"""Configuration synchronization (config_sync_cluster) between three
Sluice instances A, B and C in front of the sandbox cluster, each with its
own ports and data directories: runtime changes made on one appear on the
others (measured), simultaneous conflicting changes leave one winner and
the same configuration everywhere, a stopped instance catches up at start,
and a document that does not validate is refused with the error in
/v1/maxscale and the configuration unchanged."""

import base64
import json
import os
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

import sluicetest as st
import proxy as px

SYNC_DB = "test"            # the app account has ALL on test.*
CLUSTER = "Cluster-Monitor"
# config_sync_interval; SLUICE_CONFIG_SYNC_INTERVAL=5 measures the default
INTERVAL_S = int(os.environ.get("SLUICE_CONFIG_SYNC_INTERVAL", "1"))
WAIT = 10 + 2 * INTERVAL_S   # for a poll or two
NAMES = ("A", "B", "C")
# one .secrets key for the three (made by the fixture with sluice-keys):
# passwords in the cluster's document are encrypted with it
KEYDIR = None
PORTS = {n: (st.port(5140 + 4 * i), st.port(5141 + 4 * i),
             st.port(5142 + 4 * i)) for i, n in enumerate(NAMES)}


def config(run_dir, name):
    admin, primary, replica = PORTS[name]
    extra = f"""\
secretsdir={KEYDIR}
config_sync_cluster={CLUSTER}
config_sync_user={st.APP_USER}
config_sync_password={st.APP_PASSWORD}
config_sync_db={SYNC_DB}
config_sync_interval={INTERVAL_S}s
config_sync_timeout=5s"""
    text = px.sluice_config(run_dir, primary, replica, extra=extra)
    return text.replace("admin_enabled=false",
                        f"admin_host={st.HOST}\nadmin_port={admin}")


def start(run_dir, name, replica_ids=None):
    admin, primary, replica = PORTS[name]
    return px.start_with_admin(run_dir, config(run_dir, name), primary,
                               replica, admin, replica_ids)


def http(name, method, path, body=None):
    """(status, parsed JSON or None) from instance name's REST API."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"http://{st.HOST}:{PORTS[name][0]}/v1{path}", data=data,
        method=method)
    tok = base64.b64encode(b"admin:mariadb").decode()
    req.add_header("Authorization", "Basic " + tok)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text else None


def sync_status(name):
    status, doc = http(name, "GET", "/maxscale")
    assert status == 200, doc
    return doc["data"]["attributes"]["config_sync"]


def exists(name, path):
    return http(name, "GET", path)[0] == 200


def param(name, path, key):
    status, doc = http(name, "GET", path)
    assert status == 200, doc
    return doc["data"]["attributes"]["parameters"].get(key)


def row():
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT version, config, origin, nodes FROM "
                    f"{SYNC_DB}.maxscale_config WHERE cluster = %s",
                    (CLUSTER,))
        return cur.fetchone()


def all_at(version):
    return all(sync_status(n)["local_version"] == version for n in NAMES)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    global KEYDIR
    KEYDIR = tmp_path_factory.mktemp("csync-keys")
    subprocess.run([str(st.BUILD_DIR / "bin" / "sluice-keys"), str(KEYDIR)],
                   check=True, capture_output=True, timeout=30)
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {SYNC_DB}.maxscale_config")
    st.wait_replicated()
    dirs = {n: tmp_path_factory.mktemp(f"csync-{n}") for n in NAMES}
    holder = {"procs": {}, "dirs": dirs}
    problems = []
    try:
        for n in NAMES:
            holder["procs"][n] = start(dirs[n], n)
        yield holder
    finally:
        for prx in holder["procs"].values():
            if prx is not None:
                problems += px.stop_proxy(prx)
    if problems:
        pytest.fail("proxy shutdown: " + "\n".join(problems), pytrace=False)


def wait_all(pred, what, timeout=15 + INTERVAL_S):
    """Wait until pred(name) holds on B and C; seconds it took."""
    t0 = time.monotonic()
    st.wait_until(lambda: all(pred(n) for n in ("B", "C")), timeout,
                  interval=0.05, what=what)
    return time.monotonic() - t0


def test_status_shape(cluster):
    st.wait_until(lambda: all(sync_status(n)["status"] == "OK"
                              for n in NAMES), 15, what="sync OK")
    for n in NAMES:
        cs = sync_status(n)
        assert cs["cluster"] == CLUSTER
        assert cs["name"].endswith(f":{PORTS[n][0]}")
        assert cs["error"] is None
        assert isinstance(cs["nodes"], dict)
    maxctrl = st.BUILD_DIR / "bin" / "maxctrl"
    out = subprocess.run([str(maxctrl), "-u", "admin", "-p", "mariadb",
                          "--hosts", f"{st.HOST}:{PORTS['A'][0]}",
                          "show", "maxscale"], capture_output=True,
                         text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert "config_sync.version" in out.stdout, out.stdout
    assert "config_sync.status" in out.stdout, out.stdout


def test_changes_on_a_reach_b_and_c(cluster, record_property):
    # a server created on A
    status, doc = http("A", "POST", "/servers", {"data": {
        "id": "csync-db3", "attributes": {"parameters": {
            "address": st.HOST, "port": st.SERVERS[3]}}}})
    assert status == 204, doc
    t_server = wait_all(lambda n: exists(n, "/servers/csync-db3"),
                        "the server on B and C")
    # a service parameter altered on A: B's replica port then routes to
    # the primary
    with st.connect(PORTS["B"][2]) as conn:
        assert st.server_id(conn) in st.REPLICA_IDS
    status, doc = http("A", "PATCH", "/services/Replica-Service", {"data": {
        "attributes": {"parameters": {"router_options": "master"}}}})
    assert status in (200, 204), doc
    t_param = wait_all(lambda n: param(n, "/services/Replica-Service",
                                       "router_options") == "master",
                       "router_options on B and C")
    for n in ("B", "C"):
        with st.connect(PORTS[n][2]) as conn:
            assert st.server_id(conn) == st.PRIMARY_ID
    # a filter created, then destroyed, on A
    status, doc = http("A", "POST", "/filters", {"data": {
        "id": "csync-hint", "attributes": {"module": "hintfilter",
                                           "parameters": {}}}})
    assert status == 204, doc
    wait_all(lambda n: exists(n, "/filters/csync-hint"), "filter on B, C")
    status, doc = http("A", "DELETE", "/filters/csync-hint")
    assert status == 204, doc
    t_filter = wait_all(lambda n: not exists(n, "/filters/csync-hint"),
                        "the filter gone from B and C")
    version = row()[0]
    assert version == 4
    st.wait_until(lambda: all_at(4), WAIT, what="all at version 4")
    nodes = json.loads(row()[3])
    assert sorted(nodes.values()) == [4, 4, 4], nodes
    print(f"propagation: server {t_server:.2f}s, parameter {t_param:.2f}s, "
          f"filter destroy {t_filter:.2f}s (interval {INTERVAL_S}s)")
    record_property("propagation_s", [t_server, t_param, t_filter])
    for t in (t_server, t_param, t_filter):
        assert t < max(5, INTERVAL_S + 2)


def test_conflicting_changes_one_wins(cluster):
    results = {}
    barrier = threading.Barrier(2)

    def change(name, value):
        barrier.wait()
        results[name] = http(name, "PATCH", "/services/Replica-Service",
                             {"data": {"attributes": {"parameters": {
                                 "router_options": value}}}})

    # Replica-Service is at router_options=master (the previous test)
    threads = [threading.Thread(target=change, args=("A", "slave")),
               threading.Thread(target=change, args=("B", "running"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(results[n][0] for n in ("A", "B"))
    assert codes[0] in (200, 204) and codes[1] == 409, results
    loser = "A" if results["A"][0] == 409 else "B"
    winner = "B" if loser == "A" else "A"
    detail = results[loser][1]["errors"][0]["detail"]
    assert "configuration synchronization" in detail, detail
    want = "slave" if winner == "A" else "running"
    try:
        st.wait_until(lambda: all(
            param(n, "/services/Replica-Service", "router_options") == want
            for n in NAMES), WAIT, what="the winner's router_options "
            "everywhere")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {results}, " + repr(
            [(n, param(n, "/services/Replica-Service", "router_options"),
              sync_status(n)) for n in NAMES])) from None
    if want == "slave":   # "running" may pick any server
        for n in NAMES:
            with st.connect(PORTS[n][2]) as conn:
                assert st.server_id(conn) in st.REPLICA_IDS
    assert row()[0] == 5
    st.wait_until(lambda: all_at(5), WAIT, what="all at version 5")


def test_stopped_instance_catches_up(cluster):
    problems = px.stop_proxy(cluster["procs"]["C"])
    cluster["procs"]["C"] = None
    assert not problems, problems
    status, doc = http("A", "POST", "/servers", {"data": {
        "id": "csync-late", "attributes": {"parameters": {
            "address": st.HOST, "port": st.SERVERS[2]}}}})
    assert status == 204, doc
    st.wait_until(lambda: exists("B", "/servers/csync-late"), WAIT,
                  what="B has A's change")
    status, doc = http("B", "PATCH", "/services/Replica-Service", {"data": {
        "attributes": {"parameters": {"router_options": "master"}}}})
    assert status in (200, 204), doc
    status, doc = http("B", "PATCH", "/services/Replica-Service", {"data": {
        "attributes": {"parameters": {"router_options": "slave"}}}})
    assert status in (200, 204), doc
    t0 = time.monotonic()
    cluster["procs"]["C"] = start(cluster["dirs"]["C"], "C")
    st.wait_until(lambda: exists("C", "/servers/csync-late") and param(
        "C", "/services/Replica-Service", "router_options") == "slave",
        WAIT, interval=0.05, what="C caught up")
    print(f"C caught up {time.monotonic() - t0:.2f}s after its start began")
    with st.connect(PORTS["C"][2]) as conn:
        assert st.server_id(conn) in st.REPLICA_IDS
    st.wait_until(lambda: all_at(8), WAIT, what="all at version 8")


def config_generation(name):
    status, doc = http(name, "GET", "/maxscale")
    assert status == 200, doc
    return doc["data"]["attributes"]["config_generation"]


def ids(name, kind):
    status, doc = http(name, "GET", f"/{kind}")
    assert status == 200, doc
    return sorted(o["id"] for o in doc["data"])


def test_catch_up_is_one_generation(cluster):
    """C, stopped while A made 5 changes (4 of which add or remove an
    object, each one generation on A and B), applies them at start as one
    configuration generation, and ends up with A's configuration."""
    problems = px.stop_proxy(cluster["procs"]["C"])
    cluster["procs"]["C"] = None
    assert not problems, problems
    v0 = row()[0]
    gen_b = config_generation("B")
    changes = [
        ("POST", "/servers", {"data": {"id": "csync-g1", "attributes": {
            "parameters": {"address": st.HOST, "port": st.SERVERS[2]}}}}),
        ("POST", "/servers", {"data": {"id": "csync-g2", "attributes": {
            "parameters": {"address": st.HOST, "port": st.SERVERS[3]}}}}),
        ("POST", "/filters", {"data": {"id": "csync-gf", "attributes": {
            "module": "hintfilter", "parameters": {}}}}),
        ("PATCH", "/services/Replica-Service", {"data": {"attributes": {
            "parameters": {"router_options": "master"}}}}),
        ("DELETE", "/servers/csync-g1", None),
    ]
    for method, path, body in changes:
        status, doc = http("A", method, path, body)
        assert status in (200, 204), (method, path, doc)
    assert row()[0] == v0 + 5
    st.wait_until(lambda: sync_status("B")["local_version"] == v0 + 5,
                  WAIT, what="B at the new version")
    # B applied them poll by poll: at least one generation, often more
    assert config_generation("B") > gen_b
    # C may apply the changes before its readiness check: Replica-Service
    # then routes to the primary (router_options=master)
    cluster["procs"]["C"] = start(cluster["dirs"]["C"], "C",
                                  st.REPLICA_IDS | {st.PRIMARY_ID})
    st.wait_until(lambda: sync_status("C")["local_version"] == v0 + 5,
                  WAIT, interval=0.05, what="C caught up")
    # the first generation is the one loaded at start; the 5 changes made
    # one more
    assert config_generation("C") == 2
    for kind in ("servers", "filters", "services", "monitors", "listeners"):
        assert ids("C", kind) == ids("A", kind) == ids("B", kind), kind
    assert "csync-g2" in ids("C", "servers")
    assert "csync-g1" not in ids("C", "servers")
    assert param("C", "/services/Replica-Service",
                 "router_options") == "master"
    with st.connect(PORTS["C"][2]) as conn:
        assert st.server_id(conn) == st.PRIMARY_ID
    # back as the later tests expect it
    status, doc = http("A", "PATCH", "/services/Replica-Service", {"data": {
        "attributes": {"parameters": {"router_options": "slave"}}}})
    assert status in (200, 204), doc
    st.wait_until(lambda: all_at(v0 + 6), WAIT, what="all at the version")


def log_level(name):
    status, doc = http(name, "GET", "/maxscale/logs")
    assert status == 200, doc
    return doc["data"]["attributes"]["log_level"]


def passive(name):
    status, doc = http(name, "GET", "/maxscale")
    assert status == 200, doc
    return doc["data"]["attributes"]["parameters"]["passive"]


def test_global_parameters(cluster):
    """PATCH /v1/maxscale is synchronized except its instance-local
    parameters: log_info set on A reaches B and C, A's passive stays A's;
    a PATCH of passive alone is not a synchronized change."""
    v0 = row()[0]
    before = {n: log_level(n) for n in NAMES}
    assert len(set(before.values())) == 1, before
    status, doc = http("A", "PATCH", "/maxscale", {"data": {"attributes": {
        "parameters": {"log_info": True, "passive": True}}}})
    assert status in (200, 204), doc
    assert row()[0] == v0 + 1
    body = json.loads(row()[1])["changes"][-1]
    assert (body["method"], body["path"]) == ("PATCH", "maxscale")
    assert body["body"]["data"]["attributes"]["parameters"] == {
        "log_info": True}, body
    assert passive("A") is True and log_level("A") > before["A"]
    st.wait_until(lambda: all(log_level(n) == log_level("A")
                              for n in ("B", "C")), WAIT,
                  what="log_info on B and C")
    assert passive("B") is False and passive("C") is False
    # passive alone: applied on A only, no new version
    status, doc = http("A", "PATCH", "/maxscale", {"data": {"attributes": {
        "parameters": {"passive": False}}}})
    assert status in (200, 204), doc
    assert passive("A") is False and row()[0] == v0 + 1
    # back to the level the later tests had
    status, doc = http("A", "PATCH", "/maxscale", {"data": {"attributes": {
        "parameters": {"log_info": False}}}})
    assert status in (200, 204), doc
    st.wait_until(lambda: all(log_level(n) == before[n] for n in NAMES)
                  and all_at(v0 + 2), WAIT, what="log level restored")


def test_passwords_encrypted(cluster):
    """With a .secrets key (the same on the three), a monitor created on A
    is stored with its password encrypted, never in plain text, and B
    and C decrypt it: their copy of the monitor logs in (the server it
    monitors is Running)."""
    v0 = row()[0]
    status, doc = http("A", "POST", "/servers", {"data": {
        "id": "csync-enc", "attributes": {"parameters": {
            "address": st.HOST, "port": st.SERVERS[3]}}}})
    assert status == 204, doc
    status, doc = http("A", "POST", "/monitors", {"data": {
        "id": "csync-mon", "attributes": {"module": "mariadbmon",
                                          "parameters": {
                                              "user": st.SERVICE_USER,
                                              "password": st.SERVICE_PASSWORD,
                                              "monitor_interval": "500ms"}},
        "relationships": {"servers": {"data": [
            {"id": "csync-enc", "type": "servers"}]}}}})
    assert status == 204, doc
    text = row()[1]
    assert row()[0] == v0 + 2
    entry = json.loads(text)["changes"][-1]
    assert entry["encrypted"] is True, entry
    stored = entry["body"]["data"]["attributes"]["parameters"]["password"]
    assert re.fullmatch(r"[0-9A-F]{64,}", stored), stored
    assert st.SERVICE_PASSWORD not in text
    for n in NAMES:
        st.wait_until(lambda n=n: "Running" in (http(
            n, "GET", "/servers/csync-enc")[1] or {}).get("data", {}).get(
                "attributes", {}).get("state", ""), WAIT,
            what=f"csync-enc Running on {n} (its monitor logged in)")
    status, doc = http("A", "DELETE", "/monitors/csync-mon")
    assert status == 204, doc
    status, doc = http("A", "DELETE", "/servers/csync-enc")
    assert status == 204, doc
    st.wait_until(lambda: all_at(v0 + 4), WAIT, what="all at the version")
    for n in NAMES:
        assert not exists(n, "/monitors/csync-mon")


def test_invalid_document_refused(cluster):
    version, text, origin, nodes = row()
    good = json.loads(text)
    bad_param = json.loads(text)
    bad_param["changes"].append({
        "version": version + 1, "origin": "by-hand", "method": "POST",
        "path": "servers", "body": {"data": {"id": "csync-bad",
                                              "attributes": {"parameters": {
                                                  "address": st.HOST,
                                                  "port": "notaport"}}}}})
    not_a_route = json.loads(text)
    not_a_route["changes"].append({
        "version": version + 1, "origin": "by-hand", "method": "PUT",
        "path": "servers/db1/set", "body": None})
    local_global = json.loads(text)
    local_global["changes"].append({
        "version": version + 1, "origin": "by-hand", "method": "PATCH",
        "path": "maxscale", "body": {"data": {"attributes": {"parameters": {
            "passive": True}}}}})
    try:
        for doc, needle in ((bad_param, "'port'"),
                            ("{\"changes\": 17}", "\"changes\" array"),
                            (not_a_route, "not a synchronized REST change"),
                            (local_global, "keeps its own")):
            with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
                cur.execute(f"UPDATE {SYNC_DB}.maxscale_config SET version "
                            f"= %s, config = %s, origin = 'by-hand' WHERE "
                            f"cluster = %s", (version + 1, doc if isinstance(
                                doc, str) else json.dumps(doc), CLUSTER))
            for n in NAMES:
                st.wait_until(lambda: sync_status(n)["status"] == "Error"
                              and needle in (sync_status(n)["error"] or ""),
                              WAIT, what=f"{n} refuses ({needle})")
                cs = sync_status(n)
                assert cs["version"] == version + 1
                assert cs["local_version"] == version
                assert f"version {version + 1} refused" in cs["error"]
                assert not exists(n, "/servers/csync-bad")
                assert exists(n, "/servers/csync-late")
                assert passive(n) is False
    finally:
        with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
            cur.execute(f"UPDATE {SYNC_DB}.maxscale_config SET version = %s,"
                        f" config = %s, origin = %s WHERE cluster = %s",
                        (version, json.dumps(good), origin, CLUSTER))
    st.wait_until(lambda: all(sync_status(n)["status"] == "OK"
                              for n in NAMES), WAIT, what="OK again")
    for n in NAMES:
        log = "".join(p.read_text() for p in
                      (cluster["dirs"][n] / "proxy.log",
                       cluster["dirs"][n] / "log" / "sluice.log")
                      if p.exists())
        assert f"configuration version {version + 1} from by-hand " \
               f"refused" in log


def test_row_reset_reported(cluster):
    version, text, origin, nodes = row()
    older = json.loads(text)
    older["changes"].pop()
    try:
        with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
            cur.execute(f"UPDATE {SYNC_DB}.maxscale_config SET version = %s,"
                        f" config = %s WHERE cluster = %s",
                        (version - 1, json.dumps(older), CLUSTER))
        st.wait_until(lambda: "is older than this instance's" in (
            sync_status("B")["error"] or ""), WAIT, what="B sees the reset")
        status, doc = http("B", "DELETE", "/servers/csync-late")
        assert status == 409, doc
        assert exists("B", "/servers/csync-late")
    finally:
        with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
            cur.execute(f"UPDATE {SYNC_DB}.maxscale_config SET version = %s,"
                        f" config = %s WHERE cluster = %s",
                        (version, text, CLUSTER))
    st.wait_until(lambda: sync_status("B")["status"] == "OK", WAIT,
                  what="B OK again")
