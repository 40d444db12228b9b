# SPDX-License-Identifier: Apache-2.0
"""Hostile-client soak: for SLUICE_SOAK_TIME seconds (60), from loopback
only, 2,000 connections that stall in the handshake, 200 that send
garbage, 50 that send commands over max_allowed_packet and 50 that guess
passwords through COM_CHANGE_USER (test/system/hostile.py, from source
addresses 127.0.0.2 and up) -- while 16 well-behaved clients run sysbench
oltp_read_only through readwritesplit from 127.0.0.1.

What must hold:
- the well-behaved clients see no error and no reconnect and are not
  starved (at least 0.5x the throughput of the run without the attack;
  the target is 0.8x, a performance figure measured side by side here and
  printed, not asserted: the attacker shares the machine's two cores);
- Sluice's RSS stays under 256 MiB throughout;
- after the attack stops, Sluice's descriptor count is back to its
  baseline within the auth deadline (auth_timeout, 10 s) plus a margin;
- each attack got the answer it should: stallers closed by the proxy
  (auth_timeout) or refused (1040, the per-host cap), oversize commands
  1153, the guessing host blocked (1129).

Slow: skipped with SLUICE_SKIP_SLOW=1 (and so in the sanitizer pass)."""

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import sluicetest as st
from proxy import running_proxy

pytestmark = [pytest.mark.slow, pytest.mark.sluice_only]

PRIMARY_PORT, REPLICA_PORT = st.port(4960), st.port(4961)
RW_PORT = st.port(4962)
ATTACK_TIME = int(os.environ.get("SLUICE_SOAK_TIME", "60"))
BASELINE_TIME = 20
TABLES, TABLE_SIZE = 4, 10000
RSS_LIMIT = 256 * 1024 * 1024
HOSTILE = Path(__file__).with_name("hostile.py")
SERVERS = ",".join(f"db{sid}" for sid in st.SERVERS)

EXTRA = f"""
[Soak-Service]
type=service
router=readwritesplit
servers={SERVERS}
user={st.SERVICE_USER}
password={st.SERVICE_PASSWORD}
max_allowed_packet=4Mi

[Soak-Listener]
type=listener
service=Soak-Service
protocol=MariaDBClient
address=127.0.0.1
port={RW_PORT}
"""


def sysbench(command, *args, timeout):
    argv = ["sysbench", "oltp_read_only", f"--tables={TABLES}",
            f"--table-size={TABLE_SIZE}", f"--mysql-user={st.APP_USER}",
            f"--mysql-password={st.APP_PASSWORD}", "--mysql-db=sbtest",
            *args, command]
    return subprocess.run(argv, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    direct = ["--mysql-host=127.0.0.1", f"--mysql-port={st.SERVERS[1]}"]
    sysbench("cleanup", *direct, timeout=120)
    proc = sysbench("prepare", *direct, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    st.wait_replicated(timeout=60)
    yield from running_proxy(tmp_path_factory, PRIMARY_PORT, REPLICA_PORT,
                             extra=EXTRA)


def well_behaved(seconds):
    """16 threads of oltp_read_only through the soak service: QPS."""
    proc = sysbench("run", "--threads=16", f"--time={seconds}",
                    "--report-interval=0", "--mysql-host=127.0.0.1",
                    f"--mysql-port={RW_PORT}", timeout=seconds + 120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "FATAL" not in out, out
    for key in ("ignored errors", "reconnects"):
        m = re.search(rf"^\s*{key}:\s+(\d+)", proc.stdout, re.M)
        assert m and int(m.group(1)) == 0, f"{key}: {out}"
    m = re.search(r"^\s*queries:\s+\d+\s+\(([\d.]+) per sec\.\)",
                  proc.stdout, re.M)
    assert m, out
    return float(m.group(1))


def rss(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class Sampler(threading.Thread):
    """Sluice's peak RSS and descriptor count, twice a second."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak_rss, self.peak_fds = pid, 0, 0
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(0.5):
            self.peak_rss = max(self.peak_rss, rss(self.pid))
            self.peak_fds = max(self.peak_fds, fds(self.pid))


def test_hostile_clients_soak(proxy):
    pid = proxy.pid
    well_behaved(5)                              # warm up the pools
    base_qps = well_behaved(BASELINE_TIME)
    base_fds = fds(pid)
    cpu0 = cpu_seconds(pid)
    sampler = Sampler(pid)
    sampler.start()
    attack = subprocess.Popen(
        [sys.executable, str(HOSTILE), "--port", str(RW_PORT),
         "--seconds", str(ATTACK_TIME), "--user", st.APP_USER,
         "--password", st.APP_PASSWORD],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(5)                            # the attack is under way
        attacked_qps = well_behaved(ATTACK_TIME - 10)
        out, err = attack.communicate(timeout=ATTACK_TIME + 60)
    finally:
        if attack.poll() is None:
            attack.kill()
            attack.wait()
    assert attack.returncode == 0, err
    counts = json.loads(out.strip().splitlines()[-1])
    sluice_cpu = cpu_seconds(pid) - cpu0
    # within the auth deadline after the attack, the descriptors are back
    st.wait_until(lambda: fds(pid) <= base_fds + 2, 10 + 10,
                  what=f"descriptors back to {base_fds}")
    sampler.done.set()
    sampler.join()
    ratio = attacked_qps / base_qps
    print(f"soak: baseline {base_qps:.0f} qps, under attack "
          f"{attacked_qps:.0f} qps ({ratio:.2f}x); peak RSS "
          f"{sampler.peak_rss / 2**20:.0f} MiB; fds {base_fds} -> peak "
          f"{sampler.peak_fds} -> {fds(pid)}; Sluice CPU during the attack "
          f"{sluice_cpu:.1f} s; attackers: {counts}")
    assert sampler.peak_rss < RSS_LIMIT, sampler.peak_rss
    # every attack met its defence
    assert counts.get("staller_closed_by_proxy", 0) + \
        counts.get("staller_err_1040", 0) > 0, counts
    assert counts.get("oversize_err_1153", 0) > 0, counts
    assert counts.get("guess_err_1129", 0) + \
        counts.get("guesser_login_err_1129", 0) > 0, counts
    assert counts.get("garbage_closed_by_proxy", 0) > 0, counts
    # The 0.8x throughput target is a performance figure (measured and
    # quoted, see docs/security.md), not asserted: on a 2-core machine the
    # attacker, sysbench and three servers share the cores. What is
    # asserted is that the well-behaved clients are not starved.
    assert ratio >= 0.5, f"throughput under attack {ratio:.2f}x baseline"
