# SPDX-License-Identifier: Apache-2.0
"""The cache filter on the real cluster. A hit is proven to come from the
cache, not a server: a row inserted directly on the primary (behind
Sluice's back) stays invisible through the cache until the entry expires
or a write through the same cache invalidates it, while a table the rules
do not store shows it at once. hard_ttl expiry, the store rules and
invalidate=current are covered."""

import base64
import json
import struct
import time
import urllib.request
import uuid

import pymysql
import pytest

import filterconf as fc
import proxy as px
import sluicetest as st

pytestmark = pytest.mark.sluice_only

PRIMARY, REPLICA = st.port(4460), st.port(4461)
CACHED, SHORT = st.port(4462), st.port(4463)


@pytest.fixture(scope="module")
def tables():
    with st.root(st.PRIMARY_ID) as conn:
        with conn.cursor() as cur:
            for t in ("cache_t", "cache_other"):
                cur.execute(f"CREATE TABLE IF NOT EXISTS test.{t} "
                            "(id VARCHAR(64) PRIMARY KEY, v INT)")
                cur.execute(f"DELETE FROM test.{t}")
    st.wait_replicated()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, tables):
    rules = tmp_path_factory.mktemp("cache") / "rules.json"
    rules.write_text(json.dumps({"store": [
        {"attribute": "table", "op": "=", "value": "test.cache_t"}]}))
    sections = f"""
[Cache]
type=filter
module=cache
hard_ttl=60s
soft_ttl=60s
max_resultset_rows=1000
max_resultset_size=1Mi
max_size=10Mi
invalidate=current
rules={rules}

[Short-Cache]
type=filter
module=cache
hard_ttl=1s
soft_ttl=1s
"""
    sections += fc.service("Cache-Service", CACHED, filters="Cache")
    sections += fc.service("Short-Service", SHORT, filters="Short-Cache")
    yield from fc.running(tmp_path_factory, PRIMARY, REPLICA, sections,
                          [CACHED, SHORT])


def insert_behind(table, key, v):
    """Insert directly on the primary, not through Sluice."""
    with st.root(st.PRIMARY_ID) as conn:
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO test.{table} VALUES (%s, %s)", (key, v))


def count(conn, table, tag):
    return st.scalar(conn, f"SELECT COUNT(*) FROM test.{table} "
                     f"WHERE id LIKE '{tag}%'")


def test_hit_is_served_without_the_server(proxy):
    tag = uuid.uuid4().hex[:8]
    rows = f"SELECT id, v FROM test.cache_t WHERE id LIKE '{tag}%' OR v = 7"
    insert_behind("cache_t", tag + "-0", 7)
    with st.connect(CACHED) as conn:
        assert count(conn, "cache_t", tag) == 1        # miss: stored
        assert count(conn, "cache_other", tag) == 0    # rules: not stored
        with conn.cursor() as cur:
            cur.execute(rows)
            first = cur.fetchall()
        assert first == ((tag + "-0", 7),)
        insert_behind("cache_t", tag + "-1", 1)
        insert_behind("cache_other", tag + "-1", 1)
        assert count(conn, "cache_t", tag) == 1        # hit: stale answer
        assert count(conn, "cache_other", tag) == 1    # from the server
        with conn.cursor() as cur:   # a full result set replays intact
            cur.execute(rows)
            assert cur.fetchall() == first
            assert [d[0] for d in cur.description] == ["id", "v"]
        assert st.server_id(conn) == st.PRIMARY_ID     # the session goes on
    # another session shares the cache
    with st.connect(CACHED) as conn:
        assert count(conn, "cache_t", tag) == 1
    with st.root(st.PRIMARY_ID) as conn:
        with conn.cursor() as cur:
            cur.execute("DELETE FROM test.cache_t WHERE v = 7")


def test_write_through_the_cache_invalidates(proxy):
    tag = uuid.uuid4().hex[:8]
    with st.connect(CACHED) as conn:
        assert count(conn, "cache_t", tag) == 0
        insert_behind("cache_t", tag + "-1", 1)
        assert count(conn, "cache_t", tag) == 0        # cached
        with conn.cursor() as cur:
            cur.execute("INSERT INTO test.cache_t VALUES (%s, 2)",
                        (tag + "-2",))
        assert count(conn, "cache_t", tag) == 2        # fresh after write


