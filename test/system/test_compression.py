# SPDX-License-Identifier: Apache-2.0
"""Protocol compression (issue 20): clients that compress (the mariadb
CLI's --compress, mysql-connector-python's compress=True) get a 20 MiB
blob and a 100,000-row result through readconnroute and readwritesplit
intact (SHA-256 checked against the server's own), and the client socket
carries fewer bytes than the same run uncompressed (the session's
bytes_read/bytes_written in the REST API). Compressed sessions are never
kernel-forwarded. A server with compression=true gets a compressed
backend connection (the server's own Compression status says ON), one
without does not. Hostile compressed packets (bad zlib data, lengths that
disagree, a decompression bomb past max_allowed_packet) get 1157/1153
and only their connection closes."""

import hashlib
import json
import socket
import struct
import subprocess
import zlib

import pymysql
import pytest

import sluicetest as st
from proxy import admin_rest, Daemon, Proxy, _wait_ready, global_section, \
    readconnroute_services, rw_service, server_sections, stop_proxy

PRIMARY_PORT = st.port(5160)
REPLICA_PORT = st.port(5161)
ADMIN_PORT = st.port(5162)
RWS_PORT = st.port(5163)
ZBACK_PORT = st.port(5164)
SMALL_PORT = st.port(5165)
MIB = 1024 * 1024
ROWS = 100_000


def config(run_dir):
    servers = "db1,db2,db3"
    text = global_section(run_dir, ADMIN_PORT) + server_sections()
    text += f"""
[zdb1]
type=server
address={st.HOST}
port={st.SERVERS[1]}
compression=true

[Cluster-Monitor]
type=monitor
module=basicmon
servers={servers}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
monitor_interval=500ms

[Z-Monitor]
type=monitor
module=basicmon
servers=zdb1
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
monitor_interval=500ms

[Zback-Service]
type=service
router=readconnroute
router_options=running
servers=zdb1
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
max_allowed_packet=1Gi

[Zback-Listener]
type=listener
service=Zback-Service
protocol=MariaDBClient
address={st.HOST}
port={ZBACK_PORT}

[Small-Service]
type=service
router=readconnroute
router_options=master
servers={servers}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
max_allowed_packet=1Mi

[Small-Listener]
type=listener
service=Small-Service
protocol=MariaDBClient
address={st.HOST}
port={SMALL_PORT}
"""
    # kernel forwarding on where it could apply: compressed sessions must
    # not be spliced (the kernel cannot decompress)
    text += readconnroute_services(servers, PRIMARY_PORT, REPLICA_PORT) \
        .replace("router=readconnroute\n",
                 "router=readconnroute\nkernel_forwarding=auto\n")
    text += rw_service("RW-Service", RWS_PORT, "max_allowed_packet=1Gi")
    return text


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("proxy-compress")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(config(run_dir))
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                    st.sluice_env())
    prx = Proxy(daemon, PRIMARY_PORT, REPLICA_PORT, None, run_dir)
    try:
        daemon.wait_ports([PRIMARY_PORT, REPLICA_PORT, ADMIN_PORT,
                           RWS_PORT, ZBACK_PORT, SMALL_PORT])
        _wait_ready(prx)
        st.wait_until(lambda: _routes(RWS_PORT), 30, interval=0.2,
                      what="the readwritesplit service to route")
        st.wait_until(lambda: _routes(ZBACK_PORT), 30, interval=0.2,
                      what="the compressed-backend service to route")
    except BaseException:
        stop_proxy(prx)
        raise
    yield prx
    problems = stop_proxy(prx)
    if problems:
        pytest.fail("proxy shutdown: " + "\n".join(problems), pytrace=False)


def _routes(port):
    try:
        with st.connect(port, connect_timeout=5) as conn:
            return st.server_id(conn) in st.SERVERS
    except pymysql.MySQLError:
        return False


@pytest.fixture(scope="module")
def schema():
    """test.zrows: 100,000 compressible rows; test.zblobs for the blob."""
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS test.zrows, test.zblobs")
        cur.execute("CREATE TABLE test.zblobs (id INT PRIMARY KEY, "
                    "b LONGBLOB)")
        cur.execute("CREATE TABLE test.zrows (id INT PRIMARY KEY, "
                    "name VARCHAR(64), v INT)")
        cur.execute(f"INSERT INTO test.zrows SELECT seq, "
                    f"CONCAT('row-', seq, '-', REPEAT('x', seq % 20)), "
                    f"seq * 7 FROM test.seq_1_to_{ROWS}")
    st.wait_replicated()


def blob_data():
    """20 MiB that compress (text with some variety) but are not trivial."""
    line = b"".join(b"%08d compressible line of the blob %d\n" % (i, i * 31)
                    for i in range(4096))
    reps = 20 * MIB // len(line) + 1
    return (line * reps)[:20 * MIB]


