/* SPDX-License-Identifier: Apache-2.0 */
/*
 * maxctrl: the command-line client of Sluice's REST API, with the verbs and
 * options of MariaDB MaxScale's maxctrl (list, show, set, clear, create,
 * alter, destroy, link, unlink, call, stop, start, rotate).
 *
 * This file: option parsing and the HTTP client (libcurl, basic auth,
 * JSON in and out). Every failure is reported as one line on stderr and a
 * non-zero exit: connection refused, authentication failure, unknown
 * objects and any other API error (its "errors[].detail").
 */
#define _GNU_SOURCE

#include <curl/curl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "maxctrl.h"
#include "sluice_revision.h"   /* generated: cmake/revision.cmake */

struct mc_opts mc_opts = {
    .user = "admin",
    .password = "mariadb",
    .host = "127.0.0.1:8989",
    .timeout = 10,
    .tls_verify = true,
};

struct growbuf {
    char *data;
    size_t len;
};

void
mc_error(const char *fmt, ...)
{
    va_list ap;

    fputs("Error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static size_t
on_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
    struct growbuf *b = arg;
    size_t n = size * nmemb;
    char *nd = realloc(b->data, b->len + n + 1);

    if (nd == NULL) {
        return 0;
    }
    memcpy(nd + b->len, ptr, n);
    b->data = nd;
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

/* The API's error detail(s), joined by "; ". */
static void
print_api_error(long status, const char *text)
{
    json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
    json_t *errs = json_object_get(doc, "errors");
    size_t i;
    json_t *e;

    if (status == 401) {
        mc_error("Authentication failed for user '%s' at %s (wrong user "
                 "name or password)", mc_opts.user, mc_opts.host);
    } else if (json_array_size(errs) > 0) {
        fputs("Error: ", stderr);
        json_array_foreach(errs, i, e) {
            fprintf(stderr, "%s%s", i ? "; " : "",
                    json_string_value(json_object_get(e, "detail")));
        }
        fputc('\n', stderr);
    } else {
        mc_error("HTTP %ld from %s", status, mc_opts.host);
    }
    json_decref(doc);
}

static int
finish(long status, struct growbuf *b, json_t **out)
{
    json_error_t jerr;

    if (status >= 400) {
        print_api_error(status, b->data);
        return -1;
    }
    if (out == NULL) {
        return 0;
    }
    *out = b->len ? json_loadb(b->data, b->len, 0, &jerr) : json_object();
    if (*out == NULL) {
        mc_error("invalid JSON from %s: %s", mc_opts.host, jerr.text);
        return -1;
    }
    return 0;
}

int
mc_request(const char *method, const char *path, json_t *body,
           json_t **out)
{
    CURL *c = curl_easy_init();
    struct curl_slist *hdr = NULL;
    struct growbuf b = {0};
    char url[2048];
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    long status = 0;
    CURLcode rc;
    int ret;

    if (c == NULL) {
        mc_error("cannot initialise libcurl");
        return -1;
    }
    snprintf(url, sizeof(url), "%s://%s/v1/%s",
             mc_opts.secure ? "https" : "http", mc_opts.host, path);
    hdr = curl_slist_append(hdr, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(c, CURLOPT_USERNAME, mc_opts.user);
    curl_easy_setopt(c, CURLOPT_PASSWORD, mc_opts.password);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, mc_opts.timeout);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (text) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
    }
    if (mc_opts.tls_cert) {
        curl_easy_setopt(c, CURLOPT_SSLCERT, mc_opts.tls_cert);
    }
    if (mc_opts.tls_key) {
        curl_easy_setopt(c, CURLOPT_SSLKEY, mc_opts.tls_key);
    }
    if (mc_opts.tls_ca_cert) {
        curl_easy_setopt(c, CURLOPT_CAINFO, mc_opts.tls_ca_cert);
    }
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, mc_opts.tls_verify ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, mc_opts.tls_verify ? 2L : 0L);
    rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        mc_error("Could not connect to Sluice at %s: %s", mc_opts.host,
                 curl_easy_strerror(rc));
        ret = -1;
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        ret = finish(status, &b, out);
    }
    free(b.data);
    free(text);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    return ret;
}

