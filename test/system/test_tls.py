# SPDX-License-Identifier: Apache-2.0
"""TLS: clients through a TLS listener (mariadb --ssl, with and without
verifying the server certificate, PyMySQL with large results, client
certificates), a plain client refused by a TLS-only listener (3159), bad
TLS configurations refused with FILE:LINE, backend TLS to a sandbox
server restarted with SSL (Ssl_cipher seen by the server is non-empty),
and a client stalling inside its TLS handshake closed at auth_timeout.

Certificates are made by the test with the openssl CLI: a CA, a server
certificate for 127.0.0.1/localhost, a client certificate, and a second
CA that signed nothing of ours.
"""

import base64
import hashlib
import os
import socket
import struct
import ssl
import subprocess
import threading
import urllib.request

import pymysql
import pytest

import sluicetest as st
from proxy import CONFIG_REFUSED, Daemon, run_sluice, sluice_config, PROXY

pytestmark = pytest.mark.skipif(PROXY != "sluice",
                                reason="tests Sluice's own TLS")

PORTS = {"pinned": st.port(4500), "shared": st.port(4510)}
SANDBOX_SCRIPT = st.ROOT / "scripts" / "sandbox"
TLS_SERVER = 3          # the sandbox server restarted with SSL
LOGS = {}               # listener base port -> the proxy's log


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return st.make_test_certs(tmp_path_factory.mktemp("certs"))


def _sandbox(*args):
    subprocess.run([str(SANDBOX_SCRIPT), *args], check=True, timeout=120,
                   capture_output=True)


@pytest.fixture(scope="module")
def tls_backend(certs):
    """db3 restarted with SSL for this module, plain again afterwards."""
    n = str(TLS_SERVER)
    _sandbox("stop-server", n)
    try:
        _sandbox("start-server", n, f"--ssl-cert={certs}/server.pem",
                 f"--ssl-key={certs}/server-key.pem",
                 f"--ssl-ca={certs}/ca.pem")
        with st.root(TLS_SERVER) as conn:
            assert st.scalar(conn, "SELECT @@have_ssl") == "YES"
        yield TLS_SERVER
    finally:
        _sandbox("stop-server", n)
        _sandbox("start-server", n)


def _tls_config(run_dir, base, certs, event_model):
    text = sluice_config(run_dir, base + 8, base + 9,
                         event_model=event_model)
    text = text.replace("servers=db1,db2,db3\nuser",
                        "servers=db1,db2,db3,db3tls\nuser", 1)
    text = text.replace("router_options=master\n",
                        "router_options=master\nauth_timeout=2s\n", 1)
    return text + f"""
[db3tls]
type=server
address={st.HOST}
port={st.SERVERS[TLS_SERVER]}
ssl=true
ssl_ca={certs}/ca.pem
ssl_verify_peer_certificate=true
ssl_verify_peer_host=true

[TLS-Listener]
type=listener
service=Primary-Service
address={st.HOST}
port={base}
ssl=true
ssl_cert={certs}/server.pem
ssl_key={certs}/server-key.pem
ssl_ca_cert={certs}/ca.pem

[Verify-Listener]
type=listener
service=Primary-Service
address={st.HOST}
port={base + 1}
ssl=true
ssl_cert={certs}/server.pem
ssl_key={certs}/server-key.pem
ssl_ca={certs}/ca.pem
ssl_verify_peer_certificate=true
ssl_version=TLSv13

[Backend-TLS-Service]
type=service
router=readconnroute
router_options=slave
servers=db3tls
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[Backend-TLS-Listener]
type=listener
service=Backend-TLS-Service
address={st.HOST}
port={base + 2}
"""


