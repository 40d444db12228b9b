# SPDX-License-Identifier: Apache-2.0
"""mariadbmon parameters a MaxScale user relies on (issue 18), on the real
sandbox cluster: monitor scripts (`script`, `events`, `script_timeout`)
run on server events with MaxScale's substitutions, and what is refused.

One Sluice for the module (ports st.port(5580..5582)); its monitor runs a
script that appends its argv, one line per run, to a file; the tests read
that file. A replica is stopped and started with scripts/sandbox
stop-server/start-server; db1 stays the primary throughout.
"""

import base64
import json
import os
import stat
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import proxy as px
import sluicetest as st
from proxy import MonitoredSluice, global_section, mariadbmon_section, \
    readconnroute_services, server_sections

pytestmark = pytest.mark.sluice_only

PRIMARY_PORT = st.port(5580)
REPLICA_PORT = st.port(5581)
ADMIN_PORT = st.port(5582)
# a second Sluice while the module's runs
T_PRIMARY_PORT = st.port(5583)
T_REPLICA_PORT = st.port(5584)
T_ADMIN_PORT = st.port(5585)
# the conditions' Sluice
C_PRIMARY_PORT = st.port(5586)
C_REPLICA_PORT = st.port(5587)
C_ADMIN_PORT = st.port(5588)


def ep(sid):
    """A server as MaxScale's script variables write it."""
    return f"[{st.HOST}]:{st.SERVERS[sid]}"


def write_script(path, out):
    """A script that appends its arguments (tab-separated) to `out` and
    prints a line the monitor must log at warning level."""
    path.write_text(f"""#!/bin/sh
printf '%s' "$#" >> '{out}'
for a in "$@"; do printf '\\t%s' "$a" >> '{out}'; done
printf '\\n' >> '{out}'
echo "warning: script saw $2"
exit 7
""")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def runs(out):
    """[(event, initiator, [args...]), ...] in the order they ran."""
    if not out.exists():
        return []
    rows = []
    for line in out.read_text().splitlines():
        fields = line.split("\t")
        args = fields[1:]
        assert int(fields[0]) == len(args), line
        rows.append(args)
    return rows


