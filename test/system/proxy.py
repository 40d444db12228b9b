# SPDX-License-Identifier: Apache-2.0
"""Proxies for the system tests: start Sluice (or the HAProxy stand-in of
SLUICE_TEST_PROXY=haproxy) on given ports against the sandbox, wait until
it routes, and stop it by PID (SIGTERM, then SIGKILL after a timeout).

A test module holds one proxy for all its tests:

    @pytest.fixture(scope="module")
    def proxy(tmp_path_factory):
        yield from running_proxy(tmp_path_factory, st.port(4110), st.port(4111))

Sluice must exit by itself with status 0 on SIGTERM and leave no
sanitizer report in its log; otherwise the module's last test errors.
A daemon that exits on its own before it is stopped, with any status but
0, is reported too. run_sluice (bad configs, `sluice-exec check`) fails
the test itself on a sanitizer report, and callers compare the status
with CONFIG_REFUSED, never with "non-zero": an ASan abort exits 1 as well,
so only the output tells the two apart.
"""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import sluicetest as st

PROXY = os.environ.get("SLUICE_TEST_PROXY", "sluice")
PIDDIR = os.environ.get("SLUICE_TEST_PIDDIR")
START_TIMEOUT = 30
STOP_TIMEOUT = 20
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                     "runtime error:", "WARNING: ThreadSanitizer",
                     "ERROR: ThreadSanitizer")
# The event model of every Sluice a test starts without asking for one
# (scripts/test --tsan runs the suite once with each).
EVENT_MODEL = os.environ.get("SLUICE_TEST_EVENT_MODEL", "pinned")
# The exit status of `sluice` for a configuration it refuses, in both
# modes (server/core/main.c: config_check() and run(); docs/configuration.md).
CONFIG_REFUSED = 1
# The admin account the sandbox's configurations create (admin:mariadb).
ADMIN_AUTH = "Basic " + base64.b64encode(b"admin:mariadb").decode()


def sanitizer_reports(text):
    """The sanitizer markers found in a daemon's output (empty if none)."""
    return [m for m in SANITIZER_MARKERS if m in text]


def sanitizer_excerpt(text, lines=120):
    """The first sanitizer report in a daemon's output (its first `lines`
    lines): the log's tail alone usually ends after it."""
    at = min((text.find(m) for m in SANITIZER_MARKERS if m in text),
             default=-1)
    if at < 0:
        return ""
    start = text.rfind("\n", 0, at) + 1
    return "\n".join(text[start:].splitlines()[:lines])


def _register_pid(pid):
    if PIDDIR:
        # a test that rebuilds the sandbox (start --fresh) removes the dir
        Path(PIDDIR).mkdir(parents=True, exist_ok=True)
        Path(PIDDIR, str(pid)).touch()


def _unregister_pid(pid):
    if PIDDIR:
        Path(PIDDIR, str(pid)).unlink(missing_ok=True)


def _port_open(port):
    try:
        with socket.create_connection((st.HOST, port), timeout=1):
            return True
    except OSError:
        return False


