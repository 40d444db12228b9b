# SPDX-License-Identifier: Apache-2.0
"""Many sessions at once: 200 concurrent connections (half to each
service), all open at the same time, each running a few queries that check
where it was routed. Every one must succeed, under both event models."""

import threading

import pytest

import sluicetest as st
from proxy import running_proxy

PORTS = {"pinned": (st.port(4130), st.port(4131)),
         "shared": (st.port(4132), st.port(4133))}
CLIENTS = 200


@pytest.fixture(scope="module", params=sorted(PORTS))
def proxy(request, tmp_path_factory):
    primary, replica = PORTS[request.param]
    yield from running_proxy(tmp_path_factory, primary, replica,
                             event_model=request.param)


def test_200_concurrent_connections(proxy):
    barrier = threading.Barrier(CLIENTS, timeout=90)
    results = [None] * CLIENTS

    def client(i):
        primary = i % 2 == 0
        port = proxy.primary_port if primary else proxy.replica_port
        want = {st.PRIMARY_ID} if primary else st.REPLICA_IDS
        try:
            with st.connect(port, connect_timeout=30) as conn:
                ids = {st.server_id(conn)}
                assert st.scalar(conn, "SELECT %s", (i,)) == i
                barrier.wait()      # all 200 are open now
                ids.add(st.server_id(conn))
                assert st.scalar(conn, "SELECT CONNECTION_ID()") > 0
            assert len(ids) == 1 and ids <= want, ids
            results[i] = ("ok", ids.pop())
        except BaseException as exc:  # noqa: BLE001 - reported below
            barrier.abort()
            results[i] = ("error", repr(exc))

    threads = [threading.Thread(target=client, args=(i,), daemon=True)
               for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "clients hung"
    errors = [r for r in results if r is None or r[0] != "ok"]
    # The first real failure first: the others then see a broken barrier.
    errors.sort(key=lambda r: r is None or "BrokenBarrier" in r[1])
    assert not errors, f"{len(errors)} failed, e.g. {errors[:5]}"
    replica_ids = {r[1] for i, r in enumerate(results) if i % 2}
    assert replica_ids == st.REPLICA_IDS


def test_proxy_still_serves_after_the_burst(proxy):
    with st.connect(proxy.primary_port) as conn:
        assert st.server_id(conn) == st.PRIMARY_ID
    with st.connect(proxy.replica_port) as conn:
        assert st.server_id(conn) in st.REPLICA_IDS
