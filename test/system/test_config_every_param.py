# SPDX-License-Identifier: Apache-2.0
"""Every supported parameter, set to a value other than its default, is what
the REST API shows (issue 18).

The list of parameters is not written here: it is the daemon's own, read
from the REST API of the instance under test (GET
/v1/maxscale/modules/:name for the core's tables -- maxscale, servers,
services, listeners, monitors, filters -- and for every module loaded),
keeping the rows whose `status` is "supported". One configuration sets each
of them to a non-default value: booleans to the opposite of the default,
enumerations to a listed value that is not the default, everything else
from VALUES below. A supported parameter with no value here fails the test
naming it, so a new parameter cannot be added without being covered. The
few that cannot be set in this one configuration are in EXCLUDED, each with
the test that covers it.

The configuration loads (every TLS file, SQL file, JSON file and path is
real), starts, and then every parameter is read back from the resource of
its object: /v1/maxscale, /v1/servers/:name, /v1/services/:name,
/v1/listeners/:name, /v1/monitors/:name, /v1/filters/:name -- as
configured, passwords as "*****". The REST API itself is served over TLS
(admin_ssl_*) with admin_auth=false, read with the test CA.

The servers point at a port where nothing listens and the instance is
passive: nothing here touches the sandbox.
"""

import json
import ssl
import urllib.request

import pytest

import proxy as px
import sluicetest as st

ADMIN = st.port(5780)
RW_PORT = st.port(5781)
DEAD = st.port(5782)          # nothing listens here: the servers' port
DEAD_EXTRA = st.port(5783)

# Sections of the configuration: (REST collection, name, core table,
# module or None).
SECTIONS = [
    ("maxscale", "maxscale", "maxscale", None),
    ("servers", "db1", "servers", None),
    ("servers", "db2", "servers", None),
    ("servers", "dbsock", "servers", None),
    ("monitors", "Mon", "monitors", "mariadbmon"),
    ("monitors", "Basic", "monitors", "basicmon"),
    ("services", "RW", "services", "readwritesplit"),
    ("services", "RCR", "services", "readconnroute"),
    ("services", "CL", "services", "readconnroute"),
    ("listeners", "RW-Listener", "listeners", "mariadbprotocol"),
    ("listeners", "RCR-Listener", "listeners", "mariadbprotocol"),
    ("filters", "Top", "filters", "topfilter"),
    ("filters", "Cache", "filters", "cache"),
    ("filters", "Throttle", "filters", "throttlefilter"),
    ("filters", "Regex", "filters", "regexfilter"),
    ("filters", "Tee", "filters", "tee"),
    ("filters", "Named", "filters", "namedserverfilter"),
    ("filters", "QLA", "filters", "qlafilter"),
    ("filters", "Hint", "filters", "hintfilter"),
]

# Parameters this configuration cannot set to a non-default value, and
# where they are tested instead.
EXCLUDED = {
    ("maxscale", "admin_enabled"): "false turns off the REST API this test "
    "reads (test_config_compat runs with it)",
    ("maxscale", "admin_host"): "tests listen on 127.0.0.1 only, the "
    "default",
    ("servers", "type"): "not a parameter in REST (MaxScale's shape)",
    ("services", "type"): "as above",
    ("listeners", "type"): "as above",
    ("monitors", "type"): "as above",
    ("filters", "type"): "as above",
    ("maxscale", "admin_ssl_ca_cert"): "the old name of admin_ssl_ca, "
    "which is set; the two together are refused (test_admin_tls sets it)",
    ("cache", "storage"): "storage_inmemory, the default, is the only "
    "storage; another is refused (test_filter_cache)",
    ("readwritesplit", "max_slave_replication_lag"): "the old name of "
    "max_replication_lag, which is set; the two together are refused "
    "(test_max_replication_lag sets the old name)",
    # one of the three ways to give a service its servers; each is set on
    # a service of its own (RW servers=, RCR targets=, CL cluster=)
}

