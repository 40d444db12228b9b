# SPDX-License-Identifier: Apache-2.0
"""KILL, vanished clients and the protocol details clients notice
(issue 17), through readconnroute (router_options=master) and
readwritesplit, and in the shared event model:

  - KILL [QUERY|CONNECTION] n with n the thread id Sluice gave the client
    reaches that session's backend threads (1317 for the killed query,
    the session stays usable), refused with the server's own error for
    another user's session; a session killed inside LOCK TABLE +
    ALTER TABLE gets a proper error, never "malformed packet" (2027);
  - a client that vanishes while a statement runs (SIGKILL; COM_QUIT
    sent while the statement is pending) has its statement and backend
    thread gone from the server's processlist within 2 s;
  - COM_CHANGE_USER to an unknown user: 1045, connection kept;
  - extended metadata (a JSON column shows format=json) and
    `mariadb --local-infile=1` reading a script that runs LOAD DATA
    LOCAL.

Ports st.port(5040..5045)."""

import os
import signal
import struct
import subprocess
import threading
import time
import uuid

import pymysql
import pytest

import sluicetest as st
from proxy import running_proxy

pytestmark = pytest.mark.sluice_only

PRIMARY_PORT, REPLICA_PORT, RW_PORT = st.port(5040), st.port(5041), \
    st.port(5042)
SH_PRIMARY, SH_REPLICA, SH_RW = st.port(5043), st.port(5044), st.port(5045)
SERVERS = ",".join(f"db{sid}" for sid in st.SERVERS)
OTHER_USER, OTHER_PW = "kill_other", "kill_other_pw"


def rw_service(port):
    return f"""
[RW-Service]
type=service
router=readwritesplit
servers={SERVERS}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[RW-Listener]
type=listener
service=RW-Service
protocol=MariaDBClient
address={st.HOST}
port={port}
"""


@pytest.fixture(scope="module")
def setup():
    with st.root(st.PRIMARY_ID) as conn:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS test")
            cur.execute("DROP TABLE IF EXISTS test.kill_t")
            cur.execute("CREATE TABLE test.kill_t (id INT PRIMARY KEY, "
                        "v INT)")
            cur.execute("INSERT INTO test.kill_t VALUES (1, 1), (2, 2)")
            cur.execute("DROP TABLE IF EXISTS test.kill_json")
            cur.execute("CREATE TABLE test.kill_json (id INT, j JSON)")
            cur.execute("INSERT INTO test.kill_json VALUES "
                        "(1, '{\"a\": 1}')")
            cur.execute("DROP TABLE IF EXISTS test.kill_load")
            cur.execute("CREATE TABLE test.kill_load (id INT, txt "
                        "VARCHAR(20))")
            cur.execute(f"CREATE USER IF NOT EXISTS '{OTHER_USER}'@'%' "
                        f"IDENTIFIED BY '{OTHER_PW}'")
            cur.execute(f"GRANT SELECT ON test.* TO '{OTHER_USER}'@'%'")
    st.wait_replicated()


@pytest.fixture(scope="module")
def pinned(tmp_path_factory, setup):
    yield from running_proxy(tmp_path_factory, PRIMARY_PORT, REPLICA_PORT,
                             extra=rw_service(RW_PORT))


@pytest.fixture(scope="module")
def shared(tmp_path_factory, setup):
    yield from running_proxy(tmp_path_factory, SH_PRIMARY, SH_REPLICA,
                             event_model="shared", threads=2,
                             extra=rw_service(SH_RW))


def wait_routes(port):
    def ok():
        with st.connect(port, connect_timeout=5) as c:
            return st.server_id(c) in st.SERVERS
    st.wait_until(ok, 20, interval=0.3, what=f"port {port} to route")


@pytest.fixture(params=["readconnroute", "readwritesplit"])
def port(request, pinned):
    p = PRIMARY_PORT if request.param == "readconnroute" else RW_PORT
    wait_routes(p)
    return p


@pytest.fixture(params=["pinned-readconnroute", "pinned-readwritesplit",
                        "shared-readconnroute", "shared-readwritesplit"])
