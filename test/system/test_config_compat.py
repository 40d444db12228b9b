# SPDX-License-Identifier: Apache-2.0
"""A maxscale.cnf means what it says (issue 18, configuration half).

- Every MaxScale parameter Sluice refuses for safety fails the load with
  FILE:LINE naming the parameter and exit status CONFIG_REFUSED, in
  --config-check and at start-up; set to the value Sluice implements (its
  default) it loads.
- Every parameter accepted and ignored (the IGN rows of the core's tables
  and the modules', read from the sources so none is missed) gives a
  warning with its line and reason, and --config-check lists it in its
  summary.
- Module aliases (mysqlmon) and authenticator= as MaxScale resolves them;
  GSSAPIAuth & co refused.
- <config>.d/, type=include + @include=, $VARIABLEs and a password
  encrypted with sluice-passwd: a real login through Sluice to the sandbox,
  checked by @@server_id.
- Runtime directories are created, or start-up stops naming the path.
"""

import json
import re
import subprocess
import time
import urllib.request
import base64

import pytest

import proxy as px
import sluicetest as st

PORT = st.port(5050)
PORT2 = st.port(5051)
ADMIN = st.port(5052)
PORT3 = st.port(5053)
KEYS = st.BUILD_DIR / "bin" / "sluice-keys"
PASSWD = st.BUILD_DIR / "bin" / "sluice-passwd"
SRC = st.ROOT / "server"


def servers_text():
    text = ""
    for sid, port in st.SERVERS.items():
        text += f"""
[db{sid}]
type=server
address={st.HOST}
port={port}
"""
    return text


def base_config(run_dir, extra_global="", extra=""):
    return f"""[maxscale]
threads=1
module_dir={st.MODULE_DIR}
logdir={run_dir}/log
datadir={run_dir}/data
persistdir={run_dir}/persist
admin_enabled=false
{extra_global}
{servers_text()}
[Mon]
type=monitor
module=mariadbmon
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
monitor_interval=1000ms

[RW]
type=service
router=readwritesplit
servers=db1,db2,db3
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[RW-Listener]
type=listener
service=RW
address={st.HOST}
port={PORT}

[QLA]
type=filter
module=qlafilter
filebase={run_dir}/qla

[Tee]
type=filter
module=tee
target=RW

[Cache]
type=filter
module=cache
{extra}
"""


def line_of(text, needle):
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip() == needle:
            return i
    raise AssertionError(f"{needle!r} not in config")


def check(tmp_path, text, name="t.cnf"):
    cfg = tmp_path / name
    cfg.write_text(text)
    status, out = px.run_sluice("check", cfg)
    return cfg, status, out


def add_to_section(text, section, line):
    head = f"[{section}]\n"
    assert head in text
    return text.replace(head, head + line + "\n", 1)


# (section, parameter=value) refused for safety; each section is one of
# base_config's (maxscale, db1, Mon, RW, RW-Listener).
REFUSED = [
    ("maxscale", "sql_mode=oracle"),
    ("maxscale", "load_persisted_configs=false"),
    ("maxscale", "skip_name_resolve=true"),
    ("maxscale", "admin_pam_readwrite_service=sluice"),
    ("RW", "rank=secondary"),
    ("RW", "idle_session_pool_time=1s"),
    ("RW", "auth_all_servers=true"),
    ("RW", "session_track_trx_state=true"),
    ("RW-Listener", "authenticator_options=skip_authentication=true"),
    ("QLA", "use_canonical_form=true"),
    ("Tee", "sync=true"),
]


@pytest.mark.parametrize("section,setting", REFUSED,
                         ids=[s for _, s in REFUSED])
def test_safety_parameter_refused(tmp_path, section, setting):
    text = add_to_section(base_config(tmp_path), section, setting)
    cfg, status, out = check(tmp_path, text)
    name = setting.split("=")[0]
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, setting)}: parameter '{name}' in "
            in out), out
    assert "is not supported by Sluice: " in out, out


def test_refused_at_startup_too(tmp_path):
    text = add_to_section(base_config(tmp_path), "maxscale",
                          "sql_mode=oracle")
    cfg = tmp_path / "start.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("start", cfg)
    assert status == px.CONFIG_REFUSED, out
    assert f"{cfg}:{line_of(text, 'sql_mode=oracle')}: parameter " \
        "'sql_mode'" in out, out


