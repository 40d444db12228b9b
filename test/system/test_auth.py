# SPDX-License-Identifier: Apache-2.0
"""Client authentication through Sluice: wrong password and unknown user
get 1045 with MariaDB's message, an account created on the primary a
moment ago can log in at once (Sluice reloads its account cache before
refusing), and a default database is honoured: 1049 for one that does not
exist, 1044 for one the user may not use."""

import re
import uuid

import pymysql
import pytest

import sluicetest as st
from proxy import PROXY, running_proxy

PRIMARY_PORT, REPLICA_PORT = st.port(4110), st.port(4111)
# A database the app user has a grant on but that does not exist, so the
# server's answer is 1049 Unknown database (not 1044 Access denied).
MISSING_DB = "sluice_missing_db"
DENIED_RE = re.compile(r"Access denied for user '([^']*)'@")


@pytest.fixture(scope="module")
def grants():
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute(f"GRANT SELECT ON {MISSING_DB}.* TO "
                    f"'{st.APP_USER}'@'%'")
    st.wait_replicated()
    yield
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute(f"REVOKE SELECT ON {MISSING_DB}.* FROM "
                    f"'{st.APP_USER}'@'%'")


@pytest.fixture(scope="module")
def proxy(grants, tmp_path_factory):
    yield from running_proxy(tmp_path_factory, PRIMARY_PORT, REPLICA_PORT)


def login_error(port, user, password, database=None):
    with pytest.raises(pymysql.err.OperationalError) as err:
        st.connect(port, user=user, password=password,
                   database=database).close()
    return st.error_code(err.value), str(err.value.args[1])


@pytest.mark.parametrize("port_attr", ["primary_port", "replica_port"])
def test_wrong_password_is_refused(proxy, port_attr):
    code, msg = login_error(getattr(proxy, port_attr), st.APP_USER,
                            "not-the-password")
    assert code == 1045, msg
    m = DENIED_RE.search(msg)
    assert m and m.group(1) == st.APP_USER, msg
    assert "using password: YES" in msg, msg


def test_wrong_password_cli(proxy):
    proc = st.cli("SELECT 1", port=proxy.primary_port, password="nope")
    assert proc.returncode != 0
    assert st.cli_error_code(proc) == 1045, proc.stderr
    assert "Access denied for user 'app'@" in proc.stderr


def test_unknown_user_is_refused(proxy):
    user = "nobody_" + uuid.uuid4().hex[:8]
    code, msg = login_error(proxy.primary_port, user, "whatever")
    assert code == 1045, msg
    m = DENIED_RE.search(msg)
    assert m and m.group(1) == user, msg


def test_refused_login_does_not_break_the_next(proxy):
    login_error(proxy.primary_port, st.APP_USER, "bad")
    with st.connect(proxy.primary_port) as conn:
        assert st.server_id(conn) == st.PRIMARY_ID


def test_account_created_a_moment_ago_works_at_once(proxy):
    user = "fresh_" + uuid.uuid4().hex[:8]
    password = "pw_" + uuid.uuid4().hex[:8]
    with st.root(st.PRIMARY_ID) as root, root.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'%' "
                    f"IDENTIFIED BY '{password}'")
        cur.execute(f"GRANT SELECT ON test.* TO '{user}'@'%'")
    try:
        with st.connect(proxy.primary_port, user=user,
                        password=password) as conn:
            assert st.scalar(conn, "SELECT CURRENT_USER()") == f"{user}@%"
            assert st.server_id(conn) == st.PRIMARY_ID
    finally:
        with st.root(st.PRIMARY_ID) as root, root.cursor() as cur:
            cur.execute(f"DROP USER '{user}'@'%'")


def test_dropped_account_is_refused(proxy):
    """The reverse: after DROP USER the login must fail (no stale cache
    letting a removed user in)."""
    user = "gone_" + uuid.uuid4().hex[:8]
    with st.root(st.PRIMARY_ID) as root, root.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
    with st.connect(proxy.primary_port, user=user, password="pw") as conn:
        assert st.server_id(conn) == st.PRIMARY_ID
    with st.root(st.PRIMARY_ID) as root, root.cursor() as cur:
        cur.execute(f"DROP USER '{user}'@'%'")
    code, msg = login_error(proxy.primary_port, user, "pw")
    assert code == 1045, msg