@pytest.fixture(scope="module", params=sorted(PORTS))
def proxy(request, tmp_path_factory, certs, tls_backend):
    base = PORTS[request.param]
    run_dir = tmp_path_factory.mktemp(f"tls-{request.param}")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(_tls_config(run_dir, base, certs, request.param))
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                    st.sluice_env())
    LOGS[base] = daemon.log_path
    try:
        daemon.wait_ports([base, base + 1, base + 2, base + 8])

        def ready():
            with _tls_connect(base, certs) as conn:
                if st.server_id(conn) != st.PRIMARY_ID:
                    return False
            with st.connect(base + 2, connect_timeout=5) as conn:
                return st.server_id(conn) == TLS_SERVER
        st.wait_until(ready, 30, interval=0.2, what="TLS services")
        yield base
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nlog:\n{daemon.log_tail()}")
    finally:
        problems = daemon.stop()
        if problems:
            pytest.fail("proxy shutdown: " + "\n".join(problems),
                        pytrace=False)


def _tls_connect(port, certs, **kw):
    ssl = {"ca": str(certs / "ca.pem")}
    ssl.update(kw.pop("ssl_extra", {}))
    kw.setdefault("database", "test")
    return st.connect(port, ssl=ssl, **kw)


def _cli(port, sql, *opts):
    argv = ["mariadb", "--no-defaults", f"-u{st.APP_USER}",
            f"-p{st.APP_PASSWORD}", f"-h{st.HOST}", f"-P{port}",
            "--protocol=tcp", "--batch", "--skip-column-names",
            "--connect-timeout=10", *opts, "-e", sql]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_cli_ssl(proxy, certs):
    out = _cli(proxy, "SELECT @@server_id", "--ssl")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(st.PRIMARY_ID)]
    # the client's own view: the session is encrypted
    out = _cli(proxy, "\\s", "--ssl")
    assert "Cipher in use" in out.stdout, out.stdout


def test_cli_verifies_server_certificate(proxy, certs):
    out = _cli(proxy, "SELECT @@server_id", "--ssl-verify-server-cert",
               f"--ssl-ca={certs}/ca.pem")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(st.PRIMARY_ID)]
    # a CA that did not sign Sluice's certificate: the client refuses
    out = _cli(proxy, "SELECT 1", "--ssl-verify-server-cert",
               f"--ssl-ca={certs}/otherca.pem")
    assert out.returncode != 0
    assert st.cli_error_code(out) == 2026, out.stderr


def test_plain_client_refused(proxy):
    out = _cli(proxy, "SELECT 1", "--skip-ssl")
    assert out.returncode != 0
    assert st.cli_error_code(out) == 3159, out.stderr
    assert "requires TLS" in out.stderr
    with pytest.raises(Exception) as exc:
        st.connect(proxy).close()
    assert st.error_code(exc.value) == 3159


def test_large_results_over_tls(proxy, certs):
    """Megabytes both ways through TLS (many records, WANT_WRITE while the
    client is slower than the server)."""
    with _tls_connect(proxy, certs) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT REPEAT('a', 1024 * 1024), seq FROM "
                        "seq_1_to_40")
            rows = cur.fetchall()
        assert len(rows) == 40
        assert all(len(r[0]) == 1024 * 1024 for r in rows)
        blob = os.urandom(6 * 1024 * 1024).hex()     # 12 MiB statement
        got = st.scalar(conn, "SELECT MD5(%s)", (blob,))
        assert got == hashlib.md5(blob.encode()).hexdigest()


def test_concurrent_tls_sessions(proxy, certs):
    errors = []

    def client(i):
        try:
            with _tls_connect(proxy, certs) as conn:
                for _ in range(5):
                    assert st.scalar(conn, "SELECT %s", (i,)) == i
                assert st.server_id(conn) == st.PRIMARY_ID
        except Exception as exc:  # noqa: BLE001 - collected
            errors.append(repr(exc))
    threads = [threading.Thread(target=client, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]


def test_client_certificate_required(proxy, certs):
    """The same command with and without a client certificate: without,
    the TLS handshake is refused (the server hangs up: 2013, or a TLS
    error: 2026) before any login, so no query runs; with, it runs."""
    port = proxy + 1
    tls = ["--ssl", f"--ssl-ca={certs}/ca.pem"]
    out = _cli(port, "SELECT @@server_id", *tls)
    assert out.returncode != 0 and out.stdout == "", \
        "no client certificate must be refused"
    assert st.cli_error_code(out) in (2013, 2026), out.stderr
    out = _cli(port, "SELECT @@server_id", *tls,
               f"--ssl-cert={certs}/client.pem",
               f"--ssl-key={certs}/client-key.pem")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(st.PRIMARY_ID)]


