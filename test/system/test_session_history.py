# SPDX-License-Identifier: Apache-2.0
"""Session diagnostics (MaxScale's): retain_last_statements (the REST
session resource's `queries`), dump_last_statements (the statements logged
when a session closes, or only when it closes because of an error) and
session_trace (the session's last log lines, the resource's `log`).

Two Sluices over the sandbox (mariadbmon, 200 ms), readwritesplit:
A: retain_last_statements=3, dump_last_statements=on_close,
   session_trace=5; a second service overrides retain_last_statements=0.
B: retain_last_statements=3, dump_last_statements=on_error, no trace.
The servers named in `queries` are checked against @@server_id, the
dumps against the log; the error close is a KILL of the session's primary
connection from root."""

import re

import pymysql
import pytest

import sluicetest as st
from proxy import MonitoredSluice, admin_rest, global_section, run_sluice, \
    mariadbmon_section, rw_service, server_sections

pytestmark = pytest.mark.sluice_only

A_RW_PORT = st.port(5790)
A_OFF_PORT = st.port(5791)
A_ADMIN_PORT = st.port(5792)
B_RW_PORT = st.port(5793)
B_ADMIN_PORT = st.port(5794)
A_RCR_PORT = st.port(5795)

TABLE = "test.session_history"


def start(run_dir, admin_port, extra, services, ports):
    text = global_section(run_dir, admin_port, extra=extra)
    text += server_sections()
    text += mariadbmon_section("db1,db2,db3", "200ms", "")
    text += services
    s = MonitoredSluice(run_dir, text, ports + [admin_port], admin_port)
    st.wait_until(lambda: all(
        state(admin_port, f"db{sid}") == "Slave, Running"
        for sid in st.REPLICA_IDS), 15, what="both replicas running")
    return s


# readconnroute with kernel_forwarding=auto (its default): a session
# that keeps its statements stays in user space, where Sluice sees them
RCR_SERVICE = f"""
[RCR-Service]
type=service
router=readconnroute
router_options=slave
servers=db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[RCR-Listener]
type=listener
service=RCR-Service
protocol=MariaDBClient
address={st.HOST}
port={A_RCR_PORT}
"""


@pytest.fixture(scope="module")
def table():
    with st.root(st.PRIMARY_ID) as c, c.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        cur.execute(f"CREATE TABLE {TABLE} (id INT PRIMARY KEY)")
    st.wait_replicated()
    yield
    with st.root(st.PRIMARY_ID) as c, c.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")


@pytest.fixture(scope="module")
def sl_a(tmp_path_factory, table):
    s = start(tmp_path_factory.mktemp("history_a"), A_ADMIN_PORT,
              "retain_last_statements=3\ndump_last_statements=on_close\n"
              "session_trace=5",
              rw_service("Hist-Service", A_RW_PORT) +
              rw_service("Off-Service", A_OFF_PORT,
                         "retain_last_statements=0") + RCR_SERVICE,
              [A_RW_PORT, A_OFF_PORT, A_RCR_PORT])
    try:
        yield s
    finally:
        problems = s.daemon.stop()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def sl_b(tmp_path_factory, table):
    s = start(tmp_path_factory.mktemp("history_b"), B_ADMIN_PORT,
              "retain_last_statements=3\ndump_last_statements=on_error",
              rw_service("Hist-Service", B_RW_PORT), [B_RW_PORT])
    try:
        yield s
    finally:
        problems = s.daemon.stop()
    assert not problems, "\n".join(problems)


def state(admin_port, name):
    status, doc = admin_rest(admin_port, "GET", f"servers/{name}")
    assert status == 200, doc
    return doc["data"]["attributes"]["state"]


def only_session(admin_port, service):
    """The one session of `service`: its attributes."""
    status, doc = admin_rest(admin_port, "GET", "sessions")
    assert status == 200, doc
    mine = [s for s in doc["data"] if s["attributes"]["service"] == service]
    assert len(mine) == 1, doc
    status, one = admin_rest(admin_port, "GET", f"sessions/{mine[0]['id']}")
    assert status == 200, one
    return one["data"]["attributes"]