def rest(method, path, timeout=30):
    status, doc = admin_rest(ADMIN_PORT, method, path, timeout=timeout)
    assert status == 200, (method, path, status, doc)
    return doc


def session_of(service):
    """The only session of `service` (the REST view)."""
    mine = [s["attributes"] for s in rest("GET", "/sessions")["data"]
            if s["attributes"]["service"] == service]
    assert len(mine) == 1, mine
    return mine[0]


def wait_no_sessions(service):
    st.wait_until(lambda: not [
        s for s in rest("GET", "/sessions")["data"]
        if s["attributes"]["service"] == service], 10,
        what=f"the sessions of {service} to close")


# ---- mysql-connector-python (compress=True) ----

CONNECTOR_SCRIPT = r"""
import hashlib, json, sys, urllib.request, base64
import mysql.connector
host, port, user, pw, compress, admin, service = sys.argv[1:8]
compress = compress == "1"
def session():
    req = urllib.request.Request(f"http://{host}:{admin}/v1/sessions")
    req.add_header("Authorization", "Basic " +
                   base64.b64encode(b"admin:mariadb").decode())
    with urllib.request.urlopen(req) as r:
        doc = json.loads(r.read())
    mine = [s["attributes"] for s in doc["data"]
            if s["attributes"]["service"] == service]
    assert len(mine) == 1, mine
    return mine[0]
conn = mysql.connector.connect(host=host, port=int(port), user=user,
                               password=pw, database="test",
                               compress=compress, use_pure=True,
                               ssl_disabled=True)
cur = conn.cursor()
blob = sys.stdin.buffer.read()
cur.execute("REPLACE INTO test.zblobs VALUES (%s, %s)", (int(compress), blob))
conn.commit()
cur.execute("SELECT b, SHA2(b, 256), @@server_id FROM test.zblobs "
            "WHERE id = %s", (int(compress),))
back, server_sha, sid = cur.fetchone()
h = hashlib.sha256()
cur.execute("SELECT id, name, v FROM test.zrows ORDER BY id")
n = 0
for row in cur:
    h.update(("%d\t%s\t%d\n" % row).encode())
    n += 1
cur.execute("SHOW SESSION STATUS LIKE 'Compression'")
backend_compression = cur.fetchone()[1]
s = session()
# an uncompressed run may be kernel-forwarded: its bytes count too
kf = s["kernel_forwarding"] or {}
print(json.dumps({"blob_sha": hashlib.sha256(bytes(back)).hexdigest(),
                  "server_sha": server_sha, "rows": n,
                  "rows_sha": h.hexdigest(), "server_id": sid,
                  "bytes_read": s["bytes_read"] + kf.get("client_bytes", 0),
                  "bytes_written": s["bytes_written"] +
                                   kf.get("server_bytes", 0),
                  "kernel_forwarding": s["kernel_forwarding"],
                  "backend_compression": backend_compression}))
conn.close()
"""


def rows_sha():
    """SHA-256 of test.zrows as the scripts hash it, read directly."""
    h = hashlib.sha256()
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, name, v FROM test.zrows ORDER BY id")
        for row in cur.fetchall():
            h.update(("%d\t%s\t%d\n" % row).encode())
    return h.hexdigest()