def test_backend_connection_encrypted(proxy, tls_backend):
    with st.connect(proxy + 2, database="test") as conn:
        assert st.server_id(conn) == tls_backend
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            cipher = cur.fetchone()[1]
            assert cipher != "", "the backend connection is not TLS"
            cur.execute("SELECT REPEAT('b', 1024 * 1024) FROM seq_1_to_8")
            assert all(len(r[0]) == 1024 * 1024 for r in cur.fetchall())
    # control: the same server through a plain backend connection. The
    # connections stay open, so least-connections must spread them over
    # both replicas (closed ones would tie and always pick the first).
    held = []
    try:
        for _ in range(10):
            conn = st.connect(proxy + 9)
            held.append(conn)
            if st.server_id(conn) != tls_backend:
                continue
            with conn.cursor() as cur:
                cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
                assert cur.fetchone()[1] == ""
            return
    finally:
        for conn in held:
            conn.close()
    pytest.fail("Replica-Service never chose db3 in 10 connections")


def _recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def test_stall_inside_tls_closed_at_auth_timeout(proxy, certs):
    """A client that sends its SSLRequest and then never starts (or
    finishes) the TLS handshake is closed at auth_timeout (2s on
    Primary-Service here), in both event models; TLS logins go on."""
    s = socket.create_connection((st.HOST, proxy), timeout=30)
    try:
        hdr = _recv_exactly(s, 4)
        greeting = _recv_exactly(s, int.from_bytes(hdr[:3], "little"))
        assert greeting[0] == 10
        caps = 0x1 | 0x200 | 0x800 | 0x8000 | 0x80000   # with CLIENT_SSL
        req = struct.pack("<IIB", caps, 1 << 24, 45) + b"\0" * 23
        s.sendall(len(req).to_bytes(3, "little") + b"\x01" + req)
        # whatever Sluice says (a TLS alert at most), it then closes
        while True:
            try:
                if not s.recv(4096):
                    break
            except ConnectionResetError:
                break
    finally:
        s.close()
    assert "(auth_timeout)" in LOGS[proxy].read_text(errors="replace")
    with _tls_connect(proxy, certs) as conn:
        assert st.server_id(conn) == st.PRIMARY_ID


@pytest.mark.parametrize("section,error,param", [
    ("ssl=true\n", "has ssl=true but no ssl_cert and ssl_key", "ssl"),
    ("ssl=true\nssl_cert=/nonexistent.pem\nssl_key=/nonexistent.pem\n",
     "cannot load ssl_cert '/nonexistent.pem'", "ssl_cert"),
    ("ssl=true\nssl_cert={c}/server.pem\nssl_key={c}/client-key.pem\n",
     "cannot load ssl_key", "ssl_key"),
    ("ssl=true\nssl_cert={c}/server.pem\nssl_key={c}/server-key.pem\n"
     "ssl_version=TLSv99\n", "invalid value 'TLSv99' for parameter "
     "'ssl_version'", "ssl_version"),
    ("ssl=true\nssl_cert={c}/server.pem\nssl_key={c}/server-key.pem\n"
     "ssl_crl={c}/ca.pem\n", "cannot load ssl_crl '", "ssl_crl"),
])
def test_bad_tls_config_refused(tmp_path, certs, section, error, param):
    """Refused (exit status 1, no sanitizer report) naming FILE:LINE of the
    offending parameter and the reason."""
    text = sluice_config(tmp_path, st.port(4520), st.port(4521))
    text = text.replace(f"port={st.port(4520)}\n",
                        f"port={st.port(4520)}\n" +
                        section.format(c=certs), 1)
    cfg = tmp_path / "bad.cnf"
    cfg.write_text(text)
    line = [i + 1 for i, l in enumerate(text.splitlines())
            if l.startswith(f"{param}=")][0]
    status, out = run_sluice("check", cfg)
    assert status == CONFIG_REFUSED, (status, out)
    message = [l for l in out.splitlines() if error in l]
    assert message and message[0].startswith(f"{cfg}:{line}: "), \
        (line, out)


