# SPDX-License-Identifier: Apache-2.0
"""A server's extra_port (MaxScale's): the monitor (and user account
loading) connects to the server's extra port first, so it keeps watching a
server whose max_connections is used up, while a server without
extra_port is seen Down. The sandbox starts every mariadbd with
--extra-port=PORT+100 and --extra-max-connections=10 (scripts/sandbox).

db2 has extra_port, db3 not; both are monitored as an account without
CONNECTION ADMIN (monitoruser), which max_connections limits (the sandbox's
monitor account, like root, may always connect). With db2 and db3 full
(max_connections=10, its least value, and 11 root connections: the one
connection MariaDB keeps for SUPER is taken too) and the monitor's
connections killed, the monitor gets back
into db2 through its extra port (its new connection is in db2's
PROCESSLIST) and db2 stays a running replica; db3 is Down until its
connection limit is raised again. Then an extra_port where nothing
listens: the monitor falls back to the normal port."""

import socket

import pymysql
import pytest

import sluicetest as st
from proxy import MonitoredSluice, admin_rest, global_section, \
    mariadbmon_section, readconnroute_services

pytestmark = pytest.mark.sluice_only

PRIMARY_PORT = st.port(5672)
REPLICA_PORT = st.port(5673)
ADMIN_PORT = st.port(5674)
EXTRA = {sid: port + 100 for sid, port in st.SERVERS.items()}
MON_USER, MON_PW = "sl_mon_limited", "mon-limited-pw"


def sections(extra_ports):
    text = ""
    for sid, port in st.SERVERS.items():
        text += f"\n[db{sid}]\ntype=server\naddress={st.HOST}\nport={port}\n"
        if sid in extra_ports:
            text += f"extra_port={extra_ports[sid]}\n"
        if sid != 1:
            text += f"monitoruser={MON_USER}\nmonitorpw={MON_PW}\n"
    return text


@pytest.fixture()
def sl(tmp_path, request):
    with st.root(1) as c, c.cursor() as cur:
        cur.execute(f"CREATE OR REPLACE USER '{MON_USER}'@'%' IDENTIFIED BY "
                    f"'{MON_PW}'")
        cur.execute(f"GRANT SLAVE MONITOR, BINLOG MONITOR, PROCESS, "
                    f"READ_ONLY ADMIN ON *.* TO '{MON_USER}'@'%'")
    st.wait_replicated()
    text = global_section(tmp_path, ADMIN_PORT) + sections(request.param)
    text += mariadbmon_section("db1,db2,db3", "200ms", "")
    text += readconnroute_services("db1,db2,db3", PRIMARY_PORT, REPLICA_PORT)
    s = MonitoredSluice(tmp_path, text, [PRIMARY_PORT, REPLICA_PORT,
                                         ADMIN_PORT], ADMIN_PORT)
    try:
        yield s
    finally:
        problems = s.daemon.stop()
        with st.root(1) as c, c.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{MON_USER}'@'%'")
    assert not problems, "\n".join(problems)


def state(name):
    status, doc = admin_rest(ADMIN_PORT, "GET", f"servers/{name}")
    assert status == 200, doc
    return doc["data"]["attributes"]["state"]


def monitor_conns(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST "
                    "WHERE USER = %s", (MON_USER,))
        return [r[0] for r in cur.fetchall()]


def fill(sid, held):
    """Open root connections to server sid until it refuses with 1040."""
    for _ in range(30):
        try:
            held.append(st.root(sid))
        except pymysql.MySQLError as exc:
            assert st.error_code(exc) == 1040, exc
            return
    pytest.fail(f"db{sid} still takes connections")


def test_sandbox_has_extra_ports():
    for sid, port in EXTRA.items():
        try:
            socket.create_connection((st.HOST, port), timeout=5).close()
        except OSError as exc:
            pytest.fail(f"db{sid}'s extra port {port} does not answer "
                        f"({exc}): a sandbox started before scripts/sandbox "
                        "set --extra-port; restart it (scripts/sandbox stop "
                        "&& scripts/sandbox start)")


@pytest.mark.parametrize("sl", [{2: EXTRA[2]}], indirect=True)
def test_monitor_reaches_a_full_server_through_extra_port(sl):
    for name in ("db2", "db3"):
        st.wait_until(lambda: state(name) == "Slave, Running", 15,
                      what=f"{name} a running replica")
    r2, r3 = st.root(2), st.root(3)
    held = []
    try:
        for r in (r2, r3):
            with r.cursor() as cur:
                cur.execute("SET GLOBAL max_connections = 10")
        for r, sid in ((r2, 2), (r3, 3)):
            fill(sid, held)
            for cid in monitor_conns(r):
                with r.cursor() as cur:
                    cur.execute(f"KILL CONNECTION {cid}")
            fill(sid, held)   # the monitor's slot too
        st.wait_until(lambda: "Down" in state("db3"), 15,
                      what="db3 Down: its normal port refuses (1040)")
        assert state("db2") == "Slave, Running"
        assert monitor_conns(r2), "no monitor connection on db2"
        assert not monitor_conns(r3)
    finally:
        for r in (r2, r3):
            with r.cursor() as cur:
                cur.execute("SET GLOBAL max_connections = 1000")
        for r in [r2, r3] + held:
            r.close()
    st.wait_until(lambda: state("db3") == "Slave, Running", 15,
                  what="db3 back once it takes connections again")
    log = sl.log()
    assert "Too many connections" in log or "1040" in log, log[-2000:]


@pytest.mark.parametrize("sl", [{2: st.port(5675)}], indirect=True)
def test_extra_port_not_listening_falls_back(sl):
    """Nothing listens on db2's extra_port (a free test port): the monitor
    and the user account loading use the normal port."""
    st.wait_until(lambda: state("db2") == "Slave, Running", 15,
                  what="db2 a running replica through its normal port")
    with st.connect(REPLICA_PORT) as conn:
        assert st.server_id(conn) in st.REPLICA_IDS
