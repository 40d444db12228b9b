# SPDX-License-Identifier: Apache-2.0
"""The server resource as MaxScale fills it when mariadbmon watches the
server: `node_id` (its @@server_id), `master_id` (its primary's), `uptime`
(the server's own Uptime), `gtid_binlog_pos` and `slave_connections`
(the replica's connection to its primary), checked against what each
sandbox server itself reports."""

import pymysql
import pytest

import sluicetest as st
from proxy import MonitoredSluice, admin_rest, global_section, \
    mariadbmon_section, readconnroute_services, server_sections

pytestmark = pytest.mark.sluice_only

PRIMARY_PORT = st.port(5660)
REPLICA_PORT = st.port(5661)
ADMIN_PORT = st.port(5662)


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
