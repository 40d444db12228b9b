/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PAM conversations for pam accounts on PAMAuth listeners
 * (docs/authentication.md, "PAM accounts").
 *
 * libpam blocks (its modules read files, run programs, may ask a
 * directory over the network), so each conversation runs on a helper
 * thread of its own, never on a worker. The thread and the client's
 * worker meet in a job:
 *
 *   worker: mdb_pam_start --> thread: pam_start, pam_authenticate,
 *   pam_acct_mgmt, pam_end
 *   thread: a prompt --> question in the job, post the event to the
 *           worker --> wait (at most MDB_PAM_ANSWER_TIMEOUT_S) for the
 *           answer or for the worker to abandon the job
 *   worker: event --> send the question to the client (dialog); its
 *           answer --> mdb_pam_answer --> the thread goes on
 *   thread: done --> result in the job, post the event --> the worker
 *           finishes the login
 *
 * With a password given at the start (mysql_clear_password) no question
 * reaches the worker: every prompt is answered with it, as MaxScale does.
 * With a password and a code (pam_mode=password_2FA, both asked of the
 * client before the conversation starts) a prompt containing "password"
 * gets the password and any other the code, MaxScale's rule.
 * Informational PAM messages are put before the next question's text, as
 * MariaDB's auth_pam does.
 *
 * The job is reference-counted (the worker, the thread, each posted
 * event) under its own mutex; nothing here is on the query path. At most
 * MDB_PAM_MAX_RUNNING conversations run at once (a login beyond is
 * refused), so a flood of PAM logins cannot create threads without bound.
 * Answers are wiped when the job is freed.
 *
 * Context: mdb_pam_start/question/answer/result/release on the client
 * DCB's worker; the conversation on its own thread.
 */
#include <jansson.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <security/pam_appl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SL_LOG_TAG "mariadbprotocol"
#include <sluice/dcb.h>
#include <sluice/log.h>

#include "mdb.h"

#define MDB_PAM_MAX_RUNNING 64
#define MDB_PAM_ANSWER_TIMEOUT_S 60
#define MDB_PAM_MAX_PROMPTS 16
#define MDB_PAM_TEXT_MAX 1024

static atomic_int running;

struct mdb_pam_job {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs;
    struct sl_dcb *dcb;           /* referenced until the job is freed */
    char service[128];
    char user[MDB_USER_MAX];
    char password[MDB_PAM_ANSWER_MAX];   /* preset (cleartext) */
    size_t pw_len;
    char code[MDB_PAM_ANSWER_MAX];       /* preset (password_2FA) */
    size_t code_len;
    bool preset;
    bool two_factor;
    /* pam_backend_map=mariadb (the thread's until result is set): the
     * user PAM ended with (PAM_USER), and SHA1 of its password from
     * pam_mapped_pw_file (map_has_pw false: none) */
    bool map;
    char pw_file[512];
    char mapped[MDB_USER_MAX];
    uint8_t mapped_sha1[MDB_SHA1_LEN];
    bool mapped_has_pw;
    int prompts;                  /* asked so far (the thread's) */
    /* Below: under lock. */
    bool asking;                  /* a question waits for the worker */
    bool asked;                   /* ... was sent to the client */
    bool answered;
    bool echo;
    char question[MDB_PAM_TEXT_MAX];
    char answer[MDB_PAM_ANSWER_MAX];
    size_t answer_len;
    bool abandoned;               /* the worker let go */
    int result;                   /* -1 running, 0 refused, 1 accepted */
};

static void
job_unref(struct mdb_pam_job *j)
{
    int left;

    pthread_mutex_lock(&j->lock);
    left = --j->refs;
    pthread_mutex_unlock(&j->lock);
    if (left > 0) {
        return;
    }
    sl_dcb_unref(j->dcb);
    pthread_cond_destroy(&j->cond);
    pthread_mutex_destroy(&j->lock);
    OPENSSL_cleanse(j, sizeof(*j));
    free(j);
}

static void
on_event(struct sl_dcb *dcb, void *arg)
{
    struct mdb_pam_job *j = arg;

    if (sl_dcb_is_open(dcb)) {
        mdb_client_pam_event(dcb, j);
    }
    job_unref(j);
}

/* Tell the worker (a reference for the event). false: cannot. */
static bool
post_event(struct mdb_pam_job *j)
{
    pthread_mutex_lock(&j->lock);
    j->refs++;
    pthread_mutex_unlock(&j->lock);
    if (sl_dcb_post(j->dcb, on_event, j) != 0) {
        job_unref(j);
        return false;
    }
    return true;
}

/* Ask the client text (thread). The answer is strdup'ed into *resp;
 * false when the client does not answer in time or has gone. */
