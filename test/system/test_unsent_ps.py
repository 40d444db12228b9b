# SPDX-License-Identifier: Apache-2.0
"""A binary-protocol command that never reached a dead primary is held
and sent to the primary once it is back (issue 19), as a text statement
is: the client (libmariadb, server-side prepared statements) sees no
error and the rows are written once.

The session is idle when db1's mariadbd is killed (SIGKILL); its next
command is a COM_STMT_EXECUTE (or a COM_STMT_PREPARE) of an autocommit
INSERT. The monitor (monitor_interval 3 s, no failover) still says db1 is
the primary, so the router connects to it, the connection is refused,
and nothing was sent: the outcome is known. db1 is started again, the
monitor sees it primary, and the held command goes there with the
session's prepared statements prepared again. Before this the client
got ERROR 2013 (the write treated as lost in flight).

One Sluice for the module: mariadbmon (no auto_failover) and one
readwritesplit service with delayed_retry and fail_on_write.
"""

import subprocess
import time

import pytest

import sluicetest as st
from proxy import MonitoredSluice, global_section, mariadbmon_section, \
    rw_service, server_sections

pytestmark = [pytest.mark.slow, pytest.mark.sluice_only]

RW_PORT = st.port(5460)
ADMIN_PORT = st.port(5461)
TABLE = "unsent_ps"


def config(run_dir):
    servers = "db1,db2,db3"
    text = global_section(run_dir, ADMIN_PORT, extra="log_info=true") + \
        server_sections()
    text += mariadbmon_section(servers, "3000ms", """
backend_connect_timeout=2s
auto_failover=false
auto_rejoin=false
""")
    text += rw_service("RW-Service", RW_PORT, """
delayed_retry=true
delayed_retry_timeout=60s
master_failure_mode=fail_on_write
""", servers)
    return text


@pytest.fixture(scope="module")
def sl(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("unsent_ps")
    s = MonitoredSluice(run_dir, config(run_dir), [RW_PORT, ADMIN_PORT],
                        ADMIN_PORT)
    try:
        st.wait_until(lambda: "primary is now 'db1'" in s.log(), 30,
                      what="the monitor to see db1 primary")
        yield s
    finally:
        try:
            with st.root(1):
                pass
        except Exception:  # noqa: BLE001 - a test left db1 down
            st.sandbox_cmd("start-server", 1)
        problems = s.daemon.stop()
        if not st.healthy_topology(1):
            st.sandbox_cmd("stop")
            st.sandbox_cmd("start", "--fresh")
    assert not problems, "\n".join(problems)


def rows_on_db1():
    with st.root(1) as c, c.cursor() as cur:
        cur.execute(f"SELECT id, sid FROM test.{TABLE} ORDER BY id")
        return cur.fetchall()


@pytest.mark.parametrize("first", ["exec", "prepare"])
def test_unsent_binary_command_is_held(sl, first):
    with st.root(1) as c, c.cursor() as cur:
        cur.execute(f"CREATE OR REPLACE TABLE test.{TABLE} "
                    f"(id INT PRIMARY KEY, sid INT)")
    st.wait_replicated()
    seen = sl.log().count("before the statement was sent")
    client = subprocess.Popen(
        [str(st.C_CLIENT), st.HOST, str(RW_PORT), st.APP_USER,
         st.APP_PASSWORD, "ps_pause", TABLE, first],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert client.stdout.readline().strip() == "ready", \
            client.stderr.read()
        st.sandbox_cmd("kill-server", 1)
        # the session sees its idle primary connection close first
        time.sleep(0.5)
        client.stdin.write("go\n")
        client.stdin.flush()
        time.sleep(1)
        assert client.poll() is None, client.stderr.read()   # held
        st.sandbox_cmd("start-server", 1)
        out, err = client.communicate(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    assert client.returncode == 0, err
    assert out.strip() == "OK", (out, err)
    assert rows_on_db1() == ((1, 1), (2, 1), (3, 1))
    assert sl.log().count("before the statement was sent") > seen
    st.wait_until(lambda: st.healthy_topology(1), 60, what="db1 primary")
