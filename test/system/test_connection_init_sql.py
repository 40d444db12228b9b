# SPDX-License-Identifier: Apache-2.0
"""The listener parameter connection_init_sql_file (MaxScale's): one SQL
statement a line, run on every backend connection of the listener's
sessions right after the login, before any client statement; answers
dropped; a failing statement fails that backend connection.

One Sluice (mariadbmon, 200 ms, threads=1, db1 with persistpoolmax=4).
Its listeners read GOOD, which holds `SET @sluice_init = @@server_id`
and `SET SESSION sql_mode='ANSI_QUOTES'` with blank lines around them:

- readconnroute to the primary and to a replica: `SELECT @sluice_init,
  @@server_id, @@sql_mode` answers (1, 1, ANSI_QUOTES) and (r, r,
  ANSI_QUOTES) for the replica r that answers; also over a compressed
  backend link (a server object at db1 with compression=true);
- readwritesplit (hintfilter): the same question routed to db1, db2 and
  db3 in turn by `-- maxscale route to server dbN` shows each server's
  own id in @sluice_init, so the statements ran on that very connection;
  a second client too; after root KILLs the session's replica connection
  the next read reconnects (another CONNECTION_ID) and the init ran on
  the new connection, before the replay of the client's own session
  commands (its later sql_mode wins, its variable is there);
- a pooled connection (readconnroute, kernel_forwarding=off) is reset
  for the next client (same CONNECTION_ID) and the init runs again after
  the reset: the first client's @sluice_init=99 and sql_mode='' are gone,
  the init's values are there.

A LOAD DATA LOCAL INFILE statement fails the connection at once (no
file can be sent for it). BAD holds a good statement then `SET SESSION sluice_no_such_variable = 1`:
the backend connection fails, the client gets the server's error 1193 at
login (readconnroute and readwritesplit), the log names the statement.

Refused: a missing file (--config-check: file:line: parameter
'connection_init_sql_file' ... naming the path), and through the REST API
a new listener or a PATCH naming a missing file (400)."""

import pymysql
import pytest

import sluicetest as st
from proxy import CONFIG_REFUSED, MonitoredSluice, admin_rest, \
    global_section, mariadbmon_section, run_sluice, server_sections

pytestmark = pytest.mark.sluice_only

RWS_PORT = st.port(5740)
RCR_PRIMARY = st.port(5741)
RCR_REPLICA = st.port(5742)
RCR_BAD = st.port(5743)
RWS_BAD = st.port(5744)
RCR_POOL = st.port(5745)
ADMIN_PORT = st.port(5746)
RUNTIME_PORT = st.port(5747)
ZBACK_PORT = st.port(5748)
INFILE_PORT = st.port(5749)

GOOD_SQL = ("\nSET @sluice_init = @@server_id\n\n"
            "SET SESSION sql_mode='ANSI_QUOTES'\n\n")
BAD_SQL = "SET @sluice_init = 1\nSET SESSION sluice_no_such_variable = 1\n"
INFILE_SQL = ("LOAD DATA LOCAL INFILE '/etc/hostname' INTO TABLE "
              "test.sluice_init_sql_t\n")
QUESTION = "SELECT @sluice_init, @@server_id, @@sql_mode"
SERVERS = "db1,db2,db3"


def listener(name, service, port, path):
    return f"""
[{name}]
type=listener
service={service}
protocol=MariaDBClient
address={st.HOST}
port={port}
connection_init_sql_file={path}
"""


def service(name, router, extra=""):
    return f"""
[{name}]
type=service
router={router}
servers={SERVERS}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
{extra}
"""


def config(run_dir, good, bad, infile=None):
    text = global_section(run_dir, ADMIN_PORT, threads=1,
                          extra=f"admin_secure_paths={run_dir}")
    text += server_sections().replace(
        "[db1]\ntype=server\n", "[db1]\ntype=server\npersistpoolmax=4\n", 1)
    text += mariadbmon_section(SERVERS, "200ms", "")
    text += f"""
[zdb1]
type=server
address={st.HOST}
port={st.SERVERS[1]}
compression=true

[Z-Monitor]
type=monitor
module=basicmon
servers=zdb1
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
monitor_interval=200ms

[Zback]
type=service
router=readconnroute
router_options=running
servers=zdb1
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
"""
    text += listener("Zback-Listener", "Zback", ZBACK_PORT, good)
    text += """
[Hint]
type=filter
module=hintfilter
"""
    text += service("RWS", "readwritesplit", "filters=Hint")
    text += listener("RWS-Listener", "RWS", RWS_PORT, good)
    text += service("RCR-Primary", "readconnroute",
                    "router_options=master\nkernel_forwarding=off")
    text += listener("RCR-Primary-Listener", "RCR-Primary", RCR_PRIMARY, good)
    text += service("RCR-Replica", "readconnroute", "router_options=slave")
    text += listener("RCR-Replica-Listener", "RCR-Replica", RCR_REPLICA, good)
    text += listener("RCR-Bad-Listener", "RCR-Primary", RCR_BAD, bad)
    text += listener("RWS-Bad-Listener", "RWS", RWS_BAD, bad)
    if infile is not None:
        text += listener("RCR-Infile-Listener", "RCR-Primary", INFILE_PORT,
                         infile)
    return text