@pytest.mark.parametrize("section,setting", [
    ("maxscale", "sql_mode=default"), ("RW", "rank=primary"),
    ("db1", "proxy_protocol=no")])
def test_refused_parameter_at_sluices_value_loads(tmp_path, section,
                                                  setting):
    """Set to what Sluice does, a refused name is harmless: it loads, with
    no warning."""
    text = add_to_section(base_config(tmp_path), section, setting)
    _, status, out = check(tmp_path, text)
    assert status == 0, out
    assert "warning" not in out, out


def ignored_rows():
    """(table, name, default) of every SL_PARAM_F_IGNORED row: the core's
    tables in config_spec.c (P(...) rows with IGN) and the modules'."""
    rows = []
    rws_src = (SRC / "modules/routing/readwritesplit/"
               "readwritesplit.c").read_text()
    # names readwritesplit implements itself win over the core's rows
    rws_own = {m.group(1) for m in re.finditer(
        r'\{"(\w+)", SL_PARAM_\w+, (?:"[^"]*"|NULL),\s*([A-Z_ |0]+),',
        rws_src) if "IGNORED" not in m.group(2)}
    # and so do the names mariadbmon implements (script, events, ...)
    mmon_own = {m.group(1) for m in re.finditer(
        r'\{"(\w+)", SL_PARAM_\w+, (?:"[^"]*"|NULL),\s*([A-Z_ |0]+),',
        (SRC / "modules/monitor/mariadbmon/mariadbmon.c").read_text())
        if "IGNORED" not in m.group(2)}
    core = (SRC / "core" / "config_spec.c").read_text()
    tables = {"global_specs": "maxscale", "server_specs": "db1",
              "service_specs": "RW", "listener_specs": "RW-Listener",
              "monitor_specs": "Mon"}
    for table, section in tables.items():
        body = core.split(f"sl_param_spec {table}[] = {{", 1)[1]
        body = body.split("SL_PARAM_END", 1)[0]
        for m in re.finditer(r'P\("(\w+)", SL_PARAM_(\w+), ("[^"]*"|NULL),'
                             r'\s*([A-Z_ |]+),', body):
            if "IGN" in m.group(4).split(" | ") and not (
                    section == "RW" and m.group(1) in rws_own) and not (
                    section == "Mon" and m.group(1) in mmon_own):
                rows.append((section, m.group(1), m.group(2),
                             None if m.group(3) == "NULL"
                             else m.group(3).strip('"')))
    for path, section in (
            (SRC / "modules/routing/readwritesplit/readwritesplit.c", "RW"),
            (SRC / "modules/monitor/mariadbmon/mariadbmon.c", "Mon"),
            (SRC / "modules/filter/cache/cache.c", "Cache"),
            (SRC / "modules/filter/qlafilter/qlafilter.c", "QLA"),
            (SRC / "modules/filter/tee/tee.c", "Tee")):
        src = path.read_text()
        for m in re.finditer(r'\{"(\w+)", SL_PARAM_(\w+), ("[^"]*"|NULL),\s*'
                             r'([A-Z_ |]+),', src):
            if "SL_PARAM_F_IGNORED" in m.group(4):
                rows.append((section, m.group(1), m.group(2),
                             None if m.group(3) == "NULL"
                             else m.group(3).strip('"')))
    return rows


SAMPLE = {"STRING": "x", "PATH": "/tmp", "BOOL": "true", "COUNT": "3",
          "INT": "3", "SIZE": "1Mi", "DURATION": "5s"}


def test_every_ignored_parameter_warns(tmp_path):
    rows = ignored_rows()
    # the parser found the tables (a floor that drops as IGN rows become
    # implemented: 40 after retain_last_statements and friends)
    assert len(rows) > 30, rows
    text = base_config(tmp_path)
    for section, name, typ, default in rows:
        if f"[{section}]\n{name}=" in text:
            continue
        text = add_to_section(text, section,
                              f"{name}={default or SAMPLE[typ]}")
    cfg, status, out = check(tmp_path, text)
    assert status == 0, out
    summary = out.split("parameter(s) accepted for MaxScale compatibility "
                        "and ignored:\n")
    assert len(summary) >= 2, out
    for section, name, typ, default in rows:
        lineno = None
        for i, line in enumerate(text.splitlines(), 1):
            if line.startswith(f"{name}="):
                lineno = i
        assert lineno, name
        want = (f"{cfg}:{lineno}: warning: parameter '{name}' in ")
        assert want in out, (name, out[-3000:])
        assert want in summary[1], (name, "not in the summary")


