# SPDX-License-Identifier: Apache-2.0
"""PAM accounts through Sluice (docs/authentication.md, "PAM accounts"):
on listeners with `authenticator=MariaDBAuth,PAMAuth` Sluice runs the
account's PAM service itself (libpam, on a helper thread), asking the
client each prompt with the `dialog` plugin, or for the password with
`mysql_clear_password` when `pam_use_cleartext_plugin=true` (over TLS
only, unless `pam_allow_plain_cleartext=true`), then logs in to each
server as the same account, answering the server's own auth_pam with the
client's answers.

The test writes a PAM service /etc/pam.d/sluice-test-<pid>: pam_exec
(expose_authtok) runs a small script that accepts one user with one
password, so Sluice's PAM check and each server's auth_pam (which reads
the same /etc/pam.d through its setuid auth_pam_tool) decide alike. It
installs auth_pam on each sandbox server that lacks it, creates the
account, and removes all of it afterwards (uninstalling auth_pam only
where it installed it). It needs root (writing /etc/pam.d) and Debian's
mariadb-server plugins; CI runs as root.

CURRENT_USER() and @@server_id on the backend prove the backend login
(the server ran its own PAM conversation with the answers Sluice kept).
Every login test fails on a Sluice without PAMAuth (the listener
parameter was refused)."""

import os
import pathlib
import socket
import struct
import subprocess
import threading
import time
import uuid

import pytest

import proxy as px
import sluicetest as st
from hostile import greeting_scramble, native_token, packet

PAM_DIR = pathlib.Path("/etc/pam.d")
PAM_EXEC = pathlib.Path("/lib/x86_64-linux-gnu/security/pam_exec.so")
PLUGIN_DIR = pathlib.Path("/usr/lib/mysql/plugin")


def _cannot():
    if px.PROXY != "sluice":
        return "Sluice's own authentication"
    if os.geteuid() != 0:
        return "writing a PAM service into /etc/pam.d needs root"
    if not PAM_EXEC.exists():
        return f"no {PAM_EXEC} (libpam-modules)"
    if not (PLUGIN_DIR / "auth_pam.so").exists():
        return "no auth_pam.so (Debian's mariadb-server)"
    return None


pytestmark = pytest.mark.skipif(_cannot() is not None,
                                reason=str(_cannot()))

PRIMARY_PORT, REPLICA_PORT, RW_PORT = (st.port(5720), st.port(5721),
                                       st.port(5722))
CLEAR_RW, CLEAR_PRIMARY, CLEAR_PLAIN = (st.port(5723), st.port(5724),
                                        st.port(5725))
CLEAR_ALLOWED = st.port(5728)   # plain, pam_allow_plain_cleartext=true
PAM_PW = "pam-secret"
TOKEN = "271828"   # the second prompt's answer (multi-prompt service)
SLOW_S = 3   # the PAM check of the slow account takes this long
SQL = "SELECT CURRENT_USER(), @@server_id"
PAM_AUTH = "authenticator=MariaDBAuth,PAMAuth\n"
CLEAR_OPTS = "authenticator_options=pam_use_cleartext_plugin=true\n"


TOKEN_MODULE = r"""
#include <security/pam_ext.h>
#include <security/pam_modules.h>
#include <stdlib.h>
#include <string.h>

int pam_sm_authenticate(pam_handle_t *h, int flags, int argc,
                        const char **argv)
{
    char *resp = NULL;
    int ok;

    if (argc < 1 ||
        pam_prompt(h, PAM_PROMPT_ECHO_ON, &resp, "Token: ") != PAM_SUCCESS ||
        resp == NULL) {
        return PAM_AUTH_ERR;
    }
    /* the mariadb CLI's dialog answers with the line it read, newline
     * included */
    resp[strcspn(resp, "\r\n")] = '\0';
    ok = strcmp(resp, argv[0]) == 0;
    free(resp);
    return ok ? PAM_SUCCESS : PAM_AUTH_ERR;
}

int pam_sm_setcred(pam_handle_t *h, int flags, int argc, const char **argv)
{
    return PAM_SUCCESS;
}
"""


