# SPDX-License-Identifier: Apache-2.0
"""GET /metrics, response-time histograms and query digests on the real
cluster: promtool accepts the exposition; known traffic through
readwritesplit (100 reads, 10 writes) moves the routed counters and the
histogram counts by exactly that much; statements that differ only in
literals (and in the length of an IN list) share a digest; the digest
table stays within digest_max_entries and counts its evictions; the
percentiles agree with the latency the client measured.

Ports st.port(5060..5069): 5060 admin, 5061/5062 the stock
readconnroute services (kernel_forwarding=off: digests need the
statements in user space), 5063 RW-Service (readwritesplit,
causal_reads=none so no GTID probe adds to the server counts); a second
Sluice with threads=1 and digest_max_entries=5 on 5065..5068.
Issue 22's second part: the monitor test's Sluice (mariadbmon) has its
admin on st.port(5200); st.port(5219) is a server nobody listens on.
Its third part: a Sluice with query_digests and latency_histograms off on
st.port(5300..5303) (admin, primary, replica, RW).
The switchover it runs puts db1 back as the primary."""

import base64
import json
import shutil
import statistics
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from proxy import Daemon

import sluicetest as st
import proxy as px

pytestmark = pytest.mark.sluice_only

ADMIN, PRIMARY, REPLICA, RW = (st.port(5060), st.port(5061), st.port(5062),
                               st.port(5063))
SMALL_ADMIN, SMALL_PRIMARY, SMALL_REPLICA, SMALL_RW = (
    st.port(5065), st.port(5066), st.port(5067), st.port(5068))
MAXCTRL = st.BUILD_DIR / "bin" / "maxctrl"
TABLE = "test.metrics_t"


def config(run_dir, primary, replica, rw, admin, extra="", threads="auto"):
    text = px.sluice_config(run_dir, primary, replica, extra=extra,
                            threads=threads)
    # The digests, statement kinds and session byte counters tested here
    # through readconnroute need the statements in user space: with
    # kernel_forwarding=auto (the default) a session is absent from the
    # digests (docs/metrics.md); test_kernel_forwarding_auto.py tests what
    # forwarded sessions still count.
    text = text.replace("router=readconnroute\n",
                        "router=readconnroute\nkernel_forwarding=off\n")
    text += f"""
[RW-Service]
type=service
router=readwritesplit
servers={",".join(f"db{sid}" for sid in st.SERVERS)}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
causal_reads=none

[RW-Listener]
type=listener
service=RW-Service
protocol=MariaDBClient
address={st.HOST}
port={rw}
"""
    return text.replace("admin_enabled=false",
                        f"admin_host={st.HOST}\nadmin_port={admin}")


@pytest.fixture(scope="module")
def table():
    with st.root(st.PRIMARY_ID) as p, p.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS test")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} "
                    "(id INT PRIMARY KEY, v INT)")
        cur.execute(f"REPLACE INTO {TABLE} VALUES "
                    + ",".join(f"({i}, 0)" for i in range(1, 11)))
    st.wait_replicated()


def start(tmp_path_factory, name, ports, extra="", threads="auto"):
    run_dir = tmp_path_factory.mktemp(name)
    primary, replica, rw, admin = ports
    prx = px.start_with_admin(run_dir, config(run_dir, primary, replica, rw,
                                              admin, extra, threads),
                              primary, replica, admin)
    return prx


@pytest.fixture(scope="module")
def sluice(tmp_path_factory, table):
    prx = start(tmp_path_factory, "metrics", (PRIMARY, REPLICA, RW, ADMIN))
    yield prx
    problems = px.stop_proxy(prx)
    if problems:
        pytest.fail("proxy shutdown: " + "\n".join(problems), pytrace=False)


def request(method, path, port=ADMIN, user="admin", password="mariadb"):
    """(status, body bytes, content type)."""
    req = urllib.request.Request(f"http://{st.HOST}:{port}{path}",
                                 method=method)
    if user is not None:
        tok = base64.b64encode(f"{user}:{password}".encode()).decode()
        req.add_header("Authorization", "Basic " + tok)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(), resp.headers["Content-Type"]
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers["Content-Type"]


def scrape(port=ADMIN):
    status, body, ctype = request("GET", "/metrics", port=port)
    assert status == 200, body
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    return body.decode()