# Which object of SECTIONS sets a parameter when not every one of its
# type can: (core table or module, name) -> object names.
ONLY_ON = {
    ("servers", "address"): {"db1", "db2"},
    ("servers", "port"): {"db1", "db2"},
    ("servers", "socket"): {"dbsock"},
    ("servers", "ssl_ca"): {"db1"},
    ("servers", "ssl_ca_cert"): {"db2"},
    ("services", "servers"): {"RW"},
    ("services", "targets"): {"RCR"},
    ("services", "cluster"): {"CL"},
    ("services", "filters"): {"RW"},
    ("listeners", "port"): {"RW-Listener"},
    ("listeners", "socket"): {"RCR-Listener"},
    ("listeners", "ssl_ca"): {"RW-Listener"},
    ("listeners", "ssl_ca_cert"): {"RCR-Listener"},
    ("monitors", "servers"): {"Mon", "Basic"},
}


def values(run_dir, certs):
    """Non-default values for the parameters that are neither booleans nor
    enumerations: (core table or module, name) -> value, or a callable
    taking the object's name."""
    sock = run_dir / "sock"
    c = certs
    return {
        # [maxscale]
        ("maxscale", "threads"): "2",
        ("maxscale", "module_dir"): str(st.MODULE_DIR),
        ("maxscale", "logdir"): f"{run_dir}/log",
        ("maxscale", "datadir"): f"{run_dir}/data",
        ("maxscale", "piddir"): f"{run_dir}/pid",
        ("maxscale", "persistdir"): f"{run_dir}/persist",
        ("maxscale", "cachedir"): f"{run_dir}/cache",
        ("maxscale", "secretsdir"): f"{run_dir}/secrets",
        ("maxscale", "admin_port"): str(ADMIN),
        ("maxscale", "query_retries"): "3",
        ("maxscale", "query_retry_timeout"): "7s",
        ("maxscale", "connector_plugindir"): str(run_dir),
        ("maxscale", "admin_allowed_hosts"): "sluice.test",
        ("maxscale", "admin_secure_paths"): f"{run_dir}/secure",
        ("maxscale", "admin_ssl_key"): f"{c}/server-key.pem",
        ("maxscale", "admin_ssl_cert"): f"{c}/server.pem",
        ("maxscale", "admin_ssl_ca"): f"{c}/ca.pem",
        ("maxscale", "admin_audit_file"): f"{run_dir}/log/audit.csv",
        ("maxscale", "admin_audit_exclude_methods"): "PATCH",
        ("maxscale", "admin_readwrite_hosts"): "127.0.0.1",
        ("maxscale", "admin_readonly_hosts"): "127.0.0.0/8",
        ("maxscale", "admin_dashboard_dir"): f"{run_dir}/dashboard",
        ("maxscale", "shutdown_timeout"): "7s",
        ("maxscale", "writeq_high_water"): "128Ki",
        ("maxscale", "writeq_low_water"): "2048",
        ("maxscale", "digest_max_entries"): "1001",
        ("maxscale", "local_address"): st.HOST,
        ("maxscale", "users_refresh_time"): "7s",
        ("maxscale", "users_refresh_interval"): "70s",
        ("maxscale", "log_throttling"): "7, 2s, 20s",
        ("maxscale", "max_auth_errors_until_block"): "7",
        ("maxscale", "threads_max"): "77",
        ("maxscale", "config_sync_cluster"): "Mon",
        ("maxscale", "config_sync_user"): "syncer",
        ("maxscale", "config_sync_password"): "syncpw",
        ("maxscale", "config_sync_interval"): "7s",
        ("maxscale", "config_sync_timeout"): "8s",
        ("maxscale", "config_sync_db"): "sluice_sync",
        ("maxscale", "retain_last_statements"): "7",
        ("maxscale", "session_trace"): "8",
        # servers
        ("servers", "address"): st.HOST,
        ("servers", "port"): str(DEAD),
        ("servers", "socket"): f"{sock}/nothing.sock",
        ("servers", "protocol"): "MySQLBackend",
        ("servers", "weight"): "3",
        ("servers", "authenticator"): "MariaDBBackendAuth",
        ("servers", "persistpoolmax"): "4",
        ("servers", "persistmaxtime"): "7s",
        ("servers", "monitoruser"): "mon_other",
        ("servers", "monitorpw"): "monpw",
        ("servers", "extra_port"): str(DEAD_EXTRA),
        ("servers", "max_routing_connections"): "7",
        ("servers", "replication_custom_options"): "MASTER_HEARTBEAT_PERIOD=7",
        ("servers", "private_address"): "10.0.0.7",
        ("servers", "disk_space_threshold"): "*:98",
        ("servers", "ssl_cert"): f"{c}/client.pem",
        ("servers", "ssl_key"): f"{c}/client-key.pem",
        ("servers", "ssl_ca"): f"{c}/ca.pem",
        ("servers", "ssl_ca_cert"): f"{c}/ca.pem",
        ("servers", "ssl_version"): "TLSv13",
        ("servers", "ssl_cipher"): "HIGH:!aNULL",
        ("servers", "ssl_cert_verify_depth"): "5",
        ("servers", "ssl_crl"): f"{c}/crl-none.pem",
        # monitors
        ("monitors", "servers"): lambda o: "db1,db2" if o == "Mon"
        else "dbsock",
        ("monitors", "user"): "monuser",
        ("monitors", "password"): "monpw",
        ("monitors", "monitor_interval"): "1500ms",
        ("monitors", "backend_connect_timeout"): "4s",
        ("monitors", "backend_read_timeout"): "5s",
        ("monitors", "backend_write_timeout"): "6s",
        ("monitors", "backend_connect_attempts"): "2",
        ("mariadbmon", "failcount"): "6",
        ("mariadbmon", "disk_space_threshold"): "/:95,*:97",
        ("mariadbmon", "disk_space_check_interval"): "70s",
        ("mariadbmon", "replication_user"): "repl_other",
        ("mariadbmon", "replication_password"): "replpw",
        ("mariadbmon", "switchover_timeout"): "70s",
        ("mariadbmon", "failover_timeout"): "80s",
        ("mariadbmon", "master_failure_timeout"): "25s",
        ("mariadbmon", "servers_no_promotion"): "db2",
        ("mariadbmon", "promotion_sql_file"): f"{run_dir}/promote.sql",
        ("mariadbmon", "demotion_sql_file"): f"{run_dir}/demote.sql",
        ("mariadbmon", "script"): "/bin/true",
        ("mariadbmon", "script_timeout"): "7s",
        # services
        ("services", "servers"): "db1,db2",
        ("services", "targets"): "db1,db2",
        ("services", "cluster"): "Mon",
        ("services", "user"): "svc_user",
        ("services", "password"): "svcpw",
        ("services", "filters"): "Hint|QLA",
        ("services", "max_connections"): "70",
        ("services", "retain_last_statements"): "9",
        ("services", "connection_timeout"): "7s",
        ("services", "auth_timeout"): "8s",
        ("services", "max_pending_logins_per_host"): "7",
        ("services", "max_allowed_packet"): "8Mi",
        ("services", "version_string"): "10.11.99-test",
        ("services", "net_write_timeout"): "7s",
        ("services", "connection_keepalive"): "70s",
        ("services", "user_accounts_file"): f"{run_dir}/accounts.json",
        ("maxscale", "admin_ssl_ca_cert"): "the old name of admin_ssl_ca, "
    "which is set; the two together are refused (test_admin_tls sets it)",
    ("cache", "storage"): "storage_inmemory, the default, is the only "
    "storage; another is refused (test_filter_cache)",
    ("readwritesplit", "max_slave_replication_lag"): "7s",
        ("readwritesplit", "max_slave_connections"): "1",
        ("readwritesplit", "slave_connections"): "1",
        ("readwritesplit", "delayed_retry_timeout"): "7s",
        ("readwritesplit", "reply_timeout"): "70s",
        ("readwritesplit", "causal_reads_timeout"): "7s",
        ("readwritesplit", "causal_reads_wait"): "7ms",
        ("readwritesplit", "transaction_replay_max_size"): "2Mi",
        ("readwritesplit", "transaction_replay_attempts"): "7",
        ("readwritesplit", "transaction_replay_timeout"): "7s",
        ("readwritesplit", "max_sescmd_history"): "70",
        ("readwritesplit", "max_replication_lag"): "8s",
        ("readconnroute", "max_replication_lag"): "7s",
        # listeners
        ("listeners", "service"): lambda o: o.split("-")[0],
        ("listeners", "protocol"): "MariaDBClient",
        ("listeners", "address"): st.HOST,
        ("listeners", "port"): str(RW_PORT),
        ("listeners", "socket"): f"{sock}/rcr.sock",
        ("listeners", "authenticator"): "MariaDBAuth,PAMAuth",
        ("listeners", "authenticator_options"):
            "pam_use_cleartext_plugin=true",
        ("listeners", "user_mapping_file"): f"{run_dir}/mapping.json",
        ("listeners", "connection_init_sql_file"): f"{run_dir}/init.sql",
        ("listeners", "proxy_protocol_networks"): "127.0.0.1/32",
        ("listeners", "ssl_cert"): f"{c}/server.pem",
        ("listeners", "ssl_key"): f"{c}/server-key.pem",
        ("listeners", "ssl_ca"): f"{c}/ca.pem",
        ("listeners", "ssl_ca_cert"): f"{c}/ca.pem",
        ("listeners", "ssl_version"): "TLSv12,TLSv13",
        ("listeners", "ssl_cipher"): "HIGH:!aNULL",
        ("listeners", "ssl_cert_verify_depth"): "5",
        ("listeners", "ssl_crl"): f"{c}/crl-none.pem",
        # filters
        ("filters", "module"): None,        # the SECTIONS' module
        ("topfilter", "count"): "7",
        ("topfilter", "filebase"): f"{run_dir}/log/top",
        ("qlafilter", "filebase"): f"{run_dir}/log/qla",
        ("topfilter", "match"): "^select",
        ("qlafilter", "match"): "^select",
        ("tee", "match"): "^insert",
        ("regexfilter", "match"): "fruit",
        ("topfilter", "exclude"): "secret",
        ("qlafilter", "exclude"): "secret",
        ("tee", "exclude"): "secret",
        ("topfilter", "user"): "app",
        ("qlafilter", "user"): "app",
        ("tee", "user"): "app",
        ("regexfilter", "user"): "app",
        ("namedserverfilter", "user"): "app",
        ("topfilter", "source"): st.HOST,
        ("qlafilter", "source"): st.HOST,
        ("tee", "source"): st.HOST,
        ("regexfilter", "source"): st.HOST,
        ("namedserverfilter", "source"): st.HOST,
        ("qlafilter", "newline_replacement"): "|",
        ("qlafilter", "separator"): ";",
        ("cache", "hard_ttl"): "70s",
        ("cache", "soft_ttl"): "7s",
        ("cache", "max_resultset_rows"): "70",
        ("cache", "max_resultset_size"): "7Ki",
        ("cache", "max_count"): "700",
        ("cache", "max_size"): "7Mi",
        ("cache", "rules"): f"{run_dir}/cache-rules.json",
        ("throttlefilter", "max_qps"): "70",
        ("throttlefilter", "sampling_duration"): "300ms",
        ("throttlefilter", "throttling_duration"): "7s",
        ("throttlefilter", "continuous_duration"): "3s",
        ("regexfilter", "replace"): "vegetable",
        ("regexfilter", "log_file"): f"{run_dir}/log/regex.log",
        ("tee", "target"): "RCR",
        ("tee", "max_pending_bytes"): "7Mi",
    }


