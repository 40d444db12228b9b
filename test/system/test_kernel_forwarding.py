# SPDX-License-Identifier: Apache-2.0
"""Kernel forwarding of readconnroute sessions (issue 23): once a session
has started, its client and backend sockets sit in a BPF sockhash and the
kernel forwards the bytes (include/sluice/splice.h).

Every test runs twice, as the `mode` fixture says:
  kernel     Sluice as the tests run it (root: CAP_BPF, CAP_NET_ADMIN);
             sessions must be kernel-forwarded (REST kernel_forwarding
             .active) and Sluice's user-space read counters must not move
             while queries run, while the BPF byte counters do;
  fallback   the same daemon under SLUICE_DROP_CAPS=1 (scripts/sluice-exec:
             capsh drops cap_bpf and cap_net_admin); the log must say why
             there is no kernel forwarding, sessions run in user space.
In both: data (20 MiB values, LOAD DATA LOCAL, procedures' two result
sets, multi-statements, COM_CHANGE_USER) arrives intact, proven by
@@server_id and checksums; a client closing ends the session and its
backend connection; a backend killed ends the session; a switchover ends
the master-only session with error 1105 on its next command and keeps a
replica session: the same outcomes on both paths.

The switchover changes the sandbox primary; the module puts db1 back
(as test_mariadbmon.py does). kernel_forwarding=auto is the default
(test_kernel_forwarding_auto.py tests that and what a forwarded session
still leaves to Sluice); the services here set it explicitly anyway.
"""

import hashlib
import os
import time

import pymysql
import pytest
from pymysql.constants import CLIENT

import sluicetest as st
from proxy import admin_rest, Daemon, global_section, mariadbmon_section, \
    readconnroute_services, server_sections

PRIMARY_PORT = st.port(5070)
REPLICA_PORT = st.port(5071)
ADMIN_PORT = st.port(5072)
OFF_PORT = st.port(5073)
MIB = 1024 * 1024


def config(run_dir):
    servers = "db1,db2,db3"
    text = global_section(run_dir, ADMIN_PORT, extra="log_info=true")
    text += server_sections()
    text += mariadbmon_section(servers, params="""
backend_connect_timeout=2s
backend_read_timeout=3s
enforce_read_only_slaves=true
switchover_timeout=20s
""")
    text += f"""
[Off-Service]
type=service
router=readconnroute
router_options=master
kernel_forwarding=off
servers={servers}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[Off-Listener]
type=listener
service=Off-Service
protocol=MariaDBClient
address={st.HOST}
port={OFF_PORT}
"""
    # auto is the default (docs/modules.md); said here explicitly
    text += readconnroute_services(servers, PRIMARY_PORT, REPLICA_PORT) \
        .replace("router=readconnroute\n",
                 "router=readconnroute\nkernel_forwarding=auto\n")
    return text


def rest(method, path, timeout=60):
    return admin_rest(ADMIN_PORT, method, path, timeout=timeout)


def sessions(service):
    status, doc = rest("GET", "/sessions")
    assert status == 200, doc
    return [s["attributes"] for s in doc["data"]
            if s["attributes"]["service"] == service]


def only_session(service):
    mine = sessions(service)
    assert len(mine) == 1, mine
    return mine[0]


def primary_routes_to(sid):
    try:
        with st.connect(PRIMARY_PORT, connect_timeout=3,
                        read_timeout=5) as c:
            return st.server_id(c) == sid
    except pymysql.err.MySQLError:
        return False


@pytest.fixture(scope="module", params=["kernel", "fallback"])
def mode(request, tmp_path_factory):
    """(mode, daemon): Sluice started with or without the capabilities."""
    run_dir = tmp_path_factory.mktemp(f"kfwd-{request.param}")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(config(run_dir))
    env = st.sluice_env()
    env["SLUICE_DROP_CAPS"] = "1" if request.param == "fallback" else "0"
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log", env)
    try:
        daemon.wait_ports([PRIMARY_PORT, REPLICA_PORT, ADMIN_PORT, OFF_PORT])
        st.wait_until(lambda: primary_routes_to(1), 30,
                      what="the master service to reach db1")
        yield request.param, daemon
    finally:
        problems = daemon.stop()
        if not st.healthy_topology(1):
            st.sandbox_cmd("stop")
            st.sandbox_cmd("start", "--fresh", timeout=300)
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def schema():
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS test.kf_blobs, test.kf_loaded")
        cur.execute("CREATE TABLE test.kf_blobs (id INT PRIMARY KEY, "
                    "b LONGBLOB)")
        cur.execute("CREATE TABLE test.kf_loaded (id INT PRIMARY KEY, "
                    "name VARCHAR(64))")
        cur.execute("DROP PROCEDURE IF EXISTS test.kf_two_results")
        cur.execute("CREATE PROCEDURE test.kf_two_results() BEGIN "
                    "SELECT 1 AS a; SELECT 'x' AS b, 2 AS c; END")
        cur.execute(f"GRANT EXECUTE ON PROCEDURE test.kf_two_results TO "
                    f"'{st.APP_USER}'@'%'")
    st.wait_replicated()


