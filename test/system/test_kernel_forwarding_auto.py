# SPDX-License-Identifier: Apache-2.0
"""kernel_forwarding=auto as the default (issue 23): what Sluice does per
command still happens for a kernel-forwarded readconnroute session.

The BPF program follows the client's packet boundaries and leaves to
Sluice what it must see -- KILL statements, COM_PROCESS_KILL, COM_QUIT,
COM_CHANGE_USER -- and counts and times the commands it forwards
(docs/modules.md, "Kernel forwarding"). Proven here through a service
that does not set kernel_forwarding (the default), with the session shown
as kernel-forwarded by the REST API (kernel_forwarding.active):

  - KILL QUERY <the Sluice id> of another session's SELECT SLEEP(30):
    1317 on the victim at once; KILL <id> ends the victim session;
    KILL QUERY of an unknown id: the server's 1094, as on a service with
    kernel_forwarding=off; COM_PROCESS_KILL likewise;
  - a client that sends COM_QUIT, or just closes, while SLEEP runs: the
    statement is gone from the server's processlist within 2 s
    (kill_on_client_close);
  - N statements move the server's routed writes and the service's and
    server's response-time histogram counts by exactly N;
  - /v1/sluice/queries says how many sessions were kernel-forwarded.

Every test runs twice, as in test_kernel_forwarding.py: "kernel" (root,
CAP_BPF and CAP_NET_ADMIN) and "fallback" (SLUICE_DROP_CAPS=1: user
space); the outcomes are the same. Ports st.port(5380..5383).
"""

import socket
import struct
import threading
import time
import uuid

import pymysql
import pytest

import sluicetest as st
from proxy import admin_rest, Daemon, global_section, mariadbmon_section, \
    server_sections

pytestmark = pytest.mark.sluice_only

AUTO_PORT = st.port(5380)
OFF_PORT = st.port(5381)
ADMIN_PORT = st.port(5382)
SERVICE = "Auto-Service"


def config(run_dir):
    servers = "db1,db2,db3"
    text = global_section(run_dir, ADMIN_PORT, extra="log_info=true")
    text += server_sections()
    text += mariadbmon_section(servers)
    for name, port, extra in ((SERVICE, AUTO_PORT, ""),
                              ("Off-Service", OFF_PORT,
                               "kernel_forwarding=off\n")):
        text += f"""
[{name}]
type=service
router=readconnroute
router_options=master
servers={servers}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
{extra}
[{name}-Listener]
type=listener
service={name}
protocol=MariaDBClient
address={st.HOST}
port={port}
"""
    return text


def rest(method, path):
    return admin_rest(ADMIN_PORT, method, path, timeout=60)


def routes_to_primary():
    try:
        with st.connect(AUTO_PORT, connect_timeout=3, read_timeout=5) as c:
            return st.server_id(c) == st.PRIMARY_ID
    except pymysql.err.MySQLError:
        return False


@pytest.fixture(scope="module", params=["kernel", "fallback"])
def mode(request, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp(f"kfwd-auto-{request.param}")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(config(run_dir))
    env = st.sluice_env()
    env["SLUICE_DROP_CAPS"] = "1" if request.param == "fallback" else "0"
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log", env)
    try:
        daemon.wait_ports([AUTO_PORT, OFF_PORT, ADMIN_PORT])
        st.wait_until(routes_to_primary, 30, what="the primary to be used")
        yield request.param
    finally:
        problems = daemon.stop()
    assert not problems, "\n".join(problems)


def session_ids():
    status, doc = rest("GET", "/sessions")
    assert status == 200, doc
    return {s["id"] for s in doc["data"]}


def connect(port=None):
    """st.connect to the Auto-Service (or port); conn.sid is its session's
    REST id (the one that appeared)."""
    before = session_ids()
    conn = st.connect(port or AUTO_PORT)
    new = session_ids() - before
    assert len(new) == 1, new
    conn.sid = new.pop()
    return conn


def session_of(conn):
    """The REST attributes of conn's session."""
    status, doc = rest("GET", f"/sessions/{conn.sid}")
    assert status == 200, doc
    return doc["data"]["attributes"]


def assert_forwarded(mode, conn):
    """Kernel: conn's session is kernel-forwarded now; fallback: never."""
    kf = session_of(conn)["kernel_forwarding"]
    if mode == "kernel":
        assert kf is not None and kf["active"] is True, kf
    else:
        assert kf is None, kf


def processlist(marker):
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM information_schema.processlist "
                    "WHERE info LIKE %s AND id <> CONNECTION_ID()",
                    (f"%{marker}%",))
        return [r[0] for r in cur.fetchall()]