def test_hard_ttl_expires_entries(proxy):
    tag = uuid.uuid4().hex[:8]
    with st.connect(SHORT) as conn:
        assert count(conn, "cache_other", tag) == 0
        insert_behind("cache_other", tag + "-1", 1)
        assert count(conn, "cache_other", tag) == 0    # cached
        time.sleep(1.3)
        assert count(conn, "cache_other", tag) == 1    # expired


def test_uncacheable_statements_reach_the_server(proxy):
    with st.connect(SHORT) as conn:
        assert st.server_id(conn) == st.PRIMARY_ID
        st.scalar(conn, "SET @x = 5")
        assert st.scalar(conn, "SELECT @x") == 5
        st.scalar(conn, "SET @x = 6")
        assert st.scalar(conn, "SELECT @x") == 6
        a = st.scalar(conn, "SELECT COUNT(*) FROM test.cache_t FOR UPDATE")
        insert_behind("cache_t", uuid.uuid4().hex, 1)
        assert st.scalar(conn, "SELECT COUNT(*) FROM test.cache_t "
                         "FOR UPDATE") == a + 1


# ---- keys and bounds (issue 14, item 11) ----

ISO_PRIMARY, ISO_REPLICA = st.port(4467), st.port(4468)
ISOLATED, SMALL, DEFAULT = st.port(4469), st.port(4471), st.port(4472)
ADMIN = st.port(4470)
SMALL_MAX = 64 * 1024


@pytest.fixture(scope="module")
def iso_proxy(tmp_path_factory, tables):
    """Caches with users=isolated, a small max_size and the defaults, and
    the admin API for their diagnostics."""
    sections = f"""
[Iso-Cache]
type=filter
module=cache
users=isolated
hard_ttl=60s
soft_ttl=60s

[Small-Cache]
type=filter
module=cache
hard_ttl=60s
soft_ttl=60s
max_size={SMALL_MAX}

[Default-Cache]
type=filter
module=cache
"""
    sections += fc.service("Iso-Service", ISOLATED, filters="Iso-Cache")
    sections += fc.service("Small-Service", SMALL, filters="Small-Cache")
    sections += fc.service("Default-Service", DEFAULT,
                           filters="Default-Cache")
    run_dir = tmp_path_factory.mktemp("cache-iso")
    text = fc.config_text(run_dir, ISO_PRIMARY, ISO_REPLICA, sections)
    text = text.replace("admin_enabled=false",
                        f"admin_host={st.HOST}\nadmin_port={ADMIN}")
    prx = px.start_with_admin(run_dir, text, ISO_PRIMARY, ISO_REPLICA, ADMIN)
    try:
        for p in (ISOLATED, SMALL, DEFAULT):
            st.wait_until(lambda: st.connect(p).close() is None, 20,
                          what=f"port {p}")
        yield prx
    finally:
        problems = px.stop_proxy(prx)
    if problems:
        pytest.fail("proxy shutdown: " + "\n".join(problems), pytrace=False)


def diagnostics(name):
    req = urllib.request.Request(
        f"http://{st.HOST}:{ADMIN}/v1/filters/{name}")
    tok = base64.b64encode(b"admin:mariadb").decode()
    req.add_header("Authorization", "Basic " + tok)
    with urllib.request.urlopen(req, timeout=10) as resp:
        doc = json.loads(resp.read())
    return doc["data"]["attributes"]["filter_diagnostics"]


