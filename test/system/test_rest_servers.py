# SPDX-License-Identifier: Apache-2.0
"""The server resource as MaxScale fills it when mariadbmon watches the
server: `node_id` (its @@server_id), `master_id` (its primary's), `uptime`
(the server's own Uptime), `gtid_binlog_pos` and `slave_connections`
(the replica's connection to its primary), checked against what each
sandbox server itself reports. And a server's own monitor credentials
(`monitoruser`/`monitorpw`), proven by the user of the monitor's
connection in the server's PROCESSLIST."""

import email.utils
import time

import pymysql
import pytest

import sluicetest as st
from proxy import CONFIG_REFUSED, MonitoredSluice, admin_rest, \
    global_section, mariadbmon_section, readconnroute_services, run_sluice, \
    server_sections

pytestmark = pytest.mark.sluice_only

PRIMARY_PORT = st.port(5660)
REPLICA_PORT = st.port(5661)
ADMIN_PORT = st.port(5662)
CRED_PRIMARY = st.port(5666)
CRED_REPLICA = st.port(5667)
CRED_ADMIN = st.port(5668)
OPT_PRIMARY = st.port(5669)
OPT_REPLICA = st.port(5670)
OPT_ADMIN = st.port(5671)
MON_USER = "sl_mon_db2"
MON_PW = "mon-db2-pw"