@pytest.fixture(scope="module")
def sl(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("init_sql")
    good = run_dir / "good.sql"
    bad = run_dir / "bad.sql"
    infile = run_dir / "infile.sql"
    good.write_text(GOOD_SQL)
    bad.write_text(BAD_SQL)
    infile.write_text(INFILE_SQL)
    with st.root(1) as root, root.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS test.sluice_init_sql_t "
                    "(v TEXT)")
    s = MonitoredSluice(run_dir, config(run_dir, good, bad, infile),
                        [RWS_PORT, RCR_PRIMARY, RCR_REPLICA, RCR_BAD, RWS_BAD,
                         ZBACK_PORT, INFILE_PORT, ADMIN_PORT], ADMIN_PORT)
    s.good = good
    try:
        st.wait_until(lambda: all(
            state(f"db{sid}") == "Slave, Running" for sid in (2, 3)) and
            "Master" in state("db1") and "Running" in state("zdb1"), 15,
            what="topology known")
        yield s
    finally:
        problems = s.daemon.stop()
    assert not problems, "\n".join(problems)


def state(name):
    status, doc = admin_rest(ADMIN_PORT, "GET", f"servers/{name}")
    assert status == 200, doc
    return doc["data"]["attributes"]["state"]


def answer(conn, sql=QUESTION):
    with conn.cursor() as cur:
        cur.execute(sql)
        init, sid, mode = cur.fetchone()
    return (None if init is None else int(init)), int(sid), mode


def test_readconnroute_primary(sl):
    with st.connect(RCR_PRIMARY) as conn:
        assert answer(conn) == (1, 1, "ANSI_QUOTES")


def test_readconnroute_replica(sl):
    with st.connect(RCR_REPLICA) as conn:
        init, sid, mode = answer(conn)
        assert sid in st.REPLICA_IDS
        assert (init, mode) == (sid, "ANSI_QUOTES")


def test_init_sql_takes_effect_for_client_statements(sl):
    """ANSI_QUOTES makes "x" an identifier: the client's own statement
    runs under the init's sql_mode."""
    with st.connect(RCR_PRIMARY) as conn, conn.cursor() as cur:
        with pytest.raises(pymysql.err.OperationalError) as exc:
            cur.execute('SELECT "no_such_column"')
        assert st.error_code(exc.value) == 1054


def test_compressed_backend(sl):
    """A server with compression=true: the statements go compressed
    after the login's OK, their answers are read through the codec."""
    with st.connect(ZBACK_PORT) as conn:
        assert answer(conn) == (1, 1, "ANSI_QUOTES")
        assert st.scalar(conn, "SELECT VARIABLE_VALUE FROM "
                               "information_schema.SESSION_STATUS WHERE "
                               "VARIABLE_NAME = 'Compression'") == "ON"


def routed(conn, sid):
    return answer(conn, f"{QUESTION} -- maxscale route to server db{sid}")


def test_readwritesplit_every_server(sl):
    for _ in range(2):   # a second client gets it too
        with st.connect(RWS_PORT) as conn:
            for sid in (1, 2, 3):
                assert routed(conn, sid) == (sid, sid, "ANSI_QUOTES")
            # the plain read goes to a replica, the init ran there too
            init, sid, mode = answer(conn)
            assert (init, mode) == (sid, "ANSI_QUOTES")


def test_readwritesplit_reconnect_after_kill(sl):
    with st.connect(RWS_PORT) as conn:
        assert routed(conn, 2) == (2, 2, "ANSI_QUOTES")
        # the client's own session state, replayed on the new connection
        # after the init statements (so the client's sql_mode wins)
        with conn.cursor() as cur:
            cur.execute("SET @sluice_client = 7")
            cur.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")
        tid = int(st.scalar(conn, "SELECT CONNECTION_ID() "
                                  "-- maxscale route to server db2"))
        with st.root(2) as root, root.cursor() as cur:
            cur.execute(f"KILL {tid}")
        # the session stays usable; the read that finds its replica
        # connection gone is answered on a new one, initialised
        def fresh():
            try:
                return int(st.scalar(conn, "SELECT CONNECTION_ID() "
                                           "-- maxscale route to server "
                                           "db2")) != tid
            except pymysql.err.MySQLError:
                return False
        st.wait_until(fresh, 10, what="a new connection to db2")
        assert routed(conn, 2) == (2, 2, "NO_ENGINE_SUBSTITUTION")
        assert int(st.scalar(conn, "SELECT @sluice_client -- maxscale "
                                   "route to server db2")) == 7


