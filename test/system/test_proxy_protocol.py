# SPDX-License-Identifier: Apache-2.0
"""The PROXY protocol, both ways.

Servers with proxy_protocol=true: Sluice sends a PROXY v1 header on each
client's backend connection, so the server sees the client's address
(`information_schema.processlist`), through readconnroute and
readwritesplit; clients connect from 127.0.0.2 so that it differs from
Sluice's own 127.0.0.1. The monitor and the account loading (internal
connections, "PROXY UNKNOWN") keep working.

A listener with proxy_protocol_networks: a v1 or v2 header from a listed
network sets the client's address, for Sluice's account matching (an
account 'pp'@'10.9.8.7' logs in only when the header says 10.9.8.7), the
REST API's session and the header sent onward; a header from a network
not listed (1130), a malformed one (1043) and one that never completes
(auth_timeout) are refused and only that connection closes; a header
split across packets works.

The sandbox servers accept headers from Sluice (proxy_protocol_networks
is dynamic in MariaDB 10.11: SET GLOBAL here, reset at the end); the
header is optional to them, so nothing else is affected.
"""

import base64
import json
import socket
import struct
import time
import urllib.request

import pymysql
import pytest

import sluicetest as st
import proxy as px

PRIMARY, REPLICA = st.port(5220), st.port(5221)
RW, PP, PP_NARROW = st.port(5222), st.port(5223), st.port(5224)
ADMIN_PORT = st.port(5225)
TEE, TEE_TARGET = st.port(5226), st.port(5227)
CLIENT_ADDR = "127.0.0.2"
PP_USER, PP_PASSWORD, PP_HOST = "pp", "pp_pw", "10.9.8.7"
DB = "sluice_pp"

pytestmark = pytest.mark.skipif(px.PROXY != "sluice",
                                reason="Sluice's PROXY protocol")


def config(run_dir):
    text = px.sluice_config(run_dir, PRIMARY, REPLICA)
    # every server gets the header
    for sid, port in st.SERVERS.items():
        text = text.replace(f"[db{sid}]\ntype=server\naddress={st.HOST}\n"
                            f"port={port}\n",
                            f"[db{sid}]\ntype=server\naddress={st.HOST}\n"
                            f"port={port}\nproxy_protocol=true\n")
    assert text.count("proxy_protocol=true") == len(st.SERVERS)
    text += px.rw_service("RW-Service", RW, params="auth_timeout=2s\n"
                          "max_pending_logins_per_host=3")
    text += f"""
[PP-Listener]
type=listener
service=RW-Service
protocol=MariaDBClient
address={st.HOST}
port={PP}
proxy_protocol_networks=127.0.0.0/24, ::1

[PP-Narrow-Listener]
type=listener
service=RW-Service
protocol=MariaDBClient
address={st.HOST}
port={PP_NARROW}
proxy_protocol_networks={CLIENT_ADDR}/32
"""
    # a tee copy runs in an internal session: it speaks for the same client
    text += """
[PP-Tee]
type=filter
module=tee
target=Tee-Target
match=/seen_src/

[PP-To-Tee]
type=filter
module=regexfilter
match=/seen_src/
replace=seen_tee
"""
    for name, port, filt in (("Tee-Service", TEE, "PP-Tee"),
                             ("Tee-Target", TEE_TARGET, "PP-To-Tee")):
        text += f"""
[{name}]
type=service
router=readconnroute
router_options=master
servers={",".join(f"db{sid}" for sid in st.SERVERS)}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
filters={filt}

[{name}-Listener]
type=listener
service={name}
protocol=MariaDBClient
address={st.HOST}
port={port}
"""
    return text.replace("admin_enabled=false",
                        f"admin_host={st.HOST}\nadmin_port={ADMIN_PORT}")


def on_all_servers(sql):
    for sid in st.SERVERS:
        with st.root(sid) as conn, conn.cursor() as cur:
            cur.execute(sql)


