# SPDX-License-Identifier: Apache-2.0
"""readwritesplit's slave_connections (MaxScale's): the replica
connections a session opens when it starts, more being opened when a read
finds no usable connected replica (up to max_slave_connections).

One Sluice (mariadbmon, 200 ms) with Start1-Service
(slave_connections=1, max_slave_connections=2). A session starts with the
primary and one replica: its backends in the REST API, and the replicas'
PROCESSLIST; with that replica in maintenance its next read opens the
other replica and is answered there (@@server_id)."""

import pytest

import sluicetest as st
from proxy import MonitoredSluice, admin_rest, global_section, \
    mariadbmon_section, rw_service, server_sections

pytestmark = pytest.mark.sluice_only

START1_PORT = st.port(5678)
ADMIN_PORT = st.port(5679)


@pytest.fixture(scope="module")
def sl(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("slave_connections")
    text = global_section(run_dir, ADMIN_PORT) + server_sections()
    text += mariadbmon_section("db1,db2,db3", "200ms", "")
    text += rw_service("Start1-Service", START1_PORT,
                       "slave_connections=1\nmax_slave_connections=2")
    s = MonitoredSluice(run_dir, text, [START1_PORT, ADMIN_PORT],
                        ADMIN_PORT)
    try:
        st.wait_until(lambda: all(
            state(f"db{sid}") == "Slave, Running" for sid in (2, 3)), 15,
            what="both replicas running")
        yield s
    finally:
        problems = s.daemon.stop()
    assert not problems, "\n".join(problems)


def state(name):
    status, doc = admin_rest(ADMIN_PORT, "GET", f"servers/{name}")
    assert status == 200, doc
    return doc["data"]["attributes"]["state"]


def backends_of_sessions():
    status, doc = admin_rest(ADMIN_PORT, "GET", "sessions")
    assert status == 200, doc
    return [sorted(s["attributes"]["backends"]) for s in doc["data"]]


def app_conns(sid):
    with st.root(sid) as c, c.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                    "WHERE USER = %s", (st.APP_USER,))
        return cur.fetchone()[0]


def test_session_starts_with_one_replica_and_opens_another(sl):
    before = {sid: app_conns(sid) for sid in (2, 3)}
    with st.connect(START1_PORT) as conn:
        first = st.server_id(conn)
        assert first in st.REPLICA_IDS
        [backends] = backends_of_sessions()
        assert backends == sorted(["db1", f"db{first}"]), backends
        after = {sid: app_conns(sid) - before[sid] for sid in (2, 3)}
        assert after == {first: 1, 5 - first: 0}, after
        # the connected replica goes into maintenance: the next read opens
        # the other one (max_slave_connections=2 allows it)
        status, doc = admin_rest(ADMIN_PORT, "PUT",
                                 f"servers/db{first}/set?state=maintenance")
        assert status in (200, 204), doc
        try:
            st.wait_until(lambda: "Maintenance" in state(f"db{first}"), 5,
                          what="maintenance set")
            assert st.server_id(conn) == 5 - first
            [backends] = backends_of_sessions()
            assert f"db{5 - first}" in backends, backends
        finally:
            admin_rest(ADMIN_PORT, "PUT",
                       f"servers/db{first}/clear?state=maintenance")