@pytest.fixture
def look_alike_accounts():
    """ckapp (default database ckshop) may read ckdata.t; ckappckshop (no
    default database) may not: joined without separators their
    (user, database) pairs are the same bytes."""
    users = ("ckapp", "ckappckshop")
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        for u in users:
            cur.execute(f"DROP USER IF EXISTS '{u}'@'%'")
        cur.execute("CREATE DATABASE IF NOT EXISTS ckshop")
        cur.execute("CREATE DATABASE IF NOT EXISTS ckdata")
        cur.execute("CREATE OR REPLACE TABLE ckdata.t (secret VARCHAR(32))")
        cur.execute("INSERT INTO ckdata.t VALUES ('only for ckapp')")
        for u in users:
            cur.execute(f"CREATE USER '{u}'@'%' IDENTIFIED BY 'ck_pw'")
        cur.execute("GRANT ALL ON ckshop.* TO 'ckapp'@'%'")
        cur.execute("GRANT SELECT ON ckdata.* TO 'ckapp'@'%'")
    st.wait_replicated()
    try:
        yield
    finally:
        with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
            for u in users:
                cur.execute(f"DROP USER IF EXISTS '{u}'@'%'")
            cur.execute("DROP DATABASE IF EXISTS ckdata")
            cur.execute("DROP DATABASE IF EXISTS ckshop")


def test_isolated_keys_keep_look_alike_accounts_apart(iso_proxy,
                                                      look_alike_accounts):
    """users=isolated: 'ckapp' in 'ckshop' caches a result; 'ckappckshop'
    without a database sending the same text must not get it from the
    cache (it has no grant on the table: the server says 1142)."""
    sql = "SELECT secret FROM ckdata.t"
    with st.connect(ISOLATED, user="ckapp", password="ck_pw",
                    database="ckshop") as conn:
        for _ in range(2):   # stored, then a hit
            assert st.scalar(conn, sql) == "only for ckapp"
    with st.connect(ISOLATED, user="ckappckshop", password="ck_pw",
                    database=None) as conn:
        with pytest.raises(pymysql.MySQLError) as exc:
            st.scalar(conn, sql)
        assert st.error_code(exc.value) == 1142
        assert st.scalar(conn, "SELECT 1") == 1   # the session goes on
    assert diagnostics("Iso-Cache")["hits"] == 1


def test_cache_stays_within_max_size(iso_proxy):
    """Many distinct results, and one bigger than max_size alone: the
    store's size (what its entries hold in memory) never passes
    max_size, the oldest entries are evicted, the big one is not kept."""
    tag = uuid.uuid4().hex[:8]
    with st.connect(SMALL) as conn:
        for i in range(300):
            st.scalar(conn, f"SELECT COUNT(*) FROM test.cache_t "
                      f"WHERE id = '{tag}-{i}'")
            if i % 50 == 0:
                d = diagnostics("Small-Cache")
                assert d["size"] <= SMALL_MAX, d
        d = diagnostics("Small-Cache")
        assert d["size"] <= SMALL_MAX and 0 < d["entries"] < 300, d
        big = ("SELECT id, REPEAT('y', 100000) FROM test.cache_t "
               "WHERE id = 'none' UNION ALL SELECT 'row', REPEAT('y', 100000)")
        for _ in range(2):
            with conn.cursor() as cur:
                cur.execute(big)
                assert cur.fetchall()[0][1] == "y" * 100000
        d = diagnostics("Small-Cache")
        assert d["size"] <= SMALL_MAX, d
    assert diagnostics("Small-Cache")["max_size"] == SMALL_MAX


def test_default_store_is_bounded(iso_proxy):
    """Without max_size the store is bounded at 100Mi (0 is no limit only
    when written out)."""
    d = diagnostics("Default-Cache")
    assert d["max_size"] == 100 * 1024 * 1024, d


# ---- default-database tracking (issue 14, item 7) ----

COM_QUERY, COM_INIT_DB = 0x03, 0x02
CLIENT_DEPRECATE_EOF = 1 << 24


def admin_get(path):
    req = urllib.request.Request(f"http://{st.HOST}:{ADMIN}/v1{path}")
    tok = base64.b64encode(b"admin:mariadb").decode()
    req.add_header("Authorization", "Basic " + tok)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def session_dbs(service):
    """The database Sluice believes each open session of service is in."""
    doc = admin_get("/sessions")
    out = []
    for s in doc["data"]:
        a = s.get("attributes", s)
        if a.get("service") == service:
            out.append(a["database"])
    return out