def any_port(request):
    model, router = request.param.split("-")
    request.getfixturevalue(model)
    ports = {("pinned", "readconnroute"): PRIMARY_PORT,
             ("pinned", "readwritesplit"): RW_PORT,
             ("shared", "readconnroute"): SH_PRIMARY,
             ("shared", "readwritesplit"): SH_RW}
    p = ports[(model, router)]
    wait_routes(p)
    return p


def processlist(marker):
    """(server_id, thread id, command, info) of every thread on any
    sandbox server whose statement contains marker."""
    found = []
    for sid in st.SERVERS:
        with st.root(sid) as conn:
            with conn.cursor() as cur:
                cur.execute("SELECT id, command, info FROM "
                            "information_schema.processlist "
                            "WHERE info LIKE %s AND id <> CONNECTION_ID()",
                            (f"%{marker}%",))
                found += [(sid, *row) for row in cur.fetchall()]
    return found


def thread_alive(sid, tid):
    with st.root(sid) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.processlist"
                        " WHERE id = %s", (tid,))
            return cur.fetchone()[0] > 0


def run_async(conn, sql):
    """Run sql on conn in a thread; returns (thread, result dict with
    'error' code or 'rows' and 'elapsed')."""
    out = {}

    def body():
        t0 = time.monotonic()
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                out["rows"] = cur.fetchall()
        except pymysql.MySQLError as exc:
            out["error"] = st.error_code(exc)
        out["elapsed"] = time.monotonic() - t0
    th = threading.Thread(target=body, daemon=True)
    th.start()
    return th, out


def wait_running(marker, timeout=10):
    found = []

    def running():
        found[:] = processlist(marker)
        return bool(found)
    st.wait_until(running, timeout, interval=0.05,
                  what=f"statement {marker} to run")
    return found


# ---- KILL ----

def test_kill_query_from_second_connection(any_port):
    """Ctrl-C in the mariadb CLI: KILL QUERY <the id Sluice gave the
    client> from a second connection ends SELECT SLEEP(30) with 1317 at
    once; the killed session stays usable (both event models)."""
    port = any_port
    marker = "kq" + uuid.uuid4().hex[:8]
    victim = st.connect(port, database="test")
    killer = st.connect(port)
    try:
        th, out = run_async(victim, f"SELECT /*{marker}*/ SLEEP(30)")
        wait_running(marker)
        t0 = time.monotonic()
        with killer.cursor() as cur:
            cur.execute(f"KILL QUERY {victim.thread_id()}")
        th.join(5)
        assert out.get("error") == 1317, out
        assert time.monotonic() - t0 < 2
        assert st.scalar(victim, "SELECT 41 + 1") == 42
        assert st.scalar(killer, "SELECT 1") == 1
        assert processlist(marker) == []
    finally:
        victim.close()
        killer.close()


def test_kill_query_id_of_unknown_thread(port):
    """A number that is neither a Sluice session nor a backend thread:
    the server's own 1094."""
    with st.connect(port) as conn:
        with pytest.raises(pymysql.MySQLError) as exc:
            with conn.cursor() as cur:
                cur.execute("KILL QUERY 987654321")
        assert st.error_code(exc.value) == 1094
        assert st.scalar(conn, "SELECT 1") == 1


def test_kill_other_users_session_refused(port):
    """app may not kill kill_other's session: the server's 1095, and the
    other session is untouched."""
    other = st.connect(port, user=OTHER_USER, password=OTHER_PW)
    killer = st.connect(port)
    try:
        assert st.scalar(other, "SELECT 1") == 1
        for sql in (f"KILL {other.thread_id()}",
                    f"KILL QUERY {other.thread_id()}"):
            with pytest.raises(pymysql.MySQLError) as exc:
                with killer.cursor() as cur:
                    cur.execute(sql)
            assert st.error_code(exc.value) == 1095, sql
            assert str(other.thread_id()) in str(exc.value)
        assert st.scalar(other, "SELECT 2") == 2
        assert st.scalar(killer, "SELECT 3") == 3
    finally:
        other.close()
        killer.close()


