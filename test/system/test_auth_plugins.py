# SPDX-License-Identifier: Apache-2.0
"""Accounts with other authentication plugins than mysql_native_password
(docs/authentication.md), through both routers.

The sandbox servers load MariaDB's auth_ed25519 plugin (installed here on
each server when missing: CREATE USER ... VIA ed25519 replicates and a
replica without the plugin would stop). The accounts:

  aor    IDENTIFIED VIA ed25519 USING PASSWORD('edpw')
            OR mysql_native_password USING PASSWORD('natpw')
  nor    the same two the other way round
  eonly  IDENTIFIED VIA ed25519 USING PASSWORD('edpw')

An auth_or account logs in to Sluice natively with its native password,
whatever the place of that alternative in the list, and Sluice logs in to
the backend (which tries ed25519 first for `aor`: Sluice declines it and
the server moves on to the native alternative). CURRENT_USER() and
@@server_id prove the backend login."""

import uuid

import pymysql
import pytest

import sluicetest as st
from proxy import PROXY, rw_service, running_proxy

PRIMARY_PORT, REPLICA_PORT, RW_PORT = st.port(5180), st.port(5181), \
    st.port(5182)
NATIVE_PW, ED_PW = "natpw", "edpw"


def ensure_ed25519():
    """auth_ed25519 loaded on every sandbox server (not replicated:
    INSTALL SONAME is local to each server, and persists)."""
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
    names = {k: f"{k}_{tag}" for k in ("aor", "nor", "eonly")}
    specs = {
        "aor": f"ed25519 USING PASSWORD('{ED_PW}') OR "
               f"mysql_native_password USING PASSWORD('{NATIVE_PW}')",
        "nor": f"mysql_native_password USING PASSWORD('{NATIVE_PW}') OR "
               f"ed25519 USING PASSWORD('{ED_PW}')",
        "eonly": f"ed25519 USING PASSWORD('{ED_PW}')",
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


@pytest.fixture(scope="module")
def proxy(users, tmp_path_factory):
    yield from running_proxy(tmp_path_factory, PRIMARY_PORT, REPLICA_PORT,
                             extra=rw_service("RW-Service", RW_PORT))


# (port attribute or RW, server ids a plain SELECT may come from)
ROUTES = [("primary_port", {st.PRIMARY_ID}),
          ("replica_port", st.REPLICA_IDS),
          ("rw", st.REPLICA_IDS)]


def port_of(proxy, route):
    return RW_PORT if route == "rw" else getattr(proxy, route)


def whoami_pymysql(port, user, password):
    """(CURRENT_USER(), @@server_id) over PyMySQL (native only: it has no
    ed25519 without PyNaCl)."""
    with st.connect(port, user=user, password=password) as conn, \
            conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER(), @@server_id")
        user_host, sid = cur.fetchone()
    return user_host, int(sid)


def login_error(port, user, password):
    with pytest.raises(pymysql.err.OperationalError) as err:
        st.connect(port, user=user, password=password).close()
    return st.error_code(err.value), str(err.value.args[1])


@pytest.mark.parametrize("route,sids", ROUTES, ids=[r for r, _ in ROUTES])
@pytest.mark.parametrize("key", ["aor", "nor"])
def test_auth_or_native_alternative_pymysql(proxy, users, key, route, sids):
    user_host, sid = whoami_pymysql(port_of(proxy, route), users[key],
                                    NATIVE_PW)
    assert user_host == f"{users[key]}@%"
    assert sid in sids


@pytest.mark.parametrize("route,sids", ROUTES, ids=[r for r, _ in ROUTES])
def test_auth_or_cli_and_libmariadb(proxy, users, route, sids):
    port = port_of(proxy, route)
    sql = "SELECT CURRENT_USER(), @@server_id"
    proc = st.cli(sql, port=port, user=users["aor"], password=NATIVE_PW)
    assert proc.returncode == 0, proc.stderr
    user_host, sid = proc.stdout.split()
    assert user_host == f"{users['aor']}@%" and int(sid) in sids
    proc = st.c_client(port, "query", sql, user=users["aor"],
                       password=NATIVE_PW)
    assert proc.returncode == 0, proc.stderr
    user_host, sid = proc.stdout.split()
    assert user_host == f"{users['aor']}@%" and int(sid) in sids


@pytest.mark.parametrize("route", ["primary_port", "rw"])
def test_change_user_to_auth_or_account(proxy, users, route):
    """COM_CHANGE_USER: the backend again declines ed25519 and takes the
    native alternative."""
    proc = st.c_client(port_of(proxy, route), "change_user", users["aor"],
                       NATIVE_PW)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == f"{users['aor']}@%", proc.stdout


@pytest.mark.parametrize("route", [r for r, _ in ROUTES])
def test_auth_or_wrong_password(proxy, users, route):
    code, msg = login_error(port_of(proxy, route), users["aor"], "wrong")
    assert code == 1045, msg
    assert f"Access denied for user '{users['aor']}'@" in msg


def test_ed25519_password_of_auth_or_account(proxy, users):
    """The server would take the ed25519 password from a client that has
    the plugin; a listener without authenticator=ed25519auth (these) checks
    clients natively only, so it refuses it (docs/authentication.md;
    test_ed25519.py has the listeners that take it)."""
    direct = st.cli("SELECT CURRENT_USER()", port=st.SERVERS[st.PRIMARY_ID],
                    user=users["aor"], password=ED_PW)
    assert direct.returncode == 0, direct.stderr
    proc = st.cli("SELECT CURRENT_USER()", port=proxy.primary_port,
                  user=users["aor"], password=ED_PW)
    assert st.cli_error_code(proc) == 1045, proc.stderr


def test_ed25519_only_account_is_refused_and_logged(proxy, users):
    code, msg = login_error(proxy.primary_port, users["eonly"], ED_PW)
    assert code == 1045, msg
    if PROXY != "sluice":
        return
    line = (f"account '{users['eonly']}'@'%' authenticates with ed25519: "
            "the listener's authenticators cannot check it")
    log = proxy.run_dir / "proxy.log"
    st.wait_until(lambda: line in log.read_text(errors="replace"), 10,
                  what=line)


def test_declined_ed25519_is_not_a_password_error(proxy, users):
    """The empty answer Sluice gives the server's ed25519 step of `aor` is
    not a failed login: with max_password_errors=1 (which blocks an
    account after one wrong password from 127.0.0.1: 4150) the account
    keeps logging in through Sluice, the server's Access_denied_errors
    does not move, and a direct native login still works."""
    def denied():
        with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Access_denied_errors'")
            return int(cur.fetchone()[1])

    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        old = st.scalar(conn, "SELECT @@global.max_password_errors")
        cur.execute("SET GLOBAL max_password_errors = 1")
    try:
        before = denied()
        for _ in range(3):
            assert whoami_pymysql(proxy.primary_port, users["aor"],
                                  NATIVE_PW) == (f"{users['aor']}@%",
                                                 st.PRIMARY_ID)
        assert denied() == before
        assert whoami_pymysql(st.SERVERS[st.PRIMARY_ID], users["nor"],
                              NATIVE_PW)[0] == f"{users['nor']}@%"
    finally:
        with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
            cur.execute(f"SET GLOBAL max_password_errors = {int(old)}")