def connector_run(port, service, compress):
    proc = subprocess.run(
        [str(st.connector_python()), "-c", CONNECTOR_SCRIPT, st.HOST, str(port),
         st.APP_USER, st.APP_PASSWORD, "1" if compress else "0",
         str(ADMIN_PORT), service],
        input=blob_data(), capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


@pytest.mark.parametrize("port,service", [
    (PRIMARY_PORT, "Primary-Service"), (RWS_PORT, "RW-Service")],
    ids=["readconnroute", "readwritesplit"])
def test_connector_compressed_blob_and_rows(proxy, schema, port, service):
    want_blob = hashlib.sha256(blob_data()).hexdigest()
    want_rows = rows_sha()
    runs = {}
    for compress in (False, True):
        wait_no_sessions(service)
        r = connector_run(port, service, compress)
        assert r["blob_sha"] == want_blob
        assert r["server_sha"] == want_blob
        assert r["rows"] == ROWS
        assert r["rows_sha"] == want_rows
        assert r["server_id"] == st.PRIMARY_ID
        # the backend link is compressed only for compression=true servers
        assert r["backend_compression"] == "OFF"
        runs[compress] = r
        wait_no_sessions(service)
    plain, comp = runs[False], runs[True]
    print(f"\nconnector via {service}: client socket read/written "
          f"{plain['bytes_read']}/{plain['bytes_written']} plain, "
          f"{comp['bytes_read']}/{comp['bytes_written']} compressed")
    # The blob compresses about 10:1 and the rows 4:1: the client socket
    # carries far fewer bytes both ways.
    assert comp["bytes_read"] < plain["bytes_read"] / 3, runs
    assert comp["bytes_written"] < plain["bytes_written"] / 3, runs
    assert not (comp["kernel_forwarding"] or {}).get("active"), comp


def test_compressed_backend_only_with_compression_true(proxy, schema):
    r = connector_run(ZBACK_PORT, "Zback-Service", False)
    assert r["backend_compression"] == "ON"
    assert r["blob_sha"] == hashlib.sha256(blob_data()).hexdigest()
    assert r["rows_sha"] == rows_sha() and r["rows"] == ROWS
    r = connector_run(ZBACK_PORT, "Zback-Service", True)
    assert r["backend_compression"] == "ON"
    assert r["rows_sha"] == rows_sha()


# ---- the mariadb CLI (--compress) ----

def cli_run(port, service, compress):
    """The CLI reads 100,000 rows and the blob's checksum; the session's
    byte counters are read while it is still connected."""
    argv = ["mariadb", "--no-defaults", f"-u{st.APP_USER}",
            f"-p{st.APP_PASSWORD}", f"-h{st.HOST}", f"-P{port}",
            "--protocol=tcp", "--batch", "--skip-column-names",
            "--unbuffered", "--max-allowed-packet=64M", "-Dtest"]
    if compress:
        argv.append("--compress")
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"SELECT id, name, v FROM test.zrows ORDER BY id;\n"
                         b"SELECT @@server_id, "
                         b"SHA2(b, 256), LENGTH(b), SHA2(b, 256) "
                         b"FROM test.zblobs WHERE id = 7;\n"
                         b"SELECT b FROM test.zblobs WHERE id = 7;\n"
                         b"SELECT 'done';\n")
        proc.stdin.flush()
        h = hashlib.sha256()
        for _ in range(ROWS):
            line = proc.stdout.readline()
            assert line, proc.stderr.read().decode()
            h.update(line)
        sid, sha, length, _ = proc.stdout.readline().decode().split("\t")
        blob_line = proc.stdout.readline()
        done = proc.stdout.readline()
        assert done == b"done\n", done
        s = session_of(service)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    kf = s["kernel_forwarding"] or {}
    return {"rows_sha": h.hexdigest(), "server_id": int(sid), "sha": sha,
            "length": int(length), "blob_line_len": len(blob_line),
            # an uncompressed run may be kernel-forwarded: count those too
            "bytes_read": s["bytes_read"] + kf.get("client_bytes", 0),
            "bytes_written": s["bytes_written"] + kf.get("server_bytes", 0),
            "kernel_forwarding": s["kernel_forwarding"]}


@pytest.mark.parametrize("port,service", [
    (PRIMARY_PORT, "Primary-Service"), (RWS_PORT, "RW-Service")],
    ids=["readconnroute", "readwritesplit"])
def test_cli_compressed_rows_and_blob(proxy, schema, port, service):
    data = blob_data()
    with st.connect(st.SERVERS[1], max_allowed_packet=64 * MIB) as direct:
        with direct.cursor() as cur:
            cur.execute("REPLACE INTO test.zblobs VALUES (7, %s)", (data,))
    st.wait_replicated()
    want = hashlib.sha256()
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, name, v FROM test.zrows ORDER BY id")
        for row in cur.fetchall():
            want.update(("%d\t%s\t%d\n" % row).encode())
    runs = {}
    for compress in (False, True):
        wait_no_sessions(service)
        r = cli_run(port, service, compress)
        assert r["rows_sha"] == want.hexdigest()
        assert r["sha"] == hashlib.sha256(data).hexdigest()
        assert r["length"] == len(data)
        # the CLI escapes \n in batch mode: 2 characters each, and its own
        assert r["blob_line_len"] == len(data) + data.count(b"\n") + 1
        assert r["server_id"] in st.SERVERS
        runs[compress] = r
    plain, comp = runs[False], runs[True]
    print(f"\nCLI via {service}: client socket written "
          f"{plain['bytes_written']} plain, {comp['bytes_written']} "
          "compressed")
    assert comp["bytes_written"] < plain["bytes_written"] / 3, runs
    assert not (comp["kernel_forwarding"] or {}).get("active"), comp


# ---- hostile compressed packets ----

def _read_packet(sock):
    hdr = _recv_exact(sock, 4)
    n = hdr[0] | hdr[1] << 8 | hdr[2] << 16
    return hdr[3], _recv_exact(sock, n)


