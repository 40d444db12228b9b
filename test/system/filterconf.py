# SPDX-License-Identifier: Apache-2.0
"""Helpers for the filter system tests (test_filter_*.py): start Sluice
with the sandbox's two standard services plus extra [sections] (filters,
services with filter chains, their listeners), optionally from a private
module directory holding the build's modules plus test-only ones."""

from pathlib import Path

import pytest

import sluicetest as st
from proxy import (Daemon, Proxy, _wait_ready, run_sluice, sluice_config,
                   stop_proxy)

SERVERS = ",".join(f"db{sid}" for sid in st.SERVERS)


def service(name, port, router="readconnroute", options="master",
            filters=None, extra=""):
    """A [name] service with a listener on port."""
    text = f"""
[{name}]
type=service
router={router}
servers={SERVERS}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
"""
    if options and router == "readconnroute":
        text += f"router_options={options}\n"
    if filters:
        text += f"filters={filters}\n"
    text += extra
    text += f"""
[{name}-Listener]
type=listener
service={name}
protocol=MariaDBClient
address={st.HOST}
port={port}
"""
    return text


def module_dir(base, extra_files=()):
    """A module directory: symlinks to every built module plus extra .so
    files (test modules, out-of-tree filters)."""
    d = Path(base) / "modules"
    d.mkdir(parents=True, exist_ok=True)
    for so in list(st.MODULE_DIR.glob("*.so")) + [Path(f)
                                                  for f in extra_files]:
        link = d / so.name
        if not link.exists():
            link.symlink_to(so.resolve())
    return d


def test_module(name):
    return st.BUILD_DIR / "test-modules" / f"lib{name}.so"


def config_text(run_dir, primary, replica, sections, modules=None,
                admin=None):
    """The config text; admin: the REST API's port (default: no API)."""
    text = sluice_config(run_dir, primary, replica, extra="\n" + sections)
    if admin is not None:
        text = text.replace("admin_enabled=false",
                            f"admin_host={st.HOST}\nadmin_port={admin}")
    if modules is not None:
        text = text.replace(f"module_dir={st.MODULE_DIR}",
                            f"module_dir={modules}")
    return text


def start(run_dir, primary, replica, sections, ports, modules=None,
          admin=None):
    """Start Sluice; wait for the standard services and `ports`."""
    run_dir = Path(run_dir)
    for sub in ("log", "data", "persist"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    cfg = run_dir / "sluice.cnf"
    cfg.write_text(config_text(run_dir, primary, replica, sections, modules,
                               admin))
    daemon = Daemon(st.sluice_argv("start", cfg), run_dir / "proxy.log",
                    st.sluice_env())
    proxy = Proxy(daemon, primary, replica, None, run_dir)
    try:
        daemon.wait_ports([primary, replica, *ports])
        _wait_ready(proxy)
    except BaseException:
        stop_proxy(proxy)
        raise
    return proxy


def running(tmp_path_factory, primary, replica, sections, ports,
            modules=None, admin=None):
    """Generator for a module fixture (see proxy.running_proxy); admin:
    the REST API's port (also waited for), default none."""
    run_dir = tmp_path_factory.mktemp(f"flt-{primary}")
    proxy = start(run_dir, primary, replica, sections,
                  [*ports, *([admin] if admin is not None else [])], modules,
                  admin)
    try:
        yield proxy
    finally:
        problems = stop_proxy(proxy)
    if problems:
        pytest.fail("proxy shutdown: " + "\n".join(problems), pytrace=False)


def check_config(tmp_path, sections):
    """Run `sluice check` on a config with sections: (status, output)."""
    for sub in ("log", "data", "persist"):
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
    cfg = tmp_path / "bad.cnf"
    cfg.write_text(config_text(tmp_path, st.port(4498), st.port(4499),
                               sections))
    return cfg, run_sluice("check", cfg)
