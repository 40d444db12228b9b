/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DCB tests with real workers, real sockets and a fake protocol:
 *  - TCP and unix-socket listeners accept, greet, echo (read queue ->
 *    write queue), report "localhost" for unix clients, count connections;
 *  - with a lowered read budget, a client streaming a lot of data does not
 *    keep a second client waiting until it is done;
 *  - a session whose backend cannot connect forwards a 2013 error to the
 *    client and closes; no DCB or session leaks.
 * Run in both event models.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <sluice/buf.h>
#include <sluice/worker.h>

#include "dcb_int.h"
#include "worker_int.h"

static atomic_int accepted;
static atomic_int unix_clients;
static atomic_int errors_sent;
static atomic_int last_error_code;
static atomic_bool make_session;
static atomic_int order_pos;
static char read_order[4096];

static int
fake_accept(struct sl_dcb *c)
{
    atomic_fetch_add(&accepted, 1);
    if (strcmp(sl_dcb_remote(c), "localhost") == 0 && sl_dcb_is_unix(c)) {
        atomic_fetch_add(&unix_clients, 1);
    }
    return sl_dcb_write(c, sl_buf_from("hi", 2)) == 0 ? SL_OK : SL_ERROR;
}

/* Echo everything back; record which client read (first byte of each
 * read turn: 'A' streams, 'B' is the quiet one). */
static int
fake_read(struct sl_dcb *c)
{
    struct sl_buf *rq = sl_dcb_readq(c);
    struct sl_buf *out = sl_buf_new();
    int pos;

    if (rq->len > 0) {
        pos = atomic_fetch_add(&order_pos, 1);
        if (pos < (int)sizeof(read_order) - 1) {
            read_order[pos] = (char)sl_buf_byte(rq, 0);
        }
    }
    if (atomic_load(&make_session) && sl_dcb_session(c) == NULL) {
        sl_buf_consume(rq, rq->len);
        sl_buf_free(out);
        return sl_session_create(c) != NULL ? SL_OK : SL_ERROR;
    }
    sl_buf_split(rq, rq->len, out);
    return sl_dcb_write(c, out) == 0 ? SL_OK : SL_ERROR;
}

static void
fake_error(struct sl_dcb *c, uint16_t code, const char *state,
           const char *msg)
{
    char line[300];

    atomic_fetch_add(&errors_sent, 1);
    atomic_store(&last_error_code, code);
    snprintf(line, sizeof(line), "ERR %u %s", code, msg);
    sl_dcb_write(c, sl_buf_from(line, strlen(line)));
}

static int
fake_backend_init(struct sl_dcb *d, struct sl_backend *b)
{
    return SL_OK;
}

static const struct sl_protocol_ops proto = {
    .size = sizeof(struct sl_protocol_ops),
    .client_accept = fake_accept,
    .client_read = fake_read,
    .client_error = fake_error,
    .backend_init = fake_backend_init,
};

/* A router that connects to its one server and never absorbs errors. */
static void *
fr_new_session(void *inst, struct sl_session *ses)
{
    struct sl_service *svc = sl_session_service(ses);

    if (sl_backend_connect(ses, svc->servers[0]) == NULL) {
        sl_session_send_error(ses, 2003, "HY000", "cannot connect");
        return NULL;
    }
    return ses;
}

static bool
fr_handle_error(void *rses, struct sl_backend *b, const struct sl_buf *e,
                const char *reason)
{
    return false;
}

static void
fr_free_session(void *rses)
{
}

static const struct sl_router_ops router = {
    .size = sizeof(struct sl_router_ops),
    .new_session = fr_new_session,
    .free_session = fr_free_session,
    .handle_error = fr_handle_error,
};

static struct sl_server server;
static struct sl_server *servers[] = {&server};
static struct sl_service service = {
    .name = "svc",
    .router = &router,
    .protocol = &proto,
    .servers = servers,
    .nservers = 1,
};

static uint64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Read exactly n bytes; the 60 s deadline only stops waiting on a hang. */
static void
read_exact(int fd, char *buf, size_t n)
{
    size_t got = 0;
    uint64_t end = now_ms() + 60000;
    struct pollfd p = {.fd = fd, .events = POLLIN};

    while (got < n) {
        assert_true(now_ms() < end);
        if (poll(&p, 1, 100) == 1) {
            ssize_t r = read(fd, buf + got, n - got);

            assert_true(r > 0);
            got += (size_t)r;
        }
    }
}

static int
tcp_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static int
listener_port(const struct sl_listener *l)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);

    assert_int_equal(getsockname(l->fd, (struct sockaddr *)&sa, &len), 0);
    return ntohs(sa.sin_port);
}