# ---- a hostile server injecting plaintext ahead of TLS ----

EVIL_PORTS = {"listener": st.port(4700), "admin": st.port(4701),
              "server": st.port(4702)}


def _packet(seq, payload):
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


def _greeting():
    """A Handshake v10 offering CLIENT_SSL (and 4.1 auth)."""
    caps = (0x1 | 0x8 | 0x200 | 0x800 | 0x2000 | 0x8000 | 0x80000)
    lo, hi = (caps & 0xffff).to_bytes(2, "little"), \
        (caps >> 16).to_bytes(2, "little")
    return _packet(0, b"\x0a" + b"10.11.99-evil\0"
                   + (7).to_bytes(4, "little") + b"abcdefgh\0" + lo
                   + b"\x21" + b"\x02\x00" + hi + b"\x15" + b"\0" * 10
                   + b"ijklmnopqrst\0" + b"mysql_native_password\0")


class EvilServer:
    """Plays a MariaDB server an attacker controls the path to: its
    greeting offers TLS and is followed, in the same segment, by a
    plaintext OK (seq 3, where the login's answer inside TLS would be).
    If Sluice then speaks TLS, it finishes the handshake, takes whatever
    comes and answers every command with OK; `commands` counts them."""

    def __init__(self, port, certs):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certs / "server.pem",
                                 certs / "server-key.pem")
        self.sock = socket.create_server((st.HOST, port))
        self.sock.settimeout(0.5)
        self.commands = 0
        self.tls_logins = 0
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(conn,),
                             daemon=True).start()

    @staticmethod
    def _read_packet(conn):
        hdr = b""
        while len(hdr) < 4:
            chunk = conn.recv(4 - len(hdr))
            if not chunk:
                return None
            hdr += chunk
        n = int.from_bytes(hdr[:3], "little")
        body = b""
        while len(body) < n:
            chunk = conn.recv(n - len(body))
            if not chunk:
                return None
            body += chunk
        return hdr[3], body

    def _serve(self, conn):
        ok = b"\x00\x00\x00\x02\x00\x00\x00"
        try:
            conn.settimeout(30)
            conn.sendall(_greeting() + _packet(3, ok))
            if self._read_packet(conn) is None:     # the SSLRequest
                return
            tls = self.ctx.wrap_socket(conn, server_side=True)
            if self._read_packet(tls) is None:      # the login
                return
            self.tls_logins += 1
            while (pkt := self._read_packet(tls)) is not None:
                if pkt[1][:1] == b"\x01":
                    return
                self.commands += 1
                tls.sendall(_packet(pkt[0] + 1, ok))
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.sock.close()


def test_plaintext_injected_before_backend_tls_is_refused(tmp_path, certs):
    """Bytes a server sends after its greeting and before TLS is up are
    not the server's (it must wait for the SSLRequest): Sluice fails that
    backend connection and says why, instead of reading them as the login
    reply. db1-accounts only lends its accounts: no monitor watches it
    and it is not running, so nothing is routed to it."""
    evil = EvilServer(EVIL_PORTS["server"], certs)
    text = sluice_config(tmp_path, st.port(4703), st.port(4704))
    text = text.replace("admin_enabled=false",
                        f"admin_host={st.HOST}\n"
                        f"admin_port={EVIL_PORTS['admin']}")
    text += f"""
[evil]
type=server
address={st.HOST}
port={EVIL_PORTS['server']}
ssl=true

[db1-accounts]
type=server
address={st.HOST}
port={st.SERVERS[1]}

[Evil-Service]
type=service
router=readconnroute
router_options=running
servers=db1-accounts,evil
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[Evil-Listener]
type=listener
service=Evil-Service
address={st.HOST}
port={EVIL_PORTS['listener']}
"""
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir()
    cfg = tmp_path / "sluice.cnf"
    cfg.write_text(text)
    daemon = Daemon(st.sluice_argv("start", cfg), tmp_path / "proxy.log",
                    st.sluice_env())
    try:
        daemon.wait_ports([EVIL_PORTS["listener"], EVIL_PORTS["admin"]])
        _admin_put(EVIL_PORTS["admin"], "/servers/evil/set?state=running")
        with pytest.raises(pymysql.err.MySQLError):
            with st.connect(EVIL_PORTS["listener"], connect_timeout=20,
                            read_timeout=30) as conn:
                st.scalar(conn, "SELECT 1")
        log = daemon.log_tail(200)
        assert "plaintext bytes arrived before TLS started" in log, log
        assert evil.tls_logins == 0 and evil.commands == 0, log
    finally:
        problems = daemon.stop()
        evil.close()
    assert not problems, problems


