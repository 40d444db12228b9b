"""TLS: clients through a TLS listener (mariadb --ssl, with and without
verifying the server certificate, PyMySQL with large results, client
certificates), a plain client refused by a TLS-only listener (3159), bad
TLS configurations refused with FILE:LINE, and backend TLS to a sandbox
server restarted with SSL (Ssl_cipher seen by the server is non-empty).

Certificates are made by the test with the openssl CLI: a CA, a server
certificate for 127.0.0.1/localhost, a client certificate, and a second
CA that signed nothing of ours.
"""

import hashlib
import os
import subprocess
import threading

import pytest

import sluicetest as st
from proxy import CONFIG_REFUSED, Daemon, run_sluice, sluice_config, PROXY

pytestmark = pytest.mark.skipif(PROXY != "sluice",
                                reason="tests Sluice's own TLS")

PORTS = {"pinned": st.port(4500), "shared": st.port(4510)}
SANDBOX_SCRIPT = st.ROOT / "scripts" / "sandbox"
TLS_SERVER = 3          # the sandbox server restarted with SSL


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True, timeout=60)


def _make_cert(d, name, ca, subj, san=None):
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout",
             f"{name}-key.pem", "-out", f"{name}.csr", "-subj", subj, cwd=d)
    ext = []
    if san:
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
        ext = ["-extfile", f"{name}.ext"]
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem",
             "-CAkey", f"{ca}-key.pem", "-CAcreateserial", "-days", "2",
             "-out", f"{name}.pem", *ext, cwd=d)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    for ca in ("ca", "otherca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                 "2", "-keyout", f"{ca}-key.pem", "-out", f"{ca}.pem",
                 "-subj", f"/CN=Sluice test {ca}", cwd=d)
    _make_cert(d, "server", "ca", "/CN=localhost",
               "IP:127.0.0.1,DNS:localhost")
    _make_cert(d, "client", "ca", "/CN=sluice test client")
    return d


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


@pytest.mark.parametrize("section,error,param", [
    ("ssl=true\n", "has ssl=true but no ssl_cert and ssl_key", "ssl"),
    ("ssl=true\nssl_cert=/nonexistent.pem\nssl_key=/nonexistent.pem\n",
     "cannot load ssl_cert '/nonexistent.pem'", "ssl_cert"),
    ("ssl=true\nssl_cert={c}/server.pem\nssl_key={c}/client-key.pem\n",
     "cannot load ssl_key", "ssl_key"),
    ("ssl=true\nssl_cert={c}/server.pem\nssl_key={c}/server-key.pem\n"
     "ssl_version=TLSv99\n", "invalid value 'TLSv99' for parameter "
     "'ssl_version'", "ssl_version"),
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