def test_unknown_database_cli(proxy):
    proc = st.cli("SELECT 1", port=proxy.primary_port, database=MISSING_DB)
    assert proc.returncode != 0
    assert st.cli_error_code(proc) == 1049, proc.stderr
    assert f"Unknown database '{MISSING_DB}'" in proc.stderr


def test_unknown_database_pymysql(proxy):
    code, msg = login_error(proxy.replica_port, st.APP_USER,
                            st.APP_PASSWORD, database=MISSING_DB)
    assert code == 1049, msg


def test_forbidden_database(proxy):
    code, msg = login_error(proxy.primary_port, st.APP_USER,
                            st.APP_PASSWORD, database="mysql")
    assert code == 1044, msg


def test_default_database_is_used(proxy):
    with st.connect(proxy.primary_port, database="test") as conn:
        assert st.scalar(conn, "SELECT DATABASE()") == "test"


@pytest.mark.sluice_only
def test_user_name_cannot_forge_log_lines(proxy):
    """A user name carrying a newline and a fake log line: refused with
    1045, and the log shows it escaped on the one warning line."""
    forged = "2030-01-01 00:00:00.000   error : [main] forged by a client"
    code, msg = login_error(proxy.replica_port, "inj\n" + forged + "\x1b[2J",
                            "pw")
    assert code == 1045, msg
    log = proxy.daemon.log_path.read_text(errors="replace")
    assert not any(line.startswith("2030-01-01") for line in
                   log.splitlines()), "a client forged a log line"
    assert "'inj\\x0a" + forged + "\\x1b[2J'@" in log
    assert "\x1b" not in log


# ---- max_auth_errors_until_block counts every failed authentication ----

BLOCK_PRIMARY, BLOCK_REPLICA = st.port(4114), st.port(4115)


@pytest.fixture(scope="module")
def blocking_proxy(tmp_path_factory):
    """A proxy of its own with max_auth_errors_until_block=3, so blocking
    127.0.0.1 leaves the other tests' proxy alone."""
    yield from running_proxy(tmp_path_factory, BLOCK_PRIMARY, BLOCK_REPLICA,
                             extra="max_auth_errors_until_block=3")


def assert_blocked(port):
    code, msg = login_error(port, st.APP_USER, st.APP_PASSWORD)
    assert code == 1129, msg
    assert "is blocked because of many connection errors" in msg, msg


@pytest.mark.sluice_only
def test_failed_change_user_counts_towards_block(blocking_proxy):
    """Each round logs in with the right password, then tries
    COM_CHANGE_USER with a wrong one: the failures add up (the good
    logins between them do not clear the count) and the host is
    blocked on that service, with the server's 1129."""
    for _ in range(3):
        proc = st.c_client(BLOCK_PRIMARY, "change_user", st.APP_USER,
                           "wrong-password")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "change_user: error 1045" in proc.stderr, proc.stderr
    assert_blocked(BLOCK_PRIMARY)
    proc = st.c_client(BLOCK_PRIMARY, "server_id")
    assert proc.returncode == 1 and "error 1129" in proc.stderr, proc.stderr
    # per service: the other one still serves this host
    with st.connect(BLOCK_REPLICA) as conn:
        assert st.server_id(conn) in st.REPLICA_IDS


@pytest.mark.sluice_only
def test_good_login_does_not_clear_failures(blocking_proxy):
    for password in ("bad1", "bad2", st.APP_PASSWORD, "bad3"):
        if password == st.APP_PASSWORD:
            with st.connect(BLOCK_REPLICA) as conn:
                assert st.server_id(conn) in st.REPLICA_IDS
        else:
            code, msg = login_error(BLOCK_REPLICA, st.APP_USER, password)
            assert code == 1045, msg
    assert_blocked(BLOCK_REPLICA)


