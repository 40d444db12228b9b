# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the system tests: paths, the sandbox's accounts, and
the three clients (the mariadb CLI, PyMySQL, the C client).

Everything here is plain functions; the fixtures that start proxies live
in conftest.py. Paths and accounts come from the environment that
scripts/test sets, with defaults for running pytest by hand from the
checkout (see docs/testing.md).
"""

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pymysql

ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("SLUICE_BUILD_DIR", ROOT / "build"))
SLUICE_BIN = Path(os.environ.get("SLUICE_BIN", BUILD_DIR / "bin" / "sluice"))
MODULE_DIR = BUILD_DIR / "modules"
C_CLIENT = BUILD_DIR / "test-bin" / "c_client"
SANDBOX = Path(os.environ.get("SLUICE_SANDBOX", ROOT / "sandbox"))
# The one place that knows the daemon's command line (see that script).
SLUICE_EXEC = ROOT / "scripts" / "sluice-exec"
SANDBOX_CMD = ROOT / "scripts" / "sandbox"

APP_USER = os.environ.get("SLUICE_APP_USER", "app")
APP_PASSWORD = os.environ.get("SLUICE_APP_PASSWORD", "app_pw")
SERVICE_USER = os.environ.get("SLUICE_SERVICE_USER", "sluice")
SERVICE_PASSWORD = os.environ.get("SLUICE_SERVICE_PASSWORD", "sluice_pw")
# the replication account mariadbmon gives a rejoined or demoted server
REPL_USER = os.environ.get("SLUICE_REPL_USER", "repl")
REPL_PASSWORD = os.environ.get("SLUICE_REPL_PASSWORD", "repl_pw")

# server_id -> port of the sandbox servers; 1 is the primary.
# SLUICE_SANDBOX_PORT_BASE moves the sandbox (scripts/sandbox honours it
# too) and SLUICE_PORT_OFFSET every port a test gives Sluice, so several
# copies of the suite can run side by side on one machine.
SANDBOX_PORT_BASE = int(os.environ.get("SLUICE_SANDBOX_PORT_BASE", "3311"))
SERVERS = {i: SANDBOX_PORT_BASE + i - 1 for i in (1, 2, 3)}
PORT_OFFSET = int(os.environ.get("SLUICE_PORT_OFFSET", "0"))


def port(n):
    """A listener port for Sluice in a test, shifted by SLUICE_PORT_OFFSET."""
    return n + PORT_OFFSET
PRIMARY_ID = 1
REPLICA_IDS = {2, 3}

HOST = "127.0.0.1"


def sluice_argv(mode, config):
    """The command that runs the daemon: mode "start" (foreground, log to
    stdout) or "check" (validate the config and exit)."""
    return [str(SLUICE_EXEC), mode, str(config)]


def sluice_env():
    env = dict(os.environ)
    env["SLUICE_BIN"] = str(SLUICE_BIN)
    return env


def connect(port=None, socket=None, user=APP_USER, password=APP_PASSWORD,
            database=None, **kw):
    """A PyMySQL connection to 127.0.0.1:port or a unix socket
    (autocommit on unless asked otherwise)."""
    kw.setdefault("connect_timeout", 10)
    kw.setdefault("autocommit", True)
    kw.setdefault("read_timeout", 120)
    kw.setdefault("write_timeout", 120)
    if socket is not None:
        return pymysql.connect(unix_socket=str(socket), user=user,
                               password=password, database=database, **kw)
    return pymysql.connect(host=HOST, port=port, user=user,
                           password=password, database=database, **kw)


def root(server_id):
    """root on a sandbox server, directly (over its unix socket)."""
    return pymysql.connect(unix_socket=str(SANDBOX / f"db{server_id}.sock"),
                           user="root", password="", connect_timeout=5,
                           read_timeout=60, autocommit=True)


def scalar(conn, sql, args=None):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        row = cur.fetchone()
    return row[0] if row else None


def server_id(conn):
    return int(scalar(conn, "SELECT @@server_id"))


def error_code(exc):
    """The MySQL error number of a PyMySQL exception."""
    return exc.args[0] if exc.args else None


def cli(sql, port=None, socket=None, user=APP_USER, password=APP_PASSWORD,
        database=None, timeout=60):
    """Run the mariadb CLI; returns the CompletedProcess (text)."""
    argv = ["mariadb", "--no-defaults", f"-u{user}", f"-p{password}",
            "--batch", "--skip-column-names", "--connect-timeout=10"]
    if socket is not None:
        argv.append(f"--socket={socket}")
    else:
        argv += [f"-h{HOST}", f"-P{port}", "--protocol=tcp"]
    if database is not None:
        argv.append(f"-D{database}")
    argv += ["-e", sql]
    return subprocess.run(argv, capture_output=True, text=True,
                          timeout=timeout)


def cli_error_code(proc):
    """The error number in the CLI's "ERROR 1045 (28000)..." or None."""
    m = re.search(r"ERROR (\d+) \(", proc.stderr)
    return int(m.group(1)) if m else None