def _admin_put(port, path):
    req = urllib.request.Request(f"http://{st.HOST}:{port}/v1{path}",
                                 method="PUT")
    tok = base64.b64encode(b"admin:mariadb").decode()
    req.add_header("Authorization", "Basic " + tok)
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status in (200, 204), resp.status


# ---- Sluice's own libmariadb connections (monitor, accounts) over TLS ----

TLS_ACCOUNT = ("sl_tls_only", "sl_tls_only_pw")


@pytest.fixture
def tls_only_account(tls_backend):
    """A service/monitor account that the servers refuse without TLS."""
    user, pw = TLS_ACCOUNT
    grants = ["SELECT ON mysql.*", "SHOW DATABASES, REPLICATION CLIENT, "
              "SLAVE MONITOR ON *.*"]
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE OR REPLACE USER '{user}'@'%' IDENTIFIED BY "
                    f"'{pw}' REQUIRE SSL")
        for g in grants:
            cur.execute(f"GRANT {g} TO '{user}'@'%'")
    st.wait_replicated()
    yield TLS_ACCOUNT
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")


def test_monitor_and_account_loading_use_server_tls(tmp_path, certs,
                                                    tls_only_account):
    """With ssl=true on a server, the monitor and the account loader log
    in over TLS too: their account has REQUIRE SSL, so the server's
    status (set by the monitor) and the accounts (loaded from it) both
    depend on it."""
    user, pw = tls_only_account
    with pytest.raises(pymysql.err.OperationalError) as err:
        st.connect(st.SERVERS[TLS_SERVER], user=user, password=pw).close()
    assert st.error_code(err.value) == 1045, "the account must need TLS"
    port = st.port(4710)
    text = sluice_config(tmp_path, st.port(4711), st.port(4712)) + f"""
[db3-tls-only]
type=server
address={st.HOST}
port={st.SERVERS[TLS_SERVER]}
ssl=true
ssl_ca={certs}/ca.pem
ssl_verify_peer_certificate=true
ssl_verify_peer_host=true
ssl_version=TLSv12,TLSv13

[TLS-Monitor]
type=monitor
module=basicmon
servers=db3-tls-only
user={user}
password={pw}
monitor_interval=500ms

[TLS-Account-Service]
type=service
router=readconnroute
router_options=running
servers=db3-tls-only
user={user}
password={pw}

[TLS-Account-Listener]
type=listener
service=TLS-Account-Service
address={st.HOST}
port={port}
"""
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir()
    cfg = tmp_path / "sluice.cnf"
    cfg.write_text(text)
    daemon = Daemon(st.sluice_argv("start", cfg), tmp_path / "proxy.log",
                    st.sluice_env())
    try:
        daemon.wait_ports([port])

        def routed():
            with st.connect(port, connect_timeout=5) as conn:
                return st.server_id(conn) == TLS_SERVER
        try:
            st.wait_until(routed, 30, interval=0.5,
                          what="a login through the TLS-only account")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{daemon.log_tail(30)}")
        with st.root(TLS_SERVER) as conn:
            seen = st.scalar(conn, "SELECT COUNT(*) FROM "
                             "information_schema.PROCESSLIST WHERE "
                             "USER = %s", (user,))
        assert seen >= 1, "the monitor keeps a (TLS) connection open"
        assert "cannot load user accounts" not in daemon.log_tail(500)
    finally:
        problems = daemon.stop()
    assert not problems, problems


