# SPDX-License-Identifier: Apache-2.0
"""Long data through readwritesplit and readconnroute, checked by data
(issue 16):

  - a 20 MiB LOAD DATA LOCAL INFILE (the file's packets are data for the
    connection that asked for them, not new commands: before the fix
    readwritesplit routed each as a command, and every later answer was
    shifted by one);
  - a 20 MiB value written (a command of two protocol packets) and read
    back (an answer of two packets);
  - COM_STMT_SEND_LONG_DATA: a 20 MiB blob sent in 1 MiB pieces by the C
    client (test/system/c_client.c, mode long_data);
  - a cursor: a prepared SELECT with CURSOR_TYPE_READ_ONLY read by
    COM_STMT_FETCH, 7 rows at a time (c_client mode cursor), outside and
    inside a transaction.

Services: readconnroute Primary-Service (st.port(5026)), its replica
service (5027, unused), RW-Service (readwritesplit, defaults, 5028).
"""

import hashlib
import zlib

import pytest

import sluicetest as st
from proxy import running_proxy

pytestmark = pytest.mark.sluice_only

PRIMARY_PORT, REPLICA_PORT = st.port(5026), st.port(5027)
RW_PORT = st.port(5028)
MIB = 1024 * 1024
ROUTERS = {"readconnroute": PRIMARY_PORT, "readwritesplit": RW_PORT}
CURSOR_ROWS = 1000


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    servers = ",".join(f"db{sid}" for sid in st.SERVERS)
    extra = f"""
[RW-Service]
type=service
router=readwritesplit
servers={servers}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
# as the sandbox servers and readconnroute's services here
max_allowed_packet=1Gi

[RW-Listener]
type=listener
service=RW-Service
protocol=MariaDBClient
address={st.HOST}
port={RW_PORT}
"""
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS test")
    yield from running_proxy(tmp_path_factory, PRIMARY_PORT, REPLICA_PORT,
                             extra=extra)


def big_conn(port):
    return st.connect(port, database="test", local_infile=True,
                      max_allowed_packet=64 * MIB, read_timeout=120)


@pytest.mark.parametrize("router", ROUTERS)
def test_load_data_local_20mib(proxy, tmp_path, router):
    path = tmp_path / "big.tsv"
    rows = 200_000
    crc = 0
    with open(path, "w") as f:
        for i in range(1, rows + 1):
            v = f"{i:08d}-" + "abcdefghij" * 10
            crc += zlib.crc32(v.encode())
            f.write(f"{i}\t{v}\n")
    assert path.stat().st_size > 20 * MIB
    table = f"ld_{router}"
    with big_conn(ROUTERS[router]) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE OR REPLACE TABLE {table} "
                    "(id INT PRIMARY KEY, v VARCHAR(200))")
        cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE {table}")
        assert cur.rowcount == rows
        cur.execute(f"SELECT COUNT(*), SUM(id), SUM(CRC32(v)) FROM {table}")
        assert tuple(int(x) for x in cur.fetchone()) == (
            rows, rows * (rows + 1) // 2, crc)
        # The session is still in step: each answer is its own.
        for k in range(5):
            cur.execute(f"SELECT {k}, COUNT(*) FROM {table} WHERE id <= {k}")
            assert cur.fetchone() == (k, k)
        # A second load on the same session (a refused one first).
        with pytest.raises(Exception) as exc:
            cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE "
                        "no_such_table")
        assert st.error_code(exc.value) == 1146
        cur.execute(f"LOAD DATA LOCAL INFILE '{path}' REPLACE INTO TABLE "
                    f"{table}")
        cur.execute(f"SELECT COUNT(*) FROM {table}")
        assert cur.fetchone() == (rows,)
        cur.execute(f"DROP TABLE {table}")


@pytest.mark.parametrize("router", ROUTERS)
def test_20mib_value(proxy, router):
    value = bytes((k * 13 + k // 4096) & 0xff for k in range(20 * MIB))
    digest = hashlib.md5(value).hexdigest()
    table = f"val_{router}"
    with big_conn(ROUTERS[router]) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE OR REPLACE TABLE {table} "
                    "(id INT PRIMARY KEY, b LONGBLOB)")
        cur.execute(f"INSERT INTO {table} VALUES (1, %s)", (value,))
        cur.execute(f"SELECT LENGTH(b), MD5(b) FROM {table}")
        assert cur.fetchone() == (len(value), digest)
        cur.execute(f"SELECT b, 'after' FROM {table} WHERE id = 1")
        got, after = cur.fetchone()
        assert len(got) == len(value) and got == value and after == "after"
        cur.execute("SELECT 'next'")
        assert cur.fetchone() == ("next",)
    st.wait_replicated()
    # A new session reads it (readwritesplit: from a replica).
    with big_conn(ROUTERS[router]) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT b FROM {table} WHERE id = 1")
        assert hashlib.md5(cur.fetchone()[0]).hexdigest() == digest
        cur.execute(f"DROP TABLE {table}")


@pytest.mark.parametrize("router", ROUTERS)
def test_send_long_data_20mib(proxy, router):
    mib = 20
    data = bytearray(mib * MIB)
    for k in range(len(data)):
        data[k] = (k * 7 + k // 65536) & 0xff
    table = f"long_{router}"
    out = st.c_client(ROUTERS[router], "long_data", table, str(mib))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(len(data)),
                                  hashlib.md5(data).hexdigest()]
    st.wait_replicated()
    with big_conn(ROUTERS[router]) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT MD5(b) FROM {table}")
        assert cur.fetchone() == (hashlib.md5(data).hexdigest(),)
        cur.execute(f"DROP TABLE {table}")


@pytest.mark.parametrize("router", ROUTERS)
def test_cursor_fetch(proxy, router):
    table = f"cur_{router}"
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE OR REPLACE TABLE test.{table} "
                    "(id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO test.{table} SELECT seq, 3 * seq FROM "
                    f"test.seq_1_to_{CURSOR_ROWS}")
    st.wait_replicated()
    out = st.c_client(ROUTERS[router], "cursor", table)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == [f"rows={CURSOR_ROWS}",
                                           f"trx rows={CURSOR_ROWS}"]
