# SPDX-License-Identifier: Apache-2.0
"""Clients that insist on caching_sha2_password (docs/authentication.md,
"caching_sha2_password toward clients"), for mysql_native_password
accounts, through both routers, by @@server_id:

- the first login of an account does the full authentication: over TLS
  the client sends its password; on a plain connection it asks for
  Sluice's RSA public key (0x02) and sends the password encrypted with it
  (RSA-OAEP); Sluice checks it against the native hash and caches
  SHA256(password) (the log says which: "(TLS, ...)" or "(RSA, ...)");
- a second login takes the fast path (0x03): the proxy's info log says
  so, per service, and no full authentication is logged again;
- a wrong password is 1045 with the server's message on every path, also
  with a cached entry (the fast path fails, the full one too);
- a changed password (ALTER USER) makes the cached entry useless;
- a client that sends its password in clear on a plain connection (the
  `mariadb` CLI: Debian's libmariadb is built with GnuTLS, which has no
  RSA; mysql-connector-python's pure-Python plugin) is refused with 1045
  and a warning, as MySQL refuses it;
- an RSA answer that does not decrypt is 1045 and closes only that
  connection.

Clients: the `mariadb` CLI with `--default-auth=caching_sha2_password`,
mysql-connector-python with `auth_plugin='caching_sha2_password'`, and
PyMySQL made to open with caching_sha2_password (as it does against a
MySQL 8 server, whose default plugin it is) for the RSA exchange: it
asks for the key and encrypts with the `cryptography` package.

Before Sluice answered caching_sha2_password itself, every such client
was switched to mysql_native_password: no fast-path or full-authentication
line is ever logged, and the plain-connection PyMySQL login never asks for
a key, so every test here except the last fails on such a Sluice.
"""

import socket
import struct
import subprocess
import uuid

import pymysql

import pytest

import proxy as px
import sluicetest as st
from hostile import greeting_scramble, packet

pytestmark = pytest.mark.skipif(px.PROXY != "sluice",
                                reason="Sluice's own authentication")

TLS_PRIMARY, TLS_REPLICA, TLS_RW = st.port(5710), st.port(5711), \
    st.port(5712)
PLAIN_PRIMARY, PLAIN_REPLICA, PLAIN_RW = st.port(5713), st.port(5714), \
    st.port(5715)
PW = "sha2-Pw_1"
SQL = "SELECT CURRENT_USER(), @@server_id"
SERVICES = {"readconnroute-primary": ("Primary-Service", {st.PRIMARY_ID}),
            "readconnroute-replica": ("Replica-Service", st.REPLICA_IDS),
            "readwritesplit": ("RW-Service", st.REPLICA_IDS)}
TLS_PORTS = {"readconnroute-primary": TLS_PRIMARY,
             "readconnroute-replica": TLS_REPLICA,
             "readwritesplit": TLS_RW}
PLAIN_PORTS = {"readconnroute-primary": PLAIN_PRIMARY,
               "readconnroute-replica": PLAIN_REPLICA,
               "readwritesplit": PLAIN_RW}


N_USERS = 32


@pytest.fixture(scope="module")
def users():
    """Fresh native accounts, made before the proxy loads the accounts
    (a new account would cost a reload, which failed logins from the
    same host may have used up): each test takes unused ones, with
    nothing cached for them."""
    names = [f"sha2_{uuid.uuid4().hex[:8]}" for _ in range(N_USERS)]
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        for host in ("%", "localhost"):
            cur.execute(f"GRANT SELECT ON mysql.global_priv TO "
                        f"'{st.SERVICE_USER}'@'{host}'")
        for name in names:
            cur.execute(f"CREATE USER '{name}'@'%' IDENTIFIED BY '{PW}'")
            cur.execute(f"GRANT SELECT ON test.* TO '{name}'@'%'")
    st.wait_replicated()
    yield names[:]
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        for name in names:
            cur.execute(f"DROP USER IF EXISTS '{name}'@'%'")
    st.wait_replicated()


@pytest.fixture
def user(users, proxy):
    return users.pop()


