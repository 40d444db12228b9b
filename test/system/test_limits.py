# SPDX-License-Identifier: Apache-2.0
"""Limits and hardening: max_connections (1040), connection_timeout (idle
sessions closed, busy ones kept), net_write_timeout (a client that stops
reading a large result is closed), max_auth_errors_until_block (1129
without a login attempt reaching the account check), graceful shutdown
on SIGTERM (a running statement finishes, idle sessions close, the port
closes, exit 0), backpressure (a slow client reading a 1 GiB result keeps
Sluice's RSS under 64 MiB) and 5000 concurrent connections.

Hostile clients: connections that never log in count against
max_connections, are capped per host (max_pending_logins_per_host, 1040
in place of the greeting) and closed after auth_timeout; one streaming megabytes ahead of its login while parked
for an account reload (the Blackhole-Service loads its accounts from a
server that accepts TCP and never answers, so every login waits) is
closed with a bounded read queue; a command over max_allowed_packet gets
1153 and the connection closes, before its bytes are buffered.
"""

import resource
import signal
import socket
import struct
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

[Pending-Service]
type=service
router=readconnroute
router_options=master
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
auth_timeout=2s

[Pending-Listener]
type=listener
service=Pending-Service
address={st.HOST}
port={BASE + 7}

[Cap-Service]
type=service
router=readconnroute
router_options=master
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
max_pending_logins_per_host=5
# long enough that the stalled clients are still there on a slow machine
auth_timeout=300s

[Cap-Listener]
type=listener
service=Cap-Service
address={st.HOST}
port={BASE + 9}

[Packet-Service]
type=service
router=readconnroute
router_options=master
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
max_allowed_packet=1Mi

[Packet-Listener]
type=listener
service=Packet-Service
address={st.HOST}
port={BASE + 8}

[blackhole]
type=server
address={st.HOST}
port={BASE + 6}

[Blackhole-Service]
type=service
router=readconnroute
servers=blackhole
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[Blackhole-Listener]
type=listener
service=Blackhole-Service
address={st.HOST}
port={BASE + 5}
"""


def _with_limits(text):
    return text.replace("admin_enabled=false\n", "admin_enabled=false\n"
                        "max_auth_errors_until_block=3\n", 1) + LIMITS


@pytest.fixture(scope="module")
def blackhole():
    """A "server" that completes TCP handshakes (the kernel does, from the
    backlog) and never says a word: account loads from it hang."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((st.HOST, BASE + 6))
    s.listen(64)
    yield s
    s.close()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, monkeypatch_module, blackhole):
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