# ---- accounts' REQUIRE clauses, checked against the client's own TLS ----

@pytest.fixture
def require_accounts(tls_backend):
    """Accounts with REQUIRE clauses (made on the primary, replicated to
    the TLS server), and the service user may read mysql.global_priv."""
    accounts = {
        "req_ssl": "REQUIRE SSL",
        "req_subject": "REQUIRE SUBJECT '/CN=sluice test client'",
        "req_issuer": "REQUIRE ISSUER '/CN=Sluice test otherca'",
    }
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        for host in ("%", "localhost"):
            cur.execute(f"GRANT SELECT ON mysql.global_priv TO "
                        f"'{st.SERVICE_USER}'@'{host}'")
        for user, req in accounts.items():
            cur.execute(f"CREATE OR REPLACE USER '{user}'@'%' IDENTIFIED "
                        f"BY 'pw' {req}")
    st.wait_replicated()
    yield accounts
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        for user in accounts:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")


def _login_code(port, user, password="pw", **kw):
    """None when user logs in and runs a statement, else the error code."""
    try:
        with st.connect(port, user=user, password=password, **kw) as conn:
            st.scalar(conn, "SELECT 1")
        return None
    except pymysql.err.MySQLError as exc:
        return st.error_code(exc)


def test_account_require_clause_checks_the_client(tmp_path, certs,
                                                  require_accounts):
    """The server sees only Sluice's TLS link (and Sluice's certificate):
    Sluice itself must refuse a plain client of a REQUIRE SSL account and
    a client certificate with the wrong subject or issuer, with 1045."""
    if not (certs / "intruder.pem").exists():
        st.make_cert(certs, "intruder", "ca", "/CN=intruder")
    plain, tls = st.port(4720), st.port(4721)
    text = sluice_config(tmp_path, st.port(4722), st.port(4723)) + f"""
[db3-req]
type=server
address={st.HOST}
port={st.SERVERS[TLS_SERVER]}
ssl=true
ssl_ca={certs}/ca.pem
ssl_cert={certs}/client.pem
ssl_key={certs}/client-key.pem

[Req-Monitor]
type=monitor
module=basicmon
servers=db3-req
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
monitor_interval=500ms

[Req-Service]
type=service
router=readconnroute
router_options=running
servers=db3-req
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[Req-Plain-Listener]
type=listener
service=Req-Service
address={st.HOST}
port={plain}

[Req-TLS-Listener]
type=listener
service=Req-Service
address={st.HOST}
port={tls}
ssl=true
ssl_cert={certs}/server.pem
ssl_key={certs}/server-key.pem
ssl_ca={certs}/ca.pem
ssl_verify_peer_certificate=true
"""
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir()
    cfg = tmp_path / "sluice.cnf"
    cfg.write_text(text)
    daemon = Daemon(st.sluice_argv("start", cfg), tmp_path / "proxy.log",
                    st.sluice_env())

    def cert(name):
        return {"ca": str(certs / "ca.pem"),
                "cert": str(certs / f"{name}.pem"),
                "key": str(certs / f"{name}-key.pem")}
    try:
        daemon.wait_ports([plain, tls])
        st.wait_until(lambda: _login_code(plain, st.APP_USER,
                                          st.APP_PASSWORD) is None, 30,
                      interval=0.5, what="the TLS backend")
        # a client without TLS, though Sluice's own link is TLS
        assert _login_code(plain, "req_ssl") == 1045
        assert _login_code(tls, "req_ssl", ssl=cert("client")) is None
        assert _login_code(tls, "req_subject", ssl=cert("client")) is None
        assert _login_code(tls, "req_subject", ssl=cert("intruder")) == 1045
        assert _login_code(tls, "req_issuer", ssl=cert("client")) == 1045
        log = daemon.log_tail(200)
        assert "'req_ssl'@'127.0.0.1' refused: 1045" in log, log
    finally:
        problems = daemon.stop()
    assert not problems, problems