def test_ignored_warning_at_startup(tmp_path):
    """The daemon logs the warning too (not only --config-check)."""
    text = add_to_section(base_config(tmp_path), "maxscale",
                          "log_augmentation=1")
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir(exist_ok=True)
    cfg = tmp_path / "s.cnf"
    cfg.write_text(text)
    d = px.Daemon(st.sluice_argv("start", cfg), tmp_path / "out.log",
                  st.sluice_env())
    try:
        d.wait_ports([PORT])
        log = (tmp_path / "out.log").read_text()
        if (tmp_path / "log" / "sluice.log").exists():
            log += (tmp_path / "log" / "sluice.log").read_text()
        assert (f"{line_of(text, 'log_augmentation=1')}: warning: "
                "parameter 'log_augmentation'") in log, log[-3000:]
    finally:
        problems = d.stop()
    assert not problems, problems


def test_log_throttling(tmp_path):
    """log_throttling=2, 60s, 60s: of five failed logins (one call site,
    a warning each) two are logged, then the suppression notice."""
    text = add_to_section(base_config(tmp_path), "maxscale",
                          "log_throttling=2, 60s, 60000")
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir(exist_ok=True)
    cfg = tmp_path / "th.cnf"
    cfg.write_text(text)
    d = px.Daemon(st.sluice_argv("start", cfg), tmp_path / "out.log",
                  st.sluice_env())
    try:
        d.wait_ports([PORT])
        for _ in range(5):
            with pytest.raises(Exception) as exc:
                st.connect(port=PORT, password="wrong-password")
            assert st.error_code(exc.value) == 1045
        log = (tmp_path / "out.log").read_text()
    finally:
        problems = d.stop()
    assert not problems, problems
    assert log.count("authentication failed for") == 2, log[-3000:]
    assert ("logged 2 times within 60000 ms; suppressing it for 60000 ms "
            "(log_throttling)") in log, log[-3000:]


def test_log_throttling_invalid(tmp_path):
    setting = "log_throttling=10, soon, 10000ms"
    text = add_to_section(base_config(tmp_path), "maxscale", setting)
    cfg, status, out = check(tmp_path, text)
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, setting)}: invalid value "
            "'10, soon, 10000ms' for parameter 'log_throttling'") in out, out


@pytest.mark.parametrize("lines,needle", [
    (["config_sync_cluster=NoSuchMonitor", "config_sync_user=u"],
     "config_sync_cluster: no monitor named 'NoSuchMonitor'"),
    (["config_sync_cluster=Mon"], "config_sync_cluster needs config_sync_user"),
    (["config_sync_cluster=Mon", "config_sync_user=u",
      "config_sync_db=a`b"], "invalid value 'a`b' for parameter "
     "'config_sync_db'"),
    (["config_sync_cluster=Mon", "config_sync_user=u",
      "config_sync_interval=0s"], "invalid value '0s' for parameter "
     "'config_sync_interval'"),
])
def test_config_sync_refused(tmp_path, lines, needle):
    """config_sync_* that cannot work are refused with file:line (the
    line of the parameter named first in the message)."""
    text = base_config(tmp_path, extra_global="\n".join(lines))
    cfg, status, out = check(tmp_path, text)
    assert status == px.CONFIG_REFUSED, out
    line = line_of(text, lines[-1] if "invalid value" in needle
                   else lines[0])
    assert f"{cfg}:{line}: {needle}" in out, out


def test_config_sync_accepted(tmp_path):
    text = base_config(tmp_path, extra_global="config_sync_cluster=Mon\n"
                       "config_sync_user=u\nconfig_sync_password=p\n"
                       "config_sync_interval=2s\nconfig_sync_timeout=3s\n"
                       "config_sync_db=sluice")
    cfg, status, out = check(tmp_path, text)
    assert status == 0, out


