# SPDX-License-Identifier: Apache-2.0
"""Routing hints from filters. hintfilter (-- maxscale route to ...
comments) and namedserverfilter (matchNN/targetNN) are checked twice: the
hint itself through a test router that answers with the hint it received
(test/modules/testmod_hintecho.c), and its effect through readwritesplit,
proven by @@server_id."""

import pytest

import filterconf as fc
import sluicetest as st

pytestmark = pytest.mark.sluice_only

PRIMARY, REPLICA = st.port(4465), st.port(4466)
ECHO_HINT, ECHO_NAMED, RWS_HINT, RWS_NAMED = (st.port(n) for n in
                                               range(4467, 4471))

# enum sl_hint_type
NONE, MASTER, SLAVE, NAMED = 0, 1, 2, 4


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    modules = fc.module_dir(tmp_path_factory.mktemp("hintmods"),
                            [fc.test_module("testmod_hintecho")])
    sections = """
[Hint]
type=filter
module=hintfilter

[Named]
type=filter
module=namedserverfilter
match01=/to-db3/
target01=db3
match02=/to-db2/
target02=db2
match03=/to-primary/
target03=->master
"""
    sections += fc.service("Echo-Hint", ECHO_HINT, router="testmod_hintecho",
                           filters="Hint")
    sections += fc.service("Echo-Named", ECHO_NAMED,
                           router="testmod_hintecho", filters="Named")
    sections += fc.service("Rws-Hint", RWS_HINT, router="readwritesplit",
                           filters="Hint")
    sections += fc.service("Rws-Named", RWS_NAMED, router="readwritesplit",
                           filters="Named")
    yield from fc.running(tmp_path_factory, PRIMARY, REPLICA, sections,
                          [ECHO_HINT, ECHO_NAMED, RWS_HINT, RWS_NAMED],
                          modules=modules)


def hint_of(port, sql):
    with st.connect(port) as conn:
        with conn.cursor() as cur:
            cur.execute(sql)
            (row,) = cur.fetchall()
    return int(row[0]), row[1]


@pytest.mark.parametrize("sql,expected", [
    ("SELECT 1 -- maxscale route to server db3", (NAMED, "db3")),
    ("SELECT 1 /* maxscale route to master */", (MASTER, "")),
    ("SELECT 1 -- maxscale route to slave", (SLAVE, "")),
    ("SELECT 1 -- MaxScale route to server db2", (NAMED, "db2")),
    ("SELECT 'maxscale route to master'", (NONE, "")),   # not a comment
    ("SELECT 1", (NONE, "")),
])
def test_hintfilter_sets_the_hint(proxy, sql, expected):
    assert hint_of(ECHO_HINT, sql) == expected


@pytest.mark.parametrize("sql,expected", [
    ("SELECT 'to-db3'", (NAMED, "db3")),
    ("SELECT 'to-db2'", (NAMED, "db2")),
    ("SELECT 'to-primary'", (MASTER, "")),
    ("SELECT 'elsewhere'", (NONE, "")),
])
def test_namedserverfilter_sets_the_hint(proxy, sql, expected):
    assert hint_of(ECHO_NAMED, sql) == expected


def test_hint_applies_to_one_statement_only(proxy):
    with st.connect(ECHO_HINT) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 -- maxscale route to server db2")
            assert cur.fetchall() == (("4", "db2"),)
            cur.execute("SELECT 1")
            assert cur.fetchall() == (("0", ""),)


def test_hintfilter_routes_through_readwritesplit(proxy):
    with st.connect(RWS_HINT) as conn:
        for sid in (3, 2, 3):
            assert st.scalar(conn, "SELECT @@server_id -- maxscale route "
                             f"to server db{sid}") == sid
        assert st.scalar(conn, "SELECT @@server_id -- maxscale route to "
                         "master") == st.PRIMARY_ID


def test_namedserverfilter_routes_through_readwritesplit(proxy):
    with st.connect(RWS_NAMED) as conn:
        assert st.scalar(conn, "SELECT @@server_id, 'to-db3'") == 3
        assert st.scalar(conn, "SELECT @@server_id, 'to-db2'") == 2
        assert st.scalar(conn, "SELECT @@server_id, 'to-primary'") == \
            st.PRIMARY_ID