def assert_session_db(db, service="Default-Service"):
    """The test's session is the only one left once sessions closed by
    earlier steps are gone; a wrong database never turns right."""
    st.wait_until(lambda: session_dbs(service) == [db], 10,
                  what=f"sessions of {service} to be in {db}: "
                  f"{session_dbs(service)}")


def read_answer(conn):
    """One answer read by hand: ("ok",), ("err", code) or ("rows", [first
    column of each row])."""
    conn._next_seq_id = 1
    try:
        pkt = conn._read_packet()
    except pymysql.MySQLError as exc:
        return ("err", st.error_code(exc))
    if pkt.is_ok_packet():
        return ("ok",)
    ncols = pkt.read_length_encoded_integer()
    for _ in range(ncols):
        conn._read_packet()
    if not conn.client_flag & CLIENT_DEPRECATE_EOF:
        conn._read_packet()
    rows = []
    while True:
        pkt = conn._read_packet()
        if pkt.is_eof_packet():
            return ("rows", rows)
        rows.append(pkt.read_length_coded_string().decode())


def pipeline(conn, *commands):
    """Write every (command byte, argument) at once, before reading any
    answer, then read the answers in order."""
    data = b""
    for cmd, arg in commands:
        payload = bytes([cmd]) + arg.encode()
        data += struct.pack("<I", len(payload))[:3] + b"\x00" + payload
    conn._write_bytes(data)
    return [read_answer(conn) for _ in commands]


@pytest.fixture
def two_dbs():
    """ck_pipe in test ('in test') and in sbtest ('in sbtest'): app may
    use both databases."""
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS sbtest")
        for db in ("test", "sbtest"):
            cur.execute(f"CREATE OR REPLACE TABLE {db}.ck_pipe "
                        "(k INT, v VARCHAR(16))")
            cur.execute(f"INSERT INTO {db}.ck_pipe VALUES (1, 'in {db}')")
    st.wait_replicated()
    try:
        yield
    finally:
        with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
            for db in ("test", "sbtest"):
                cur.execute(f"DROP TABLE IF EXISTS {db}.ck_pipe")


def fresh_read(sql):
    """sql through the cache from a new session in `test`."""
    with st.connect(DEFAULT, database="test") as conn:
        return st.scalar(conn, sql)


def test_pipelined_failed_init_db_is_not_applied(iso_proxy):
    """DO 1 and COM_INIT_DB to a database app may not use, sent together:
    DO's OK must not apply the change; the INIT_DB's 1044 decides. Sluice
    still believes `test` (the REST session), and so does the server."""
    with st.connect(DEFAULT, database="test") as conn:
        answers = pipeline(conn, (COM_QUERY, "DO 1"), (COM_INIT_DB, "mysql"))
        assert answers == [("ok",), ("err", 1044)]
        assert_session_db("test")
        assert st.scalar(conn, "SELECT DATABASE()") == "test"
        answers = pipeline(conn, (COM_INIT_DB, "sbtest"), (COM_QUERY, "DO 1"))
        assert answers == [("ok",), ("ok",)]
        assert_session_db("sbtest")


def test_pipelined_use_then_select_is_not_cached_under_old_db(
        iso_proxy, two_dbs):
    """USE sbtest and a SELECT sent together: the SELECT runs in sbtest;
    it must not be stored under `test` (whose sessions would get
    sbtest's rows)."""
    sql = "SELECT v FROM ck_pipe WHERE k = 1"
    with st.connect(DEFAULT, database="test") as conn:
        answers = pipeline(conn, (COM_QUERY, "USE sbtest"), (COM_QUERY, sql))
        assert answers == [("ok",), ("rows", ["in sbtest"])]
    for _ in range(2):
        assert fresh_read(sql) == "in test"