def run(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def five_statements(conn, base):
    """A read, a write, a read, a write, a read: the server ids of the
    last two reads (the statements 3 and 5)."""
    run(conn, "SELECT 1")
    run(conn, f"INSERT INTO {TABLE} VALUES ({base})")
    sid3 = int(run(conn, "SELECT @@server_id")[0][0])
    run(conn, f"INSERT INTO {TABLE} VALUES ({base + 1})")
    sid5 = int(run(conn, "SELECT @@server_id, 'five'")[0][0])
    return sid3, sid5


def dump_lines(log, session_id):
    return [line for line in log.splitlines()
            if f"[{session_id}] " in line and
            re.search(r"Statement \d+/\d+: |Last \d+ statements", line)]


def test_last_three_statements_with_their_servers(sl_a):
    with st.connect(A_RW_PORT) as conn:
        sid3, sid5 = five_statements(conn, 100)
        assert {sid3, sid5} <= st.REPLICA_IDS
        attrs = only_session(A_ADMIN_PORT, "Hist-Service")
        queries = attrs["queries"]
        assert [q["statement"] for q in queries] == [
            "SELECT @@server_id", f"INSERT INTO {TABLE} VALUES (101)",
            "SELECT @@server_id, 'five'"], queries
        assert all(q["command"] == "COM_QUERY" for q in queries)
        assert [[r["server"] for r in q["responses"]] for q in queries] == [
            [f"db{sid3}"], [f"db{st.PRIMARY_ID}"], [f"db{sid5}"]], queries
        for q in queries:
            assert q["completed"] is not None and \
                q["received"] <= q["completed"], q
            assert all(r["duration"] >= 0 for r in q["responses"]), q


def test_dump_on_close_logs_the_statements(sl_a):
    with st.connect(A_RW_PORT) as conn:
        five_statements(conn, 200)
        status, doc = admin_rest(A_ADMIN_PORT, "GET", "sessions")
        [session_id] = [s["id"] for s in doc["data"]
                        if s["attributes"]["service"] == "Hist-Service"]
        assert dump_lines(sl_a.log(), session_id) == []
    st.wait_until(lambda: len(dump_lines(sl_a.log(), session_id)) == 4, 10,
                  what="the statements dumped at close")
    lines = dump_lines(sl_a.log(), session_id)
    assert "notice" in lines[0] and "Last 3 statements" in lines[0], lines
    assert lines[1].endswith("Statement 1/3: SELECT @@server_id"), lines
    assert lines[2].endswith(
        f"Statement 2/3: INSERT INTO {TABLE} VALUES (201)"), lines
    assert lines[3].endswith("Statement 3/3: SELECT @@server_id, 'five'"), \
        lines


def test_defaults_show_empty_arrays(sl_a, sl_b):
    with st.connect(A_OFF_PORT) as conn:
        five_statements(conn, 300)
        attrs = only_session(A_ADMIN_PORT, "Off-Service")
        assert attrs["queries"] == [], attrs
    with st.connect(B_RW_PORT) as conn:
        run(conn, "SELECT 1")
        attrs = only_session(B_ADMIN_PORT, "Hist-Service")
        assert attrs["log"] == [], attrs   # session_trace=0
        assert [q["statement"] for q in attrs["queries"]] == ["SELECT 1"]


def app_connections(sid):
    with st.root(sid) as c, c.cursor() as cur:
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST "
                    "WHERE USER = %s", (st.APP_USER,))
        return [row[0] for row in cur.fetchall()]


def kill_app_connections(sid):
    """KILL every app connection on server sid; the ids of those killed.
    (One that ended between the list and its KILL -- an earlier test's
    connection closing -- is not counted: 1094, unknown thread id.)"""
    killed = []
    with st.root(sid) as c, c.cursor() as cur:
        for i in app_connections(sid):
            try:
                cur.execute(f"KILL {int(i)}")
            except pymysql.MySQLError as exc:
                if st.error_code(exc) != 1094:
                    raise
                continue
            killed.append(i)
    return killed


def test_session_trace_keeps_the_sessions_log_lines(sl_a):
    with st.connect(A_RW_PORT) as conn:
        replica = st.server_id(conn)
        assert replica in st.REPLICA_IDS
        assert kill_app_connections(replica), "no replica connection"
        # the replica connection's loss is logged on behalf of the session
        # (readwritesplit goes on without it)
        st.wait_until(lambda: any(
            f"server 'db{replica}'" in line for line in
            only_session(A_ADMIN_PORT, "Hist-Service")["log"]), 10,
            what="the replica loss in the session's trace")
        assert st.server_id(conn) in st.REPLICA_IDS   # the session lives
        log = only_session(A_ADMIN_PORT, "Hist-Service")["log"]
        assert 1 <= len(log) <= 5, log
        session_id = [s for s in admin_rest(A_ADMIN_PORT, "GET",
                                            "sessions")[1]["data"]
                      if s["attributes"]["service"] == "Hist-Service"][0]["id"]
        assert all(f"[{session_id}] " in line for line in log), log


def test_readconnroute_session_is_not_kernel_forwarded(sl_a):
    with st.connect(A_RCR_PORT) as conn:
        sid = st.server_id(conn)
        run(conn, "SELECT 2")
        run(conn, "SELECT 3")
        attrs = only_session(A_ADMIN_PORT, "RCR-Service")
        assert attrs["kernel_forwarding"] is None, attrs
        assert [(q["statement"], [r["server"] for r in q["responses"]])
                for q in attrs["queries"]] == [
            ("SELECT @@server_id", [f"db{sid}"]), ("SELECT 2", [f"db{sid}"]),
            ("SELECT 3", [f"db{sid}"])], attrs["queries"]


def session_id_of(admin_port, service):
    status, doc = admin_rest(admin_port, "GET", "sessions")
    assert status == 200, doc
    [sid] = [s["id"] for s in doc["data"]
             if s["attributes"]["service"] == service]
    return sid