static void
init_listener(struct sl_listener *l, const char *name, const char *sock)
{
    memset(l, 0, sizeof(*l));
    snprintf(l->name, sizeof(l->name), "%s", name);
    l->service = &service;
    l->protocol = &proto;
    l->fd = -1;
    if (sock != NULL) {
        snprintf(l->socket, sizeof(l->socket), "%s", sock);
    } else {
        snprintf(l->address, sizeof(l->address), "127.0.0.1");
        l->port = 0;   /* ephemeral */
    }
}

/* The workers close a client's DCB when they see its EOF; stopping them
 * before that leaves the DCB open (a race seen under load), so wait (5 s
 * at most) for the listener's connections to drop to 0. */
static void
await_closed(struct sl_listener *l)
{
    for (int i = 0; i < 5000 && atomic_load(&l->connections) != 0; i++) {
        usleep(1000);
    }
    assert_int_equal(atomic_load(&l->connections), 0);
}

static void
run_echo(enum sl_event_model model)
{
    struct sl_listener tl;
    struct sl_listener ul;
    char path[108];
    char buf[64];
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    int fd;
    int ufd;

    atomic_store(&accepted, 0);
    atomic_store(&unix_clients, 0);
    atomic_store(&make_session, false);
    snprintf(path, sizeof(path), "/tmp/sluice-test-dcb-%d.sock", getpid());
    init_listener(&tl, "tcp", NULL);
    init_listener(&ul, "unix", path);
    assert_int_equal(sl__workers_init(2, model), 0);
    assert_int_equal(sl__listener_start(&tl), 0);
    assert_int_equal(sl__listener_start(&ul), 0);
    assert_int_equal(sl__workers_start(), 0);

    fd = tcp_connect(listener_port(&tl));
    read_exact(fd, buf, 2);
    assert_memory_equal(buf, "hi", 2);
    assert_int_equal(write(fd, "ping", 4), 4);
    read_exact(fd, buf, 4);
    assert_memory_equal(buf, "ping", 4);

    snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
    ufd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(connect(ufd, (struct sockaddr *)&un, sizeof(un)), 0);
    read_exact(ufd, buf, 2);
    assert_int_equal(atomic_load(&unix_clients), 1);
    assert_int_equal(atomic_load(&tl.connections), 1);
    assert_int_equal(atomic_load(&ul.connections_total), 1);

    close(fd);
    close(ufd);
    await_closed(&tl);
    await_closed(&ul);
    sl__workers_stop();
    sl__workers_finish();
    assert_int_equal(sl__dcb_count(), 0);
    assert_int_equal(access(path, F_OK), -1);   /* socket file removed */
}

static void
test_echo_pinned(void **state)
{
    run_echo(SL_EVENT_MODEL_PINNED);
}

static void
test_echo_shared(void **state)
{
    run_echo(SL_EVENT_MODEL_SHARED);
}

/* Holds the worker inside a posted message until the test lets it go, so
 * that A's flood and B's byte are both waiting before the worker reads. */
static sem_t hold_entered;
static sem_t hold_release;

static void
hold_worker(void *arg)
{
    (void)arg;
    sem_post(&hold_entered);
    sem_wait(&hold_release);
}

/* Client A floods; client B sends one byte; both are queued in the kernel
 * while the worker is held. With a 1 KiB budget per turn, B's read must
 * come long before A's data is through: within the first few turns, with
 * most of A's reads after it. A read-until-EAGAIN worker (no budget)
 * reads A in one turn and fails both checks. */