def _connect_when_free(port, **kw):
    """A connection to the max_connections=5 service once it has a free
    slot: a test before may have just closed its connections, and Sluice
    frees their slots when it has read the close (as a server would)."""
    got = []
    st.wait_until(lambda: got.append(st.connect(port, **kw)) is None, 10,
                  what=f"a free connection slot on port {port}")
    return got[0]


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
    idle = _connect_when_free(port)
    busy = _connect_when_free(port)
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
    conn = _connect_when_free(port, database="test",
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


@pytest.mark.slow
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
                peak = max(peak, st.rss_kb(proxy.pid))
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


@pytest.mark.slow
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
        before = st.rss_kb(proxy.pid)
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
        after = st.rss_kb(proxy.pid)
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


# ---- raw protocol helpers for hostile clients ----

CAPS = 0x1 | 0x200 | 0x8000 | 0x80000   # LONG_PASSWORD, PROTOCOL_41,
                                        # SECURE_CONNECTION, PLUGIN_AUTH


def _recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _read_packet(sock):
    hdr = _recv_exactly(sock, 4)
    n = int.from_bytes(hdr[:3], "little")
    return hdr[3], _recv_exactly(sock, n)


def _hello(user, seq=1, token=b"x" * 20):
    """A HandshakeResponse41 for mysql_native_password (wrong token)."""
    payload = (struct.pack("<IIB", CAPS, 1 << 24, 45) + b"\0" * 23 +
               user.encode() + b"\0" + bytes([len(token)]) + token +
               b"mysql_native_password\0")
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


class _RssSampler(threading.Thread):
    """Samples Sluice's VmRSS until stopped; .peak in KiB."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = st.rss_kb(pid)
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            self.peak = max(self.peak, st.rss_kb(self.pid))
            time.sleep(0.02)

    def stop(self):
        self.halt.set()
        self.join(10)
        return self.peak


def _stream(sock, total, chunk=1 << 20):
    """Send up to total bytes; the number sent before the peer closed."""
    data = b"\xab" * chunk
    sent = 0
    try:
        while sent < total:
            sock.sendall(data)
            sent += chunk
    except OSError:
        pass
    return sent


def test_streaming_while_parked_is_bounded(proxy):
    """A client parked for an account reload that streams 50 MiB ahead
    of its login: Sluice stops it at a login packet's worth, its RSS does
    not grow by the 50 MiB, and the proxy still serves others."""
    before = st.rss_kb(proxy.pid)
    sampler = _RssSampler(proxy.pid)
    sampler.start()
    with socket.create_connection((st.HOST, BASE + 5), timeout=30) as s:
        seq, greeting = _read_packet(s)
        assert seq == 0 and greeting[0] == 10
        s.sendall(_hello(st.APP_USER))          # parks: accounts loading
        _stream(s, 50 << 20)
        # the connection ends (an ERR 1043 first, unless a reset ate it)
        s.settimeout(30)
        try:
            while s.recv(65536):
                pass
        except ConnectionResetError:
            pass
    peak = sampler.stop()
    print(f"RSS before {before} KiB, peak {peak} KiB")
    assert peak - before < 16 * 1024, f"RSS grew {peak - before} KiB"
    assert "before its login or change of user completed" in _log(proxy)
    with st.connect(BASE + 4) as c:
        assert st.scalar(c, "SELECT 1") == 1


def _stalled(port, n):
    """n connections that read the greeting and then say nothing."""
    socks = []
    for _ in range(n):
        s = socket.create_connection((st.HOST, port), timeout=30)
        seq, greeting = _read_packet(s)
        assert seq == 0 and greeting[0] == 10, greeting[:20]
        socks.append(s)
    return socks


def _closed_by_peer(sock):
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_half_open_count_against_max_connections(proxy):
    """Limited-Service allows 5: five connections stalled before their
    login fill it, a real login gets 1040; once they go, it works."""
    port = BASE + 2
    socks = _stalled(port, 5)
    try:
        with pytest.raises(pymysql.MySQLError) as exc:
            st.connect(port)
        assert st.error_code(exc.value) == 1040, exc.value
    finally:
        for s in socks:
            s.close()
    st.wait_until(lambda: st.server_id(st.connect(port)) == st.PRIMARY_ID,
                  15, what="a login once the stalled clients left")


def test_stalled_logins_capped_per_host(proxy):
    """Cap-Service: max_pending_logins_per_host=5. A sixth connection
    from this host while five stall before their login is refused with
    1040 in place of the greeting; the five going frees the way."""
    port = BASE + 9
    socks = _stalled(port, 5)
    try:
        with socket.create_connection((st.HOST, port), timeout=30) as s6:
            seq, err = _read_packet(s6)
            assert seq == 0 and err[0] == 0xFF, err
            assert struct.unpack("<H", err[1:3])[0] == 1040
            assert b"have not logged in yet" in err, err
            assert _closed_by_peer(s6)
    finally:
        for s in socks:
            s.close()
    st.wait_until(lambda: st.server_id(st.connect(port)) == st.PRIMARY_ID,
                  15, what="a login once the stalled clients left")


def test_stalled_logins_timed_out(proxy):
    """Pending-Service: auth_timeout=2s. Connections that stall before
    their login (after the greeting, or after half a handshake response)
    are closed at the deadline; a real login works alongside."""
    port = BASE + 7
    socks = _stalled(port, 3)
    socks[1].sendall(_hello(st.APP_USER)[:20])     # a partial response
    try:
        with st.connect(port) as c:
            assert st.server_id(c) == st.PRIMARY_ID
        for s in socks:
            s.settimeout(30)            # only a bound on waiting
            assert _closed_by_peer(s), "stalled client not closed"
    finally:
        for s in socks:
            s.close()
    assert "(auth_timeout)" in _log(proxy)
    with st.connect(port) as c:
        assert st.server_id(c) == st.PRIMARY_ID


def test_command_over_max_allowed_packet(proxy):
    """Packet-Service: max_allowed_packet=1Mi. A command announcing 2 MiB
    gets 1153 as soon as its header arrives and the connection closes;
    1 MiB-minus-a-bit commands work, and so do other sessions."""
    port = BASE + 8
    conn = st.connect(port)
    s = conn._sock
    s.settimeout(30)                    # only a bound on waiting
    s.sendall((2 << 20).to_bytes(3, "little") + b"\0\x03SELECT '")
    seq, err = _read_packet(s)
    assert err[0] == 0xFF, err
    assert struct.unpack("<H", err[1:3])[0] == 1153
    assert b"max_allowed_packet" in err and seq == 1, (seq, err)
    assert _closed_by_peer(s)
    conn._sock = None                   # closed by the peer already
    assert "(max_allowed_packet)" in _log(proxy)

    # the same through PyMySQL: an error, never a hang or a crash
    with st.connect(port) as big:
        with pytest.raises(pymysql.MySQLError) as exc:
            st.scalar(big, "SELECT LENGTH(%s)", ("x" * (2 << 20),))
        assert st.error_code(exc.value) in (1153, 2006, 2013), exc.value
    value = "y" * ((1 << 20) - 100)
    with st.connect(port) as ok:
        assert st.scalar(ok, "SELECT LENGTH(%s)", (value,)) == len(value)
        assert st.server_id(ok) == st.PRIMARY_ID


def _query_packet(sql):
    payload = b"\x03" + sql
    return len(payload).to_bytes(3, "little") + b"\0" + payload


def test_pipelined_commands_to_a_stuck_server_bounded(proxy):
    """A client pipelines ~90 MiB of INSERTs while the table is locked on
    the primary: the server stops reading, Sluice's backend write queue
    fills, and Sluice stops reading the client (backpressure) instead of
    buffering it all. After UNLOCK every INSERT lands intact."""
    port = BASE + 8                     # max_allowed_packet=1Mi
    n, size = 100, 900 * 1024
    with st.root(st.PRIMARY_ID) as root:
        cur = root.cursor()
        cur.execute("CREATE TABLE IF NOT EXISTS test.pipe "
                    "(id INT PRIMARY KEY, b LONGBLOB)")
        cur.execute("TRUNCATE test.pipe")
        conn = st.connect(port)
        s = conn._sock
        cur.execute("LOCK TABLES test.pipe WRITE")
        before = st.rss_kb(proxy.pid)
        sampler = _RssSampler(proxy.pid)
        sampler.start()
        sent = [0]

        def sender():
            for i in range(n):
                s.sendall(_query_packet(
                    b"INSERT INTO test.pipe VALUES (%d, '%s')" %
                    (i, b"%02d" % (i % 100) * (size // 2))))
                sent[0] += 1
        t = threading.Thread(target=sender, daemon=True)
        t.start()
        # wait until the sender is done or stuck (paused by Sluice)
        last, still = -1, 0
        deadline = time.monotonic() + 60
        while t.is_alive() and still < 10 and time.monotonic() < deadline:
            time.sleep(0.2)
            still = still + 1 if sent[0] == last else 0
            last = sent[0]
        peak = sampler.stop()
        cur.execute("UNLOCK TABLES")
    t.join(120)
    assert not t.is_alive(), "sender still blocked after UNLOCK"
    s.settimeout(120)                   # only a bound on waiting
    for i in range(n):
        seq, ok = _read_packet(s)
        assert ok[0] == 0x00, (i, ok[:80])
    conn.close()
    with st.root(st.PRIMARY_ID) as root:
        assert st.scalar(root, "SELECT COUNT(*) FROM test.pipe WHERE "
                         f"LENGTH(b) = {size}") == n
        root.cursor().execute("DROP TABLE test.pipe")
    print(f"RSS before {before} KiB, peak {peak} KiB while stuck")
    assert peak - before < 32 * 1024, f"RSS grew {peak - before} KiB"