static bool
ask(struct mdb_pam_job *j, const char *text, bool echo, char **resp)
{
    struct timespec deadline;
    bool ok = false;

    pthread_mutex_lock(&j->lock);
    if (j->abandoned) {
        pthread_mutex_unlock(&j->lock);
        return false;
    }
    snprintf(j->question, sizeof(j->question), "%s", text);
    j->echo = echo;
    j->asking = true;
    j->asked = false;
    j->answered = false;
    pthread_mutex_unlock(&j->lock);
    if (!post_event(j)) {
        return false;
    }
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += MDB_PAM_ANSWER_TIMEOUT_S;
    pthread_mutex_lock(&j->lock);
    while (!j->answered && !j->abandoned) {
        if (pthread_cond_timedwait(&j->cond, &j->lock, &deadline) != 0) {
            break;   /* timed out */
        }
    }
    if (j->answered && !j->abandoned) {
        *resp = strndup(j->answer, j->answer_len);
        ok = *resp != NULL;
    }
    OPENSSL_cleanse(j->answer, sizeof(j->answer));
    j->answer_len = 0;
    j->asking = false;
    pthread_mutex_unlock(&j->lock);
    return ok;
}

static void
free_responses(struct pam_response *r, int n)
{
    for (int i = 0; i < n; i++) {
        if (r[i].resp != NULL) {
            OPENSSL_cleanse(r[i].resp, strlen(r[i].resp));
            free(r[i].resp);
        }
    }
    free(r);
}

static int
conv(int n, const struct pam_message **msg, struct pam_response **resp,
     void *arg)
{
    struct mdb_pam_job *j = arg;
    struct pam_response *r;
    char text[MDB_PAM_TEXT_MAX] = "";
    size_t used = 0;

    if (n <= 0 || n > PAM_MAX_NUM_MSG ||
        (r = calloc((size_t)n, sizeof(*r))) == NULL) {
        return PAM_CONV_ERR;
    }
    for (int i = 0; i < n; i++) {
        const char *m = msg[i]->msg != NULL ? msg[i]->msg : "";

        switch (msg[i]->msg_style) {
        case PAM_TEXT_INFO:
        case PAM_ERROR_MSG:
            used += (size_t)snprintf(text + used, sizeof(text) - used,
                                     "%s\n", m);
            if (used >= sizeof(text)) {
                used = sizeof(text) - 1;
            }
            break;
        case PAM_PROMPT_ECHO_OFF:
        case PAM_PROMPT_ECHO_ON:
            if (j->preset && j->two_factor &&
                !mdb_pam_is_password_prompt(m, strlen(m))) {
                r[i].resp = strndup(j->code, j->code_len);
            } else if (j->preset) {
                r[i].resp = strndup(j->password, j->pw_len);
            } else if (++j->prompts <= MDB_PAM_MAX_PROMPTS) {
                snprintf(text + used, sizeof(text) - used, "%s", m);
                if (!ask(j, text, msg[i]->msg_style == PAM_PROMPT_ECHO_ON,
                         &r[i].resp)) {
                    r[i].resp = NULL;
                }
                text[0] = '\0';
                used = 0;
            }
            if (r[i].resp == NULL) {
                free_responses(r, n);
                return PAM_CONV_ERR;
            }
            break;
        default:
            free_responses(r, n);
            return PAM_CONV_ERR;
        }
    }
    *resp = r;
    return PAM_SUCCESS;
}

/* pam_mapped_pw_file's password for user (plaintext), or NULL; json is
 * the parsed file. */
static const char *
mapped_password(const json_t *json, const char *user)
{
    const json_t *arr = json_object_get(json, "users_and_passwords");
    size_t n = json_array_size(arr);

    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(arr, i);
        const char *u = json_string_value(json_object_get(o, "user"));

        if (u != NULL && strcmp(u, user) == 0) {
            return json_string_value(json_object_get(o, "password"));
        }
    }
    return NULL;
}

/* pam_backend_map=mariadb, after PAM accepted (thread): the user PAM
 * mapped the client to (PAM_USER) and its password from
 * pam_mapped_pw_file, read now (it may change while Sluice runs). */
static int
map_user(struct mdb_pam_job *j, pam_handle_t *h)
{
    const void *item = NULL;
    const char *pw;
    json_error_t e;
    json_t *json = NULL;

    if (pam_get_item(h, PAM_USER, &item) != PAM_SUCCESS || item == NULL ||
        strlen(item) >= sizeof(j->mapped) || ((const char *)item)[0] == '\0') {
        sl_log_warn("PAM service '%s' left no usable user for '%s' "
                    "(pam_backend_map=mariadb)", j->service, j->user);
        return PAM_USER_UNKNOWN;
    }
    snprintf(j->mapped, sizeof(j->mapped), "%s", (const char *)item);
    if (j->pw_file[0] != '\0') {
        json = json_load_file(j->pw_file, 0, &e);
        if (json == NULL) {
            sl_log_error("pam_mapped_pw_file '%s' cannot be read: %s "
                         "(line %d): the login of '%s' is refused",
                         j->pw_file, e.text, e.line, j->user);
            return PAM_AUTHINFO_UNAVAIL;
        }
    }
    pw = json != NULL ? mapped_password(json, j->mapped) : NULL;
    j->mapped_has_pw = pw != NULL && pw[0] != '\0';
    if (j->mapped_has_pw) {
        mdb_sha1(pw, strlen(pw), j->mapped_sha1);
    }
    json_decref(json);
    sl_log_info("PAM service '%s' mapped user '%s' to '%s' (%s password "
                "for the servers)", j->service, j->user, j->mapped,
                j->mapped_has_pw ? "with a" : "no");
    return PAM_SUCCESS;
}