def test_kill_connection(any_port):
    """KILL CONNECTION of one's own other session: OK for the killer;
    the victim's running statement ends with the server's error (1927)
    or a clean close, never a malformed packet, and the victim's
    backend threads are gone (both event models)."""
    port = any_port
    marker = "kc" + uuid.uuid4().hex[:8]
    victim = st.connect(port, database="test")
    killer = st.connect(port)
    try:
        th, out = run_async(victim, f"SELECT /*{marker}*/ SLEEP(30)")
        (sid, tid, _cmd, _info), = wait_running(marker)
        with killer.cursor() as cur:
            cur.execute(f"KILL CONNECTION {victim.thread_id()}")
        th.join(5)
        assert out.get("error") in (1927, 2013), out
        st.wait_until(lambda: not thread_alive(sid, tid), 5,
                      what="the victim's backend thread to end")
        with pytest.raises(pymysql.MySQLError):
            st.scalar(victim, "SELECT 1")
        assert st.scalar(killer, "SELECT 1") == 1
    finally:
        victim.close()
        killer.close()


def test_kill_query_of_a_stale_read(pinned):
    """causal_reads=consistent (the default) with replicas that lag: a
    read runs on a replica whose GTID wait failed, and its answer would be
    replaced by the primary's. KILL QUERY of that read ends it with 1317
    at once; the killed statement is never run again on the primary
    (before the fix it was, and when the KILL had reached the primary
    first, SLEEP ran 30 s more there). The KILL goes to the session's
    servers in the order their logins completed, so the scenario runs
    6 times."""
    wait_routes(RW_PORT)
    for sid in st.REPLICA_IDS:
        with st.root(sid) as conn, conn.cursor() as cur:
            cur.execute("STOP SLAVE SQL_THREAD")
    try:
        for i in range(6):
            marker = "ks" + uuid.uuid4().hex[:8]
            with st.connect(RW_PORT) as writer, writer.cursor() as cur:
                cur.execute("UPDATE test.kill_t SET v = v + 1 WHERE id = 1")
            victim = st.connect(RW_PORT)
            killer = st.connect(RW_PORT)
            try:
                th, out = run_async(victim, f"SELECT /*{marker}*/ SLEEP(30)")
                (sid, _tid, _c, _i), = wait_running(marker)
                assert sid in st.REPLICA_IDS, "the read went to the primary"
                with killer.cursor() as cur:
                    cur.execute(f"KILL QUERY {victim.thread_id()}")
                th.join(5)
                assert out.get("error") == 1317, (i, out)
                time.sleep(0.2)
                assert processlist(marker) == [], (i, "the read runs again")
                assert st.scalar(victim, "SELECT 7") == 7
            finally:
                victim.close()
                killer.close()
    finally:
        for sid in st.REPLICA_IDS:
            with st.root(sid) as conn, conn.cursor() as cur:
                cur.execute("START SLAVE SQL_THREAD")
        st.wait_replicated()


def test_kill_backend_thread_id_passes_through(pinned):
    """A number that is no Sluice session goes to the server as it is: a
    thread id read from the server's processlist (readconnroute: the
    session's statement runs where the KILL goes) ends that statement."""
    port = PRIMARY_PORT
    wait_routes(port)
    marker = "kb" + uuid.uuid4().hex[:8]
    victim = st.connect(port)
    killer = st.connect(port)
    try:
        th, out = run_async(victim, f"SELECT /*{marker}*/ SLEEP(30)")
        (_sid, tid, _c, _i), = wait_running(marker)
        assert victim.thread_id() >= 1 << 30 > tid
        with killer.cursor() as cur:
            cur.execute(f"KILL QUERY {tid}")
        th.join(5)
        assert out.get("error") == 1317, out
        assert st.scalar(victim, "SELECT 6") == 6
    finally:
        victim.close()
        killer.close()


