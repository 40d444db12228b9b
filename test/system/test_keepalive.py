# SPDX-License-Identifier: Apache-2.0
"""connection_keepalive (issue 18): idle backend connections of a session
are pinged so the server's wait_timeout does not close them.

One Sluice (mariadbmon, REST API off): readwritesplit services KA
(`connection_keepalive=1s`) and NOKA (`connection_keepalive=0`), and a
readconnroute service RCR (`router_options=slave`,
`connection_keepalive=1s`). `SET GLOBAL wait_timeout=3` on the replicas
only while the test's sessions connect (their backend connections take
the value at login; the global is restored at once).

- KA and NOKA sessions read `@@server_id, CONNECTION_ID()` (a replica),
  then write only (UPDATEs, on the primary) every 0.5 s for 8 s, each
  answered with one affected row (a keepalive answer reaching the client
  would desynchronise it). Then, on the replica itself: KA's backend
  connection is still in its processlist and a read through the session
  on that replica answers with the same CONNECTION_ID(); NOKA's was
  closed by the server (not in the processlist).
- RCR's one server is db2 through a relay on a unix socket (its own
  basicmon); the RCR session stays idle 8 s, then answers with the same
  CONNECTION_ID() on db2.
- A ping's answer held back by the relay: a statement the client sends
  meanwhile is not sent to the server (the relay sees no byte from
  Sluice until it lets the answer through), then is, and the client
  gets its own answer, never the ping's.
"""

import socket
import threading
import time
from pathlib import Path

import pytest

import sluicetest as st
from proxy import Daemon, global_section, mariadbmon_section, \
    rw_service, server_sections

pytestmark = [pytest.mark.sluice_only]

KA_PORT = st.port(5137)
NOKA_PORT = st.port(5138)
RCR_PORT = st.port(5139)
BUSY_S = 8
WAIT_TIMEOUT = 3


PING = bytes([1, 0, 0, 0, 0x0e])


class Relay:
    """Forwards a unix socket to db2's TCP port. Armed, it holds back the
    server's answer to the next COM_PING until release(), and counts the
    bytes Sluice sends on that connection meanwhile."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(self.path)
        self.sock.listen(16)
        self.sock.settimeout(0.5)
        self.stop = False
        self.armed = False
        self.ping_seen = threading.Event()
        self.released = threading.Event()
        self.bytes_while_held = 0
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            s = socket.create_connection((st.HOST, st.SERVERS[2]))
            self.conns += [c, s]
            held = threading.Event()   # this connection's answer held
            threading.Thread(target=self._pump, args=(c, s, held, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(s, c, held, False),
                             daemon=True).start()

    def _pump(self, src, dst, held, upstream):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if upstream and held.is_set():
                    self.bytes_while_held += len(data)
                if upstream and self.armed and data == PING:
                    self.armed = False
                    held.set()
                    self.ping_seen.set()
                elif not upstream and held.is_set():
                    self.released.wait(30)
                    held.clear()
                dst.sendall(data)
        except OSError:
            pass
        for sk in (src, dst):
            try:
                sk.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.stop = True
        self.released.set()
        self.sock.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass


def config(run_dir):
    # admin off: the module's three ports are the listeners'
    text = global_section(run_dir, RCR_PORT, extra="admin_enabled=false")
    text += server_sections()
    text += mariadbmon_section("db1,db2,db3")
    text += rw_service("KA", KA_PORT, "connection_keepalive=1s\n"
                       "causal_reads=none")
    text += rw_service("NOKA", NOKA_PORT, "connection_keepalive=0\n"
                       "causal_reads=none")
    text += f"""
[RCR]
type=service
router=readconnroute
router_options=slave
connection_keepalive=1s
servers=relay
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[relay]
type=server
socket={run_dir}/relay.sock

[Relay-Monitor]
type=monitor
module=basicmon
servers=relay
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
monitor_interval=500ms

