# SPDX-License-Identifier: Apache-2.0
"""Run-time configuration changes under load (issue 15): 8 client threads
run a mixed workload through a readwritesplit service whose filter chain
is cache + tee while another thread, through the REST API, alters the
service's router parameters, a server's weight and both filters'
parameters, and creates, uses and destroys servers, readconnroute
services (router_options altered), listeners and filters -- for
SLUICE_STRESS_SECONDS (default 120). No client of the standing service may
see an error; clients of the short-lived services may only see the errors
of a service that went away (connection refused, lost connection). The
daemon must stop cleanly with no sanitizer report (proxy.stop_proxy).

Then the memory check: RSS after 10,000 PATCHes that each replace a
router or filter instance stays within 10 % of RSS after 100 (before
configuration generations, every PATCH kept its old instance and
parameter set until exit). Skipped under a sanitizer build, whose
allocator quarantines freed memory."""

import base64
import json
import os
import threading
import time
import urllib.error
import urllib.request

import pymysql
import pytest

import filterconf as fc
import sluicetest as st

pytestmark = [pytest.mark.sluice_only, pytest.mark.slow]

PRIMARY, REPLICA = st.port(5000), st.port(5001)
RWS, TARGET, ADMIN = st.port(5002), st.port(5003), st.port(5004)
DYN_PORTS = [st.port(5005), st.port(5006), st.port(5007)]
BASE = f"http://{st.HOST}:{ADMIN}/v1"
SECONDS = float(os.environ.get("SLUICE_STRESS_SECONDS", "120"))
CLIENTS = 8
# What a client of a service destroyed under it may see: the listener is
# gone (2003 refused) or the connection was closed (2013 lost, 2006 gone).
DESTROYED_SERVICE_ERRORS = {2003, 2006, 2013}


@pytest.fixture(scope="module")
def table():
    with st.root(st.PRIMARY_ID) as conn:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS test.stress_t "
                        "(id INT PRIMARY KEY, v INT)")
            cur.execute("CREATE TABLE IF NOT EXISTS test.stress_copy "
                        "(id INT PRIMARY KEY, v INT)")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, table):
    sections = """
[Stress-Cache]
type=filter
module=cache
hard_ttl=2s
soft_ttl=1s

[Stress-Tee]
type=filter
module=tee
target=Stress-Target
match=/stress_t/
"""
    sections += fc.service("Stress-RWS", RWS, router="readwritesplit",
                           filters="Stress-Cache|Stress-Tee")
    sections += fc.service("Stress-Target", TARGET)
    yield from fc.running(tmp_path_factory, PRIMARY, REPLICA, sections,
                          [RWS, TARGET], admin=ADMIN)


def http(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method)
    tok = base64.b64encode(b"admin:mariadb").decode()
    req.add_header("Authorization", "Basic " + tok)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text else None


def must(expect, method, path, body=None):
    status, doc = http(method, path, body)
    assert status == expect, (method, path, status, doc)
    return doc


def patch(path, params):
    return must(204, "PATCH", path,
                {"data": {"attributes": {"parameters": params}}})


def create(kind, name, attributes, relationships=None):
    data = {"id": name, "type": kind, "attributes": attributes}
    if relationships:
        data["relationships"] = relationships
    return must(204, "POST", f"/{kind}", {"data": data})


def rel(kind, *names):
    return {kind: {"data": [{"id": n, "type": kind} for n in names]}}


def client(idx, stop, errors, counts):
    """Mixed workload on the standing service; a new session every 20
    iterations (so new sessions meet new router and filter instances)."""
    conn = None
    n = 0
    key = 1000 * idx
    while not stop.is_set():
        try:
            if conn is None or n % 20 == 0:
                if conn is not None:
                    conn.close()
                conn = st.connect(RWS, database="test")
            with conn.cursor() as cur:
                cur.execute("SELECT @@server_id")
                assert cur.fetchone()[0] in st.SERVERS
                key = 1000 * idx + n % 50
                cur.execute("REPLACE INTO stress_t VALUES (%s, %s)",
                            (key, n))
                cur.execute("SELECT v FROM stress_t WHERE id = %s", (key,))
                cur.fetchall()
                cur.execute("BEGIN")
                cur.execute("UPDATE stress_t SET v = v + 1 WHERE id = %s",
                            (key,))
                cur.execute("SELECT v FROM stress_t WHERE id = %s", (key,))
                cur.fetchall()
                cur.execute("COMMIT")
            n += 1
        except Exception as exc:   # noqa: BLE001 -- every error counts
            errors.append(f"client {idx}: {exc!r}")
            conn = None
            time.sleep(0.1)
    if conn is not None:
        conn.close()
    counts[idx] = n


def dyn_client(port, errors, oks):
    """One query through a short-lived service: only the errors of a
    destroyed service are allowed."""
    try:
        conn = st.connect(port, connect_timeout=5)
        try:
            sid = st.scalar(conn, "SELECT @@server_id")
            assert sid in st.SERVERS, sid
            oks.append(sid)
        finally:
            conn.close()
    except pymysql.err.OperationalError as exc:
        if exc.args[0] not in DESTROYED_SERVICE_ERRORS:
            errors.append(f"dynamic service: {exc!r}")