def test_syslog_only(tmp_path):
    """syslog=true, maxlog=false: log lines reach the syslog socket (here
    a datagram socket the test binds, through $SLUICE_SYSLOG_SOCKET) with
    the user facility and the right priority, and no longer the log."""
    import socket as so
    sock_path = tmp_path / "log.sock"
    rx = so.socket(so.AF_UNIX, so.SOCK_DGRAM)
    rx.bind(str(sock_path))
    rx.settimeout(0.2)
    text = add_to_section(base_config(tmp_path), "maxscale",
                          "syslog=true\nmaxlog=false")
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir(exist_ok=True)
    cfg = tmp_path / "sys.cnf"
    cfg.write_text(text)
    env = st.sluice_env()
    env["SLUICE_SYSLOG_SOCKET"] = str(sock_path)
    d = px.Daemon(st.sluice_argv("start", cfg), tmp_path / "out.log", env)
    got = []
    try:
        d.wait_ports([PORT])
        with pytest.raises(Exception) as exc:
            st.connect(port=PORT, password="wrong-password")
        assert st.error_code(exc.value) == 1045

        def received():
            try:
                got.append(rx.recv(65536).decode(errors="replace"))
            except OSError:
                pass
            return any("authentication failed for" in g for g in got)
        st.wait_until(received, 10, what="the warning on the syslog socket")
        out = (tmp_path / "out.log").read_text()
    finally:
        problems = d.stop()
        rx.close()
    assert not problems, problems
    warn = [g for g in got if "authentication failed for" in g][0]
    assert warn.startswith("<12>sluice["), warn    # user.warning
    assert "authentication failed for" not in out, out[-2000:]


@pytest.mark.parametrize("interval", ["0", "2s"])
def test_users_refresh(tmp_path, interval):
    """users_refresh_time=60s: an account created behind Sluice's back is
    not loaded by a failed login within the minute (1045 at once, not a
    held login); with users_refresh_interval=2s the periodic reload brings
    it in after a few seconds."""
    user = f"cnf_refresh_{interval.replace('s', '')}"
    text = add_to_section(base_config(tmp_path), "maxscale",
                          f"users_refresh_time=60s\n"
                          f"users_refresh_interval={interval}\n"
                          "max_auth_errors_until_block=0")
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir(exist_ok=True)
    cfg = tmp_path / "users.cnf"
    cfg.write_text(text)
    primary = st.root(st.PRIMARY_ID)
    with primary.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
    d = px.Daemon(st.sluice_argv("start", cfg), tmp_path / "out.log",
                  st.sluice_env())
    try:
        d.wait_ports([PORT])
        st.wait_until(lambda: st.server_id(st.connect(port=PORT)) > 0, 20,
                      what="the first account load")
        with primary.cursor() as cur:
            cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw1'")
            cur.execute(f"GRANT SELECT ON *.* TO '{user}'@'%'")
        st.wait_replicated()
        started = time.monotonic()
        with pytest.raises(Exception) as exc:
            st.connect(port=PORT, user=user, password="pw1")
        assert st.error_code(exc.value) == 1045
        assert time.monotonic() - started < 5, "the login was held"
        if interval == "0":
            time.sleep(4)
            with pytest.raises(Exception) as exc:
                st.connect(port=PORT, user=user, password="pw1")
            assert st.error_code(exc.value) == 1045
        else:
            def logs_in():
                try:
                    conn = st.connect(port=PORT, user=user, password="pw1")
                except Exception:
                    return False
                with conn:
                    return st.server_id(conn) in st.SERVERS
            st.wait_until(logs_in, 15, interval=0.5,
                          what="the periodic reload")
    finally:
        problems = d.stop()
        with primary.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        primary.close()
    assert not problems, problems


# ---- aliases and authenticators ----

@pytest.mark.parametrize("auth", ["MariaDBAuth", "mariadbauth", "MySQLAuth",
                                  "mysqlauth"])
def test_native_authenticator_accepted(tmp_path, auth):
    text = add_to_section(base_config(tmp_path), "RW-Listener",
                          f"authenticator={auth}")
    _, status, out = check(tmp_path, text)
    assert status == 0, out


@pytest.mark.parametrize("auth,mode", [
    ("ed25519auth", "ed25519"), ("MariaDBAuth,ed25519auth", "sha256"),
    ("mariadbauth, ED25519AUTH", "ED25519")])
def test_ed25519_authenticator_accepted(tmp_path, auth, mode):
    """ed25519auth on a listener (test_ed25519.py)."""
    text = add_to_section(base_config(tmp_path), "RW-Listener",
                          f"authenticator={auth}\n"
                          f"authenticator_options=ed_mode={mode}")
    _, status, out = check(tmp_path, text)
    assert status == 0, out