def c_client(port_or_socket, mode, *args, user=APP_USER,
             password=APP_PASSWORD, timeout=120):
    """Run test/system/c_client; HOST is the socket path for a socket."""
    if not C_CLIENT.exists():
        raise AssertionError(f"{C_CLIENT} not built")
    if isinstance(port_or_socket, int):
        host, port = HOST, str(port_or_socket)
    else:
        host, port = str(port_or_socket), "0"
    argv = [str(C_CLIENT), host, port, user, password, mode, *args]
    return subprocess.run(argv, capture_output=True, text=True,
                          timeout=timeout)


def wait_until(predicate, timeout, interval=0.1, what="condition"):
    """Poll predicate() until it is true; AssertionError after timeout."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception as exc:  # noqa: BLE001 - reported below
            last_exc = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                         + (f" (last error: {last_exc!r})" if last_exc
                            else ""))


def wait_replicated(timeout=30):
    """Wait until both replicas have applied everything the primary has
    written so far."""
    with root(PRIMARY_ID) as p:
        target = scalar(p, "SELECT @@gtid_binlog_pos")
    for sid in sorted(REPLICA_IDS):
        with root(sid) as r:
            wait_until(lambda: scalar(
                r, "SELECT MASTER_GTID_WAIT(%s, 1)", (target,)) == 0,
                timeout, what=f"db{sid} to reach GTID {target}")


def read_only(sid):
    """Whether sandbox server sid has @@read_only set."""
    with root(sid) as c:
        return int(scalar(c, "SELECT @@read_only")) == 1


def replica_source(sid):
    """(Master_Port, Slave_IO_Running, Slave_SQL_Running) of sandbox
    server sid, None if it is no replica."""
    with root(sid) as c, c.cursor() as cur:
        cur.execute("SHOW SLAVE STATUS")
        row = cur.fetchone()
        if row is None:
            return None
        r = dict(zip([d[0] for d in cur.description], row))
        return (int(r["Master_Port"]), r["Slave_IO_Running"],
                r["Slave_SQL_Running"])


def replicates_from(sid, src):
    """Whether server sid replicates from server src, both threads up."""
    return replica_source(sid) == (SERVERS[src], "Yes", "Yes")


def healthy_topology(primary):
    """Server `primary` writable and the other two read-only replicas of
    it; False if any server is down."""
    try:
        return not read_only(primary) and all(
            read_only(s) and replicates_from(s, primary)
            for s in SERVERS if s != primary)
    except Exception:  # noqa: BLE001 - a dead server is unhealthy
        return False


# mysql-connector-python, the one driver that comes from PyPI: a venv in
# the build tree (test_drivers, test_compression).
CONNECTOR_PY = "mysql-connector-python==26.10.0"


def connector_python():
    """BUILD_DIR/drivers/venv's python3 with CONNECTOR_PY installed, made
    on first use. RuntimeError (with the tool's output) if it cannot be."""
    venv = BUILD_DIR / "drivers" / "venv"
    py = venv / "bin" / "python3"
    stamp = venv / "connector-installed"
    if stamp.exists() and stamp.read_text() == CONNECTOR_PY:
        return py
    venv.parent.mkdir(parents=True, exist_ok=True)
    for argv in (["/usr/bin/python3", "-m", "venv", "--system-site-packages",
                  str(venv)],
                 [str(py), "-m", "pip", "install", "--quiet",
                  "--disable-pip-version-check", CONNECTOR_PY]):
        proc = subprocess.run(argv, capture_output=True, text=True,
                              timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n"
                               f"{proc.stdout}{proc.stderr}")
    stamp.write_text(CONNECTOR_PY)
    return py


def sandbox_cmd(*args, timeout=180):
    """Run `scripts/sandbox ARGS...` (start-server N, stop-server N,
    kill-server N...) for this run's sandbox; its stdout. AssertionError
    with its stderr if it fails."""
    proc = subprocess.run([str(SANDBOX_CMD), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ))
    assert proc.returncode == 0, f"sandbox {args}: {proc.stderr}"
    return proc.stdout


def ids_on(sid, table, tag):
    """The ids of `table`'s rows written by the writer `tag`, read on
    sandbox server sid directly (what survived there)."""
    with root(sid) as c, c.cursor() as cur:
        cur.execute(f"SELECT id FROM {table} WHERE tag = %s", (tag,))
        return {r[0] for r in cur.fetchall()}


def close_quietly(conn):
    """Close a client connection that may be broken already."""
    try:
        if conn is not None:
            conn.close()
    except Exception:  # noqa: BLE001 - broken already
        pass


class Writer(threading.Thread):
    """INSERTs (id, tag) rows into `table` one by one through `port`,
    reconnecting after an error; `acked` holds every id whose INSERT
    returned OK, `errors` counts the failures (an id whose INSERT failed
    is never used again: its fate is unknown)."""

    def __init__(self, port, table, tag, start_id):
        super().__init__(daemon=True)
        self.port, self.table, self.tag = port, table, tag
        self.next_id = start_id
        self.acked = []
        self.errors = 0
        self.stop_flag = threading.Event()

    def run(self):
        conn = None
        while not self.stop_flag.is_set():
            try:
                if conn is None:
                    conn = connect(self.port, connect_timeout=2,
                                   read_timeout=5, write_timeout=5)
                with conn.cursor() as cur:
                    cur.execute(f"INSERT INTO {self.table} VALUES (%s, %s)",
                                (self.next_id, self.tag))
                self.acked.append(self.next_id)
                self.next_id += 1
                time.sleep(0.01)
            except Exception:  # noqa: BLE001 - counted; we reconnect
                self.errors += 1
                self.next_id += 1
                close_quietly(conn)
                conn = None
                time.sleep(0.05)

    def stop(self):
        self.stop_flag.set()
        self.join(timeout=30)


def rss_kb(pid):
    """VmRSS of process pid, in kB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def sanitizer_build():
    """Whether SLUICE_BIN is built with ASan or TSan (RSS figures are not
    comparable there: freed memory is quarantined)."""
    out = subprocess.run(["ldd", str(SLUICE_BIN)], capture_output=True,
                         text=True).stdout
    syms = subprocess.run(["nm", "-D", str(SLUICE_BIN)],
                          capture_output=True, text=True).stdout
    return any(s in out + syms for s in ("libasan", "libtsan", "__asan_",
                                         "__tsan_"))


def sysbench_rw(command, *args, tables=2, table_size=10000, timeout=None,
                script="oltp_read_write"):
    """sysbench oltp_read_write (or `script`) COMMAND as the app user on
    sbtest: `run` starts it (a Popen, output on its stdout), anything else
    runs to the end (a CompletedProcess)."""
    argv = ["sysbench", script, f"--tables={tables}",
            f"--table-size={table_size}", f"--mysql-user={APP_USER}",
            f"--mysql-password={APP_PASSWORD}", "--mysql-db=sbtest",
            *args, command]
    if command == "run":
        return subprocess.Popen(argv, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    return subprocess.run(argv, capture_output=True, text=True,
                          timeout=timeout)


def prepare_rw_load(table, tables=2, table_size=10000):
    """Fresh sbtest tables (sysbench prepare on db1 directly) and an
    empty (id, tag) `table` for a TrxWriter, on every server."""
    direct = ["--mysql-host=127.0.0.1", f"--mysql-port={SERVERS[1]}"]
    sysbench_rw("cleanup", *direct, tables=tables, table_size=table_size,
                timeout=120)
    proc = sysbench_rw("prepare", *direct, tables=tables,
                       table_size=table_size, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with root(1) as c:
        c.cursor().execute(f"CREATE TABLE IF NOT EXISTS {table} "
                           "(id INT PRIMARY KEY, tag VARCHAR(32))")
        c.cursor().execute(f"DELETE FROM {table}")
    wait_replicated(timeout=60)


def sysbench_counters(output):
    """The totals of a sysbench run's summary: queries, transactions,
    ignored errors, reconnects (those it printed)."""
    stats = {}
    for key in ("queries", "transactions", "ignored errors", "reconnects"):
        m = re.search(rf"^\s*{key}:\s+(\d+)\s+\(([\d.]+) per sec\.\)",
                      output, re.M)
        if m:
            stats[key] = int(m.group(1))
    return stats


def sysbench_interval_p99(output):
    """[(second, p99 ms, errors/s, reconnects/s)] from sysbench's interval
    reports (--report-interval=1 --percentile=99)."""
    rows = []
    for m in re.finditer(r"^\[ (\d+)s \].*?lat \(ms,99%\): ([\d.]+) "
                         r"err/s: ([\d.]+) reconn/s: ([\d.]+)", output, re.M):
        rows.append((int(m.group(1)), float(m.group(2)),
                     float(m.group(3)), float(m.group(4))))
    return rows


class TrxWriter(threading.Thread):
    """Inserts (id, tag) rows into `table` through `port`, every other
    time two rows in an explicit transaction; `acked` holds every id whose
    INSERT (or COMMIT) returned OK, `errors` the errors seen as (statement
    that failed, ids whose fate is unknown, repr of the exception); the
    connection is opened again after one, and those ids are never used
    again."""

    def __init__(self, port, table, tag):
        super().__init__(daemon=True)
        self.port, self.table, self.tag = port, table, tag
        self.next_id = 1
        self.acked = []
        self.errors = []
        self.stop_flag = threading.Event()

    def run(self):
        conn = None
        n = 0
        while not self.stop_flag.is_set():
            ids = [self.next_id]
            stmt = "connect"
            try:
                if conn is None:
                    conn = connect(self.port, connect_timeout=5,
                                   read_timeout=30, write_timeout=30)
                with conn.cursor() as cur:
                    insert = f"INSERT INTO {self.table} VALUES (%s, %s)"
                    if n % 2:
                        ids.append(self.next_id + 1)
                        stmt = "BEGIN"
                        cur.execute("BEGIN")
                        for i in ids:
                            stmt = "INSERT in a transaction"
                            cur.execute(insert, (i, self.tag))
                        stmt = "COMMIT"
                        cur.execute("COMMIT")
                    else:
                        stmt = "autocommit INSERT"
                        cur.execute(insert, (ids[0], self.tag))
                self.acked.extend(ids)
                self.next_id += len(ids)
                n += 1
                time.sleep(0.005)
            except Exception as exc:  # noqa: BLE001 - counted
                self.errors.append((stmt, ids, repr(exc)))
                self.next_id += 2   # their fate is unknown: never reused
                close_quietly(conn)
                conn = None
                time.sleep(0.05)

    def stop(self):
        self.stop_flag.set()
        self.join(timeout=60)


def repair_diverged(old, new, tables):
    """What an operator does with an old primary that binlogged a
    transaction the new primary never received (kill -9 under load; the
    client never got its OK): make `tables` on it equal to the new
    primary's without binlogging, forget its binlog and take the new
    primary's current GTID position. The monitor then rejoins it. Only
    while nothing writes to the new primary (the rows and the position
    must be of one moment). Prints how many rows differed."""
    with root(new) as c, c.cursor() as cur:
        rows = {}
        for t in tables:
            cur.execute(f"SELECT * FROM {t}")
            rows[t] = set(cur.fetchall())
        pos = scalar(c, "SELECT @@gtid_current_pos")
    differ = 0
    with root(old) as c, c.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin=0")
        cur.execute("SET GLOBAL read_only=1")
        cur.execute("STOP SLAVE")
        cur.execute("RESET SLAVE ALL")
        cur.execute("BEGIN")
        for t in tables:
            cur.execute(f"SELECT * FROM {t}")
            mine = set(cur.fetchall())
            if mine == rows[t]:
                continue
            differ += len(mine ^ rows[t])
            cur.execute(f"DELETE FROM {t}")
            if rows[t]:
                marks = ", ".join(["%s"] * len(next(iter(rows[t]))))
                cur.executemany(f"INSERT INTO {t} VALUES ({marks})",
                                sorted(rows[t]))
        c.commit()
        cur.execute("RESET MASTER")
        cur.execute("SET GLOBAL gtid_slave_pos = %s", (pos,))
    print(f"db{old} diverged: {differ} row(s) differed from db{new}'s "
          f"in {', '.join(tables)}; made equal")


def recv_packet(sock):
    """One MariaDB packet read from a raw socket: (sequence, payload);
    ConnectionError when the peer closes first."""
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("closed")
        head += chunk
    n = head[0] | head[1] << 8 | head[2] << 16
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        if not chunk:
            raise ConnectionError("closed")
        body += chunk
    return head[3], body


# ---- test certificates (openssl CLI) ----

def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True, timeout=60)


def make_cert(d, name, ca, subj, san=None):
    """d/NAME.pem and d/NAME-key.pem, signed by d/CA.pem, valid 2 days."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout",
            f"{name}-key.pem", "-out", f"{name}.csr", "-subj", subj, cwd=d)
    ext = []
    if san:
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
        ext = ["-extfile", f"{name}.ext"]
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem",
            "-CAkey", f"{ca}-key.pem", "-CAcreateserial", "-days", "2",
            "-out", f"{name}.pem", *ext, cwd=d)