@pytest.fixture(scope="module")
def sluice(tmp_path_factory):
    on_all_servers("SET GLOBAL proxy_protocol_networks='127.0.0.1'")
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{PP_USER}'@'{PP_HOST}'")
        cur.execute(f"CREATE USER '{PP_USER}'@'{PP_HOST}' IDENTIFIED BY "
                    f"'{PP_PASSWORD}'")
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
        for table in ("seen", "seen_src", "seen_tee"):
            cur.execute(f"CREATE OR REPLACE TABLE {DB}.{table} (id INT "
                        "PRIMARY KEY, host VARCHAR(100))")
        cur.execute(f"GRANT SELECT, INSERT ON {DB}.* TO "
                    f"'{PP_USER}'@'{PP_HOST}'")
        cur.execute(f"GRANT SELECT, INSERT ON {DB}.* TO '{st.APP_USER}'@'%'")
    st.wait_replicated()
    run_dir = tmp_path_factory.mktemp("proxyproto")
    prx = None
    problems = []
    try:
        prx = px.start_with_admin(run_dir, config(run_dir), PRIMARY, REPLICA,
                                  ADMIN_PORT)
        yield prx
    finally:
        if prx is not None:
            problems = px.stop_proxy(prx)
        with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{PP_USER}'@'{PP_HOST}'")
            cur.execute(f"REVOKE SELECT, INSERT ON {DB}.* FROM "
                        f"'{st.APP_USER}'@'%'")
            cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        st.wait_replicated()
        on_all_servers("SET GLOBAL proxy_protocol_networks=''")
    if problems:
        pytest.fail("proxy shutdown: " + "\n".join(problems), pytrace=False)


def raw_socket(port, source=CLIENT_ADDR):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    s.bind((source, 0))
    s.connect((st.HOST, port))
    return s


def login(port, header=b"", user=st.APP_USER, password=st.APP_PASSWORD,
          source=CLIENT_ADDR, chunks=1):
    """A pymysql connection from `source` that first sends `header` (in
    `chunks` pieces, each its own TCP segment)."""
    s = raw_socket(port, source)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    step = max(1, -(-len(header) // chunks)) if header else 1
    for i in range(0, len(header), step):
        s.sendall(header[i:i + step])
        if chunks > 1:
            time.sleep(0.05)
    conn = pymysql.connections.Connection(
        host=st.HOST, port=port, user=user, password=password,
        connect_timeout=10, read_timeout=30, autocommit=True,
        defer_connect=True)
    try:
        conn.connect(sock=s)
    except BaseException:
        s.close()
        raise
    return conn


def own_host(conn):
    """The server's view of this connection: (host:port, server_id)."""
    with conn.cursor() as cur:
        cur.execute("SELECT host, @@server_id FROM information_schema."
                    "processlist WHERE id = CONNECTION_ID()")
        return cur.fetchone()


def v1(src, dst="127.0.0.1", sport=40001, dport=3306):
    fam = "TCP6" if ":" in src else "TCP4"
    return f"PROXY {fam} {src} {dst} {sport} {dport}\r\n".encode()


def v2(src, dst="127.0.0.1", sport=40002, dport=3306, command=0x21):
    body = (socket.inet_aton(src) + socket.inet_aton(dst) +
            struct.pack("!HH", sport, dport))
    return (b"\r\n\r\n\x00\r\nQUIT\n" + bytes([command, 0x11]) +
            struct.pack("!H", len(body)) + body)


def refused(port, header, source=CLIENT_ADDR):
    with pytest.raises(pymysql.err.MySQLError) as err:
        login(port, header, source=source).close()
    return err.value


def log_text(prx):
    return prx.daemon.log_path.read_text(errors="replace")


@pytest.mark.parametrize("port,ids", [(PRIMARY, {st.PRIMARY_ID}),
                                      (REPLICA, st.REPLICA_IDS),
                                      (RW, st.REPLICA_IDS)])
def test_server_sees_the_client_address(sluice, port, ids):
    with login(port) as conn:
        host, sid = own_host(conn)
    assert sid in ids
    assert host.startswith(CLIENT_ADDR + ":"), host
    # the real address, not Sluice's: the control from 127.0.0.1
    with login(port, source=st.HOST) as conn:
        host, _ = own_host(conn)
    assert host.startswith(st.HOST + ":"), host


def test_readwritesplit_writes_carry_the_address(sluice):
    with login(RW) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.seen SELECT 1, host FROM "
                    "information_schema.processlist WHERE "
                    "id = CONNECTION_ID()")
        cur.execute("SELECT @@server_id")
        assert cur.fetchone()[0] in st.REPLICA_IDS
    with st.root(st.PRIMARY_ID) as conn:
        host = st.scalar(conn, f"SELECT host FROM {DB}.seen WHERE id = 1")
    assert host.startswith(CLIENT_ADDR + ":"), host


def test_tee_copy_carries_the_address(sluice):
    with login(TEE) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.seen_src SELECT 1, host FROM "
                    "information_schema.processlist WHERE "
                    "id = CONNECTION_ID()")
        assert st.server_id(conn) == st.PRIMARY_ID

    def copied():
        with st.root(st.PRIMARY_ID) as root:
            return st.scalar(root, f"SELECT host FROM {DB}.seen_tee "
                             "WHERE id = 1")
    st.wait_until(lambda: copied() is not None, 10, what="the tee'd insert")
    assert copied().startswith(CLIENT_ADDR + ":"), copied()
    with st.root(st.PRIMARY_ID) as root:
        src = st.scalar(root, f"SELECT host FROM {DB}.seen_src WHERE id = 1")
    # the same client, port included (from the header, not the socket)
    assert src == copied()


