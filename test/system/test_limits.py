"""Limits and hardening: max_connections (1040), connection_timeout (idle
sessions closed, busy ones kept), net_write_timeout (a client that stops
reading a large result is closed), max_auth_errors_until_block (1129
without a login attempt reaching the account check), graceful shutdown
on SIGTERM (a running statement finishes, idle sessions close, the port
closes, exit 0), backpressure (a slow client reading a 1 GiB result keeps
Sluice's RSS under 64 MiB) and 5000 concurrent connections.
"""

import os
import resource
import signal
import socket
import subprocess
import threading
import time

import pymysql
import pytest

import sluicetest as st
from proxy import Daemon, PROXY, sluice_config, running_proxy

pytestmark = pytest.mark.skipif(PROXY != "sluice",
                                reason="tests Sluice's own limits")

BASE = st.port(4530)
SLOW = pytest.mark.skipif(os.environ.get("SLUICE_SKIP_SLOW") == "1",
                          reason="slow test (SLUICE_SKIP_SLOW=1)")

LIMITS = f"""
[Limited-Service]
type=service
router=readconnroute
router_options=master
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
max_connections=5
connection_timeout=2s
net_write_timeout=2s

[Limited-Listener]
type=listener
service=Limited-Service
address={st.HOST}
port={BASE + 2}

[Auth-Service]
type=service
router=readconnroute
router_options=master
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[Auth-Listener]
type=listener
service=Auth-Service
address={st.HOST}
port={BASE + 3}

[Running-Service]
type=service
router=readconnroute
router_options=running
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[Running-Listener]
type=listener
service=Running-Service
address={st.HOST}
port={BASE + 4}
"""


def _with_limits(text):
    return text.replace("admin_enabled=false\n", "admin_enabled=false\n"
                        "max_auth_errors_until_block=3\n", 1) + LIMITS


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setattr("proxy.sluice_config",
                               lambda *a, **k: _with_limits(
                                   sluice_config(*a, **k)))
    yield from running_proxy(tmp_path_factory, BASE, BASE + 1)


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def _log(proxy):
    return proxy.daemon.log_path.read_text(errors="replace")


def test_max_connections(proxy):
    port = BASE + 2
    conns = [st.connect(port) for _ in range(5)]
    try:
        for c in conns:
            assert st.server_id(c) == st.PRIMARY_ID
        with pytest.raises(pymysql.MySQLError) as exc:
            st.connect(port)
        assert st.error_code(exc.value) == 1040
        assert "Too many connections" in str(exc.value)
        conns.pop().close()
        # the slot is free again once the session is gone
        st.wait_until(lambda: st.connect(port).close() is None, 5,
                      what="a free slot after a disconnect")
    finally:
        for c in conns:
            c.close()


def test_connection_timeout(proxy):
    port = BASE + 2
    idle = st.connect(port)
    busy = st.connect(port)
    assert st.server_id(idle) == st.PRIMARY_ID
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3.5:          # busy keeps talking
        assert st.scalar(busy, "SELECT 1") == 1
        time.sleep(0.5)
    with pytest.raises(pymysql.MySQLError) as exc:
        st.scalar(idle, "SELECT 1")
    assert st.error_code(exc.value) in (2006, 2013), exc.value
    assert st.scalar(busy, "SELECT 2") == 2
    busy.close()
    assert "(connection_timeout)" in _log(proxy)