def test_ed25519_authenticator_refused_on_server(tmp_path):
    setting = "authenticator=ed25519auth"
    text = add_to_section(base_config(tmp_path), "db1", setting)
    cfg, status, out = check(tmp_path, text)
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, setting)}: parameter 'authenticator' in "
            f"server 'db1': authenticator 'ed25519auth' is not supported "
            "by Sluice") in out, out


@pytest.mark.parametrize("setting,why", [
    ("authenticator_options=ed_mode=sha256,ed_rsa_privkey=/tmp/k.pem",
     "option 'ed_rsa_privkey=/tmp/k.pem' is not supported by Sluice"),
    ("authenticator_options=ed_mode=ed25519,pam_mode=password_3FA",
     "option 'pam_mode=password_3FA' is not supported by Sluice"),
    ("authenticator_options=pam_mode=password_2FA,"
     "pam_use_cleartext_plugin=true",
     "pam_mode=password_2FA cannot be combined with "
     "pam_use_cleartext_plugin=true"),
    ("authenticator_options=pam_backend_map=ldap",
     "option 'pam_backend_map=ldap' is not supported by Sluice"),
    ("authenticator_options=pam_mapped_pw_file=/etc/hostname",
     "pam_mapped_pw_file is used only with pam_backend_map=mariadb"),
    ("authenticator_options=pam_backend_map=mariadb,"
     "pam_mapped_pw_file=/nonexistent/pw.json",
     "pam_mapped_pw_file '/nonexistent/pw.json' cannot be read as JSON"),
    ("authenticator_options=pam_use_cleartext_plugin=yes",
     "option 'pam_use_cleartext_plugin=yes' is not supported by Sluice"),
    ("authenticator_options=ed_mode=sha512",
     "option 'ed_mode=sha512' is not supported by Sluice"),
])
def test_authenticator_options_refused(tmp_path, setting, why):
    text = add_to_section(base_config(tmp_path), "RW-Listener", setting)
    cfg, status, out = check(tmp_path, text)
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, setting)}: parameter "
            "'authenticator_options' in listener 'RW-Listener': " + why) \
        in out, out


@pytest.mark.parametrize("content,why", [
    (None, "cannot be read as JSON"),
    ("{\"user_map\": [", "cannot be read as JSON"),
    ("[]", "is not a JSON object"),
])
def test_user_mapping_file_checked(tmp_path, content, why):
    path = tmp_path / "map.json"
    if content is not None:
        path.write_text(content)
    setting = f"user_mapping_file={path}"
    text = add_to_section(base_config(tmp_path), "RW-Listener", setting)
    cfg, status, out = check(tmp_path, text)
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, setting)}: parameter 'user_mapping_file' "
            f"in listener 'RW-Listener': '{path}' {why}") in out, out
    path.write_text('{"user_map": [], "server_credentials": []}')
    _, status, out = check(tmp_path, text)
    assert status == 0, out


@pytest.mark.parametrize("auth", ["GSSAPIAuth", "MariaDBAuth,GSSAPIAuth",
                                  "PAMAuth,Kerberos"])
def test_other_authenticator_refused(tmp_path, auth):
    setting = f"authenticator={auth}"
    text = add_to_section(base_config(tmp_path), "RW-Listener", setting)
    cfg, status, out = check(tmp_path, text)
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, setting)}: parameter 'authenticator' in "
            f"listener 'RW-Listener': authenticator '") in out, out
    assert "is not supported by Sluice" in out, out


@pytest.mark.parametrize("setting", [
    "authenticator=PAMAuth",
    "authenticator=MariaDBAuth, PAMAuth\nauthenticator_options="
    "pam_use_cleartext_plugin=true, pam_allow_plain_cleartext=false, "
    "pam_mode=password, pam_backend_map=none",
    "authenticator=MariaDBAuth,PAMAuth\nauthenticator_options="
    "pam_mode=password_2FA",
    "authenticator=MariaDBAuth,PAMAuth\nauthenticator_options="
    "pam_backend_mapping=mariadb",
])
def test_pam_authenticator_accepted(tmp_path, setting):
    """PAMAuth and its options (docs/authentication.md, "PAM accounts")."""
    text = add_to_section(base_config(tmp_path), "RW-Listener", setting)
    _, status, out = check(tmp_path, text)
    assert status == 0, out


