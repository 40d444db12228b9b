# SPDX-License-Identifier: Apache-2.0
"""Filters that observe or rewrite statements, on the real cluster:
qlafilter (log lines written, correct user and statement, match/exclude,
user restriction, reopened after SIGHUP), regexfilter (the rewritten
statement is what the server executed, proven by its result), topfilter
(the N slowest statements of a session, in order) and throttlefilter (the
rate-limit error past max_qps, the disconnect after throttling_duration).
"""

import glob
import os
import signal
import time

import pymysql
import pytest

import filterconf as fc
import sluicetest as st

pytestmark = pytest.mark.sluice_only

PRIMARY, REPLICA = st.port(4450), st.port(4451)
QLA, REGEX, TOP, THROTTLE, THROTTLE_CUT = (st.port(n) for n in
                                           range(4452, 4457))


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    return tmp_path_factory.mktemp("filterlogs")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, logdir):
    sections = f"""
[QLA]
type=filter
module=qlafilter
filebase={logdir}/qla
log_type=session,unified
log_data=date,user,query,num_rows
flush=true
exclude=/qla-excluded/
match=/qla-/

[QLA-Other-User]
type=filter
module=qlafilter
filebase={logdir}/qla-other
log_type=unified
user=somebody_else
flush=true

[Rewrite]
type=filter
module=regexfilter
match=/'cat'/
replace='dog'
options=ignorecase
log_file={logdir}/regex.log

[Rewrite-Other-User]
type=filter
module=regexfilter
match=/'dog'/
replace='bird'
user=somebody_else

[Top]
type=filter
module=topfilter
count=3
filebase={logdir}/top
match=/top-/

[Throttle]
type=filter
module=throttlefilter
max_qps=1
sampling_duration=10s
throttling_duration=120s
continuous_duration=1s

[Throttle-Cut]
type=filter
module=throttlefilter
max_qps=5
sampling_duration=1s
throttling_duration=1s
"""
    sections += fc.service("QLA-Service", QLA, filters="QLA|QLA-Other-User")
    sections += fc.service("Regex-Service", REGEX,
                           filters="Rewrite|Rewrite-Other-User")
    sections += fc.service("Top-Service", TOP, filters="Top")
    sections += fc.service("Throttle-Service", THROTTLE, filters="Throttle")
    sections += fc.service("Throttle-Cut-Service", THROTTLE_CUT,
                           filters="Throttle-Cut")
    yield from fc.running(tmp_path_factory, PRIMARY, REPLICA, sections,
                          [QLA, REGEX, TOP, THROTTLE, THROTTLE_CUT])


def read(path):
    with open(path) as f:
        return f.read()


def test_qla_logs_user_and_statement(proxy, logdir):
    with st.connect(QLA) as conn:
        assert st.scalar(conn, "SELECT 'qla-marker-1'") == "qla-marker-1"
        assert st.scalar(conn, "SELECT 'qla-excluded-2'") == "qla-excluded-2"
        assert st.scalar(conn, "SELECT 'not-logged-3'") == "not-logged-3"
        with conn.cursor() as cur:
            cur.execute("SELECT 'qla-rows' UNION ALL SELECT 'qla-rows2'")
            assert len(cur.fetchall()) == 2
    unified = read(f"{logdir}/qla.unified").splitlines()
    assert unified[0] == "date,user,query,num_rows"
    lines = [l for l in unified[1:] if "qla-" in l]
    assert len(lines) == 2, unified
    date, user, query, rows = lines[0].split(",")
    assert user == f"{st.APP_USER}@127.0.0.1"
    assert query == "SELECT 'qla-marker-1'"
    assert rows == "1"
    assert time.strptime(date, "%Y-%m-%d %H:%M:%S")
    assert lines[1].endswith(",2"), lines[1]
    assert not any("excluded" in l or "not-logged" in l for l in unified)
    # the same lines in the session's own file
    session_files = [f for f in glob.glob(f"{logdir}/qla.*")
                     if not f.endswith(".unified")]
    assert any("SELECT 'qla-marker-1'" in read(f) for f in session_files)
    # the filter restricted to another user logged nothing
    other = read(f"{logdir}/qla-other.unified").splitlines()
    assert other == ["date,user,query"], other


def test_qla_masks_passwords(proxy, logdir):
    """A password in a logged statement is written as '*****'."""
    with st.connect(QLA) as conn:
        assert st.scalar(conn, "SELECT PASSWORD('qla-secret-41') "
                         "IS NOT NULL")
    lines = [l for l in read(f"{logdir}/qla.unified").splitlines()
             if "PASSWORD(" in l]
    assert lines and "SELECT PASSWORD('*****') IS NOT NULL" in lines[-1]
    for f in glob.glob(f"{logdir}/qla*"):
        assert "qla-secret-41" not in read(f), f


def test_qla_reopens_after_rotation(proxy, logdir):
    os.rename(f"{logdir}/qla.unified", f"{logdir}/qla.unified.1")
    os.kill(proxy.pid, signal.SIGHUP)
    # the reopen is seen by the next write after the signal was handled:
    # probe until a statement lands in a new qla.unified
    probes = iter(range(10 ** 6))

    def reopened():
        with st.connect(QLA) as conn:
            st.scalar(conn, f"SELECT 'qla-probe-{next(probes)}'")
        return os.path.exists(f"{logdir}/qla.unified")
    st.wait_until(reopened, 60, interval=0.2, what="a new qla.unified")
    with st.connect(QLA) as conn:
        st.scalar(conn, "SELECT 'qla-after-rotation'")
    fresh = read(f"{logdir}/qla.unified")
    assert "SELECT 'qla-after-rotation'" in fresh
    assert "qla-marker-1" not in fresh
    assert "qla-after-rotation" not in read(f"{logdir}/qla.unified.1")


