# SPDX-License-Identifier: Apache-2.0
"""PAM with `authenticator_options=pam_backend_map=mariadb`
(docs/authentication.md, "PAM accounts", MaxScale's
`pam_backend_mapping=mariadb`): the client logs in to Sluice with PAM;
Sluice then logs in to the servers with standard MariaDB authentication
as the user PAM mapped the client to (PAM_USER at the end of the
conversation), with that user's password from `pam_mapped_pw_file`.

The PAM service (written to /etc/pam.d by the test, removed after):
pam_exec checks the client's password with a script, then a small module
built here sets PAM_USER to the mapped user (what MariaDB's
pam_user_map.so does from /etc/security/user_map.conf, a machine-wide
file the test does not touch). The client account is a pam account; the
mapped account is a native one whose password is only in the file.

Every login test fails on a Sluice that refuses pam_backend_map=mariadb
(the proxy does not start), and CURRENT_USER() shows the mapping."""

import json
import os
import subprocess
import uuid

import pytest

import proxy as px
import sluicetest as st
from test_pam import (PAM_AUTH, PAM_DIR, PAM_EXEC, PAM_PW, SQL, cli,
                      install_auth_pam, pytestmark,  # noqa: F401
                      uninstall_auth_pam, whoami)

PRIMARY_PORT, REPLICA_PORT, RW_PORT = (st.port(5823), st.port(5824),
                                       st.port(5825))
NOFILE_PORT = st.port(5826)   # mapping without pam_mapped_pw_file
MAPPED_PW = "mapped-Secret-1"
ROUTES = {"readconnroute-primary": (PRIMARY_PORT, {st.PRIMARY_ID}),
          "readwritesplit": (RW_PORT, st.REPLICA_IDS)}

MAP_MODULE = r"""
#include <security/pam_modules.h>
#include <string.h>

/* map user argv[0] to argv[1] (PAM_USER), as pam_user_map.so does */
int pam_sm_authenticate(pam_handle_t *h, int flags, int argc,
                        const char **argv)
{
    const void *u = NULL;

    if (argc < 2 || pam_get_item(h, PAM_USER, &u) != PAM_SUCCESS ||
        u == NULL) {
        return PAM_AUTH_ERR;
    }
    if (strcmp(u, argv[0]) == 0) {
        return pam_set_item(h, PAM_USER, argv[1]);
    }
    return PAM_SUCCESS;
}

int pam_sm_setcred(pam_handle_t *h, int flags, int argc, const char **argv)
{
    return PAM_SUCCESS;
}
"""


