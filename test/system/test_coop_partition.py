# SPDX-License-Identifier: Apache-2.0
"""Cooperative monitoring: one Sluice instance cut off from the servers
(issue 21, network partition).

Three instances with cooperative_monitoring_locks=majority_of_running,
auto_failover=true. Instance A binds its server connections to 127.0.0.2
(local_address) and is made the primary monitor (started first, alone).
Then an iptables rule drops every packet from 127.0.0.2 to the three
sandbox servers' ports: A's monitor connections stall, silently (no FIN,
no RST reaches the servers). A's queries time out (backend_read_timeout),
it sees no server and stops being primary monitor; the servers keep its
locks until they drop its idle connections at the wait_timeout the
monitor set (failover_timeout + 2 intervals + 5 s); within two monitor
intervals of that, another instance is primary monitor. The healthy
primary is never failed over (same @@server_id primary, no promotion and
no CHANGE MASTER in any instance's log). The rule is removed in a
`finally` (and is time-bounded by the test's own timeouts); A then
reconnects and stays a secondary.

Needs root and iptables (scripts/lib.sh TEST_PACKAGES installs it); fails
(does not skip) without them.
"""

import shutil
import subprocess
import time

import pytest

import sluicetest as st
from test_coop_monitor import IDLE_LIMIT_S, INTERVAL_MS, MONITOR, Instance, \
    error_detail, one_primary, primaries, promotions, redirects, \
    server_id_via

pytestmark = pytest.mark.sluice_only

CUT_ADDR = "127.0.0.2"
RULE_TAG = f"sluice-test-partition-{st.PORT_OFFSET}"


def rule(action):
    ports = ",".join(str(st.SERVERS[s]) for s in (1, 2, 3))
    return ["iptables", action, "OUTPUT", "-s", CUT_ADDR, "-d", st.HOST,
            "-p", "tcp", "-m", "multiport", "--dports", ports,
            "-m", "comment", "--comment", RULE_TAG, "-j", "DROP"]


def cut():
    subprocess.run(rule("-A"), check=True, capture_output=True, timeout=30)


def heal():
    """Remove every copy of this run's rule (idempotent)."""
    while subprocess.run(rule("-D"), capture_output=True,
                         timeout=30).returncode == 0:
        pass


def conns_from_cut_addr():
    """Connections the servers still have from 127.0.0.2."""
    n = 0
    for sid in (1, 2, 3):
        with st.root(sid) as c:
            n += st.scalar(c, "SELECT COUNT(*) FROM information_schema"
                           ".PROCESSLIST WHERE HOST LIKE %s",
                           (CUT_ADDR + ":%",))
    return n


@pytest.fixture(scope="module")
def trio(tmp_path_factory):
    assert shutil.which("iptables"), \
        "iptables is missing: scripts/lib.sh TEST_PACKAGES installs it"
    if not st.healthy_topology(1):
        st.sandbox_cmd("stop")
        st.sandbox_cmd("start", "--fresh")
    heal()
    base = tmp_path_factory.mktemp("partition")
    insts = []
    try:
        # A first and alone: it takes the locks and is primary monitor
        insts.append(Instance("A", base / "A", tuple(
            st.port(5500 + j) for j in range(3)),
            extra_global=f"local_address={CUT_ADDR}"))
        st.wait_until(lambda: insts[0].diag().get("primary") is True, 10,
                      what="A primary monitor")
        for k, name in ((1, "B"), (2, "C")):
            insts.append(Instance(name, base / name, tuple(
                st.port(5500 + 3 * k + j) for j in range(3))))
        yield insts
    finally:
        heal()
        problems = []
        for inst in insts:
            problems += inst.daemon.stop(check_exit=False)
    assert not problems, "\n".join(problems)


def test_local_address_is_used(trio):
    """A's monitor connections come from 127.0.0.2, B's do not."""
    a = trio[0]
    assert conns_from_cut_addr() >= 3
    # routing through A works (its backend connections bind too)
    assert server_id_via(a.primary_port) == 1
    with st.root(1) as c, c.cursor() as cur:
        cur.execute("SELECT HOST FROM information_schema.PROCESSLIST "
                    "WHERE USER = %s", (st.SERVICE_USER,))
        hosts = {r[0].rsplit(":", 1)[0] for r in cur.fetchall()}
    assert CUT_ADDR in hosts and st.HOST in hosts, hosts


def test_partitioned_primary_monitor_loses_locks(trio):
    a, b, c = trio
    st.wait_until(lambda: one_primary(trio) is a, 10,
                  what="A the only primary monitor")
    assert st.healthy_topology(1)
    prom0, redir0 = promotions(trio), redirects(trio)
    t0 = time.monotonic()
    cut()
    try:
        # A: its queries time out, it sees no server and stops acting;
        # the monitor probes the servers one after the other, each
        # failing after backend_read_timeout (3 s) then
        # backend_connect_timeout (2 s) for the reconnection
        st.wait_until(lambda: a.diag()["primary"] is False, 3 * 5 + 10,
                      interval=0.2, what="A no longer primary monitor")
        t_demoted = time.monotonic() - t0
        # the servers drop its idle connections at the wait_timeout
        st.wait_until(lambda: conns_from_cut_addr() == 0,
                      IDLE_LIMIT_S + 10, interval=0.1,
                      what="the servers dropping A's connections")
        t_gone = time.monotonic() - t0
        st.wait_until(lambda: one_primary([b, c]) is not None,
                      2 * INTERVAL_MS / 1000 + 5, interval=0.05,
                      what="another primary monitor")
        t_new = time.monotonic() - t0
        print(f"partition: A not primary after {t_demoted:.1f} s, its "
              f"connections dropped by the servers after {t_gone:.1f} s "
              f"(wait_timeout {IDLE_LIMIT_S} s), new primary monitor "
              f"after {t_new:.1f} s ({t_new - t_gone:.2f} s after the "
              f"drop; monitor_interval {INTERVAL_MS} ms)")
        assert t_new - t_gone <= 2 * INTERVAL_MS / 1000 + 0.2, \
            (t_gone, t_new)
        assert IDLE_LIMIT_S - 1 <= t_new <= IDLE_LIMIT_S + 4, t_new
        # A holds nothing it could act on; a switchover asked of it is
        # refused
        d = a.diag()
        assert d["primary"] is False and \
            not any(s["lock_held"] for s in d["server_info"]), d
        status, doc = a.command("switchover", MONITOR, "db2")
        assert status == 400 and "primary monitor" in error_detail(doc), doc
        # a few more ticks with A still cut off: nothing moves
        time.sleep(4 * INTERVAL_MS / 1000)
        assert len(primaries([b, c])) == 1
    finally:
        heal()
    t_healed = time.monotonic()
    # A reconnects and stays a secondary
    st.wait_until(lambda: a.diag()["master"] == "db1" and all(
        s["lock_held"] is False for s in a.diag()["server_info"]), 15,
        what="A monitoring again, as a secondary")
    print(f"A rejoined as a secondary {time.monotonic() - t_healed:.1f} s "
          "after the rule was removed")
    time.sleep(2 * INTERVAL_MS / 1000)
    assert len(primaries(trio)) == 1 and a.diag()["primary"] is False
    # the healthy primary was never failed over
    assert st.healthy_topology(1)
    for inst in trio:
        assert server_id_via(inst.primary_port) == 1
    # no promotion, no CHANGE MASTER (logged as "... now replicates
    # from ...") by any instance
    assert promotions(trio) == prom0 and redirects(trio) == redir0
