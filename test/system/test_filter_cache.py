"""The cache filter on the real cluster. A hit is proven to come from the
cache, not a server: a row inserted directly on the primary (behind
Sluice's back) stays invisible through the cache until the entry expires
or a write through the same cache invalidates it, while a table the rules
do not store shows it at once. hard_ttl expiry, the store rules and
invalidate=current are covered."""

import json
import time
import uuid

import pytest

import filterconf as fc
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
