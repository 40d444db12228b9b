# SPDX-License-Identifier: Apache-2.0
"""Faults: 200 clients that vanish in the middle of a result leave no
DCB or session behind (live counts logged on SIGUSR1) and no crash; a
replica killed and restarted in a loop under load never crashes Sluice,
and every client gets either its result or a clean MySQL error."""

import re
import signal
import socket
import struct
import subprocess
import threading
import time

import pymysql
import pytest

import sluicetest as st
from proxy import PROXY, running_proxy

pytestmark = pytest.mark.skipif(PROXY != "sluice",
                                reason="tests Sluice's own counters")

SANDBOX_SCRIPT = st.ROOT / "scripts" / "sandbox"
COUNTS = re.compile(r"SIGUSR1: live dcbs=(\d+) sessions=(\d+)")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    yield from running_proxy(tmp_path_factory, st.port(4545),
                             st.port(4546))


def _counts(proxy):
    """(live DCBs, live sessions) from a fresh SIGUSR1 log line."""
    before = len(COUNTS.findall(proxy.daemon.log_path.read_text()))
    proxy.daemon.proc.send_signal(signal.SIGUSR1)
    found = []

    def logged():
        found[:] = COUNTS.findall(proxy.daemon.log_path.read_text())
        return len(found) > before
    st.wait_until(logged, 5, interval=0.05, what="the SIGUSR1 log line")
    dcbs, sessions = found[-1]
    return int(dcbs), int(sessions)


def _vanish(port, i):
    """Log in, start a 16 MiB result, read a little of it, reset the TCP
    connection (RST, no COM_QUIT)."""
    conn = st.connect(port, database="test",
                      cursorclass=pymysql.cursors.SSCursor)
    cur = conn.cursor()
    cur.execute("SELECT REPEAT(CHAR(65 + %s %% 26), 1024 * 1024) "
                "FROM seq_1_to_16", (i,))
    assert len(cur.fetchone()[0]) == 1024 * 1024
    sock = conn._sock
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                    struct.pack("ii", 1, 0))
    sock.close()
    cur._result = conn._result = None
    conn._sock = None


def test_200_clients_vanish_mid_result(proxy):
    # warm up: the monitor and any lazily created objects exist now
    with st.connect(proxy.replica_port) as c:
        st.server_id(c)
    first = []

    def no_sessions():
        first[:] = _counts(proxy)
        return first[1] == 0
    st.wait_until(no_sessions, 10, interval=0.2, what="no live sessions")
    base = tuple(first)
    errors = []

    def client(i):
        try:
            _vanish(proxy.primary_port if i % 2 else proxy.replica_port, i)
        except Exception as exc:  # noqa: BLE001 - collected
            errors.append(repr(exc))
    threads = [threading.Thread(target=client, args=(i,))
               for i in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    assert proxy.daemon.alive()
    last = []

    def back_to_base():
        last[:] = _counts(proxy)
        return tuple(last) == base
    try:
        st.wait_until(back_to_base, 20, interval=0.5,
                      what=f"live DCBs/sessions back to {base}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: still {last}") from None
    with st.connect(proxy.primary_port) as c:
        assert st.server_id(c) == st.PRIMARY_ID


CLEAN_ERRORS = {1040, 1045, 1105, 1927, 2003, 2006, 2013, 2014, 2026, 2027}


def _sandbox(*args):
    subprocess.run([str(SANDBOX_SCRIPT), *args], check=True, timeout=120,
                   capture_output=True)


def test_backend_killed_in_a_loop_under_load(proxy):
    stop = threading.Event()
    outcomes = {"ok": 0, "err": 0}
    bad = []
    lock = threading.Lock()

    def client():
        while not stop.is_set():
            try:
                with st.connect(proxy.replica_port, database="test",
                                connect_timeout=10, read_timeout=15,
                                write_timeout=15) as c:
                    sid = st.server_id(c)
                    rows = st.scalar(c, "SELECT COUNT(*) FROM seq_1_to_5000")
                    assert sid in st.REPLICA_IDS and rows == 5000
                with lock:
                    outcomes["ok"] += 1
            except pymysql.MySQLError as exc:
                with lock:
                    outcomes["err"] += 1
                    if st.error_code(exc) not in CLEAN_ERRORS:
                        bad.append(repr(exc))
            except Exception as exc:  # noqa: BLE001 - not a clean error
                with lock:
                    bad.append(repr(exc))
    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    try:
        for _ in range(3):
            time.sleep(1)
            _sandbox("kill-server", "2")
            time.sleep(1.5)
            _sandbox("start-server", "2")
        time.sleep(1)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        # leave db2 running whatever happened
        subprocess.run([str(SANDBOX_SCRIPT), "start-server", "2"],
                       capture_output=True, timeout=120)
    assert proxy.daemon.alive(), proxy.daemon.log_tail()
    assert not bad, bad[:5]
    assert outcomes["ok"] > 0, outcomes
    print(f"kill loop: {outcomes}")
    st.wait_until(lambda: st.server_id(st.connect(proxy.replica_port))
                  in st.REPLICA_IDS, 20, what="the replica service")
