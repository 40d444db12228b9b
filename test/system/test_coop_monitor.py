# SPDX-License-Identifier: Apache-2.0
"""Several Sluice instances on one cluster (issue 21, part 1).

passive=true: a lone instance with auto_failover does not fail over a
killed primary; `PATCH /v1/maxscale passive=false` (what `maxctrl alter
maxscale passive false` sends) lets it fail over at once.

cooperative_monitoring_locks=majority_of_running: three instances (own
ports, data directories, logs and REST ports) in front of the sandbox, all
with auto_failover=true and auto_rejoin=true:
  - exactly one reports itself primary monitor (monitor_diagnostics
    .primary, lock_overview), and a switchover asked of another is
    refused;
  - SIGKILL of that instance: another takes over within two monitor
    intervals (measured, printed);
  - kill -9 of the primary mariadbd under a write load through all three
    instances, ROUNDS times: exactly one promotion per round (the
    promotion and CHANGE MASTER lines of every instance's log, one
    writable server, the remaining replica replicating from it), no
    acknowledged write lost, writes resuming through all three; double
    promotions counted (0).
The module restores db1 as primary at the end (a switchover through the
primary monitor; a fresh sandbox if that fails).
"""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

import sluicetest as st
from proxy import Daemon, admin_rest, global_section, mariadbmon_section, \
    monitor_command, readconnroute_services, server_sections

pytestmark = pytest.mark.sluice_only

INTERVAL_MS = 500
OP_TIMEOUT_S = 10
# the wait_timeout mariadbmon sets on its connections with locks: the
# longest operation + two intervals, rounded up, + 5 s
IDLE_LIMIT_S = OP_TIMEOUT_S + 1 + 5
FAILCOUNT = 2
ROUNDS = int(os.environ.get("SLUICE_COOP_ROUNDS", "10"))
MONITOR = "Cluster-Monitor"
MAXCTRL = st.BUILD_DIR / "bin" / "maxctrl"


def config(run_dir, ports, coop="majority_of_running", passive=False,
           extra_global=""):
    primary_port, replica_port, admin_port = ports
    text = global_section(
        run_dir, admin_port,
        extra=f"passive={'true' if passive else 'false'}\n{extra_global}")
    text += server_sections()
    text += mariadbmon_section("db1,db2,db3", f"{INTERVAL_MS}ms", f"""
backend_connect_timeout=2s
backend_read_timeout=3s
auto_failover=true
auto_rejoin=true
failcount={FAILCOUNT}
enforce_read_only_slaves=true
switchover_timeout={OP_TIMEOUT_S}s
failover_timeout={OP_TIMEOUT_S}s
cooperative_monitoring_locks={coop}
""", name=MONITOR)
    text += readconnroute_services("db1,db2,db3", primary_port, replica_port)
    return text


