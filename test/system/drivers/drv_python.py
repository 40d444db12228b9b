# SPDX-License-Identifier: Apache-2.0
"""The driver scenario (scenario.md) for the three Python drivers:

    drv_python.py pymysql|mysqldb|connector HOST PORT USER PASS DB TABLE

pymysql (PyMySQL) and mysqldb (mysqlclient) bind parameters on the client
(escaped literals in COM_QUERY); connector (mysql-connector-python, pure
mode) uses server-side prepared statements (cursor(prepared=True)) for
the bound statements. Prints the JSON report; exit 1 names the failed
check. DRV_COMPRESS=1 in the environment: the protocol is compressed
(mysqldb and connector; PyMySQL has no compression).
"""

import json
import os
import sys
import threading
import time

TEXT1 = "4-byte: \U0001F600\U0001F42C CJK: \u6f22\u5b57 \U0002070E \u00f1"
TEXT2 = "second \U0001F389 \u4e2d\u6587 \ud55c\uad6d\uc5b4"
BYTES256 = bytes(range(256))
BIG = bytes(((i * 131 + (i >> 12)) & 0xFF) for i in range(4 << 20))
COMPRESS = os.environ.get("DRV_COMPRESS") == "1"
SQL_MODE = "STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION"
TIME_ZONE = "+05:30"


