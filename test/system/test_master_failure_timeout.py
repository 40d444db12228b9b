# SPDX-License-Identifier: Apache-2.0
"""mariadbmon master_failure_timeout (with verify_master_failure) on the
real sandbox cluster.

The monitor loses db1 while the replicas do not: the monitor account is
locked and its connections killed on db1 only (not replicated;
test_mariadbmon.lock_monitor_user). While writes made on db1 directly
keep arriving at the replicas, no failover happens however long it lasts;
once they stop, the live primary only sends a heartbeat every 30 s (the
default period), longer than the timeout, and there is still no failover:
the window is at least two heartbeat periods (Sluice's difference from
MaxScale, which fails over an idle live primary after the timeout). With
the replicas' heartbeat period set to 1 s (CHANGE MASTER TO
MASTER_HEARTBEAT_PERIOD, put back to 30 s after) and db1 hung (SIGSTOP:
the replicas' IO threads stay connected, nothing arrives), failover
starts master_failure_timeout after the last event. A
primary that really dies (kill -9) closes the replicas' connections: the
failure is verified at once and failover does not wait for the timeout.
Each test leaves db1 primary again (auto_rejoin, then a switchover); a
broken cluster is rebuilt.
"""

import os
import signal
import threading
import time

import pytest

import sluicetest as st
from proxy import MonitoredSluice, global_section, mariadbmon_section, \
    readconnroute_services, server_sections
from test_mariadbmon import lock_monitor_user, primary_id, wait_topology

pytestmark = pytest.mark.sluice_only

INTERVAL_MS = 500
FAILCOUNT = 2
MFT_S = 6                       # master_failure_timeout
PRIMARY_PORT = st.port(5800)
REPLICA_PORT = st.port(5801)
ADMIN_PORT = st.port(5802)


def config(run_dir):
    servers = "db1,db2,db3"
    text = global_section(run_dir, ADMIN_PORT) + server_sections((1, 2, 3))
    text += mariadbmon_section(servers, f"{INTERVAL_MS}ms", f"""
backend_connect_timeout=2s
backend_read_timeout=3s
auto_failover=true
auto_rejoin=true
failcount={FAILCOUNT}
verify_master_failure=true
master_failure_timeout={MFT_S}s
switchover_timeout=20s
failover_timeout=20s
""")
    text += readconnroute_services(servers, PRIMARY_PORT, REPLICA_PORT)
    return text


@pytest.fixture(scope="module")
def sl(tmp_path_factory):
    with st.root(1) as c:
        c.cursor().execute("CREATE TABLE IF NOT EXISTS test.mft "
                           "(id INT PRIMARY KEY)")
        c.cursor().execute("DELETE FROM test.mft")
    st.wait_replicated()
    run_dir = tmp_path_factory.mktemp("mft")
    s = MonitoredSluice(run_dir, config(run_dir),
                        [PRIMARY_PORT, REPLICA_PORT, ADMIN_PORT], ADMIN_PORT)
    try:
        wait_topology(1, port=PRIMARY_PORT)
        yield s
    finally:
        problems = s.daemon.stop()
        if not st.healthy_topology(1):
            st.sandbox_cmd("stop")
            st.sandbox_cmd("start", "--fresh")
    assert not problems, "\n".join(problems)


def back_to_db1(sl):
    """db1 alive and rejoined (auto_rejoin), then switched back to
    primary; a fresh sandbox when that fails."""
    st.wait_until(lambda: st.replica_source(1) is not None, 30,
                  what="db1 rejoined as a replica")
    status, doc = sl.command("switchover", "Cluster-Monitor", "db1")
    if status != 200:
        problems = sl.daemon.stop(check_exit=False)
        st.sandbox_cmd("stop")
        st.sandbox_cmd("start", "--fresh")
        pytest.fail(f"switchover back to db1 failed ({status} {doc}); "
                    "sandbox rebuilt" + "".join("\n" + p for p in problems))
    wait_topology(1, port=PRIMARY_PORT)


class RootWriter(threading.Thread):
    """INSERTs into test.mft on db1 directly (as root, not through Sluice)
    every 0.2 s; `last_ack` is the monotonic time of the last commit."""

    def __init__(self, start_id):
        super().__init__(daemon=True)
        self.next_id = start_id
        self.last_ack = None
        self.stop_flag = threading.Event()

    def run(self):
        with st.root(1) as c, c.cursor() as cur:
            while not self.stop_flag.is_set():
                cur.execute("INSERT INTO test.mft VALUES (%s)",
                            (self.next_id,))
                c.commit()
                self.last_ack = time.monotonic()
                self.next_id += 1
                time.sleep(0.2)

    def stop(self):
        self.stop_flag.set()
        self.join(10)


def promoted():
    """The sid of a replica that became writable, or None."""
    for sid in (2, 3):
        try:
            if not st.read_only(sid):
                return sid
        except Exception:  # noqa: BLE001 - a server restarting
            pass
    return None


