# SPDX-License-Identifier: Apache-2.0
"""Disk space monitoring (issue 18), MaxScale 24.02 semantics, on the real
sandbox: `disk_space_threshold` (server and monitor), mariadbmon's
`disk_space_check_interval`, `maintenance_on_low_disk_space`,
`switchover_on_low_disk_space`, and the "Disk Space Exhausted" state.

mariadbmon reads information_schema.DISKS (the disks plugin; the sandbox
loads it and grants the monitor user FILE, and the module fixture installs
the plugin on an older sandbox, uninstalling it afterwards). Thresholds are
made to trip on purpose: `*:1` (any real disk is more than 1 % full; `*:0`
where db2's DISKS shows only near-empty file systems, and the tests that
need a trip skip, saying why, where it shows no used disk at all: a
chroot whose mount table lists only /proc, /sys and /dev) on one
server, through that server's own parameter, which overrides the
monitor's `*:100` (never trips). One Sluice per test (REST on ADMIN, a
readwritesplit service RWS), each started and stopped by the test.

- `*:100` on the monitor: no server Disk Space Exhausted, roles as before,
  reads on db2 and db3, a write on db1; then the monitor's threshold
  PATCHed live: `*:101` refused (400), `*:1` applied at once (db1 not
  Master, `master_conditions=disk_space_ok`; db2, db3 in maintenance).
- `*:1` on db3, `maintenance_on_low_disk_space=false`: exactly db3 is
  Disk Space Exhausted (REST `state`), it is not put in maintenance and
  stays Slave (MaxScale: the replica keeps its role); with
  `slave_conditions=disk_space_ok` it loses Slave and readwritesplit's
  reads (`@@server_id`) avoid it.
- `*:1` on the monitor, `*:100` on db1 and db2 (their own thresholds
  override the monitor's), the default `maintenance_on_low_disk_space=true`:
  only db3 is exhausted, it goes into Maintenance, the reads avoid it, the
  log says why.
- a threshold with `disk_space_check_interval=0s` (the default): nothing
  exhausted, and a start-up warning that nothing is checked (also for
  `switchover_on_low_disk_space=true`).
- `*:1` on db1 (the primary) with `switchover_on_low_disk_space=true`: the
  primary moves to db2 or db3 (a write through readwritesplit inserts
  `@@server_id` of the new primary), db1 is then a replica in maintenance;
  the topology is restored with a switchover back to db1 by a second
  Sluice without thresholds (test_mariadbmon's helpers).
- bad thresholds (no colon, percent 101, empty path, letters) refused by
  `--config-check` with FILE:LINE naming the parameter; so is
  `disk_space_threshold` on a basicmon monitor.
"""

import re
import subprocess
import time

import pymysql
import pytest

import sluicetest as st
from proxy import MonitoredSluice, admin_rest, global_section, \
    mariadbmon_section, run_sluice, rw_service, server_sections

pytestmark = pytest.mark.sluice_only

RWS = st.port(5750)
ADMIN = st.port(5751)
INTERVAL = "300ms"
MAXCTRL = st.BUILD_DIR / "bin" / "maxctrl"
EXHAUSTED = "Disk Space Exhausted"


def config(run_dir, monitor_params="", server_params=None, interval="1s"):
    """db1..db3 (server_params: {sid: "lines"}), mariadbmon with the
    monitor_params lines and disk_space_check_interval, readwritesplit
    RWS."""
    text = global_section(run_dir, ADMIN) + server_sections()
    for sid, lines in (server_params or {}).items():
        text = text.replace(f"[db{sid}]\ntype=server\n",
                            f"[db{sid}]\ntype=server\n{lines.strip()}\n", 1)
    text += mariadbmon_section("db1,db2,db3", INTERVAL, f"""
failcount=2
switchover_timeout=20s
disk_space_check_interval={interval}
{monitor_params}
""")
    text += rw_service("RWS", RWS)
    return text


def states():
    status, doc = admin_rest(ADMIN, "GET", "servers")
    assert status == 200, doc
    return {s["id"]: s["attributes"]["state"] for s in doc["data"]}