def test_monitor_and_accounts_still_work(sluice):
    # the monitor's connections (PROXY UNKNOWN) keep the roles right
    with login(PRIMARY) as conn:
        assert st.server_id(conn) == st.PRIMARY_ID
    with login(REPLICA) as conn:
        assert st.server_id(conn) in st.REPLICA_IDS


@pytest.mark.parametrize("make", [v1, v2], ids=["v1", "v2"])
def test_header_address_matches_accounts(sluice, make):
    # 'pp'@'10.9.8.7' only: from 127.0.0.2 without a header, refused
    with pytest.raises(pymysql.err.OperationalError) as err:
        login(PP, user=PP_USER, password=PP_PASSWORD).close()
    assert st.error_code(err.value) == 1045
    # ... and another address in the header is refused too
    with pytest.raises(pymysql.err.OperationalError) as err:
        login(PP, make("10.9.8.8"), user=PP_USER,
              password=PP_PASSWORD).close()
    assert st.error_code(err.value) == 1045
    assert "'pp'@'10.9.8.8'" in str(err.value)
    with login(PP, make(PP_HOST), user=PP_USER,
               password=PP_PASSWORD) as conn:
        host, sid = own_host(conn)
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            assert cur.fetchone()[0] == f"{PP_USER}@{PP_HOST}"
    # the server saw the header's address (sent onward by Sluice)
    assert sid in st.REPLICA_IDS
    assert host.startswith(PP_HOST + ":"), host


def test_rest_session_shows_the_header_address(sluice):
    with login(PP, v1(PP_HOST), user=PP_USER, password=PP_PASSWORD) as conn:
        st.server_id(conn)
        req = urllib.request.Request(
            f"http://{st.HOST}:{ADMIN_PORT}/v1/sessions")
        tok = base64.b64encode(b"admin:mariadb").decode()
        req.add_header("Authorization", "Basic " + tok)
        with urllib.request.urlopen(req, timeout=10) as resp:
            data = json.loads(resp.read())["data"]
        remotes = [s["attributes"].get("remote") for s in data]
    assert PP_HOST in remotes, remotes


def test_pending_logins_counted_by_the_header_address(sluice):
    """max_pending_logins_per_host=3 counts the address a header carries,
    not the load balancer's (whose clients are all pending a moment)."""
    idle = []
    try:
        # the load balancer's own address is not capped ...
        for _ in range(4):
            idle.append(raw_socket(PP))
            assert idle[-1].recv(4096)          # greeting: admitted
        with login(PP, v1(PP_HOST), user=PP_USER,
                   password=PP_PASSWORD) as conn:
            assert st.server_id(conn) in st.REPLICA_IDS
        # ... the address in the header is: 3 pending from 10.9.8.7
        for s in idle[:3]:
            s.sendall(v1(PP_HOST))
        time.sleep(0.5)     # read by Sluice (well within auth_timeout)
        with pytest.raises(pymysql.err.OperationalError) as err:
            login(PP, v1(PP_HOST), user=PP_USER,
                  password=PP_PASSWORD).close()
        assert st.error_code(err.value) == 1040, err.value
        # another address is not affected
        with login(PP, v1("10.9.8.8")) as conn:
            assert own_host(conn)[0].startswith("10.9.8.8:")
    finally:
        for s in idle:
            s.close()

    def works():
        try:
            login(PP, v1(PP_HOST), user=PP_USER,
                  password=PP_PASSWORD).close()
            return True
        except pymysql.err.OperationalError:
            return False
    st.wait_until(works, 10, what="the pending logins to be released")


