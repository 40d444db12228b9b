# SPDX-License-Identifier: Apache-2.0
"""COM_CHANGE_USER to a PAM account through Sluice (docs/authentication.md,
"PAM accounts"): Sluice runs the new account's PAM conversation with the
client inside the change (an AuthSwitchRequest to `dialog`, as the server
answers), then changes user on every backend connection of the session,
each server's auth_pam answered with the new answers. A refused change
(wrong password) gets 1045 and the session goes on as the old user, as
on the server itself (the premise test checks that on a server).

The client is libmariadb (test/system/c_client, mysql_change_user, whose
`dialog` plugin answers the password question). PAM services and
accounts are test_pam.py's (imported fixtures).

Fails on a Sluice that refuses the change to a pam account (1045)."""

import subprocess

import pytest

import proxy as px
import sluicetest as st
from test_pam import (PAM_AUTH, PAM_PW, TOKEN, account,  # noqa: F401
                      pam_service, pytestmark, two)

PRIMARY_PORT, REPLICA_PORT, RW_PORT = (st.port(5827), st.port(5828),
                                       st.port(5829))
WHO = "SELECT CURRENT_USER(), @@server_id"
WHO_PRIMARY = "SELECT CURRENT_USER(), @@server_id FOR UPDATE"


@pytest.fixture(scope="module")
def proxy(account, tmp_path_factory):  # noqa: F811
    run_dir = tmp_path_factory.mktemp("proxy-pam-cu")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    text = (px.sluice_config(run_dir, PRIMARY_PORT, REPLICA_PORT) +
            px.rw_service("RW-Service", RW_PORT))
    text = text.replace("protocol=MariaDBClient\n",
                        "protocol=MariaDBClient\n" + PAM_AUTH)
    ports = [PRIMARY_PORT, REPLICA_PORT, RW_PORT]
    yield from px.serve(px.start_text(run_dir, text, PRIMARY_PORT,
                                      REPLICA_PORT, ports))


def rows(proc):
    assert proc.returncode == 0, proc.stderr
    return [line.split("\t") for line in proc.stdout.splitlines()]


def test_server_premise(account):  # noqa: F811
    """On a server itself: mysql_change_user to the PAM account works,
    and with a wrong password fails with 1045 while the connection goes on
    as the old user."""
    port = st.SERVERS[st.PRIMARY_ID]
    got = rows(st.c_client(port, "change_user_then", account, PAM_PW, WHO))
    assert got == [[f"{account}@%", str(st.PRIMARY_ID)]]
    got = rows(st.c_client(port, "change_user_bad", account, "wrong",
                           "SELECT CURRENT_USER()"))
    assert got == [["1045"], ["42"], [f"{st.APP_USER}@%"]]


def test_change_to_pam_account_rwsplit(proxy, account):  # noqa: F811
    """readwritesplit: the replica and the primary (FOR UPDATE) both run
    as the PAM account after the change."""
    got = rows(st.c_client(RW_PORT, "change_user_then", account, PAM_PW,
                           WHO, WHO_PRIMARY))
    assert got[0][0] == f"{account}@%"
    assert int(got[0][1]) in st.REPLICA_IDS
    assert got[1] == [f"{account}@%", str(st.PRIMARY_ID)]


def test_change_to_pam_account_readconnroute(proxy, account):  # noqa: F811
    got = rows(st.c_client(PRIMARY_PORT, "change_user_then", account,
                           PAM_PW, WHO))
    assert got == [[f"{account}@%", str(st.PRIMARY_ID)]]


@pytest.mark.parametrize("port", [RW_PORT, PRIMARY_PORT],
                         ids=["readwritesplit", "readconnroute-primary"])
def test_wrong_password_keeps_old_user(proxy, account, port):  # noqa: F811
    """1045, then the session answers as the old (native) user, as the
    server does."""
    got = rows(st.c_client(port, "change_user_bad", account, "wrong",
                           "SELECT CURRENT_USER()", WHO_PRIMARY))
    assert got[:3] == [["1045"], ["42"], [f"{st.APP_USER}@%"]]
    assert got[3] == [f"{st.APP_USER}@%", str(st.PRIMARY_ID)]


def test_change_back_to_native(proxy, account):  # noqa: F811
    """PAM account, then back to the native one on the same connection
    (the PAM answers dropped; the backends change with the native
    password), then to the PAM account again."""
    got = rows(st.c_client(
        RW_PORT, "change_user_then", account, PAM_PW, WHO_PRIMARY,
        f"CHANGE:{st.APP_USER}:{st.APP_PASSWORD}", WHO, WHO_PRIMARY,
        f"CHANGE:{account}:{PAM_PW}", WHO, WHO_PRIMARY))
    assert got[0] == [f"{account}@%", str(st.PRIMARY_ID)]
    assert got[1][0] == f"{st.APP_USER}@%"
    assert got[2] == [f"{st.APP_USER}@%", str(st.PRIMARY_ID)]
    assert got[3][0] == f"{account}@%"
    assert got[4] == [f"{account}@%", str(st.PRIMARY_ID)]


@pytest.mark.parametrize("token,ok", [(TOKEN, True), ("000000", False)],
                         ids=["right-token", "wrong-token"])
def test_change_to_two_prompt_account(proxy, account, token, ok):  # noqa: F811
    """The two-prompt service (the password, then an echoed "Token: "
    that libmariadb's dialog plugin reads from stdin): the client answers
    both inside the change; each server's own conversation asks both too
    (its second question answered by Sluice during the backend's
    COM_CHANGE_USER). A wrong token: 1045, the old user stays."""
    user = two(account)
    argv = [str(st.C_CLIENT), st.HOST, str(RW_PORT), st.APP_USER,
            st.APP_PASSWORD]
    if ok:
        argv += ["change_user_then", user, PAM_PW, WHO, WHO_PRIMARY]
    else:
        argv += ["change_user_bad", user, PAM_PW, "SELECT CURRENT_USER()"]
    proc = subprocess.run(argv, input=token + "\n", capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # the dialog plugin printed its question ("Token: ") before the rows
    out = proc.stdout.replace("Token: ", "")
    got = [line.split("\t") for line in out.splitlines()]
    if ok:
        assert got[0][0] == f"{user}@%"
        assert int(got[0][1]) in st.REPLICA_IDS
        assert got[1] == [f"{user}@%", str(st.PRIMARY_ID)]
    else:
        assert got == [["1045"], ["42"], [f"{st.APP_USER}@%"]]


def test_refused_change_keeps_pam_user(proxy, account):  # noqa: F811
    """A session logged in as the PAM account, a refused change (to the
    same account, wrong password): the session goes on as the PAM user,
    on a replica and on the primary. (Its connections were open before
    the change, so this does not show that the answers kept for later
    backend logins are the old ones.)"""
    got = rows(st.c_client(RW_PORT, "change_user_bad", account, "wrong",
                           "SELECT CURRENT_USER()", WHO_PRIMARY,
                           user=account, password=PAM_PW))
    assert got == [["1045"], ["42"], [f"{account}@%"],
                   [f"{account}@%", str(st.PRIMARY_ID)]]