def https_get(path, ca):
    ctx = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(f"https://{st.HOST}:{ADMIN}/v1/{path}",
                                context=ctx, timeout=30) as resp:
        return json.loads(resp.read())["data"]


def non_default(spec, table, obj, vals):
    """The value to set for one supported parameter of `obj`, or None with
    the reason it is not set."""
    name = spec["name"]
    key = (table, name)
    if table == "namedserverfilter" and name[:-2] in ("match", "target"):
        # its 25 matchNN/targetNN pairs: NN's own statement, db1 or db2
        n = int(name[-2:])
        return f"^select {n}$" if name.startswith("m") else f"db{n % 2 + 1}"
    if key in vals:
        v = vals[key]
        return v(obj) if callable(v) else v
    if spec["type"] == "bool":
        return "false" if spec.get("default_value") == "true" else "true"
    if spec["type"] in ("enum", "enum_mask") and spec.get("enum_values"):
        for v in spec["enum_values"]:
            if v != spec.get("default_value"):
                return v
    return None


def prepare_files(run_dir):
    for sub in ("log", "data", "pid", "persist", "cache", "secrets",
                "secure", "dashboard", "sock"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    (run_dir / "dashboard" / "index.html").write_text("<p>dashboard</p>\n")
    (run_dir / "promote.sql").write_text("SET GLOBAL event_scheduler=ON\n")
    (run_dir / "demote.sql").write_text("SET GLOBAL event_scheduler=OFF\n")
    (run_dir / "init.sql").write_text("SET @sluice_init = 1\n")
    (run_dir / "accounts.json").write_text('{"user": []}\n')
    (run_dir / "mapping.json").write_text(
        '{"user_map": [], "server_credentials": []}\n')
    (run_dir / "cache-rules.json").write_text(
        '{"store": [{"attribute": "table", "op": "=", "value": "t1"}]}\n')


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = st.make_test_certs(tmp_path_factory.mktemp("every-param-certs"))
    st.make_cert(d, "unused", "ca", "/CN=revoked, never used")
    crl = st.revoke_cert(d, "unused", "none")
    crl.rename(d / "crl-none.pem")
    return d


def bootstrap_specs(tmp_path, certs):
    """The parameter tables, from a first instance that loads every module
    this test uses (REST over plain HTTP, default everything)."""
    run = tmp_path / "bootstrap"
    for sub in ("log", "data", "persist"):
        (run / sub).mkdir(parents=True, exist_ok=True)
    text = px.global_section(run, ADMIN, threads=1) + f"""
[db1]
type=server
address={st.HOST}
port={DEAD}
"""
    for coll, name, _table, module in SECTIONS:
        if coll == "monitors":
            text += f"\n[{name}]\ntype=monitor\nmodule={module}\n"
            text += "servers=db1\n" if name == "Mon" else ""
            text += f"user=u\npassword=p\n"
        if coll == "filters":
            text += f"\n[{name}]\ntype=filter\nmodule={module}\n"
            text += {"topfilter": f"filebase={run}/top\n",
                     "qlafilter": f"filebase={run}/qla\n",
                     "throttlefilter": "max_qps=100\nthrottling_duration=1s\n",
                     "namedserverfilter": "match01=^select\ntarget01=db1\n",
                     "regexfilter": "match=a\nreplace=b\n",
                     "tee": "target=RW\n"}.get(module, "")
    text += f"""
[RW]
type=service
router=readwritesplit
servers=db1
user=u
password=p

[RCR]
type=service
router=readconnroute
servers=db1
user=u
password=p

[RW-Listener]
type=listener
service=RW
address={st.HOST}
port={RW_PORT}
"""
    cfg = run / "sluice.cnf"
    cfg.write_text(text.replace("servers=db1\n", "servers=db1\n", 1))
    daemon = px.Daemon(st.sluice_argv("start", cfg), run / "proxy.log",
                       st.sluice_env())
    try:
        daemon.wait_ports([ADMIN, RW_PORT])
        specs = {}
        tables = {t for _c, _n, t, _m in SECTIONS}
        tables |= {m for _c, _n, _t, m in SECTIONS if m}
        for t in sorted(tables):
            status, doc = px.admin_rest(ADMIN, "GET", f"maxscale/modules/{t}")
            assert status == 200, (t, doc)
            specs[t] = doc["data"]["attributes"]["parameters"]
        status, doc = px.admin_rest(ADMIN, "GET", "maxscale/modules")
        loaded = {m["id"].lower() for m in doc["data"]}
    finally:
        assert daemon.stop() == []
    # every module this instance loaded is one SECTIONS covers
    assert loaded <= tables, loaded - tables
    return specs


def test_every_supported_parameter_visible_in_rest(tmp_path, certs):
    specs = bootstrap_specs(tmp_path, certs)
    run = tmp_path / "every"
    prepare_files(run)
    vals = values(run, certs)
    expected = {}           # (collection, object) -> {name: value}
    missing = []
    text = ""
    for coll, obj, table, module in SECTIONS:
        params = {}
        if coll != "maxscale":
            params["type"] = {"servers": "server", "services": "service",
                              "listeners": "listener", "monitors": "monitor",
                              "filters": "filter"}[coll]
        for t in (table, module):
            if t is None:
                continue
            for spec in specs[t]:
                name = spec["name"]
                if (spec["status"] != "supported" or (table, name) in EXCLUDED
                        or (t, name) in EXCLUDED):
                    continue
                if spec.get("deprecated"):
                    continue
                only = ONLY_ON.get((t, name))
                if only is not None and obj not in only:
                    continue
                if name == "module" and coll in ("monitors", "filters"):
                    params[name] = module
                    continue
                if name == "router" and coll == "services":
                    params[name] = module
                    continue
                v = non_default(spec, t, obj, vals)
                if v is None:
                    missing.append(f"{t}.{name}")
                    continue
                assert v != spec.get("default_value"), (t, name)
                params[name] = v
        expected[(coll, obj)] = params
        head = "[maxscale]" if coll == "maxscale" else f"[{obj}]"
        text += head + "\n" + "".join(f"{k}={v}\n" for k, v in
                                      params.items()) + "\n"
    assert not missing, ("supported parameters with no non-default value "
                         f"in this test: {sorted(set(missing))}")
    cfg = run / "sluice.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("check", cfg)
    assert status == 0, out
    daemon = px.Daemon(st.sluice_argv("start", cfg), run / "proxy.log",
                       st.sluice_env())
    try:
        daemon.wait_ports([ADMIN, RW_PORT])
        checked = 0
        wrong = []
        for (coll, obj), params in expected.items():
            path = "maxscale" if coll == "maxscale" else f"{coll}/{obj}"
            shown = https_get(path, certs / "ca.pem")["attributes"][
                "parameters"]
            for name, v in params.items():
                if name == "type":
                    continue
                want = "*****" if "password" in name or name in (
                    "monitorpw",) else v
                got = shown.get(name)
                if isinstance(got, bool):
                    got = "true" if got else "false"
                if got != want:
                    wrong.append(f"{path} {name}: set {v!r}, REST {got!r}")
                checked += 1
        assert not wrong, "\n".join(wrong)
        print(f"{checked} parameter values read back")
        assert checked > 200, checked
    finally:
        assert daemon.stop() == []


def test_config_check_creates_filter_and_monitor_instances(tmp_path):
    """What a filter or monitor checks only when it creates its instance
    (throttlefilter's max_qps * sampling_duration, mariadbmon's script) is
    refused by --config-check too, naming the section's line. Before, the
    check passed and the start-up failed."""
    run = tmp_path
    for sub in ("log", "data", "persist"):
        (run / sub).mkdir()
    text = px.global_section(run, ADMIN, threads=1) + f"""
[db1]
type=server
address={st.HOST}
port={DEAD}

[Mon]
type=monitor
module=mariadbmon
servers=db1
user=u
password=p
script=/nonexistent/notify.sh

[Throttle]
type=filter
module=throttlefilter
max_qps=1
throttling_duration=1s
"""
    cfg = run / "sluice.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("check", cfg)
    lines = text.splitlines()
    assert status != 0, out
    assert (f"{cfg}:{lines.index('[Throttle]') + 1}: filter module "
            "'throttlefilter' refused to create filter 'Throttle'") in out
    assert "max_qps * sampling_duration" in out
    assert (f"{cfg}:{lines.index('[Mon]') + 1}: monitor module 'mariadbmon' "
            "refused to create monitor 'Mon'") in out
    assert "parameter 'script'" in out