# ---- what an account requires beyond its password ----
# Accounts made by the test on the primary (dropped afterwards); each is
# tried directly on db1 and through Sluice, which must answer alike and
# refuse by itself (its log says so) rather than leave it to the server,
# which only sees Sluice's own connection.

EXPIRED_CAP = 1 << 22     # CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS
# Made together, so that one account reload finds them all: failed logins
# reload at most once per 5 s per client host after a burst of 10.
REQ_ACCOUNTS = {
    "locked": "ACCOUNT LOCK",
    "expired": "PASSWORD EXPIRE",
    "max_user": "WITH MAX_USER_CONNECTIONS 2",
    "per_hour": "WITH MAX_CONNECTIONS_PER_HOUR 2",
    "ssl": "REQUIRE SSL",
    "all_bits": "",
    "one_conn": "WITH MAX_USER_CONNECTIONS 1",
}


@pytest.fixture(scope="module")
def account(proxy):
    """{key: user} for REQ_ACCOUNTS (password 'pw'), fresh names, made on
    the primary with the server disconnecting clients that cannot handle
    an expired password; all undone at the end. The service user may read
    mysql.global_priv (as scripts/sandbox now grants; older sandboxes get
    it here)."""
    users = {k: f"req_{k}_" + uuid.uuid4().hex[:6] for k in REQ_ACCOUNTS}
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        for host in ("%", "localhost"):
            cur.execute(f"GRANT SELECT ON mysql.global_priv TO "
                        f"'{st.SERVICE_USER}'@'{host}'")
        cur.execute("SET GLOBAL disconnect_on_expired_password = ON")
        for key, options in REQ_ACCOUNTS.items():
            cur.execute(f"CREATE USER '{users[key]}'@'%' IDENTIFIED BY 'pw' "
                        f"{options}")
            cur.execute(f"GRANT SELECT ON test.* TO '{users[key]}'@'%'")
        # every privilege bit, as root has: "access" beyond INT64_MAX
        cur.execute("UPDATE mysql.global_priv SET Priv = REPLACE(Priv, "
                    "'\"access\":0', '\"access\":18446744073709551615') "
                    "WHERE User = %s", (users["all_bits"],))
        cur.execute("FLUSH PRIVILEGES")
    # Sluice reloads its accounts when a login does not match (at most
    # every 5 s per client host once a burst is used): all at once here.
    st.wait_until(lambda: attempt(proxy.primary_port, users["all_bits"],
                                  "pw")[0] == "ok", 30, interval=1,
                  what="Sluice to load the new accounts")
    yield users
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute("SET GLOBAL disconnect_on_expired_password = OFF")
        for user in users.values():
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")


def attempt(port, user, password, flags=0):
    """('ok', rows of SELECT 1) | ('login' or 'query', code, message)."""
    try:
        conn = st.connect(port, user=user, password=password,
                          client_flag=flags)
    except pymysql.err.MySQLError as exc:
        return ("login", st.error_code(exc), str(exc.args[1]))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            return ("ok", cur.fetchall())
    except pymysql.err.MySQLError as exc:
        return ("query", st.error_code(exc), str(exc.args[1]))
    finally:
        conn.close()


def same_as_direct(proxy, user, password, flags=0):
    direct = attempt(st.SERVERS[st.PRIMARY_ID], user, password, flags)
    through = attempt(proxy.primary_port, user, password, flags)
    assert through == direct, (through, direct)
    return through


def sluice_refused(proxy, user, code, password="pw"):
    """Sluice's log says it refused user's login with code. Failed logins
    from one host reload the accounts at most every 5 s once this module
    has used its burst, so a new account may need another try."""
    if PROXY != "sluice":
        return
    line = f"login of '{user}'@'127.0.0.1' refused: {code}"
    path = proxy.run_dir / "proxy.log"

    def logged():
        if line in path.read_text(errors="replace"):
            return True
        attempt(proxy.primary_port, user, password)
        return False
    try:
        st.wait_until(logged, 30, interval=1, what=line)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{path.read_text()[-3000:]}")