def test_kill_user(port):
    """KILL QUERY USER app_user ends the user's running statement
    (1317)."""
    marker = "ku" + uuid.uuid4().hex[:8]
    victim = st.connect(port, user=OTHER_USER, password=OTHER_PW)
    try:
        th, out = run_async(victim, f"SELECT /*{marker}*/ SLEEP(30)")
        wait_running(marker)
        with st.connect(port, user=OTHER_USER, password=OTHER_PW) as k:
            with k.cursor() as cur:
                cur.execute(f"KILL QUERY USER {OTHER_USER}")
        th.join(5)
        assert out.get("error") == 1317, out
        assert st.scalar(victim, "SELECT 5") == 5
    finally:
        victim.close()


def test_com_process_kill(port):
    """COM_PROCESS_KILL (0x0c, what old clients' mysql_kill sends) with
    the Sluice thread id kills that session."""
    marker = "pk" + uuid.uuid4().hex[:8]
    victim = st.connect(port, database="test")
    killer = st.connect(port)
    try:
        th, out = run_async(victim, f"SELECT /*{marker}*/ SLEEP(30)")
        wait_running(marker)
        killer._execute_command(0x0c, struct.pack("<I", victim.thread_id()))
        killer._read_ok_packet()
        th.join(5)
        assert out.get("error") in (1927, 2013), out
        assert st.scalar(killer, "SELECT 1") == 1
    finally:
        victim.close()
        killer.close()


@pytest.mark.parametrize("how", ["sluice", "direct"])
@pytest.mark.parametrize("blocked", ["lock_table", "alter_table",
                                     "own_lock_alter"])
def test_kill_inside_lock_table_alter_table(port, how, blocked):
    """A session blocked in LOCK TABLE or ALTER TABLE behind another
    session's LOCK TABLE ... WRITE, or running ALTER TABLE under its own
    LOCK TABLE while another session waits, is killed (by its Sluice id,
    or by an administrator naming the backend thread on the server): the
    server's error (1927, or a clean close), never 2027 "malformed
    packet"; the session holding the lock goes on."""
    marker = "lk" + uuid.uuid4().hex[:8]
    col = "c" + uuid.uuid4().hex[:6]
    holder = st.connect(port, database="test")
    victim = st.connect(port, database="test")
    try:
        lock_by = victim if blocked == "own_lock_alter" else holder
        with lock_by.cursor() as cur:
            cur.execute("LOCK TABLE kill_t WRITE")
        if blocked == "own_lock_alter":
            # The holder waits for the table; the victim alters it (a
            # slow ALTER: SLEEP in a generated default is not allowed, so
            # the victim waits on a user lock inside the same session).
            th_h, _ = run_async(holder, "SELECT COUNT(*) FROM kill_t")
            with st.connect(port) as c3:
                assert st.scalar(c3, "SELECT GET_LOCK('kill_lk', 0)") == 1
                th, out = run_async(victim, f"SELECT /*{marker}*/ "
                                    "GET_LOCK('kill_lk', 60)")
                (sid, tid, _c, _i), = wait_running(marker)
                _kill(port, how, victim, sid, tid)
                th.join(5)
        else:
            sql = (f"LOCK /*{marker}*/ TABLE kill_t WRITE"
                   if blocked == "lock_table" else
                   f"ALTER /*{marker}*/ TABLE kill_t ADD COLUMN {col} INT")
            th, out = run_async(victim, sql)
            (sid, tid, _c, _i), = wait_running(marker)
            _kill(port, how, victim, sid, tid)
            th.join(5)
        assert out.get("error") in (1927, 2013), (how, out)
        with pytest.raises(pymysql.MySQLError) as exc:
            st.scalar(victim, "SELECT 1")
        # 0: PyMySQL already closed it after the error
        assert st.error_code(exc.value) in (0, 1927, 2013, 2006), exc.value
        if blocked != "own_lock_alter":
            with holder.cursor() as cur:
                cur.execute("UNLOCK TABLES")
        else:
            th_h.join(5)
        assert st.scalar(holder, "SELECT COUNT(*) FROM kill_t") == 2
    finally:
        holder.close()
        victim.close()


