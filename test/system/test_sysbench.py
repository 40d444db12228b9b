# SPDX-License-Identifier: Apache-2.0
"""sysbench oltp_read_only through Sluice, over TCP (Primary-Service) and
over a unix-socket listener (Replica-Service): no errors, no reconnects,
queries answered. sysbench uses binary prepared statements, transactions
and 8 concurrent connections. Slow: SLUICE_SYSBENCH_TIME seconds (30) per
run; skipped with SLUICE_SKIP_SLOW=1."""

import os
import re
import subprocess

import pytest

import sluicetest as st
from proxy import running_proxy

pytestmark = pytest.mark.slow

PRIMARY_PORT, REPLICA_PORT = st.port(4140), st.port(4141)
DURATION = int(os.environ.get("SLUICE_SYSBENCH_TIME", "30"))
TABLES, TABLE_SIZE = 4, 10000


def sysbench(command, *conn_args, timeout):
    argv = ["sysbench", "oltp_read_only", f"--tables={TABLES}",
            f"--table-size={TABLE_SIZE}", f"--mysql-user={st.APP_USER}",
            f"--mysql-password={st.APP_PASSWORD}", "--mysql-db=sbtest",
            *conn_args, command]
    return subprocess.run(argv, capture_output=True, text=True,
                          timeout=timeout)


def parse(output):
    """The counters of sysbench 1.0's "SQL statistics" block."""
    stats = {}
    for key in ("queries", "transactions", "ignored errors", "reconnects"):
        m = re.search(rf"^\s*{key}:\s+(\d+)\s+\(([\d.]+) per sec\.\)",
                      output, re.M)
        if m:
            stats[key] = (int(m.group(1)), float(m.group(2)))
    return stats


@pytest.fixture(scope="module")
def tables():
    direct = ["--mysql-host=127.0.0.1", f"--mysql-port={st.SERVERS[1]}"]
    sysbench("cleanup", *direct, timeout=120)
    proc = sysbench("prepare", *direct, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    st.wait_replicated(timeout=60)


@pytest.fixture(scope="module")
def proxy(tables, tmp_path_factory):
    yield from running_proxy(tmp_path_factory, PRIMARY_PORT, REPLICA_PORT,
                             with_socket=True)


def run_and_check(*conn_args):
    proc = sysbench("run", "--threads=8", f"--time={DURATION}",
                    "--report-interval=0", *conn_args,
                    timeout=DURATION + 120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "FATAL" not in out, out
    stats = parse(proc.stdout)
    assert set(stats) == {"queries", "transactions", "ignored errors",
                          "reconnects"}, out
    assert stats["ignored errors"][0] == 0, out
    assert stats["reconnects"][0] == 0, out
    assert stats["queries"][0] > 0 and stats["queries"][1] > 0, out
    # oltp_read_only: 14 queries + BEGIN/COMMIT per transaction.
    assert stats["queries"][0] >= 14 * stats["transactions"][0], out
    return stats


def test_oltp_read_only_tcp(proxy):
    run_and_check("--mysql-host=127.0.0.1",
                  f"--mysql-port={proxy.primary_port}")


def test_oltp_read_only_unix_socket(proxy):
    run_and_check(f"--mysql-socket={proxy.socket}")
