# SPDX-License-Identifier: Apache-2.0
"""ed25519 accounts through Sluice (docs/authentication.md): clients log in
with MariaDB's client_ed25519 plugin on listeners with
`authenticator=MariaDBAuth,ed25519auth`, and Sluice logs in to the
servers with the credential the listener's user_mapping_file gives.

The accounts (created here on the primary, replicated, dropped after; the
auth_ed25519 plugin is installed on each sandbox server when missing):

  eself   IDENTIFIED VIA ed25519 USING PASSWORD('edpw'), mapped to itself
          with its ed25519 password (Sluice signs the servers' nonces)
  emap    ed25519 ('edpw'), mapped to nback
  nback   mysql_native_password 'backpw' (only a backend account)
  eunm    ed25519 ('edpw'), not mapped: no credential for the servers
  nat     mysql_native_password 'natpw', not mapped: as always

A second proxy has listeners with `authenticator_options=ed_mode=sha256`
(no mapping file): over TLS the client sends its password
(caching_sha2_password's full authentication), or RSA-encrypted on a
plain connection, Sluice checks it against the stored key and signs the
servers' nonces itself.

CURRENT_USER() and @@server_id on the backend prove the backend login.
Every test here fails on a Sluice without client_ed25519 (the listener
parameters were refused)."""

import json
import subprocess
import socket
import struct
import uuid

import pymysql
import pytest

import proxy as px
import sluicetest as st
from hostile import greeting_scramble, native_token, packet

pytestmark = pytest.mark.skipif(px.PROXY != "sluice",
                                reason="Sluice's own authentication")

PRIMARY_PORT, REPLICA_PORT, RW_PORT = st.port(5620), st.port(5621), \
    st.port(5622)
ED_PW, BACK_PW, NAT_PW = "edpw", "backpw", "natpw"
LISTENER_AUTH = "authenticator=MariaDBAuth,ed25519auth\n"


def ensure_ed25519():
    """auth_ed25519 loaded on every sandbox server (INSTALL SONAME is
    local to each server and persists)."""
    for sid in st.SERVERS:
        with st.root(sid) as conn, conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.plugins "
                        "WHERE plugin_name = 'ed25519' AND "
                        "plugin_status = 'ACTIVE'")
            if cur.fetchone()[0] == 0:
                cur.execute("INSTALL SONAME 'auth_ed25519'")


@pytest.fixture(scope="module")
def users():
    ensure_ed25519()
    tag = uuid.uuid4().hex[:6]
    names = {k: f"{k}_{tag}" for k in ("eself", "emap", "nback", "eunm",
                                       "nat")}
    specs = {
        "eself": f"ed25519 USING PASSWORD('{ED_PW}')",
        "emap": f"ed25519 USING PASSWORD('{ED_PW}')",
        "eunm": f"ed25519 USING PASSWORD('{ED_PW}')",
        "nback": f"mysql_native_password USING PASSWORD('{BACK_PW}')",
        "nat": f"mysql_native_password USING PASSWORD('{NAT_PW}')",
    }
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        for host in ("%", "localhost"):
            cur.execute(f"GRANT SELECT ON mysql.global_priv TO "
                        f"'{st.SERVICE_USER}'@'{host}'")
        for key, spec in specs.items():
            cur.execute(f"CREATE USER '{names[key]}'@'%' IDENTIFIED VIA "
                        f"{spec}")
            cur.execute(f"GRANT SELECT ON test.* TO '{names[key]}'@'%'")
    st.wait_replicated()
    yield names
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        for name in names.values():
            cur.execute(f"DROP USER IF EXISTS '{name}'@'%'")
    st.wait_replicated()


def mapping(names):
    return {
        "user_map": [
            {"original_user": names["eself"], "mapped_user": names["eself"]},
            {"original_user": names["emap"], "mapped_user": names["nback"]},
        ],
        "server_credentials": [
            {"mapped_user": names["eself"], "password": ED_PW,
             "plugin": "ed25519"},
            {"mapped_user": names["nback"], "password": BACK_PW,
             "plugin": "mysql_native_password"},
        ],
    }