@pytest.fixture(scope="module")
def proxy(users, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("proxy-caching-sha2")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-nodes", "-days", "2", "-keyout", "key.pem", "-out",
                    "cert.pem", "-subj", "/CN=localhost"], cwd=run_dir,
                   check=True, capture_output=True, timeout=60)
    tls = (f"ssl=true\nssl_cert={run_dir}/cert.pem\n"
           f"ssl_key={run_dir}/key.pem\n")
    text = (px.sluice_config(run_dir, TLS_PRIMARY, TLS_REPLICA,
                             sock=run_dir / "replica.sock",
                             extra="log_info=true\n"
                             "max_auth_errors_until_block=0") +
            px.rw_service("RW-Service", TLS_RW))
    text = text.replace("protocol=MariaDBClient\naddress",
                        "protocol=MariaDBClient\n" + tls + "address")
    for route, (service, _) in SERVICES.items():
        text += f"""
[Plain-{service}]
type=listener
service={service}
protocol=MariaDBClient
address={st.HOST}
port={PLAIN_PORTS[route]}
"""
    def ready():
        def rw_answers():
            with st.connect(PLAIN_RW, connect_timeout=5) as conn:
                return st.server_id(conn) in st.REPLICA_IDS
        st.wait_until(rw_answers, 30, interval=0.2, what="the RW service")
    ports = list(TLS_PORTS.values()) + list(PLAIN_PORTS.values())
    yield from px.serve(px.start_text(run_dir, text, PLAIN_PRIMARY,
                                      PLAIN_REPLICA, ports, ready))


def cli(port, user, password, tls):
    argv = ["mariadb", "--no-defaults", f"-u{user}", f"-p{password}",
            f"-h{st.HOST}", f"-P{port}", "--protocol=tcp",
            "--default-auth=caching_sha2_password", "--batch",
            "--skip-column-names", "--connect-timeout=10", "-e", SQL]
    if tls:
        argv.insert(3, "--ssl")
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


CONNECTOR_SCRIPT = r"""
import sys
import mysql.connector
host, port, user, pw, tls = sys.argv[1:6]
kw = {} if tls == "1" else {"ssl_disabled": True}
try:
    conn = mysql.connector.connect(host=host, port=int(port), user=user,
                                   password=pw, use_pure=True,
                                   auth_plugin="caching_sha2_password",
                                   autocommit=True,
                                   **kw)
except mysql.connector.Error as e:
    print("ERROR", e.errno, e.msg)
    sys.exit(3)
cur = conn.cursor()
cur.execute("SELECT CURRENT_USER(), @@server_id")
u, sid = cur.fetchone()
print(u, sid)
conn.close()
"""


def connector(port, user, password, tls):
    return subprocess.run(
        [str(st.connector_python()), "-c", CONNECTOR_SCRIPT, st.HOST,
         str(port), user, password, "1" if tls else "0"],
        capture_output=True, text=True, timeout=120)


def fast_lines(proxy, user, service, host="127.0.0.1"):
    """How often the log says user took the fast path on service."""
    log = (proxy.run_dir / "proxy.log").read_text(errors="replace")
    return log.count(f"client '{user}'@'{host}' logged in by caching_sha2_"
                     f"password's fast authentication (service "
                     f"'{service}')")


def full_lines(proxy, user, service, how, host="127.0.0.1"):
    """How often the log says user passed the full authentication (how:
    TLS, RSA or unix socket) on service."""
    log = (proxy.run_dir / "proxy.log").read_text(errors="replace")
    return log.count(f"client '{user}'@'{host}' passed caching_sha2_"
                     f"password's full authentication ({how}, service "
                     f"'{service}')")


def logged_in(proc, user, sids):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    user_host, sid = proc.stdout.split()
    assert user_host == f"{user}@%"
    assert int(sid) in sids


def wait_count(fn, want, what):
    st.wait_until(lambda: fn() == want, 10, interval=0.1, what=what)
    assert fn() == want


class Sha2Connection(pymysql.connections.Connection):
    """PyMySQL opening with caching_sha2_password whatever the handshake
    names (as it does against MySQL 8)."""

    def _get_server_information(self):
        super()._get_server_information()
        self._auth_plugin_name = "caching_sha2_password"


def pymysql_login(port, user, password, tls):
    """(CURRENT_USER(), @@server_id), or the pymysql error raised."""
    kw = {"ssl": {"check_hostname": False}} if tls else {}
    conn = Sha2Connection(host=st.HOST, port=port, user=user,
                          password=password, connect_timeout=10,
                          autocommit=True, **kw)
    try:
        with conn.cursor() as cur:
            cur.execute(SQL)
            u, sid = cur.fetchone()
            return u, int(sid)
    finally:
        conn.close()


def pymysql_logged_in(port, user, password, tls, sids):
    u, sid = pymysql_login(port, user, password, tls)
    assert u == f"{user}@%"
    assert sid in sids


