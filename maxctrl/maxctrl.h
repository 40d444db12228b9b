/* SPDX-License-Identifier: Apache-2.0 */
/*
 * maxctrl internals: the HTTP client (maxctrl.c) and the commands
 * (maxctrl_cmds.c). One process runs one command and exits: 0 on success,
 * 1 with a one-line "Error: ..." on stderr otherwise.
 */
#ifndef MAXCTRL_H
#define MAXCTRL_H

#include <jansson.h>
#include <stdbool.h>

struct mc_opts {
    const char *user;
    const char *password;
    const char *host;          /* host:port */
    bool tsv;
    bool json;                 /* --format json: the raw data */
    bool secure;               /* https */
    const char *tls_key;       /* client certificate's key (PEM) */
    const char *tls_cert;      /* client certificate (PEM) */
    const char *tls_ca_cert;   /* CA for the server's certificate */
    bool tls_verify;           /* verify the server's certificate */
    long timeout;              /* seconds */
};

extern struct mc_opts mc_opts;

/*
 * Send a request to /v1/PATH. body may be NULL. On success returns 0 and
 * (for documents) *out the parsed response (caller decrefs); on any failure
 * prints the one-line error and returns -1.
 */
int mc_request(const char *method, const char *path, json_t *body,
               json_t **out);

/* Run a command (argv after the options). Exit status. */
int mc_run(int argc, char **argv);

/* Print an error line: "Error: ..." */
void mc_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