def _recv_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def _read_compressed(sock):
    """One compressed packet's decoded payload."""
    hdr = _recv_exact(sock, 7)
    clen = hdr[0] | hdr[1] << 8 | hdr[2] << 16
    ulen = hdr[4] | hdr[5] << 8 | hdr[6] << 16
    body = _recv_exact(sock, clen)
    return hdr[3], zlib.decompress(body) if ulen else body


def _scramble_token(password, scramble):
    s1 = hashlib.sha1(password.encode()).digest()
    s2 = hashlib.sha1(s1).digest()
    s3 = hashlib.sha1(scramble + s2).digest()
    return bytes(a ^ b for a, b in zip(s1, s3))


def compressed_login(port):
    """A raw socket logged in with CLIENT_COMPRESS: (socket, next seq)."""
    sock = socket.create_connection((st.HOST, port), timeout=10)
    _, greeting = _read_packet(sock)
    p = greeting.index(b"\0", 1) + 1 + 4
    caps = struct.unpack("<H", greeting[p + 9:p + 11])[0]
    assert caps & 0x20, "CLIENT_COMPRESS not offered"
    scramble = greeting[p:p + 8]
    p2 = p + 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10
    scramble += greeting[p2:p2 + 12]
    flags = (0x1 | 0x4 | 0x8 | 0x20 | 0x200 | 0x8000 | 0x80000 | 0x10000 |
             0x20000)
    token = _scramble_token(st.APP_PASSWORD, scramble)
    body = (struct.pack("<IIB", flags, 16 * MIB, 45) + b"\0" * 23 +
            st.APP_USER.encode() + b"\0" + bytes([len(token)]) + token +
            b"test\0" + b"mysql_native_password\0")
    sock.sendall(struct.pack("<I", len(body))[:3] + b"\x01" + body)
    # the login stays plain (as on the server): its OK too
    seq, ok = _read_packet(sock)
    assert ok[0] == 0x00 and seq == 2, ok
    return sock


def compressed_query(sql):
    payload = b"\x03" + sql.encode()
    return struct.pack("<I", len(payload))[:3] + b"\0" + payload


def frame(body, ulen, seq=0):
    return (struct.pack("<I", len(body))[:3] + bytes([seq]) +
            struct.pack("<I", ulen)[:3] + body)


def expect_error(sock, code):
    _, payload = _read_compressed(sock)
    # the ERR packet inside the compressed one
    assert payload[4] == 0xff, payload
    assert struct.unpack("<H", payload[5:7])[0] == code, payload
    sock.settimeout(10)
    assert sock.recv(1) == b"", "connection left open"


def test_compressed_login_raw_and_query(proxy):
    sock = compressed_login(PRIMARY_PORT)
    q = compressed_query("SELECT @@server_id")
    sock.sendall(frame(zlib.compress(q), len(q)))
    # column count, column definition, EOF, the row, EOF
    stream, packets = b"", []
    while len(packets) < 5:
        _, part = _read_compressed(sock)
        stream += part
        while len(stream) >= 4:
            n = stream[0] | stream[1] << 8 | stream[2] << 16
            if len(stream) < 4 + n:
                break
            packets.append(stream[4:4 + n])
            stream = stream[4 + n:]
    assert packets[3] == b"\x011", packets   # the row: server_id 1
    assert packets[4][0] == 0xfe, packets
    sock.close()


@pytest.mark.parametrize("case", ["bad_zlib", "short_ulen", "long_ulen",
                                  "bomb"])
def test_hostile_compressed_packets(proxy, case):
    port = SMALL_PORT if case == "bomb" else PRIMARY_PORT
    with st.connect(PRIMARY_PORT) as bystander:
        sock = compressed_login(port)
        q = compressed_query("SELECT 1")
        if case == "bad_zlib":
            sock.sendall(frame(b"\x78\x9c garbage that is not deflate",
                               len(q)))
            expect_error(sock, 1157)
        elif case == "short_ulen":
            z = zlib.compress(q)
            sock.sendall(frame(z, len(q) - 1))
            expect_error(sock, 1157)
        elif case == "long_ulen":
            z = zlib.compress(q)
            sock.sendall(frame(z, len(q) + 100))
            expect_error(sock, 1157)
        else:
            # 16 KiB that decompress to a 16 MiB command, into a service
            # with max_allowed_packet=1Mi (the decoder's own limit, for a
            # stream of such packets, is unit-tested: test_compress.c)
            first = zlib.compress(b"\xff\xff\xff\x00\x03" +
                                  b"\0" * (0xffffff - 5), 9)
            sock.sendall(frame(first, 0xffffff))
            expect_error(sock, 1153)
        sock.close()
        # the bystander's session is untouched
        assert st.server_id(bystander) == st.PRIMARY_ID