@pytest.mark.parametrize("content,why", [
    ('{"users_and_passwords": [{"user": "u", "password": "p"}]}', None),
    ('{"users_and_passwords": [{"user": "u"}]}',
     "entry 1 of \"users_and_passwords\" needs string \"user\" and "
     "\"password\""),
    ('{"users": []}', "has no \"users_and_passwords\" array"),
])
def test_pam_mapped_pw_file_checked(tmp_path, content, why):
    path = tmp_path / "Mapped PW.json"   # case and a space kept
    path.write_text(content)
    setting = ("authenticator=MariaDBAuth,PAMAuth\nauthenticator_options="
               f"pam_backend_map=mariadb, pam_mapped_pw_file={path}")
    text = add_to_section(base_config(tmp_path), "RW-Listener", setting)
    cfg, status, out = check(tmp_path, text)
    if why is None:
        assert status == 0, out
        return
    assert status == px.CONFIG_REFUSED, out
    line = line_of(text, setting.splitlines()[1])
    assert (f"{cfg}:{line}: parameter 'authenticator_options' in listener "
            f"'RW-Listener': pam_mapped_pw_file '{path}': " + why
            if "entry" in why else
            f"{cfg}:{line}: parameter 'authenticator_options' in listener "
            f"'RW-Listener': pam_mapped_pw_file '{path}' " + why) in out, out


def test_pam_authenticator_refused_on_server(tmp_path):
    setting = "authenticator=PAMAuth"
    text = add_to_section(base_config(tmp_path), "db1", setting)
    cfg, status, out = check(tmp_path, text)
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, setting)}: parameter 'authenticator' in "
            f"server 'db1': authenticator 'PAMAuth' is not supported "
            "by Sluice") in out, out


def test_mysqlmon_is_mariadbmon(tmp_path):
    text = base_config(tmp_path).replace("module=mariadbmon",
                                         "module=mysqlmon")
    # a mariadbmon-only parameter proves the alias loaded mariadbmon
    text = add_to_section(text, "Mon", "auto_failover=false")
    _, status, out = check(tmp_path, text)
    assert status == 0, out


def test_service_as_target_refused(tmp_path):
    text = base_config(tmp_path) + f"""
[Outer]
type=service
router=readconnroute
targets=RW
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
"""
    cfg, status, out = check(tmp_path, text)
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, 'targets=RW')}: service 'Outer': service "
            "'RW' in 'targets': services as targets are not supported"
            in out), out


# ---- config files: .d, @include, $VARS, encrypted passwords ----

def test_d_directory_messages_name_the_file(tmp_path):
    text = base_config(tmp_path)
    (tmp_path / "t.cnf.d").mkdir()
    (tmp_path / "t.cnf.d" / "50-x.cnf").write_text(
        "# extra objects\n[Extra]\ntype=server\naddress=127.0.0.1\n"
        "prot=1\n")
    (tmp_path / "t.cnf.d" / "ignored.txt").write_text("[Not]\nbad\n")
    _, status, out = check(tmp_path, text)
    assert status == px.CONFIG_REFUSED, out
    assert (f"{tmp_path}/t.cnf.d/50-x.cnf:5: unknown parameter 'prot' in "
            "server 'Extra'") in out, out


def test_include_section_and_missing_include(tmp_path):
    text = base_config(tmp_path) + "\n[Bad]\ntype=server\n@include=Nope\n"
    cfg, status, out = check(tmp_path, text)
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, '@include=Nope')}: parameter '@include' "
            "in section 'Bad' names 'Nope', which is not a section of "
            "type=include") in out, out


def test_unset_variable_refused(tmp_path):
    text = base_config(tmp_path, extra_global="substitute_variables=true")
    text = text.replace(f"port={PORT}", "port=$SLUICE_TEST_UNSET_PORT")
    cfg, status, out = check(tmp_path, text)
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, 'port=$SLUICE_TEST_UNSET_PORT')}: "
            "parameter 'port' in section 'RW-Listener' names the "
            "environment variable 'SLUICE_TEST_UNSET_PORT', which is not "
            "set") in out, out


