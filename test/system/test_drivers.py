# SPDX-License-Identifier: Apache-2.0
"""Driver compatibility (issue 8): the same scenario
(test/system/drivers/scenario.md) with eight client libraries, each
through three targets:

  direct          the primary itself, which proves the test right
  readconnroute   a readconnroute service, router_options=master
  readwritesplit  a readwritesplit service with default settings

Drivers: the mariadb CLI, libmariadb (C), PyMySQL, mysqlclient,
mysql-connector-python (pure mode, server-side prepared statements),
MariaDB Connector/J (useServerPrepStmts=true), go-sql-driver/mysql and
Node's mysqljs/mysql (Debian has no mysql2). Every driver must pass every
check through every target: a check that passes `direct` and fails
through Sluice is a Sluice bug. The drivers that compress the protocol
run the scenario a second time compressed (DRV_COMPRESS=1).

The driver programs live in test/system/drivers; the Java and Go ones
are compiled once per run into BUILD_DIR/drivers, and
mysql-connector-python is pip-installed once into the virtualenv
BUILD_DIR/drivers/venv (Debian's python3 with its system packages). A
missing toolchain fails that driver's tests (it is not a skip); the
packages come from scripts/lib.sh DRIVER_PACKAGES.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import sluicetest as st
from proxy import running_proxy

DRIVER_SRC = Path(__file__).resolve().parent / "drivers"
DRIVER_DIR = st.BUILD_DIR / "drivers"
CONNECTOR_J = Path("/usr/share/java/mariadb-java-client.jar")
GOPATH = "/usr/share/gocode"
NODE_PATH = "/usr/share/nodejs"
BUILD_TIMEOUT = 300
RUN_TIMEOUT = 120

RCR_PORTS = (st.port(4550), st.port(4551))
RWS_PORTS = (st.port(4552), st.port(4553))
RWS_PORT = st.port(4554)

CHECKS = ["connect", "charset", "default_db", "session_set", "create_table",
          "insert_params", "read_back", "rollback", "blob_4mib",
          "big_result", "procedure", "syntax_error", "session_kept"]
EXTRA_CHECKS = {"c": ["set_names", "change_user", "reset_connection"],
                "pymysql": ["query_timeout"], "mysqldb": ["query_timeout"],
                "connector": ["query_timeout"]}

PROCEDURE = """\
CREATE PROCEDURE test.drv_two_results()
BEGIN
    SELECT 1 AS a, 'first' AS b;
    SELECT seq, CONCAT('s', seq) FROM seq_1_to_3 ORDER BY seq;
END"""


def _newer(target, *sources):
    return (target.exists() and
            all(target.stat().st_mtime >= s.stat().st_mtime
                for s in sources))


def _sh(argv, env=None):
    """Run a build step; the output of a failing one is the error."""
    proc = subprocess.run(argv, capture_output=True, text=True, env=env,
                          timeout=BUILD_TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed:\n"
                           f"{proc.stdout}{proc.stderr}")


def _build_java():
    src = DRIVER_SRC / "DrvJava.java"
    out = DRIVER_DIR / "java"
    if not CONNECTOR_J.exists():
        raise RuntimeError(f"{CONNECTOR_J} missing (libmariadb-java)")
    if not _newer(out / "DrvJava.class", src):
        _sh(["javac", "-d", out, "-cp", CONNECTOR_J, src])
    return ["java", "-cp", f"{CONNECTOR_J}:{out}", "DrvJava"], None


def _go_binary():
    """Debian's Go (golang-go) when installed, else the go in PATH."""
    if Path("/usr/lib/go/bin/go").exists():
        return "/usr/lib/go/bin/go"
    return shutil.which("go") or "go"


def _build_go():
    src = DRIVER_SRC / "drv_go.go"
    out = DRIVER_DIR / "drv_go"
    if not _newer(out, src):
        env = dict(os.environ, GO111MODULE="off", GOPATH=GOPATH,
                   GOCACHE=str(DRIVER_DIR / "gocache"), GOFLAGS="",
                   CGO_ENABLED="0")
        _sh([_go_binary(), "build", "-o", out, src], env=env)
    return [str(out)], None


def _build_venv():
    py = st.connector_python()
    return [str(py), str(DRIVER_SRC / "drv_python.py"), "connector"], None


def _c():
    prog = st.BUILD_DIR / "test-bin" / "drv_c"
    if not prog.exists():
        raise RuntimeError(f"{prog} not built (cmake target drv_c)")
    return [str(prog)], None


DRIVERS = {
    "cli": lambda: (["/usr/bin/python3", str(DRIVER_SRC / "drv_cli.py")],
                    None),
    "c": _c,
    "pymysql": lambda: (["/usr/bin/python3", str(DRIVER_SRC /
                         "drv_python.py"), "pymysql"], None),
    "mysqldb": lambda: (["/usr/bin/python3", str(DRIVER_SRC /
                         "drv_python.py"), "mysqldb"], None),
    "connector": _build_venv,
    "jdbc": _build_java,
    "go": _build_go,
    "node": lambda: (["node", str(DRIVER_SRC / "drv_node.js")],
                     {"NODE_PATH": NODE_PATH}),
}


@pytest.fixture(scope="session")
def drivers():
    """Build every driver program once: name -> (argv, env) or the
    exception that stopped it."""
    DRIVER_DIR.mkdir(parents=True, exist_ok=True)
    built = {}
    for name, build in DRIVERS.items():
        try:
            built[name] = build()
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            built[name] = exc
    return built