def test_header_split_across_packets(sluice):
    for make in (v1, v2):
        with login(PP, make(PP_HOST), user=PP_USER, password=PP_PASSWORD,
                   chunks=7) as conn:
            assert own_host(conn)[0].startswith(PP_HOST + ":")


def test_local_and_unknown_keep_the_connection_address(sluice):
    for header in (b"PROXY UNKNOWN\r\n", v2("0.0.0.0", command=0x20)):
        with login(PP, header) as conn:
            assert own_host(conn)[0].startswith(CLIENT_ADDR + ":")


def test_header_from_unlisted_network_refused(sluice):
    # PP-Narrow-Listener takes headers from 127.0.0.2 only
    err = refused(PP_NARROW, v1(PP_HOST), source="127.0.0.3")
    assert st.error_code(err) == 1130, err
    with login(PP_NARROW, v1(PP_HOST), user=PP_USER,
               password=PP_PASSWORD) as conn:
        assert own_host(conn)[0].startswith(PP_HOST + ":")
    # a listener without proxy_protocol_networks takes no header
    err = refused(RW, v2(PP_HOST))
    assert st.error_code(err) == 1130, err
    assert "not in proxy_protocol_networks" in log_text(sluice)


@pytest.mark.parametrize("header", [
    b"PROXY TCP4 10.9.8.7 127.0.0.1 1 2 3\r\n",
    b"PROXY TCP4 10.9.8.777 127.0.0.1 1 2\r\n",
    b"PROXY TCP6 10.9.8.7 127.0.0.1 1 2\r\n",
    b"PROXY TCP4 10.9.8.7 127.0.0.1 1 65536\r\n",
    b"PROXY TCP4  10.9.8.7 127.0.0.1 1 2\r\n",
    b"PROXY TCP4 10.9.8.7 127.0.0.1 1 2\r\r",
    b"PROXY " + b"A" * 120 + b"\r\n",
    b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x04abcd",
    b"\r\n\r\n\x00\r\nQUIT\n\x31\x11\x00\x0c" + b"x" * 12,
    b"\r\n\r\n\x00\r\nQUIT\n\x21\x12\x00\x0c" + b"x" * 12,
], ids=["fields", "address", "family", "port", "spaces", "crlf", "long",
        "v2-short", "v2-version", "v2-udp"])
def test_malformed_header_refused(sluice, header):
    err = refused(PP, header)
    assert st.error_code(err) == 1043, err
    # only that connection: the next one works
    with login(PP, v1(PP_HOST), user=PP_USER, password=PP_PASSWORD) as conn:
        assert st.server_id(conn) in st.REPLICA_IDS


def test_slow_header_times_out(sluice):
    with login(RW) as other:
        s = raw_socket(PP)
        greeting = s.recv(4096)
        assert greeting, "no greeting"
        s.sendall(b"PROXY TCP4 10.9.8")
        start = time.monotonic()
        s.settimeout(10)
        try:
            rest = s.recv(4096)
        except ConnectionResetError:
            rest = b""
        elapsed = time.monotonic() - start
        s.close()
        assert rest == b"", rest
        assert 1.5 <= elapsed < 8, elapsed
        # the other client was not disturbed
        assert st.server_id(other) in st.REPLICA_IDS
    assert "PROXY protocol header is incomplete" in log_text(sluice)


@pytest.mark.parametrize("value", ["10.0.0.0/33", "10.0.0.1/", "proxy.lan",
                                   "::1/129", "127.0.0.1, 10.0.0/8"])
def test_invalid_networks_refused(tmp_path, value):
    text = config(tmp_path).replace(
        "proxy_protocol_networks=127.0.0.0/24, ::1",
        f"proxy_protocol_networks={value}")
    cfg = tmp_path / "bad.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("check", cfg)
    line = text.splitlines().index(f"proxy_protocol_networks={value}") + 1
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line}: invalid value for parameter "
            f"'proxy_protocol_networks' in listener 'PP-Listener': invalid "
            f"network" in out), out