static void *
job_main(void *arg)
{
    struct mdb_pam_job *j = arg;
    struct pam_conv c = {conv, j};
    pam_handle_t *h = NULL;
    int rc = pam_start(j->service, j->user, &c, &h);

    if (rc == PAM_SUCCESS) {
        rc = pam_authenticate(h, 0);
    }
    if (rc == PAM_SUCCESS) {
        rc = pam_acct_mgmt(h, 0);
    }
    if (rc == PAM_SUCCESS && j->map) {
        rc = map_user(j, h);
    }
    if (rc != PAM_SUCCESS) {
        sl_log_info("PAM service '%s' refused user '%s': %s", j->service,
                    j->user, h != NULL ? pam_strerror(h, rc) : "pam_start");
    }
    if (h != NULL) {
        pam_end(h, rc);
    }
    OPENSSL_cleanse(j->password, sizeof(j->password));
    OPENSSL_cleanse(j->code, sizeof(j->code));
    pthread_mutex_lock(&j->lock);
    j->result = rc == PAM_SUCCESS ? 1 : 0;
    j->asking = false;
    pthread_mutex_unlock(&j->lock);
    post_event(j);   /* if it cannot, the client waits for its timeout */
    atomic_fetch_sub(&running, 1);
    job_unref(j);
    return NULL;
}

struct mdb_pam_job *
mdb_pam_start(struct sl_dcb *dcb, const char *service, const char *user,
              const char *password, size_t pw_len, const char *code,
              size_t code_len, const char *map_pw_file)
{
    struct mdb_pam_job *j;
    pthread_attr_t attr;
    pthread_t t;
    int rc;

    if (atomic_fetch_add(&running, 1) >= MDB_PAM_MAX_RUNNING) {
        atomic_fetch_sub(&running, 1);
        sl_log_warn("%d PAM conversations are running: the login of '%s' "
                    "is refused", MDB_PAM_MAX_RUNNING, user);
        return NULL;
    }
    if ((j = calloc(1, sizeof(*j))) == NULL ||
        (password != NULL && pw_len >= sizeof(j->password)) ||
        (code != NULL && code_len >= sizeof(j->code))) {
        free(j);
        atomic_fetch_sub(&running, 1);
        return NULL;
    }
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, NULL);
    j->refs = 2;   /* the worker and the thread */
    j->result = -1;
    j->dcb = dcb;
    sl_dcb_ref(dcb);
    snprintf(j->service, sizeof(j->service), "%s", service);
    snprintf(j->user, sizeof(j->user), "%s", user);
    if (password != NULL) {
        memcpy(j->password, password, pw_len);
        j->pw_len = pw_len;
        j->preset = true;
    }
    if (map_pw_file != NULL) {
        j->map = true;
        snprintf(j->pw_file, sizeof(j->pw_file), "%s", map_pw_file);
    }
    if (password != NULL && code != NULL) {
        memcpy(j->code, code, code_len);
        j->code_len = code_len;
        j->two_factor = true;
    }
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, job_main, j);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        sl_log_error("cannot start a PAM thread: %s", strerror(rc));
        atomic_fetch_sub(&running, 1);
        j->refs = 1;
        job_unref(j);
        return NULL;
    }
    return j;
}

bool
mdb_pam_question(struct mdb_pam_job *j, char *text, size_t cap, bool *echo)
{
    bool any;

    pthread_mutex_lock(&j->lock);
    any = j->asking && !j->asked && j->result < 0;
    if (any) {
        snprintf(text, cap, "%s", j->question);
        *echo = j->echo;
        j->asked = true;
    }
    pthread_mutex_unlock(&j->lock);
    return any;
}

void
mdb_pam_answer(struct mdb_pam_job *j, const char *a, size_t len)
{
    pthread_mutex_lock(&j->lock);
    if (len < sizeof(j->answer)) {
        memcpy(j->answer, a, len);
        j->answer_len = len;
        j->answered = true;
    }
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
}

bool
mdb_pam_mapped(struct mdb_pam_job *j, char *user, size_t cap,
               uint8_t sha1[MDB_SHA1_LEN], bool *has_pw)
{
    bool ok;

    pthread_mutex_lock(&j->lock);
    ok = j->map && j->result == 1;
    if (ok) {
        snprintf(user, cap, "%s", j->mapped);
        memcpy(sha1, j->mapped_sha1, MDB_SHA1_LEN);
        *has_pw = j->mapped_has_pw;
    }
    pthread_mutex_unlock(&j->lock);
    return ok;
}

int
mdb_pam_result(struct mdb_pam_job *j)
{
    int r;

    pthread_mutex_lock(&j->lock);
    r = j->result;
    pthread_mutex_unlock(&j->lock);
    return r;
}

void
mdb_pam_release(struct mdb_pam_job *j)
{
    if (j == NULL) {
        return;
    }
    pthread_mutex_lock(&j->lock);
    j->abandoned = true;
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
    job_unref(j);
}