@pytest.fixture(scope="module")
def sl(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("mmonparams")
    script = run_dir / "event.sh"
    out = run_dir / "events.txt"
    write_script(script, out)
    servers = "db1,db2,db3"
    # Quoting as MaxScale splits it: 'a b' stays one argument, and no
    # shell sees the line (the ';' and the '$HOME' reach the script as
    # they are written).
    cmd = (f"{script} initiator=$INITIATOR $EVENT parent=$PARENT "
           "children=$CHILDREN nodes=$NODELIST all=$LIST "
           "masters=$MASTERLIST slaves=$SLAVELIST synced=$SYNCEDLIST "
           "creds=$CREDENTIALS 'two words' x;y $HOME")
    text = global_section(run_dir, ADMIN_PORT) + server_sections((1, 2, 3))
    text += mariadbmon_section(servers, "500ms", f"""
script={cmd}
events=slave_down,slave_up,master_up,server_up,lost_slave,new_slave
script_timeout=10s
""")
    text += readconnroute_services(servers, PRIMARY_PORT, REPLICA_PORT)
    s = MonitoredSluice(run_dir, text, [PRIMARY_PORT, REPLICA_PORT,
                                        ADMIN_PORT], ADMIN_PORT)
    s.out = out
    s.run_dir = run_dir
    try:
        yield s
    finally:
        problems = s.daemon.stop()
        if not st.healthy_topology(1):
            st.sandbox_cmd("start-server", 3)
    assert not problems, "\n".join(problems)


def by_event(rows, event, sid):
    return [r for r in rows if r[1] == event
            and r[0] == f"initiator={ep(sid)}"]


def test_script_on_startup_events(sl):
    """The first tick raises master_up for db1 and slave_up for the
    replicas (the servers were Down before), each run with the variables
    of that moment."""
    st.wait_until(lambda: len(runs(sl.out)) >= 3, 20,
                  what="three start-up script runs")
    rows = runs(sl.out)
    (m,) = by_event(rows, "master_up", 1)
    assert m[2] == "parent="
    # db2 and db3 replicate from db1: its children (order of servers=)
    assert m[3] == f"children={ep(2)},{ep(3)}"
    assert m[4] == f"nodes={ep(1)},{ep(2)},{ep(3)}"
    assert m[5] == f"all={ep(1)},{ep(2)},{ep(3)}"
    assert m[6] == f"masters={ep(1)}"
    assert m[7] == f"slaves={ep(2)},{ep(3)}"
    assert m[8] == "synced="
    assert m[9] == f"creds={st.SERVICE_USER}:{st.SERVICE_PASSWORD}"
    assert m[10:] == ["two words", "x;y", "$HOME"]
    (s2,) = by_event(rows, "slave_up", 2)
    assert s2[2] == f"parent={ep(1)}" and s2[3] == "children="
    assert len(by_event(rows, "slave_up", 3)) == 1
    log = sl.log()
    # output logged at the level it names, exit status logged, and the
    # monitor password never in the log (the command line is masked)
    assert "warning : [mariadbmon] Monitor 'Cluster-Monitor' script (master_up of " \
           "'db1'): script saw master_up" in log, log[-3000:]
    assert "exited with status 7" in log
    assert st.SERVICE_PASSWORD not in log


def test_script_slave_down_and_up(sl):
    st.wait_until(lambda: len(runs(sl.out)) >= 3, 20, what="start-up runs")
    before = len(runs(sl.out))
    st.sandbox_cmd("stop-server", 3)
    try:
        st.wait_until(lambda: by_event(runs(sl.out)[before:], "slave_down",
                                       3), 30, what="slave_down of db3")
        (down,) = by_event(runs(sl.out)[before:], "slave_down", 3)
        assert down[2] == f"parent={ep(1)}"   # its last known primary
        assert down[4] == f"nodes={ep(1)},{ep(2)}"
        assert down[7] == f"slaves={ep(2)}"
        # routing follows, whatever the script did
        with st.connect(REPLICA_PORT) as c:
            assert st.server_id(c) == 2
        mid = len(runs(sl.out))
    finally:
        st.sandbox_cmd("start-server", 3)
    # db3 answers either with its replication already running (slave_up)
    # or a moment before its slave threads start (server_up, then
    # new_slave: MaxScale raises the same pair in that case)
    st.wait_until(lambda: by_event(runs(sl.out)[mid:], "slave_up", 3) or
                  by_event(runs(sl.out)[mid:], "new_slave", 3), 30,
                  what="slave_up (or server_up + new_slave) of db3")
    after = [r[1] for r in runs(sl.out)[mid:] if r[0] ==
             f"initiator={ep(3)}"]
    assert after in (["slave_up"], ["server_up", "new_slave"]), after
    last = runs(sl.out)[-1]
    assert last[4] == f"nodes={ep(1)},{ep(2)},{ep(3)}"
    assert last[7] == f"slaves={ep(2)},{ep(3)}"
    # only db3 changed, and events= filtered nothing it raised
    assert {r[0] for r in runs(sl.out)[before:]} == {f"initiator={ep(3)}"}


def base(run_dir, params):
    text = global_section(run_dir, T_ADMIN_PORT) + server_sections((1, 2, 3))
    return text + mariadbmon_section("db1,db2,db3", "500ms", params)


@pytest.mark.parametrize("params,message", [
    ("script=/nonexistent/notify.sh $EVENT",
     "parameter 'script': '/nonexistent/notify.sh' is not an executable"),
    ("script=/bin/echo 'unclosed", "parameter 'script': unclosed ' quote"),
])
def test_bad_script_refused_at_startup(tmp_path, params, message):
    """The monitor is not created (MaxScale refuses it too): the daemon
    exits with the config status, naming the monitor's section line and
    the parameter."""
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir()
    text = base(tmp_path, params)
    cfg = tmp_path / "bad.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("start", cfg)
    out += (tmp_path / "log" / "sluice.log").read_text() \
        if (tmp_path / "log" / "sluice.log").exists() else ""
    line = text.splitlines().index("[Cluster-Monitor]") + 1
    assert status == px.CONFIG_REFUSED, out
    assert f"{cfg}:{line}: monitor module 'mariadbmon' refused to create " \
           "monitor 'Cluster-Monitor'" in out, out
    assert message in out, out


def test_bad_events_refused(tmp_path):
    text = base(tmp_path, "script=/bin/true\nevents=master_down,bogus")
    cfg = tmp_path / "ev.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("check", cfg)
    line = text.splitlines().index("events=master_down,bogus") + 1
    assert status == px.CONFIG_REFUSED, out
    assert f"{cfg}:{line}: invalid value 'master_down,bogus' for " \
        "parameter 'events'" in out, out


def test_script_refused_on_basicmon(tmp_path):
    """Only mariadbmon runs scripts: on another monitor module `script`
    is refused with FILE:LINE, never accepted and ignored."""
    text = base(tmp_path, "").replace("module=mariadbmon", "module=basicmon")
    text = text.replace("replication_user=", "#").replace(
        "replication_password=", "#") + "script=/bin/true\n"
    cfg = tmp_path / "basic.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("check", cfg)
    line = text.splitlines().index("script=/bin/true") + 1
    assert status == px.CONFIG_REFUSED, out
    assert f"{cfg}:{line}: parameter 'script' in " in out, out
    assert "only mariadbmon runs monitor scripts" in out, out


def test_script_timeout_bounds_the_tick(tmp_path):
    """A script that ignores SIGTERM gets SIGTERM at script_timeout and
    SIGKILL one second later; nothing of it is left running."""
    run_dir = tmp_path
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    hang = run_dir / "hang.sh"
    marker = run_dir / "started"
    hang.write_text(f"#!/bin/sh\ntrap '' TERM\ntouch {marker}\n"
                    "while :; do sleep 0.2; done\n")
    hang.chmod(0o755)
    text = base(run_dir, f"script={hang}\nevents=master_up\n"
                "script_timeout=1s")
    text += readconnroute_services("db1,db2,db3", T_PRIMARY_PORT,
                                   T_REPLICA_PORT)
    cfg = run_dir / "t.cnf"
    cfg.write_text(text)
    d = px.Daemon(st.sluice_argv("start", cfg), run_dir / "out.log",
                  st.sluice_env())
    try:
        d.wait_ports([T_PRIMARY_PORT, T_ADMIN_PORT])
        st.wait_until(marker.exists, 20, what="the script to start")
        t0 = time.monotonic()
        st.wait_until(lambda: "did not stop on SIGTERM: SIGKILL" in
                      (run_dir / "out.log").read_text(), 10,
                      what="SIGKILL of the script")
        killed_after = time.monotonic() - t0
        log = (run_dir / "out.log").read_text()
        assert "still running after script_timeout (1000 ms): SIGTERM" in log
        assert "was killed by signal 9" in log
        assert killed_after < 5, killed_after
        # no script process left behind
        time.sleep(0.5)
        left = [p for p in os.listdir("/proc") if p.isdigit() and
                str(hang) in _cmdline(p)]
        assert not left, left
    finally:
        problems = d.stop()
    assert not problems, problems


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# ---- master_conditions, slave_conditions ----

def state(admin_port, name):
    status, doc = px.admin_rest(admin_port, "GET", f"servers/{name}")
    assert status == 200, (status, doc)
    return set(doc["data"]["attributes"]["state"].split(", "))


def states(admin_port):
    return {n: state(admin_port, n) for n in ("db1", "db2", "db3")}


NORMAL = {"db1": {"Master", "Running"}, "db2": {"Slave", "Running"},
          "db3": {"Slave", "Running"}}


@pytest.fixture(scope="module")
def cond_sl(sl, tmp_path_factory):
    """A second Sluice: master_conditions=connecting_slave,running_slave
    (a running replica must be replicating from the primary) and
    slave_conditions=writable_master (no Slave without a Master). The
    module's first Sluice (`sl`, the defaults) is the control."""
    run_dir = tmp_path_factory.mktemp("mmonconds")
    text = global_section(run_dir, C_ADMIN_PORT) + server_sections((1, 2, 3))
    text += mariadbmon_section("db1,db2,db3", "500ms", """
master_conditions=connecting_slave,running_slave
slave_conditions=writable_master
""")
    text += readconnroute_services("db1,db2,db3", C_PRIMARY_PORT,
                                   C_REPLICA_PORT)
    s = MonitoredSluice(run_dir, text, [C_PRIMARY_PORT, C_REPLICA_PORT,
                                        C_ADMIN_PORT], C_ADMIN_PORT)
    try:
        st.wait_until(lambda: states(C_ADMIN_PORT) == NORMAL, 20,
                      what="db1 Master, db2 and db3 Slave")
        yield s
    finally:
        problems = s.daemon.stop()
    assert not problems, "\n".join(problems)


def sql_thread(sid, start):
    with st.root(sid) as c:
        c.cursor().execute(("START" if start else "STOP")
                           + " SLAVE SQL_THREAD")


def test_conditions_in_rest(cond_sl):
    status, doc = px.admin_rest(C_ADMIN_PORT, "GET",
                                "monitors/Cluster-Monitor")
    params = doc["data"]["attributes"]["parameters"]
    assert params["master_conditions"] == "connecting_slave,running_slave"
    assert params["slave_conditions"] == "writable_master"
    status, doc = px.admin_rest(ADMIN_PORT, "GET", "monitors/Cluster-Monitor")
    params = doc["data"]["attributes"]["parameters"]
    assert params["master_conditions"] == \
        "primary_monitor_master,disk_space_ok"
    assert params["slave_conditions"] == "none"


def test_master_needs_a_replicating_replica(cond_sl):
    sql_thread(3, False)
    try:
        # db2 still replicates: db1 stays Master
        st.wait_until(lambda: state(C_ADMIN_PORT, "db3") == {"Running"},
                      10, what="db3 no longer Slave")
        time.sleep(1.5)
        assert state(C_ADMIN_PORT, "db1") == {"Master", "Running"}
        sql_thread(2, False)
        st.wait_until(lambda: state(C_ADMIN_PORT, "db1") == {"Running"},
                      10, what="db1 losing Master")
        # the control, with the default conditions, keeps its Master
        assert state(ADMIN_PORT, "db1") == {"Master", "Running"}
        assert "primary candidate 'db1' is not published Master: no " \
               "replica is replicating and running" in cond_sl.log()
        # no Master: the master service reaches no server
        with pytest.raises(Exception):
            with st.connect(C_PRIMARY_PORT, connect_timeout=3) as c:
                st.server_id(c)
        with st.connect(PRIMARY_PORT) as c:
            assert st.server_id(c) == 1
    finally:
        sql_thread(2, True)
        sql_thread(3, True)
    st.wait_until(lambda: states(C_ADMIN_PORT) == NORMAL, 20,
                  what="db1 Master again")
    with st.connect(C_PRIMARY_PORT) as c:
        assert st.server_id(c) == 1


def test_slave_needs_writable_master(cond_sl, sl):
    with st.root(1) as c:
        c.cursor().execute("SET GLOBAL read_only=1")
    try:
        # no writable primary: no Master, and (writable_master) no Slave
        st.wait_until(lambda: states(C_ADMIN_PORT) == {
            "db1": {"Running"}, "db2": {"Running"}, "db3": {"Running"}},
            10, what="no Master and no Slave")
        # the control (slave_conditions=none) keeps its replicas
        st.wait_until(lambda: states(ADMIN_PORT) == {
            "db1": {"Running"}, "db2": {"Slave", "Running"},
            "db3": {"Slave", "Running"}}, 10, what="control replicas kept")
        with st.connect(REPLICA_PORT) as c:
            assert st.server_id(c) in (2, 3)
    finally:
        with st.root(1) as c:
            c.cursor().execute("SET GLOBAL read_only=0")
    st.wait_until(lambda: states(C_ADMIN_PORT) == NORMAL, 20,
                  what="roles back")
    with st.connect(C_REPLICA_PORT) as c:
        assert st.server_id(c) in (2, 3)
    # On the control, db1 lost and regained Master: the events were raised
    # but events= does not list them, so the script did not run.
    st.wait_until(lambda: "server 'db1' event new_master" in sl.log(), 10,
                  what="new_master of db1 on the control")
    assert "server 'db1' event lost_master" in sl.log()
    assert not [r for r in runs(sl.out) if r[1] in ("lost_master",
                                                    "new_master")]


def test_bad_conditions_refused(tmp_path):
    text = base(tmp_path, "master_conditions=connected_slave,bogus")
    cfg = tmp_path / "mc.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("check", cfg)
    assert status == px.CONFIG_REFUSED, out
    assert "invalid value 'connected_slave,bogus' for parameter " \
           "'master_conditions'" in out, out


# ---- async commands, fetch-cmd-result, cancel-cmd, reset-replication ----

MAXCTRL = st.BUILD_DIR / "bin" / "maxctrl"


def maxctrl(admin_port, *args, user="admin", password="mariadb"):
    return subprocess.run([str(MAXCTRL), "-u", user, "-p", password,
                           "--hosts", f"{st.HOST}:{admin_port}", *args],
                          capture_output=True, text=True, timeout=60)


def fetch(admin_port=ADMIN_PORT):
    return px.monitor_command(admin_port, "fetch-cmd-result",
                              "Cluster-Monitor")


def primary_id(port=PRIMARY_PORT):
    with st.connect(port, connect_timeout=3, read_timeout=5) as c:
        return st.server_id(c)


def wait_primary(sid, port=PRIMARY_PORT, timeout=30):
    others = [s for s in (1, 2, 3) if s != sid]
    st.wait_until(lambda: not st.read_only(sid) and all(
        st.replicates_from(s, sid) for s in others), timeout,
        what=f"db{sid} primary, the others replicating from it")
    st.wait_until(lambda: primary_id(port) == sid, timeout,
                  what=f"the master service to reach db{sid}")


def error_detail(doc):
    return doc["errors"][0]["detail"] if doc and doc.get("errors") else ""


def test_async_switchover(sl):
    status, doc = fetch()
    assert (status, doc) == (200, {"meta": "No manual command results "
                                           "are available."})
    t0 = time.monotonic()
    proc = maxctrl(ADMIN_PORT, "call", "command", "mariadbmon",
                   "async-switchover", "Cluster-Monitor", "db2", "db1")
    returned = time.monotonic() - t0
    try:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "OK"
        # a second command while the first is pending or running: refused
        status, doc = sl.command("switchover", "Cluster-Monitor", "db3")
        assert status == 400 and ("is pending" in error_detail(doc) or
                                  "is running" in error_detail(doc)), \
            (status, doc)
        first = fetch()
        assert first[0] == 200 and first[1]["meta"] in (
            "Command 'switchover' is pending.",
            "Command 'switchover' is still running.",
            "switchover completed successfully."), first
        st.wait_until(lambda: fetch()[1]["meta"] ==
                      "switchover completed successfully.", 60,
                      what="the switchover's result")
        wait_primary(2)
        print(f"async-switchover returned after {returned:.3f}s; first "
              f"fetch-cmd-result: {first[1]['meta']!r}")
        assert returned < 2, returned
        # a failing one: db2 is the primary now
        status, doc = sl.command("async-switchover", "Cluster-Monitor",
                                 "db2")
        assert status == 204, (status, doc)
        st.wait_until(lambda: fetch()[0] == 400, 30,
                      what="the failed switchover's result")
        assert "switchover failed: 'db2' cannot be promoted" in \
            error_detail(fetch()[1])
    finally:
        status, doc = sl.command("switchover", "Cluster-Monitor", "db1")
    assert status == 200, (status, doc)
    wait_primary(1)
    assert fetch()[1]["meta"] == "switchover completed successfully."


def test_commands_need_admin(sl):
    status, _ = px.admin_rest(ADMIN_PORT, "POST", "users/inet", {"data": {
        "id": "viewer", "attributes": {"password": "v-pw",
                                       "account": "basic"}}})
    assert status == 204
    try:
        for cmd in ("async-switchover", "async-failover", "async-rejoin",
                    "reset-replication", "cancel-cmd"):
            args = ["Cluster-Monitor"] + (["db3"] if cmd == "async-rejoin"
                                          else [])
            proc = maxctrl(ADMIN_PORT, "call", "command", "mariadbmon", cmd,
                           *args, user="viewer", password="v-pw")
            assert proc.returncode != 0, (cmd, proc.stdout)
            assert "read-only (basic) access" in proc.stderr, \
                (cmd, proc.stderr)
            # the REST API's answer itself: 403
            req = urllib.request.Request(
                f"http://{st.HOST}:{ADMIN_PORT}/v1/maxscale/modules/"
                f"mariadbmon/{cmd}?" + "&".join(args), data=b"",
                method="POST")
            req.add_header("Authorization", "Basic " + base64.b64encode(
                b"viewer:v-pw").decode())
            with pytest.raises(urllib.error.HTTPError) as exc:
                urllib.request.urlopen(req, timeout=10)
            assert exc.value.code == 403, cmd
        # fetch-cmd-result only reports: a read-only user may GET it
        url = (f"http://{st.HOST}:{ADMIN_PORT}/v1/maxscale/modules/"
               "mariadbmon/fetch-cmd-result?Cluster-Monitor")
        req = urllib.request.Request(url, method="GET")
        req.add_header("Authorization", "Basic " + base64.b64encode(
            b"viewer:v-pw").decode())
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
            assert "meta" in json.loads(resp.read())
        # nothing moved
        assert primary_id() == 1 and st.healthy_topology(1)
    finally:
        px.admin_rest(ADMIN_PORT, "DELETE", "users/inet/viewer")


def test_cancel_cmd(tmp_path):
    """A monitor ticking every 10 s leaves an async command pending for
    seconds: cancel-cmd drops it, and nothing changes."""
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir()
    text = base(tmp_path, "").replace("monitor_interval=500ms",
                                      "monitor_interval=10s")
    text += readconnroute_services("db1,db2,db3", T_PRIMARY_PORT,
                                   T_REPLICA_PORT)
    cfg = tmp_path / "c.cnf"
    cfg.write_text(text)
    d = px.Daemon(st.sluice_argv("start", cfg), tmp_path / "out.log",
                  st.sluice_env())
    try:
        d.wait_ports([T_PRIMARY_PORT, T_ADMIN_PORT])
        st.wait_until(lambda: primary_id(T_PRIMARY_PORT) == 1, 20,
                      what="the first tick")
        status, doc = px.monitor_command(T_ADMIN_PORT, "async-switchover",
                                         "Cluster-Monitor", "db2")
        assert status == 204, (status, doc)
        assert fetch(T_ADMIN_PORT)[1]["meta"] == \
            "Command 'switchover' is pending."
        status, doc = px.monitor_command(T_ADMIN_PORT, "cancel-cmd",
                                         "Cluster-Monitor")
        assert status == 204, (status, doc)
        status, doc = fetch(T_ADMIN_PORT)
        assert status == 400 and error_detail(doc) == \
            "switchover was cancelled before it started.", (status, doc)
        status, doc = px.monitor_command(T_ADMIN_PORT, "cancel-cmd",
                                         "Cluster-Monitor")
        assert status == 400 and "no command to cancel" in \
            error_detail(doc), (status, doc)
        time.sleep(11)   # past the next tick: the cancelled one never ran
        assert primary_id(T_PRIMARY_PORT) == 1 and st.healthy_topology(1)
        assert "running the scheduled switchover" not in \
            (tmp_path / "out.log").read_text()
    finally:
        problems = d.stop()
    assert not problems, problems


def binlogs(sid):
    with st.root(sid) as c, c.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        n = len(cur.fetchall())
        cur.execute("SELECT @@gtid_binlog_pos, @@gtid_slave_pos")
        return (n,) + cur.fetchone()


def test_reset_replication(sl):
    """Destructive, as in MaxScale: binary logs deleted and GTIDs reset on
    every server, replication restarted from the primary; data kept."""
    with st.root(1) as c:
        c.cursor().execute("FLUSH BINARY LOGS")
    before = {sid: binlogs(sid) for sid in (1, 2, 3)}
    assert before[1][0] >= 2, before
    status, doc = sl.command("reset-replication", "Cluster-Monitor", "db1")
    assert (status, doc) == (200, {"meta": {"primary": "db1"}}), (status,
                                                                   doc)
    wait_primary(1)
    after = {sid: binlogs(sid) for sid in (1, 2, 3)}
    for sid in (1, 2, 3):
        assert after[sid][0] == 1, after     # one fresh binary log
        assert after[sid][2] in ("0-1-0", ""), after
    # replication works from the new start: a write through Sluice
    token = int(time.time() * 1000) % 1000000000
    with st.connect(PRIMARY_PORT) as c, c.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS test.mmon_reset "
                    "(id INT PRIMARY KEY, sid INT)")
        cur.execute("DELETE FROM test.mmon_reset")
        cur.execute("INSERT INTO test.mmon_reset VALUES (%s, @@server_id)",
                    (token,))
        c.commit()

    def replicated(sid):
        with st.root(sid) as c:
            return st.scalar(c, "SELECT sid FROM test.mmon_reset "
                             "WHERE id=%s", (token,)) == 1

    for sid in (2, 3):
        st.wait_until(lambda sid=sid: replicated(sid), 10,
                      what=f"the write on db{sid}")
    assert binlogs(1)[1].startswith("0-1-"), binlogs(1)
    assert "reset-replication done: 'db1' is the primary" in sl.log()
    assert fetch()[1]["meta"] == "reset-replication completed successfully."


