# SPDX-License-Identifier: Apache-2.0
"""The tee filter on the real cluster: statements through Tee-Service go
to the primary as usual and a copy goes through Tee-Target, a second
service whose own regexfilter redirects it from test.tee_src to
test.tee_dst. A row in tee_dst can only have arrived through the second
service. match limits what is copied; the client sees only its own
service's answers (also when the copy fails). A target that falls behind
(its table locked) costs at most max_pending_bytes per session: further
copies are dropped with a warning, not buffered."""

import threading
import time
import uuid

import pytest

import filterconf as fc
import sluicetest as st

pytestmark = pytest.mark.sluice_only

PRIMARY, REPLICA = st.port(4480), st.port(4481)
TEE, TARGET = st.port(4482), st.port(4483)


@pytest.fixture(scope="module")
def tables():
    with st.root(st.PRIMARY_ID) as conn:
        with conn.cursor() as cur:
            for t in ("tee_src", "tee_dst"):
                cur.execute(f"CREATE TABLE IF NOT EXISTS test.{t} "
                            "(id VARCHAR(64) PRIMARY KEY, v INT)")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, tables):
    sections = """
[Tee]
type=filter
module=tee
target=Tee-Target
match=/tee_src/
exclude=/no-copy/
max_pending_bytes=2Mi

[To-Dst]
type=filter
module=regexfilter
match=/tee_src/
replace=tee_dst
"""
    sections += fc.service("Tee-Service", TEE, filters="Tee")
    sections += fc.service("Tee-Target", TARGET, filters="To-Dst")
    yield from fc.running(tmp_path_factory, PRIMARY, REPLICA, sections,
                          [TEE, TARGET])


def rows(table, tag):
    with st.root(st.PRIMARY_ID) as conn:
        return st.scalar(conn, f"SELECT COUNT(*) FROM test.{table} "
                         "WHERE id LIKE %s", (tag + "%",))


def test_writes_are_copied_through_the_second_service(proxy):
    tag = uuid.uuid4().hex[:8]
    with st.connect(TEE, database="test") as conn:
        with conn.cursor() as cur:
            for i in range(5):
                cur.execute("INSERT INTO tee_src VALUES (%s, %s)",
                            (f"{tag}-{i}", i))
            cur.execute("INSERT INTO tee_src VALUES (%s, 9) -- no-copy",
                        (f"{tag}-x",))
            cur.execute("SELECT COUNT(*) FROM tee_src WHERE id LIKE %s",
                        (tag + "%",))
            assert cur.fetchone()[0] == 6    # the client's own answers
        assert st.server_id(conn) == st.PRIMARY_ID
    assert rows("tee_src", tag) == 6
    st.wait_until(lambda: rows("tee_dst", tag) == 5, 10,
                  what="the tee'd inserts")
    assert rows("tee_dst", tag + "-x") == 0      # excluded


def test_failing_copies_do_not_reach_the_client(proxy):
    """The copy of a duplicate-key insert fails on tee_dst; the client
    sees only its own statement's success."""
    tag = uuid.uuid4().hex[:8]
    with st.root(st.PRIMARY_ID) as conn:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO test.tee_dst VALUES (%s, 0)",
                        (tag + "-dup",))
    with st.connect(TEE, database="test") as conn:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO tee_src VALUES (%s, 1)", (tag + "-dup",))
            cur.execute("INSERT INTO tee_src VALUES (%s, 2)", (tag + "-ok",))
    assert rows("tee_src", tag) == 2
    st.wait_until(lambda: rows("tee_dst", tag + "-ok") == 1, 10,
                  what="the copy after a failed copy")


def _sanitized(pid):
    """ASan's quarantine keeps freed memory; TSan's allocator and shadow
    make RSS move with it too: the bound is checked in the normal build."""
    with open(f"/proc/{pid}/maps") as f:
        maps = f.read()
    return "libasan" in maps or "libtsan" in maps


@pytest.mark.release
def test_slow_target_drops_copies_past_the_bound(proxy):
    """tee_dst is locked on the primary, so the copies (rewritten to
    tee_dst) wait on the server. 60 statements of 900 KiB: the client's
    own all succeed, Sluice's RSS does not grow by the 53 MiB of copies
    (max_pending_bytes=2Mi drops them, with a warning), and once the
    target catches up the same session is copied again."""
    tag = uuid.uuid4().hex[:8]
    n, pad = 60, "z" * (900 * 1024)
    pid = proxy.daemon.pid
    peak = [0]
    halt = threading.Event()

    def sample():
        while not halt.is_set():
            peak[0] = max(peak[0], st.rss_kb(pid))
            time.sleep(0.02)
    with st.root(st.PRIMARY_ID) as root, \
            st.connect(TEE, database="test") as conn, conn.cursor() as cur:
        root.cursor().execute("LOCK TABLES test.tee_dst WRITE")
        before = st.rss_kb(pid)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            for i in range(n):
                cur.execute("INSERT INTO tee_src VALUES (%s, %s) -- " + pad,
                            (f"{tag}-{i}", i))
        finally:
            halt.set()
            sampler.join(10)
            root.cursor().execute("UNLOCK TABLES")
        assert rows("tee_src", tag) == n
        print(f"RSS before {before} KiB, peak {peak[0]} KiB")
        if not _sanitized(pid):
            assert peak[0] - before < 24 * 1024, peak[0] - before
        log = proxy.daemon.log_path.read_text(errors="replace")
        assert "dropping copies (max_pending_bytes)" in log
        marks = [0]

        def copied_again():
            marks[0] += 1
            cur.execute("INSERT INTO tee_src VALUES (%s, 0)",
                        (f"{tag}-m{marks[0]}",))
            return rows("tee_dst", tag + "-m") > 0
        st.wait_until(copied_again, 60, interval=0.5,
                      what="copies again once the target caught up")
    assert rows("tee_dst", tag) < n + marks[0]
