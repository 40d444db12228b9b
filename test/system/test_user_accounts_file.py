# SPDX-License-Identifier: Apache-2.0
"""A service's user_accounts_file (docs/authentication.md): accounts read
from MaxScale's JSON file, added to those loaded from the servers
(user_accounts_file_usage=add_when_load_ok) or used alone
(file_only_always, the servers are never asked for accounts).

Accounts created here on the primary (replicated, dropped after):

  in_T    'inpw'  '%'          listed in both proxies' files
  out_T   'outpw' '%'          not in the files
  bad_T   'badpw' '%'          listed with the hash of another password
  host_T  'hostpw' '127.0.0.1' listed in the add proxy's file as
                               host_T@'127.0.0.2'

The clients connect to Sluice from 127.0.0.2 (bind_address), so no server
account of host_T matches them there: only the file's entry lets them in,
and the servers then see Sluice's connection from 127.0.0.1, which their
account allows. `SELECT CURRENT_USER(), @@server_id` shows the backend
login. Every login test fails on a Sluice without the file (the
parameters were refused); the file-only refusals would pass on a Sluice
that ignored the file, so they are paired with the file's logins."""

import base64
import json
import urllib.error
import urllib.request
import uuid

import pymysql
import pytest

import proxy as px
import sluicetest as st

pytestmark = pytest.mark.skipif(px.PROXY != "sluice",
                                reason="Sluice's own accounts")

ONLY_PRIMARY, ONLY_REPLICA = st.port(5760), st.port(5761)
ADD_PRIMARY, ADD_REPLICA = st.port(5762), st.port(5763)
ADD_ADMIN = st.port(5764)
PW = {"in": "inpw", "out": "outpw", "bad": "badpw", "host": "hostpw"}
CLIENT = "127.0.0.2"
SQL = "SELECT CURRENT_USER(), @@server_id"


def native_hash(password):
    with st.root(st.PRIMARY_ID) as conn:
        return st.scalar(conn, "SELECT PASSWORD(%s)", (password,))


@pytest.fixture(scope="module")
def users():
    tag = uuid.uuid4().hex[:6]
    names = {k: f"uf{k}_{tag}" for k in PW}
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        for key, pw in PW.items():
            host = "127.0.0.1" if key == "host" else "%"
            cur.execute(f"CREATE USER '{names[key]}'@'{host}' IDENTIFIED "
                        f"BY '{pw}'")
            cur.execute(f"GRANT SELECT ON test.* TO '{names[key]}'@'{host}'")
    st.wait_replicated()
    yield names
    with st.root(st.PRIMARY_ID) as conn, conn.cursor() as cur:
        for key, name in names.items():
            host = "127.0.0.1" if key == "host" else "%"
            cur.execute(f"DROP USER IF EXISTS '{name}'@'{host}'")
    st.wait_replicated()


def only_file(names):
    return {
        "user": [
            # the readiness check logs in as the application user
            {"user": st.APP_USER, "host": "%",
             "password": native_hash(st.APP_PASSWORD)},
            {"user": names["in"], "host": "%",
             "password": native_hash(PW["in"]),
             "plugin": "mysql_native_password"},
            {"user": names["bad"], "host": "%",
             "password": native_hash("not-" + PW["bad"])},
            {"user": "somerole", "host": "", "is_role": True},
        ],
        "db": [{"user": names["in"], "host": "%", "db": "test"}],
        "roles_mapping": [],
    }


def add_file(names):
    return {
        "user": [
            {"user": names["host"], "host": CLIENT,
             "password": native_hash(PW["host"]), "global_db_priv": True},
            # the servers' bad_T@'%' wins over this one
            {"user": names["bad"], "host": "%",
             "password": native_hash("not-" + PW["bad"])},
        ],
    }


def start(run_dir, primary, replica, file, usage, admin=None):
    text = px.sluice_config(run_dir, primary, replica)
    if admin:
        text = text.replace("admin_enabled=false",
                            f"admin_host={st.HOST}\nadmin_port={admin}")
    for svc in ("Primary-Service", "Replica-Service"):
        text = text.replace(f"[{svc}]\n", f"[{svc}]\n"
                            f"user_accounts_file={file}\n"
                            f"user_accounts_file_usage={usage}\n", 1)
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    return px.start_text(run_dir, text, primary, replica,
                         [primary, replica] + ([admin] if admin else []))


