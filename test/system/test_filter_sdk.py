# SPDX-License-Identifier: Apache-2.0
"""The filter SDK end to end: install Sluice into a staging directory
(DESTDIR), build examples/filter out of tree with its own Makefile against
the staged headers and sluice.pc, load the module from module_dir and see
it answer its statement while others pass through. Also: bad filter
configurations fail at start naming FILE:LINE."""

import os
import shutil
import subprocess

import pytest

import filterconf as fc
import sluicetest as st
from proxy import CONFIG_REFUSED

pytestmark = pytest.mark.sluice_only

PRIMARY, REPLICA, EXAMPLE = st.port(4475), st.port(4476), st.port(4477)
EXAMPLE_SRC = st.ROOT / "examples" / "filter"


@pytest.fixture(scope="module")
def example_module(tmp_path_factory):
    base = tmp_path_factory.mktemp("sdk")
    stage = base / "stage"
    env = dict(os.environ, DESTDIR=str(stage))
    # the configured prefix (/usr by default), as the -dev package has it
    proc = subprocess.run(["cmake", "--install", str(st.BUILD_DIR)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (pc,) = stage.glob("usr/lib*/**/pkgconfig/sluice.pc") or \
        stage.glob("usr/lib/pkgconfig/sluice.pc")
    assert (stage / "usr/include/sluice/filter.h").exists()
    src = base / "src"
    shutil.copytree(EXAMPLE_SRC, src)
    env = dict(os.environ, PKG_CONFIG_PATH=str(pc.parent),
               PKG_CONFIG_SYSROOT_DIR=str(stage))
    proc = subprocess.run(["make", "-C", str(src)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # really out of tree: only the staged headers were on the include path
    assert f"-I{stage}/usr/include" in proc.stdout, proc.stdout
    assert str(st.ROOT / "include") not in proc.stdout
    return src / "libexamplefilter.so"


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, example_module):
    modules = fc.module_dir(tmp_path_factory.mktemp("sdkmods"),
                            [example_module])
    sections = """
[Example]
type=filter
module=examplefilter
greeting=hello from out of tree
"""
    sections += fc.service("Example-Service", EXAMPLE, filters="Example")
    yield from fc.running(tmp_path_factory, PRIMARY, REPLICA, sections,
                          [EXAMPLE], modules=modules)


def test_example_filter_answers_its_statement(proxy):
    with st.connect(EXAMPLE) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT example_greeting()")
            assert [d[0] for d in cur.description] == ["greeting"]
            assert cur.fetchall() == (("hello from out of tree",),)
        # everything else reaches the server
        assert st.server_id(conn) == st.PRIMARY_ID
    # the server itself has no such function: the filter answered
    with st.connect(PRIMARY) as conn, pytest.raises(Exception) as exc:
        st.scalar(conn, "SELECT example_greeting()")
    assert st.error_code(exc.value) in (1305, 1630), exc.value


def test_example_filter_with_the_mariadb_cli(proxy):
    proc = st.cli("SELECT example_greeting(); SELECT @@server_id",
                  port=EXAMPLE)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["hello from out of tree", "1"]


@pytest.mark.parametrize("section,message", [
    ("[Bad]\ntype=filter\nmodule=qlafilter\nfilebase=/tmp/x\n"
     "match=/unclosed(/\n", "match"),
    ("[Bad]\ntype=filter\nmodule=namedserverfilter\nmatch01=/x/\n"
     "target01=no_such_server\n", "unknown server 'no_such_server'"),
    ("[Bad]\ntype=filter\nmodule=regexfilter\nmatch=/x/\nreplace=y\n"
     "no_such_param=1\n", "no_such_param"),
    ("[Bad]\ntype=filter\nmodule=throttlefilter\nthrottling_duration=1s\n",
     "max_qps"),
])
def test_bad_filter_config_fails_with_file_and_line(tmp_path, section,
                                                    message):
    cfg, (status, out) = fc.check_config(tmp_path, section)
    assert status == CONFIG_REFUSED, (status, out)
    lines = cfg.read_text().splitlines()
    bad_lines = [i + 1 for i, l in enumerate(lines)
                 if l.startswith(("match", "target01", "no_such_param",
                                  "[Bad]"))]
    assert any(f"{cfg}:{n}" in out for n in bad_lines), out
    assert message in out, out