def install_auth_pam():
    """auth_pam loaded on every sandbox server; the ids installed here."""
    installed = []
    for sid in st.SERVERS:
        with st.root(sid) as conn, conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.plugins "
                        "WHERE plugin_name = 'pam' AND "
                        "plugin_status = 'ACTIVE'")
            if cur.fetchone()[0] == 0:
                cur.execute("INSTALL SONAME 'auth_pam'")
                installed.append(sid)
    return installed


def uninstall_auth_pam(sids):
    for sid in sids:
        with st.root(sid) as conn, conn.cursor() as cur:
            cur.execute("UNINSTALL SONAME 'auth_pam'")


@pytest.fixture(scope="module")
def pam_service(tmp_path_factory):
    """A PAM service accepting (user, PAM_PW) and (slow, PAM_PW), the
    latter after SLOW_S seconds; yields (service, user, slow)."""
    tag = uuid.uuid4().hex[:6]
    user, slow = f"pamu_{tag}", f"pams_{tag}"
    service = f"sluice-test-{os.getpid()}"
    script = tmp_path_factory.mktemp("pam") / "check.sh"
    # pam_exec writes the password NUL-terminated on the script's stdin
    script.write_text(f"""#!/bin/sh
pw=$(tr -d '\\000')
[ "$PAM_USER" = "{slow}" ] && sleep {SLOW_S} && [ "$pw" = "{PAM_PW}" ] && exit 0
[ "$PAM_USER" = "{user}" ] && [ "$pw" = "{PAM_PW}" ] && exit 0
[ "$PAM_USER" = "{two(user)}" ] && [ "$pw" = "{PAM_PW}" ] && exit 0
exit 1
""")
    script.chmod(0o755)
    script.parent.chmod(0o755)
    conf = PAM_DIR / service
    conf.write_text(f"auth required {PAM_EXEC} expose_authtok quiet "
                    f"{script}\naccount required pam_permit.so\n")
    # a second service: the password, then an echoed "Token: " prompt
    # (a small PAM module built here: no Debian module asks a second
    # question), for a conversation of two prompts
    module = script.parent / "pam_sluice_token.so"
    src = script.parent / "token.c"
    src.write_text(TOKEN_MODULE)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(module), str(src),
                    "-lpam"], check=True, capture_output=True, timeout=120)
    conf2 = PAM_DIR / f"{service}-2"
    conf2.write_text(f"auth required {PAM_EXEC} expose_authtok quiet "
                     f"{script}\nauth required {module} {TOKEN}\n"
                     "account required pam_permit.so\n")
    try:
        yield service, user, slow
    finally:
        conf.unlink(missing_ok=True)
        conf2.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def account(pam_service):
    service, user, slow = pam_service
    installed = install_auth_pam()
    try:
        with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
            for host in ("%", "localhost"):
                cur.execute(f"GRANT SELECT ON mysql.global_priv TO "
                            f"'{st.SERVICE_USER}'@'{host}'")
            for name, svc in ((user, service), (slow, service),
                              (two(user), f"{service}-2")):
                cur.execute(f"CREATE USER '{name}'@'%' IDENTIFIED VIA pam "
                            f"USING '{svc}'")
                cur.execute(f"GRANT SELECT ON test.* TO '{name}'@'%'")
        st.wait_replicated()
        yield user
    finally:
        with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
            for name in (user, slow, two(user)):
                cur.execute(f"DROP USER IF EXISTS '{name}'@'%'")
        st.wait_replicated()
        uninstall_auth_pam(installed)


def two(user):
    """The account of the two-prompt service."""
    return user.replace("pamu_", "pam2_")


@pytest.fixture(scope="module")
def slow_account(pam_service, account):
    return pam_service[2]