# ---- handle_events ----

def event_status(sid):
    with st.root(sid) as c:
        return st.scalar(c, "SELECT STATUS FROM information_schema.EVENTS "
                         "WHERE EVENT_SCHEMA='test' AND "
                         "EVENT_NAME='mmon_tick'")


def ticks_by(sid_on, writer):
    with st.root(sid_on) as c:
        return st.scalar(c, "SELECT COUNT(*) FROM test.mmon_ev WHERE sid=%s",
                         (writer,))


@pytest.fixture
def scheduled_event():
    """An event on db1 inserting @@server_id every second, the event
    scheduler on everywhere, and SET USER for the monitor account (what
    MaxScale documents for handle_events: the events' definer is root)."""
    saved = {}
    for sid in (1, 2, 3):
        with st.root(sid) as c:
            saved[sid] = st.scalar(c, "SELECT @@event_scheduler")
            c.cursor().execute("SET GLOBAL event_scheduler=ON")
    with st.root(1) as c, c.cursor() as cur:
        for host in ("%", "localhost"):
            cur.execute(f"GRANT SET USER ON *.* TO '{st.SERVICE_USER}'@"
                        f"'{host}'")
    # global privileges reach a connection at login: make the monitors
    # log in again (they reconnect within the tick)
    for sid in (1, 2, 3):
        with st.root(sid) as c, c.cursor() as cur:
            cur.execute("SELECT id FROM information_schema.PROCESSLIST "
                        "WHERE USER = %s", (st.SERVICE_USER,))
            for (cid,) in cur.fetchall():
                try:
                    cur.execute(f"KILL CONNECTION {cid}")
                except Exception:  # noqa: BLE001 - already gone
                    pass
    with st.root(1) as c, c.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS test.mmon_ev "
                    "(id INT AUTO_INCREMENT PRIMARY KEY, sid INT)")
        cur.execute("DELETE FROM test.mmon_ev")
        cur.execute("CREATE EVENT test.mmon_tick ON SCHEDULE EVERY 1 SECOND "
                    "DO INSERT INTO test.mmon_ev (sid) VALUES (@@server_id)")
    st.wait_replicated()
    try:
        yield
    finally:
        with st.root(1) as c:
            c.cursor().execute("DROP EVENT IF EXISTS test.mmon_tick")
        st.wait_replicated()
        for sid in (1, 2, 3):
            with st.root(sid) as c:
                c.cursor().execute("SET SESSION sql_log_bin=0")
                c.cursor().execute("DROP EVENT IF EXISTS test.mmon_tick")
                c.cursor().execute(f"SET GLOBAL event_scheduler="
                                   f"{saved[sid]}")