def heartbeat_period(seconds):
    """MASTER_HEARTBEAT_PERIOD on the replicas of db1."""
    for sid in (2, 3):
        with st.root(sid) as c, c.cursor() as cur:
            cur.execute("STOP SLAVE")
            cur.execute(f"CHANGE MASTER TO MASTER_HEARTBEAT_PERIOD={seconds}")
            cur.execute("START SLAVE")


BACK = "Server 'db1' changed state: Down -> Master, Running"


def db1_pid():
    return int((st.SANDBOX / "db1" / "mariadbd.pid").read_text().strip())


def test_events_hold_failover_until_timeout(sl):
    heartbeat_period(30)         # the default: slave_net_timeout / 2
    w = RootWriter(1000)
    w.start()
    lock_monitor_user(1, True)
    stopped = None
    try:
        st.wait_until(lambda: "primary 'db1' is unreachable" in sl.log(),
                      10, what="monitor losing db1")
        # Three timeouts with events arriving: failcount is long passed,
        # yet no failover, and the log says why.
        time.sleep(3 * MFT_S)
        assert w.is_alive() and w.last_ack is not None
        assert time.monotonic() - w.last_ack < 2, "writes stopped early"
        assert promoted() is None
        assert st.replicates_from(2, 1) and st.replicates_from(3, 1)
        log = sl.log()
        assert ("not failing over: primary 'db1' is unreachable from "
                "Sluice but replica") in log
        assert (f"within master_failure_timeout ({MFT_S * 1000} ms) "
                "(verify_master_failure)") in log
        assert "failover: promoting" not in log
        # No more writes: the live primary sends only a heartbeat every
        # 30 s, further apart than the timeout, but the window is two heartbeat
        # periods, so it is never failed over (MaxScale would, after the
        # timeout: two writable primaries).
        w.stop()
        time.sleep(3 * MFT_S)
        assert promoted() is None
        assert "failover: promoting" not in sl.log()
        # With a 1 s heartbeat the timeout is the window again; db1 hangs: the IO threads stay connected (Yes) and receive
        # nothing; failover starts once master_failure_timeout passed.
        # (the replicas restart replication for the change: the monitor
        # sees db1 meanwhile, or it would fail over at once)
        seen = sl.log().count(BACK)
        lock_monitor_user(1, False)
        st.wait_until(lambda: sl.log().count(BACK) > seen, 30,
                      what="the monitor seeing db1 again")
        heartbeat_period(1)
        st.wait_until(lambda: all(st.replicates_from(sid, 1)
                                  for sid in (2, 3)), 15,
                      what="replicas connected to db1 again")
        # the monitor sees heartbeats arrive at the new period first (a
        # restart of replication between two probes is not an event it
        # can see; the last one it saw was in the idle phase above)
        time.sleep(3)
        lock_monitor_user(1, True)
        time.sleep(2 * MFT_S)   # lost again; heartbeats hold it
        assert promoted() is None
        stopped = db1_pid()
        os.kill(stopped, signal.SIGSTOP)
        last = time.monotonic()
        st.wait_until(lambda: promoted() is not None, MFT_S + 16,
                      interval=0.05, what="a replica promoted")
        after = time.monotonic() - last
        new = promoted()
        print(f"master_failure_timeout={MFT_S}s: promoted db{new} "
              f"{after:.2f}s after db1 hung")
        # Not before the timeout (less the heartbeat and one tick of
        # probe skew), and not much later than timeout + failover time.
        assert MFT_S - 1 - INTERVAL_MS / 1000 <= after <= MFT_S + 15, after
        st.wait_until(lambda: primary_id(PRIMARY_PORT) == new, 10,
                      what=f"master service to reach db{new}")
        log = sl.log()
        assert f"failover: promoting 'db{new}'" in log
        assert ("no replica received an event from it within "
                "master_failure_timeout") in log
    finally:
        w.stop()
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        lock_monitor_user(1, False)
    back_to_db1(sl)
    heartbeat_period(30)


def test_dead_primary_fails_over_without_waiting(sl):
    start = len(sl.log())
    t_kill = time.monotonic()
    st.sandbox_cmd("kill-server", 1)
    try:
        st.wait_until(lambda: promoted() is not None, MFT_S + 10,
                      interval=0.05, what="a replica promoted")
        after = time.monotonic() - t_kill
        new = promoted()
        print(f"kill -9: promoted db{new} {after:.2f}s after the kill")
        # The replicas' IO threads lost db1 with it: verified at once,
        # well before master_failure_timeout.
        assert after < MFT_S, after
        log = sl.log()[start:]
        assert f"failover: promoting 'db{new}'" in log
        assert ", no replica connected to it" in log
        assert "not failing over" not in log
    finally:
        st.sandbox_cmd("start-server", 1)
    back_to_db1(sl)