/* The one description of the command line: --help prints it and the man
 * page maxctrl(1) is generated from it (help2man: a command's synopsis,
 * two spaces, its description; continuation lines at column 28). */
static void
usage(FILE *f)
{
    fputs(
        "Usage: maxctrl [OPTIONS] COMMAND ...\n"
        "\n"
        "Options:\n"
        "  -u, --user USER           REST API user (default admin)\n"
        "  -p, --password PASS       its password (default mariadb)\n"
        "  -h, --hosts HOST:PORT     where Sluice's REST API listens\n"
        "                            (default 127.0.0.1:8989)\n"
        "  -s, --secure              use HTTPS\n"
        "      --tls-key FILE        the key of the client certificate\n"
        "      --tls-cert FILE       a client certificate (PEM), for a\n"
        "                            REST API with admin_ssl_ca\n"
        "      --tls-ca-cert FILE    the CA that signed the REST API's\n"
        "                            certificate (default: the system's)\n"
        "      --tls-verify-server-cert BOOL\n"
        "                            check the REST API's certificate\n"
        "                            (default true)\n"
        "  -t, --timeout SECONDS     request timeout (default 10)\n"
        "      --tsv                 tab-separated output for scripts\n"
        "      --format FORMAT       table (default), tsv or json (the\n"
        "                            REST API's data, for scripts)\n"
        "      --help                this help\n"
        "      --version             the version and the git revision\n"
        "\n"
        "Commands:\n"
        "  list TYPE                 list the objects of TYPE: servers,\n"
        "                            services, listeners, monitors, "
        "filters,\n"
        "                            sessions, threads, users, commands or\n"
        "                            modules\n"
        "  show TYPE NAME            one object in detail; TYPE is server,\n"
        "                            service, listener, monitor, filter,\n"
        "                            session, module or thread\n"
        "  show maxscale             the global settings and state\n"
        "  show threads              every worker thread in detail\n"
        "  list queries [--sort KEY] [--limit N]\n"
        "                            query digests, by KEY: count,\n"
        "                            total_time (default), avg_time,\n"
        "                            max_time, errors, rows, last_seen\n"
        "  set server NAME STATE     give a server a state: maintenance,\n"
        "                            drain, running, master or slave\n"
        "  clear server NAME STATE   take that state away\n"
        "  create server NAME HOST PORT [KEY=VALUE...] [--services S...]\n"
        "                            a server, added to services S\n"
        "  create service NAME ROUTER [KEY=VALUE...]\n"
        "                            a service using ROUTER; --servers "
        "S...\n"
        "                            and --filters F... give its servers "
        "and\n"
        "                            filters\n"
        "  create listener SERVICE NAME PORT [KEY=VALUE...]\n"
        "                            a listener of SERVICE on PORT\n"
        "  create filter NAME MODULE [KEY=VALUE...]\n"
        "                            a filter of MODULE\n"
        "  create monitor NAME MODULE [KEY=VALUE...] [--servers S...]\n"
        "                            a monitor of MODULE; --monitor-user "
        "U\n"
        "                            and --monitor-password P give its "
        "account\n"
        "  create user NAME PASSWORD [--type=admin|basic]\n"
        "                            a REST API user (basic: read only)\n"
        "  alter TYPE NAME KEY VALUE [KEY VALUE...]\n"
        "                            change parameters of a server, "
        "service,\n"
        "                            listener, monitor or filter\n"
        "  alter maxscale KEY VALUE [KEY VALUE...]\n"
        "                            change global parameters\n"
        "  alter user NAME PASSWORD  change a REST API user's password\n"
        "  destroy TYPE NAME         remove a server, service, listener,\n"
        "                            monitor, filter or REST API user\n"
        "  destroy listener SERVICE NAME\n"
        "                            MaxScale's form for listeners\n"
        "  link TYPE NAME SERVER...  add servers to a service or monitor\n"
        "  unlink TYPE NAME SERVER...\n"
        "                            remove servers from a service or "
        "monitor\n"
        "  call command MODULE COMMAND [ARGS...]\n"
        "                            run a module command\n"
        "  stop TYPE NAME            stop a service, listener or monitor\n"
        "  start TYPE NAME           start it again\n"
        "  rotate logs               make Sluice reopen its log file\n"
        "  classify STATEMENT        how Sluice's query classifier sees "
        "it\n",
        f);
}

