# SPDX-License-Identifier: Apache-2.0
"""The Debian package end to end: build the .debs with CPack from the
suite's build tree, check them with lintian, install sluice_*.deb with
`apt-get install ./sluice_*.deb` into a pristine Debian 12 root
(scripts/debroot), and start the installed /usr/bin/sluice the way the
systemd unit does -- the unit's own ExecStart, as its User=, with a
NOTIFY_SOCKET this test listens on -- against the sandbox cluster. It must
report READY=1 once it accepts connections, answer through its listener
from the primary (@@server_id), and report STOPPING=1 and exit 0 on
SIGTERM. systemd itself does not run in a chroot; everything the unit
would do is done here by hand and named.

Needs root, dpkg-deb, lintian and mmdebstrap (scripts/test installs them);
skipped with the reason where they are missing, and for a sanitizer build
(packages are made from the release build)."""

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

import sluicetest as st

pytestmark = [pytest.mark.sluice_only, pytest.mark.release]

DEBROOT = st.ROOT / "scripts" / "debroot"
LISTEN = st.port(4950)
ADMIN = st.port(4951)
# lintian warnings we accept, each with its reason (docs/packaging.md).
ACCEPTED_WARNINGS = {}


def _why_skip():
    if os.geteuid() != 0:
        return "needs root (chroot, mount)"
    for tool in ("dpkg-deb", "lintian", "dpkg-shlibdeps"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if shutil.which("mmdebstrap") is None and not Path(
            "/var/cache/sluice-debroot/bookworm.tar").exists():
        return "mmdebstrap is not installed"
    cache = st.BUILD_DIR / "CMakeCache.txt"
    if cache.exists() and "SLUICE_SANITIZE:BOOL=ON" in cache.read_text():
        return "sanitizer build: packages come from the release build"
    return None


if _why_skip():
    pytestmark = pytestmark + [pytest.mark.skip(reason=_why_skip())]


def _run(argv, timeout=600, **kw):
    proc = subprocess.run(argv, capture_output=True, text=True,
                          timeout=timeout, **kw)
    assert proc.returncode == 0, (f"{argv} failed ({proc.returncode}):\n"
                                  f"{proc.stdout[-3000:]}\n"
                                  f"{proc.stderr[-3000:]}")
    return proc.stdout


@pytest.fixture(scope="module")
def debs():
    for old in st.BUILD_DIR.glob("sluice*.deb"):
        old.unlink()
    _run(["cmake", "--build", str(st.BUILD_DIR), "--target", "package"])
    main = sorted(st.BUILD_DIR.glob("sluice_*_amd64.deb"))
    dev = sorted(st.BUILD_DIR.glob("sluice-dev_*_amd64.deb"))
    assert len(main) == 1 and len(dev) == 1, (main, dev)
    return main[0], dev[0]


class Root:
    """A pristine Debian 12 root (scripts/debroot), destroyed at the end."""

    def __init__(self, path):
        self.path = path

    def run(self, command, timeout=900, check=True):
        proc = subprocess.run([str(DEBROOT), "run", str(self.path), command],
                              capture_output=True, text=True,
                              timeout=timeout)
        if check:
            assert proc.returncode == 0, (
                f"in the root: {command} ({proc.returncode}):\n"
                f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc


@pytest.fixture(scope="module")
def installed(debs, tmp_path_factory):
    path = Path(tempfile_dir(tmp_path_factory)) / "root"
    _run([str(DEBROOT), "create", str(path)], timeout=900)
    root = Root(path)
    try:
        shutil.copy(debs[0], path / "tmp")
        before = root.run("dpkg-query -W -f='${Package}\\n'").stdout.split()
        assert "mariadb-server" not in before and "libmariadb3" not in before
        root.run("apt-get update -q && DEBIAN_FRONTEND=noninteractive "
                 f"apt-get install -y -q /tmp/{debs[0].name}")
        yield root
    finally:
        subprocess.run([str(DEBROOT), "destroy", str(path)], timeout=300)


def tempfile_dir(tmp_path_factory):
    # The root holds a whole Debian system: keep it out of pytest's
    # numbered temp dirs (which are kept after the run) and under /tmp.
    base = tmp_path_factory.getbasetemp()
    d = base / "pkgroot"
    d.mkdir(exist_ok=True)
    return d


def test_lintian_reports_no_errors(debs):
    proc = subprocess.run(["lintian", "--pedantic", "--allow-root",
                           str(debs[0]), str(debs[1])],
                          capture_output=True, text=True, timeout=600)
    tags = [line for line in proc.stdout.splitlines()
            if line[:2] in ("E:", "W:")]
    print(proc.stdout)
    errors = [t for t in tags if t.startswith("E:")]
    assert errors == [], "\n".join(errors)
    warnings = {t.split()[2] for t in tags if t.startswith("W:")}
    assert warnings <= set(ACCEPTED_WARNINGS), "\n".join(tags)


def test_package_contents(debs):
    listing = _run(["dpkg-deb", "-c", str(debs[0])])
    names = {line.split()[-1].lstrip(".") for line in listing.splitlines()
             if not line.startswith("l")}
    links = {line.split()[-3].lstrip(".") for line in listing.splitlines()
             if line.startswith("l")}
    for path in ("/usr/bin/sluice", "/usr/bin/maxctrl", "/etc/sluice.cnf",
                 "/usr/bin/sluice-keys", "/usr/bin/sluice-passwd",
                 "/usr/share/man/man1/sluice-keys.1.gz",
                 "/usr/share/man/man1/sluice-passwd.1.gz",
                 "/usr/lib/systemd/system/sluice.service",
                 "/etc/logrotate.d/sluice",
                 "/usr/share/man/man8/sluice.8.gz",
                 "/usr/share/man/man1/maxctrl.1.gz",
                 "/usr/share/doc/sluice/copyright"):
        assert path in names, f"{path} not in the package"
    modules = {Path(n).name for n in names
               if "/usr/lib/x86_64-linux-gnu/sluice/" in n}
    for mod in ("libmariadbprotocol.so", "libreadwritesplit.so",
                "libreadconnroute.so", "libmariadbmon.so", "libqlafilter.so"):
        assert mod in modules, modules
    assert "/usr/lib/x86_64-linux-gnu/sluice/libsluice.so.0" in links
    control = _run(["dpkg-deb", "-f", str(debs[0]), "Depends"])
    # computed from the shared libraries (dpkg-shlibdeps)
    for lib in ("libmariadb3", "libssl3", "libjansson4", "libmicrohttpd12",
                "libpcre2-8-0", "libsystemd0", "libsodium23", "libpam0g"):
        assert lib in control, control
    conffiles = _run(["dpkg-deb", "-I", str(debs[0]), "conffiles"])
    assert set(conffiles.split()) == {"/etc/sluice.cnf",
                                      "/etc/logrotate.d/sluice"}
    dev = _run(["dpkg-deb", "-c", str(debs[1])])
    assert "./usr/include/sluice/filter.h" in dev
    assert "pkgconfig/sluice.pc" in dev
    assert "sluice/libsluice.so -> " in dev


def test_installed_layout(installed):
    root = installed
    out = root.run("sluice --version").stdout
    assert out.startswith("sluice "), out
    assert "module ABI" in out, out
    assert root.run("getent passwd sluice").stdout.startswith("sluice:")
    owners = root.run("stat -c '%n %U %a' /var/lib/sluice /var/log/sluice "
                      "/var/cache/sluice").stdout.split("\n")
    for line in filter(None, owners):
        _, owner, mode = line.split()
        assert owner == "sluice" and mode == "750", line
    # the shipped sample is valid as it is (checked as the service user)
    root.run("runuser -u sluice -- sluice --config-check "
             "--config /etc/sluice.cnf")


def _exec_start(root):
    unit = (root.path / "usr/lib/systemd/system/sluice.service").read_text()
    fields = dict(line.split("=", 1) for line in unit.splitlines()
                  if "=" in line and not line.startswith("#"))
    return fields["ExecStart"], fields.get("User", "root")


def _configure(root):
    """Point the installed /etc/sluice.cnf at the sandbox, as an
    administrator would edit it: the primary's port, the service
    account, the test's listener and admin ports."""
    cnf = root.path / "etc/sluice.cnf"
    text = cnf.read_text()
    repl = {"port=3306": f"port={st.SERVERS[st.PRIMARY_ID]}",
            "port=4006": f"port={LISTEN}",
            "admin_port=8989": f"admin_port={ADMIN}",
            "password=change-me": f"password={st.SERVICE_PASSWORD}",
            "user=sluice": f"user={st.SERVICE_USER}"}
    for old, new in repl.items():
        assert old in text, old
        text = text.replace(old, new)
    cnf.write_text(text)


def _notifications(sock, until, deadline):
    got = []
    while time.monotonic() < deadline:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            break
        got.extend(msg.split("\n"))
        if until in got:
            break
    return got


def test_installed_daemon_runs_as_the_unit_does(installed, tmp_path):
    root = installed
    exec_start, user = _exec_start(root)
    assert exec_start.split()[0] == "/usr/bin/sluice", exec_start
    assert user == "sluice"
    _configure(root)
    # What systemd would do: RuntimeDirectory=sluice, a notify socket.
    root.run("install -d -o sluice -g sluice -m 0755 /run/sluice")
    sock_path = root.path / "run" / "sluice-test-notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    os.chmod(sock_path, 0o777)
    argv = [str(DEBROOT), "run", str(root.path),
            "exec env NOTIFY_SOCKET=/run/sluice-test-notify "
            f"setpriv --reuid={user} --regid={user} --init-groups "
            f"{exec_start}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        got = _notifications(sock, "READY=1", time.monotonic() + 60)
        assert "READY=1" in got, (got, _log(root))
        # READY means the listener already accepts and routes
        with st.connect(LISTEN) as conn:
            assert st.server_id(conn) == st.PRIMARY_ID
            assert st.scalar(conn, "SELECT CURRENT_USER()").startswith(
                st.APP_USER + "@")
        os.kill(_daemon_pid(root), signal.SIGTERM)
        got = _notifications(sock, "STOPPING=1", time.monotonic() + 30)
        assert "STOPPING=1" in got, got
        assert proc.wait(timeout=60) == 0, _log(root)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        sock.close()
    log = _log(root)
    assert "started" in log and "Sluice stopped" in log, log


def _daemon_pid(root):
    """The PID of the sluice process running inside the root."""
    target = str(root.path.resolve())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (os.readlink(proc / "root") == target and
                    (proc / "comm").read_text().strip() == "sluice"):
                return int(proc.name)
        except OSError:
            continue
    raise AssertionError("no sluice process inside the root")


def _log(root):
    path = root.path / "var/log/sluice/sluice.log"
    return path.read_text() if path.exists() else "(no log)"