def parse(text):
    """{(name, frozenset(labels)): value} of the samples."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        if "{" in head:
            name, rest = head.split("{", 1)
            labels = frozenset(tuple(kv.split("=", 1)) for kv in
                               rest.rstrip("}").split(",") if kv)
            labels = frozenset((k, v.strip('"')) for k, v in labels)
        else:
            name, labels = head, frozenset()
        out[(name, labels)] = float(value)
    return out


def val(m, name, **labels):
    return m[(name, frozenset(labels.items()))]


def queries(port=ADMIN, **params):
    qs = "&".join(f"{k}={v}" for k, v in params.items())
    status, body, _ = request("GET", "/v1/sluice/queries" + (
        "?" + qs if qs else ""), port=port)
    assert status == 200, body
    return json.loads(body)


def reset(port=ADMIN):
    status, body, _ = request("DELETE", "/v1/sluice/queries", port=port)
    assert status == 204, body


# ---- /metrics ----

def test_promtool_accepts_the_exposition(sluice):
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing (Debian package prometheus)"
    with st.connect(RW) as c, c.cursor() as cur:
        cur.execute("SELECT 1")
    text = scrape()
    proc = subprocess.run([promtool, "check", "metrics"], input=text,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # promtool prints lint findings even when it exits 0.
    assert proc.stdout.strip() == "" and proc.stderr.strip() == "", \
        proc.stdout + proc.stderr
    for family in ("sluice_server_state", "sluice_server_routed_total",
                   "sluice_server_response_seconds",
                   "sluice_service_response_seconds",
                   "sluice_service_sessions_total", "sluice_build_info",
                   "sluice_worker_up", "sluice_query_digest_evictions_total"):
        assert f"# TYPE {family} " in text, family


def test_metrics_need_credentials(sluice):
    status, _, _ = request("GET", "/metrics", user=None)
    assert status == 401
    status, _, _ = request("POST", "/metrics")
    assert status == 405


def test_known_traffic_moves_counters_and_histograms_exactly(sluice):
    """100 reads and 10 writes through readwritesplit: the replicas'
    routed reads and histogram counts grow by 100 together, the
    primary's writes and histogram count by 10, the service's histogram
    by 110, and each histogram's +Inf bucket equals its count."""
    with st.connect(RW) as c, c.cursor() as cur:
        cur.execute("SELECT 1")       # backends connected, sessions made
        m0 = parse(scrape())
        answered = {sid: 0 for sid in st.SERVERS}
        for i in range(100):
            cur.execute(f"SELECT @@server_id, v FROM {TABLE} WHERE id = %s",
                        (i % 10 + 1,))
            answered[cur.fetchone()[0]] += 1
        for i in range(10):
            cur.execute(f"UPDATE {TABLE} SET v = v + 1 WHERE id = %s",
                        (i + 1,))
        m1 = parse(scrape())

    def delta(name, **labels):
        return val(m1, name, **labels) - val(m0, name, **labels)

    assert answered[st.PRIMARY_ID] == 0, answered
    for sid in st.SERVERS:
        srv = f"db{sid}"
        reads = delta("sluice_server_routed_total", server=srv, kind="read")
        writes = delta("sluice_server_routed_total", server=srv,
                       kind="write")
        count = delta("sluice_server_response_seconds_count", server=srv)
        inf = delta("sluice_server_response_seconds_bucket", server=srv,
                    le="+Inf")
        if sid == st.PRIMARY_ID:
            assert (reads, writes, count) == (0, 10, 10), srv
        else:
            assert (reads, writes, count) == (answered[sid], 0,
                                              answered[sid]), srv
        assert inf == count
    assert delta("sluice_service_response_seconds_count",
                 service="RW-Service") == 110
    assert delta("sluice_service_response_seconds_bucket",
                 service="RW-Service", le="+Inf") == 110
    assert delta("sluice_service_response_errors_total",
                 service="RW-Service") == 0
    # Buckets are cumulative: never decreasing with le.
    for sid in st.SERVERS:
        counts = [v for (n, lab), v in m1.items()
                  if n == "sluice_server_response_seconds_bucket"
                  and ("server", f"db{sid}") in lab]
        assert len(counts) == 21
    # The REST resources carry the same histograms.
    status, body, _ = request("GET", "/v1/services/RW-Service")
    rt = json.loads(body)["data"]["attributes"]["response_time"]
    assert rt["count"] == val(m1, "sluice_service_response_seconds_count",
                              service="RW-Service")
    assert rt["buckets"][-1] == {"le": "+Inf", "count": rt["count"]}


# ---- digests ----