class Instance:
    def __init__(self, name, run_dir, ports, **kw):
        self.name = name
        self.run_dir = Path(run_dir)
        self.ports = ports
        self.primary_port, self.replica_port, self.admin_port = ports
        for sub in ("log", "data", "persist"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        self.cfg = self.run_dir / "sluice.cnf"
        self.cfg.write_text(config(self.run_dir, ports, **kw))
        self.logs = []
        self.daemon = None
        self.start()

    def start(self):
        log = self.run_dir / f"proxy{len(self.logs)}.log"
        self.logs.append(log)
        self.daemon = Daemon(st.sluice_argv("start", self.cfg), log,
                             st.sluice_env())
        self.daemon.wait_ports(list(self.ports))

    def kill9(self):
        self.daemon.proc.send_signal(signal.SIGKILL)
        self.daemon.proc.wait(timeout=10)
        self.daemon.stop(check_exit=False)

    def log(self):
        return "".join(p.read_text(errors="replace") for p in self.logs)

    def rest(self, method, path, body=None, timeout=120):
        return admin_rest(self.admin_port, method, path, body, timeout)

    def command(self, cmd, *args):
        return monitor_command(self.admin_port, cmd, *args)

    def maxctrl(self, *args):
        proc = subprocess.run([str(MAXCTRL), "-u", "admin", "-p", "mariadb",
                               "--hosts", f"{st.HOST}:{self.admin_port}",
                               *args], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc.stdout

    def diag(self):
        status, doc = self.rest("GET", f"monitors/{MONITOR}", timeout=5)
        assert status == 200, (status, doc)
        return doc["data"]["attributes"]["monitor_diagnostics"]


def error_detail(doc):
    return doc["errors"][0]["detail"] if doc and doc.get("errors") else ""


def server_id_via(port):
    with st.connect(port, connect_timeout=3, read_timeout=5) as c:
        return st.server_id(c)


def restore_db1(instances):
    """db1 primary again: a switchover through whichever instance is the
    primary monitor; else a fresh sandbox."""
    if st.healthy_topology(1):
        return
    for sid in (1, 2, 3):
        try:
            with st.root(sid):
                pass
        except Exception:  # noqa: BLE001
            st.sandbox_cmd("start-server", sid)
    for inst in instances:
        if inst.daemon.alive():
            status, _ = inst.command("switchover", MONITOR, "db1")
            if status == 200:
                break
    try:
        st.wait_until(lambda: st.healthy_topology(1), 30, what="db1 primary")
    except AssertionError:
        for inst in instances:
            inst.daemon.stop(check_exit=False)
        st.sandbox_cmd("stop")
        st.sandbox_cmd("start", "--fresh")


@pytest.fixture(scope="module", autouse=True)
def table():
    if not st.healthy_topology(1):
        st.sandbox_cmd("stop")
        st.sandbox_cmd("start", "--fresh")
    with st.root(1) as c:
        c.cursor().execute("CREATE TABLE IF NOT EXISTS test.coop "
                           "(id INT PRIMARY KEY, tag VARCHAR(32))")
        c.cursor().execute("DELETE FROM test.coop")
    st.wait_replicated()
    yield
    if not st.healthy_topology(1):
        st.sandbox_cmd("stop")
        st.sandbox_cmd("start", "--fresh")


# ---- passive mode ----

def test_passive_instance_does_not_fail_over(tmp_path):
    inst = Instance("P", tmp_path / "passive",
                    (st.port(5129), st.port(5130), st.port(5131)),
                    coop="none", passive=True)
    try:
        st.wait_until(lambda: inst.diag().get("master") == "db1", 20,
                      what="db1 master")
        d = inst.diag()
        # MaxScale's shape: primary is null without cooperative locks,
        # and so is every server's lock_held
        assert d["primary"] is None and d["passive"] is True, d
        assert "lock_overview" not in d, d
        assert [s["lock_held"] for s in d["server_info"]] == [None] * 3, d
        status, doc = inst.rest("GET", "maxscale")
        assert doc["data"]["attributes"]["parameters"]["passive"] is True
        # a switchover is refused in passive mode, nothing moves
        status, doc = inst.command("switchover", MONITOR, "db2")
        assert status == 400 and "passive mode" in error_detail(doc), doc
        assert st.healthy_topology(1)

        st.sandbox_cmd("kill-server", 1)
        # failcount x interval is 1 s: wait 5 s, no server promoted
        time.sleep(FAILCOUNT * INTERVAL_MS / 1000 + 4)
        assert st.read_only(2) and st.read_only(3)
        assert st.replica_source(2)[0] == st.SERVERS[1]
        assert "failover: promoting" not in inst.log()

        inst.maxctrl("alter", "maxscale", "passive", "false")
        status, doc = inst.rest("GET", "maxscale")
        assert doc["data"]["attributes"]["parameters"]["passive"] is False
        st.wait_until(lambda: not st.read_only(2) or not st.read_only(3), 10,
                      interval=0.05, what="failover after passive=false")
        assert inst.log().count("failover: promoting") == 1
        status, doc = inst.rest("PATCH", "maxscale", {"data": {
            "attributes": {"parameters": {"passive": "maybe"}}}})
        assert status == 400 and "passive" in error_detail(doc), doc
        # a body refused for another parameter changes nothing
        status, doc = inst.rest("PATCH", "maxscale", {"data": {
            "attributes": {"parameters": {"passive": "true",
                                          "threads": "3"}}}})
        assert status == 400 and "threads" in error_detail(doc), doc
        status, doc = inst.rest("GET", "maxscale")
        assert doc["data"]["attributes"]["parameters"]["passive"] is False
    finally:
        st.sandbox_cmd("start-server", 1)
        if inst.daemon.alive():
            try:
                st.wait_until(lambda: inst.diag().get("master") in
                              ("db2", "db3"), 10, what="new master")
                st.wait_until(lambda: st.healthy_topology(
                    int(inst.diag()["master"][2:])), 30, what="rejoin")
            except AssertionError:
                pass
        restore_db1([inst])
        problems = inst.daemon.stop()
    assert not problems, "\n".join(problems)


# ---- cooperative monitoring: three instances ----

@pytest.fixture(scope="module")
def trio(tmp_path_factory, table):
    base = tmp_path_factory.mktemp("coop")
    insts = []
    try:
        for k, name in enumerate("ABC"):
            insts.append(Instance(name, base / name, tuple(
                st.port(5120 + 3 * k + j) for j in range(3))))
        yield insts
    finally:
        restore_db1(insts)
        problems = []
        for inst in insts:
            problems += inst.daemon.stop(check_exit=False)
    assert not problems, "\n".join(problems)


def primaries(insts):
    out = []
    for inst in insts:
        if inst.daemon.alive() and inst.diag().get("primary") is True:
            out.append(inst)
    return out


def one_primary(insts):
    p = primaries(insts)
    return p[0] if len(p) == 1 else None


def test_exactly_one_primary_monitor(trio):
    st.wait_until(lambda: one_primary(trio) is not None, 10,
                  what="one primary monitor")
    # and it stays one over several ticks
    for _ in range(6):
        p = primaries(trio)
        assert len(p) == 1, [i.name for i in p]
        time.sleep(INTERVAL_MS / 1000 / 2)
    p = p[0]
    d = p.diag()
    assert d["master"] == "db1", d
    assert d["cooperative_monitoring_locks"] == "majority_of_running"
    assert d["lock_overview"]["held_locks"] == 3, d
    assert d["lock_overview"]["servers"] == {
        "db1": "held", "db2": "held", "db3": "held"}, d
    info = {s["name"]: s for s in d["server_info"]}
    assert {k: s["lock_held"] for k, s in info.items()} == {
        "db1": True, "db2": True, "db3": True}, d
    assert info["db1"]["slave_connections"] == [], d
    sc = info["db2"]["slave_connections"]
    assert len(sc) == 1 and sc[0]["master_port"] == st.SERVERS[1] and \
        sc[0]["master_server_id"] == 1 and \
        sc[0]["slave_io_running"] == "Yes", d
    for other in trio:
        if other is p:
            continue
        od = other.diag()
        assert od["primary"] is False and od["master"] == "db1", od
        assert od["lock_overview"]["held_locks"] == 0, od
        assert set(od["lock_overview"]["servers"].values()) == {"taken"}
        assert [s["lock_held"] for s in od["server_info"]] == [False] * 3
        # a switchover asked of a secondary is refused, nothing moves
        status, doc = other.command("switchover", MONITOR, "db2")
        assert status == 400, (status, doc)
        assert "not the primary monitor" in error_detail(doc), doc
    assert st.healthy_topology(1)
    # the servers hold exactly one lock, on the primary monitor's
    # connection
    with st.root(2) as c:
        holder = st.scalar(c, "SELECT IS_USED_LOCK('maxscale_mariadbmon')")
        assert holder is not None


def test_release_locks_hands_over(trio):
    p = one_primary(trio)
    assert p is not None
    out = p.maxctrl("show", "monitor", MONITOR)
    assert re.search(r"monitor_diagnostics\.primary\s+│\s*true\s", out), out
    assert re.search(r"monitor_diagnostics\.master\s+│\s*db1\s", out), out
    assert re.search(r"monitor_diagnostics\.server_info\s+│.*\"lock_held\":"
                     r"true", out), out
    p.maxctrl("call", "command", "mariadbmon", "release-locks", MONITOR)
    st.wait_until(lambda: one_primary(trio) not in (None, p), 2 *
                  INTERVAL_MS / 1000 + 1, what="another primary monitor")
    d = p.diag()
    assert d["primary"] is False and d["lock_overview"]["released"], d


def test_takeover_after_sigkill(trio):
    p = one_primary(trio)
    assert p is not None
    others = [i for i in trio if i is not p]
    t0 = time.monotonic()
    p.kill9()
    st.wait_until(lambda: one_primary(others) is not None, 10,
                  interval=0.02, what="a new primary monitor")
    took = time.monotonic() - t0
    print(f"takeover after SIGKILL: {took:.3f} s "
          f"(monitor_interval {INTERVAL_MS} ms)")
    assert took <= 2 * INTERVAL_MS / 1000, took
    # the killed instance comes back as a secondary
    p.start()
    st.wait_until(lambda: p.diag().get("master") == "db1", 10,
                  what="restarted instance monitoring")
    time.sleep(2 * INTERVAL_MS / 1000)
    assert len(primaries(trio)) == 1
    assert p.diag()["primary"] is False


def test_frozen_primary_monitor_loses_locks(trio):
    """SIGSTOP (a hung instance, or one whose packets vanish): no TCP
    reset reaches the servers, so only the wait_timeout the monitor set on
    its connections frees its locks; then another instance takes over.
    On SIGCONT the old one finds its connections gone and stays
    secondary; the healthy primary is never failed over."""
    p = one_primary(trio)
    assert p is not None
    others = [i for i in trio if i is not p]
    prom0 = promotions(trio)
    t0 = time.monotonic()
    p.daemon.proc.send_signal(signal.SIGSTOP)
    try:
        st.wait_until(lambda: one_primary(others) is not None,
                      IDLE_LIMIT_S + 10, interval=0.1,
                      what="a new primary monitor")
        took = time.monotonic() - t0
        print(f"takeover from a frozen primary monitor: {took:.1f} s "
              f"(wait_timeout {IDLE_LIMIT_S} s)")
        assert IDLE_LIMIT_S - 1 <= took <= IDLE_LIMIT_S + 3, took
    finally:
        p.daemon.proc.send_signal(signal.SIGCONT)
    st.wait_until(lambda: p.diag()["lock_overview"]["held_locks"] == 0
                  and p.diag()["primary"] is False, 10,
                  what="the thawed instance secondary")
    time.sleep(2 * INTERVAL_MS / 1000)
    assert len(primaries(trio)) == 1
    assert promotions(trio) == prom0
    assert st.healthy_topology(1)


def promotions(insts):
    return sum(i.log().count("failover: promoting") for i in insts)


def redirects(insts):
    return sum(len(re.findall(r"' now replicates from '", i.log()))
               for i in insts)


def diverged_count(insts, sid):
    """How many times the instances refused to rejoin db{sid} so far."""
    return sum(i.log().count(f"not rejoining server 'db{sid}'")
               for i in insts)


@pytest.mark.slow
def test_failover_rounds_under_load(trio):
    doubles = 0
    repairs = 0
    rounds = []
    for rnd in range(ROUNDS):
        old = next(s for s in (1, 2, 3) if st.healthy_topology(s))
        writers = [st.Writer(i.primary_port, "test.coop",
                             f"r{rnd}{i.name}", rnd * 1000000 + k * 100000)
                   for k, i in enumerate(trio)]
        for w in writers:
            w.start()
        time.sleep(1.5)
        assert all(len(w.acked) > 5 for w in writers), \
            [len(w.acked) for w in writers]
        prom0, redir0 = promotions(trio), redirects(trio)
        div0 = diverged_count(trio, old)
        t0 = time.monotonic()
        st.sandbox_cmd("kill-server", old)
        try:
            rest = [s for s in (1, 2, 3) if s != old]
            st.wait_until(lambda: any(not st.read_only(s) for s in rest),
                          FAILCOUNT * INTERVAL_MS / 1000 + 10, interval=0.05,
                          what=f"round {rnd}: a replica of db{old} promoted")
            took = time.monotonic() - t0
            new = next(s for s in rest if not st.read_only(s))
            other = next(s for s in rest if s != new)
            st.wait_until(lambda: st.replicates_from(other, new), 10,
                          what=f"db{other} replicating from db{new}")
            for i in trio:
                st.wait_until(lambda i=i: server_id_via(i.primary_port)
                              == new, 10, what=f"{i.name} routes to db{new}")
            counts = [len(w.acked) for w in writers]
            st.wait_until(lambda: all(len(w.acked) > n + 10 for w, n in
                                      zip(writers, counts)), 15,
                          what="writes resuming through all three")
            time.sleep(2 * INTERVAL_MS / 1000)   # a late second promotion?
            n_prom = promotions(trio) - prom0
            n_redir = redirects(trio) - redir0
            writable = [s for s in rest if not st.read_only(s)]
            if n_prom != 1 or len(writable) != 1 or n_redir != 1:
                doubles += 1
            for w in writers:
                w.stop()
            lost = set()
            for w in writers:
                lost |= set(w.acked) - st.ids_on(new, "test.coop", w.tag)
            rounds.append((old, new, round(took, 2), n_prom, n_redir,
                           sum(len(w.acked) for w in writers), len(lost)))
            assert not lost, f"round {rnd}: acknowledged writes lost: " \
                f"{sorted(lost)[:10]}"
            assert n_prom == 1 and n_redir == 1, rounds[-1]
            assert writable == [new]
        finally:
            for w in writers:
                w.stop()
            st.sandbox_cmd("start-server", old)
        # auto_rejoin by the primary monitor; unless the killed primary
        # had binlogged a transaction no replica received (never
        # acknowledged: checked above), which the monitor must refuse.
        st.wait_until(lambda: (st.replicates_from(old, new)
                               and st.read_only(old))
                      or diverged_count(trio, old) > div0, 30,
                      what=f"db{old} rejoined to db{new} or refused")
        if not st.replicates_from(old, new):
            repairs += 1
            st.repair_diverged(old, new, ["test.coop"])
            st.wait_until(lambda: st.replicates_from(old, new) and
                          st.read_only(old), 30,
                          what=f"repaired db{old} rejoined to db{new}")
    for r in rounds:
        print("round old=db%d new=db%d promoted_after=%.2fs promotions=%d "
              "change_master=%d acked=%d lost=%d" % r)
    print(f"{len(rounds)} failover rounds, {doubles} double promotions, "
          f"{repairs} old primaries diverged (an unacknowledged "
          "transaction in their binlog) and repaired by the test")
    assert doubles == 0
    assert len(rounds) == ROUNDS
    # one history: the three servers hold the same rows (the primary is
    # the last round's new one, not necessarily db1)
    primary = rounds[-1][1]
    with st.root(primary) as c:
        target = st.scalar(c, "SELECT @@gtid_binlog_pos")
    for sid in (1, 2, 3):
        if sid != primary:
            with st.root(sid) as r:
                st.wait_until(lambda: st.scalar(
                    r, "SELECT MASTER_GTID_WAIT(%s, 1)", (target,)) == 0,
                    30, what=f"db{sid} to reach GTID {target}")
    sums = set()
    for sid in (1, 2, 3):
        with st.root(sid) as c, c.cursor() as cur:
            cur.execute("CHECKSUM TABLE test.coop")
            sums.add(cur.fetchone()[1])
    assert len(sums) == 1, sums