def test_regex_rewrites_the_executed_statement(proxy, logdir):
    with st.connect(REGEX) as conn:
        assert st.scalar(conn, "SELECT 'cat'") == "dog"
        assert st.scalar(conn, "SELECT 'CAT'") == "dog"   # ignorecase
        assert st.scalar(conn, "SELECT 'cow'") == "cow"
        # Rewrite-Other-User (dog -> bird) is for another user only
        assert st.scalar(conn, "SELECT 'dog'") == "dog"
        assert st.server_id(conn) == st.PRIMARY_ID
    assert "SELECT 'cat' -> SELECT 'dog'" in read(f"{logdir}/regex.log")


def test_top_reports_the_slowest_statements(proxy, logdir):
    with st.connect(TOP) as conn:
        for q in ("SELECT SLEEP(0.2), 'top-b'", "SELECT 'top-fast1'",
                  "SELECT SLEEP(0.4), 'top-a'", "SELECT 'top-fast2'",
                  "SELECT SLEEP(0.1), 'top-c'", "SELECT 'top-fast3'",
                  "SELECT SLEEP(0.3), 'not-timed'"):
            st.scalar(conn, q)

    def report():
        files = glob.glob(f"{logdir}/top.*")
        return files and "Total of" in read(files[0])
    st.wait_until(report, 10, what="the top report")
    (path,) = glob.glob(f"{logdir}/top.*")
    text = read(path)
    timed = [l for l in text.splitlines() if "|  SELECT" in l]
    assert [l.split("|")[1].strip() for l in timed] == [
        "SELECT SLEEP(0.4), 'top-a'", "SELECT SLEEP(0.2), 'top-b'",
        "SELECT SLEEP(0.1), 'top-c'"], text
    assert float(timed[0].split("|")[0]) >= 0.4
    assert "Top 3 longest running queries in session." in text
    assert f"Username        {st.APP_USER}" in text
    assert "Total of 6 statements executed." in text


def test_throttle_errors_past_the_limit(proxy):
    """10 statements per 10 s window (max_qps=1, sampling_duration=10s):
    the first ten pass, every later one sent inside that window is refused
    at once with 1105; after the window statements pass again. Only the
    statements known to be inside the window are judged, so a slow
    machine cannot fail the test."""
    codes, times = [], []
    with st.connect(THROTTLE) as conn:
        for _ in range(30):
            t = time.monotonic()
            try:
                st.scalar(conn, "SELECT 1")
                codes.append(0)
            except pymysql.err.MySQLError as exc:
                codes.append(st.error_code(exc))
                assert "Query rate limit exceeded" in str(exc)
            times.append(t)
        assert codes[:10] == [0] * 10, codes
        in_window = [c for c, t in zip(codes[10:], times[10:])
                     if t - times[0] < 9]
        assert in_window and set(in_window) == {1105}, (codes, times)
        assert set(codes) <= {0, 1105}, codes

        def passes():   # a new window: statements pass again
            try:
                return st.server_id(conn) == st.PRIMARY_ID
            except pymysql.err.MySQLError as exc:
                assert st.error_code(exc) == 1105, exc
                return False
        st.wait_until(passes, 120, interval=2,
                      what="statements to pass in a new window")


def test_throttle_never_answers_out_of_order(proxy):
    """Thirty statements pipelined past max_qps: the refusal may not
    overtake the answers of the earlier ones (the client would read it as
    one of them). Every answer read is its own statement's; the session
    is closed instead of answering out of order."""
    from test_filter_cache import COM_QUERY, read_answer
    time.sleep(1.2)   # a fresh window
    with st.connect(THROTTLE, read_timeout=20) as conn:
        data = b""
        for i in range(30):
            payload = bytes([COM_QUERY]) + f"SELECT {i}".encode()
            data += len(payload).to_bytes(3, "little") + b"\x00" + payload
        conn._write_bytes(data)
        answers = []
        for i in range(30):
            a = read_answer(conn)
            answers.append(a)
            if a[0] == "err":
                break
        for i, a in enumerate(answers):
            assert a in (("rows", [str(i)]), ("err", 2013)), answers


def test_throttle_disconnects_after_throttling_duration(proxy):
    conn = st.connect(THROTTLE_CUT)
    deadline = time.monotonic() + 10
    lost = None
    try:
        while time.monotonic() < deadline:
            try:
                st.scalar(conn, "SELECT 1")
            except pymysql.err.OperationalError as exc:
                if "disconnecting" in str(exc) or \
                        st.error_code(exc) in (2013, 2006):
                    lost = exc
                    break
            except pymysql.err.MySQLError as exc:
                assert st.error_code(exc) == 1105, exc
            time.sleep(0.02)
    finally:
        conn.close()
    assert lost is not None, "session was never disconnected"
    # after the cut the connection is really gone
    with pytest.raises(pymysql.err.MySQLError):
        conn.ping(reconnect=False)