def test_handle_events_follow_the_primary(sl, scheduled_event):
    assert event_status(1) == "ENABLED"
    assert event_status(2) == event_status(3) == "SLAVESIDE_DISABLED"
    st.wait_until(lambda: ticks_by(1, 1) >= 2, 10, what="db1's event")
    time.sleep(1.2)   # a tick sees it enabled on the primary
    try:
        status, doc = sl.command("switchover", "Cluster-Monitor", "db2")
        assert (status, doc) == (200, {"meta": {"primary": "db2"}})
        wait_primary(2)
        # demoted: disabled on the replica side; promoted: enabled
        assert event_status(1) == "SLAVESIDE_DISABLED"
        assert event_status(2) == "ENABLED"
        assert event_status(3) == "SLAVESIDE_DISABLED"
        st.wait_until(lambda: ticks_by(2, 2) >= 2, 10,
                      what="the event running on db2")
        st.wait_until(lambda: ticks_by(1, 2) >= 2, 10,
                      what="db2's rows replicated to db1")
        frozen = ticks_by(2, 1)
        time.sleep(2)
        assert ticks_by(2, 1) == frozen, "db1's event still ran"
        assert "handle_events: 1 event(s) of 'db2' set to ENABLE" in \
            sl.log()
        time.sleep(1.2)
    finally:
        status, doc = sl.command("switchover", "Cluster-Monitor", "db1")
    assert status == 200, (status, doc)
    wait_primary(1)
    assert event_status(1) == "ENABLED"
    assert event_status(2) == "SLAVESIDE_DISABLED"
    before = ticks_by(1, 1)
    st.wait_until(lambda: ticks_by(1, 1) >= before + 2, 10,
                  what="the event running on db1 again")


