# SPDX-License-Identifier: Apache-2.0
"""PAM with `authenticator_options=pam_mode=password_2FA`
(docs/authentication.md, "PAM accounts", MaxScale's semantics): Sluice
asks the client two questions with the `dialog` plugin, "Password: " and
"Verification code: " (both not echoed, whatever the PAM service asks),
then runs the account's PAM service answering a prompt that contains
"password" with the password and any other prompt with the code; each
server's own auth_pam is answered by the same rule.

It reuses test_pam.py's PAM services and accounts (imported fixtures): the
two-prompt service asks "Password: " (pam_exec) and then an echoed
"Token: " (a small module built by the fixture), so the code is its
token. The client is PyMySQL with a `dialog` handler (PyMySQL answers
"Password: " itself and asks the handler for any other question).

Every login test fails on a Sluice that refuses pam_mode=password_2FA
(the listener parameter was refused, the proxy does not start)."""

import socket
import struct
import threading
import uuid

import pymysql
import pytest

import proxy as px
import sluicetest as st
from hostile import greeting_scramble, native_token, packet
from test_pam import (PAM_AUTH, PAM_PW, SQL, TOKEN, account,  # noqa: F401
                      pam_service, pytestmark, running_on_servers, two)

PRIMARY_PORT, REPLICA_PORT, RW_PORT = (st.port(5820), st.port(5821),
                                       st.port(5822))
TWO_FA = "authenticator_options=pam_mode=password_2FA\n"
ROUTES = {"readconnroute-primary": (PRIMARY_PORT, {st.PRIMARY_ID}),
          "readwritesplit": (RW_PORT, st.REPLICA_IDS)}


@pytest.fixture(scope="module")
def proxy(account, tmp_path_factory):  # noqa: F811
    run_dir = tmp_path_factory.mktemp("proxy-pam-2fa")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    text = (px.sluice_config(run_dir, PRIMARY_PORT, REPLICA_PORT) +
            px.rw_service("RW-Service", RW_PORT))
    text = text.replace("protocol=MariaDBClient\n",
                        "protocol=MariaDBClient\n" + PAM_AUTH + TWO_FA)
    ports = [PRIMARY_PORT, REPLICA_PORT, RW_PORT]
    yield from px.serve(px.start_text(run_dir, text, PRIMARY_PORT,
                                      REPLICA_PORT, ports))


def login(port, user, password, code):
    """A PyMySQL connection answering the code question with code; the
    questions other than "Password: " it was asked, as (echo, text)."""
    asked = []

    class Dialog:
        def __init__(self, con):
            pass

        def prompt(self, echo, text):
            asked.append((echo, text))
            return code.encode()

    conn = pymysql.connect(host=st.HOST, port=port, user=user,
                           password=password, connect_timeout=10,
                           read_timeout=60, autocommit=True,
                           auth_plugin_map={"dialog": Dialog})
    return conn, asked


def whoami(conn, sql=SQL):
    with conn.cursor() as cur:
        cur.execute(sql)
        user_host, sid = cur.fetchone()
    return user_host, int(sid)


def refused(port, user, password, code):
    with pytest.raises(pymysql.err.OperationalError) as e:
        login(port, user, password, code)[0].close()
    return e.value.args[0]


@pytest.mark.parametrize("route", ROUTES)
def test_password_and_code(proxy, account, route):  # noqa: F811
    """The right password and code: logged in, and each server the
    session uses ran its own two-prompt conversation as the account
    (readwritesplit: a replica for the SELECT, the primary in a
    transaction)."""
    port, sids = ROUTES[route]
    conn, asked = login(port, two(account), PAM_PW, TOKEN)
    with conn:
        assert asked == [(False, b"Verification code: ")]
        user_host, sid = whoami(conn)
        assert user_host == f"{two(account)}@%"
        assert sid in sids
        conn.begin()
        assert whoami(conn) == (f"{two(account)}@%", st.PRIMARY_ID)
        conn.commit()


@pytest.mark.parametrize("route", ROUTES)
def test_wrong_code_or_password(proxy, account, route):  # noqa: F811
    port, _ = ROUTES[route]
    assert refused(port, two(account), PAM_PW, "000000") == 1045
    assert refused(port, two(account), "wrong", TOKEN) == 1045


def test_one_prompt_service(proxy, account):  # noqa: F811
    """An account whose PAM service asks the password only: the client is
    still asked both questions (MaxScale's mode), the code is not used,
    and the servers decide with their own (one-prompt) service."""
    conn, asked = login(RW_PORT, account, PAM_PW, "anything")
    with conn:
        assert asked == [(False, b"Verification code: ")]
        assert whoami(conn)[0] == f"{account}@%"
    assert refused(RW_PORT, account, "wrong", "anything") == 1045


def test_native_account_unchanged(proxy):
    proc = st.cli(SQL, port=RW_PORT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == f"{st.APP_USER}@%"


def test_questions_as_sent(proxy, account):  # noqa: F811
    """On the wire: the AuthSwitchRequest to dialog carries type 4
    "Password: ", the next packet type 4 "Verification code: " (sequence
    numbers go on), then OK."""
    sock = socket.create_connection((st.HOST, RW_PORT), timeout=10)
    with sock:
        _, greeting = st.recv_packet(sock)
        caps = (0x00000001 | 0x00000200 | 0x00002000 | 0x00008000 |
                0x00080000)
        token = native_token("not-the-password",
                             greeting_scramble(greeting))
        user = two(account)
        payload = (struct.pack("<IIB", caps, 1 << 24, 45) + b"\0" * 23 +
                   user.encode() + b"\0" + bytes([len(token)]) + token +
                   b"mysql_native_password\0")
        sock.sendall(packet(1, payload))
        seq, body = st.recv_packet(sock)
        assert body == b"\xfedialog\0\x04Password: ", body
        sock.sendall(packet(seq + 1, PAM_PW.encode() + b"\0"))
        seq2, body = st.recv_packet(sock)
        assert (seq2, body) == (seq + 2, b"\x04Verification code: ")
        sock.sendall(packet(seq2 + 1, TOKEN.encode() + b"\0"))
        seq3, body = st.recv_packet(sock)
        assert body[:1] == b"\x00", body
        assert seq3 == seq2 + 2


def test_kill_query_user(proxy, account):  # noqa: F811
    """KILL QUERY USER through Sluice logs in to every server as the 2FA
    account (the session's password and code replayed by prompt text)
    and interrupts the victim's statement."""
    user = two(account)
    marker = "tfa" + uuid.uuid4().hex[:8]
    victim, _ = login(RW_PORT, user, PAM_PW, TOKEN)
    killer, _ = login(RW_PORT, user, PAM_PW, TOKEN)
    out = {}

    def run():
        try:
            with victim.cursor() as cur:
                cur.execute(f"SELECT SLEEP(30) AS {marker}")
                out["row"] = cur.fetchone()
        except pymysql.err.Error as e:
            out["err"] = e

    t = threading.Thread(target=run)
    try:
        t.start()
        st.wait_until(lambda: running_on_servers(marker), 15,
                      what="the victim's SLEEP on a server")
        with killer.cursor() as kc:
            kc.execute(f"KILL QUERY USER '{user}'")
        t.join(20)
        assert not t.is_alive(), "the victim's statement still runs"
        # an interrupted SLEEP returns 1 (or the statement fails: 1317)
        assert out.get("row") == (1,) or "err" in out, out
        st.wait_until(lambda: not running_on_servers(marker), 10,
                      what="the victim's statement to end")
    finally:
        t.join(40)
        victim.close()
        killer.close()