def run_async(conn, sql):
    out = {}

    def body():
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                out["rows"] = cur.fetchall()
        except pymysql.MySQLError as exc:
            out["error"] = st.error_code(exc)
    th = threading.Thread(target=body, daemon=True)
    th.start()
    return th, out


def sleeping_victim(mode, seconds=30):
    """A forwarded session running SELECT SLEEP: (conn, thread, out,
    marker)."""
    marker = "kfa" + uuid.uuid4().hex[:8]
    victim = connect()
    assert st.server_id(victim) == st.PRIMARY_ID
    assert_forwarded(mode, victim)
    th, out = run_async(victim, f"SELECT /*{marker}*/ SLEEP({seconds})")
    st.wait_until(lambda: processlist(marker), 10, interval=0.05,
                  what="the SLEEP to run")
    return victim, th, out, marker


def test_default_is_auto(mode):
    status, doc = rest("GET", f"/services/{SERVICE}")
    assert status == 200, doc
    kf = doc["data"]["attributes"]["router_diagnostics"]["kernel_forwarding"]
    assert kf["setting"] == "auto"
    assert kf["active"] == (mode == "kernel")
    with connect() as conn:
        assert st.server_id(conn) == st.PRIMARY_ID
        assert_forwarded(mode, conn)


def test_kill_query_of_another_session(mode):
    victim, th, out, marker = sleeping_victim(mode)
    killer = connect()
    try:
        assert_forwarded(mode, killer)
        t0 = time.monotonic()
        with killer.cursor() as cur:
            cur.execute(f"  kill QUERY {victim.thread_id()}")
        th.join(5)
        assert out.get("error") == 1317, out
        assert time.monotonic() - t0 < 2
        assert processlist(marker) == []
        # Both sessions go on, on the same server.
        assert st.server_id(victim) == st.PRIMARY_ID
        assert st.scalar(killer, "SELECT 41 + 1") == 42
        if mode == "kernel":
            # the killer went back to user space, the victim did not
            assert session_of(killer)["kernel_forwarding"]["active"] is False
            assert session_of(victim)["kernel_forwarding"]["active"] is True
    finally:
        victim.close()
        killer.close()


def test_com_process_kill_of_another_session(mode):
    victim, th, out, marker = sleeping_victim(mode)
    killer = connect()
    try:
        assert_forwarded(mode, killer)
        killer._execute_command(0x0c, struct.pack("<I", victim.thread_id()))
        killer._read_ok_packet()
        th.join(5)
        # COM_PROCESS_KILL kills the connection: the victim's SLEEP ends
        # with the connection
        assert "error" in out, out
        st.wait_until(lambda: not processlist(marker), 2, interval=0.05,
                      what="the SLEEP to end")
        assert st.scalar(killer, "SELECT 1") == 1
    finally:
        victim.close()
        killer.close()


