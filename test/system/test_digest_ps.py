# SPDX-License-Identifier: Apache-2.0
"""Query digests of prepared statements (issue 22): the binary protocol's
COM_STMT_PREPARE is canonicalised once and each COM_STMT_EXECUTE is
counted in that digest (count, errors, rows sent, latency samples, the
service's statements by kind), through readconnroute (the server's ids
passed through) and readwritesplit (its own ids, mapped per backend).
The packets are built by hand over PyMySQL's connection, as in
test_rwsplit.py, so ids, closes and resets are exactly what the test says.

Ports st.port(5340..5343): 5340 admin, 5341 Primary-Service
(readconnroute, master, kernel_forwarding=off: digests are a user-space
feature), 5342 Replica-Service, 5343 RW-Service (readwritesplit)."""

import base64
import json
import struct
import urllib.error
import urllib.request

import pymysql
import pytest

import proxy as px
import sluicetest as st

pytestmark = pytest.mark.sluice_only

ADMIN, PRIMARY, REPLICA, RW = (st.port(5340), st.port(5341), st.port(5342),
                               st.port(5343))
SERVICES = {PRIMARY: "Primary-Service", RW: "RW-Service"}
TABLE = "test.dps_t"
INS = "test.dps_ins"
SELECT = f"SELECT v FROM {TABLE} WHERE id = ?"
DEPRECATE_EOF = 1 << 24


def config(run_dir):
    text = px.sluice_config(run_dir, PRIMARY, REPLICA)
    # digests are counted in user space: keep readconnroute there
    text = text.replace("router_options=master\n",
                        "router_options=master\nkernel_forwarding=off\n")
    text += px.rw_service("RW-Service", RW)
    return text.replace("admin_enabled=false",
                        f"admin_host={st.HOST}\nadmin_port={ADMIN}")


@pytest.fixture(scope="module")
def sluice(tmp_path_factory):
    with st.root(st.PRIMARY_ID) as p, p.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS test")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} "
                    "(id INT PRIMARY KEY, v INT)")
        cur.execute(f"REPLACE INTO {TABLE} VALUES "
                    + ",".join(f"({i}, {i * 10})" for i in range(1, 11)))
        cur.execute(f"CREATE TABLE IF NOT EXISTS {INS} "
                    "(id INT PRIMARY KEY, v INT)")
    st.wait_replicated()
    run_dir = tmp_path_factory.mktemp("digest_ps")
    prx = px.start_with_admin(run_dir, config(run_dir), PRIMARY, REPLICA,
                              ADMIN)
    yield prx
    problems = px.stop_proxy(prx)
    if problems:
        pytest.fail("proxy shutdown: " + "\n".join(problems), pytrace=False)


def request(method, path):
    req = urllib.request.Request(f"http://{st.HOST}:{ADMIN}{path}",
                                 method=method)
    tok = base64.b64encode(b"admin:mariadb").decode()
    req.add_header("Authorization", "Basic " + tok)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def reset():
    status, body = request("DELETE", "/v1/sluice/queries")
    assert status == 204, body


def digests(service):
    """({digest_text: attributes} of service's rows, meta)."""
    status, body = request("GET", f"/v1/sluice/queries?service={service}")
    assert status == 200, body
    doc = json.loads(body)
    return ({d["attributes"]["digest_text"]: d["attributes"]
             for d in doc["data"]}, doc["meta"])


def kind_count(service, kind):
    status, body = request("GET", "/metrics")
    assert status == 200, body
    want = (f'sluice_service_queries_total{{service="{service}",'
            f'kind="{kind}"}} ')
    for line in body.decode().splitlines():
        if line.startswith(want):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# ---- the binary protocol by hand ----

def prepare(conn, sql):
    """COM_STMT_PREPARE: the statement id."""
    conn._execute_command(0x16, sql.encode())
    data = conn._read_packet().get_all_data()
    assert data[0] == 0, data
    stmt_id, ncols, nparams = struct.unpack("<IHH", data[1:9])
    for n in (nparams, ncols):
        for _ in range(n):
            conn._read_packet()
        if n and not conn.client_flag & DEPRECATE_EOF:
            conn._read_packet()
    return stmt_id