def maxctrl(*args):
    proc = subprocess.run([str(MAXCTRL), "-u", "admin", "-p", "mariadb",
                           "--hosts", f"{st.HOST}:{ADMIN}", *args],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def read_ids(n=30):
    """@@server_id of n reads through readwritesplit, a new session each
    time (each session picks its replica afresh)."""
    ids = set()
    for _ in range(n):
        with st.connect(RWS) as c:
            ids.add(st.scalar(c, "SELECT @@server_id"))
    return ids


def write_id():
    """@@server_id of the server that ran a write through readwritesplit."""
    with st.connect(RWS) as c:
        cur = c.cursor()
        cur.execute("INSERT INTO test.disk_space (sid) VALUES (@@server_id)")
        cur.execute("SELECT sid FROM test.disk_space WHERE id = "
                    "LAST_INSERT_ID()")
        return cur.fetchone()[0]


@pytest.fixture(scope="module", autouse=True)
def disks_plugin():
    """information_schema.DISKS on every server and FILE for the monitor
    user (what scripts/sandbox sets up; an older sandbox lacks it)."""
    installed = []
    for sid in (1, 2, 3):
        with st.root(sid) as c:
            n = st.scalar(c, "SELECT COUNT(*) FROM information_schema.PLUGINS"
                          " WHERE PLUGIN_NAME = 'DISKS' AND "
                          "PLUGIN_STATUS = 'ACTIVE'")
            if n == 0:
                c.cursor().execute("SET SESSION sql_log_bin = 0")
                c.cursor().execute("INSTALL SONAME 'disks'")
                installed.append(sid)
    with st.root(1) as c:
        for host in ("%", "localhost"):
            c.cursor().execute(f"GRANT FILE ON *.* TO "
                               f"'{st.SERVICE_USER}'@'{host}'")
        c.cursor().execute("CREATE TABLE IF NOT EXISTS test.disk_space "
                           "(id INT AUTO_INCREMENT PRIMARY KEY, sid INT)")
    st.wait_replicated()
    global TRIP_PCT, NO_TRIP_WHY
    try:
        # what the monitor sees: the monitor user on db2
        with st.connect(st.SERVERS[2], user=st.SERVICE_USER,
                        password=st.SERVICE_PASSWORD) as c:
            cur = c.cursor()
            cur.execute("SELECT Path, Total, Available FROM "
                        "information_schema.DISKS")
            disks = cur.fetchall()
        TRIP_PCT, NO_TRIP_WHY = trip_percent(disks)
    except pymysql.MySQLError as e:
        TRIP_PCT, NO_TRIP_WHY = None, \
            f"information_schema.DISKS fails on db2: {e}"
    yield
    for sid in installed:
        with st.root(sid) as c:
            c.cursor().execute("SET SESSION sql_log_bin = 0")
            c.cursor().execute("UNINSTALL SONAME 'disks'")


# The percent a threshold needs to trip on purpose (set by disks_plugin):
# 1 where some disk is more than 1 % used, as every machine's root file
# system is; 0 (any byte used) where the server sees only near-empty file
# systems; None, with the reason, where it sees no used disk at all (a
# chroot's mount table lists only /proc, /sys and /dev: nothing can trip).
TRIP_PCT = None
NO_TRIP_WHY = "not checked yet"


def trip_percent(disks):
    """(percent, None) for the largest of 1 and 0 that some disk of
    `disks` (Path, Total, Available rows) is fuller than, else (None,
    why)."""
    used = [(int(t) - int(a), int(t)) for _, t, a in disks
            if t and a is not None and 0 < int(a) < int(t)]
    if any(u * 100 > 1 * t for u, t in used):
        return 1, None
    if used:
        return 0, None
    return None, (f"information_schema.DISKS on db2 lists no disk with "
                  f"anything on it ({len(disks)} rows: "
                  f"{sorted(r[0] for r in disks)}): no threshold can trip "
                  "in this root (a chroot without its own file system in "
                  "the mount table)")


def trip():
    """A threshold every server trips (`*:TRIP_PCT`), or skip."""
    if TRIP_PCT is None:
        pytest.skip(NO_TRIP_WHY)
    return f"*:{TRIP_PCT}"


def start(tmp_path, text):
    return MonitoredSluice(tmp_path, text, [RWS, ADMIN], ADMIN)


def stop(sl):
    problems = sl.daemon.stop()
    assert not problems, "\n".join(problems)


def test_threshold_not_reached_changes_nothing(tmp_path):
    tripping = trip()   # the live PATCH below needs one
    sl = start(tmp_path, config(tmp_path, "disk_space_threshold=*:100"))
    try:
        st.wait_until(lambda: states() == {
            "db1": "Master, Running", "db2": "Slave, Running",
            "db3": "Slave, Running"}, 20, what="roles published")
        # more checks (1 s apart) change nothing
        time.sleep(2.5)
        assert all(EXHAUSTED not in s for s in states().values()), states()
        assert read_ids() == {2, 3}
        assert write_id() == 1
        assert "low on disk space" not in sl.log()
        assert "cannot check the disk space" not in sl.log()
        # the monitor's threshold PATCHed live: checked as at load (the
        # module's row, not the core's refusal for other monitors), then
        # applied at once
        status, doc = admin_rest(ADMIN, "PATCH", "monitors/Cluster-Monitor",
                                 {"data": {"attributes": {"parameters": {
                                     "disk_space_threshold": "*:101"}}}})
        assert status == 400, doc
        assert "percent 101 is outside 0-100" in str(doc), doc
        status, doc = admin_rest(ADMIN, "PATCH", "monitors/Cluster-Monitor",
                                 {"data": {"attributes": {"parameters": {
                                     "disk_space_threshold": tripping}}}})
        assert status in (200, 204), doc
        # every server exhausted: db1 loses Master (master_conditions'
        # default disk_space_ok), db2 and db3 go into maintenance
        st.wait_until(lambda: states() == {
            "db1": f"{EXHAUSTED}, Running",
            "db2": f"Maintenance, Slave, {EXHAUSTED}, Running",
            "db3": f"Maintenance, Slave, {EXHAUSTED}, Running"}, 20,
            what="every server Disk Space Exhausted")
        assert "primary candidate 'db1' is not published Master: it is " \
            "low on disk space (master_conditions=disk_space_ok)" in sl.log()
    finally:
        stop(sl)


def test_replica_exhausted_keeps_role_without_maintenance(tmp_path):
    text = config(tmp_path, "disk_space_threshold=*:100\n"
                  "maintenance_on_low_disk_space=false",
                  {3: f"disk_space_threshold={trip()}"})
    sl = start(tmp_path, text)
    try:
        st.wait_until(lambda: EXHAUSTED in states()["db3"], 20,
                      what="db3 Disk Space Exhausted")
        s = states()
        assert s == {"db1": "Master, Running", "db2": "Slave, Running",
                     "db3": f"Slave, {EXHAUSTED}, Running"}, s
        assert re.search(r"Server 'db3' is low on disk space: the disk at "
                         r"'[^']+' is \d+% used, its limit is "
                         rf"{TRIP_PCT}%", sl.log())
        assert "maintenance" not in sl.log()
        rows = [ln for ln in maxctrl("list", "servers").splitlines()
                if EXHAUSTED in ln]
        assert len(rows) == 1 and "db3" in rows[0], rows
        # PATCH: a bad list is refused, a good one kept for the next start
        status, doc = admin_rest(ADMIN, "PATCH", "servers/db2", {
            "data": {"attributes": {"parameters": {
                "disk_space_threshold": "*:101"}}}})
        assert status == 400, doc
        assert "percent 101 is outside 0-100" in str(doc), doc
        status, doc = admin_rest(ADMIN, "PATCH", "servers/db2", {
            "data": {"attributes": {"parameters": {
                "disk_space_threshold": "*:1"}}}})
        assert status == 200, doc
        assert doc["meta"]["restart_required"] == ["disk_space_threshold"]
        time.sleep(1.5)
        assert EXHAUSTED not in states()["db2"]
        # MaxScale: without slave_conditions=disk_space_ok it stays a
        # replica readwritesplit uses
        assert 3 in read_ids()
    finally:
        stop(sl)
    run = tmp_path / "second"   # without the first one's persisted PATCH
    text = config(run, "maintenance_on_low_disk_space=false\n"
                  "slave_conditions=disk_space_ok",
                  {3: f"disk_space_threshold={trip()}"})
    sl = start(run, text)
    try:
        st.wait_until(lambda: states()["db3"] == f"{EXHAUSTED}, Running",
                      20, what="db3 exhausted and not Slave")
        s = states()
        assert s["db1"] == "Master, Running" and s["db2"] == \
            "Slave, Running", s
        assert read_ids() == {2}
        assert write_id() == 1
    finally:
        stop(sl)


def test_replica_exhausted_goes_into_maintenance(tmp_path):
    # the servers' own thresholds override the monitor's both ways
    text = config(tmp_path, f"disk_space_threshold={trip()}",
                  {1: "disk_space_threshold=*:100",
                   2: "disk_space_threshold=/:100,*:100"})
    sl = start(tmp_path, text)
    try:
        st.wait_until(lambda: "Maintenance" in states()["db3"], 20,
                      what="db3 in maintenance")
        s = states()
        assert s["db1"] == "Master, Running", s
        assert s["db2"] == "Slave, Running", s
        assert EXHAUSTED in s["db3"] and "Maintenance" in s["db3"], s
        assert "setting server 'db3' to maintenance: it is low on disk " \
            "space" in sl.log()
        assert read_ids() == {2}
        assert write_id() == 1
    finally:
        stop(sl)


def test_switchover_on_low_disk_space(tmp_path):
    text = config(tmp_path, "switchover_on_low_disk_space=true",
                  {1: f"disk_space_threshold={trip()}"})
    sl = start(tmp_path, text)
    try:
        st.wait_until(lambda: states()["db2"].startswith("Master") or
                      states()["db3"].startswith("Master"), 60,
                      what="the primary moved off db1")
        new = 2 if states()["db2"].startswith("Master") else 3
        st.wait_until(lambda: "Maintenance" in states()["db1"], 20,
                      what="db1 (low on disk space) in maintenance")
        assert EXHAUSTED in states()["db1"]
        assert "primary 'db1' is low on disk space" in sl.log()
        assert f"switching over to 'db{new}' " \
            "(switchover_on_low_disk_space)" in sl.log()
        assert st.replicates_from(1, new)
        assert write_id() == new
        assert 1 not in read_ids()
    finally:
        stop(sl)
        restore_db1(tmp_path)


NOFILE_USER = "sluice_nofile"


def test_disks_unreadable_warns_and_trips_nothing(tmp_path):
    """A monitor user without FILE reads an empty DISKS (and a root whose
    mount table the server cannot read gets an error): each server is
    named once in a warning, none is Disk Space Exhausted even at `*:0`,
    and the roles and routing stay as they were. Runs everywhere."""
    privs = ("SHOW DATABASES, REPLICATION CLIENT, SLAVE MONITOR, "
             "REPLICATION SLAVE, REPLICATION SLAVE ADMIN, BINLOG ADMIN, "
             "READ_ONLY ADMIN, RELOAD, PROCESS, EVENT, SET USER, "
             "CONNECTION ADMIN")
    with st.root(1) as c:
        cur = c.cursor()
        for host in ("%", "localhost"):
            cur.execute(f"DROP USER IF EXISTS '{NOFILE_USER}'@'{host}'")
            cur.execute(f"CREATE USER '{NOFILE_USER}'@'{host}' "
                        f"IDENTIFIED BY '{st.SERVICE_PASSWORD}'")
            cur.execute(f"GRANT {privs} ON *.* TO '{NOFILE_USER}'@'{host}'")
            cur.execute(f"GRANT SELECT ON mysql.* TO "
                        f"'{NOFILE_USER}'@'{host}'")
    st.wait_replicated()
    text = config(tmp_path, "disk_space_threshold=*:0").replace(
        f"user={st.SERVICE_USER}\npassword={st.SERVICE_PASSWORD}\n"
        "monitor_interval",
        f"user={NOFILE_USER}\npassword={st.SERVICE_PASSWORD}\n"
        "monitor_interval", 1)
    assert f"user={NOFILE_USER}" in text
    sl = start(tmp_path, text)
    try:
        st.wait_until(lambda: all(
            f"cannot check the disk space of server 'db{i}'" in sl.log()
            for i in (1, 2, 3)), 20, what="a warning for each server")
        time.sleep(2.5)   # more checks: no second warning, no state
        log = sl.log()
        for i in (1, 2, 3):
            assert log.count(f"cannot check the disk space of server "
                             f"'db{i}'") == 1, log
        assert re.search(r"warning.*Monitor 'Cluster-Monitor': cannot check "
                         r"the disk space of server 'db1': ", log), log
        assert states() == {"db1": "Master, Running",
                            "db2": "Slave, Running",
                            "db3": "Slave, Running"}, states()
        assert read_ids() == {2, 3}
        assert write_id() == 1
    finally:
        stop(sl)
        with st.root(1) as c:
            for host in ("%", "localhost"):
                c.cursor().execute(f"DROP USER IF EXISTS "
                                   f"'{NOFILE_USER}'@'{host}'")


def test_no_check_interval_checks_nothing(tmp_path):
    """A threshold without disk_space_check_interval (MaxScale's default
    0) checks nothing, and says so at start-up."""
    text = config(tmp_path, "disk_space_threshold=*:1\n"
                  "switchover_on_low_disk_space=true", interval="0s")
    sl = start(tmp_path, text)
    try:
        st.wait_until(lambda: states() == {
            "db1": "Master, Running", "db2": "Slave, Running",
            "db3": "Slave, Running"}, 20, what="roles published")
        time.sleep(1.5)
        assert all(EXHAUSTED not in s for s in states().values()), states()
        log = sl.log()
        assert "disk_space_threshold applies to 3 server(s) but " \
            "disk_space_check_interval is 0" in log
        assert "switchover_on_low_disk_space=true has no effect" in log
        assert "is low on disk space" not in log
    finally:
        stop(sl)


def restore_db1(tmp_path):
    """A Sluice without thresholds switches db1 back to primary."""
    if st.healthy_topology(1):
        return
    run = tmp_path / "restore"
    sl = MonitoredSluice(run, config(run), [RWS, ADMIN], ADMIN)
    try:
        status, doc = sl.command("switchover", "Cluster-Monitor", "db1")
        assert status == 200, doc
        st.wait_until(lambda: st.healthy_topology(1), 30,
                      what="db1 primary again, db2 and db3 its replicas")
    finally:
        problems = sl.daemon.stop()
        if not st.healthy_topology(1):
            st.sandbox_cmd("stop")
            st.sandbox_cmd("start", "--fresh")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("value, why", [
    ("/data", "has no ':percent'"),
    ("*:101", "percent 101 is outside 0-100"),
    (":50", "has an empty path"),
    ("/:ten", "the percent must be a whole number from 0 to 100"),
    ("/:80,,*:90", "an empty entry"),
    ("/:80,/:70", "path '/' is given twice"),
])
def test_bad_threshold_refused(tmp_path, value, why):
    for where in ("server", "monitor"):
        if where == "server":
            text = config(tmp_path, "", {2: f"disk_space_threshold={value}"})
        else:
            text = config(tmp_path, f"disk_space_threshold={value}")
        cfg = tmp_path / f"{where}.cnf"
        cfg.write_text(text)
        line = text.splitlines().index(f"disk_space_threshold={value}") + 1
        status, out = run_sluice("check", cfg)
        assert status != 0, out
        assert f"{cfg}:{line}:" in out, out
        assert "'disk_space_threshold'" in out and why in out, out


def test_threshold_on_basicmon_refused(tmp_path):
    text = global_section(tmp_path, ADMIN) + server_sections() + f"""
[Basic]
type=monitor
module=basicmon
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
disk_space_threshold=*:80
"""
    cfg = tmp_path / "basic.cnf"
    cfg.write_text(text)
    line = text.splitlines().index("disk_space_threshold=*:80") + 1
    status, out = run_sluice("check", cfg)
    assert status != 0, out
    assert f"{cfg}:{line}:" in out and "only mariadbmon checks disk " \
        "space" in out, out