@pytest.fixture(scope="module")
def proxy(users, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("proxy-ed25519")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    map_file = run_dir / "mapping.json"
    map_file.write_text(json.dumps(mapping(users)))
    text = (px.sluice_config(run_dir, PRIMARY_PORT, REPLICA_PORT) +
            px.rw_service("RW-Service", RW_PORT))
    text = text.replace("protocol=MariaDBClient\n",
                        "protocol=MariaDBClient\n" + LISTENER_AUTH +
                        f"user_mapping_file={map_file}\n")
    ports = [PRIMARY_PORT, REPLICA_PORT, RW_PORT]
    yield from px.serve(px.start_text(run_dir, text, PRIMARY_PORT,
                                      REPLICA_PORT, ports))


# (port, server ids a plain SELECT may come from)
ROUTES = {"readconnroute-primary": (PRIMARY_PORT, {st.PRIMARY_ID}),
          "readconnroute-replica": (REPLICA_PORT, st.REPLICA_IDS),
          "readwritesplit": (RW_PORT, st.REPLICA_IDS)}
SQL = "SELECT CURRENT_USER(), @@server_id"


def whoami_cli(port, user, password):
    proc = st.cli(SQL, port=port, user=user, password=password)
    assert proc.returncode == 0, proc.stderr
    user_host, sid = proc.stdout.split()
    return user_host, int(sid)


def whoami_c(port, user, password):
    proc = st.c_client(port, "query", SQL, user=user, password=password)
    assert proc.returncode == 0, proc.stderr
    user_host, sid = proc.stdout.split()
    return user_host, int(sid)


def log_has(proxy, line):
    log = proxy.run_dir / "proxy.log"
    st.wait_until(lambda: line in log.read_text(errors="replace"), 10,
                  what=line)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("client", ["cli", "libmariadb"])
def test_ed25519_account_logs_in(proxy, users, route, client):
    """client_ed25519 to Sluice; Sluice signs each server's nonce with the
    mapped ed25519 password: the backend session is the account."""
    port, sids = ROUTES[route]
    whoami = whoami_cli if client == "cli" else whoami_c
    user_host, sid = whoami(port, users["eself"], ED_PW)
    assert user_host == f"{users['eself']}@%"
    assert sid in sids


@pytest.mark.parametrize("route", ROUTES)
def test_ed25519_user_mapped_to_native_account(proxy, users, route):
    port, sids = ROUTES[route]
    for whoami in (whoami_cli, whoami_c):
        user_host, sid = whoami(port, users["emap"], ED_PW)
        assert user_host == f"{users['nback']}@%"
        assert sid in sids


def test_native_account_unchanged(proxy, users):
    """Unmapped native accounts log in as themselves, as before."""
    assert whoami_c(RW_PORT, users["nat"], NAT_PW)[0] == f"{users['nat']}@%"


@pytest.mark.parametrize("route", ROUTES)
def test_ed25519_wrong_password(proxy, users, route):
    port, _ = ROUTES[route]
    proc = st.cli(SQL, port=port, user=users["eself"], password="wrong")
    assert st.cli_error_code(proc) == 1045, proc.stderr
    assert (f"Access denied for user '{users['eself']}'@'127.0.0.1' "
            "(using password: YES)") in proc.stderr
    proc = st.c_client(port, "query", SQL, user=users["emap"],
                       password=BACK_PW)   # the backend's, not the client's
    assert proc.returncode == 1 and "error 1045" in proc.stderr, proc.stderr


def test_unmapped_ed25519_account_refused_and_logged(proxy, users):
    """Right password, but no credential for the servers: 1045 at login
    (never half logged in), and the log says what to configure."""
    proc = st.cli(SQL, port=RW_PORT, user=users["eunm"], password=ED_PW)
    assert st.cli_error_code(proc) == 1045, proc.stderr
    log_has(proxy, f"account '{users['eunm']}'@'%' logged in with ed25519, "
            "but Sluice has no password to log in to the servers as it: "
            "map the user to a backend account in the listener's "
            "user_mapping_file")


@pytest.mark.parametrize("route", ["readconnroute-primary", "readwritesplit"])
def test_change_user_to_ed25519_account(proxy, users, route):
    port, _ = ROUTES[route]
    proc = st.c_client(port, "change_user", users["eself"], ED_PW)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == f"{users['eself']}@%", proc.stdout
    proc = st.c_client(port, "change_user", users["emap"], ED_PW)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == f"{users['nback']}@%", proc.stdout
    proc = st.c_client(port, "change_user_bad", users["eself"], "wrong")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "1045", proc.stdout


# ---- the exchange on the wire ----

def switched_to_ed25519(user):
    """Log in natively with a wrong token until Sluice asks for
    client_ed25519; returns (socket, seq of the request, nonce)."""
    sock = socket.create_connection((st.HOST, RW_PORT), timeout=10)
    _, greeting = st.recv_packet(sock)
    caps = (0x00000001 | 0x00000200 | 0x00002000 | 0x00008000 |
            0x00080000)
    token = native_token("not-the-password", greeting_scramble(greeting))
    payload = (struct.pack("<IIB", caps, 1 << 24, 45) + b"\0" * 23 +
               user.encode() + b"\0" + bytes([len(token)]) + token +
               b"mysql_native_password\0")
    sock.sendall(packet(1, payload))
    seq, body = st.recv_packet(sock)
    assert body[:1] == b"\xfe", body
    plugin, _, nonce = body[1:].partition(b"\0")
    assert plugin == b"client_ed25519"
    assert len(nonce) == 32
    return sock, seq, nonce


@pytest.mark.parametrize("answer", [b"", b"x" * 10, b"\0" * 64, b"y" * 200],
                         ids=["empty", "short", "zero-signature", "long"])
def test_malformed_signature_closes_only_that_client(proxy, users, answer):
    sock, seq, nonce = switched_to_ed25519(users["eself"])
    with sock:
        sock.sendall(packet(seq + 1, answer))
        rseq, body = st.recv_packet(sock)
        assert body[:1] == b"\xff" and struct.unpack("<H", body[1:3])[0] == \
            1045, body
        assert rseq == seq + 2
        assert sock.recv(1) == b""   # closed
    assert whoami_c(RW_PORT, users["eself"], ED_PW)[0] == \
        f"{users['eself']}@%"


def test_nonce_is_fresh(proxy, users):
    nonces = set()
    for _ in range(3):
        sock, _, nonce = switched_to_ed25519(users["eself"])
        sock.close()
        nonces.add(nonce)
    assert len(nonces) == 3


def running_on_servers(marker):
    """(server id, thread id) of statements containing marker."""
    found = []
    for sid in st.SERVERS:
        with st.root(sid) as conn, conn.cursor() as cur:
            cur.execute("SELECT id FROM information_schema.processlist "
                        "WHERE info LIKE %s AND id <> CONNECTION_ID()",
                        (f"%{marker}%",))
            found += [(sid, row[0]) for row in cur.fetchall()]
    return found


def test_kill_query_user_of_ed25519_sessions(proxy, users):
    """KILL QUERY USER through Sluice logs in to the servers as the
    sessions' backend account (signing each server's nonce with the mapped
    ed25519 password) and ends the victim's statement."""
    key = "eself"
    marker = "ek" + uuid.uuid4().hex[:8]
    victim = subprocess.Popen(
        ["mariadb", "--no-defaults", f"-u{users[key]}", f"-p{ED_PW}",
         f"-h{st.HOST}", f"-P{RW_PORT}", "--protocol=tcp", "-e",
         f"SELECT SLEEP(30) AS {marker}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        st.wait_until(lambda: running_on_servers(marker), 15,
                      what="the victim's SLEEP on a server")
        proc = st.cli(f"KILL QUERY USER '{users[key]}'", port=RW_PORT,
                      user=users[key], password=ED_PW)
        assert proc.returncode == 0, proc.stderr
        _, err = victim.communicate(timeout=10)
        assert victim.returncode != 0, err
        st.wait_until(lambda: not running_on_servers(marker), 10,
                      what="the victim's statement to end")
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()


# ---- ed_mode=sha256 ----

SHA_PRIMARY, SHA_REPLICA, SHA_RW, SHA_PLAIN = (st.port(5630), st.port(5631),
                                               st.port(5632), st.port(5633))
SHA_PLAIN_PRIMARY = st.port(5716)   # from test_caching_sha2.py's block
SHA_OPTS = ("authenticator=MariaDBAuth,ed25519auth\n"
            "authenticator_options=ed_mode=sha256\n")


@pytest.fixture(scope="module")
def sha_proxy(users, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("proxy-ed-sha256")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-nodes", "-days", "2", "-keyout", "key.pem", "-out",
                    "cert.pem", "-subj", "/CN=localhost"], cwd=run_dir,
                   check=True, capture_output=True, timeout=60)
    tls = (f"ssl=true\nssl_cert={run_dir}/cert.pem\n"
           f"ssl_key={run_dir}/key.pem\n")
    text = (px.sluice_config(run_dir, SHA_PRIMARY, SHA_REPLICA) +
            px.rw_service("RW-Service", SHA_RW))
    text = text.replace("protocol=MariaDBClient\n",
                        "protocol=MariaDBClient\n" + SHA_OPTS + tls)
    text += f"""
[Plain-Listener]
type=listener
service=RW-Service
protocol=MariaDBClient
address={st.HOST}
port={SHA_PLAIN}
{SHA_OPTS}
[Plain-Primary-Listener]
type=listener
service=Primary-Service
protocol=MariaDBClient
address={st.HOST}
port={SHA_PLAIN_PRIMARY}
{SHA_OPTS}"""
    def ready():
        def rw_answers():
            with st.connect(SHA_PLAIN, connect_timeout=5) as conn:
                return st.server_id(conn) in st.REPLICA_IDS
        st.wait_until(rw_answers, 30, interval=0.2, what="the RW service")
        st.wait_until(lambda: cli_tls(SHA_PRIMARY, st.APP_USER,
                                      st.APP_PASSWORD).returncode == 0,
                      30, interval=0.2, what="the TLS primary listener")
    ports = [SHA_PRIMARY, SHA_REPLICA, SHA_RW, SHA_PLAIN, SHA_PLAIN_PRIMARY]
    yield from px.serve(px.start_text(run_dir, text, SHA_PRIMARY,
                                      SHA_REPLICA, ports, ready))


def cli_tls(port, user, password):
    return subprocess.run(
        ["mariadb", "--no-defaults", f"-u{user}", f"-p{password}",
         f"-h{st.HOST}", f"-P{port}", "--protocol=tcp", "--ssl", "--batch",
         "--skip-column-names", "--connect-timeout=10", "-e", SQL],
        capture_output=True, text=True, timeout=60)


SHA_ROUTES = {"readconnroute-primary": (SHA_PRIMARY, {st.PRIMARY_ID}),
              "readconnroute-replica": (SHA_REPLICA, st.REPLICA_IDS),
              "readwritesplit": (SHA_RW, st.REPLICA_IDS)}


@pytest.mark.parametrize("route", SHA_ROUTES)
@pytest.mark.parametrize("key", ["eunm", "eself"])
def test_sha256_mode_over_tls(sha_proxy, users, route, key):
    """No mapping needed: the backend session is the ed25519 account."""
    port, sids = SHA_ROUTES[route]
    proc = cli_tls(port, users[key], ED_PW)
    assert proc.returncode == 0, proc.stderr
    user_host, sid = proc.stdout.split()
    assert user_host == f"{users[key]}@%"
    assert int(sid) in sids


def test_sha256_mode_wrong_password(sha_proxy, users):
    proc = cli_tls(SHA_RW, users["eunm"], "wrong")
    assert st.cli_error_code(proc) == 1045, proc.stderr
    assert (f"Access denied for user '{users['eunm']}'@'127.0.0.1' "
            "(using password: YES)") in proc.stderr


@pytest.mark.parametrize("port", [SHA_PLAIN, SHA_PLAIN_PRIMARY],
                         ids=["readwritesplit", "readconnroute-primary"])
def test_sha256_mode_plain_rsa(sha_proxy, users, port):
    """On a plain connection the password comes RSA-encrypted (PyMySQL
    asks for Sluice's public key with 0x02 and encrypts with it); the
    backend session is the ed25519 account. A wrong password is 1045."""
    sids = st.REPLICA_IDS if port == SHA_PLAIN else {st.PRIMARY_ID}
    with st.connect(port, user=users["eunm"], password=ED_PW) as conn:
        with conn.cursor() as cur:
            cur.execute(SQL)
            user_host, sid = cur.fetchone()
    assert user_host == f"{users['eunm']}@%"
    assert int(sid) in sids
    with pytest.raises(pymysql.err.OperationalError) as exc:
        st.connect(port, user=users["eunm"], password="wrong")
    assert exc.value.args == (
        1045, f"Access denied for user '{users['eunm']}'@'127.0.0.1' "
        "(using password: YES)")


def test_sha256_mode_plain_cleartext_refused(sha_proxy, users):
    """Debian's libmariadb (GnuTLS) has no RSA and sends the password in
    clear on a plain connection: refused with 1045 and a warning, as the
    server refuses it. Native accounts on the listener are unaffected."""
    proc = st.cli(SQL, port=SHA_PLAIN, user=users["eunm"], password=ED_PW)
    assert st.cli_error_code(proc) == 1045, proc.stderr
    log_has(sha_proxy, f"client '{users['eunm']}'@'127.0.0.1' sent its "
            "password in clear on a plain connection (listener "
            "'Plain-Listener'): refused")
    proc = st.cli(SQL, port=SHA_PLAIN, user=users["nat"], password=NAT_PW)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == f"{users['nat']}@%"