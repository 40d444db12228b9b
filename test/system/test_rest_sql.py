# SPDX-License-Identifier: Apache-2.0
"""The REST API's SQL resource, /v1/sql (MaxScale's): connections opened
with database credentials to each sandbox server by name and to a
readwritesplit service, checked by `@@server_id`, by rows written through
it and read back with a normal client, by the server's own error codes
and by the server's PROCESSLIST; the connection token that every call
needs, the admin-only rule, the bounds (rows, connections, body, query
timeout) and the token's max-age."""

import base64
import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

import sluicetest as st
from proxy import MonitoredSluice, admin_rest, global_section, \
    mariadbmon_section, rw_service, server_sections

pytestmark = pytest.mark.sluice_only

RW_PORT = st.port(5770)
ADMIN_PORT = st.port(5771)
STOP_ADMIN_PORT = st.port(5772)
MAX_CONNS = 32          # SQL_MAX_CONNS in server/core/admin_sql.c
TABLE = "test.rest_sql_t"


@pytest.fixture(scope="module")
def sl(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("rest_sql")
    servers = "db1,db2,db3"
    text = global_section(run_dir, ADMIN_PORT) + server_sections((1, 2, 3))
    text += mariadbmon_section(servers, "300ms", "")
    text += rw_service("RW-Service", RW_PORT)
    s = MonitoredSluice(run_dir, text, [RW_PORT, ADMIN_PORT], ADMIN_PORT)
    try:
        yield s
    finally:
        problems = s.daemon.stop()
    assert not problems, "\n".join(problems)


def rest(method, path, body=None, user="admin", password="mariadb",
         raw=None, headers=None, timeout=60, port=ADMIN_PORT):
    """METHOD /v1/PATH: (status, JSON document or None, response headers)."""
    url = f"http://{st.HOST}:{port}/v1/{path}"
    data = raw if raw is not None else (
        json.dumps(body).encode() if body is not None else
        (b"" if method != "GET" else None))
    req = urllib.request.Request(url, data=data, method=method)
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    req.add_header("Authorization", "Basic " + auth)
    if data:
        req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None, \
                resp.headers
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text else None, exc.headers


def open_conn(target, user=st.APP_USER, password=st.APP_PASSWORD, **kw):
    body = {"user": user, "password": password, "target": target}
    body.update(kw)
    status, doc, _ = rest("POST", "sql", body)
    assert status == 201, doc
    return doc["data"]["id"], doc["meta"]["token"], doc


def query(cid, token, sql, max_rows=None, **kw):
    body = {"sql": sql}
    if max_rows is not None:
        body["max_rows"] = max_rows
    q = f"?token={urllib.parse.quote(token)}" if token is not None else ""
    return rest("POST", f"sql/{cid}/queries{q}", body, **kw)[:2]


def results(cid, token, sql, **kw):
    status, doc = query(cid, token, sql, **kw)
    assert status == 201, doc
    return doc["data"]["attributes"]["results"]


def close(cid, token):
    status, _, _ = rest("DELETE", f"sql/{cid}?token={token}")
    return status


def in_processlist(sid, thread_id):
    with st.root(sid) as c:
        return st.scalar(c, "SELECT COUNT(*) FROM information_schema."
                         "PROCESSLIST WHERE ID = %s", (thread_id,)) == 1


def detail(doc):
    return doc["errors"][0]["detail"]


def test_each_server_by_name(sl):
    for sid in st.SERVERS:
        cid, token, doc = open_conn(f"db{sid}", db="test")
        try:
            attrs = doc["data"]["attributes"]
            assert attrs["target"] == f"db{sid}" and attrs["sql"] is None
            assert doc["data"]["type"] == "sql"
            assert in_processlist(sid, attrs["thread_id"])
            [res] = results(cid, token, "SELECT @@server_id, DATABASE()")
            assert res["fields"] == ["@@server_id", "DATABASE()"]
            assert res["data"] == [[sid, "test"]] and res["complete"] is True
        finally:
            assert close(cid, token) == 204


def test_readwritesplit_service(sl):
    st.wait_until(lambda: all(
        "Slave" in admin_rest(ADMIN_PORT, "GET", f"servers/db{s}")[1]
        ["data"]["attributes"]["state"] for s in st.REPLICA_IDS), 15,
        what="the monitor to find the replicas")
    cid, token, _ = open_conn("RW-Service")
    try:
        # a read goes to a replica, a read in a transaction to the primary
        [res] = results(cid, token, "SELECT @@server_id")
        assert res["data"][0][0] in st.REPLICA_IDS
        out = results(cid, token, "BEGIN; SELECT @@server_id; COMMIT")
        assert out[1]["data"] == [[st.PRIMARY_ID]], out
        assert out[0] == out[2] == {"affected_rows": 0, "last_insert_id": 0,
                                    "warnings": 0}
    finally:
        assert close(cid, token) == 204
    # the listener by name reaches the same service
    cid, token, _ = open_conn("RW-Service-Listener")
    assert results(cid, token, "SELECT 1")[0]["data"] == [[1]]
    assert close(cid, token) == 204


def test_write_then_read_with_a_client(sl):
    cid, token, _ = open_conn("db1")
    try:
        out = results(cid, token,
                      f"DROP TABLE IF EXISTS {TABLE};"
                      f"CREATE TABLE {TABLE} (id INT AUTO_INCREMENT PRIMARY"
                      f" KEY, v VARCHAR(20), d DOUBLE, b VARBINARY(4));"
                      f"INSERT INTO {TABLE} (v, d, b) VALUES ('a', 1.5, "
                      f"0xff00), ('b', NULL, NULL), ('c', 2, 'x')")
        assert [r.get("affected_rows") for r in out] == [0, 0, 3], out
        assert out[2]["last_insert_id"] == 1 and out[2]["warnings"] == 0
        with st.root(1) as c:
            assert st.scalar(c, f"SELECT GROUP_CONCAT(v ORDER BY id) FROM "
                             f"{TABLE}") == "a,b,c"
        [res] = results(cid, token, f"SELECT id, v, d, b FROM {TABLE} "
                        f"ORDER BY id")
        assert res["data"] == [[1, "a", 1.5, "0xff00"], [2, "b", None, None],
                               [3, "c", 2.0, "x"]]
        st.wait_replicated()
        with st.root(2) as c:
            assert st.scalar(c, f"SELECT COUNT(*) FROM {TABLE}") == 3
    finally:
        results(cid, token, f"DROP TABLE IF EXISTS {TABLE}")
        assert close(cid, token) == 204


def test_sql_errors_are_the_servers(sl):
    cid, token, _ = open_conn("db1")
    try:
        [err] = results(cid, token, "SELECT * FROM test.no_such_table_x")
        assert err["errno"] == 1146 and err["sqlstate"] == "42S02"
        assert "no_such_table_x" in err["message"]
        out = results(cid, token, "SELECT 1; SELEC 2; SELECT 3")
        assert out[0]["data"] == [[1]]
        assert out[1]["errno"] == 1064 and out[1]["sqlstate"] == "42000"
        assert len(out) == 2          # the server stops at the error
        # the connection is still usable
        assert results(cid, token, "SELECT 4")[0]["data"] == [[4]]
    finally:
        assert close(cid, token) == 204


def test_wrong_password(sl):
    status, doc, _ = rest("POST", "sql", {"user": st.APP_USER,
                                          "password": "wrong",
                                          "target": "db1"})
    assert status == 403, doc
    assert doc["errors"][0]["meta"] == {"errno": 1045, "sqlstate": "28000"}
    assert "Access denied" in detail(doc)
    assert rest("GET", "sql")[1]["data"] == []


def test_hostile_input(sl):
    for raw in (b"{not json", b"[1,2]", b'"x"'):
        status, doc, _ = rest("POST", "sql", raw=raw)
        assert status == 400 and detail(doc), (raw, doc)
    for body in ({"user": "app", "password": "app_pw"},
                 {"user": 1, "password": "p", "target": "db1"},
                 {"user": "app", "password": "app_pw", "target": "db1",
                  "timeout": 0},
                 {"user": "app", "password": "app_pw", "target": "db1",
                  "timeout": "x"}):
        status, doc, _ = rest("POST", "sql", body)
        assert status == 400 and detail(doc), (body, doc)
    status, doc, _ = rest("POST", "sql", {"user": "app", "password": "app_pw",
                                          "target": "nosuch"})
    assert status == 400 and "nosuch" in detail(doc)
    status, doc, _ = rest("POST", "sql/nosuch-id/queries?token=x",
                          {"sql": "SELECT 1"})
    assert status == 404, doc
    cid, token, _ = open_conn("db2")
    try:
        # an SQL text past the body limit (1 MiB) is refused before it is
        # read, and the connection goes on
        with socket.create_connection((st.HOST, ADMIN_PORT), timeout=10) \
                as s:
            s.sendall(f"POST /v1/sql/{cid}/queries?token={token} HTTP/1.1"
                      f"\r\nHost: {st.HOST}:{ADMIN_PORT}\r\n"
                      "Authorization: Basic YWRtaW46bWFyaWFkYg==\r\n"
                      "Content-Type: application/json\r\n"
                      f"Content-Length: {2 * 1024 * 1024}\r\n\r\n"
                      '{"sql": "SELECT \''.encode() + b"x" * 1000)
            reply = s.recv(65536).decode(errors="replace")
        assert reply.startswith("HTTP/1.1 413"), reply
        for body in ({}, {"sql": ""}, {"sql": 5},
                     {"sql": "SELECT 1", "max_rows": -1},
                     {"sql": "SELECT 1", "max_rows": 10001}):
            status, doc, _ = rest("POST", f"sql/{cid}/queries?token={token}",
                                  body)
            assert status == 400 and detail(doc), (body, doc)
        assert results(cid, token, "SELECT 5")[0]["data"] == [[5]]
    finally:
        assert close(cid, token) == 204


def test_token_is_required(sl):
    status, _, _ = rest("POST", "users/inet", {"data": {
        "id": "other", "attributes": {"password": "o-pw",
                                      "account": "admin"}}})
    assert status == 204
    cid, token, _ = open_conn("db1")
    try:
        status, doc = query(cid, None, "SELECT 1")
        assert status == 400 and "missing" in detail(doc)
        status, doc = query(cid, "0" * 64, "SELECT 1")
        assert status == 400 and "invalid" in detail(doc)
        # another admin sees the connection but not its token, and cannot
        # use, reconnect or close it
        status, doc, _ = rest("GET", f"sql/{cid}", user="other",
                              password="o-pw")
        assert status == 200 and "meta" not in doc
        assert "token" not in json.dumps(doc)
        for method, path, body in (
                ("POST", f"sql/{cid}/queries", {"sql": "SELECT 1"}),
                ("POST", f"sql/{cid}/reconnect", None),
                ("DELETE", f"sql/{cid}", None)):
            status, doc, _ = rest(method, path, body, user="other",
                                  password="o-pw")
            assert status == 400, (method, path, doc)
        # the token, not the account, is the key
        status, doc = query(cid, token, "SELECT 7", user="other",
                            password="o-pw")
        assert status == 201 and \
            doc["data"]["attributes"]["results"][0]["data"] == [[7]]
    finally:
        assert close(cid, token) == 204
        assert rest("DELETE", "users/inet/other")[0] == 204


def test_basic_user_is_refused(sl):
    status, _, _ = rest("POST", "users/inet", {"data": {
        "id": "viewer", "attributes": {"password": "v-pw",
                                       "account": "basic"}}})
    assert status == 204
    cid, token, _ = open_conn("db1")
    try:
        for method, path, body in (
                ("POST", "sql", {"user": st.APP_USER,
                                 "password": st.APP_PASSWORD,
                                 "target": "db1"}),
                ("GET", "sql", None), ("GET", f"sql/{cid}", None),
                ("POST", f"sql/{cid}/queries?token={token}",
                 {"sql": "SELECT 1"}),
                ("DELETE", f"sql/{cid}?token={token}", None)):
            status, doc, _ = rest(method, path, body, user="viewer",
                                  password="v-pw")
            assert status == 403, (method, path, doc)
        assert len(rest("GET", "sql")[1]["data"]) == 1
    finally:
        assert close(cid, token) == 204
        assert rest("DELETE", "users/inet/viewer")[0] == 204


def test_delete_closes_the_connection(sl):
    cid, token, doc = open_conn("db3")
    tid = doc["data"]["attributes"]["thread_id"]
    assert in_processlist(3, tid)
    status, listed, _ = rest("GET", "sql")
    assert [c["id"] for c in listed["data"]] == [cid]
    assert rest("GET", f"sql/{cid}")[1]["data"]["attributes"]["thread_id"] \
        == tid
    assert close(cid, token) == 204
    st.wait_until(lambda: not in_processlist(3, tid), 5,
                  what="the closed connection to leave db3's PROCESSLIST")
    assert rest("GET", f"sql/{cid}")[0] == 404
    assert close(cid, token) == 404


def test_row_and_connection_limits(sl):
    cid, token, _ = open_conn("db1", db="test")
    try:
        [res] = results(cid, token, "SELECT seq FROM seq_1_to_5000",
                        max_rows=10)
        assert res["data"] == [[i] for i in range(1, 11)]
        assert res["complete"] is False
        [res] = results(cid, token, "SELECT seq FROM seq_1_to_5000")
        assert len(res["data"]) == 1000 and res["complete"] is False
        [res] = results(cid, token, "SELECT seq FROM seq_1_to_20000",
                        max_rows=0)
        assert len(res["data"]) == 10000 and res["complete"] is False
        # the dropped rows were read: the connection goes on
        assert results(cid, token, "SELECT 8")[0]["data"] == [[8]]
    finally:
        assert close(cid, token) == 204
    opened = []
    try:
        for _ in range(MAX_CONNS):
            cid, token, _ = open_conn("db2")
            opened.append((cid, token))
        status, doc, _ = rest("POST", "sql", {"user": st.APP_USER,
                                              "password": st.APP_PASSWORD,
                                              "target": "db2"})
        assert status == 503 and "too many" in detail(doc)
        assert close(*opened.pop()) == 204
        opened.append(open_conn("db2")[:2])
    finally:
        for cid, token in opened:
            assert close(cid, token) == 204


def test_query_timeout_and_reconnect(sl):
    cid, token, doc = open_conn("db1", timeout=2)
    old = doc["data"]["attributes"]["thread_id"]
    try:
        t0 = time.monotonic()
        status, doc = query(cid, token, "SELECT SLEEP(6)")
        took = time.monotonic() - t0
        assert status == 503 and took < 5, (status, doc, took)
        assert doc["errors"][0]["meta"]["errno"] == 2013
        # the REST API answers again at once, the connection is lost
        assert rest("GET", "maxscale", timeout=5)[0] == 200
        status, doc = query(cid, token, "SELECT 1")
        assert status == 503 and "reconnect" in detail(doc)
        status, _, _ = rest("POST", f"sql/{cid}/reconnect?token={token}")
        assert status == 204
        new = rest("GET", f"sql/{cid}")[1]["data"]["attributes"]["thread_id"]
        assert new != old and in_processlist(1, new)
        assert results(cid, token, "SELECT 9")[0]["data"] == [[9]]
    finally:
        assert close(cid, token) == 204


def test_query_does_not_block_the_api(sl):
    cid, token, _ = open_conn("db1", timeout=20)
    out = {}

    def slow():
        out["reply"] = query(cid, token, "SELECT SLEEP(4) AS s")

    try:
        t = threading.Thread(target=slow)
        t0 = time.monotonic()
        t.start()
        st.wait_until(lambda: rest("GET", f"sql/{cid}")[1]["data"]
                      ["attributes"]["sql"] is not None, 3,
                      what="the query to start")
        # other requests are answered while the query runs
        for _ in range(3):
            t1 = time.monotonic()
            assert rest("GET", "maxscale", timeout=10)[0] == 200
            assert time.monotonic() - t1 < 1.0
        # all that before the 4 s query ended: nothing waited for it
        assert time.monotonic() - t0 < 3.5
        # the busy connection cannot be closed or queried twice meanwhile
        assert close(cid, token) == 503
        assert query(cid, token, "SELECT 1")[0] == 503
        t.join(30)
        status, doc = out["reply"]
        assert status == 201, doc
        assert doc["data"]["attributes"]["results"][0]["data"] == [[0]]
        assert doc["data"]["attributes"]["execution_time"] >= 3.9
    finally:
        assert close(cid, token) == 204


def test_query_longer_than_the_http_idle_timeout(sl):
    """The REST API closes HTTP connections idle for 10 s; a suspended one
    waiting for its query is not idle and gets its answer."""
    cid, token, _ = open_conn("db2", timeout=20)
    try:
        t0 = time.monotonic()
        [res] = results(cid, token, "SELECT SLEEP(11) AS s", timeout=30)
        assert res["data"] == [[0]] and time.monotonic() - t0 >= 10.9
    finally:
        assert close(cid, token) == 204


@pytest.mark.parametrize("target", ["db1", "RW-Service"])
def test_cancel(sl, target):
    cid, token, _ = open_conn(target, timeout=30)
    out = {}

    def slow():
        out["reply"] = query(cid, token, "SELECT SLEEP(20) AS s")

    try:
        # nothing running: nothing to cancel
        status, doc, _ = rest("POST", f"sql/{cid}/cancel?token={token}")
        assert status == 200 and doc["meta"]["canceled"] is False
        status, doc, _ = rest("POST", f"sql/{cid}/cancel")
        assert status == 400, doc
        t = threading.Thread(target=slow)
        t0 = time.monotonic()
        t.start()
        st.wait_until(lambda: rest("GET", f"sql/{cid}")[1]["data"]
                      ["attributes"]["sql"] is not None, 3,
                      what="the query to start")
        time.sleep(0.5)
        status, doc, _ = rest("POST", f"sql/{cid}/cancel?token={token}")
        assert status == 200 and doc["meta"]["canceled"] is True, doc
        t.join(30)
        assert time.monotonic() - t0 < 10
        status, doc = out["reply"]
        assert status == 201, doc
        [res] = doc["data"]["attributes"]["results"]
        # SLEEP cut short returns 1 (or the server says it was interrupted)
        assert res.get("data") == [[1]] or res.get("errno") == 1317, res
        assert results(cid, token, "SELECT 2")[0]["data"] == [[2]]
    finally:
        assert close(cid, token) == 204


def test_max_age_and_cookie(sl):
    status, doc, headers = rest("POST", "sql?persist=yes&max-age=2",
                                {"user": st.APP_USER,
                                 "password": st.APP_PASSWORD,
                                 "target": "db2"})
    assert status == 201 and "meta" not in doc, doc
    cid = doc["data"]["id"]
    tid = doc["data"]["attributes"]["thread_id"]
    assert headers["Location"].endswith(f"/v1/sql/{cid}/")
    cookie = headers["Set-Cookie"].split(";")[0]
    assert cookie.startswith(f"conn_id_sig_{cid}=")
    status, doc = query(cid, None, "SELECT 3",
                        headers={"Cookie": cookie})
    assert status == 201, doc
    # past its max-age the connection is closed on the server too
    st.wait_until(lambda: rest("GET", f"sql/{cid}")[0] == 404, 6,
                  what="the expired connection to be closed")
    st.wait_until(lambda: not in_processlist(2, tid), 5,
                  what="the expired connection to leave the PROCESSLIST")


def test_stop_while_a_query_runs(tmp_path):
    """SIGTERM while a query runs on its own thread: the query is cut short
    and answered before the REST API stops, and Sluice exits cleanly and
    at once (libmicrohttpd may not stop with a request suspended)."""
    text = global_section(tmp_path, STOP_ADMIN_PORT) + server_sections((1,))
    s = MonitoredSluice(tmp_path, text, [STOP_ADMIN_PORT], STOP_ADMIN_PORT)
    problems = ["not stopped"]
    try:
        status, doc, _ = rest("POST", "sql", {
            "user": st.APP_USER, "password": st.APP_PASSWORD,
            "target": "db1", "timeout": 60}, port=STOP_ADMIN_PORT)
        assert status == 201, doc
        cid, token = doc["data"]["id"], doc["meta"]["token"]
        tid = doc["data"]["attributes"]["thread_id"]
        out = {}

        def slow():
            try:
                out["reply"] = rest("POST", f"sql/{cid}/queries?token={token}",
                                    {"sql": "SELECT SLEEP(30)"},
                                    port=STOP_ADMIN_PORT, timeout=60)[:2]
            except OSError as exc:     # the connection closed, no answer
                out["reply"] = (None, repr(exc))

        t = threading.Thread(target=slow)
        t.start()

        def sleeping():
            with st.root(1) as c:
                return st.scalar(c, "SELECT COUNT(*) FROM information_schema."
                                 "PROCESSLIST WHERE ID = %s AND INFO LIKE "
                                 "'SELECT SLEEP%%'", (tid,)) == 1
        st.wait_until(sleeping, 5, what="the query to run on db1")
        t0 = time.monotonic()
        problems = s.daemon.stop()
        took = time.monotonic() - t0
        t.join(30)
        assert not t.is_alive()
        print(f"stopped in {took:.2f} s; the query's request got "
              f"{out['reply']}")
        assert took < 5, took
        status, doc = out["reply"]
        assert status in (503, None), out["reply"]
        if status == 503:
            assert doc["errors"][0]["meta"]["errno"] in (2013, 2006), doc
    finally:
        if problems == ["not stopped"]:
            problems = s.daemon.stop()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("value", ["0", "-5", "2x", ""])
def test_bad_max_age_refused(sl, value):
    """A max-age that is not a positive whole number is a 400 with a JSON
    error, not silently the default (MaxScale ignores it)."""
    status, doc, _headers = rest("POST", f"sql?max-age={value}",
                                 {"user": st.APP_USER,
                                  "password": st.APP_PASSWORD,
                                  "target": "db2"})
    assert status == 400, doc
    assert "max-age" in doc["errors"][0]["detail"]