def wait_no_sessions(service, timeout=10):
    st.wait_until(lambda: not sessions(service), timeout,
                  what=f"the sessions of {service} to close")


def test_log_says_whether_kernel_forwards(mode):
    name, daemon = mode
    log = daemon.log_path.read_text(errors="replace")
    if name == "kernel":
        assert "kernel forwarding available" in log
    else:
        assert ("kernel forwarding unavailable, sessions are forwarded in "
                "user space: the kernel refused the BPF program or its "
                "maps: Operation not permitted (needs CAP_BPF and "
                "CAP_NET_ADMIN)") in log
        assert "BPF: " in log   # libbpf's own account is kept
    status, doc = rest("GET", "/services/Primary-Service")
    assert status == 200
    kf = doc["data"]["attributes"]["router_diagnostics"]["kernel_forwarding"]
    assert kf["setting"] == "auto"
    assert kf["active"] == (name == "kernel")
    if name == "fallback":
        assert "Operation not permitted" in kf["unavailable_reason"]


def test_queries_bypass_user_space(mode):
    """Kernel: the session is forwarded, Sluice's read counters stand
    still while 200 queries run, the BPF counters move. Fallback: user
    space reads it all."""
    name, _ = mode
    wait_no_sessions("Primary-Service")
    with st.connect(PRIMARY_PORT) as conn:
        assert st.server_id(conn) == st.PRIMARY_ID
        before = only_session("Primary-Service")
        for i in range(200):
            assert st.scalar(conn, "SELECT %s + 1", (i,)) == i + 1
        after = only_session("Primary-Service")
    kf = after["kernel_forwarding"]
    if name == "kernel":
        assert kf["active"] is True
        assert after["bytes_read"] == before["bytes_read"]
        assert after["bytes_written"] == before["bytes_written"]
        moved = (kf["client_bytes"]
                 - before["kernel_forwarding"]["client_bytes"])
        # Exactly the 200 COM_QUERY packets: header, command byte, SQL.
        assert moved == sum(5 + len(f"SELECT {i} + 1") for i in range(200))
        assert kf["server_bytes"] > before["kernel_forwarding"]["server_bytes"]
        assert kf["client_packets"] >= 200
    else:
        assert kf is None
        assert after["bytes_read"] >= before["bytes_read"] + 200 * 17


def test_off_service_stays_in_user_space(mode):
    with st.connect(OFF_PORT) as conn:
        assert st.server_id(conn) == st.PRIMARY_ID
        s = only_session("Off-Service")
        assert s["kernel_forwarding"] is None
        before = s["bytes_read"]
        st.scalar(conn, "SELECT 1")
        assert only_session("Off-Service")["bytes_read"] > before


def test_20mib_value_and_replica(mode, schema):
    data = os.urandom(20 * MIB)
    digest = hashlib.sha256(data).hexdigest()
    with st.connect(PRIMARY_PORT) as conn, conn.cursor() as cur:
        assert st.server_id(conn) == st.PRIMARY_ID
        cur.execute("REPLACE INTO test.kf_blobs VALUES (1, %s)", (data,))
        cur.execute("SELECT b FROM test.kf_blobs WHERE id = 1")
        assert hashlib.sha256(cur.fetchone()[0]).hexdigest() == digest
        cur.execute("SELECT SHA2(b, 256) FROM test.kf_blobs WHERE id = 1")
        assert cur.fetchone()[0] == digest
    st.wait_replicated()
    with st.connect(REPLICA_PORT) as conn, conn.cursor() as cur:
        assert st.server_id(conn) in st.REPLICA_IDS
        cur.execute("SELECT b FROM test.kf_blobs WHERE id = 1")
        assert hashlib.sha256(cur.fetchone()[0]).hexdigest() == digest
        if mode[0] == "kernel":
            kf = only_session("Replica-Service")["kernel_forwarding"]
            assert kf["active"] and kf["server_bytes"] > 20 * MIB


