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
from proxy import running_proxy

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