def churn_once(i, dyn_errors, dyn_ok):
    """Create, use, alter and destroy one server + service + listener and
    one filter; alter the standing objects."""
    srv, svc, lst, flt = (f"st-srv-{i}", f"St-Svc-{i}", f"St-Lst-{i}",
                          f"St-Flt-{i}")
    port = DYN_PORTS[i % len(DYN_PORTS)]
    create("servers", srv, {"parameters": {
        "address": st.HOST, "port": st.SERVERS[st.PRIMARY_ID]}})
    create("filters", flt, {"module": "cache", "parameters": {
        "soft_ttl": "1s", "hard_ttl": "2s"}})
    create("services", svc, {"router": "readconnroute", "parameters": {
        "user": st.SERVICE_USER, "password": st.SERVICE_PASSWORD,
        "router_options": "running"}},
        rel("servers", srv, "db2", "db3"))
    create("listeners", lst, {"parameters": {
        "protocol": "MariaDBClient", "address": st.HOST, "port": port}},
        rel("services", svc))
    t = threading.Thread(target=dyn_client, args=(port, dyn_errors, dyn_ok))
    t.start()
    patch(f"/services/{svc}", {"router_options": "slave" if i % 2
                               else "master,slave"})
    patch("/services/Stress-RWS", {"master_accept_reads": i % 2 == 0})
    patch(f"/servers/db{2 + i % 2}", {"weight": 1 + i % 3})
    patch("/filters/Stress-Cache", {"soft_ttl": f"{1 + i % 2}s"})
    patch("/filters/Stress-Tee", {"match": "/stress_t/" if i % 2
                                  else "/stress_t|stress_x/"})
    t.join(30)
    must(204, "DELETE", f"/listeners/{lst}")
    must(204, "DELETE", f"/services/{svc}")
    must(204, "DELETE", f"/servers/{srv}")
    must(204, "DELETE", f"/filters/{flt}")


def test_runtime_changes_under_load(proxy):
    stop = threading.Event()
    errors, dyn_errors, dyn_ok = [], [], []
    counts = [0] * CLIENTS
    threads = [threading.Thread(target=client,
                                args=(i, stop, errors, counts))
               for i in range(CLIENTS)]
    for t in threads:
        t.start()
    rounds = 0
    try:
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline and proxy.daemon.alive():
            churn_once(rounds, dyn_errors, dyn_ok)
            rounds += 1
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    print(f"{rounds} churn rounds, {sum(counts)} client iterations "
          f"in {SECONDS:.0f} s")
    assert proxy.daemon.alive(), proxy.daemon.log_tail()
    assert not errors, errors[:10]
    assert not dyn_errors, dyn_errors[:10]
    assert rounds >= 5 and min(counts) > 0, (rounds, counts)
    # The standing objects are all there and the last values applied.
    svc = must(200, "GET", "/services/Stress-RWS")["data"]
    assert svc["attributes"]["parameters"]["master_accept_reads"] == \
        ("true" if (rounds - 1) % 2 == 0 else "false")
    # most short-lived services answered before they were destroyed
    assert len(dyn_ok) > rounds // 2, (len(dyn_ok), rounds)


def test_rss_flat_over_10000_patches(proxy):
    """Each PATCH replaces a router instance (readwritesplit) or a filter
    instance (cache) and their parameter sets; while a client keeps making
    new sessions, the replaced ones must be freed, not kept to exit."""
    stop = threading.Event()
    errors = []
    counts = [0]
    t = threading.Thread(target=client, args=(0, stop, errors, counts))
    t.start()
    figures = {}
    # Under a sanitizer RSS is not comparable (skipped below) and each
    # PATCH is several times slower; what is left to check there is PATCH
    # racing the sessions, which 1,000 cover.
    marks = (100, 500, 1000) if st.sanitizer_build() else (100, 1000, 5000,
                                                        10000)
    try:
        for i in range(1, marks[-1] + 1):
            if i % 2:
                patch("/services/Stress-RWS",
                      {"max_slave_replication_lag": f"{i % 50 + 1}s"})
            else:
                patch("/filters/Stress-Cache", {"soft_ttl": f"{i % 7 + 1}s"})
            if i in marks:
                time.sleep(1)   # let the last sessions and epochs pass
                patch("/servers/db2", {"weight": 1})   # a write reclaims
                figures[i] = st.rss_kb(proxy.pid)
    finally:
        stop.set()
        t.join(60)
    print("RSS (kB) after N PATCHes: " +
          ", ".join(f"{n}: {kb}" for n, kb in figures.items()))
    assert not errors, errors[:10]
    if st.sanitizer_build():
        pytest.skip("RSS not comparable under a sanitizer (quarantine); "
                    f"figures {figures}")
    assert figures[10000] <= figures[100] * 1.10, figures
