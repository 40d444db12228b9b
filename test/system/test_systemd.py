# SPDX-License-Identifier: Apache-2.0
"""Sluice under systemd (Type=notify, WatchdogSec), played by the test: we
create the notification socket (an AF_UNIX datagram socket, what systemd
passes in NOTIFY_SOCKET), start the built daemon with NOTIFY_SOCKET and
WATCHDOG_USEC, and read what it sends.

- READY=1 comes only when Sluice serves: at that moment a login through
  its listener already reaches a sandbox server (@@server_id).
- WATCHDOG=1 keeps coming while every worker turns its loop, and stops
  while one worker is stuck (a test router blocks it on a file) - that is
  what makes systemd restart a hung Sluice - then resumes.
- SIGHUP reopens the log (RELOADING=1 ... READY=1): after the log file is
  renamed, a new one appears and gets the next lines.
- SIGTERM sends STOPPING=1 and Sluice exits 0.
- A configuration that cannot start: no READY=1, a STATUS= line saying
  so, exit status 1.

Assertions rely on the order of the datagrams, never on timings."""

import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

import filterconf as fc
import sluicetest as st
from proxy import EVENT_MODEL, Daemon, stop_proxy, Proxy

pytestmark = pytest.mark.sluice_only

# event model -> (primary, replica, stall) ports
PORTS = {"pinned": (st.port(4900), st.port(4901), st.port(4902)),
         "shared": (st.port(4903), st.port(4904), st.port(4905))}
WATCHDOG_USEC = 1000000        # a check every 0.5 s
DEADLINE = 60                  # only to stop waiting


class NotifySocket:
    """The receiving end of sd_notify(): one message per datagram, each
    a list of KEY=VALUE lines. Every message read is kept in order."""

    def __init__(self):
        # sun_path holds 107 bytes: a short directory, not tmp_path
        self.dir = Path(tempfile.mkdtemp(prefix="sl-nfy-"))
        self.path = self.dir / "notify"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.messages = []

    def next(self, timeout=DEADLINE):
        self.sock.settimeout(max(timeout, 0.01))
        try:
            data = self.sock.recv(4096)
        except socket.timeout:
            raise AssertionError(f"no notification within {timeout:.0f}s; "
                                 f"so far: {self.messages[-10:]}") from None
        msg = data.decode().splitlines()
        self.messages.append(msg)
        return msg

    def wait_for(self, line, timeout=DEADLINE):
        """Read until a message holding `line` (or a line starting with
        it, for "STATUS=..."); returns the messages read before it and
        that message. AssertionError after timeout seconds."""
        deadline = time.monotonic() + timeout
        before = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {line!r} within {timeout}s; so "
                                     f"far: {self.messages[-10:]}")
            msg = self.next(left)
            if any(m == line or m.startswith(line) for m in msg):
                return before, msg
            before.append(msg)

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def stall_sections(port, stall_file):
    return fc.service("Stall-Service", port, router="testmod_stall",
                      extra=f"stall_file={stall_file}\n")


def ready_login(primary_port, replica_port):
    """Right after READY=1: log in through both services (no retry)."""
    with st.connect(primary_port) as conn:
        primary = st.server_id(conn)
    with st.connect(replica_port) as conn:
        replica = st.server_id(conn)
    return primary, replica


@pytest.fixture(scope="module", params=sorted(PORTS))
def sluice(request, tmp_path_factory):
    primary, replica, stall = PORTS[request.param]
    run_dir = tmp_path_factory.mktemp(f"systemd-{request.param}")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    modules = fc.module_dir(run_dir, [fc.test_module("testmod_stall")])
    cfg = run_dir / "sluice.cnf"
    text = fc.config_text(run_dir, primary, replica,
                          stall_sections(stall, run_dir / "stall"), modules)
    text = text.replace("threads=auto", "threads=2")
    cfg.write_text(text.replace(f"event_model={EVENT_MODEL}",
                                f"event_model={request.param}"))
    notify = NotifySocket()
    env = dict(st.sluice_env(), NOTIFY_SOCKET=str(notify.path),
               WATCHDOG_USEC=str(WATCHDOG_USEC))
    env.pop("WATCHDOG_PID", None)
    # "daemon": log to logdir/sluice.log, the file SIGHUP reopens
    daemon = Daemon(st.sluice_argv("daemon", cfg), run_dir / "proxy.log",
                    env)
    proxy = Proxy(daemon, primary, replica, None, run_dir)
    proxy.stall_port = stall
    try:
        before, ready = notify.wait_for("READY=1")
        try:
            proxy.ready_login = ready_login(primary, replica)
        except Exception as exc:  # noqa: BLE001 - the test reports it
            proxy.ready_login = exc
        proxy.ready_message = ready
        proxy.before_ready = before
        proxy.notify = notify
        proxy.log_file = run_dir / "log" / "sluice.log"
        proxy.stall_file = run_dir / "stall"
        yield proxy
    finally:
        problems = stop_proxy(proxy)
        notify.close()
    if problems:
        pytest.fail("proxy shutdown: " + "\n".join(problems), pytrace=False)


