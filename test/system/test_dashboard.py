# SPDX-License-Identifier: Apache-2.0
"""The web dashboard in headless Chromium (Debian's chromium and
chromium-driver, driven by selenium from PyPI in a venv under
BUILD_DIR/browser): it logs in, shows the three servers with the roles
mariadbmon gave them, its QPS figure moves under load, keyboard focus
reaches every control in order, the main text and controls have a
contrast of at least 4.5:1, a statement text is shown as text (no HTML
from the digest table), and a switchover started from the page changes
the roles. The test switches db1 back to primary at the end, whatever
happened. Screenshots go to BUILD_DIR/test-artifacts/dashboard/.

Ports st.port(5064) admin, st.port(5069) RW-Service."""

import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

import sluicetest as st
from proxy import admin_rest, Daemon, global_section, mariadbmon_section, \
    server_sections

pytestmark = pytest.mark.sluice_only

ADMIN = st.port(5064)
RW = st.port(5069)
SELENIUM = "selenium==4.27.1"
VENV = st.BUILD_DIR / "browser" / "venv"
ARTIFACTS = st.BUILD_DIR / "test-artifacts" / "dashboard"


def config(run_dir):
    servers = ",".join(f"db{sid}" for sid in st.SERVERS)
    text = global_section(
        run_dir, ADMIN,
        extra=f"admin_dashboard_dir={st.ROOT / 'dashboard'}")
    text += server_sections()
    text += mariadbmon_section(servers, params="switchover_timeout=20s")
    text += f"""
[RW-Service]
type=service
router=readwritesplit
servers={servers}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}

[RW-Listener]
type=listener
service=RW-Service
protocol=MariaDBClient
address={st.HOST}
port={RW}
"""
    return text


def rest(method, path):
    return admin_rest(ADMIN, method, path, timeout=120)


def roles():
    status, doc = rest("GET", "servers")
    assert status == 200
    out = {}
    for s in doc["data"]:
        state = s["attributes"]["state"]
        out[s["id"]] = ("primary" if "Master" in state else
                        "replica" if "Slave" in state else "other")
    return out


def normal_roles():
    return roles() == {"db1": "primary", "db2": "replica", "db3": "replica"}


@pytest.fixture(scope="module")
def sluice(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("dashboard")
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir()
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(config(run_dir))
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                    st.sluice_env())
    try:
        daemon.wait_ports([ADMIN, RW])
        st.wait_until(normal_roles, 20, what="db1 primary, db2/db3 replicas")
        yield daemon
    finally:
        try:
            if not normal_roles():
                rest("POST", "maxscale/modules/mariadbmon/switchover?"
                     "Cluster-Monitor&db1")
                st.wait_until(normal_roles, 60, what="db1 primary again")
        finally:
            problems = daemon.stop()
            assert not problems, problems


def _selenium():
    stamp = VENV / "selenium-installed"
    if not stamp.exists() or stamp.read_text() != SELENIUM:
        subprocess.run(["/usr/bin/python3", "-m", "venv",
                        "--system-site-packages", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "python3"), "-m", "pip",
                        "install", "--quiet", "--disable-pip-version-check",
                        SELENIUM], check=True)
        stamp.write_text(SELENIUM)
    site = next((VENV / "lib").glob("python3*/site-packages"))
    if str(site) not in sys.path:
        sys.path.insert(0, str(site))
    from selenium import webdriver
    return webdriver


@pytest.fixture(scope="module")
def browser():
    webdriver = _selenium()
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu",
                "--window-size=1400,1400", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service("/usr/bin/chromedriver"),
                           options=opts)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield drv
    drv.quit()


def shot(drv, name):
    drv.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def table_roles(drv):
    """{server: role} as the page shows them (read in one script, so a
    refresh cannot land half-way)."""
    return drv.execute_script("""
        const out = {};
        for (const tr of document.querySelectorAll('#servers tbody tr'))
            out[tr.dataset.server] = tr.querySelector('td.role').textContent;
        return out;""")


def login(drv):
    from selenium.webdriver.common.by import By
    drv.get(f"http://{st.HOST}:{ADMIN}/")
    if drv.find_element(By.ID, "user").is_displayed():
        drv.find_element(By.ID, "user").send_keys("admin")
        drv.find_element(By.ID, "password").send_keys("mariadb")
        drv.find_element(By.CSS_SELECTOR, "#login button").click()
    st.wait_until(lambda: len(table_roles(drv)) == 3, 15,
                  what="three servers on the page")