def make_test_certs(d):
    """In directory d: two CAs (ca, otherca), a server certificate for
    127.0.0.1/localhost and a client certificate, both from ca."""
    for ca in ("ca", "otherca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                "2", "-keyout", f"{ca}-key.pem", "-out", f"{ca}.pem",
                "-subj", f"/CN=Sluice test {ca}", cwd=d)
    make_cert(d, "server", "ca", "/CN=localhost",
              "IP:127.0.0.1,DNS:localhost")
    make_cert(d, "client", "ca", "/CN=sluice test client")
    return d


def revoke_cert(certs, name, tag):
    """A CRL from certs/ca.pem that revokes certs/NAME.pem (its own CA
    database, so each CRL revokes only what it names). Returns its path."""
    db = certs / f"cadb-{tag}"
    db.mkdir(exist_ok=True)
    (db / "index.txt").write_text("")
    (db / "crlnumber").write_text("01\n")
    (db / "ca.cnf").write_text(f"""[ca]
default_ca = test_ca
[test_ca]
database = {db}/index.txt
crlnumber = {db}/crlnumber
default_md = sha256
default_crl_days = 2
""")
    ca = ["-config", str(db / "ca.cnf"), "-keyfile", "ca-key.pem", "-cert",
          "ca.pem"]
    openssl("ca", *ca, "-revoke", f"{name}.pem", cwd=certs)
    openssl("ca", *ca, "-gencrl", "-out", f"crl-{tag}.pem", cwd=certs)
    return certs / f"crl-{tag}.pem"
