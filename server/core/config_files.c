/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a configuration's text comes from, before validation (config.c):
 *
 *   sl__config_read_all   the main file, then every *.cnf of <file>.d/ in
 *                         name order, as one text; d->srcs remembers which
 *                         lines came from which file, so messages name the
 *                         right file and line
 *   sl__config_expand     on the parsed sections, in MaxScale's order:
 *                         $VARIABLE values (substitute_variables=true),
 *                         type=include sections merged into the sections
 *                         that name them in @include=, and encrypted
 *                         passwords (the .secrets key file of datadir or
 *                         secretsdir) decrypted
 *
 * Encrypted passwords follow MaxScale 2.5+ (maxkeys/maxpasswd): .secrets
 * is a JSON object whose "encryption_cipher" is "EVP_aes_256_cbc" and
 * whose "encryption_key" is 64 hex digits; the file must be readable by
 * its owner only. An encrypted value is hex: a 16-byte IV, then the
 * AES-256-CBC (PKCS#7 padded) ciphertext. As in MaxScale, when the key
 * file exists every password value made only of hex digits is decrypted;
 * without a key file passwords are plain text.
 *
 * Context: main thread while loading; the secrets helpers are also used by
 * the sluice-keys and sluice-passwd tools.
 */
#define SL_LOG_TAG "config"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <sluice/log.h>

#include "config_files.h"
#include "ini.h"

#define SL_CONFIG_MAX_BYTES (16u << 20)

/* ---- reading the main file and <file>.d/ ---- */

static char *
slurp(struct sl_cfg_diag *d, const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t n;

    if (f == NULL) {
        sl__cfg_error(d, 0, "cannot open configuration file '%s': %s", path,
                      strerror(errno));
        return NULL;
    }
    buf = malloc(SL_CONFIG_MAX_BYTES + 2);
    if (buf == NULL) {
        fclose(f);
        sl__cfg_error(d, 0, "out of memory");
        return NULL;
    }
    n = fread(buf, 1, SL_CONFIG_MAX_BYTES + 1, f);
    if (ferror(f) || n > SL_CONFIG_MAX_BYTES) {
        sl__cfg_error(d, 0, "'%s': %s", path, ferror(f) ? "read error"
                      : "configuration file larger than 16 MiB");
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

static int
count_lines(const char *t, size_t len)
{
    int n = 0;

    for (size_t i = 0; i < len; i++) {
        n += t[i] == '\n';
    }
    return n;
}

int
sl__cfg_add_src(struct sl_cfg_diag *d, int first, const char *file)
{
    struct sl_cfg_src *s = realloc(d->srcs, (d->nsrcs + 1) * sizeof(*s));

    if (s == NULL) {
        return -ENOMEM;
    }
    d->srcs = s;
    s[d->nsrcs].first = first;
    s[d->nsrcs].file = strdup(file);
    if (s[d->nsrcs].file == NULL) {
        return -ENOMEM;
    }
    d->nsrcs++;
    return 0;
}

static int
cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append the file at path to *text (ending it with '\n'), recording where
 * its lines start. */
static int
append_file(struct sl_cfg_diag *d, const char *path, char **text,
            size_t *len)
{
    size_t n;
    char *extra = slurp(d, path, &n);
    char *t;
    int first;

    if (extra == NULL) {
        return -EIO;
    }
    if (*len + n + 2 > SL_CONFIG_MAX_BYTES) {
        sl__cfg_error(d, 0, "configuration files larger than 16 MiB");
        free(extra);
        return -EFBIG;
    }
    t = realloc(*text, *len + n + 3);
    if (t == NULL) {
        free(extra);
        return -ENOMEM;
    }
    if (*len > 0 && t[*len - 1] != '\n') {
        t[(*len)++] = '\n';
    }
    first = count_lines(t, *len) + 1;
    memcpy(t + *len, extra, n);
    *len += n;
    t[*len] = '\0';
    free(extra);
    *text = t;
    return sl__cfg_add_src(d, first, path);
}

char *
sl__config_read_all(const char *path, size_t *len, struct sl_cfg_diag *d)
{
    char dir[4096];
    char file[4400];
    char *text;
    char **names = NULL;
    size_t nnames = 0;
    struct dirent *de;
    DIR *dh;
    struct stat st;

    text = slurp(d, path, len);
    if (text == NULL) {
        return NULL;
    }
    text[*len] = '\0';
    snprintf(dir, sizeof(dir), "%s.d", path);
    dh = opendir(dir);
    if (dh == NULL) {
        if (errno != ENOENT) {
            sl__cfg_error(d, 0, "cannot read the directory '%s': %s", dir,
                          strerror(errno));
        }
        return text;
    }
    if (sl__cfg_add_src(d, 1, path) < 0) {
        closedir(dh);
        sl__cfg_error(d, 0, "out of memory");
        return text;
    }
    while ((de = readdir(dh)) != NULL) {
        size_t n = strlen(de->d_name);
        char **nn;

        if (de->d_name[0] == '.' || n <= 4 ||
            strcmp(de->d_name + n - 4, ".cnf") != 0) {
            continue;
        }
        nn = realloc(names, (nnames + 1) * sizeof(*names));
        if (nn == NULL || (nn[nnames] = strdup(de->d_name)) == NULL) {
            names = nn ? nn : names;
            sl__cfg_error(d, 0, "out of memory");
            break;
        }
        names = nn;
        nnames++;
    }
    closedir(dh);
    qsort(names, nnames, sizeof(*names), cmp_names);
    for (size_t i = 0; i < nnames; i++) {
        snprintf(file, sizeof(file), "%s/%s", dir, names[i]);
        if (stat(file, &st) == 0 && S_ISREG(st.st_mode)) {
            append_file(d, file, &text, len);
        }
        free(names[i]);
    }
    free(names);
    return text;
}

/* ---- $VARIABLE substitution ---- */

static struct sl_ini_section *
find_section(struct sl_ini *ini, const char *name)
{
    for (size_t i = 0; i < ini->nsections; i++) {
        if (strcasecmp(ini->sections[i].name, name) == 0) {
            return &ini->sections[i];
        }
    }
    return NULL;
}

static const char *
raw_global(struct sl_ini *ini, const char *name)
{
    struct sl_ini_section *s = find_section(ini, "maxscale");
    const struct sl_ini_kv *kv = s ? sl__ini_find(s, name) : NULL;

    return kv ? kv->value : NULL;
}

/* MaxScale: with substitute_variables=true in [maxscale], a value starting
 * with '$' is the value of that environment variable; an unset variable is
 * an error. */
static void
substitute(struct sl_ini *ini, struct sl_cfg_diag *d)
{
    const char *on = raw_global(ini, "substitute_variables");
    bool enabled = false;

    if (on == NULL || sl_param_parse_bool(on, &enabled) < 0 || !enabled) {
        return;
    }
    for (size_t i = 0; i < ini->nsections; i++) {
        struct sl_ini_section *s = &ini->sections[i];

        for (size_t k = 0; k < s->nkvs; k++) {
            struct sl_ini_kv *kv = &s->kvs[k];
            const char *env;
            char *v;

            if (kv->value[0] != '$') {
                continue;
            }
            env = getenv(kv->value + 1);
            if (env == NULL) {
                sl__cfg_error(d, kv->line, "parameter '%s' in section '%s' "
                              "names the environment variable '%s', which "
                              "is not set (substitute_variables=true)",
                              kv->name, s->name, kv->value + 1);
                continue;
            }
            v = strdup(env);
            if (v == NULL) {
                sl__cfg_error(d, kv->line, "out of memory");
                continue;
            }
            free(kv->value);
            kv->value = v;
        }
    }
}

/* ---- type=include and @include= ---- */

static int
add_kv(struct sl_ini_section *s, const struct sl_ini_kv *from)
{
    struct sl_ini_kv *kv;

    if (s->nkvs == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;

        kv = realloc(s->kvs, cap * sizeof(*kv));
        if (kv == NULL) {
            return -ENOMEM;
        }
        s->kvs = kv;
        s->cap = cap;
    }
    kv = &s->kvs[s->nkvs];
    kv->name = strdup(from->name);
    kv->value = strdup(from->value);
    kv->line = from->line;
    if (kv->name == NULL || kv->value == NULL) {
        free(kv->name);
        free(kv->value);
        return -ENOMEM;
    }
    s->nkvs++;
    return 0;
}

static bool
is_include(const struct sl_ini_section *s)
{
    const struct sl_ini_kv *kv = sl__ini_find(s, "type");

    return kv && strcmp(kv->value, "include") == 0;
}

/* Merge the include section named inc into s: parameters s sets itself
 * win; the included ones keep their own lines (messages point there). */
static void
include_one(struct sl_ini *ini, struct sl_ini_section *s, const char *inc,
            int line, struct sl_cfg_diag *d)
{
    struct sl_ini_section *from = find_section(ini, inc);

    if (from == NULL || !is_include(from)) {
        sl__cfg_error(d, line, "parameter '@include' in section '%s' names "
                      "'%s', which is not a section of type=include",
                      s->name, inc);
        return;
    }
    for (size_t k = 0; k < from->nkvs; k++) {
        const struct sl_ini_kv *kv = &from->kvs[k];

        if (strcmp(kv->name, "type") == 0 || sl__ini_find(s, kv->name)) {
            continue;
        }
        if (strcmp(kv->name, "@include") == 0) {
            sl__cfg_error(d, kv->line, "section '%s' of type=include may "
                          "not itself use '@include'", from->name);
            continue;
        }
        if (add_kv(s, kv) < 0) {
            sl__cfg_error(d, kv->line, "out of memory");
            return;
        }
    }
}

/* Remove key k of s (the @include line itself). */
static void
drop_kv(struct sl_ini_section *s, size_t k)
{
    free(s->kvs[k].name);
    free(s->kvs[k].value);
    memmove(&s->kvs[k], &s->kvs[k + 1], (s->nkvs - k - 1) * sizeof(*s->kvs));
    s->nkvs--;
}

static void
expand_includes(struct sl_ini *ini, struct sl_cfg_diag *d)
{
    for (size_t i = 0; i < ini->nsections; i++) {
        struct sl_ini_section *s = &ini->sections[i];
        const struct sl_ini_kv *kv = sl__ini_find(s, "@include");
        char *list;
        int line;

        if (kv == NULL || is_include(s)) {
            continue;
        }
        list = strdup(kv->value);
        line = kv->line;
        drop_kv(s, (size_t)(kv - s->kvs));
        if (list == NULL) {
            sl__cfg_error(d, line, "out of memory");
            continue;
        }
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t;
             t = strtok_r(NULL, ",", &save)) {
            while (isspace((unsigned char)*t)) {
                t++;
            }
            for (char *e = t + strlen(t); e > t && isspace((unsigned char)
                                                           e[-1]);) {
                *--e = '\0';
            }
            if (*t) {
                include_one(ini, s, t, line, d);
            }
        }
        free(list);
    }
}

/* ---- encrypted passwords ---- */

static int
hex_val(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int
from_hex(const char *hex, size_t hexlen, unsigned char *out)
{
    if (hexlen % 2 != 0) {
        return -EINVAL;
    }
    for (size_t i = 0; i + 1 < hexlen; i += 2) {
        int hi = hex_val((unsigned char)hex[i]);
        int lo = hex_val((unsigned char)hex[i + 1]);

        if (hi < 0 || lo < 0) {
            return -EINVAL;
        }
        out[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

static bool
all_hex(const char *s)
{
    if (*s == '\0') {
        return false;
    }
    for (; *s; s++) {
        if (!isxdigit((unsigned char)*s)) {
            return false;
        }
    }
    return true;
}

int
sl__secrets_read(const char *path, unsigned char key[SL_SECRETS_KEY_LEN],
                 char *err, size_t errlen)
{
    struct stat st;
    json_error_t jerr;
    json_t *obj;
    const char *cipher, *hex;
    int rc = -EINVAL;

    if (stat(path, &st) < 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            return -ENOENT;   /* no key file (or no such directory yet) */
        }
        snprintf(err, errlen, "cannot read '%s': %s", path,
                 strerror(errno));
        return -EIO;
    }
    if (!S_ISREG(st.st_mode) || (st.st_mode & (S_IRWXG | S_IRWXO))) {
        snprintf(err, errlen, "key file '%s' must be a regular file "
                 "readable by its owner only (chmod 0400)", path);
        return -EPERM;
    }
    obj = json_load_file(path, 0, &jerr);
    if (obj == NULL) {
        snprintf(err, errlen, "key file '%s' is not valid JSON: %s (a "
                 "pre-2.5 binary key file must be created anew with "
                 "sluice-keys)", path, jerr.text);
        return -EINVAL;
    }
    cipher = json_string_value(json_object_get(obj, "encryption_cipher"));
    hex = json_string_value(json_object_get(obj, "encryption_key"));
    if (cipher == NULL || strcmp(cipher, "EVP_aes_256_cbc") != 0 ||
        hex == NULL || strlen(hex) != 2 * SL_SECRETS_KEY_LEN ||
        from_hex(hex, strlen(hex), key) < 0) {
        snprintf(err, errlen, "key file '%s' needs \"encryption_cipher\": "
                 "\"EVP_aes_256_cbc\" and a 64-hex-digit \"encryption_key\"",
                 path);
    } else {
        rc = 0;
    }
    json_decref(obj);
    return rc;
}

int
sl__secrets_write(const char *path, char *err, size_t errlen)
{
    unsigned char key[SL_SECRETS_KEY_LEN];
    char hex[2 * SL_SECRETS_KEY_LEN + 1];
    json_t *obj;
    int fd, rc = 0;
    char *text;
    size_t n;

    if (RAND_bytes(key, sizeof(key)) != 1) {
        snprintf(err, errlen, "no random bytes from OpenSSL");
        return -EIO;
    }
    for (size_t i = 0; i < sizeof(key); i++) {
        snprintf(hex + 2 * i, 3, "%02X", key[i]);
    }
    obj = json_pack("{s:s, s:s, s:s, s:s}",
                    "description", "Sluice (MaxScale-compatible) encryption "
                    "key", "maxscale_version", "24.02.0",
                    "encryption_cipher", "EVP_aes_256_cbc",
                    "encryption_key", hex);
    text = obj ? json_dumps(obj, JSON_INDENT(4)) : NULL;
    json_decref(obj);
    OPENSSL_cleanse(key, sizeof(key));
    OPENSSL_cleanse(hex, sizeof(hex));
    if (text == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    /* O_EXCL: never overwrite a key that passwords are encrypted with */
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0400);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot create '%s': %s", path,
                 strerror(errno));
    } else {
        n = strlen(text);
        if (write(fd, text, n) != (ssize_t)n || write(fd, "\n", 1) != 1) {
            rc = -EIO;
            snprintf(err, errlen, "cannot write '%s': %s", path,
                     strerror(errno));
        }
        if (close(fd) < 0 && rc == 0) {
            rc = -EIO;
            snprintf(err, errlen, "cannot write '%s': %s", path,
                     strerror(errno));
        }
    }
    OPENSSL_cleanse(text, strlen(text));
    free(text);
    return rc;
}

char *
sl__secret_encrypt(const unsigned char key[SL_SECRETS_KEY_LEN],
                   const char *plain)
{
    unsigned char iv[16];
    size_t n = strlen(plain);
    unsigned char *ct = malloc(n + 32);
    char *hex = malloc(2 * (16 + n + 32) + 1);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int l1 = 0, l2 = 0;
    bool ok = ct && hex && ctx && RAND_bytes(iv, sizeof(iv)) == 1 &&
              EVP_EncryptInit_ex(ctx, EVP_aes_256_cbc(), NULL, key, iv) &&
              EVP_EncryptUpdate(ctx, ct, &l1, (const unsigned char *)plain,
                                (int)n) &&
              EVP_EncryptFinal_ex(ctx, ct + l1, &l2);

    EVP_CIPHER_CTX_free(ctx);
    if (!ok) {
        free(ct);
        free(hex);
        return NULL;
    }
    for (size_t i = 0; i < sizeof(iv); i++) {
        snprintf(hex + 2 * i, 3, "%02X", iv[i]);
    }
    for (int i = 0; i < l1 + l2; i++) {
        snprintf(hex + 32 + 2 * i, 3, "%02X", ct[i]);
    }
    free(ct);
    return hex;
}

char *
sl__secret_decrypt(const unsigned char key[SL_SECRETS_KEY_LEN],
                   const char *hex)
{
    size_t hexlen = strlen(hex);
    size_t n;
    unsigned char iv[16];
    unsigned char *ct, *pt;
    EVP_CIPHER_CTX *ctx;
    int l1 = 0, l2 = 0;
    bool ok;

    /* an IV and at least one block, whole bytes */
    if (hexlen < 64 || hexlen % 32 != 0 || !all_hex(hex)) {
        return NULL;
    }
    n = (hexlen - 32) / 2;
    ct = malloc(n);
    pt = malloc(n + 1);
    ctx = EVP_CIPHER_CTX_new();
    ok = ct && pt && ctx && from_hex(hex, 32, iv) == 0 &&
         from_hex(hex + 32, hexlen - 32, ct) == 0 &&
         EVP_DecryptInit_ex(ctx, EVP_aes_256_cbc(), NULL, key, iv) &&
         EVP_DecryptUpdate(ctx, pt, &l1, ct, (int)n) &&
         EVP_DecryptFinal_ex(ctx, pt + l1, &l2);
    EVP_CIPHER_CTX_free(ctx);
    free(ct);
    if (!ok) {
        free(pt);
        return NULL;
    }
    pt[l1 + l2] = '\0';
    if (strlen((char *)pt) != (size_t)(l1 + l2)) {   /* NUL inside */
        OPENSSL_cleanse(pt, n);
        free(pt);
        return NULL;
    }
    return (char *)pt;
}

/* The names whose values are passwords (MaxScale's password-type
 * parameters in the core and the modules Sluice has). */
bool
sl__is_password_name(const char *name)
{
    size_t n = strlen(name);

    return strcmp(name, "monitorpw") == 0 ||
           (n >= 8 && strcmp(name + n - 8, "password") == 0);
}

static void
decrypt_passwords(struct sl_ini *ini, struct sl_cfg_diag *d)
{
    const char *dir = raw_global(ini, "secretsdir");
    char path[4200];
    char err[4400];
    unsigned char key[SL_SECRETS_KEY_LEN];
    int rc;

    if (dir == NULL) {
        dir = raw_global(ini, "datadir");
    }
    snprintf(path, sizeof(path), "%s/.secrets",
             dir ? dir : SL_DEFAULT_DATADIR);
    rc = sl__secrets_read(path, key, err, sizeof(err));
    if (rc == -ENOENT) {
        return;   /* no key file: passwords are plain text */
    }
    if (rc < 0) {
        sl__cfg_error(d, 0, "%s", err);
        return;
    }
    sl_log_notice("using encrypted passwords: key file '%s'", path);
    for (size_t i = 0; i < ini->nsections; i++) {
        struct sl_ini_section *s = &ini->sections[i];

        for (size_t k = 0; k < s->nkvs; k++) {
            struct sl_ini_kv *kv = &s->kvs[k];
            char *plain;

            if (!sl__is_password_name(kv->name) || !all_hex(kv->value)) {
                continue;
            }
            plain = sl__secret_decrypt(key, kv->value);
            if (plain == NULL) {
                sl__cfg_error(d, kv->line, "parameter '%s' in section '%s' "
                              "looks encrypted (hex) but does not decrypt "
                              "with the key in '%s'", kv->name, s->name,
                              path);
                continue;
            }
            OPENSSL_cleanse(kv->value, strlen(kv->value));
            free(kv->value);
            kv->value = plain;
        }
    }
    OPENSSL_cleanse(key, sizeof(key));
}

void
sl__config_expand(struct sl_ini *ini, struct sl_cfg_diag *d)
{
    substitute(ini, d);
    expand_includes(ini, d);
    decrypt_passwords(ini, d);
}