def test_ready_only_when_serving(sluice):
    assert not isinstance(sluice.ready_login, Exception), \
        f"login right after READY=1 failed: {sluice.ready_login!r}"
    primary, replica = sluice.ready_login
    assert primary == st.PRIMARY_ID
    assert replica in st.REPLICA_IDS
    assert any(m.startswith("STATUS=Running") for m in sluice.ready_message)
    assert not any("READY=1" in m for msg in sluice.before_ready
                   for m in msg)


def test_watchdog_keepalives_keep_coming(sluice):
    for _ in range(3):
        sluice.notify.wait_for("WATCHDOG=1")


def test_stuck_worker_stops_keepalives(sluice):
    """A statement on Stall-Service blocks its worker while the stall file
    exists: the checks that follow report the silent worker in STATUS=
    and send no WATCHDOG=1; once it is released, keep-alives resume."""
    sluice.stall_file.touch()
    result = {}

    def stalled_query():
        try:
            with st.connect(sluice.stall_port,
                            read_timeout=DEADLINE * 2) as conn:
                with conn.cursor() as cur:
                    cur.execute("DO 1")
            result["ok"] = True
        except Exception as exc:  # noqa: BLE001 - asserted below
            result["error"] = exc

    client = threading.Thread(target=stalled_query)
    client.start()
    try:
        sluice.notify.wait_for("STATUS=Worker ")
        # three more checks while the worker is stuck: no keep-alive
        for _ in range(3):
            msg = sluice.notify.next()
            assert "WATCHDOG=1" not in msg, sluice.notify.messages[-6:]
            assert any(m.startswith("STATUS=Worker ") for m in msg), msg
    finally:
        sluice.stall_file.unlink()
        client.join(DEADLINE)
    assert result.get("ok"), result
    _, msg = sluice.notify.wait_for("WATCHDOG=1")
    sluice.notify.wait_for("WATCHDOG=1")
    log = sluice.log_file.read_text()
    assert "does not answer: no WATCHDOG=1" in log
    assert "every worker answers again" in log
    # the other worker and the listeners kept serving all along
    with st.connect(sluice.replica_port) as conn:
        assert st.server_id(conn) in st.REPLICA_IDS


def test_sighup_reopens_the_log(sluice):
    rotated = sluice.log_file.with_name("sluice.log.1")
    sluice.log_file.rename(rotated)
    os.kill(sluice.pid, signal.SIGHUP)
    sluice.notify.wait_for("RELOADING=1")
    _, msg = sluice.notify.wait_for("READY=1")
    assert sluice.log_file.exists()
    assert "log reopened" in sluice.log_file.read_text()
    os.kill(sluice.pid, signal.SIGUSR1)
    st.wait_until(lambda: "SIGUSR1: live" in sluice.log_file.read_text(),
                  DEADLINE, what="the SIGUSR1 line in the new log")
    old = rotated.read_text()
    assert "SIGHUP: reopening the log" in old
    assert "SIGUSR1: live" not in old


def test_sigterm_sends_stopping_and_exits_0(sluice):
    os.kill(sluice.pid, signal.SIGTERM)
    _, msg = sluice.notify.wait_for("STOPPING=1")
    assert "STATUS=Shutting down" in msg
    assert sluice.daemon.proc.wait(timeout=DEADLINE) == 0


@pytest.mark.parametrize("problem", ["unknown router", "port in use"])
def test_failed_start_is_not_ready(tmp_path, problem):
    """No READY=1 for a Sluice that cannot serve: the configuration is
    refused (an unknown router) or a listener cannot bind."""
    port = st.port(4906)
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir()
    sections = fc.service("Broken-Service", port)
    if problem == "unknown router":
        sections = sections.replace("router=readconnroute",
                                    "router=no_such_router")
    cfg = tmp_path / "sluice.cnf"
    cfg.write_text(fc.config_text(tmp_path, st.port(4907), st.port(4908),
                                  sections))
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if problem == "port in use":
        squatter.bind((st.HOST, port))
        squatter.listen()
    notify = NotifySocket()
    env = dict(st.sluice_env(), NOTIFY_SOCKET=str(notify.path))
    daemon = Daemon(st.sluice_argv("daemon", cfg), tmp_path / "proxy.log",
                    env)
    try:
        status = daemon.proc.wait(timeout=DEADLINE)
        notify.sock.setblocking(False)
        while True:
            try:
                notify.messages.append(notify.sock.recv(4096).decode()
                                       .splitlines())
            except BlockingIOError:
                break
    finally:
        daemon.stop(check_exit=False)
        notify.close()
        squatter.close()
    assert status == 1, daemon.log_tail()
    lines = [m for msg in notify.messages for m in msg]
    assert "READY=1" not in lines, notify.messages
    assert "STATUS=Startup failed, see the log" in lines, notify.messages