def test_net_write_timeout(proxy):
    """A client that stops reading: Sluice's writes stall, it closes the
    client after net_write_timeout (2s) and its backend with it."""
    def _backend_thread_alive(thread_id):
        with st.root(st.PRIMARY_ID) as r:
            return st.scalar(r, "SELECT COUNT(*) FROM information_schema."
                             "PROCESSLIST WHERE ID = %s", (thread_id,)) == 1
    port = BASE + 2
    conn = st.connect(port, database="test",
                      cursorclass=pymysql.cursors.SSCursor)
    # readconnroute passes CONNECTION_ID() through: the backend's thread
    backend_id = st.scalar(conn, "SELECT CONNECTION_ID()")
    assert _backend_thread_alive(backend_id)
    # the server's own net_write_timeout must not end the thread first
    st.scalar(conn, "SET SESSION net_write_timeout = 3600")
    cur = conn.cursor()
    cur.execute("SELECT REPEAT('w', 1024 * 1024) FROM seq_1_to_256")
    assert len(cur.fetchone()[0]) == 1024 * 1024
    st.wait_until(lambda: "(net_write_timeout)" in _log(proxy), 15,
                  what="the net_write_timeout log line")
    # the backend connection goes too (the server ends its thread once
    # Sluice has closed the socket); the deadline only stops waiting
    st.wait_until(lambda: not _backend_thread_alive(backend_id), 60,
                  what=f"backend thread {backend_id} to end")
    with pytest.raises(pymysql.MySQLError):
        for _ in cur:
            pass
    cur._result = conn._result = None   # nothing to drain: socket closed
    conn.close()


def test_auth_errors_block_host(proxy):
    port = BASE + 3
    for _ in range(3):
        with pytest.raises(pymysql.MySQLError) as exc:
            st.connect(port, password="wrong")
        assert st.error_code(exc.value) == 1045
    # blocked now: even the right password is refused before any login
    with pytest.raises(pymysql.MySQLError) as exc:
        st.connect(port)
    assert st.error_code(exc.value) == 1129
    assert "is blocked because of many connection errors" in str(exc.value)
    out = st.cli("SELECT 1", port=port)
    # the CLI wraps an error that comes before the handshake, but shows it
    assert out.returncode != 0
    assert "1129" in out.stderr and "is blocked" in out.stderr, out.stderr
    # per service: the other services still serve this host
    with st.connect(BASE + 4) as c:
        assert st.scalar(c, "SELECT 1") == 1