@pytest.fixture(scope="module")
def proxy(account, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("proxy-pam")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-nodes", "-days", "2", "-keyout", "key.pem", "-out",
                    "cert.pem", "-subj", "/CN=localhost"], cwd=run_dir,
                   check=True, capture_output=True, timeout=60)
    tls = (f"ssl=true\nssl_cert={run_dir}/cert.pem\n"
           f"ssl_key={run_dir}/key.pem\n")
    # one worker: were a PAM check run on it, every session would wait
    text = (px.sluice_config(run_dir, PRIMARY_PORT, REPLICA_PORT,
                             threads=1) +
            px.rw_service("RW-Service", RW_PORT))
    text = text.replace("protocol=MariaDBClient\n",
                        "protocol=MariaDBClient\n" + PAM_AUTH)
    for name, service, port, extra in (
            ("Clear-RW", "RW-Service", CLEAR_RW, tls),
            ("Clear-Primary", "Primary-Service", CLEAR_PRIMARY, tls),
            ("Clear-Plain", "RW-Service", CLEAR_PLAIN, ""),
            ("Clear-Allowed", "RW-Service", CLEAR_ALLOWED,
             "authenticator_options=pam_use_cleartext_plugin=true,"
             "pam_allow_plain_cleartext=true\n")):
        text += f"""
[{name}]
type=listener
service={service}
protocol=MariaDBClient
address={st.HOST}
port={port}
{PAM_AUTH}{CLEAR_OPTS if "authenticator_options" not in extra else ""}{extra}"""
    ports = [PRIMARY_PORT, REPLICA_PORT, RW_PORT, CLEAR_RW, CLEAR_PRIMARY,
             CLEAR_PLAIN, CLEAR_ALLOWED]
    yield from px.serve(px.start_text(run_dir, text, PRIMARY_PORT,
                                      REPLICA_PORT, ports))


def cli(port, user, password, *extra, stdin=None):
    return subprocess.run(
        ["mariadb", "--no-defaults", f"-u{user}", f"-p{password}",
         f"-h{st.HOST}", f"-P{port}", "--protocol=tcp", "--batch",
         "--skip-column-names", "--connect-timeout=10", *extra, "-e", SQL],
        capture_output=True, text=True, timeout=60, input=stdin)


def whoami(proc):
    """(CURRENT_USER(), @@server_id); the CLI prints an echoed PAM
    question ("[mariadb] Token: ") before the result."""
    assert proc.returncode == 0, proc.stderr
    user_host, sid = proc.stdout.split()[-2:]
    return user_host, int(sid)


def log_has(proxy, line):
    log = proxy.run_dir / "proxy.log"
    st.wait_until(lambda: line in log.read_text(errors="replace"), 10,
                  what=line)


ROUTES = {"readconnroute-primary": (PRIMARY_PORT, {st.PRIMARY_ID}),
          "readconnroute-replica": (REPLICA_PORT, st.REPLICA_IDS),
          "readwritesplit": (RW_PORT, st.REPLICA_IDS)}
CLEAR_ROUTES = {"readconnroute-primary": (CLEAR_PRIMARY, {st.PRIMARY_ID}),
                "readwritesplit": (CLEAR_RW, st.REPLICA_IDS)}


def test_server_accepts_the_account(account):
    """The premise: each server's own auth_pam accepts the password and
    refuses another (else nothing below means anything)."""
    for sid, port in st.SERVERS.items():
        assert whoami(cli(port, account, PAM_PW)) == (f"{account}@%", sid)
        assert st.cli_error_code(cli(port, account, "wrong")) == 1045


@pytest.mark.parametrize("route", ROUTES)
def test_dialog_login(proxy, account, route):
    """The mariadb CLI answers Sluice's dialog question; every server
    the session uses is logged in to as the PAM account itself."""
    port, sids = ROUTES[route]
    user_host, sid = whoami(cli(port, account, PAM_PW))
    assert user_host == f"{account}@%"
    assert sid in sids


def test_server_asks_two_prompts(account):
    """The premise of the next test: the server's auth_pam asks the
    password and then the echoed token (the CLI reads the token from its
    input), and refuses a wrong token."""
    for sid, port in st.SERVERS.items():
        proc = cli(port, two(account), PAM_PW, stdin=TOKEN + "\n")
        assert whoami(proc) == (f"{two(account)}@%", sid)
        proc = cli(port, two(account), PAM_PW, stdin="000000\n")
        assert st.cli_error_code(proc) == 1045, proc.stderr