def admin_get(path):
    req = urllib.request.Request(f"http://{st.HOST}:{ADMIN}/v1{path}")
    req.add_header("Authorization", "Basic " +
                   base64.b64encode(b"admin:mariadb").decode())
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def test_d_include_env_and_encrypted_password_log_in(tmp_path):
    """Everything at once, as a MaxScale user would write it: the service
    credentials come from a type=include section, the password encrypted
    with sluice-passwd (the .secrets key from sluice-keys in datadir), the
    listener in <config>.d/ and its port from the environment. A real
    login through Sluice reaches the primary by @@server_id."""
    data = tmp_path / "data" / "nested"    # created by Sluice at start-up
    keydir = tmp_path / "keys"
    keydir.mkdir()
    subprocess.run([str(KEYS), str(keydir)], check=True,
                   capture_output=True)
    enc = subprocess.run([str(PASSWD), str(keydir), st.SERVICE_PASSWORD],
                         check=True, capture_output=True,
                         text=True).stdout.strip()
    assert re.fullmatch(r"[0-9A-F]{64,}", enc), enc
    assert st.SERVICE_PASSWORD not in enc
    text = f"""[maxscale]
threads=1
module_dir={st.MODULE_DIR}
logdir={tmp_path}/log
datadir={data}
secretsdir={keydir}
persistdir={tmp_path}/persist/deeper
cachedir={tmp_path}/cache
threads_max=4
log_throttling=7, 2s, 30s
syslog=true
users_refresh_time=5s
users_refresh_interval=1h
substitute_variables=true
admin_host={st.HOST}
admin_port={ADMIN}

[Creds]
type=include
user=$SLUICE_TEST_SVC_USER
password={enc}
{servers_text()}
[Mon]
type=monitor
module=mysqlmon
servers=db1,db2,db3
@include=Creds
monitor_interval=1000ms

[Primary]
type=service
router=readconnroute
router_options=master
servers=db1,db2,db3
@include=Creds
"""
    cfg = tmp_path / "all.cnf"
    cfg.write_text(text)
    (tmp_path / "all.cnf.d").mkdir()
    (tmp_path / "all.cnf.d" / "listener.cnf").write_text(
        "[Primary-Listener]\ntype=listener\nservice=Primary\n"
        f"address={st.HOST}\nport=$SLUICE_TEST_PORT\n"
        "authenticator=MariaDBAuth\n")
    env = st.sluice_env()
    env["SLUICE_SYSLOG_SOCKET"] = str(tmp_path / "no-syslog-here")
    env["SLUICE_TEST_SVC_USER"] = st.SERVICE_USER
    env["SLUICE_TEST_PORT"] = str(PORT2)
    status = subprocess.run(st.sluice_argv("check", cfg), env=env,
                            capture_output=True, text=True)
    assert status.returncode == 0, status.stdout + status.stderr
    d = px.Daemon(st.sluice_argv("start", cfg), tmp_path / "out.log", env)
    try:
        d.wait_ports([PORT2, ADMIN])

        def logged_in():
            try:
                conn = st.connect(port=PORT2)
            except Exception:
                return False
            with conn:
                return st.server_id(conn) == st.PRIMARY_ID
        st.wait_until(logged_in, 20, what="a login through the service "
                      "whose password was encrypted")
        for sub in ("data/nested", "persist/deeper", "cache"):
            assert (tmp_path / sub).is_dir(), sub
        g = admin_get("/maxscale")["data"]["attributes"]["parameters"]
        assert g["substitute_variables"] in (True, "true"), g
        assert g["secretsdir"] == str(keydir), g
        assert g["cachedir"] == f"{tmp_path}/cache", g
        assert str(g["threads_max"]) == "4", g
        # the other parameters this work implemented, at non-default
        # values (the values as written, as for every parameter)
        assert g["log_throttling"] == "7, 2s, 30s", g
        assert g["syslog"] in (True, "true"), g
        assert g["users_refresh_time"] in ("5s", 5, "5000ms"), g
        assert g["users_refresh_interval"] in ("1h", 3600, "3600s"), g
        svc = admin_get("/services/Primary")["data"]["attributes"]
        assert svc["parameters"]["user"] == st.SERVICE_USER, svc
    finally:
        problems = d.stop()
    assert not problems, problems
    # the plain password never reached the log
    assert st.SERVICE_PASSWORD not in (tmp_path / "out.log").read_text()


def test_wrong_key_refused(tmp_path):
    keydir = tmp_path / "k1"
    other = tmp_path / "k2"
    for k in (keydir, other):
        k.mkdir()
        subprocess.run([str(KEYS), str(k)], check=True, capture_output=True)
    enc = subprocess.run([str(PASSWD), str(other), "pw"], check=True,
                         capture_output=True, text=True).stdout.strip()
    text = base_config(tmp_path, extra_global=f"secretsdir={keydir}")
    text = text.replace(f"password={st.SERVICE_PASSWORD}\n\n[RW-Listener]",
                        f"password={enc}\n\n[RW-Listener]")
    cfg, status, out = check(tmp_path, text)
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, 'password=' + enc)}: parameter "
            "'password' in section 'RW' looks encrypted") in out, out