def execute(conn, stmt_id, *params):
    """COM_STMT_EXECUTE with BIGINT parameters: the number of rows of its
    result set (an OK: -1). An ERR raises pymysql's error."""
    body = struct.pack("<IBI", stmt_id, 0, 1)
    if params:
        body += bytes((len(params) + 7) // 8) + b"\x01"
        body += b"".join(bytes([0x08, 0]) for _ in params)
        body += b"".join(struct.pack("<q", p) for p in params)
    conn._execute_command(0x17, body)
    first = conn._read_packet()          # raises on an ERR packet
    data = first.get_all_data()
    if data[0] == 0:
        return -1
    for _ in range(data[0]):
        conn._read_packet()
    if not conn.client_flag & DEPRECATE_EOF:
        conn._read_packet()
    rows = 0
    while True:
        data = conn._read_packet().get_all_data()
        if data[0] == 0xFE and len(data) < 0xFFFFFF:
            return rows
        rows += 1


def close(conn, stmt_id):
    """COM_STMT_CLOSE (no answer)."""
    conn._execute_command(0x19, struct.pack("<I", stmt_id))


def reset_connection(conn):
    conn._execute_command(0x1f, b"")
    assert conn._read_packet().get_all_data()[0] == 0


def error_of(fn, *args):
    with pytest.raises(pymysql.MySQLError) as exc:
        fn(*args)
    return exc.value.args[0]


def app(port):
    return st.connect(port, database="test")


# ---- the tests ----

@pytest.mark.parametrize("port", [PRIMARY, RW], ids=["readconnroute",
                                                      "readwritesplit"])
def test_executes_counted_in_one_digest(sluice, port):
    """7 executes of one prepared SELECT with 7 ids (5 of them exist) are
    one digest: count 7, 5 rows sent, no error, 7 timed samples; the
    PREPARE itself is not an execution. The service counts 7 reads. A
    text statement of the same shape joins the same digest (one text,
    as ProxySQL shows them)."""
    svc = SERVICES[port]
    reset()
    reads = kind_count(svc, "read")
    with app(port) as conn:
        sid = prepare(conn, SELECT)
        got = [execute(conn, sid, i) for i in (1, 2, 3, 4, 5, 50, 60)]
        assert got == [1, 1, 1, 1, 1, 0, 0]
        rows, meta = digests(svc)
        d = rows[SELECT]
        assert (d["count"], d["rows_sent"], d["errors"], d["samples"]) == \
            (7, 5, 0, 7), d
        assert d["user"] == st.APP_USER and d["database"] == "test"
        assert d["min_time"] > 0 and d["max_time"] >= d["min_time"]
        assert sum(d["histogram"]) == 7
        assert meta["untracked_executes"] == 0
        assert kind_count(svc, "read") - reads == 7
        # the same statement as text: the same digest
        with conn.cursor() as cur:
            cur.execute(f"SELECT v FROM {TABLE} WHERE id = 9")
        rows, _ = digests(svc)
        assert (rows[SELECT]["count"], rows[SELECT]["rows_sent"]) == (8, 6)
        assert [t for t in rows if "dps_t" in t] == [SELECT], rows.keys()


@pytest.mark.parametrize("port", [PRIMARY, RW], ids=["readconnroute",
                                                      "readwritesplit"])
def test_failed_execute_is_an_error(sluice, port):
    """A prepared INSERT executed three times, the second a duplicate key
    (1062): count 3, errors 1, and the service counts 3 writes."""
    svc = SERVICES[port]
    text = f"INSERT INTO {INS} (id, v) VALUES (?, ?)"
    with st.root(st.PRIMARY_ID) as p, p.cursor() as cur:
        cur.execute(f"DELETE FROM {INS}")
    reset()
    writes = kind_count(svc, "write")
    with app(port) as conn:
        sid = prepare(conn, text)
        assert execute(conn, sid, 1, 1) == -1
        assert error_of(execute, conn, sid, 1, 2) == 1062
        assert execute(conn, sid, 2, 2) == -1
    rows, _ = digests(svc)
    assert (rows[text]["count"], rows[text]["errors"],
            rows[text]["samples"]) == (3, 1, 3), rows[text]
    assert kind_count(svc, "write") - writes == 3


@pytest.mark.parametrize("port", [PRIMARY, RW], ids=["readconnroute",
                                                      "readwritesplit"])
def test_closed_and_reset_statements_are_forgotten(sluice, port):
    """An execute of a closed statement's id (the server answers 1243) is
    not counted in the closed statement's digest, nor after
    COM_RESET_CONNECTION; it is an untracked execute. A statement
    prepared afterwards is counted in its own digest."""
    svc = SERVICES[port]
    other = f"SELECT id FROM {TABLE} WHERE v = ?"
    third = f"SELECT id, v FROM {TABLE} WHERE id > ?"
    reset()
    with app(port) as conn:
        a = prepare(conn, SELECT)
        assert execute(conn, a, 1) == 1
        close(conn, a)
        b = prepare(conn, other)
        assert [execute(conn, b, v) for v in (10, 20, 30)] == [1, 1, 1]
        assert error_of(execute, conn, a, 1) == 1243
        reset_connection(conn)
        assert error_of(execute, conn, b, 10) == 1243
        c = prepare(conn, third)
        assert execute(conn, c, 8) == 2
    rows, meta = digests(svc)
    assert rows[SELECT]["count"] == 1, rows[SELECT]
    assert rows[other]["count"] == 3, rows[other]
    assert (rows[third]["count"], rows[third]["rows_sent"]) == (1, 2)
    assert meta["untracked_executes"] == 2, meta


def test_execute_of_the_last_prepared_statement(sluice):
    """MariaDB's statement id -1 (0xffffffff: the one prepared last, what
    Connector/C's mariadb_stmt_execute_direct sends) through readconnroute
    is counted in the last statement's digest."""
    first = f"SELECT v FROM {TABLE} WHERE id < ?"
    reset()
    with app(PRIMARY) as conn:
        prepare(conn, first)
        prepare(conn, SELECT)
        assert execute(conn, 0xFFFFFFFF, 3) == 1
        assert execute(conn, 0xFFFFFFFF, 4) == 1
    rows, _ = digests("Primary-Service")
    assert rows[SELECT]["count"] == 2
    assert first not in rows


def test_statements_per_session_bounded(sluice):
    """A session keeps at most 1024 prepared statements for digests
    (docs/metrics.md): the 1030th statement's executes are untracked, the
    first's still counted; Sluice stays up and answers."""
    reset()
    with app(PRIMARY) as conn:
        ids = [prepare(conn, f"SELECT {i} + ? FROM DUAL") for i in range(1030)]
        assert execute(conn, ids[0], 1) == 1
        assert execute(conn, ids[-1], 1) == 1
    rows, meta = digests("Primary-Service")
    assert rows["SELECT ? + ? FROM DUAL"]["count"] == 1
    assert meta["untracked_executes"] == 1