def _rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@SLOW
def test_slow_client_1gib_result_bounded_memory(proxy):
    """1 GiB of rows to a client that reads slowly: backpressure pauses the
    backend, Sluice's RSS stays under 64 MiB."""
    argv = ["mariadb", "--no-defaults", f"-u{st.APP_USER}",
            f"-p{st.APP_PASSWORD}", f"-h{st.HOST}", f"-P{BASE + 4}",
            "--protocol=tcp", "--quick", "--batch", "--skip-column-names",
            "-Dtest", "-e",
            "SELECT REPEAT('x', 1024 * 1024) FROM seq_1_to_1024"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    peak = 0
    total = 0
    deadline = time.monotonic() + 150
    try:
        while time.monotonic() < deadline:
            chunk = proc.stdout.read(1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total % (8 << 20) < (1 << 20):
                peak = max(peak, _rss_kib(proxy.pid))
                time.sleep(0.05)        # the slow part
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(f"slow client: {total} bytes, Sluice peak RSS {peak} KiB")
    assert total == 1024 * (1024 * 1024 + 1), total
    assert peak < 64 * 1024, f"peak RSS {peak} KiB"


def _raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


@SLOW
def test_5000_connections(proxy):
    """5000 client sessions (and 5000 backend connections spread over the
    three servers) open at once, each used; reports memory per idle
    connection."""
    n = 5000
    if _raise_nofile() < n + 200:
        pytest.skip("RLIMIT_NOFILE hard limit too low for 5000 sockets")
    saved = {}
    for sid in st.SERVERS:
        with st.root(sid) as r:
            saved[sid] = st.scalar(r, "SELECT @@max_connections")
            r.cursor().execute("SET GLOBAL max_connections = 2500")
    conns = []
    try:
        before = _rss_kib(proxy.pid)
        errors = []
        lock = threading.Lock()

        def opener(k):
            mine = []
            try:
                for _ in range(k):
                    c = st.connect(BASE + 4, connect_timeout=60)
                    mine.append(c)
            except Exception as exc:  # noqa: BLE001 - collected
                errors.append(repr(exc))
            with lock:
                conns.extend(mine)
        threads = [threading.Thread(target=opener, args=(n // 50,))
                   for _ in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(240)
        assert not errors, errors[:3]
        assert len(conns) == n
        ids = {}
        for c in conns:
            sid = st.server_id(c)
            ids[sid] = ids.get(sid, 0) + 1
        after = _rss_kib(proxy.pid)
        per_conn = (after - before) * 1024 / n
        print(f"{n} connections held, spread {ids}; RSS {before} -> "
              f"{after} KiB = {per_conn:.0f} bytes per client connection "
              "(client + backend side)")
        assert set(ids) == {1, 2, 3}
    finally:
        for c in conns:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - best effort
                pass
        for sid, v in saved.items():
            with st.root(sid) as r:
                r.cursor().execute(f"SET GLOBAL max_connections = {v}")


def test_graceful_shutdown(tmp_path):
    """SIGTERM: the listener closes at once, an idle session is closed, a
    running statement still gets its result, then exit 0 -- as soon as
    that statement is done, not when shutdown_timeout runs out.

    The running statement waits on a user lock the test holds, so the
    order is fixed without timing: SIGTERM, listener closed and idle
    session gone while the statement still waits, lock released, result,
    exit. The deadlines only stop waiting."""
    port = st.port(4540)
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir()
    cfg = tmp_path / "sluice.cnf"
    cfg.write_text(sluice_config(tmp_path, port, port + 1,
                                 extra="shutdown_timeout=600s"))
    daemon = Daemon(st.sluice_argv("start", cfg), tmp_path / "proxy.log",
                    st.sluice_env())
    lock = st.root(st.PRIMARY_ID)
    try:
        daemon.wait_ports([port, port + 1])
        st.wait_until(lambda: st.server_id(st.connect(port)) ==
                      st.PRIMARY_ID, 30, what="the proxy")
        assert st.scalar(lock, "SELECT GET_LOCK('sl_shutdown', 0)") == 1
        idle = st.connect(port)
        busy = st.connect(port)
        busy_id = st.scalar(busy, "SELECT CONNECTION_ID()")
        result = {}

        def long_query():
            try:
                with busy.cursor() as cur:
                    cur.execute("SELECT GET_LOCK('sl_shutdown', 300), 42")
                    result["row"] = cur.fetchone()
            except Exception as exc:  # noqa: BLE001 - checked below
                result["err"] = exc
        t = threading.Thread(target=long_query)
        t.start()

        def waiting_for_lock():
            return st.scalar(lock, "SELECT COUNT(*) FROM information_schema."
                             "PROCESSLIST WHERE ID = %s AND STATE = "
                             "'User lock'", (busy_id,)) == 1
        st.wait_until(waiting_for_lock, 60, what="the statement to run")
        daemon.proc.send_signal(signal.SIGTERM)
        st.wait_until(lambda: not _port_accepts(port), 60,
                      what="the listener to close")
        with pytest.raises(pymysql.MySQLError):
            st.scalar(idle, "SELECT 1")
        st.wait_until(lambda: "waiting up to" in daemon.log_path.read_text(),
                      60, what="the drain log line")
        assert "row" not in result and daemon.alive(), result
        st.scalar(lock, "SELECT RELEASE_LOCK('sl_shutdown')")
        t.join(60)
        assert daemon.proc.wait(timeout=60) == 0
        # the statement that was running when SIGTERM came finished
        assert result.get("row") == (1, 42), result
        log = daemon.log_path.read_text()
        assert "for 1 busy sessions" in log, log
        # it exited when the statement was done, not at shutdown_timeout
        assert "shutdown_timeout: closing" not in log, log
    finally:
        lock.close()
        problems = daemon.stop()
    assert not problems, problems


def _port_accepts(port):
    try:
        with socket.create_connection((st.HOST, port), timeout=1):
            return True
    except OSError:
        return False