def test_trace_holds_levels_the_log_leaves_out(sl_a):
    """log_info and log_debug are off: the session's info and debug lines
    are in its trace, not in the log; the trace keeps the last five."""
    with st.connect(A_RW_PORT) as conn:
        session_id = session_id_of(A_ADMIN_PORT, "Hist-Service")
        log = only_session(A_ADMIN_PORT, "Hist-Service")["log"]
        assert any(" info : [session] " in line and
                   line.endswith(": session started") for line in log), log
        assert f"[{session_id}] app@127.0.0.1: session started" \
            not in sl_a.log()
        for _ in range(2):
            before = only_session(A_ADMIN_PORT, "Hist-Service")["log"]
            kill_app_connections(st.server_id(conn))
            st.wait_until(lambda: any(
                "connection closed by peer" in line and line not in before
                for line in only_session(A_ADMIN_PORT, "Hist-Service")["log"]),
                10, what="the replica loss in the trace")
        log = only_session(A_ADMIN_PORT, "Hist-Service")["log"]
        assert len(log) == 5, log
        assert not any(line.endswith(": session started") for line in log)


def test_error_close_dumps_the_trace(sl_a):
    conn = st.connect(A_RW_PORT)
    try:
        session_id = session_id_of(A_ADMIN_PORT, "Hist-Service")
        run(conn, "START TRANSACTION")
        run(conn, f"INSERT INTO {TABLE} VALUES (600)")
        assert kill_app_connections(st.PRIMARY_ID), "no primary connection"
        st.wait_until(lambda: "Session trace (" in "".join(
            line for line in sl_a.log().splitlines()
            if f"[{session_id}] " in line), 10, what="the trace dumped")
    finally:
        st.close_quietly(conn)
    mine = [line for line in sl_a.log().splitlines()
            if f"[{session_id}] " in line]
    [head] = [line for line in mine if "Session trace (" in line]
    n = int(re.search(r"Session trace \((\d+) lines\)", head).group(1))
    assert 1 <= n <= 5, mine
    traces = [line for line in mine if re.search(r": Trace \d+/\d+: ", line)]
    assert len(traces) == n, mine
    assert "server 'db1': connection closed by peer" in traces[-1] or any(
        "server 'db1'" in line for line in traces), traces


def test_on_error_dumps_only_a_failed_session(sl_b):
    # a normal close: no dump
    with st.connect(B_RW_PORT) as conn:
        five_statements(conn, 400)
        status, doc = admin_rest(B_ADMIN_PORT, "GET", "sessions")
        [normal_id] = [s["id"] for s in doc["data"]]
    # a session whose primary connection is killed fails
    conn = st.connect(B_RW_PORT)
    try:
        five_statements(conn, 500)
        status, doc = admin_rest(B_ADMIN_PORT, "GET", "sessions")
        # (the first session's close may not be done yet)
        [failed_id] = [s["id"] for s in doc["data"] if s["id"] != normal_id]
        # inside a transaction (no transaction_replay) the primary's loss
        # ends the session
        run(conn, "START TRANSACTION")
        run(conn, f"INSERT INTO {TABLE} VALUES (502)")
        assert kill_app_connections(st.PRIMARY_ID), "no primary connection"
        with pytest.raises(pymysql.err.OperationalError):
            run(conn, f"INSERT INTO {TABLE} VALUES (503)")
    finally:
        st.close_quietly(conn)
    st.wait_until(lambda: len(dump_lines(sl_b.log(), failed_id)) >= 4, 10,
                  what="the statements dumped at the error close")
    lines = dump_lines(sl_b.log(), failed_id)
    assert "Last 3 statements" in lines[0], lines
    # the session ends when the primary's loss is seen, before 503
    assert lines[1].endswith("Statement 1/3: SELECT @@server_id, 'five'"), \
        lines
    assert lines[2].endswith("Statement 2/3: START TRANSACTION"), lines
    assert lines[3].endswith(
        f"Statement 3/3: INSERT INTO {TABLE} VALUES (502)"), lines
    assert dump_lines(sl_b.log(), normal_id) == [], sl_b.log()


@pytest.mark.parametrize("line, where, why", [
    ("retain_last_statements=10001", "maxscale", "expected 0-10000"),
    ("session_trace=10001", "maxscale", "expected 0-10000"),
    ("dump_last_statements=always", "maxscale",
     "expected one of .never., .on_close., .on_error."),
    ("retain_last_statements=-2", "service", "expected 0-10000"),
])
def test_bad_values_are_refused(tmp_path, line, where, why):
    text = global_section(tmp_path, A_ADMIN_PORT,
                          extra=line if where == "maxscale" else "")
    text += server_sections()
    text += rw_service("Hist-Service", A_RW_PORT,
                       line if where == "service" else "")
    cfg = tmp_path / "sluice.cnf"
    cfg.write_text(text)
    status, out = run_sluice("check", cfg)
    assert status != 0, out
    name = line.split("=")[0]
    lineno = text.splitlines().index(line) + 1
    assert re.search(rf"sluice\.cnf:{lineno}: .*'{name}'.*{why}", out), out