@pytest.mark.parametrize("how", ["sluice", "direct"])
@pytest.mark.parametrize("blocked", ["lock_table", "alter_table"])
def test_cli_killed_in_lock_table_gets_an_error(port, how, blocked):
    """The mariadb CLI (libmariadb) blocked in LOCK TABLE or ALTER TABLE
    behind another session's LOCK TABLE ... WRITE, killed: the server
    closes that connection without an error packet. readconnroute sends
    1927 "Lost connection to backend server" — Sluice's made-up error
    used to be 2013, a client-side code libmariadb reports as 2027
    "Received malformed packet" when a server sends it. readwritesplit,
    under its default master_failure_mode=fail_on_write, closes the
    client's connection without a word as the server did (a write whose
    outcome is unknown): the CLI prints its own 2013, word for word what
    it prints connected to the server itself."""
    marker = "lc" + uuid.uuid4().hex[:8]
    sql = (f"LOCK /*{marker}*/ TABLE kill_t WRITE" if blocked == "lock_table"
           else f"ALTER /*{marker}*/ TABLE kill_t ADD COLUMN "
                f"c{uuid.uuid4().hex[:6]} INT")
    holder = st.connect(port, database="test")
    proc = None
    try:
        with holder.cursor() as cur:
            cur.execute("LOCK TABLE kill_t WRITE")
        proc, cid, pty = _cli_with_id(port, sql)
        (sid, tid, _c, _i), = wait_running(marker)
        if how == "sluice":
            with st.connect(port) as killer:
                with killer.cursor() as cur:
                    cur.execute(f"KILL {cid}")
        else:
            with st.root(sid) as admin:
                with admin.cursor() as cur:
                    cur.execute(f"KILL {tid}")
        _out, err = proc.communicate(timeout=10)
        os.close(pty)
        assert proc.returncode == 1, err
        if port == RW_PORT:
            assert ("ERROR 2013 (HY000) at line 1: Lost connection to "
                    "server during query") in err, err
        else:
            assert "ERROR 1927 (70100)" in err, err
        assert "2027" not in err, err
        with holder.cursor() as cur:
            cur.execute("UNLOCK TABLES")
        assert st.scalar(holder, "SELECT COUNT(*) FROM kill_t") == 2
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        holder.close()


def _cli_with_id(port, sql):
    """Start the mariadb CLI running `status; sql` with its stdout on a
    pty (so that `status` is flushed at once); returns (process, the
    thread id its handshake gave it, the pty's fd)."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        ["mariadb", "--no-defaults", f"-u{st.APP_USER}",
         f"-p{st.APP_PASSWORD}", f"-h{st.HOST}", f"-P{port}",
         "--protocol=tcp", "--comments", "--batch", "-Dtest", "-e",
         "status; " + sql],
        stdout=slave, stderr=subprocess.PIPE, text=True)
    os.close(slave)
    buf = b""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        tail = buf.partition(b"Connection id:")[2]
        if b"\n" in tail:
            return proc, int(tail.split()[0]), master
        chunk = os.read(master, 4096)
        if not chunk:
            break
        buf += chunk
    proc.kill()
    raise AssertionError(f"the CLI printed no connection id: {buf!r}")


def _kill(port, how, victim, sid, tid):
    if how == "sluice":
        with st.connect(port) as killer:
            with killer.cursor() as cur:
                cur.execute(f"KILL {victim.thread_id()}")
    else:
        with st.root(sid) as admin:
            with admin.cursor() as cur:
                cur.execute(f"KILL {tid}")


# ---- vanished clients ----

def _holder(port):
    conn = st.connect(port)
    assert st.scalar(conn, "SELECT GET_LOCK('kill_x', 0)") == 1
    return conn


def _raw_login(port):
    """A PyMySQL connection used below the API: the statement is sent
    and its answer never read."""
    return st.connect(port, database="test")


@pytest.mark.parametrize("how", ["sigkill", "com_quit"])
@pytest.mark.parametrize("what", ["get_lock", "sleep"])
def test_vanished_client(any_port, how, what):
    """The client goes away while its statement runs (SIGKILL of the
    mariadb CLI; or COM_QUIT sent while the statement is pending, then
    close): within 2 s the statement and its backend thread are gone
    from the server's processlist, and the lock queue moves on."""
    marker = "vc" + uuid.uuid4().hex[:8]
    holder = _holder(any_port) if what == "get_lock" else None
    sql = (f"SELECT /*{marker}*/ GET_LOCK('kill_x', 3600)"
           if what == "get_lock" else f"SELECT /*{marker}*/ SLEEP(60)")
    proc = None
    try:
        if how == "sigkill":
            proc = subprocess.Popen(
                ["mariadb", "--no-defaults", f"-u{st.APP_USER}",
                 f"-p{st.APP_PASSWORD}", f"-h{st.HOST}", f"-P{any_port}",
                 "--protocol=tcp", "--comments", "-e", sql],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            (sid, tid, _c, _i), = wait_running(marker)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGKILL)
            proc.wait(5)
        else:
            conn = _raw_login(any_port)
            conn._execute_command(3, sql)   # COM_QUERY, answer never read
            (sid, tid, _c, _i), = wait_running(marker)
            t0 = time.monotonic()
            conn._write_bytes(b"\x01\x00\x00\x00\x01")   # COM_QUIT
            conn._sock.close()
        st.wait_until(lambda: not processlist(marker) and
                      not thread_alive(sid, tid), 2, interval=0.05,
                      what="the statement and its backend thread to end")
        assert time.monotonic() - t0 < 2.5
        if holder is not None:
            # The lock queue moved on: release and take it again at once.
            assert st.scalar(holder, "SELECT RELEASE_LOCK('kill_x')") == 1
            with st.connect(any_port) as c2:
                assert st.scalar(c2, "SELECT GET_LOCK('kill_x', 1)") == 1
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if holder is not None:
            holder.close()