@pytest.fixture(scope="module")
def mapping(tmp_path_factory):
    """(client user, mapped user, pw file): the PAM service, the accounts
    and the password file."""
    tag = uuid.uuid4().hex[:6]
    user, mapped = f"pamm_{tag}", f"mapd_{tag}"
    service = f"sluice-test-map-{os.getpid()}"
    d = tmp_path_factory.mktemp("pam-map")
    d.chmod(0o755)
    script = d / "check.sh"
    script.write_text(f"""#!/bin/sh
pw=$(tr -d '\\000')
[ "$PAM_USER" = "{user}" ] && [ "$pw" = "{PAM_PW}" ] && exit 0
exit 1
""")
    script.chmod(0o755)
    src, module = d / "map.c", d / "pam_sluice_map.so"
    src.write_text(MAP_MODULE)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(module), str(src),
                    "-lpam"], check=True, capture_output=True, timeout=120)
    conf = PAM_DIR / service
    conf.write_text(f"auth required {PAM_EXEC} expose_authtok quiet "
                    f"{script}\nauth required {module} {user} {mapped}\n"
                    "account required pam_permit.so\n")
    pw_file = d / "mapped.json"
    pw_file.write_text(json.dumps({"users_and_passwords": [
        {"user": "someone_else", "password": "x"},
        {"user": mapped, "password": MAPPED_PW}]}))
    installed = install_auth_pam()
    try:
        with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
            for host in ("%", "localhost"):
                cur.execute(f"GRANT SELECT ON mysql.global_priv TO "
                            f"'{st.SERVICE_USER}'@'{host}'")
            cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED VIA pam "
                        f"USING '{service}'")
            cur.execute(f"CREATE USER '{mapped}'@'%' IDENTIFIED BY "
                        f"'{MAPPED_PW}'")
            for name in (user, mapped):
                cur.execute(f"GRANT SELECT ON test.* TO '{name}'@'%'")
        st.wait_replicated()
        yield user, mapped, pw_file
    finally:
        with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
            for name in (user, mapped):
                cur.execute(f"DROP USER IF EXISTS '{name}'@'%'")
        st.wait_replicated()
        uninstall_auth_pam(installed)
        conf.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def proxy(mapping, tmp_path_factory):
    _, _, pw_file = mapping
    run_dir = tmp_path_factory.mktemp("proxy-pam-map")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    opts = (f"authenticator_options=pam_backend_map=mariadb,"
            f"pam_mapped_pw_file={pw_file}\n")
    text = (px.sluice_config(run_dir, PRIMARY_PORT, REPLICA_PORT) +
            px.rw_service("RW-Service", RW_PORT))
    text = text.replace("protocol=MariaDBClient\n",
                        "protocol=MariaDBClient\n" + PAM_AUTH + opts)
    text += f"""
[NoFile-Listener]
type=listener
service=RW-Service
protocol=MariaDBClient
address={st.HOST}
port={NOFILE_PORT}
{PAM_AUTH}authenticator_options=pam_backend_mapping=mariadb
"""
    ports = [PRIMARY_PORT, REPLICA_PORT, RW_PORT, NOFILE_PORT]
    yield from px.serve(px.start_text(run_dir, text, PRIMARY_PORT,
                                      REPLICA_PORT, ports))


def test_premise_server_refuses_pam_user_mapping(mapping):
    """The servers do not map (their auth_pam runs the same service, but
    the server then wants a PROXY grant): the client's own user cannot
    log in to a server directly, so a login through Sluice that works is
    Sluice's mapping."""
    user, _, _ = mapping
    proc = cli(st.SERVERS[st.PRIMARY_ID], user, PAM_PW)
    assert proc.returncode != 0, proc.stdout


@pytest.mark.parametrize("route", ROUTES)
def test_mapped_login(proxy, mapping, route):
    """The client authenticates with PAM; every server sees the mapped
    native account (readwritesplit: the replica and, in a transaction,
    the primary)."""
    user, mapped, _ = mapping
    port, sids = ROUTES[route]
    user_host, sid = whoami(cli(port, user, PAM_PW))
    assert user_host == f"{mapped}@%"
    assert sid in sids
    proc = subprocess.run(
        ["mariadb", "--no-defaults", f"-u{user}", f"-p{PAM_PW}",
         f"-h{st.HOST}", f"-P{port}", "--protocol=tcp", "--batch",
         "--skip-column-names", "-e",
         "BEGIN; SELECT CURRENT_USER(), @@server_id; COMMIT"],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [f"{mapped}@%", str(st.PRIMARY_ID)]


@pytest.mark.parametrize("route", ROUTES)
def test_wrong_password(proxy, mapping, route):
    user, _, _ = mapping
    proc = cli(ROUTES[route][0], user, "wrong")
    assert st.cli_error_code(proc) == 1045, proc.stderr


def test_no_password_file(proxy, mapping):
    """pam_backend_mapping=mariadb (MaxScale's spelling) without a
    password file: Sluice logs in as the mapped user without a password
    (MaxScale's behaviour), which this server refuses: 1045 for the
    mapped account."""
    user, mapped, _ = mapping
    proc = cli(NOFILE_PORT, user, PAM_PW)
    assert st.cli_error_code(proc) == 1045, proc.stderr
    assert mapped in proc.stderr, proc.stderr
