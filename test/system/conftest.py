# SPDX-License-Identifier: Apache-2.0
"""Fixtures and hooks for the system tests.

The sandbox cluster (scripts/sandbox) must already run: scripts/test
starts it, the tests never do; the session fixture `sandbox` checks it.
Each test module starts its own proxy (proxy.running_proxy) on its own
ports (41xx), so tests never collide with the Sluice that scripts/run
keeps on 4006/4008. Shared helpers: sluicetest.py (paths, accounts,
clients) and proxy.py (starting and stopping proxies).

Environment (scripts/test sets these; the defaults suit a checkout):
  SLUICE_BUILD_DIR   build tree (build/): bin/sluice, modules/, test-bin/
  SLUICE_BIN         the daemon binary
  SLUICE_SANDBOX     the sandbox directory (sandbox/)
  SLUICE_SKIP_SLOW=1 skip tests marked slow
  SLUICE_TEST_TIMEOUT=N  seconds one test may take (default 420; tests
                     marked slow get SLUICE_TEST_SLOW_TIMEOUT, default
                     2400): past it the test fails instead of hanging
  SLUICE_TEST_PROXY=haproxy  run the tests through HAProxy instead of
                     Sluice, to check the tests' own logic
"""

import os
import signal

import pytest

import sluicetest as st
from proxy import PROXY


# A hang must fail its test, never stall the run: every test gets a
# timeout marker (pytest-timeout, Debian's python3-pytest-timeout, which
# scripts/test installs), covering its setup (module fixtures start a
# proxy), call and teardown. Without the plugin, _alarm_timeout below does
# the same with SIGALRM. The deadlines stop waiting; they measure nothing.
TIMEOUT = int(os.environ.get("SLUICE_TEST_TIMEOUT", "420"))
SLOW_TIMEOUT = int(os.environ.get("SLUICE_TEST_SLOW_TIMEOUT", "2400"))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running (sysbench, "
                            "1 GiB result, 5000 connections); skipped with "
                            "SLUICE_SKIP_SLOW=1")
    config.addinivalue_line("markers", "release: checks only the release "
                            "build can make (RSS bounds, packages): relaxed "
                            "or skipped under a sanitizer; CI's split run "
                            "(scripts/test --split) runs these and the slow "
                            "tests in the release build, the rest under "
                            "ASan+UBSan only")
    config.addinivalue_line("markers", "sluice_only: needs Sluice itself; "
                            "skipped with SLUICE_TEST_PROXY=haproxy")
    if not config.pluginmanager.hasplugin("timeout"):
        config.addinivalue_line("markers", "timeout(seconds): fail the test "
                                "after that long (conftest.py fallback)")


def _is_slow(item):
    return "slow" in item.keywords


def pytest_collection_modifyitems(config, items):
    skip_slow = os.environ.get("SLUICE_SKIP_SLOW", "0") == "1"
    for item in items:
        if skip_slow and "slow" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="SLUICE_SKIP_SLOW=1"))
        if PROXY != "sluice" and "sluice_only" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=f"proxy is {PROXY}"))
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(
                SLOW_TIMEOUT if _is_slow(item) else TIMEOUT))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The fallback when pytest-timeout is missing: SIGALRM after the
    item's timeout fails whatever phase (setup, call, teardown) runs."""
    if item.config.pluginmanager.hasplugin("timeout"):
        yield
        return
    seconds = item.get_closest_marker("timeout").args[0]

    def expired(signum, frame):
        pytest.fail(f"Timeout: {item.nodeid} ran longer than {seconds}s "
                    "(SLUICE_TEST_TIMEOUT)", pytrace=True)
    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="session", autouse=True)
def sandbox():
    """Assert the sandbox cluster runs and replicates."""
    for sid, port in st.SERVERS.items():
        try:
            with st.connect(port) as conn:
                got = st.server_id(conn)
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"sandbox db{sid} (port {port}) unreachable: "
                        f"{exc!r}; start it with scripts/sandbox start",
                        pytrace=False)
        assert got == sid, f"port {port} has server_id {got}"
    for sid in st.REPLICA_IDS:
        with st.root(sid) as conn:
            running = st.scalar(conn, "SELECT VARIABLE_VALUE FROM "
                                "information_schema.GLOBAL_STATUS WHERE "
                                "VARIABLE_NAME = 'SLAVE_RUNNING'")
        assert running == "ON", f"db{sid}: replication not running"
    return st.SERVERS