def test_literals_and_in_lists_share_a_digest(sluice):
    reset()
    with st.connect(RW) as c, c.cursor() as cur:
        cur.execute(f"SELECT * FROM {TABLE} WHERE id = 1")
        cur.execute(f"SELECT * FROM {TABLE} WHERE id = 2")
        cur.execute(f"SELECT * FROM {TABLE} WHERE id IN (1,2,3)")
        cur.execute(f"SELECT * FROM {TABLE} WHERE id IN (4, 5)")
        cur.execute(f"select  *  from {TABLE}  -- a comment\n where id = 3")
        for _ in range(2):
            with pytest.raises(Exception):
                cur.execute("SELECT * FROM test.no_such_table WHERE id = 7")
    rows = {d["attributes"]["digest_text"]: d["attributes"]
            for d in queries(service="RW-Service")["data"]}
    eq = rows[f"SELECT * FROM {TABLE} WHERE id = ?"]
    assert (eq["count"], eq["errors"], eq["rows_sent"]) == (2, 0, 2)
    assert eq["user"] == st.APP_USER and eq["service"] == "RW-Service"
    inl = rows[f"SELECT * FROM {TABLE} WHERE id IN (...)"]
    assert (inl["count"], inl["rows_sent"]) == (2, 5)
    # Case of keywords is kept, so the lower-case one is its own digest;
    # the comment and extra spaces are gone.
    assert rows[f"select * from {TABLE} where id = ?"]["count"] == 1
    bad = rows["SELECT * FROM test.no_such_table WHERE id = ?"]
    assert (bad["count"], bad["errors"]) == (2, 2)


def test_database_change_starts_another_digest(sluice):
    """The same statement before and after USE (and COM_INIT_DB) counts in
    one row per database: the session's hashed names follow the change
    (through readconnroute, whose digests also count kinds)."""
    reset()
    with st.connect(PRIMARY) as c, c.cursor() as cur:
        cur.execute("SELECT 1")
        cur.execute("USE test")
        cur.execute("SELECT 1")
        cur.execute("SELECT 1")
        c.select_db("information_schema")
        cur.execute("SELECT 1")
    rows = {d["attributes"]["database"]: d["attributes"]["count"]
            for d in queries(service="Primary-Service")[
                "data"] if d["attributes"]["digest_text"] == "SELECT ?"}
    assert rows == {"": 1, "test": 2, "information_schema": 1}, rows