# ---- ssl_crl, and the warning for unverified server certificates ----

def test_ssl_crl_and_unverified_server_warning(tmp_path, certs, tls_backend):
    """ssl_crl is honoured on both sides: a revoked client certificate is
    refused by the listener, a server whose certificate is revoked is
    refused by Sluice's backend connection. A server with ssl=true and no
    certificate verification gets a warning at start-up. (The db3
    services load their accounts from db1-accounts, which nothing routes
    to: it is not running for want of a monitor.)"""
    if not (certs / "revoked.pem").exists():
        st.make_cert(certs, "revoked", "ca", "/CN=revoked client")
    crl_client = st.revoke_cert(certs, "revoked", "client")
    crl_server = st.revoke_cert(certs, "server", "server")
    listener, admin = st.port(4730), st.port(4731)
    text = sluice_config(tmp_path, st.port(4732), st.port(4733))
    text = text.replace("admin_enabled=false",
                        f"admin_host={st.HOST}\nadmin_port={admin}")
    for name, crl in (("db3-ok", crl_client), ("db3-revoked", crl_server)):
        text += f"""
[{name}]
type=server
address={st.HOST}
port={st.SERVERS[TLS_SERVER]}
ssl=true
ssl_ca={certs}/ca.pem
ssl_verify_peer_certificate=true
ssl_crl={crl}

[{name}-Service]
type=service
router=readconnroute
router_options=running
servers=db1-accounts,{name}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[{name}-Listener]
type=listener
service={name}-Service
address={st.HOST}
port={listener + (1 if name == "db3-revoked" else 2) * 10}
"""
    text += f"""
[db1-accounts]
type=server
address={st.HOST}
port={st.SERVERS[st.PRIMARY_ID]}

[db3-unverified]
type=server
address={st.HOST}
port={st.SERVERS[TLS_SERVER]}
ssl=true

[CRL-Listener]
type=listener
service=Primary-Service
address={st.HOST}
port={listener}
ssl=true
ssl_cert={certs}/server.pem
ssl_key={certs}/server-key.pem
ssl_ca={certs}/ca.pem
ssl_verify_peer_certificate=true
ssl_crl={crl_client}
"""
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir()
    cfg = tmp_path / "sluice.cnf"
    cfg.write_text(text)
    daemon = Daemon(st.sluice_argv("start", cfg), tmp_path / "proxy.log",
                    st.sluice_env())

    def cert(name):
        return {"ca": str(certs / "ca.pem"),
                "cert": str(certs / f"{name}.pem"),
                "key": str(certs / f"{name}-key.pem")}
    try:
        daemon.wait_ports([listener, listener + 10, listener + 20, admin])
        for name in ("db3-ok", "db3-revoked"):
            _admin_put(admin, f"/servers/{name}/set?state=running")
        st.wait_until(lambda: _login_code(listener, st.APP_USER,
                                          st.APP_PASSWORD,
                                          ssl=cert("client")) is None,
                      30, interval=0.5, what="a client certificate login")
        assert _login_code(listener, st.APP_USER, st.APP_PASSWORD,
                           ssl=cert("revoked")) is not None
        with st.connect(listener + 20) as conn:
            assert st.server_id(conn) == TLS_SERVER
        assert _login_code(listener + 10, st.APP_USER,
                           st.APP_PASSWORD) is not None
        log = daemon.log_tail(300)
        assert log.count("certificate: certificate revoked") >= 2, log
        assert ("server 'db3-unverified' has ssl=true but "
                "ssl_verify_peer_certificate=false") in log, log
        assert "server 'db3-ok' has ssl=true but" not in log, log
    finally:
        problems = daemon.stop()
    assert not problems, problems