def test_keys_never_overwritten(tmp_path):
    subprocess.run([str(KEYS), str(tmp_path)], check=True,
                   capture_output=True)
    first = (tmp_path / ".secrets").read_text()
    again = subprocess.run([str(KEYS), str(tmp_path)], capture_output=True,
                           text=True)
    assert again.returncode == 1 and "File exists" in again.stderr
    assert (tmp_path / ".secrets").read_text() == first
    assert oct((tmp_path / ".secrets").stat().st_mode & 0o777) == "0o400"


def test_openssl_encrypted_value_decrypts(tmp_path):
    """The format is MaxScale's, not only our own round trip: a value made
    by the openssl command line (hex IV + AES-256-CBC) with the key of the
    .secrets file loads; a wrong one does not."""
    subprocess.run([str(KEYS), str(tmp_path)], check=True,
                   capture_output=True)
    key = json.loads((tmp_path / ".secrets").read_text())["encryption_key"]
    iv = "00112233445566778899aabbccddeeff"
    ct = subprocess.run(["openssl", "enc", "-aes-256-cbc", "-K", key, "-iv",
                         iv], input=st.SERVICE_PASSWORD.encode(),
                        capture_output=True, check=True).stdout.hex()
    text = base_config(tmp_path, extra_global=f"secretsdir={tmp_path}")
    text = text.replace(f"password={st.SERVICE_PASSWORD}\n\n[RW-Listener]",
                        f"password={iv}{ct}\n\n[RW-Listener]")
    _, status, out = check(tmp_path, text)
    assert status == 0, out


# ---- runtime directories ----

def test_uncreatable_datadir_refuses_start(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    text = base_config(tmp_path).replace(f"datadir={tmp_path}/data",
                                         f"datadir={blocker}/data")
    cfg = tmp_path / "dirs.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("start", cfg)
    assert status == 1, out
    assert f"cannot create the datadir directory '{blocker}/data'" in out, \
        out


# ---- the corpus of MaxScale configurations ----

CORPUS = sorted((st.ROOT / "test" / "data" / "maxscale").glob("*.cnf"))


def documented_warning_params():
    """Names docs/configuration.md lists as "accepted with warning"."""
    doc = (st.ROOT / "docs" / "configuration.md").read_text()
    return set(re.findall(r"^\| `(\w+)` \|[^\n]*\| accepted with warning",
                          doc, re.M))


@pytest.mark.parametrize("cfg", CORPUS, ids=[c.name for c in CORPUS])
def test_corpus(cfg):
    """Each configuration written out from MaxScale's documentation either
    loads with no warning beyond the documented ones, or is refused for
    the module/parameter its header names (`# sluice-corpus: needs X`)."""
    expect = re.search(r"^# sluice-corpus: (.*)$", cfg.read_text(),
                       re.M).group(1).strip()
    assert re.search(r"^# Source: ", cfg.read_text(), re.M), "no source"
    env = st.sluice_env()
    env["SLUICE_MODULE_DIR"] = str(st.MODULE_DIR)
    proc = subprocess.run(st.sluice_argv("check", cfg), env=env,
                          capture_output=True, text=True, timeout=30)
    out = proc.stdout + proc.stderr
    if expect == "loads":
        assert proc.returncode == 0, out
        allowed = documented_warning_params()
        for name in re.findall(r": warning: parameter '(\w+)'", out):
            assert name in allowed, (name, "warns but is not documented "
                                     "as accepted with warning")
    else:
        need = expect.removeprefix("needs ").strip()
        assert proc.returncode == px.CONFIG_REFUSED, out
        assert need in out, out


def test_corpus_counts():
    """The figures docs/configuration.md gives for the corpus."""
    loads = sum("# sluice-corpus: loads" in c.read_text() for c in CORPUS)
    doc = (st.ROOT / "docs" / "configuration.md").read_text()
    assert f"holds {len(CORPUS)} configurations" in doc
    assert f"{loads} load with no warning" in doc
    assert f"The other {len(CORPUS) - loads} need" in doc
