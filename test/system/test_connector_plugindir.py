# SPDX-License-Identifier: Apache-2.0
"""Global connector_plugindir: the directory libmariadb loads client
authentication plugins from, for every connection Sluice opens with it.

The monitor logs in as an account IDENTIFIED VIA ed25519, which needs
libmariadb's client_ed25519.so. One Sluice at a time (REST on 5809, a
basicmon over db1..db3, no listener):

  - connector_plugindir = an empty directory: no server is Running (REST
    state), the log names the plugin and that directory;
  - connector_plugindir = libmariadb's plugin directory (`mariadb_config
    --plugindir`): db1 Master, db2 and db3 Slave;
  - not set: the same (libmariadb's compiled-in default, as before);
  - a directory that does not exist, or a file: refused by --config-check
    and at start, naming FILE:LINE.
"""

import subprocess
import time
import uuid
from pathlib import Path

import pytest

import sluicetest as st
from proxy import CONFIG_REFUSED, MonitoredSluice, admin_rest, \
    global_section, run_sluice, server_sections
from test_ed25519 import ensure_ed25519

pytestmark = pytest.mark.sluice_only

ADMIN_PORT = st.port(5809)
ED_PW = "plugdir_pw"


def plugin_dir():
    out = subprocess.run(["mariadb_config", "--plugindir"], check=True,
                         capture_output=True, text=True).stdout.strip()
    assert (Path(out) / "client_ed25519.so").exists(), out
    return out


@pytest.fixture(scope="module")
def ed_user():
    ensure_ed25519()
    name = f"edmon_{uuid.uuid4().hex[:6]}"
    with st.root(st.PRIMARY_ID) as c, c.cursor() as cur:
        cur.execute(f"CREATE USER '{name}'@'%' IDENTIFIED VIA ed25519 "
                    f"USING PASSWORD('{ED_PW}')")
        cur.execute(f"GRANT REPLICATION CLIENT ON *.* TO '{name}'@'%'")
    st.wait_replicated()
    yield name
    with st.root(st.PRIMARY_ID) as c, c.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{name}'@'%'")
    st.wait_replicated()


def config(run_dir, user, plugindir):
    extra = "" if plugindir is None else \
        f"connector_plugindir={plugindir}\n"
    text = global_section(run_dir, ADMIN_PORT, extra=extra)
    text += server_sections((1, 2, 3))
    text += f"""
[Cluster-Monitor]
type=monitor
module=basicmon
servers=db1,db2,db3
user={user}
password={ED_PW}
monitor_interval=500ms
"""
    return text


def states():
    out = {}
    for sid in (1, 2, 3):
        status, doc = admin_rest(ADMIN_PORT, "GET", f"servers/db{sid}")
        assert status == 200, (status, doc)
        out[sid] = doc["data"]["attributes"]["state"]
    return out


def run(tmp_path, user, plugindir, check):
    s = MonitoredSluice(tmp_path, config(tmp_path, user, plugindir),
                        [ADMIN_PORT], ADMIN_PORT)
    try:
        check(s)
    finally:
        problems = s.daemon.stop()
    assert not problems, "\n".join(problems)


def healthy(s):
    st.wait_until(lambda: states() == {1: "Master, Running",
                                       2: "Slave, Running",
                                       3: "Slave, Running"}, 10,
                  what="db1 Master, db2 and db3 Slave")


def test_empty_dir_cannot_load_client_plugin(tmp_path, ed_user):
    empty = tmp_path / "noplugins"
    empty.mkdir()

    def check(s):
        st.wait_until(lambda: "client_ed25519" in s.log(), 10,
                      what="the plugin error in the log")
        time.sleep(1.5)     # three ticks
        assert all("Running" not in v for v in states().values()), states()
        line = [ln for ln in s.log().splitlines()
                if "client_ed25519" in ln][0]
        print(line)
        assert "cannot connect to server 'db" in line
        assert str(empty) in line
    run(tmp_path, ed_user, empty, check)


def test_plugin_dir_set(tmp_path, ed_user):
    run(tmp_path, ed_user, plugin_dir(), healthy)


def test_default_is_libmariadb_own(tmp_path, ed_user):
    run(tmp_path, ed_user, None, healthy)


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_bad_dir_refused(tmp_path, kind):
    bad = tmp_path / "nothere"
    if kind == "file":
        bad.write_text("")
    path = tmp_path / "sluice.cnf"
    path.write_text(config(tmp_path, st.SERVICE_USER, bad))
    line = path.read_text().splitlines().index(
        f"connector_plugindir={bad}") + 1
    why = "No such file or directory" if kind == "missing" \
        else "not a directory"
    for mode in ("check", "start"):
        status, out = run_sluice(mode, path)
        assert status == CONFIG_REFUSED, f"{mode}: {status}\n{out}"
        assert f"{path.name}:{line}:" in out, out
        assert "connector_plugindir" in out and why in out, out
