# SPDX-License-Identifier: Apache-2.0
"""Bad input is refused cleanly.

Configs: a misspelled parameter, a missing mandatory parameter and a
reference to an unknown server each make both `sluice --config-check`
and a normal start exit non-zero, naming FILE:LINE and the parameter.

Clients: a client that sends garbage instead of its handshake response
gets an ERR packet and is disconnected, while a session opened before
keeps working and new sessions work.
"""

import random
import socket
import struct

import pytest

import sluicetest as st
from proxy import CONFIG_REFUSED, run_sluice, running_proxy, sluice_config

PRIMARY_PORT, REPLICA_PORT = st.port(4150), st.port(4151)
# Ports for the bad configs: nothing may ever listen there.
BAD_PRIMARY, BAD_REPLICA = st.port(4158), st.port(4159)


def write_bad_config(tmp_path, old, new):
    """The standard config with the line `old` replaced by `new` (which
    may be several lines); returns (path, 1-based line of new's first
    line, text)."""
    text = sluice_config(tmp_path, BAD_PRIMARY, BAD_REPLICA)
    assert old in text.splitlines(), old
    lines = text.splitlines()
    index = lines.index(old)
    lines[index:index + 1] = new.splitlines()
    path = tmp_path / "bad.cnf"
    path.write_text("\n".join(lines) + "\n")
    return path, index + 1


def section_line(path, section):
    lines = path.read_text().splitlines()
    return lines.index(f"[{section}]") + 1


def assert_refused(path, line, words):
    """check and start both refuse it (the documented exit status, no
    sanitizer report: run_sluice checks that), naming FILE:LINE and every
    word."""
    for mode in ("check", "start"):
        status, out = run_sluice(mode, path)
        assert status is not None, f"{mode}: still running after timeout"
        assert status == CONFIG_REFUSED, f"{mode}: exit status {status}\n{out}"
        assert f"{path.name}:{line}:" in out, (
            f"{mode}: no '{path.name}:{line}:' in output:\n{out}")
        for word in words:
            assert word in out, f"{mode}: '{word}' not in output:\n{out}"


@pytest.mark.sluice_only
def test_good_config_passes_check(tmp_path):
    path = tmp_path / "good.cnf"
    path.write_text(sluice_config(tmp_path, BAD_PRIMARY, BAD_REPLICA))
    status, out = run_sluice("check", path)
    assert status == 0, out


@pytest.mark.sluice_only
def test_misspelled_parameter(tmp_path):
    path, line = write_bad_config(tmp_path, "router_options=master",
                                  "router_optoins=master")
    assert_refused(path, line, ["router_optoins"])


@pytest.mark.sluice_only
def test_missing_mandatory_parameter(tmp_path):
    # A listener without service=: reported at its section header.
    path, _ = write_bad_config(tmp_path, "service=Primary-Service", "")
    assert_refused(path, section_line(path, "Primary-Listener"),
                   ["service"])


@pytest.mark.sluice_only
def test_unknown_server(tmp_path):
    text = sluice_config(tmp_path, BAD_PRIMARY, BAD_REPLICA)
    lines = text.splitlines()
    # The Replica-Service's servers= line names a server that is not
    # defined anywhere.
    index = lines.index("[Replica-Service]")
    index += next(i for i, l in enumerate(lines[index:])
                  if l.startswith("servers="))
    lines[index] = "servers=db1,db9,db3"
    path = tmp_path / "bad.cnf"
    path.write_text("\n".join(lines) + "\n")
    assert_refused(path, index + 1, ["servers", "db9"])


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    yield from running_proxy(tmp_path_factory, PRIMARY_PORT, REPLICA_PORT)


def read_packet(sock):
    """One MariaDB packet: (sequence, payload). b"" payload on EOF."""
    header = recv_exactly(sock, 4)
    if len(header) < 4:
        return None, b""
    length = header[0] | header[1] << 8 | header[2] << 16
    return header[3], recv_exactly(sock, length)


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def assert_closed(sock):
    """The peer closes: recv returns EOF (or a reset) within the timeout."""
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass


GARBAGE = {
    # A well-formed header with a random 64-byte payload.
    "random-payload": struct.pack("<I", 64)[:3] + b"\x01"
    + random.Random(1234).randbytes(64),
    # A handshake response far too short to hold the fixed fields.
    "short": b"\x03\x00\x00\x01\x05\xa6\x0f",
    # Zeroed capability flags: not even CLIENT_PROTOCOL_41.
    "zero-caps": b"\x20\x00\x00\x01" + b"\x00" * 32,
}


@pytest.mark.parametrize("garbage", sorted(GARBAGE))
def test_garbage_handshake_gets_error_and_close(proxy, garbage):
    with st.connect(proxy.primary_port) as before:
        assert st.server_id(before) == st.PRIMARY_ID
        with socket.create_connection((st.HOST, proxy.primary_port),
                                      timeout=10) as raw:
            seq, greeting = read_packet(raw)
            assert seq == 0 and greeting[:1] == b"\x0a", greeting[:16]
            raw.sendall(GARBAGE[garbage])
            seq, reply = read_packet(raw)
            assert reply[:1] == b"\xff", f"not an ERR packet: {reply!r}"
            code = struct.unpack("<H", reply[1:3])[0]
            assert 1000 <= code < 3000, code
            assert_closed(raw)
        # The session opened before still works ...
        assert st.server_id(before) == st.PRIMARY_ID
    # ... and so does a new one.
    with st.connect(proxy.primary_port) as after:
        assert st.server_id(after) == st.PRIMARY_ID


def test_client_vanishing_mid_handshake(proxy):
    """Connect, read the greeting, hang up: the proxy must shrug."""
    for _ in range(20):
        with socket.create_connection((st.HOST, proxy.primary_port),
                                      timeout=10) as raw:
            read_packet(raw)
    with st.connect(proxy.primary_port) as conn:
        assert st.server_id(conn) == st.PRIMARY_ID