@pytest.mark.parametrize("route", ROUTES)
def test_dialog_two_prompts(proxy, account, route):
    """Both prompts of the service reach the client (the second one
    echoed), and every server Sluice logs in to gets both answers in its
    own conversation."""
    port, sids = ROUTES[route]
    proc = cli(port, two(account), PAM_PW, stdin=TOKEN + "\n")
    assert proc.stdout.startswith("[mariadb] Token: "), proc.stdout
    user_host, sid = whoami(proc)
    assert user_host == f"{two(account)}@%"
    assert sid in sids
    proc = cli(port, two(account), PAM_PW, stdin="000000\n")
    assert st.cli_error_code(proc) == 1045, proc.stderr


def test_dialog_session_writes_through_primary(proxy, account):
    """readwritesplit's primary connection logs in too: a statement that
    must go to the primary runs there as the PAM account."""
    proc = subprocess.run(
        ["mariadb", "--no-defaults", f"-u{account}", f"-p{PAM_PW}",
         f"-h{st.HOST}", f"-P{RW_PORT}", "--protocol=tcp", "--batch",
         "--skip-column-names", "-e",
         "BEGIN; SELECT CURRENT_USER(), @@server_id; COMMIT"],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [f"{account}@%", str(st.PRIMARY_ID)]


@pytest.mark.parametrize("route", ["readconnroute-primary",
                                   "readwritesplit"])
def test_dialog_wrong_password(proxy, account, route):
    proc = cli(ROUTES[route][0], account, "wrong")
    assert st.cli_error_code(proc) == 1045, proc.stderr
    assert f"Access denied for user '{account}'@'127.0.0.1'" in proc.stderr
    log_has(proxy, f"authentication failed for '{account}'@'127.0.0.1'")


@pytest.mark.parametrize("route", CLEAR_ROUTES)
def test_cleartext_over_tls(proxy, account, route):
    port, sids = CLEAR_ROUTES[route]
    user_host, sid = whoami(cli(port, account, PAM_PW, "--ssl"))
    assert user_host == f"{account}@%"
    assert sid in sids


def test_cleartext_wrong_password(proxy, account):
    proc = cli(CLEAR_RW, account, "wrong", "--ssl")
    assert st.cli_error_code(proc) == 1045, proc.stderr


def test_cleartext_on_plain_connection_refused(proxy, account):
    """Refused before the client is asked for its password; native
    accounts on the same listener are not affected."""
    proc = cli(CLEAR_PLAIN, account, PAM_PW)
    assert st.cli_error_code(proc) == 3159, proc.stderr
    assert "mysql_clear_password, which needs TLS" in proc.stderr
    log_has(proxy, f"client {account}@127.0.0.1 refused: its pam account "
            "logs in with mysql_clear_password on listener 'Clear-Plain'")
    proc = st.cli(SQL, port=CLEAR_PLAIN)
    assert proc.returncode == 0, proc.stderr


def test_cleartext_on_plain_connection_when_allowed(proxy, account):
    """pam_allow_plain_cleartext=true: the same login without TLS works
    (the operator accepted the password in clear on the wire)."""
    user_host, sid = whoami(cli(CLEAR_ALLOWED, account, PAM_PW))
    assert user_host == f"{account}@%"
    assert sid in st.REPLICA_IDS


def test_native_account_unchanged(proxy):
    proc = st.cli(SQL, port=RW_PORT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == f"{st.APP_USER}@%"


def test_pam_account_refused_without_pamauth(account, tmp_path):
    """A listener without PAMAuth still refuses the account (1045), as
    before, with the reason in the log."""
    run_dir = tmp_path / "plain"
    port_p, port_r = st.port(5726), st.port(5727)
    text = px.sluice_config(run_dir, port_p, port_r)
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(text)
    daemon = px.Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                       st.sluice_env())
    prx = px.Proxy(daemon, port_p, port_r, None, run_dir)
    try:
        daemon.wait_ports([port_p, port_r])
        px._wait_ready(prx)
        proc = cli(port_p, account, PAM_PW)
        assert st.cli_error_code(proc) == 1045, proc.stderr
        log_has(prx, f"account '{account}'@'%' authenticates with pam: "
                "the listener's authenticators cannot check it")
    finally:
        problems = px.stop_proxy(prx)
    assert not problems, problems


def test_pam_check_does_not_stall_the_worker(proxy, account, slow_account):
    """Sluice has one worker here; while a PAM check takes SLOW_S seconds
    (on its helper thread), other clients log in and query at once, and
    the slow login still succeeds."""
    result = {}

    def slow_login():
        result["proc"] = cli(RW_PORT, slow_account, PAM_PW)

    t = threading.Thread(target=slow_login)
    started = time.monotonic()
    t.start()
    time.sleep(0.5)   # the slow check is under way
    for _ in range(3):
        t0 = time.monotonic()
        proc = st.cli(SQL, port=RW_PORT)
        assert proc.returncode == 0, proc.stderr
        assert time.monotonic() - t0 < SLOW_S - 1, "a login waited"
    assert whoami(cli(PRIMARY_PORT, account, PAM_PW))[0] == f"{account}@%"
    assert time.monotonic() - started < SLOW_S, "the others waited"
    t.join(60)
    assert whoami(result["proc"])[0] == f"{slow_account}@%"


def asked_by_dialog(user):
    """Log in natively until Sluice asks its first PAM question; returns
    (socket, seq of the question, its type byte and text)."""
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
    plugin, _, question = body[1:].partition(b"\0")
    assert plugin == b"dialog"
    return sock, seq, question


def test_dialog_question_as_sent(proxy, account):
    """The first question rides in the AuthSwitchRequest: type 4 (a
    password, not echoed) and PAM's prompt; the right answer logs in."""
    sock, seq, question = asked_by_dialog(account)
    with sock:
        assert question == b"\x04Password: ", question
        sock.sendall(packet(seq + 1, PAM_PW.encode() + b"\0"))
        rseq, body = st.recv_packet(sock)
        assert body[:1] == b"\x00", body
        assert rseq == seq + 2


@pytest.mark.parametrize("answer", [b"x" * 600, b"pam\0secret\0"],
                         ids=["too-long", "nul-inside"])
def test_malformed_answer_closes_only_that_client(proxy, account, answer):
    sock, seq, _ = asked_by_dialog(account)
    with sock:
        sock.sendall(packet(seq + 1, answer))
        _, body = st.recv_packet(sock)
        assert body[:1] == b"\xff" and struct.unpack("<H", body[1:3])[0] == \
            1043, body
        assert sock.recv(1) == b""   # closed
    assert whoami(cli(RW_PORT, account, PAM_PW))[0] == f"{account}@%"


def test_client_gone_mid_conversation(proxy, account):
    """A client that hangs up while PAM waits for its answer: the
    conversation is abandoned, nothing else is affected."""
    for _ in range(5):
        sock, _, _ = asked_by_dialog(account)
        sock.close()
    assert whoami(cli(RW_PORT, account, PAM_PW))[0] == f"{account}@%"


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


def test_kill_query_user_of_pam_sessions(proxy, account):
    """KILL QUERY USER through Sluice logs in to the servers as the PAM
    account (replaying the session's answers to each server's auth_pam)
    and ends the victim's statement."""
    marker = "pk" + uuid.uuid4().hex[:8]
    victim = subprocess.Popen(
        ["mariadb", "--no-defaults", f"-u{account}", f"-p{PAM_PW}",
         f"-h{st.HOST}", f"-P{RW_PORT}", "--protocol=tcp", "-e",
         f"SELECT SLEEP(30) AS {marker}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        st.wait_until(lambda: running_on_servers(marker), 15,
                      what="the victim's SLEEP on a server")
        proc = cli(RW_PORT, account, PAM_PW)   # the account works
        whoami(proc)
        proc = subprocess.run(
            ["mariadb", "--no-defaults", f"-u{account}", f"-p{PAM_PW}",
             f"-h{st.HOST}", f"-P{RW_PORT}", "--protocol=tcp", "-e",
             f"KILL QUERY USER '{account}'"],
            capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        _, err = victim.communicate(timeout=10)
        assert victim.returncode != 0, err
        st.wait_until(lambda: not running_on_servers(marker), 10,
                      what="the victim's statement to end")
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