def test_handle_events_false(scheduled_event, tmp_path):
    """The control: with handle_events=false a switchover leaves the
    events as they were (db2's stays SLAVESIDE_DISABLED)."""
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir()
    text = base(tmp_path, "handle_events=false\nswitchover_timeout=20s")
    text += readconnroute_services("db1,db2,db3", T_PRIMARY_PORT,
                                   T_REPLICA_PORT)
    cfg = tmp_path / "h.cnf"
    cfg.write_text(text)
    d = px.Daemon(st.sluice_argv("start", cfg), tmp_path / "out.log",
                  st.sluice_env())
    try:
        d.wait_ports([T_PRIMARY_PORT, T_ADMIN_PORT])
        st.wait_until(lambda: primary_id(T_PRIMARY_PORT) == 1, 20,
                      what="the first tick")
        time.sleep(1.2)
        try:
            status, doc = px.monitor_command(T_ADMIN_PORT, "switchover",
                                             "Cluster-Monitor", "db2")
            assert status == 200, (status, doc)
            wait_primary(2, T_PRIMARY_PORT)
            assert event_status(1) == "ENABLED"
            assert event_status(2) == "SLAVESIDE_DISABLED"
        finally:
            status, doc = px.monitor_command(T_ADMIN_PORT, "switchover",
                                             "Cluster-Monitor", "db1")
        assert status == 200, (status, doc)
        wait_primary(1, T_PRIMARY_PORT)
    finally:
        problems = d.stop()
    assert not problems, problems


