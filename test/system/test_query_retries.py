# SPDX-License-Identifier: Apache-2.0
"""Global query_retries / query_retry_timeout on the real sandbox.

A Sluice per case (one after the other), each with a mariadbmon over
db1..db3 (500 ms interval): query_retries=0; the defaults (1 retry, 5 s);
query_retries=3 with query_retry_timeout=0s. The monitor's kept
connection to db2 is killed from root (KILL CONNECTION of every
connection of the service account on db2, found in PROCESSLIST) three
times, each between two ticks: the next probe on it fails with a network
error (2006/2013). Without a retry (query_retries=0, or no time left) the
server is marked Down for that tick (the state change and "after 0
retries" logged, then it comes back); with the defaults the probe is
retried on a new connection and db2 never leaves Slave, Running (the log
names each retry).
"""

import time

import pytest

import sluicetest as st
from proxy import MonitoredSluice, global_section, mariadbmon_section, \
    readconnroute_services, server_sections

pytestmark = pytest.mark.sluice_only

KILLS = 3


def config(run_dir, admin_port, base, retries, timeout):
    extra = "" if retries is None else f"query_retries={retries}\n"
    extra += "" if timeout is None else f"query_retry_timeout={timeout}\n"
    text = global_section(run_dir, admin_port, extra=extra)
    text += server_sections((1, 2, 3))
    text += mariadbmon_section("db1,db2,db3", "500ms",
                               "backend_read_timeout=3s")
    text += readconnroute_services("db1,db2,db3", base, base + 1)
    return text


def kill_monitor_connections(sid):
    """KILL every connection of the service account on db{sid}; their
    count (the monitors' kept connections, maybe an account load)."""
    n = 0
    with st.root(sid) as c, c.cursor() as cur:
        cur.execute("SELECT id FROM information_schema.PROCESSLIST "
                    "WHERE USER = %s", (st.SERVICE_USER,))
        for (cid,) in cur.fetchall():
            try:
                cur.execute(f"KILL CONNECTION {cid}")
                n += 1
            except Exception:  # noqa: BLE001 - already gone
                pass
    return n


# (query_retries, query_retry_timeout, retried?, first port): the
# default retries once; 0 retries never; 3 retries with a 0 s timeout
# never either (no time left to start one).
CASES = [(0, None, False, 5803), (None, None, True, 5806),
         (3, "0s", False, 5803)]


@pytest.mark.parametrize("retries,timeout,retried_expected,port0", CASES,
                         ids=["retries0", "default1", "retries3_timeout0"])
def test_killed_monitor_connection(tmp_path, retries, timeout,
                                   retried_expected, port0):
    assert st.healthy_topology(1)
    base = st.port(port0)
    admin = base + 2
    s = MonitoredSluice(tmp_path,
                        config(tmp_path, admin, base, retries, timeout),
                        [base, base + 1, admin], admin)
    try:
        down_line = "Server 'db2' changed state: Slave, Running -> Down"
        st.wait_until(lambda: "Server 'db2' changed state: Down -> Slave, "
                      "Running" in s.log(), 10, what="db2 seen as Slave")
        time.sleep(1)
        start = len(s.log())
        for _ in range(KILLS):
            assert kill_monitor_connections(2) >= 1
            time.sleep(1.5)     # three ticks: probe, retry or Down, back
        log = s.log()[start:]
        downs = log.count(down_line)
        retried = log.count("Monitor 'Cluster-Monitor': probe of 'db2' "
                            "failed (")
        print(f"query_retries={retries}: {downs} Down, {retried} retries "
              f"for {KILLS} kills")
        if not retried_expected:
            assert downs == KILLS, log
            assert retried == 0
            assert f"(after 0 retries; query_retries={retries})" in log
            st.wait_until(lambda: s.log().count(
                "Server 'db2' changed state: Down -> Slave, Running") >=
                KILLS + 1, 5, what="db2 back to Slave after each kill")
        else:
            assert downs == 0, log
            assert retried == KILLS, log
            assert "retry 1 of query_retries" in log
        # Either way the replica service works afterwards.
        with st.connect(base + 1) as c:
            assert st.server_id(c) in (2, 3)
    finally:
        problems = s.daemon.stop()
    assert not problems, "\n".join(problems)