[RCR-Listener]
type=listener
service=RCR
protocol=MariaDBClient
address={st.HOST}
port={RCR_PORT}
"""
    return text


@pytest.fixture(scope="module")
def sl(tmp_path_factory):
    run_dir = Path(tmp_path_factory.mktemp("keepalive"))
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(config(run_dir))
    with st.root(1) as c, c.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS test.ka "
                    "(id INT PRIMARY KEY, n INT)")
        cur.execute("REPLACE INTO test.ka VALUES (1, 0), (2, 0)")
    st.wait_replicated()
    relay = Relay(run_dir / "relay.sock")
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                    st.sluice_env())
    try:
        daemon.wait_ports([KA_PORT, NOKA_PORT, RCR_PORT])
        # the monitor has both replicas when a replica service routes
        st.wait_until(lambda: server_and_conn(RCR_PORT)[0] == 2, 30,
                      what="readconnroute to route to db2 (the relay)")
        yield relay
    finally:
        problems = daemon.stop()
        relay.close()
    assert not problems, "\n".join(problems)


def server_and_conn(port_or_conn):
    if isinstance(port_or_conn, int):
        with st.connect(port_or_conn) as c:
            return server_and_conn(c)
    with port_or_conn.cursor() as cur:
        cur.execute("SELECT @@server_id, CONNECTION_ID()")
        sid, cid = cur.fetchone()
    return int(sid), int(cid)


def on_server(sid, cid):
    """Whether connection cid is in server sid's processlist."""
    with st.root(sid) as r:
        return st.scalar(r, "SELECT COUNT(*) FROM information_schema."
                         "processlist WHERE id = %s", (cid,)) == 1


def short_wait_timeout_on_replicas(connect):
    """Run connect() while the replicas' global wait_timeout is
    WAIT_TIMEOUT; restored right after."""
    old = {}
    for sid in st.REPLICA_IDS:
        with st.root(sid) as r:
            old[sid] = st.scalar(r, "SELECT @@GLOBAL.wait_timeout")
            r.cursor().execute(f"SET GLOBAL wait_timeout={WAIT_TIMEOUT}")
    try:
        return connect()
    finally:
        for sid, value in old.items():
            with st.root(sid) as r:
                r.cursor().execute("SET GLOBAL wait_timeout=%s", (value,))


def test_idle_backends_kept_alive(sl):
    def connect():
        return [st.connect(p) for p in (KA_PORT, NOKA_PORT, RCR_PORT)]

    ka, noka, rcr = short_wait_timeout_on_replicas(connect)
    try:
        first = {name: server_and_conn(c)
                 for name, c in (("ka", ka), ("noka", noka), ("rcr", rcr))}
        for name, (sid, cid) in first.items():
            assert sid in st.REPLICA_IDS, (name, sid)
            assert on_server(sid, cid), name
        # KA and NOKA busy on the primary only; RCR idle.
        deadline = time.monotonic() + BUSY_S
        rounds = 0
        while time.monotonic() < deadline:
            for i, c in ((1, ka), (2, noka)):
                with c.cursor() as cur:
                    assert cur.execute("UPDATE test.ka SET n = n + 1 "
                                       "WHERE id = %s", (i,)) == 1
            rounds += 1
            time.sleep(0.5)
        with st.root(1) as p:
            assert st.scalar(p, "SELECT n FROM test.ka WHERE id = 1") == \
                rounds
        # The server closed NOKA's idle replica connection ...
        assert not on_server(*first["noka"]), first["noka"]
        # ... and not KA's or RCR's: the same connections answer.
        assert on_server(*first["ka"]), first["ka"]
        assert on_server(*first["rcr"]), first["rcr"]
        assert server_and_conn(rcr) == first["rcr"]
        sid, cid = server_and_conn(ka)
        assert sid in st.REPLICA_IDS
        if sid == first["ka"][0]:
            assert cid == first["ka"][1]
    finally:
        for c in (ka, noka, rcr):
            c.close()


def test_ping_answer_never_reaches_client(sl):
    relay = sl
    with st.connect(RCR_PORT) as c:
        first = server_and_conn(c)
        relay.armed = True
        assert relay.ping_seen.wait(10), "no keepalive ping within 10 s"
        answer = []
        t = threading.Thread(target=lambda: answer.append(
            st.scalar(c, "SELECT 'mine'")), daemon=True)
        t.start()
        time.sleep(0.5)
        # held by Sluice behind the unanswered ping: nothing sent
        assert relay.bytes_while_held == 0
        assert answer == [] and t.is_alive()
        relay.released.set()
        t.join(10)
        assert answer == ["mine"]
        assert server_and_conn(c) == first