# ---- enforce_simple_topology ----

def start_t(run_dir, params):
    """A Sluice on the T_ ports with a mariadbmon of `params`."""
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True)
    text = base(run_dir, params)
    text += readconnroute_services("db1,db2,db3", T_PRIMARY_PORT,
                                   T_REPLICA_PORT)
    cfg = run_dir / "t.cnf"
    cfg.write_text(text)
    d = px.Daemon(st.sluice_argv("start", cfg), run_dir / "out.log",
                  st.sluice_env())
    d.wait_ports([T_REPLICA_PORT, T_ADMIN_PORT])
    return d


def slave_connections(sid):
    with st.root(sid) as c, c.cursor() as cur:
        cur.execute("SHOW ALL SLAVES STATUS")
        return sorted(row[0] for row in cur.fetchall())


def test_enforce_simple_topology(tmp_path):
    """A primary down before Sluice started: without the parameter,
    auto_failover has no primary to replace; with it, the replicas'
    source is failed over, the old primary rejoins when it returns
    (auto_rejoin forced on), and an extra replication source is
    removed."""
    common = ("failcount=2\nfailover_timeout=20s\nswitchover_timeout=20s\n"
              "backend_connect_timeout=1s\n")
    st.sandbox_cmd("kill-server", 1)
    d = None
    try:
        d = start_t(tmp_path / "a", common + "auto_failover=true")
        time.sleep(3)   # six ticks, failcount 2
        assert st.read_only(2) and st.read_only(3)
        assert not (tmp_path / "a" / "out.log").read_text().count(
            "failover: promoting")
        problems = d.stop()
        d = None
        assert not problems, problems
        d = start_t(tmp_path / "b", common + "enforce_simple_topology=true")
        st.wait_until(lambda: not st.read_only(2), 20, what="db2 promoted")
        st.wait_until(lambda: st.replicates_from(3, 2), 20,
                      what="db3 replicating from db2")
        log = (tmp_path / "b" / "out.log").read_text()
        assert "'db1' is down and 2 replica(s) replicate from it: treating " \
               "it as the failed primary (enforce_simple_topology)" in log
        assert "failover: promoting 'db2'" in log
        st.wait_until(lambda: primary_id(T_PRIMARY_PORT) == 2, 10,
                      what="the master service on db2")
        st.sandbox_cmd("start-server", 1)
        st.wait_until(lambda: st.replicates_from(1, 2), 30,
                      what="db1 rejoined (auto_rejoin forced on)")
        # a second source on db3: removed
        with st.root(3) as c:
            c.cursor().execute(
                "CHANGE MASTER 'extra' TO MASTER_HOST='127.0.0.1', "
                f"MASTER_PORT={st.SERVERS[1]}, MASTER_USER='{st.REPL_USER}', "
                f"MASTER_PASSWORD='{st.REPL_PASSWORD}', "
                "MASTER_USE_GTID=slave_pos")
        assert slave_connections(3) == ["", "extra"]
        st.wait_until(lambda: slave_connections(3) == [""], 10,
                      what="the extra connection removed")
        assert st.replicates_from(3, 2)
        assert "removing replication connection 'extra' of 'db3'" in \
            (tmp_path / "b" / "out.log").read_text()
        status, doc = px.monitor_command(T_ADMIN_PORT, "switchover",
                                         "Cluster-Monitor", "db1")
        assert status == 200, (status, doc)
        wait_primary(1, T_PRIMARY_PORT)
    finally:
        problems = d.stop() if d else []
        try:
            with st.root(1):
                pass
        except Exception:  # noqa: BLE001 - still down
            st.sandbox_cmd("start-server", 1)
        if not st.healthy_topology(1):
            st.sandbox_cmd("stop")
            st.sandbox_cmd("start", "--fresh")
    assert not problems, problems