class Daemon:
    """A process we started, with its log; stopped by PID."""

    def __init__(self, argv, log_path, env=None):
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=self._log,
                                     stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        self.pid = self.proc.pid
        _register_pid(self.pid)

    def alive(self):
        return self.proc.poll() is None

    def log_tail(self, lines=40):
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_ports(self, ports, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        pending = list(ports)
        while pending and time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(
                    f"proxy exited with {self.proc.returncode} during "
                    f"start-up; log {self.log_path}:\n{self.log_tail()}")
            pending = [p for p in pending if not _port_open(p)]
            if pending:
                time.sleep(0.1)
        if pending:
            raise AssertionError(f"ports {pending} not listening after "
                                 f"{timeout}s; log:\n{self.log_tail()}")

    def stop(self, check_exit=True):
        """SIGTERM, wait, SIGKILL. Returns a list of problems found."""
        problems = []
        if check_exit and not self.alive() and self.proc.returncode != 0:
            # died by itself (crash, sanitizer abort, fatal error)
            problems.append(f"pid {self.pid} had already exited with "
                            f"status {self.proc.returncode}")
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                problems.append(f"pid {self.pid} ignored SIGTERM for "
                                f"{STOP_TIMEOUT}s; killed")
                self.proc.kill()
                self.proc.wait(timeout=10)
            if check_exit and self.proc.returncode != 0 and not problems:
                problems.append(f"exit status {self.proc.returncode} "
                                "after SIGTERM")
        _unregister_pid(self.pid)
        self._log.close()
        log = self.log_path.read_text(errors="replace")
        for marker in sanitizer_reports(log):
            problems.append(f"sanitizer report ({marker})")
        if problems:
            problems.append(f"log {self.log_path}:\n{self.log_tail(60)}")
        excerpt = sanitizer_excerpt(log)
        if excerpt:
            problems.append(f"first sanitizer report:\n{excerpt}")
        return problems


class Proxy:
    """A running proxy: Primary-Service on primary_port, Replica-Service
    on replica_port and (optionally) on the unix socket `socket`."""

    def __init__(self, daemon, primary_port, replica_port, sock, run_dir):
        self.daemon = daemon
        self.primary_port = primary_port
        self.replica_port = replica_port
        self.socket = sock
        self.run_dir = run_dir

    @property
    def pid(self):
        return self.daemon.pid


def global_section(run_dir, admin_port, threads=2, extra=""):
    """The [maxscale] section of a test's own config: every directory
    below run_dir, the REST API on admin_port, the event model of
    SLUICE_TEST_EVENT_MODEL (unless `extra` sets one), then the `extra`
    lines."""
    model = "" if "event_model=" in extra else f"event_model={EVENT_MODEL}\n"
    text = f"""\
[maxscale]
threads={threads}
{model}module_dir={st.MODULE_DIR}
logdir={run_dir}/log
datadir={run_dir}/data
persistdir={run_dir}/persist
piddir={run_dir}
admin_host={st.HOST}
admin_port={admin_port}
"""
    return text + (extra.strip() + "\n" if extra.strip() else "")


def server_sections(order=(1, 2, 3), more=()):
    """[dbN] sections for the sandbox servers in `order`, then one for
    each (name, port) of `more`."""
    pairs = [(f"db{sid}", st.SERVERS[sid]) for sid in order] + list(more)
    return "".join(f"""
[{name}]
type=server
address={st.HOST}
port={port}
""" for name, port in pairs)


def mariadbmon_section(servers, interval="500ms", params="",
                       name="Cluster-Monitor"):
    """A mariadbmon monitor over `servers` with the sandbox's monitor
    account and replication account, then the `params` lines."""
    return f"""
[{name}]
type=monitor
module=mariadbmon
servers={servers}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
monitor_interval={interval}
replication_user={st.REPL_USER}
replication_password={st.REPL_PASSWORD}
""" + (params.strip() + "\n" if params.strip() else "")


def admin_rest(admin_port, method, path, body=None, timeout=30):
    """METHOD /v1/PATH as admin on the REST API at admin_port, with `body`
    as JSON if given: (HTTP status, the JSON document or None)."""
    url = f"http://{st.HOST}:{admin_port}/v1/{path.lstrip('/')}"
    data = (json.dumps(body).encode() if body is not None
            else b"" if method != "GET" else None)
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", ADMIN_AUTH)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text else None


def monitor_command(admin_port, cmd, *args, timeout=120):
    """POST /v1/maxscale/modules/mariadbmon/CMD?ARG&ARG as admin on the
    REST API at admin_port: (HTTP status, the JSON document or None)."""
    query = "&".join(urllib.parse.quote(a, safe="") for a in args)
    return admin_rest(admin_port, "POST", f"maxscale/modules/mariadbmon/{cmd}"
                      + (f"?{query}" if query else ""), timeout=timeout)


class MonitoredSluice:
    """The one Sluice of a test module that drives mariadbmon: `text`
    written to RUN_DIR/sluice.cnf and started (log in RUN_DIR/proxy.log),
    ready once `ports` accept; log() reads its log, command() POSTs a
    mariadbmon command through the REST API on `admin_port`."""

    def __init__(self, run_dir, text, ports, admin_port):
        self.run_dir = Path(run_dir)
        self.admin_port = admin_port
        for sub in ("log", "data", "persist"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        cfg = self.run_dir / "sluice.cnf"
        cfg.write_text(text)
        self.daemon = Daemon(st.sluice_argv("start", cfg),
                             self.run_dir / "proxy.log", st.sluice_env())
        self.daemon.wait_ports(list(ports))

    def log(self):
        return self.daemon.log_path.read_text(errors="replace")

    def command(self, cmd, *args, timeout=120):
        """POST a mariadbmon command: (HTTP status, JSON document)."""
        return monitor_command(self.admin_port, cmd, *args, timeout=timeout)


def rw_service(name, port, params="", servers=None):
    """A readwritesplit service NAME over `servers` (default: the three
    sandbox servers) with extra `params` lines, and its TCP listener
    NAME-Listener on `port`."""
    servers = servers or ",".join(f"db{sid}" for sid in st.SERVERS)
    return f"""
[{name}]
type=service
router=readwritesplit
servers={servers}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
{params}

[{name}-Listener]
type=listener
service={name}
protocol=MariaDBClient
address={st.HOST}
port={port}
"""


def readconnroute_services(servers, primary_port, replica_port):
    """Primary-Service (router_options=master) and Replica-Service (slave)
    over `servers`, each with a TCP listener."""
    text = ""
    for name, opt, port in (("Primary", "master", primary_port),
                            ("Replica", "slave", replica_port)):
        text += f"""
[{name}-Service]
type=service
router=readconnroute
router_options={opt}
servers={servers}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
# as the sandbox servers (test_data sends 20 MiB values)
max_allowed_packet=1Gi

[{name}-Listener]
type=listener
service={name}-Service
protocol=MariaDBClient
address={st.HOST}
port={port}
"""
    return text


def start_with_admin(run_dir, text, primary_port, replica_port, admin_port,
                     replica_ids=None):
    """Start Sluice with config `text` (whose admin API listens on
    admin_port) and wait until its ports answer and a login works (the
    replica port reaching one of replica_ids, default the replicas)."""
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(text)
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                    st.sluice_env())
    prx = Proxy(daemon, primary_port, replica_port, None, run_dir)
    try:
        daemon.wait_ports([primary_port, replica_port, admin_port])
        _wait_ready(prx, replica_ids)
    except BaseException:
        stop_proxy(prx)
        raise
    return prx


def sluice_config(run_dir, primary_port, replica_port, sock=None,
                  event_model=None, threads="auto", extra=""):
    """The text of a Sluice config for the sandbox (like etc/sluice.cnf)."""
    event_model = event_model or EVENT_MODEL
    text = f"""\
[maxscale]
threads={threads}
event_model={event_model}
module_dir={st.MODULE_DIR}
logdir={run_dir}/log
datadir={run_dir}/data
persistdir={run_dir}/persist
piddir={run_dir}
admin_enabled=false
{extra}
"""
    for sid, port in st.SERVERS.items():
        text += f"""
[db{sid}]
type=server
address={st.HOST}
port={port}
"""
    servers = ",".join(f"db{sid}" for sid in st.SERVERS)
    text += f"""
[Cluster-Monitor]
type=monitor
module=basicmon
servers={servers}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
monitor_interval=1000ms
"""
    text += readconnroute_services(servers, primary_port, replica_port)
    if sock:
        text += f"""
[Replica-Socket-Listener]
type=listener
service=Replica-Service
protocol=MariaDBClient
socket={sock}
"""
    return text


def haproxy_config(primary_port, replica_port, sock=None, threads=2):
    """An HAProxy stand-in with the same two services (self-check mode)."""
    bind_sock = f"    bind {sock} mode 666\n" if sock else ""
    return f"""\
global
    nbthread {threads}
    maxconn 4000
defaults
    mode tcp
    timeout connect 5s
    timeout client 10m
    timeout server 10m
listen primary
    bind {st.HOST}:{primary_port}
    server db1 {st.HOST}:{st.SERVERS[1]}
listen replica
    bind {st.HOST}:{replica_port}
{bind_sock}    balance leastconn
    server db2 {st.HOST}:{st.SERVERS[2]}
    server db3 {st.HOST}:{st.SERVERS[3]}
"""


def _wait_ready(proxy, replica_ids=None):
    """Wait until logins work and each service reaches the right kind of
    server (the monitor needs a tick to find the primary): the replica
    port one of replica_ids (default: the replicas)."""
    quick = {"connect_timeout": 5, "read_timeout": 5, "write_timeout": 5}
    replica_ids = replica_ids or st.REPLICA_IDS

    def ready():
        with st.connect(proxy.primary_port, **quick) as conn:
            if st.server_id(conn) != st.PRIMARY_ID:
                return False
        with st.connect(proxy.replica_port, **quick) as conn:
            return st.server_id(conn) in replica_ids
    try:
        st.wait_until(ready, START_TIMEOUT, interval=0.2,
                      what="the proxy's services to route")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nlog:\n{proxy.daemon.log_tail()}")


def start_proxy(run_dir, primary_port, replica_port, with_socket=False,
                event_model=None, threads="auto", extra=""):
    """Start Sluice (or the HAProxy stand-in) and wait until it routes."""
    run_dir = Path(run_dir)
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    # Unix socket paths are limited to 107 bytes: keep them short.
    sock = (Path(tempfile.mkdtemp(prefix="sl-")) / "s.sock"
            if with_socket else None)
    if PROXY == "haproxy":
        cfg = run_dir / "haproxy.cfg"
        cfg.write_text(haproxy_config(primary_port, replica_port, sock))
        argv = ["haproxy", "-db", "-f", str(cfg)]
        env = None
    else:
        if not st.SLUICE_BIN.exists():
            raise AssertionError(f"{st.SLUICE_BIN} not built")
        cfg = run_dir / "sluice.cnf"
        cfg.write_text(sluice_config(run_dir, primary_port, replica_port,
                                     sock, event_model, threads, extra))
        argv = st.sluice_argv("start", cfg)
        env = st.sluice_env()
    for port in (primary_port, replica_port):
        assert not _port_open(port), f"port {port} already in use"
    daemon = Daemon(argv, run_dir / "proxy.log", env)
    proxy = Proxy(daemon, primary_port, replica_port, sock, run_dir)
    try:
        daemon.wait_ports([primary_port, replica_port])
        if sock is not None:
            st.wait_until(sock.exists, 10, what=f"socket {sock}")
        _wait_ready(proxy)
    except BaseException:
        stop_proxy(proxy)
        raise
    return proxy


def stop_proxy(proxy):
    problems = proxy.daemon.stop(check_exit=(PROXY == "sluice"))
    if proxy.socket is not None:
        shutil.rmtree(proxy.socket.parent, ignore_errors=True)
    return problems


def serve(proxy):
    """Generator for a module fixture around a started proxy: yield it,
    stop it and fail the module if it did not shut down cleanly."""
    try:
        yield proxy
    finally:
        problems = stop_proxy(proxy)
    if problems:
        pytest.fail("proxy shutdown: " + "\n".join(problems), pytrace=False)


def start_text(run_dir, text, primary_port, replica_port, ports,
               ready=None):
    """Sluice on the configuration `text` (RUN_DIR/sluice.cnf, log in
    RUN_DIR/proxy.log), once `ports` listen and `ready()` returned (by
    default: _wait_ready): the Proxy, stopped again if that fails."""
    cfg = Path(run_dir) / "sluice.cnf"
    cfg.write_text(text)
    daemon = Daemon(st.sluice_argv("start", cfg),
                    Path(run_dir) / "proxy.log", st.sluice_env())
    proxy = Proxy(daemon, primary_port, replica_port, None, run_dir)
    try:
        daemon.wait_ports(list(ports))
        if ready is None:
            _wait_ready(proxy)
        else:
            ready()
    except BaseException:
        stop_proxy(proxy)
        raise
    return proxy


def running_proxy(tmp_path_factory, primary_port, replica_port, **kw):
    """Generator for a module fixture: start a proxy, yield it, stop it and
    fail the module if it did not shut down cleanly."""
    run_dir = tmp_path_factory.mktemp(f"proxy-{primary_port}")
    yield from serve(start_proxy(run_dir, primary_port, replica_port, **kw))


def run_sluice(argv_mode, config, timeout=20):
    """Run `sluice-exec MODE CONFIG` to completion (for bad configs):
    returns (exit status, stdout+stderr). A daemon that keeps running past
    timeout is killed and reported as status None. A sanitizer report in
    the output fails the test here, whatever the status: ASan exits 1 like
    a refused config (CONFIG_REFUSED), so the status alone cannot tell."""
    proc = subprocess.Popen(st.sluice_argv(argv_mode, config),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=st.sluice_env(), start_new_session=True)
    _register_pid(proc.pid)
    try:
        out, _ = proc.communicate(timeout=timeout)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
        status = None
    finally:
        _unregister_pid(proc.pid)
    found = sanitizer_reports(out)
    if found:
        pytest.fail(f"sluice {argv_mode} {config}: sanitizer report "
                    f"({', '.join(found)}), exit status {status}:\n"
                    f"{out[-6000:]}", pytrace=False)
    return status, out