def test_load_data_local_and_multi_results(mode, schema, tmp_path):
    path = tmp_path / "rows.tsv"
    path.write_text("".join(f"{i}\tname{i}\n" for i in range(1, 5001)))
    with st.connect(PRIMARY_PORT, local_infile=True,
                    client_flag=CLIENT.MULTI_STATEMENTS) as conn, \
            conn.cursor() as cur:
        cur.execute("DELETE FROM test.kf_loaded")
        cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE "
                    "test.kf_loaded")
        cur.execute("SELECT COUNT(*), SUM(id), MAX(name) FROM "
                    "test.kf_loaded")
        assert cur.fetchone() == (5000, 5000 * 5001 // 2, "name999")
        cur.execute("CALL test.kf_two_results()")
        assert cur.fetchall() == ((1,),)
        assert cur.nextset()
        assert cur.fetchall() == (("x", 2),)
        while cur.nextset():
            pass
        cur.execute("SELECT @@server_id; SELECT 'two'")
        assert cur.fetchall() == ((st.PRIMARY_ID,),)
        assert cur.nextset()
        assert cur.fetchall() == (("two",),)
        if mode[0] == "kernel":
            assert only_session("Primary-Service")[
                "kernel_forwarding"]["active"]


def test_change_user_goes_back_to_user_space(mode):
    """COM_CHANGE_USER needs the protocol module (the client's scramble
    is for Sluice's greeting): the BPF program leaves it to Sluice and the
    session continues in user space."""
    proc = st.c_client(PRIMARY_PORT, "change_user", st.APP_USER,
                       st.APP_PASSWORD, "test")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [f"{st.APP_USER}@%", "test"]
    if mode[0] == "kernel":
        log = mode[1].log_path.read_text(errors="replace")
        assert "kernel forwarding ended" in log


def test_client_close_ends_session_and_backend(mode):
    wait_no_sessions("Primary-Service")
    conn = st.connect(PRIMARY_PORT)
    tid = st.scalar(conn, "SELECT CONNECTION_ID()")
    assert st.server_id(conn) == st.PRIMARY_ID
    assert only_session("Primary-Service")["kernel_forwarding"] is not None \
        or mode[0] == "fallback"
    conn.close()
    wait_no_sessions("Primary-Service")

    def backend_gone():
        with st.root(1) as r:
            return st.scalar(r, "SELECT COUNT(*) FROM information_schema."
                             "PROCESSLIST WHERE ID = %s", (tid,)) == 0
    st.wait_until(backend_gone, 10, what="the backend connection to close")


def test_backend_killed_ends_session(mode):
    wait_no_sessions("Primary-Service")
    conn = st.connect(PRIMARY_PORT)
    tid = st.scalar(conn, "SELECT CONNECTION_ID()")
    with st.root(1) as r:
        r.cursor().execute(f"KILL CONNECTION {int(tid)}")
    wait_no_sessions("Primary-Service")
    with pytest.raises(pymysql.err.OperationalError) as exc:
        st.scalar(conn, "SELECT 1")
    # 1927: the server's "Connection was killed", which reaches the client
    # on both paths; 2013: lost connection.
    assert exc.value.args[0] in (1927, 2013), exc.value.args
    conn.close()


def test_switchover_ends_master_session_keeps_replica(mode):
    wait_no_sessions("Primary-Service")
    wait_no_sessions("Replica-Service")
    master = st.connect(PRIMARY_PORT)
    assert st.server_id(master) == 1
    # A replica session, and the switchover to the other replica: the
    # session's server stays a replica. (It used to insist on db3 and
    # switch to db2; under ASan in CI twenty sessions in a row went to
    # db2 twice, not yet explained.)
    replica = st.connect(REPLICA_PORT)
    stays = st.server_id(replica)
    assert stays in (2, 3), stays
    target = 5 - stays
    try:
        status, doc = rest("POST", "/maxscale/modules/mariadbmon/switchover"
                           f"?Cluster-Monitor&db{target}")
        assert status == 200, doc
        st.wait_until(lambda: primary_routes_to(target), 30,
                      what=f"the master service to reach db{target}")
        time.sleep(2.5)   # the monitor's status reached every worker
        with pytest.raises(pymysql.err.OperationalError) as exc:
            st.scalar(master, "SELECT @@server_id")
        assert exc.value.args[0] == 1105, exc.value.args
        assert "no longer the master" in exc.value.args[1]
        assert st.server_id(replica) == stays
        assert st.scalar(replica, "SELECT COUNT(*) FROM test.kf_loaded") \
            >= 0
    finally:
        master.close()
        replica.close()
        status, doc = rest("POST", "/maxscale/modules/mariadbmon/switchover"
                           "?Cluster-Monitor&db1")
        st.wait_until(
            lambda: st.healthy_topology(1) and primary_routes_to(1), 60,
            what="db1 primary again")