@pytest.fixture(scope="module")
def sl(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("rest_servers")
    servers = "db1,db2,db3"
    text = global_section(run_dir, ADMIN_PORT) + server_sections((1, 2, 3))
    text += mariadbmon_section(servers, "200ms", "")
    text += readconnroute_services(servers, PRIMARY_PORT, REPLICA_PORT)
    s = MonitoredSluice(run_dir, text, [PRIMARY_PORT, REPLICA_PORT,
                                        ADMIN_PORT], ADMIN_PORT)
    try:
        yield s
    finally:
        problems = s.daemon.stop()
    assert not problems, "\n".join(problems)


def attrs(name):
    status, doc = admin_rest(ADMIN_PORT, "GET", f"servers/{name}")
    assert status == 200, doc
    return doc["data"]["attributes"]


def server_says(sid, sql):
    with st.root(sid) as c, c.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(sql)
        return cur.fetchone()


def test_server_facts_from_the_monitor(sl):
    st.wait_until(lambda: all(attrs(f"db{sid}").get("node_id") == sid
                              for sid in st.SERVERS), 10,
                  what="the monitor to report every server")
    primary = attrs("db1")
    assert primary["master_id"] == -1 and primary["slave_connections"] == []
    uptime = int(server_says(1, "SHOW GLOBAL STATUS LIKE 'Uptime'")["Value"])
    assert abs(primary["uptime"] - uptime) <= 3, (primary["uptime"], uptime)
    binlog = server_says(1, "SELECT @@gtid_binlog_pos AS p")["p"]
    st.wait_until(lambda: attrs("db1")["gtid_binlog_pos"] == binlog, 5,
                  what="db1's gtid_binlog_pos in the REST API")
    for sid in sorted(st.REPLICA_IDS):
        a = attrs(f"db{sid}")
        assert a["node_id"] == sid == a["server_id"]
        assert a["master_id"] == st.PRIMARY_ID
        [conn] = a["slave_connections"]
        status = server_says(sid, "SHOW SLAVE STATUS")
        assert conn["master_port"] == status["Master_Port"]
        assert conn["master_host"] == status["Master_Host"]
        assert conn["master_server_id"] == status["Master_Server_Id"] == 1
        assert conn["slave_io_running"] == status["Slave_IO_Running"] == \
            "Yes"
        assert conn["slave_sql_running"] == "Yes"
        assert conn["seconds_behind_master"] == 0


def test_last_event_and_triggered_at(sl):
    """last_event: the server's latest state-change event as the monitor's
    script events name it; triggered_at: when, an HTTP date (MaxScale's
    shape). Each server's first is its *_up; a replica whose replication
    stops loses its role (lost_slave), and gets it back (new_slave)."""
    def event(name):
        a = attrs(name)
        return a["last_event"], a["triggered_at"]

    st.wait_until(lambda: event("db3")[0] is not None, 10,
                  what="db3's first event")
    assert event("db1")[0] == "master_up"
    assert event("db2")[0] == "slave_up"
    first, when = event("db3")
    assert first == "slave_up"
    at = email.utils.parsedate_to_datetime(when)
    assert when.endswith(" GMT") and at.tzinfo is not None, when
    age = time.time() - at.timestamp()
    assert -2 <= age <= 300, (when, age)
    try:
        with st.root(3) as c, c.cursor() as cur:
            cur.execute("STOP SLAVE")
        st.wait_until(lambda: event("db3")[0] == "lost_slave", 10,
                      what="db3's lost_slave event")
        lost_at = email.utils.parsedate_to_datetime(event("db3")[1])
        assert lost_at >= at
        with st.root(3) as c, c.cursor() as cur:
            cur.execute("START SLAVE")
        st.wait_until(lambda: event("db3")[0] == "new_slave", 10,
                      what="db3's new_slave event")
    finally:
        repair_db3()
    assert event("db2")[0] == "slave_up"   # the others saw no event


def monitor_users(sid):
    """The users of the connections on server sid that run no statement of
    ours (the monitors' and the replication threads')."""
    with st.root(sid) as c, c.cursor() as cur:
        cur.execute("SELECT DISTINCT USER FROM information_schema.PROCESSLIST"
                    " WHERE ID <> CONNECTION_ID()")
        return {r[0] for r in cur.fetchall()}


def test_per_server_monitor_credentials(tmp_path):
    """db2 is monitored as its own monitoruser, db3 with a wrong monitorpw
    (Auth Error), db1 with the monitor's account; monitoruser without
    monitorpw is refused with its line."""
    with st.root(1) as c, c.cursor() as cur:
        cur.execute(f"CREATE OR REPLACE USER '{MON_USER}'@'%' IDENTIFIED BY "
                    f"'{MON_PW}'")
        cur.execute(f"GRANT ALL ON *.* TO '{MON_USER}'@'%'")
    st.wait_replicated()
    servers = server_sections((1, 2, 3))
    servers = servers.replace(
        f"port={st.SERVERS[2]}\n",
        f"port={st.SERVERS[2]}\nmonitoruser={MON_USER}\n"
        f"monitorpw={MON_PW}\n").replace(
        f"port={st.SERVERS[3]}\n",
        f"port={st.SERVERS[3]}\nmonitoruser={MON_USER}\n"
        "monitorpw=wrong\n")
    run_dir = tmp_path / "creds"
    text = global_section(run_dir, CRED_ADMIN) + servers
    text += mariadbmon_section("db1,db2,db3", "200ms", "")
    text += readconnroute_services("db1,db2,db3", CRED_PRIMARY,
                                   CRED_REPLICA)
    s = MonitoredSluice(run_dir, text, [CRED_PRIMARY, CRED_REPLICA,
                                        CRED_ADMIN], CRED_ADMIN)
    try:
        def state(name):
            status, doc = admin_rest(CRED_ADMIN, "GET", f"servers/{name}")
            assert status == 200, doc
            return doc["data"]["attributes"]["state"]
        st.wait_until(lambda: "Slave" in state("db2") and
                      "Master" in state("db1") and
                      "Auth Error" in state("db3"), 10,
                      what="db2 monitored as its own user, db3 refused")
        assert MON_USER in monitor_users(2)
        assert MON_USER not in monitor_users(1)
        status, doc = admin_rest(CRED_ADMIN, "GET", "servers/db2")
        assert doc["data"]["attributes"]["parameters"]["monitorpw"] == \
            "*****"
    finally:
        problems = s.daemon.stop()
        with st.root(1) as c, c.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{MON_USER}'@'%'")
    assert not problems, "\n".join(problems)
    bad = run_dir / "bad.cnf"
    bad.write_text(text.replace("monitorpw=wrong\n", ""))
    status, out = run_sluice("check", bad)
    assert status == CONFIG_REFUSED, out
    assert "parameter 'monitoruser' in server 'db3' needs 'monitorpw'" \
        in out, out


def slave_status(sid):
    return server_says(sid, "SHOW SLAVE STATUS")


def repair_db3():
    with st.root(3) as c, c.cursor() as cur:
        cur.execute("STOP SLAVE")
        cur.execute(f"CHANGE MASTER TO MASTER_HOST='{st.HOST}', "
                    f"MASTER_PORT={st.SERVERS[1]}, MASTER_USER="
                    f"'{st.REPL_USER}', MASTER_PASSWORD='{st.REPL_PASSWORD}',"
                    " MASTER_USE_GTID=slave_pos, MASTER_DELAY=0")
        cur.execute("START SLAVE")
    st.wait_until(lambda: st.replicates_from(3, 1), 30,
                  what="db3 replicating from db1 again")


def test_private_address_and_custom_options(tmp_path):
    """A rejoin points db3 at db1's private_address with db3's
    replication_custom_options (MASTER_DELAY=3): both are in
    db3's SHOW SLAVE STATUS. The private address is one nobody listens on,
    so db3's IO thread cannot connect (which proves it is the one used);
    the test then repairs db3. Options that could end the statement are
    refused with their line."""
    servers = server_sections((1, 2, 3))
    servers = servers.replace(
        f"port={st.SERVERS[1]}\n",
        f"port={st.SERVERS[1]}\nprivate_address=127.0.0.3\n").replace(
        f"port={st.SERVERS[3]}\n",
        f"port={st.SERVERS[3]}\n"
        "replication_custom_options=MASTER_DELAY = 3\n")
    run_dir = tmp_path / "opts"
    text = global_section(run_dir, OPT_ADMIN) + servers
    text += mariadbmon_section("db1,db2,db3", "200ms", "")
    text += readconnroute_services("db1,db2,db3", OPT_PRIMARY, OPT_REPLICA)
    with st.root(3) as c, c.cursor() as cur:
        cur.execute("STOP SLAVE")
        cur.execute("RESET SLAVE ALL")
    s = MonitoredSluice(run_dir, text, [OPT_PRIMARY, OPT_REPLICA, OPT_ADMIN],
                        OPT_ADMIN)
    try:
        st.wait_until(lambda: admin_rest(OPT_ADMIN, "GET", "servers/db3")[1]
                      ["data"]["attributes"].get("node_id") == 3, 10,
                      what="the monitor to see db3")
        status, doc = s.command("rejoin", "Cluster-Monitor", "db3")
        assert status in (200, 204), doc
        got = slave_status(3)
        assert got["Master_Host"] == "127.0.0.3", got
        assert got["Master_Port"] == st.SERVERS[1]
        assert int(got["SQL_Delay"]) == 3, got
        # db2 still replicates from db1's address and is seen as its replica
        assert st.replicates_from(2, 1)
        assert admin_rest(OPT_ADMIN, "GET", "servers/db2")[1]["data"][
            "attributes"]["master_id"] == 1
    finally:
        problems = s.daemon.stop()
        repair_db3()
    assert not problems, "\n".join(problems)
    for bad, why in (("MASTER_HEARTBEAT_PERIOD=1; DROP TABLE t",
                      "options are separated by commas"),
                     ("MASTER_HOST='x'", "are set by the monitor"),
                     ("MASTER_SSL_CA='/a\\'b'", "no backslash")):
        cfg = run_dir / "bad.cnf"
        cfg.write_text(text.replace(
            "replication_custom_options=MASTER_DELAY = 3",
            f"replication_custom_options={bad}"))
        status, out = run_sluice("check", cfg)
        assert status == CONFIG_REFUSED, out
        assert "parameter 'replication_custom_options' in server 'db3'" in \
            out and why in out, (bad, out)