def test_locked_account_is_refused(proxy, account):
    user, pw = account["locked"], "pw"
    assert same_as_direct(proxy, user, pw) == (
        "login", 4151, "Access denied, this account is locked")
    sluice_refused(proxy, user, 4151)
    # the password is checked first: a wrong one is a plain 1045
    assert same_as_direct(proxy, user, "bad")[:2] == ("login", 1045)


def test_expired_password(proxy, account):
    """With disconnect_on_expired_password, a client that cannot handle an
    expired password gets 1862; one that says it can logs in to the
    server's sandbox mode, where statements get 1820."""
    user, pw = account["expired"], "pw"
    code = same_as_direct(proxy, user, pw)
    assert code[:2] == ("login", 1862), code
    sluice_refused(proxy, user, 1862)
    assert same_as_direct(proxy, user, pw, EXPIRED_CAP)[:2] == ("query", 1820)


def test_max_user_connections(proxy, account):
    user, pw = account["max_user"], "pw"
    held = [st.connect(proxy.primary_port, user=user, password=pw)
            for _ in range(2)]
    try:
        code = attempt(proxy.primary_port, user, pw)
        assert code == ("login", 1226, f"User '{user}' has exceeded the "
                        "'max_user_connections' resource (current value: "
                        "2)"), code
        sluice_refused(proxy, user, 1226)
        held.pop().close()
        st.wait_until(lambda: attempt(proxy.primary_port, user, pw)[0] ==
                      "ok", 20, interval=0.2, what="a slot freed by close")
    finally:
        for conn in held:
            conn.close()


def test_max_connections_per_hour(proxy, account):
    user, pw = account["per_hour"], "pw"
    assert attempt(proxy.primary_port, user, pw)[0] == "ok"
    assert attempt(proxy.primary_port, user, pw)[0] == "ok"
    code = attempt(proxy.primary_port, user, pw)
    assert code == ("login", 1226, f"User '{user}' has exceeded the "
                    "'max_connections_per_hour' resource (current value: "
                    "2)"), code
    sluice_refused(proxy, user, 1226)
    # the server counted the same two: directly it refuses alike
    assert attempt(st.SERVERS[st.PRIMARY_ID], user, pw) == code


def test_require_ssl_over_plaintext(proxy, account):
    user, pw = account["ssl"], "pw"
    code = same_as_direct(proxy, user, pw)
    assert code[:2] == ("login", 1045), code
    sluice_refused(proxy, user, 1045)


def test_account_with_every_privilege_bit(proxy, account):
    """An account with every privilege bit (root as installed) has an
    "access" in mysql.global_priv larger than a signed 64-bit integer;
    it must still load."""
    user = account["all_bits"]
    with st.root(st.PRIMARY_ID) as conn:
        priv = st.scalar(conn, "SELECT Priv FROM mysql.global_priv WHERE "
                         "User = %s", (user,))
    assert '"access":18446744073709551615' in priv, priv
    assert same_as_direct(proxy, user, "pw") == ("ok", ((1,),))


def test_change_user_keeps_within_max_user_connections(proxy, account):
    """COM_CHANGE_USER gives back the old account's slot before taking
    the new one, as the server does: a session of a one-connection
    account can change to that same account."""
    user, pw = account["one_conn"], "pw"
    for port in (st.SERVERS[st.PRIMARY_ID], proxy.primary_port):
        proc = st.c_client(port, "change_user", user, pw, user=user,
                           password=pw)
        assert proc.returncode == 0, (port, proc.stdout, proc.stderr)
        assert f"{user}@%" in proc.stdout, proc.stdout
    # and the slot is free again afterwards: once the server has seen the
    # old backend connection go (asynchronous there, as for a direct
    # client that disconnects and comes straight back)
    st.wait_until(lambda: attempt(proxy.primary_port, user, pw)[0] == "ok",
                  10, what="the one-connection account's slot to be free")