def test_pooled_connection_initialised_after_reset(sl):
    before = int(stats("db1").get("reused_connections", 0))
    with st.connect(RCR_PRIMARY) as conn:
        first = int(st.scalar(conn, "SELECT CONNECTION_ID()"))
        with conn.cursor() as cur:
            cur.execute("SET @sluice_init = 99, SESSION sql_mode = ''")
        assert answer(conn) == (99, 1, "")
    st.wait_until(lambda: int(stats("db1").get("persistent_connections",
                                               0)) >= 1, 5,
                  what="the connection pooled")
    with st.connect(RCR_PRIMARY) as conn:
        assert int(st.scalar(conn, "SELECT CONNECTION_ID()")) == first
        assert answer(conn) == (1, 1, "ANSI_QUOTES")
    # the first client may have reused a pooled connection as well
    assert int(stats("db1")["reused_connections"]) >= before + 1


def stats(server):
    status, doc = admin_rest(ADMIN_PORT, "GET", f"servers/{server}")
    assert status == 200, doc
    return doc["data"]["attributes"]["statistics"]


@pytest.mark.parametrize("port", [RCR_BAD, RWS_BAD], ids=["rcr", "rws"])
def test_failing_statement_fails_the_connection(sl, port):
    with pytest.raises(pymysql.err.MySQLError) as exc:
        with st.connect(port) as conn:
            st.scalar(conn, "SELECT 1")
    assert st.error_code(exc.value) == 1193, exc.value
    assert "sluice_no_such_variable" in str(exc.value)
    log = sl.log()
    assert ("connection_init_sql_file statement 2 of 2 ('SET SESSION "
            "sluice_no_such_variable = 1') failed: error 1193") in log


def test_local_infile_in_init_fails_the_connection(sl):
    """A LOAD DATA LOCAL INFILE among the statements: nobody can send
    the file, so the connection fails at once (no hang) with a clean
    error and the reason in the log; the server got no row."""
    with pytest.raises(pymysql.err.MySQLError) as exc:
        with st.connect(INFILE_PORT, local_infile=True,
                        read_timeout=20) as conn:
            st.scalar(conn, "SELECT 1")
    assert st.error_code(exc.value) == 2013, exc.value
    assert "LOAD DATA LOCAL INFILE in connection_init_sql_file" in \
        str(exc.value)
    assert "LOAD DATA LOCAL INFILE in connection_init_sql_file" in sl.log()
    with st.connect(RCR_PRIMARY) as conn:
        assert st.scalar(conn, "SELECT COUNT(*) FROM "
                               "test.sluice_init_sql_t") == 0


def test_missing_file_refused_by_config_check(tmp_path):
    missing = tmp_path / "missing.sql"
    text = config(tmp_path, missing, missing)
    cfg = tmp_path / "missing.cnf"
    cfg.write_text(text)
    status, out = run_sluice("check", cfg)
    assert status == CONFIG_REFUSED, out
    lines = text.splitlines()
    line = lines.index(f"connection_init_sql_file={missing}",
                       lines.index("[RWS-Listener]")) + 1
    assert (f"{cfg}:{line}: parameter 'connection_init_sql_file' in "
            f"listener 'RWS-Listener': cannot open '{missing}': No such "
            "file or directory") in out, out


def test_rest_refuses_missing_file(sl):
    missing = sl.run_dir / "missing.sql"
    body = {"data": {"id": "Runtime-Listener", "type": "listeners",
                     "attributes": {"parameters": {
                         "port": RUNTIME_PORT, "address": st.HOST,
                         "protocol": "MariaDBClient",
                         "connection_init_sql_file": str(missing)}},
                     "relationships": {"services": {"data": [
                         {"id": "RCR-Primary", "type": "services"}]}}}}
    status, doc = admin_rest(ADMIN_PORT, "POST", "listeners", body)
    assert status == 400, doc
    assert f"cannot open '{missing}'" in str(doc), doc
    assert admin_rest(ADMIN_PORT, "GET",
                      "listeners/Runtime-Listener")[0] == 404
    status, doc = admin_rest(ADMIN_PORT, "PATCH",
                             "listeners/RCR-Primary-Listener", {"data": {
                                 "attributes": {"parameters": {
                                     "connection_init_sql_file":
                                         str(missing)}}}})
    assert status == 400, doc
    assert f"cannot open '{missing}'" in str(doc), doc


def test_rest_created_listener_runs_init(sl):
    body = {"data": {"id": "Runtime-Listener", "type": "listeners",
                     "attributes": {"parameters": {
                         "port": RUNTIME_PORT, "address": st.HOST,
                         "protocol": "MariaDBClient",
                         "connection_init_sql_file": str(sl.good)}},
                     "relationships": {"services": {"data": [
                         {"id": "RCR-Replica", "type": "services"}]}}}}
    status, doc = admin_rest(ADMIN_PORT, "POST", "listeners", body)
    assert status in (200, 201, 204), doc
    try:
        with st.connect(RUNTIME_PORT) as conn:
            init, sid, mode = answer(conn)
            assert sid in st.REPLICA_IDS
            assert (init, mode) == (sid, "ANSI_QUOTES")
    finally:
        admin_rest(ADMIN_PORT, "DELETE", "listeners/Runtime-Listener")
