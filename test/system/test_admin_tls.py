# SPDX-License-Identifier: Apache-2.0
"""The REST API over HTTPS, and admin_ssl_ca (issue 18).

- admin_ssl_key/admin_ssl_cert: HTTPS only; maxctrl --secure with
  --tls-ca-cert reads it, and refuses a certificate it cannot verify
  unless --tls-verify-server-cert=false.
- admin_ssl_ca (and its old name admin_ssl_ca_cert): a client certificate
  signed by that CA is accepted, one signed by another CA is refused with
  403 and a JSON error, a client without one logs in with its password;
  without admin_ssl_ca no certificate is asked for.
- Both names at once, or admin_ssl_ca without admin_ssl_cert, are refused
  by --config-check with FILE:LINE.
"""

import json
import ssl
import subprocess
import urllib.error
import urllib.request

import pytest

import proxy as px
import sluicetest as st

ADMIN = st.port(5784)
MAXCTRL = st.BUILD_DIR / "bin" / "maxctrl"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = st.make_test_certs(tmp_path_factory.mktemp("admin-tls-certs"))
    st.make_cert(d, "stranger", "otherca", "/CN=not ours")
    return d


def config(run, certs, ca_line):
    for sub in ("log", "data", "persist"):
        (run / sub).mkdir(parents=True, exist_ok=True)
    return px.global_section(run, ADMIN, threads=1, extra=f"""
admin_ssl_key={certs}/server-key.pem
admin_ssl_cert={certs}/server.pem
{ca_line}
""")


def start(run, certs, ca_line):
    cfg = run / "sluice.cnf"
    cfg.write_text(config(run, certs, ca_line))
    daemon = px.Daemon(st.sluice_argv("start", cfg), run / "proxy.log",
                       st.sluice_env())
    daemon.wait_ports([ADMIN])
    return daemon


def get(certs, client=None, auth=True):
    """GET /v1/maxscale over HTTPS, trusting the test CA, with the client
    certificate `client` (a name in certs) if given: (status, JSON)."""
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if client:
        ctx.load_cert_chain(str(certs / f"{client}.pem"),
                            str(certs / f"{client}-key.pem"))
    req = urllib.request.Request(f"https://{st.HOST}:{ADMIN}/v1/maxscale")
    if auth:
        req.add_header("Authorization", px.ADMIN_AUTH)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def maxctrl(*args):
    return subprocess.run([str(MAXCTRL), "-h", f"{st.HOST}:{ADMIN}", "-s",
                           *args, "show", "maxscale"], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("name", ["admin_ssl_ca", "admin_ssl_ca_cert"])
def test_client_certificates_checked(tmp_path, certs, name):
    daemon = start(tmp_path, certs, f"{name}={certs}/ca.pem")
    try:
        status, doc = get(certs)
        assert status == 200 and doc["data"]["id"] == "maxscale"
        status, doc = get(certs, client="client")
        assert status == 200 and doc["data"]["id"] == "maxscale"
        status, doc = get(certs, client="stranger")
        assert status == 403, doc
        assert "admin_ssl_ca" in doc["errors"][0]["detail"]
        # a verified certificate does not replace the password
        status, _doc = get(certs, client="client", auth=False)
        assert status == 401
        ok = maxctrl("--tls-ca-cert", str(certs / "ca.pem"), "--tls-cert",
                     str(certs / "client.pem"), "--tls-key",
                     str(certs / "client-key.pem"))
        assert ok.returncode == 0, ok.stderr
        bad = maxctrl("--tls-ca-cert", str(certs / "ca.pem"), "--tls-cert",
                      str(certs / "stranger.pem"), "--tls-key",
                      str(certs / "stranger-key.pem"))
        assert bad.returncode != 0
        assert "admin_ssl_ca" in bad.stdout + bad.stderr
        shown = get(certs)[1]["data"]["attributes"]["parameters"]
        assert shown[name] == f"{certs}/ca.pem"
    finally:
        assert daemon.stop() == []


def test_https_without_ca(tmp_path, certs):
    daemon = start(tmp_path, certs, "")
    try:
        # no certificate is asked for: even a stranger's is not looked at
        assert get(certs, client="stranger")[0] == 200
        assert get(certs)[0] == 200
        ok = maxctrl("--tls-ca-cert", str(certs / "ca.pem"))
        assert ok.returncode == 0, ok.stderr
        assert "maxscale" in ok.stdout.lower()
        # the system's CAs do not know the test CA
        unverified = maxctrl()
        assert unverified.returncode != 0
        assert "Could not connect" in unverified.stdout + unverified.stderr
        assert maxctrl("--tls-verify-server-cert=false").returncode == 0
        # plain HTTP to the HTTPS port gets no answer
        with pytest.raises(Exception):
            urllib.request.urlopen(f"http://{st.HOST}:{ADMIN}/v1/maxscale",
                                   timeout=10).read()
    finally:
        assert daemon.stop() == []


@pytest.mark.parametrize("lines,needle,why", [
    ("admin_ssl_ca={c}/ca.pem\nadmin_ssl_ca_cert={c}/ca.pem",
     "admin_ssl_ca_cert={c}/ca.pem", "are the same setting"),
    ("admin_ssl_ca={c}/ca.pem", "admin_ssl_ca={c}/ca.pem",
     "needs admin_ssl_cert and admin_ssl_key"),
])
def test_bad_ca_settings_refused(tmp_path, certs, lines, needle, why):
    text = config(tmp_path, certs, lines.format(c=certs))
    if "needs" in why:
        text = "\n".join(x for x in text.splitlines()
                         if not x.startswith(("admin_ssl_key",
                                              "admin_ssl_cert"))) + "\n"
    cfg = tmp_path / "sluice.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("check", cfg)
    line = text.splitlines().index(needle.format(c=certs)) + 1
    assert status != 0
    assert f"{cfg}:{line}:" in out and why in out, out