# ---- protocol details ----

def test_change_user_unknown_user(port):
    """COM_CHANGE_USER to an unknown user: 1045 as the server answers it,
    and the connection stays usable (as the old user)."""
    for target in (st.SERVERS[st.PRIMARY_ID], port):
        proc = st.c_client(target, "change_user_bad", "no_such_user", "pw")
        assert proc.returncode == 0, (target, proc.stderr)
        lines = proc.stdout.split()
        assert lines[0] == "1045", (target, proc.stdout)
        assert lines[1] == "42", (target, proc.stdout)


def test_json_extended_metadata(port):
    """MARIADB_CLIENT_EXTENDED_METADATA passes through: the CLI's
    --column-type-info shows the JSON column's format=json as it does
    directly."""
    for target in (st.SERVERS[st.PRIMARY_ID], port):
        proc = subprocess.run(
            ["mariadb", "--no-defaults", f"-u{st.APP_USER}",
             f"-p{st.APP_PASSWORD}", f"-h{st.HOST}", f"-P{target}",
             "--protocol=tcp", "--column-type-info", "--table", "-e",
             "SELECT j FROM test.kill_json"],
            capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        assert "format=json" in proc.stdout, (target, proc.stdout)


def test_local_infile_from_script_file(port, tmp_path):
    """`mariadb --local-infile=1 < script.sql` where the script runs LOAD
    DATA LOCAL INFILE: the rows arrive (not 4166)."""
    data = tmp_path / "rows.csv"
    # ~60 KiB: the CLI sends it in several packets.
    data.write_text("".join(f"{i},row{i}\n" for i in range(1, 5001)))
    script = tmp_path / "load.sql"
    script.write_text("DELETE FROM test.kill_load;\n"
                      f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE "
                      "test.kill_load FIELDS TERMINATED BY ',';\n"
                      "SELECT COUNT(*), SUM(id) FROM test.kill_load;\n")
    with script.open() as f:
        proc = subprocess.run(
            ["mariadb", "--no-defaults", f"-u{st.APP_USER}",
             f"-p{st.APP_PASSWORD}", f"-h{st.HOST}", f"-P{port}",
             "--protocol=tcp", "--local-infile=1", "--batch",
             "--skip-column-names"],
            stdin=f, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["5000", "12502500"], proc.stdout
    with st.root(st.PRIMARY_ID) as conn:
        assert st.scalar(conn, "SELECT COUNT(*) FROM test.kill_load") == 5000