def test_static_files_and_headers(sluice):
    for path, ctype in (("/", "text/html"),
                        ("/dashboard/app.js", "text/javascript"),
                        ("/dashboard/style.css", "text/css")):
        with urllib.request.urlopen(f"http://{st.HOST}:{ADMIN}{path}",
                                    timeout=10) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith(ctype)
            assert resp.headers["X-Frame-Options"] == "DENY"
    # No data without an account, and nothing else from the file system.
    for path, code in (("/v1/servers", 401), ("/dashboard/../sluice.cnf",
                                               404),
                       ("/dashboard/index.htm", 404)):
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(f"http://{st.HOST}:{ADMIN}{path}",
                                   timeout=10)
        assert exc.value.code in (code, 401), path


def test_dashboard_topology_load_keyboard_contrast(sluice, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    drv = browser
    with st.connect(RW) as c, c.cursor() as cur:
        cur.execute("SELECT 1 AS `<b id=xss>x</b>`")
    login(drv)
    assert table_roles(drv) == {"db1": "primary", "db2": "replica",
                                "db3": "replica"}
    shot(drv, "1-topology")

    # QPS moves under load.
    assert float(drv.find_element(By.ID, "total-qps").text) < 1
    stop = threading.Event()

    def load():
        with st.connect(RW) as c, c.cursor() as cur:
            while not stop.is_set():
                cur.execute("SELECT @@server_id")
    workers = [threading.Thread(target=load) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        st.wait_until(lambda: float(drv.find_element(
            By.ID, "total-qps").text) > 20, 15, what="QPS above 20")
        shot(drv, "2-under-load")
    finally:
        stop.set()
        for w in workers:
            w.join()

    # The statement text is shown as text, not markup.
    st.wait_until(lambda: "<b id=xss>x</b>" in drv.find_element(
        By.ID, "queries").text, 10, what="the digest on the page")
    assert drv.find_elements(By.ID, "xss") == []

    # Keyboard: Tab walks through every control, in order, visibly.
    # Start at the page's first stop (the skip link), then Tab on.
    drv.execute_script("document.querySelector('a.skip').focus()")
    assert drv.switch_to.active_element.text == "Skip to content"
    seen = []
    for _ in range(60):
        drv.switch_to.active_element.send_keys(Keys.TAB)
        el = drv.switch_to.active_element
        seen.append(el.get_attribute("id") or el.text[:40])
        outline = el.value_of_css_property("outline-style")
        assert outline != "none", (seen, outline)
        if el.get_attribute("id") == "sw-go":
            break
    assert "Set maintenance" in seen and "sw-target" in seen, seen
    assert seen.index("Set maintenance") < seen.index("sw-target") < \
        seen.index("sw-go")

    # Contrast of the main text and controls (WCAG 2 formula).
    ratios = drv.execute_script("""
        function lum(c) {
            const v = c.match(/[\\d.]+/g).slice(0, 3).map(Number)
                .map(x => x / 255)
                .map(x => x <= 0.03928 ? x / 12.92
                                       : Math.pow((x + 0.055) / 1.055, 2.4));
            return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
        }
        function bg(el) {
            for (; el; el = el.parentElement) {
                const b = getComputedStyle(el).backgroundColor;
                if (b && !/rgba\\(.*, 0\\)$/.test(b) && b !== 'transparent')
                    return b;
            }
            return 'rgb(255, 255, 255)';
        }
        const out = {};
        for (const sel of ['body', 'caption', '#servers th', '#servers td',
                           '#servers td button', 'th button', '#sw-go',
                           'header h1', '#queries td']) {
            const el = document.querySelector(sel);
            const a = lum(getComputedStyle(el).color), b = lum(bg(el));
            out[sel] = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        }
        return out;""")
    low = {k: v for k, v in ratios.items() if v < 4.5}
    assert not low, ratios


def test_switchover_from_the_page(sluice, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    drv = browser
    login(drv)
    assert table_roles(drv)["db1"] == "primary"
    Select(drv.find_element(By.ID, "sw-monitor")).select_by_value(
        "Cluster-Monitor")
    Select(drv.find_element(By.ID, "sw-target")).select_by_value("db2")
    drv.find_element(By.ID, "sw-go").click()
    st.wait_until(lambda: table_roles(drv) == {
        "db1": "replica", "db2": "primary", "db3": "replica"}, 60,
        what="db2 primary on the page")
    shot(drv, "3-after-switchover")
    assert roles()["db2"] == "primary"
    assert "Switchover to db2 done." in drv.find_element(By.ID,
                                                         "status").text
    with st.connect(RW) as c, c.cursor() as cur:
        cur.execute("SELECT @@server_id, @@read_only FOR UPDATE")
        assert cur.fetchone() == (2, 0)
    # Back to db1 (the fixture does it too if this fails half-way).
    status, doc = rest("POST", "maxscale/modules/mariadbmon/switchover?"
                       "Cluster-Monitor&db1")
    assert status in (200, 204), doc
    st.wait_until(normal_roles, 60, what="db1 primary again")
    st.wait_until(lambda: table_roles(drv)["db1"] == "primary", 10,
                  what="db1 primary on the page")