def test_multi_statement_use_is_not_cached_under_old_db(iso_proxy, two_dbs):
    """"SELECT 1; USE sbtest" changes the database inside one command:
    Sluice cannot tell from its answer, so the cache keys nothing on the
    database until the next USE; nothing is stored under `test`."""
    sql = "SELECT v FROM ck_pipe WHERE k = 1 AND 2 = 2"
    with st.connect(DEFAULT, database="test",
                    client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS
                    ) as conn, conn.cursor() as cur:
        cur.execute("SELECT 1; USE sbtest")
        while cur.nextset():
            pass
        for _ in range(2):
            assert st.scalar(conn, sql) == "in sbtest"
        cur.execute("USE test")
        assert_session_db("test")
    for _ in range(2):
        assert fresh_read(sql) == "in test"


def test_use_behind_a_comment_is_tracked(iso_proxy, two_dbs):
    """A USE after a comment, or inside an executable comment, changes the
    database as the server sees it, so Sluice's view (and the cache key)
    follows."""
    sql = "SELECT v FROM ck_pipe WHERE k = 1 AND 3 = 3"
    with st.connect(DEFAULT, database="test") as conn, conn.cursor() as cur:
        cur.execute("/* hello */ USE sbtest")
        assert_session_db("sbtest")
        for _ in range(2):
            assert st.scalar(conn, sql) == "in sbtest"
        cur.execute("/*!50000USE test*/")
        assert_session_db("test")
        assert st.scalar(conn, sql) == "in test"
    for _ in range(2):
        assert fresh_read(sql) == "in test"


def test_answers_are_not_shared_across_eof_formats(iso_proxy, two_dbs):
    """An answer stored for a client with CLIENT_DEPRECATE_EOF has no EOF
    after its column definitions; replayed to a client without it, it
    would be misread. The key holds the format: both kinds of client read
    their own."""
    sql = "SELECT v FROM test.ck_pipe WHERE k = 1 AND 4 = 4"
    with st.connect(DEFAULT, client_flag=CLIENT_DEPRECATE_EOF) as conn:
        assert conn.client_flag & CLIENT_DEPRECATE_EOF
        for _ in range(2):
            assert pipeline(conn, (COM_QUERY, sql)) == [("rows", ["in test"])]
    with st.connect(DEFAULT, read_timeout=10) as conn:
        assert not conn.client_flag & CLIENT_DEPRECATE_EOF
        for _ in range(2):
            assert st.scalar(conn, sql) == "in test"
    with st.connect(DEFAULT, client_flag=CLIENT_DEPRECATE_EOF) as conn:
        assert pipeline(conn, (COM_QUERY, sql)) == [("rows", ["in test"])]
    assert diagnostics("Default-Cache")["hits"] >= 3


def test_pipelined_hit_waits_for_earlier_answers(iso_proxy, two_dbs):
    """A cached SELECT pipelined behind a command still running on the
    server: the hit must not overtake that command's answer."""
    sql = "SELECT v FROM test.ck_pipe WHERE k = 1 AND 5 = 5"
    assert fresh_read(sql) == "in test"    # stored
    with st.connect(DEFAULT, database="test") as conn:
        answers = pipeline(conn, (COM_QUERY, "SELECT SLEEP(0.3), 'slow'"),
                           (COM_QUERY, sql), (COM_QUERY, "DO 1"),
                           (COM_QUERY, sql))
        assert answers == [("rows", ["0"]), ("rows", ["in test"]), ("ok",),
                           ("rows", ["in test"])]
        assert st.scalar(conn, "SELECT 'still in step'") == "still in step"


def test_pipelined_answer_is_not_stored_under_the_next_key(
        iso_proxy, two_dbs):
    """Two cacheable SELECTs pipelined: the first one's answer must not be
    stored under the second one's key (another session would get
    'poison' for the second statement)."""
    victim = "SELECT v FROM test.ck_pipe WHERE k = 1 AND 6 = 6"
    bait = "SELECT 'poison' FROM test.ck_pipe WHERE k = 1"
    with st.connect(DEFAULT, database="test") as conn:
        answers = pipeline(conn, (COM_QUERY, bait), (COM_QUERY, victim))
        assert answers == [("rows", ["poison"]), ("rows", ["in test"])]
    for _ in range(2):
        assert fresh_read(victim) == "in test"