def pymysql_denied(port, user, password, tls):
    with pytest.raises(pymysql.err.OperationalError) as exc:
        pymysql_login(port, user, password, tls)
    assert exc.value.args[0] == 1045, exc.value.args
    assert exc.value.args[1] == (f"Access denied for user '{user}'@"
                                 "'127.0.0.1' (using password: YES)")


def cli_denied(proc, user):
    assert st.cli_error_code(proc) == 1045, proc.stderr
    assert (f"Access denied for user '{user}'@'127.0.0.1' "
            "(using password: YES)") in proc.stderr


def log_text(proxy):
    return (proxy.run_dir / "proxy.log").read_text(errors="replace")


@pytest.mark.parametrize("route", SERVICES)
def test_cli_tls_full_then_fast(proxy, user, route):
    service, sids = SERVICES[route]
    port = TLS_PORTS[route]
    assert fast_lines(proxy, user, service) == 0
    logged_in(cli(port, user, PW, True), user, sids)
    wait_count(lambda: full_lines(proxy, user, service, "TLS"), 1,
               "the full authentication in the log")
    assert fast_lines(proxy, user, service) == 0
    # the same account again: SHA256(pw) is cached, the fast path passes
    for n in (1, 2):
        logged_in(cli(port, user, PW, True), user, sids)
        wait_count(lambda: fast_lines(proxy, user, service), n,
                   "the fast authentication in the log")
    assert full_lines(proxy, user, service, "TLS") == 1


@pytest.mark.parametrize("route", SERVICES)
@pytest.mark.parametrize("tls", [True, False], ids=["tls", "rsa"])
def test_pymysql_full_then_fast(proxy, user, route, tls):
    service, sids = SERVICES[route]
    port = (TLS_PORTS if tls else PLAIN_PORTS)[route]
    how = "TLS" if tls else "RSA"
    pymysql_logged_in(port, user, PW, tls, sids)
    wait_count(lambda: full_lines(proxy, user, service, how), 1,
               "the full authentication in the log")
    assert fast_lines(proxy, user, service) == 0
    pymysql_logged_in(port, user, PW, tls, sids)
    wait_count(lambda: fast_lines(proxy, user, service), 1,
               "the fast authentication in the log")
    assert full_lines(proxy, user, service, how) == 1


@pytest.mark.parametrize("client", ["cli-tls", "pymysql-tls",
                                    "pymysql-rsa"])
def test_wrong_password(proxy, user, client):
    port = (PLAIN_PORTS if client == "pymysql-rsa"
            else TLS_PORTS)["readwritesplit"]
    tls = client != "pymysql-rsa"

    def denied():
        if client == "cli-tls":
            cli_denied(cli(port, user, "wrong", True), user)
        else:
            pymysql_denied(port, user, "wrong", tls)

    def right():
        if client == "cli-tls":
            logged_in(cli(port, user, PW, True), user, st.REPLICA_IDS)
        else:
            pymysql_logged_in(port, user, PW, tls, st.REPLICA_IDS)

    denied()                # nothing cached: the full authentication fails
    right()
    denied()                # cached: fast path fails, then the full one
    right()                 # and the right one takes the fast path
    wait_count(lambda: fast_lines(proxy, user, "RW-Service"), 1,
               "the fast authentication in the log")


@pytest.mark.parametrize("route", ["readconnroute-primary",
                                   "readwritesplit"])