@pytest.fixture(scope="module")
def only_proxy(users, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("proxy-usersfile-only")
    file = run_dir / "users.json"
    file.write_text(json.dumps(only_file(users), indent=4))
    prx = start(run_dir, ONLY_PRIMARY, ONLY_REPLICA, file,
                "file_only_always")
    prx.accounts_file = file
    yield from px.serve(prx)


@pytest.fixture(scope="module")
def add_proxy(users, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("proxy-usersfile-add")
    file = run_dir / "users.json"
    file.write_text(json.dumps(add_file(users), indent=4))
    prx = start(run_dir, ADD_PRIMARY, ADD_REPLICA, file, "add_when_load_ok",
                ADD_ADMIN)
    prx.users = users
    yield from px.serve(prx)


def login(port, user, password):
    """(CURRENT_USER(), @@server_id) of a login from 127.0.0.2."""
    with st.connect(port, user=user, password=password,
                    bind_address=CLIENT) as conn:
        with conn.cursor() as cur:
            cur.execute(SQL)
            cu, sid = cur.fetchone()
    return cu, int(sid)


def refused(port, user, password):
    with pytest.raises(pymysql.err.OperationalError) as exc:
        login(port, user, password)
    return exc.value.args[0]


def test_file_only_account_logs_in(only_proxy, users):
    assert login(ONLY_PRIMARY, users["in"], PW["in"]) == \
        (f"{users['in']}@%", st.PRIMARY_ID)
    cu, sid = login(ONLY_REPLICA, users["in"], PW["in"])
    assert cu == f"{users['in']}@%" and sid in st.REPLICA_IDS


def test_file_only_never_asks_the_servers(only_proxy, users):
    """out_T exists on every server, with that password: refused by Sluice
    because the file does not list it."""
    assert refused(ONLY_PRIMARY, users["out"], PW["out"]) == 1045
    # the servers do take it (so the refusal is Sluice's)
    with st.connect(st.SERVERS[st.PRIMARY_ID], user=users["out"],
                    password=PW["out"]) as conn:
        assert st.server_id(conn) == st.PRIMARY_ID


def test_file_hash_decides(only_proxy, users):
    """bad_T's server password is refused: the file's hash is another's."""
    assert refused(ONLY_PRIMARY, users["bad"], PW["bad"]) == 1045


def test_file_is_read_again_on_reload(only_proxy, users):
    """An account added to the file logs in once the accounts are loaded
    again (a failed login triggers the reload)."""
    doc = only_file(users)
    doc["user"].append({"user": users["out"], "host": "%",
                        "password": native_hash(PW["out"])})
    tmp = only_proxy.accounts_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(only_proxy.accounts_file)
    try:
        st.wait_until(lambda: _logs_in(ONLY_PRIMARY, users["out"],
                                       PW["out"]), 15, interval=0.5,
                      what="the edited file's account to log in")
        assert login(ONLY_PRIMARY, users["out"], PW["out"]) == \
            (f"{users['out']}@%", st.PRIMARY_ID)
    finally:
        only_proxy.accounts_file.write_text(json.dumps(only_file(users)))


def test_bad_file_at_reload_keeps_the_accounts(only_proxy, users):
    """A file broken while Sluice runs fails that load: the accounts
    loaded before stay (out_T, from the file as it was, logs in), the
    error is logged, and the fixed file (without out_T) is used at the
    next load."""
    good = json.dumps(only_file(users))
    with_out = only_file(users)
    with_out["user"].append({"user": users["out"], "host": "%",
                             "password": native_hash(PW["out"])})
    only_proxy.accounts_file.write_text(json.dumps(with_out))
    try:
        st.wait_until(lambda: _logs_in(ONLY_PRIMARY, users["out"],
                                       PW["out"]), 15, interval=0.5,
                      what="out_T from the file to log in")
        only_proxy.accounts_file.write_text('{"user": [{"user": "x"}]}')
        # an unknown user's failed login reloads the accounts
        assert refused(ONLY_PRIMARY, "nosuch_" + users["out"], "x") == 1045
        st.wait_until(lambda: "cannot load user accounts: "
                      f"user_accounts_file '{only_proxy.accounts_file}' "
                      'user[0]: "host" is missing' in only_proxy.daemon
                      .log_path.read_text(errors="replace"), 10,
                      what="the load error in the log")
        assert login(ONLY_PRIMARY, users["out"], PW["out"]) == \
            (f"{users['out']}@%", st.PRIMARY_ID)
    finally:
        only_proxy.accounts_file.write_text(good)
    # another failed login reloads the fixed file, which does not list
    # out_T (had this load failed too, out_T would still log in)
    assert refused(ONLY_PRIMARY, "nosuch_" + users["out"], "x") == 1045
    assert refused(ONLY_PRIMARY, users["out"], PW["out"]) == 1045


def _logs_in(port, user, password):
    try:
        login(port, user, password)
        return True
    except pymysql.err.OperationalError:
        return False


def test_add_keeps_server_accounts(add_proxy, users):
    for key in ("in", "out"):
        assert login(ADD_PRIMARY, users[key], PW[key]) == \
            (f"{users[key]}@%", st.PRIMARY_ID)


def test_add_file_account_with_its_own_host(add_proxy, users):
    """host_T@'127.0.0.2' exists only in the file: the client from
    127.0.0.2 gets in, and the servers log it in as host_T@127.0.0.1."""
    assert login(ADD_PRIMARY, users["host"], PW["host"]) == \
        (f"{users['host']}@127.0.0.1", st.PRIMARY_ID)
    assert refused(ADD_PRIMARY, users["host"], "wrong") == 1045


def test_add_server_account_wins(add_proxy, users):
    """bad_T is on the servers and in the file: the servers' password."""
    assert login(ADD_PRIMARY, users["bad"], PW["bad"]) == \
        (f"{users['bad']}@%", st.PRIMARY_ID)


def test_without_file_the_host_account_is_refused(only_proxy, users):
    """The control for the test above: where the file does not list
    host_T@'127.0.0.2', Sluice refuses the client from 127.0.0.2."""
    assert refused(ONLY_PRIMARY, users["host"], PW["host"]) == 1045


# ---- the REST API ----

def rest(method, path, body=None):
    """(status, parsed JSON or None) from the add proxy's REST API."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://{st.HOST}:{ADD_ADMIN}/v1{path}",
                                 data=data, method=method)
    req.add_header("Authorization", "Basic " +
                   base64.b64encode(b"admin:mariadb").decode())
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text else None


def texts(doc):
    """Every string in a JSON document, joined (the error messages)."""
    if isinstance(doc, dict):
        return " ".join(texts(v) for v in doc.values())
    if isinstance(doc, list):
        return " ".join(texts(v) for v in doc)
    return doc if isinstance(doc, str) else ""


def test_rest_refuses_a_bad_file(add_proxy):
    """PATCH and POST check the file as the configuration check does (a
    REST path lies under logdir)."""
    bad = add_proxy.run_dir / "log" / "bad-users.json"
    bad.write_text(json.dumps({"user": [{"user": "x"}]}))
    good = add_proxy.run_dir / "log" / "good-users.json"
    good.write_text(json.dumps({"user": []}))
    status, doc = rest("PATCH", "/services/Primary-Service", {"data": {
        "attributes": {"parameters": {"user_accounts_file": str(bad)}}}})
    assert status == 400, doc
    assert (f"parameter 'user_accounts_file' in service 'Primary-Service': "
            f"'{bad}' user[0]: \"host\" is missing" in texts(doc)), doc
    status, doc = rest("POST", "/services", {"data": {
        "id": "UF-New", "type": "services", "attributes": {
            "router": "readconnroute", "parameters": {
                "servers": "db1", "user": st.SERVICE_USER,
                "password": st.SERVICE_PASSWORD,
                "user_accounts_file": str(bad)}}}})
    assert status == 400, doc
    assert 'user[0]: "host" is missing' in texts(doc), doc
    status, doc = rest("POST", "/services", {"data": {
        "id": "UF-Good", "type": "services", "attributes": {
            "router": "readconnroute", "parameters": {
                "servers": "db1", "user": st.SERVICE_USER,
                "password": st.SERVICE_PASSWORD,
                "user_accounts_file": str(good)}}}})
    assert status in (200, 201, 204), doc
    rest("DELETE", "/services/UF-Good")
    # the refused PATCH changed nothing: the file's account still works
    assert login(ADD_PRIMARY, add_proxy.users["host"], PW["host"])[1] == \
        st.PRIMARY_ID
    # a good file is saved for the next start (as MaxScale's, the
    # parameters are not changed at run time)
    status, doc = rest("PATCH", "/services/Replica-Service", {"data": {
        "attributes": {"parameters": {"user_accounts_file": str(good)}}}})
    assert status == 200, doc
    assert "user_accounts_file" in doc["meta"]["restart_required"], doc


# ---- refused configurations (sluice --config-check) ----

def check_config(tmp_path, file_text=None, usage=None, missing=False):
    run_dir = tmp_path
    file = tmp_path / "users.json"
    if file_text is not None:
        file.write_text(file_text)
    text = px.sluice_config(run_dir, ONLY_PRIMARY, ONLY_REPLICA)
    setting = "" if file_text is None and not missing \
        else f"user_accounts_file={file}\n"
    if usage:
        setting += f"user_accounts_file_usage={usage}\n"
    text = text.replace("[Primary-Service]\n",
                        "[Primary-Service]\n" + setting, 1)
    cfg = tmp_path / "t.cnf"
    cfg.write_text(text)
    status, out = px.run_sluice("check", cfg)
    return cfg, text, file, status, out


def line_of(text, prefix):
    return text.splitlines().index(
        next(ln for ln in text.splitlines() if ln.startswith(prefix))) + 1


def test_malformed_json_refused(tmp_path):
    cfg, text, file, status, out = check_config(
        tmp_path, '{\n  "user": [\n    {"user": "a", "host": "%",}\n  ]\n}\n')
    assert status == px.CONFIG_REFUSED, out
    line = line_of(text, "user_accounts_file=")
    assert (f"{cfg}:{line}: parameter 'user_accounts_file' in service "
            f"'Primary-Service': '{file}' invalid JSON at line 3 column"
            in out), out


@pytest.mark.parametrize("doc,why", [
    ({"user": [{"user": "a", "host": "%"}, {"user": "b"}]},
     'user[1]: "host" is missing'),
    ({"db": [{"host": "%", "db": "test"}]}, 'db[0]: "user" is missing'),
    ({"user": [{"user": "a", "host": "%", "pasword": "*00"}]},
     'user[0]: unknown field "pasword"'),
    ({"user": [{"user": "a", "host": "%", "password": "secret"}]},
     "user[0]: the password must be a mysql_native_password hash"),
    ({"users": []}, 'unknown member "users"'),
    ([], "the file is not a JSON object"),
])
def test_malformed_entry_refused(tmp_path, doc, why):
    cfg, text, file, status, out = check_config(tmp_path, json.dumps(doc))
    assert status == px.CONFIG_REFUSED, out
    line = line_of(text, "user_accounts_file=")
    assert (f"{cfg}:{line}: parameter 'user_accounts_file' in service "
            f"'Primary-Service': '{file}' {why}" in out), out


def test_missing_file_refused(tmp_path):
    cfg, text, file, status, out = check_config(tmp_path, missing=True)
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, 'user_accounts_file=')}: parameter "
            f"'user_accounts_file' in service 'Primary-Service': '{file}' "
            "cannot be read" in out), out


def test_file_only_needs_a_file(tmp_path):
    cfg, text, _, status, out = check_config(tmp_path,
                                             usage="file_only_always")
    assert status == px.CONFIG_REFUSED, out
    assert (f"{cfg}:{line_of(text, 'user_accounts_file_usage=')}: "
            "parameter 'user_accounts_file_usage' in service "
            "'Primary-Service': user_accounts_file_usage=file_only_always "
            "needs user_accounts_file" in out), out


def test_unknown_usage_refused(tmp_path):
    cfg, text, _, status, out = check_config(tmp_path, '{}',
                                             usage="when_server_ok")
    assert status == px.CONFIG_REFUSED, out
    assert "user_accounts_file_usage" in out and "when_server_ok" in out, out


def test_good_file_loads(tmp_path):
    _, _, _, status, out = check_config(tmp_path, json.dumps({
        "user": [{"user": "a", "host": "%", "password": "*" + "A" * 40,
                  "plugin": "mysql_native_password", "is_role": False,
                  "super_priv": False, "default_role": ""}],
        "db": [{"user": "a", "host": "%", "db": "test"}],
        "roles_mapping": [{"user": "a", "host": "%", "role": "r"}]}))
    assert status == 0, out