static void
run_budget(enum sl_event_model model)
{
    struct sl_listener tl;
    char *big = malloc(1 << 20);
    char buf[4];
    int a;
    int b;
    int bturn;
    int aafter = 0;
    int turns;
    size_t sent = 0;
    ssize_t w;

    sl__evq_read_budget = 1024;
    atomic_store(&order_pos, 0);
    memset(read_order, 0, sizeof(read_order));
    atomic_store(&make_session, false);
    assert_int_equal(sem_init(&hold_entered, 0, 0), 0);
    assert_int_equal(sem_init(&hold_release, 0, 0), 0);
    init_listener(&tl, "tcp", NULL);
    assert_int_equal(sl__workers_init(1, model), 0);
    assert_int_equal(sl__listener_start(&tl), 0);
    assert_int_equal(sl__workers_start(), 0);
    a = tcp_connect(listener_port(&tl));
    b = tcp_connect(listener_port(&tl));
    read_exact(a, buf, 2);
    read_exact(b, buf, 2);
    assert_int_equal(sl_worker_post(sl_worker_get(0), hold_worker, NULL), 0);
    assert_int_equal(sem_wait(&hold_entered), 0);
    memset(big, 'A', 1 << 20);
    /* the worker is held: send what the kernel takes (at least 64 KiB,
     * i.e. 64 turns of A's at 1 KiB each) */
    while (sent < (1u << 18)) {
        w = send(a, big, (1u << 18) - sent, MSG_DONTWAIT);
        if (w <= 0) {
            break;
        }
        sent += (size_t)w;
    }
    assert_true(sent >= (1u << 16));
    assert_int_equal(write(b, "B", 1), 1);
    assert_int_equal(sem_post(&hold_release), 0);
    read_exact(b, buf, 1);
    assert_int_equal(buf[0], 'B');
    /* let A's flood finish too: its echo comes back in full */
    for (size_t got = 0; got < sent; got += (size_t)w) {
        w = recv(a, big, 1 << 20, 0);
        assert_true(w > 0);
    }
    turns = atomic_load(&order_pos);
    assert_non_null(strchr(read_order, 'B'));
    bturn = (int)(strchr(read_order, 'B') - read_order);
    for (int i = bturn + 1; i < turns; i++) {
        aafter += read_order[i] == 'A';
    }
    print_message("A sent %zu bytes; B read at turn %d of %d, %d of A's "
                  "after it\n", sent, bturn, turns, aafter);
    assert_true(bturn <= 2);
    assert_true(aafter >= (int)(sent / 1024) / 2);
    close(a);
    close(b);
    await_closed(&tl);
    sl__workers_stop();
    sl__workers_finish();
    sl__evq_read_budget = SL_EVQ_DEFAULT_BUDGET;
    assert_int_equal(sl__dcb_count(), 0);
    sem_destroy(&hold_entered);
    sem_destroy(&hold_release);
    free(big);
}

static void
test_budget_pinned(void **state)
{
    run_budget(SL_EVENT_MODEL_PINNED);
}

static void
test_budget_shared(void **state)
{
    run_budget(SL_EVENT_MODEL_SHARED);
}

/* The backend's port has no listener: connect fails, the router gives up
 * and the client gets 2013 while the session is starting. */
static void
run_backend_fail(enum sl_event_model model)
{
    struct sl_listener tl;
    char buf[64];
    int fd;
    int probe;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);

    /* find a free port and leave it unbound */
    probe = socket(AF_INET, SOCK_STREAM, 0);
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    assert_int_equal(bind(probe, (struct sockaddr *)&sa, sizeof(sa)), 0);
    getsockname(probe, (struct sockaddr *)&sa, &len);
    close(probe);
    memset(&server, 0, sizeof(server));
    snprintf(server.name, sizeof(server.name), "db1");
    snprintf(server.address, sizeof(server.address), "127.0.0.1");
    server.port = ntohs(sa.sin_port);

    atomic_store(&errors_sent, 0);
    atomic_store(&make_session, true);
    init_listener(&tl, "tcp", NULL);
    assert_int_equal(sl__workers_init(2, model), 0);
    assert_int_equal(sl__listener_start(&tl), 0);
    assert_int_equal(sl__workers_start(), 0);
    fd = tcp_connect(listener_port(&tl));
    read_exact(fd, buf, 2);
    assert_int_equal(write(fd, "login", 5), 5);
    read_exact(fd, buf, 8);
    assert_memory_equal(buf, "ERR 2013", 8);
    assert_int_equal(atomic_load(&last_error_code), 2013);
    /* the session closed the client: EOF follows */
    {
        uint64_t end = now_ms() + 5000;
        ssize_t r;

        do {
            r = read(fd, buf, sizeof(buf));
        } while (r > 0 && now_ms() < end);
        assert_int_equal(r, 0);
    }
    assert_int_equal(atomic_load(&server.total_connections), 1);
    close(fd);
    sl__workers_stop();
    sl__workers_finish();
    assert_int_equal(sl__dcb_count(), 0);
    assert_int_equal(sl__session_count(), 0);
    assert_int_equal(atomic_load(&server.connections), 0);
    assert_int_equal(atomic_load(&service.sessions), 0);
}

static void
test_backend_fail_pinned(void **state)
{
    run_backend_fail(SL_EVENT_MODEL_PINNED);
}

static void
test_backend_fail_shared(void **state)
{
    run_backend_fail(SL_EVENT_MODEL_SHARED);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_pinned),
        cmocka_unit_test(test_echo_shared),
        cmocka_unit_test(test_budget_pinned),
        cmocka_unit_test(test_budget_shared),
        cmocka_unit_test(test_backend_fail_pinned),
        cmocka_unit_test(test_backend_fail_shared),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