def test_connector_python_tls(proxy, user, route):
    service, sids = SERVICES[route]
    port = TLS_PORTS[route]
    for n in (0, 1):
        proc = connector(port, user, PW, True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        u, sid = proc.stdout.split()
        assert u == f"{user}@%" and int(sid) in sids
        wait_count(lambda: fast_lines(proxy, user, service), n,
                   "the fast authentication in the log")
    assert full_lines(proxy, user, service, "TLS") == 1
    proc = connector(port, user, "wrong", True)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.startswith(
        f"ERROR 1045 Access denied for user '{user}'@'127.0.0.1' "
        "(using password: YES)"), proc.stdout


def test_password_in_clear_on_plain_connection_refused(proxy, user):
    """Clients without RSA send the password in clear after 0x04: refused
    (1045) as the server refuses it, with a warning that says why. The
    same account logs in over TLS."""
    port = PLAIN_PORTS["readwritesplit"]
    cli_denied(cli(port, user, PW, False), user)
    proc = connector(port, user, PW, False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ERROR 1045 "), proc.stdout
    line = (f"client '{user}'@'127.0.0.1' sent its password in clear on "
            "a plain connection (listener 'Plain-RW-Service'): refused")
    st.wait_until(lambda: log_text(proxy).count(line) == 2, 10, what=line)
    logged_in(cli(TLS_RW, user, PW, True), user, st.REPLICA_IDS)


@pytest.mark.parametrize("answer", ["zeros", "short", "random"])
def test_bad_rsa_answer_closes_only_that_client(proxy, user, answer):
    """The wire: caching_sha2_password with a fast-path token that cannot
    match, 0x04, 0x02, the PEM key, then an answer that is not the
    password encrypted with it: 1045, that connection closes, others log
    in."""
    sock = socket.create_connection((st.HOST, PLAIN_RW), timeout=10)
    with sock:
        _, greeting = st.recv_packet(sock)
        greeting_scramble(greeting)
        caps = (0x00000001 | 0x00000200 | 0x00002000 | 0x00008000 |
                0x00080000)
        token = b"\x11" * 32
        payload = (struct.pack("<IIB", caps, 1 << 24, 45) + b"\0" * 23 +
                   user.encode() + b"\0" + bytes([len(token)]) + token +
                   b"caching_sha2_password\0")
        sock.sendall(packet(1, payload))
        seq, body = st.recv_packet(sock)
        assert (seq, body) == (2, b"\x01\x04")
        sock.sendall(packet(3, b"\x02"))
        seq, body = st.recv_packet(sock)
        assert seq == 4 and body.startswith(b"\x01-----BEGIN PUBLIC KEY-----")
        size = {"zeros": 256, "short": 100, "random": 256}[answer]
        data = (b"\0" * size if answer == "zeros"
                else uuid.uuid4().bytes * (size // 16) + b"x" * (size % 16))
        sock.sendall(packet(5, data))
        seq, body = st.recv_packet(sock)
        assert seq == 6 and body[:1] == b"\xff", body
        assert struct.unpack("<H", body[1:3])[0] == 1045
        assert sock.recv(1) == b""
    pymysql_logged_in(PLAIN_RW, user, PW, False, st.REPLICA_IDS)


def test_changed_password_drops_the_cached_hash(proxy, user):
    port = TLS_PORTS["readwritesplit"]
    logged_in(cli(port, user, PW, True), user, st.REPLICA_IDS)
    logged_in(cli(port, user, PW, True), user, st.REPLICA_IDS)
    wait_count(lambda: fast_lines(proxy, user, "RW-Service"), 1,
               "the fast authentication in the log")
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute(f"ALTER USER '{user}'@'%' IDENTIFIED BY 'newpw'")
    st.wait_replicated()
    # the old password's token does not match the new hash: the cached
    # entry is wiped, Sluice reloads the accounts on the failed check
    # and takes the new password (a reload a failed login may trigger
    # is rationed per host: earlier tests may have used them up)
    st.wait_until(lambda: cli(port, user, "newpw", True).returncode == 0,
                  30, interval=1, what="the new password to log in")
    cli_denied(cli(port, user, PW, True), user)
    logged_in(cli(port, user, "newpw", True), user, st.REPLICA_IDS)
    wait_count(lambda: fast_lines(proxy, user, "RW-Service"), 2,
               "the fast authentication in the log")


def test_cli_unix_socket_full_then_fast(proxy, user):
    """A unix socket counts as secure, as on MySQL: the CLI sends the
    password in clear after 0x04 and it is taken; then the fast path."""
    sock = proxy.run_dir / "replica.sock"
    argv = ["mariadb", "--no-defaults", f"-u{user}", f"-p{PW}",
            f"--socket={sock}", "--default-auth=caching_sha2_password",
            "--batch", "--skip-column-names", "-e", SQL]
    for n in (0, 1):
        proc = subprocess.run(argv, capture_output=True, text=True,
                              timeout=60)
        logged_in(proc, user, st.REPLICA_IDS)
        wait_count(lambda: fast_lines(proxy, user, "Replica-Service",
                                      "localhost"), n,
                   "the fast authentication in the log")
    assert full_lines(proxy, user, "Replica-Service", "unix socket",
                      "localhost") == 1


def test_native_clients_unchanged(proxy, user):
    """A client that opens with mysql_native_password (PyMySQL) logs in
    as before on both kinds of listener, without the fast path."""
    for port in (PLAIN_RW, TLS_RW):
        kw = {"ssl": {"check_hostname": False}} if port == TLS_RW else {}
        with st.connect(port, user=user, password=PW, **kw) as conn:
            assert st.server_id(conn) in st.REPLICA_IDS
    assert fast_lines(proxy, user, "RW-Service") == 0
    assert full_lines(proxy, user, "RW-Service", "TLS") == 0