@pytest.fixture(scope="module")
def procedure():
    """test.drv_two_results(), created directly on the primary."""
    with st.root(st.PRIMARY_ID) as conn:
        with conn.cursor() as cur:
            cur.execute("DROP PROCEDURE IF EXISTS test.drv_two_results")
            cur.execute(PROCEDURE)
    st.wait_replicated()


def _rws_section():
    """The readwritesplit service: default settings, unless
    SLUICE_TEST_RWS_OPTIONS adds parameters (';'-separated, e.g.
    "causal_reads=local") to look past one failure at the next."""
    servers = ",".join(f"db{sid}" for sid in st.SERVERS)
    options = "\n".join(o.strip() for o in os.environ.get(
        "SLUICE_TEST_RWS_OPTIONS", "").split(";") if o.strip())
    return f"""
[RW-Split-Service]
type=service
router=readwritesplit
servers={servers}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
{options}

[RW-Split-Listener]
type=listener
service=RW-Split-Service
protocol=MariaDBClient
address={st.HOST}
port={RWS_PORT}
"""


def _target_proxy(tmp_path_factory, target):
    """Generator: the (host, port) of TARGET, with its proxy running."""
    if target == "direct":
        yield st.SERVERS[st.PRIMARY_ID]
    elif target == "readconnroute":
        gen = running_proxy(tmp_path_factory, *RCR_PORTS)
        yield next(gen).primary_port
        yield from gen
    else:
        gen = running_proxy(tmp_path_factory, *RWS_PORTS,
                            extra=_rws_section())
        next(gen)

        def routes():
            with st.connect(RWS_PORT, connect_timeout=5) as conn:
                return st.server_id(conn) in st.SERVERS
        try:
            st.wait_until(routes, 30, interval=0.2,
                          what="the readwritesplit service to route")
        except BaseException:
            gen.close()
            raise
        yield RWS_PORT
        yield from gen


@pytest.fixture(scope="module", params=[
    "direct", "readconnroute",
    pytest.param("readwritesplit", marks=pytest.mark.sluice_only)])
def target(request, tmp_path_factory, procedure):
    """(name, port) of the target all drivers run against."""
    gen = _target_proxy(tmp_path_factory, request.param)
    yield request.param, next(gen)
    for _ in gen:
        pass


@pytest.mark.parametrize("driver", list(DRIVERS))
def test_driver_scenario(drivers, target, driver):
    run_scenario(drivers, target, driver, compressed=False)


# The drivers that compress the protocol (CLIENT_COMPRESS, zlib): PyMySQL,
# Node's mysqljs and Debian's go-sql-driver (1.7) have no compression.
COMPRESSED_DRIVERS = ["cli", "c", "mysqldb", "connector", "jdbc"]


@pytest.mark.parametrize("driver", COMPRESSED_DRIVERS)
def test_driver_scenario_compressed(drivers, target, driver):
    """The same scenario with DRV_COMPRESS=1 (--compress,
    MYSQL_OPT_COMPRESS, compress=1/True, useCompression=true)."""
    run_scenario(drivers, target, driver, compressed=True)


def run_scenario(drivers, target, driver, compressed):
    built = drivers[driver]
    if isinstance(built, Exception):
        pytest.fail(f"driver {driver} not available: {built}",
                    pytrace=False)
    argv, extra_env = built
    name, port = target
    table = f"drv_{driver}_{name}" + ("_z" if compressed else "")
    env = dict(os.environ, **(extra_env or {}))
    env.pop("DRV_COMPRESS", None)
    if compressed:
        env["DRV_COMPRESS"] = "1"
    proc = subprocess.run([*argv, st.HOST, str(port), st.APP_USER,
                           st.APP_PASSWORD, "test", table],
                          capture_output=True, text=True, env=env,
                          timeout=RUN_TIMEOUT)
    try:
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        pytest.fail(f"{driver} via {name}: no JSON report (exit "
                    f"{proc.returncode}):\n{proc.stdout[-2000:]}\n"
                    f"{proc.stderr[-2000:]}", pytrace=False)
    assert proc.returncode == 0 and "failed" not in report, (
        f"{driver} via {name}: check {report.get('failed')!r} failed: "
        f"{report.get('error')}\n{proc.stderr[-1000:]}")
    assert report["passed"] == CHECKS + EXTRA_CHECKS.get(driver, []), report


@pytest.mark.parametrize("charset,collation", [
    ("latin1", "latin1_swedish_ci"), ("utf8mb4", "utf8mb4_general_ci"),
    ("cp1251", "cp1251_general_ci")])
def test_handshake_charset(target, charset, collation):
    """The character set a client names in its handshake (PyMySQL 1.0
    sends no SET NAMES) is the backend session's, for a plain read and
    inside a transaction (through readwritesplit: a replica and the
    primary)."""
    name, port = target
    want = (charset, charset, charset, collation)
    sql = ("SELECT @@character_set_client, @@character_set_connection, "
           "@@character_set_results, @@collation_connection, @@server_id")
    with st.connect(port, database="test", charset=charset) as conn:
        with conn.cursor() as cur:
            cur.execute(sql)
            read = cur.fetchone()
            conn.begin()
            cur.execute(sql)
            in_trx = cur.fetchone()
            conn.commit()
    assert (read[:4], in_trx[:4]) == (want, want), name
    # where each ran: readwritesplit reads on a replica, the transaction
    # on the primary; the other targets are the primary itself
    read_ids = st.REPLICA_IDS if name == "readwritesplit" \
        else {st.PRIMARY_ID}
    assert read[4] in read_ids and in_trx[4] == st.PRIMARY_ID, \
        (name, read[4], in_trx[4])