def test_kill_connection_ends_the_victim_session(mode):
    victim, th, out, marker = sleeping_victim(mode)
    killer = connect()
    try:
        assert_forwarded(mode, killer)
        vid = victim.thread_id()
        with killer.cursor() as cur:
            cur.execute(f"KILL {vid}")
        th.join(5)
        assert "error" in out, out
        st.wait_until(lambda: rest("GET", f"/sessions/{victim.sid}")[0]
                      == 404, 5,
                      what="the victim session to end")
        st.wait_until(lambda: not processlist(marker), 2, interval=0.05,
                      what="the SLEEP to end")
        with pytest.raises(pymysql.MySQLError):
            st.scalar(victim, "SELECT 1")
        assert st.scalar(killer, "SELECT 1") == 1
    finally:
        victim.close()
        killer.close()


def test_kill_of_unknown_id_is_the_servers_1094(mode):
    """As on the user-space path (kernel_forwarding=off): the server's own
    1094 and text, the session usable after."""
    messages = []
    for port in (AUTO_PORT, OFF_PORT):
        with connect(port) as conn:
            if port == AUTO_PORT:
                assert_forwarded(mode, conn)
            with pytest.raises(pymysql.MySQLError) as exc:
                with conn.cursor() as cur:
                    cur.execute("KILL QUERY 987654321")
            assert st.error_code(exc.value) == 1094
            messages.append(exc.value.args[1])
            assert st.server_id(conn) == st.PRIMARY_ID
    assert messages[0] == messages[1]
    assert "987654321" in messages[0]


@pytest.mark.parametrize("how", ["com_quit", "close"])
def test_client_leaving_kills_its_running_statement(mode, how):
    """kill_on_client_close: COM_QUIT sent behind SELECT SLEEP(30), or the
    socket just closed: the statement is gone within 2 s."""
    marker = "kfq" + uuid.uuid4().hex[:8]
    conn = connect()
    assert_forwarded(mode, conn)
    conn._execute_command(3, f"SELECT /*{marker}*/ SLEEP(30)")
    st.wait_until(lambda: processlist(marker), 10, interval=0.05,
                  what="the SLEEP to run")
    t0 = time.monotonic()
    if how == "com_quit":
        conn._write_bytes(b"\x01\x00\x00\x00\x01")
    # shutdown: PyMySQL's file object keeps the descriptor open
    conn._sock.shutdown(socket.SHUT_RDWR)
    conn._sock.close()
    st.wait_until(lambda: not processlist(marker), 2.5, interval=0.05,
                  what="the SLEEP to be killed")
    assert time.monotonic() - t0 < 2.5


def stats():
    status, srv = rest("GET", "/servers/db1")
    assert status == 200, srv
    status, svc = rest("GET", f"/services/{SERVICE}")
    assert status == 200, svc
    a = srv["data"]["attributes"]
    return (a["statistics"]["routed_writes"], a["response_time"]["count"],
            svc["data"]["attributes"]["response_time"]["count"])


def test_statement_counts_and_histograms_move_exactly(mode):
    """25 statements on a forwarded session: the server's routed writes
    and the server's and service's response-time counts move by exactly
    25 (folded from the BPF counters by the one-second sweep)."""
    n = 25
    with connect() as conn:
        assert st.server_id(conn) == st.PRIMARY_ID
        assert_forwarded(mode, conn)
        time.sleep(1.5)   # what came before is folded
        before = stats()
        for i in range(n):
            assert st.scalar(conn, "SELECT %s * 2", (i,)) == 2 * i
        want = tuple(b + n for b in before)
        st.wait_until(lambda: stats() == want, 5,
                      what=f"the counters to move by {n}")
        time.sleep(1.5)   # and no further
        assert stats() == want
        assert_forwarded(mode, conn)


def test_queries_meta_counts_forwarded_sessions(mode):
    with connect() as conn:
        st.scalar(conn, "SELECT 1")
        status, doc = rest("GET", "/sluice/queries")
        assert status == 200, doc
        kf = doc["meta"]["kernel_forwarded_sessions"]
        if mode == "kernel":
            assert kf["current"] >= 1 and kf["total"] >= kf["current"]
        else:
            assert kf == {"current": 0, "total": 0}