int
main(int argc, char **argv)
{
    enum { O_TSV = 256, O_HELP, O_VERSION, O_FORMAT, O_TLS_KEY, O_TLS_CERT,
           O_TLS_CA, O_TLS_VERIFY };
    static const struct option longopts[] = {
        {"user", required_argument, NULL, 'u'},
        {"password", required_argument, NULL, 'p'},
        {"hosts", required_argument, NULL, 'h'},
        {"secure", no_argument, NULL, 's'},
        {"timeout", required_argument, NULL, 't'},
        {"tsv", no_argument, NULL, O_TSV},
        {"tls-key", required_argument, NULL, O_TLS_KEY},
        {"tls-cert", required_argument, NULL, O_TLS_CERT},
        {"tls-ca-cert", required_argument, NULL, O_TLS_CA},
        {"tls-verify-server-cert", required_argument, NULL, O_TLS_VERIFY},
        {"format", required_argument, NULL, O_FORMAT},
        {"help", no_argument, NULL, O_HELP},
        {"version", no_argument, NULL, O_VERSION},
        {NULL, 0, NULL, 0},
    };
    int c;
    int rc;

    /* '+': options come before the command; command arguments such as
     * "--servers" are the command's own. */
    while ((c = getopt_long(argc, argv, "+u:p:h:st:", longopts, NULL)) !=
           -1) {
        switch (c) {
        case 'u':
            mc_opts.user = optarg;
            break;
        case 'p':
            mc_opts.password = optarg;
            break;
        case 'h':
            mc_opts.host = optarg;
            break;
        case 's':
            mc_opts.secure = true;
            break;
        case 't':
            mc_opts.timeout = atol(optarg) > 0 ? atol(optarg) : 10;
            break;
        case O_TSV:
            mc_opts.tsv = true;
            break;
        case O_TLS_KEY:
            mc_opts.tls_key = optarg;
            break;
        case O_TLS_CERT:
            mc_opts.tls_cert = optarg;
            break;
        case O_TLS_CA:
            mc_opts.tls_ca_cert = optarg;
            break;
        case O_TLS_VERIFY:
            if (strcmp(optarg, "true") == 0) {
                mc_opts.tls_verify = true;
            } else if (strcmp(optarg, "false") == 0) {
                mc_opts.tls_verify = false;
            } else {
                fprintf(stderr, "Error: --tls-verify-server-cert takes true "
                        "or false\n");
                return 2;
            }
            break;
        case O_FORMAT:
            if (strcmp(optarg, "json") == 0) {
                mc_opts.json = true;
            } else if (strcmp(optarg, "tsv") == 0) {
                mc_opts.tsv = true;
            } else if (strcmp(optarg, "table") != 0) {
                fprintf(stderr, "Error: unknown format '%s' (table, tsv, "
                        "json)\n", optarg);
                return 2;
            }
            break;
        case O_HELP:
            usage(stdout);
            return 0;
        case O_VERSION:
            printf("maxctrl %s (git %s)\n", SLUICE_VERSION, SLUICE_REVISION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = mc_run(argc - optind, argv + optind);
    curl_global_cleanup();
    return rc;
}
