"""The cache filter on the real cluster. A hit is proven to come from the
cache, not a server: a row inserted directly on the primary (behind
Sluice's back) stays invisible through the cache until the entry expires
or a write through the same cache invalidates it, while a table the rules
do not store shows it at once. hard_ttl expiry, the store rules and
invalidate=current are covered."""

import base64
import json
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