class Failed(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failed(what)


class Driver:
    """The differences between the drivers; the scenario is below."""

    def __init__(self, name, args):
        self.name = name
        self.args = args
        host, port, user, password, db = args
        self.db = db
        if name == "pymysql":
            import pymysql
            self.conn = pymysql.connect(
                host=host, port=int(port), user=user, password=password,
                database=db, charset="utf8mb4", autocommit=True,
                connect_timeout=10, read_timeout=60, write_timeout=60)
        elif name == "mysqldb":
            import MySQLdb
            self.conn = MySQLdb.connect(
                host=host, port=int(port), user=user, passwd=password,
                db=db, charset="utf8mb4", connect_timeout=10,
                **({"compress": 1} if COMPRESS else {}))
            self.conn.autocommit(True)
        elif name == "connector":
            import mysql.connector
            self.conn = mysql.connector.connect(
                host=host, port=int(port), user=user, password=password,
                database=db, charset="utf8mb4", use_pure=True,
                autocommit=True, connection_timeout=10, compress=COMPRESS)
        else:
            raise SystemExit(f"unknown driver {name}")

    def thread_id(self):
        """The thread id of the handshake (what the CLI's Ctrl-C kills)."""
        if self.name == "connector":
            return self.conn.connection_id
        return self.conn.thread_id()

    def error_code(self, exc):
        if self.name == "connector":
            return getattr(exc, "errno", None)
        return exc.args[0] if exc.args else None

    def cursor(self, bound=False):
        """A cursor; bound=True gives server-side prepared statements
        where the driver has them."""
        if bound and self.name == "connector":
            return self.conn.cursor(prepared=True)
        return self.conn.cursor()

    def param(self):
        return "%s" if self.name != "connector" else "?"

    def begin(self):
        if self.name == "mysqldb":
            self.conn.autocommit(False)   # SET autocommit=0
        else:
            self.conn.start_transaction() if self.name == "connector" \
                else self.conn.begin()

    def rollback(self):
        self.conn.rollback()
        if self.name == "mysqldb":
            self.conn.autocommit(True)


def rows(cur, sql, args=None):
    cur.execute(sql, args) if args is not None else cur.execute(sql)
    return [tuple(r) for r in cur.fetchall()]


def to_bytes(v):
    return bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else v


def to_text(v):
    return v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else v


def check_insert(d, table):
    p = d.param()
    cur = d.cursor(bound=True)
    sql = f"INSERT INTO {table} (id, txt, b) VALUES ({p}, {p}, {p})"
    cur.execute(sql, (1, TEXT1, BYTES256))
    cur.execute(sql, (2, TEXT2, BYTES256[::-1]))
    cur.close()


def check_read_back(d, table):
    cur = d.cursor(bound=True)
    got = rows(cur, f"SELECT id, txt, b FROM {table} WHERE id >= {d.param()}"
               " ORDER BY id", (1,))
    cur.close()
    got = [(int(i), to_text(t), to_bytes(b)) for i, t, b in got]
    expect(len(got) == 2, f"{len(got)} rows")
    expect(got[0] == (1, TEXT1, BYTES256), f"row 1 differs: {got[0]!r}")
    expect(got[1] == (2, TEXT2, BYTES256[::-1]),
           f"row 2 differs: {got[1]!r}")


def check_rollback(d, table):
    p = d.param()
    d.begin()
    cur = d.cursor(bound=True)
    cur.execute(f"INSERT INTO {table} (id, txt, b) VALUES ({p}, {p}, {p})",
                (3, "rolled back", b"x"))
    cur.close()
    d.rollback()
    cur = d.cursor()
    n3 = rows(cur, f"SELECT COUNT(*) FROM {table} WHERE id = 3")[0][0]
    n = rows(cur, f"SELECT COUNT(*) FROM {table}")[0][0]
    expect(int(n3) == 0 and int(n) == 2, f"after rollback id3={n3} all={n}")


def check_blob(d, table):
    p = d.param()
    cur = d.cursor(bound=True)
    cur.execute(f"INSERT INTO {table} (id, txt, b) VALUES ({p}, {p}, {p})",
                (4, "big", BIG))
    got = rows(cur, f"SELECT b FROM {table} WHERE id = {p}", (4,))
    cur.close()
    expect(len(got) == 1, f"{len(got)} rows")
    b = to_bytes(got[0][0])
    expect(b == BIG, f"blob differs (length {len(b)})")


def check_big_result(d):
    cur = d.cursor()
    got = rows(cur, "SELECT seq, CONCAT('row-', seq) FROM seq_1_to_10000 "
               "ORDER BY seq")
    expect(len(got) == 10000, f"{len(got)} rows")
    expect(sum(int(r[0]) for r in got) == 50005000, "sum differs")
    bad = [r for r in got if to_text(r[1]) != f"row-{int(r[0])}"]
    expect(not bad, f"bad rows, first {bad[:1]!r}")


def check_procedure(d):
    cur = d.cursor()
    cur.execute(f"CALL {d.db}.drv_two_results()")
    first = [(int(a), to_text(b)) for a, b in cur.fetchall()]
    expect(cur.nextset(), "no second result set")
    second = [(int(a), to_text(b)) for a, b in cur.fetchall()]
    # Drain the final OK of the CALL.
    while cur.nextset():
        pass
    cur.close()
    expect(first == [(1, "first")], f"result 1: {first!r}")
    expect(second == [(1, "s1"), (2, "s2"), (3, "s3")],
           f"result 2: {second!r}")


def check_syntax_error(d):
    cur = d.cursor()
    try:
        cur.execute("SELEC 1")
    except Exception as exc:  # noqa: BLE001 - driver-specific classes
        code = d.error_code(exc)
        expect(code == 1064, f"error {code}: {exc}")
        return
    finally:
        cur.close()
    raise Failed("no error")


def check_session_kept(d):
    cur = d.cursor()
    got = rows(cur, "SELECT @v, @@session.sql_mode, @@session.time_zone")[0]
    got = (int(got[0]) if got[0] is not None else None, to_text(got[1]),
           to_text(got[2]))
    expect(got == (42, SQL_MODE, TIME_ZONE), f"session state {got!r}")
    expect(rows(cur, "SELECT 1")[0][0] == 1, "SELECT 1")


def check_query_timeout(d):
    """A query timeout the way clients implement it without server help:
    KILL QUERY <thread id> from a second connection ends SELECT SLEEP(30)
    with 1317 at once, and the connection goes on."""
    other = Driver(d.name, d.args)
    out = {}

    def sleeper():
        t0 = time.monotonic()
        try:
            cur = d.cursor()
            cur.execute("SELECT SLEEP(30)")
            out["rows"] = cur.fetchall()
            cur.close()
        except Exception as exc:  # noqa: BLE001 - the error is the result
            out["error"] = d.error_code(exc)
        out["elapsed"] = time.monotonic() - t0
    th = threading.Thread(target=sleeper, daemon=True)
    th.start()
    time.sleep(1.0)
    cur = other.cursor()
    cur.execute(f"KILL QUERY {d.thread_id()}")
    cur.close()
    other.conn.close()
    th.join(10)
    expect(out.get("error") == 1317, f"SLEEP ended with {out!r}")
    expect(out["elapsed"] < 3, f"the KILL took {out['elapsed']:.1f} s")
    expect(rows(d.cursor(), "SELECT 1")[0][0] == 1, "SELECT 1 after KILL")


def scenario(d, table):
    cur = d.cursor()
    yield "charset", None
    got = rows(cur, "SELECT @@character_set_client, "
               "@@character_set_connection, @@character_set_results")[0]
    expect(tuple(map(to_text, got)) == ("utf8mb4",) * 3, f"{got!r}")
    yield "default_db", None
    got = to_text(rows(cur, "SELECT DATABASE()")[0][0])
    expect(got == d.db, f"DATABASE() is {got!r}")
    yield "session_set", None
    cur.execute("SET @v = 42")
    cur.execute(f"SET SESSION sql_mode = '{SQL_MODE}'")
    cur.execute(f"SET SESSION time_zone = '{TIME_ZONE}'")
    yield "create_table", None
    cur.execute(f"DROP TABLE IF EXISTS {table}")
    cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, "
                "txt VARCHAR(64) CHARACTER SET utf8mb4, b LONGBLOB)")
    cur.close()
    steps = (("insert_params", check_insert, True),
             ("read_back", check_read_back, True),
             ("rollback", check_rollback, True),
             ("blob_4mib", check_blob, True),
             ("big_result", check_big_result, False),
             ("procedure", check_procedure, False),
             ("syntax_error", check_syntax_error, False),
             ("session_kept", check_session_kept, False),
             ("query_timeout", check_query_timeout, False))
    for name, fn, wants_table in steps:
        yield name, None
        fn(d, table) if wants_table else fn(d)


def main(argv):
    if len(argv) != 8:
        raise SystemExit(f"usage: {argv[0]} DRIVER HOST PORT USER PASS DB "
                         "TABLE")
    name = argv[1]
    report = {"driver": name, "passed": []}
    check = "connect"
    try:
        d = Driver(name, argv[2:7])
        for step, _ in scenario(d, argv[7]):
            report["passed"].append(check)
            check = step
        report["passed"].append(check)
    except Exception as exc:  # noqa: BLE001 - reported, exit 1
        report["failed"] = check
        report["error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(report))
        return 1
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