def test_queries_sorted_limited_filtered_and_reset(sluice):
    reset()
    with st.connect(RW) as c, c.cursor() as cur:
        for _ in range(3):
            cur.execute("SELECT SLEEP(0.05)")
        for i in range(20):
            cur.execute("SELECT %s + 1", (i,))
    doc = queries(sort="count")
    texts = [d["attributes"]["digest_text"] for d in doc["data"]]
    assert texts[0] == "SELECT ? + ?", texts
    doc = queries(sort="total_time", limit=1)
    assert [d["attributes"]["digest_text"] for d in doc["data"]] == \
        ["SELECT SLEEP(?)"]
    assert queries(match="sleep", user=st.APP_USER)["data"][0][
        "attributes"]["count"] == 3
    assert queries(user="nobody")["data"] == []
    status, _, _ = request("GET", "/v1/sluice/queries?sort=bogus")
    assert status == 400
    proc = subprocess.run([str(MAXCTRL), "-u", "admin", "-p", "mariadb",
                           "--hosts", f"{st.HOST}:{ADMIN}", "list",
                           "queries", "--sort", "total_time", "--limit",
                           "1"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "SELECT SLEEP(?)" in proc.stdout
    assert "SELECT ? + ?" not in proc.stdout
    proc = subprocess.run([str(MAXCTRL), "-u", "admin", "-p", "mariadb",
                           "--hosts", f"{st.HOST}:{ADMIN}", "--format",
                           "json", "list", "queries", "--sort", "count"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data[0]["attributes"]["digest_text"] == "SELECT ? + ?"
    assert data[0]["attributes"]["count"] == 20
    reset()
    assert queries()["data"] == []


def test_maxctrl_format_json(sluice):
    proc = subprocess.run([str(MAXCTRL), "-u", "admin", "-p", "mariadb",
                           "--hosts", f"{st.HOST}:{ADMIN}", "--format",
                           "json", "list", "servers"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert sorted(s["id"] for s in json.loads(proc.stdout)) == \
        [f"db{sid}" for sid in sorted(st.SERVERS)]
    proc = subprocess.run([str(MAXCTRL), "-u", "admin", "-p", "mariadb",
                           "--hosts", f"{st.HOST}:{ADMIN}", "--format",
                           "json", "show", "service", "RW-Service"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["id"] == "RW-Service"
    assert "response_time" in doc["attributes"]
    proc = subprocess.run([str(MAXCTRL), "--format", "yaml", "list",
                           "servers"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2 and "unknown format" in proc.stderr


def test_percentiles_agree_with_client_latency(sluice):
    """40 statements sleeping 5..80 ms: p50 and p95 from the digest's
    histogram within 35 % of what the client measured, min and max
    inside the client's range (the client sees a little more)."""
    reset()
    measured = []
    with st.connect(RW) as c, c.cursor() as cur:
        for i in range(40):
            secs = 0.005 + 0.075 * i / 39
            t0 = time.monotonic()
            cur.execute("SELECT SLEEP(%s)", (round(secs, 4),))
            measured.append(time.monotonic() - t0)
    d = queries(match="SLEEP")["data"][0]["attributes"]
    measured.sort()
    p50 = statistics.median(measured)
    p95 = measured[int(0.95 * len(measured)) - 1]
    assert d["samples"] == 40 and d["count"] == 40
    assert d["min_time"] <= measured[0] and d["max_time"] <= measured[-1]
    assert d["max_time"] > 0.07
    assert abs(d["p50"] - p50) / p50 < 0.35, (d["p50"], p50)
    assert abs(d["p95"] - p95) / p95 < 0.35, (d["p95"], p95)
    assert abs(d["avg_time"] - statistics.mean(measured)) < 0.01


def test_digest_table_bounded_with_evictions_counted(tmp_path_factory,
                                                     table):
    """threads=1, digest_max_entries=5: twelve different statements keep
    the last five, and seven evictions are counted (in the REST meta and
    in /metrics). This instance also has admin_metrics_public=true:
    /metrics without credentials, the API still refused."""
    prx = start(tmp_path_factory, "metrics-small",
                (SMALL_PRIMARY, SMALL_REPLICA, SMALL_RW, SMALL_ADMIN),
                extra="digest_max_entries=5\nadmin_metrics_public=true",
                threads=1)
    try:
        status, body, _ = request("GET", "/metrics", port=SMALL_ADMIN,
                                  user=None)
        assert status == 200 and b"sluice_build_info" in body
        status, _, _ = request("GET", "/v1/sluice/queries",
                               port=SMALL_ADMIN, user=None)
        assert status == 401
        reset(port=SMALL_ADMIN)    # start-up's readiness probes
        with st.connect(SMALL_RW) as c, c.cursor() as cur:
            for i in range(12):
                cur.execute(f"SELECT 1 AS c{i}")
        doc = queries(port=SMALL_ADMIN)
        texts = sorted(d["attributes"]["digest_text"] for d in doc["data"])
        assert texts == sorted(f"SELECT ? AS c{i}" for i in range(7, 12))
        assert doc["meta"]["evictions"] == 7
        assert doc["meta"]["entries"] == 5
        m = parse(scrape(port=SMALL_ADMIN))
        assert val(m, "sluice_query_digest_evictions_total") == 7
        assert val(m, "sluice_query_digests") == 5
    finally:
        problems = px.stop_proxy(prx)
    assert not problems, problems


# ---- bytes, logins, worker loops, OpenMetrics (issue 22, part 2) ----

def session_of_mine(service):
    """The REST id of this test's one open session on service (the only
    one: the module's tests run one at a time)."""
    status, body, _ = request("GET", "/v1/sessions")
    assert status == 200, body
    ids = [s["id"] for s in json.loads(body)["data"]
           if s["attributes"]["service"] == service]
    assert len(ids) == 1, ids
    return ids[0]


def test_bytes_grow_by_a_blob_per_server_and_per_session(sluice):
    """A 1 MiB blob written through the primary's readconnroute service
    and read back: db1's sent and received byte counters grow by at least
    1 MiB each, and so do the session's bytes_read and bytes_written in
    GET /v1/sessions/ID; the replicas' sent bytes do not grow by a MiB."""
    blob = bytes(range(256)) * 4096
    with st.connect(PRIMARY) as c, c.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS test.metrics_blob "
                    "(id INT PRIMARY KEY, b LONGBLOB)")
        sid = session_of_mine("Primary-Service")
        _, body, _ = request("GET", f"/v1/sessions/{sid}")
        s0 = json.loads(body)["data"]["attributes"]
        m0 = parse(scrape())
        cur.execute("REPLACE INTO test.metrics_blob VALUES (1, %s)", (blob,))
        cur.execute("SELECT b, @@server_id FROM test.metrics_blob "
                    "WHERE id = 1")
        got, server_id = cur.fetchone()
        assert got == blob and server_id == st.PRIMARY_ID
        m1 = parse(scrape())
        _, body, _ = request("GET", f"/v1/sessions/{sid}")
        s1 = json.loads(body)["data"]["attributes"]
    mib = len(blob)

    def delta(name, srv):
        return val(m1, name, server=srv) - val(m0, name, server=srv)

    assert delta("sluice_server_sent_bytes_total", "db1") >= mib
    assert delta("sluice_server_received_bytes_total", "db1") >= mib
    for sid_ in st.SERVERS:
        if sid_ != st.PRIMARY_ID:
            assert delta("sluice_server_sent_bytes_total", f"db{sid_}") < mib
    assert s1["bytes_read"] - s0["bytes_read"] >= mib
    assert s1["bytes_written"] - s0["bytes_written"] >= mib
    # The REST server resource carries the same counters.
    _, body, _ = request("GET", "/v1/servers/db1")
    stats = json.loads(body)["data"]["attributes"]["statistics"]
    assert stats["bytes_sent"] >= val(m1, "sluice_server_sent_bytes_total",
                                      server="db1")


def test_auth_failures_counted_by_reason(sluice):
    """A wrong password for an existing account counts once as
    wrong_password, an account that does not exist once as unknown_user;
    both get 1045 from the client's point of view; nothing else moves."""
    import pymysql

    m0 = parse(scrape())
    for user, password in ((st.APP_USER, "not-the-password"),
                           ("no_such_user_22", "x")):
        with pytest.raises(pymysql.err.OperationalError) as exc:
            st.connect(REPLICA, user=user, password=password)
        assert exc.value.args[0] == 1045, exc.value.args
    m1 = parse(scrape())

    def delta(reason, service="Replica-Service"):
        name = "sluice_service_auth_failures_total"
        return (val(m1, name, service=service, reason=reason)
                - val(m0, name, service=service, reason=reason))

    assert delta("wrong_password") == 1
    assert delta("unknown_user") == 1
    for reason in ("denied", "tls_required", "account_locked",
                   "password_expired", "resource_limit", "host_blocked",
                   "other"):
        assert delta(reason) == 0, reason
    assert delta("wrong_password", "Primary-Service") == 0
    _, body, _ = request("GET", "/v1/services/Replica-Service")
    stats = json.loads(body)["data"]["attributes"]["statistics"]
    assert stats["failed_auths"] == sum(
        val(m1, "sluice_service_auth_failures_total",
            service="Replica-Service", reason=r) for r in (
            "unknown_user", "wrong_password", "denied", "tls_required",
            "account_locked", "password_expired", "resource_limit",
            "host_blocked", "other"))


def test_worker_loop_time_adds_up_to_wall_time(sluice):
    """Each worker's busy + idle seconds grow by about the wall time
    between two scrapes (every moment of the loop is one or the other),
    and busy time grows under load."""
    m0 = parse(scrape())
    t0 = time.monotonic()
    with st.connect(RW) as c, c.cursor() as cur:
        for _ in range(300):
            cur.execute(f"SELECT v FROM {TABLE} WHERE id = 1")
    time.sleep(1.0)
    m1 = parse(scrape())
    wall = time.monotonic() - t0
    workers = [dict(lab)["worker"] for (n, lab) in m1
               if n == "sluice_worker_busy_seconds_total"]
    assert workers
    busy_all = 0.0
    events_all = 0
    for w in workers:
        busy = (val(m1, "sluice_worker_busy_seconds_total", worker=w)
                - val(m0, "sluice_worker_busy_seconds_total", worker=w))
        idle = (val(m1, "sluice_worker_idle_seconds_total", worker=w)
                - val(m0, "sluice_worker_idle_seconds_total", worker=w))
        assert busy >= 0 and idle > 0, (w, busy, idle)
        # Scrapes are answered by a job in the loop: allow their skew.
        assert 0.5 * wall <= busy + idle <= wall + 0.5, (w, busy, idle, wall)
        busy_all += busy
        assert (val(m1, "sluice_worker_timers_total", worker=w)
                >= val(m0, "sluice_worker_timers_total", worker=w))
        events_all += (val(m1, "sluice_worker_events_total", worker=w)
                       - val(m0, "sluice_worker_events_total", worker=w))
    assert busy_all > 0
    # 300 queries: at least a client read and a backend read each.
    assert events_all >= 600, events_all



def kind_mix(cur):
    """5 reads, 3 writes, 5 session statements and 1 other."""
    for i in range(5):
        cur.execute(f"SELECT v FROM {TABLE} WHERE id = %s", (i + 1,))
    cur.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} "
                "(id INT PRIMARY KEY, v INT)")
    cur.execute("SET @metrics_v = 1")
    cur.execute("BEGIN")
    for i in range(2):
        cur.execute(f"UPDATE {TABLE} SET v = v + 1 WHERE id = %s",
                    (i + 1,))
    cur.execute("COMMIT")
    cur.execute("PREPARE metrics_s FROM 'SELECT 1'")
    cur.execute("EXECUTE metrics_s")
    cur.execute("DEALLOCATE PREPARE metrics_s")


KIND_MIX = {"read": 5, "write": 3, "session": 5, "other": 1}


def kind_deltas(service, before, after):
    name = "sluice_service_queries_total"
    return {k: val(after, name, service=service, kind=k)
            - val(before, name, service=service, kind=k) for k in KIND_MIX}


def test_queries_counted_by_kind(sluice):
    """The same mix through readwritesplit (which classifies each
    statement) and readconnroute (counted by the core from the digest's
    lexing pass): 5 SELECTs count as read, 2 UPDATEs and a CREATE TABLE
    IF NOT EXISTS as write, SET @v, BEGIN, COMMIT, PREPARE and DEALLOCATE
    as session, EXECUTE as other, exactly, in both services."""
    for port, service in ((RW, "RW-Service"), (PRIMARY, "Primary-Service")):
        with st.connect(port) as c, c.cursor() as cur:
            cur.execute("SELECT 1")
            m0 = parse(scrape())
            kind_mix(cur)
            m1 = parse(scrape())
        assert kind_deltas(service, m0, m1) == KIND_MIX, service


def threads():
    """{worker id: attributes.stats} from GET /v1/maxscale/threads."""
    status, body, _ = request("GET", "/v1/maxscale/threads")
    assert status == 200, body
    return {t["id"]: t["attributes"]["stats"]
            for t in json.loads(body)["data"]}


def test_thread_stats_count_accepts_descriptors_and_hangups(sluice):
    """GET /v1/maxscale/threads: 6 connections held open through
    readconnroute add exactly 6 accepts in all, and on each worker exactly
    as many accepts as sessions it gained; its total_descriptors grow by
    at least its new sessions plus backend connections; 4 clients that
    drop the TCP connection after the handshake add 4 more accepts and
    4 to 8 hangups (EPOLLRDHUP, maybe EPOLLHUP too); reads and writes
    grow; the average batch is within 1..max; the load is a percentage
    for the last second, minute and hour; GET .../threads/ID is one of
    them and an unknown id 404. maxctrl list threads shows the load
    columns and show threads every worker."""
    import socket

    t0 = threads()
    conns = [st.connect(PRIMARY) for _ in range(6)]
    try:
        for c in conns:
            with c.cursor() as cur:
                cur.execute("SELECT @@server_id")
                assert cur.fetchone()[0] == st.PRIMARY_ID
        t1 = threads()
    finally:
        for c in conns:
            c.close()
    assert sum(t1[w]["accepts"] - t0[w]["accepts"] for w in t0) == 6
    for w in t0:
        gained = t1[w]["sessions"] - t0[w]["sessions"]
        assert t1[w]["accepts"] - t0[w]["accepts"] == gained, (w, t0, t1)
        assert (t1[w]["total_descriptors"] - t0[w]["total_descriptors"]
                >= gained + t1[w]["backend_connections"]
                - t0[w]["backend_connections"]), (w, t0, t1)
        assert t1[w]["reads"] >= t0[w]["reads"]
        assert t1[w]["writes"] >= t0[w]["writes"]
    assert sum(t1[w]["reads"] - t0[w]["reads"] for w in t0) >= 12
    deadline = time.time() + 5     # the first load sample: a second in
    while not all("load" in s for s in t1.values()) and \
            time.time() < deadline:
        time.sleep(0.2)
        t1 = threads()
    for s in t1.values():
        assert 1 <= s["avg_event_queue_length"] <= s["max_event_queue_length"]
        load = s["load"]
        assert set(load) == {"last_second", "last_minute", "last_hour"}
        assert all(0 <= v <= 100 for v in load.values()), load
        for k in ("max_exec_time", "max_queue_time"):
            assert k not in s   # not measured: left out, never a 0
    # The 6 sessions gone (their closes counted) before the next baseline.
    deadline = time.time() + 5
    while sum(s["sessions"] for s in t1.values()) > \
            sum(s["sessions"] for s in t0.values()) and time.time() < deadline:
        time.sleep(0.1)
        t1 = threads()
    time.sleep(0.2)
    t1 = threads()
    for _ in range(4):
        with socket.create_connection((st.HOST, PRIMARY)) as raw:
            assert raw.recv(4096)          # the server handshake
    deadline = time.time() + 5
    while True:
        t2 = threads()
        hangups = sum(t2[w]["hangups"] - t1[w]["hangups"] for w in t1)
        if hangups >= 4 or time.time() > deadline:
            break
        time.sleep(0.1)
    assert sum(t2[w]["accepts"] - t1[w]["accepts"] for w in t1) == 4
    assert 4 <= hangups <= 8, hangups
    status, body, _ = request("GET", "/v1/maxscale/threads/0")
    assert status == 200 and json.loads(body)["data"]["id"] == "0"
    status, _, _ = request("GET", "/v1/maxscale/threads/99")
    assert status == 404
    out = subprocess.run([str(MAXCTRL), "-u", "admin", "-p", "mariadb",
                          "--hosts", f"{st.HOST}:{ADMIN}", "list", "threads"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "Load (1s)" in out.stdout and "Total Descriptors" in out.stdout
    out = subprocess.run([str(MAXCTRL), "-u", "admin", "-p", "mariadb",
                          "--hosts", f"{st.HOST}:{ADMIN}", "show", "threads"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("stats.accepts") == len(t0), out.stdout


OFF_ADMIN, OFF_PRIMARY, OFF_REPLICA, OFF_RW = (
    st.port(5300), st.port(5301), st.port(5302), st.port(5303))


def test_switches_off_leave_kinds_to_classifying_routers(tmp_path_factory,
                                                         table):
    """query_digests=false latency_histograms=false: readconnroute's
    service has no sluice_service_queries_total samples at all (nobody
    counts them, so no zeros pretend otherwise), readwritesplit still
    counts the mix exactly, no histogram moves and the digest table
    answers 409."""
    prx = start(tmp_path_factory, "metrics-off",
                (OFF_PRIMARY, OFF_REPLICA, OFF_RW, OFF_ADMIN),
                extra="query_digests=false\nlatency_histograms=false")
    try:
        with st.connect(OFF_RW) as c, c.cursor() as cur:
            cur.execute("SELECT 1")
            m0 = parse(scrape(port=OFF_ADMIN))
            kind_mix(cur)
            m1 = parse(scrape(port=OFF_ADMIN))
        assert kind_deltas("RW-Service", m0, m1) == KIND_MIX
        with st.connect(OFF_PRIMARY) as c, c.cursor() as cur:
            kind_mix(cur)
        m2 = parse(scrape(port=OFF_ADMIN))
        assert not [k for k in m2 if k[0] == "sluice_service_queries_total"
                    and ("service", "Primary-Service") in k[1]]
        assert val(m2, "sluice_service_response_seconds_count",
                   service="Primary-Service") == 0
        status, _, _ = request("GET", "/v1/sluice/queries", port=OFF_ADMIN)
        assert status == 409
    finally:
        problems = px.stop_proxy(prx)
    assert not problems, problems


PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,"
                     "application/openmetrics-text;version=0.0.1;q=0.75,"
                     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def scrape_accept(accept, port=ADMIN):
    req = urllib.request.Request(f"http://{st.HOST}:{port}/metrics")
    tok = base64.b64encode(b"admin:mariadb").decode()
    req.add_header("Authorization", "Basic " + tok)
    if accept is not None:
        req.add_header("Accept", accept)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers["Content-Type"], resp.read().decode()


def test_openmetrics_by_content_negotiation(sluice):
    """Prometheus' own Accept header gets OpenMetrics 1.0 (its content
    type, # EOF, counter families without _total and their samples with
    it), which the prometheus_client OpenMetrics parser accepts; no
    Accept, text/plain or a lower q for OpenMetrics get the 0.0.4 text."""
    from prometheus_client.openmetrics.parser import \
        text_string_to_metric_families

    with st.connect(RW) as c, c.cursor() as cur:
        cur.execute("SELECT 1")
    ctype, text = scrape_accept(PROMETHEUS_ACCEPT)
    assert ctype.startswith("application/openmetrics-text; version=1.0.0"), \
        ctype
    assert text.endswith("\n# EOF\n")
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    routed = fams["sluice_server_routed"]
    assert routed.type == "counter"
    assert {s.name for s in routed.samples} == {"sluice_server_routed_total"}
    assert fams["sluice_service_auth_failures"].type == "counter"
    assert fams["sluice_server_response_seconds"].type == "histogram"
    assert fams["sluice_server_connections"].type == "gauge"
    # Its counter twin keeps its series name (it would clash otherwise).
    assert fams["sluice_server_connections_total"].type == "unknown"
    # The same series as the text format, value for value (counters only
    # move forward between the two scrapes, gauges are left out).
    for accept in (None, "text/plain", "application/openmetrics-text;q=0.2,"
                   "text/plain;q=0.9"):
        ctype, plain = scrape_accept(accept)
        assert ctype.startswith("text/plain; version=0.0.4"), (accept, ctype)
        assert "# EOF" not in plain
    om_names = {s.name for f in fams.values() for s in f.samples}
    text_names = {n for (n, _) in parse(plain)}
    assert om_names == text_names


MON_ADMIN, DEAD = st.port(5200), st.port(5219)


def mon_config(run_dir):
    servers = ",".join(f"db{sid}" for sid in st.SERVERS)
    text = px.global_section(run_dir, MON_ADMIN, threads=1)
    text += px.server_sections(more=[("dbx", DEAD)])
    text += px.mariadbmon_section(servers, "300ms", "switchover_timeout=20s")
    text += f"""
[Dead-Monitor]
type=monitor
module=mariadbmon
servers=dbx
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
monitor_interval=300ms
"""
    return text


def mon_rest(method, path):
    req = urllib.request.Request(f"http://{st.HOST}:{MON_ADMIN}/v1/{path}",
                                 data=b"" if method != "GET" else None,
                                 method=method)
    tok = base64.b64encode(b"admin:mariadb").decode()
    req.add_header("Authorization", "Basic " + tok)
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def primary_is(name):
    status, body = mon_rest("GET", "servers")
    assert status == 200, body
    states = {s["id"]: s["attributes"]["state"]
              for s in json.loads(body)["data"]}
    return all(("Master" in st_) == (sid == name)
               for sid, st_ in states.items() if sid != "dbx")


@pytest.fixture(scope="module")
def mon_sluice(tmp_path_factory, table):
    run_dir = tmp_path_factory.mktemp("metrics-monitor")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(mon_config(run_dir))
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                    st.sluice_env())
    try:
        daemon.wait_ports([MON_ADMIN])
        st.wait_until(lambda: primary_is(f"db{st.PRIMARY_ID}"), 20,
                      what="db1 primary")
        yield daemon
    finally:
        try:
            if not primary_is(f"db{st.PRIMARY_ID}"):
                mon_rest("POST", "maxscale/modules/mariadbmon/switchover?"
                         f"Cluster-Monitor&db{st.PRIMARY_ID}")
                st.wait_until(lambda: primary_is(f"db{st.PRIMARY_ID}"), 60,
                              what="db1 primary again")
        finally:
            problems = daemon.stop()
            assert not problems, problems


def test_monitor_operations_and_errors_counted(mon_sluice):
    """A switchover to db2 and one back count two ok switchovers, one
    refused (the primary as its own target) one error, and nothing for
    failover or rejoin; a monitor whose server nobody listens on counts
    a loop error per tick, the healthy one none."""
    text = urllib.request.urlopen(urllib.request.Request(
        f"http://{st.HOST}:{MON_ADMIN}/metrics", headers={
            "Authorization": "Basic " + base64.b64encode(
                b"admin:mariadb").decode()}), timeout=10).read().decode()
    m0 = parse(text)
    primary, other = f"db{st.PRIMARY_ID}", "db2"
    status, body = mon_rest("POST", "maxscale/modules/mariadbmon/switchover?"
                            f"Cluster-Monitor&{primary}")
    assert status == 400, body
    for target in (other, primary):
        status, body = mon_rest("POST", "maxscale/modules/mariadbmon/"
                                f"switchover?Cluster-Monitor&{target}")
        assert status in (200, 204), body
        st.wait_until(lambda: primary_is(target), 60,
                      what=f"{target} primary")
    with st.connect(st.SERVERS[st.PRIMARY_ID], user=st.APP_USER) as c:
        assert st.server_id(c) == st.PRIMARY_ID
    time.sleep(1.0)
    text = urllib.request.urlopen(urllib.request.Request(
        f"http://{st.HOST}:{MON_ADMIN}/metrics", headers={
            "Authorization": "Basic " + base64.b64encode(
                b"admin:mariadb").decode()}), timeout=10).read().decode()
    m1 = parse(text)

    def delta(name, **labels):
        return val(m1, name, **labels) - val(m0, name, **labels)

    ops = "sluice_monitor_operations_total"
    mon = "Cluster-Monitor"
    assert delta(ops, monitor=mon, operation="switchover", result="ok") == 2
    assert delta(ops, monitor=mon, operation="switchover",
                 result="error") == 1
    for op in ("failover", "rejoin"):
        for result in ("ok", "error"):
            assert delta(ops, monitor=mon, operation=op,
                         result=result) == 0, (op, result)
    assert delta("sluice_monitor_errors_total", monitor=mon) == 0
    dead_ticks = delta("sluice_monitor_ticks_total", monitor="Dead-Monitor")
    dead_errors = delta("sluice_monitor_errors_total",
                        monitor="Dead-Monitor")
    assert dead_ticks >= 2 and dead_errors >= dead_ticks - 1, \
        (dead_ticks, dead_errors)
