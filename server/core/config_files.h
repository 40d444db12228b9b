/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration sources (config_files.c): the main file plus <file>.d/,
 * $VARIABLE values, type=include sections and encrypted passwords; and
 * the MaxScale-compatible .secrets helpers shared with the sluice-keys and
 * sluice-passwd tools.
 *
 * Context: main thread while loading; the tools.
 */
#ifndef SLUICE_CORE_CONFIG_FILES_H
#define SLUICE_CORE_CONFIG_FILES_H

#include "config_int.h"

struct sl_ini;

#define SL_SECRETS_KEY_LEN 32
#define SL_DEFAULT_DATADIR "/var/lib/sluice"

/* The main file, then <path>.d/ *.cnf in name order, as one NUL-terminated
 * text (*len bytes); d->srcs maps its lines back to the files. NULL (with
 * a message in d) when the main file cannot be read. */
char *sl__config_read_all(const char *path, size_t *len,
                          struct sl_cfg_diag *d);
/* Record that merged line `first` onwards comes from file. */
int sl__cfg_add_src(struct sl_cfg_diag *d, int first, const char *file);
/* $VARIABLEs, @include and encrypted passwords, on parsed sections. */
void sl__config_expand(struct sl_ini *ini, struct sl_cfg_diag *d);

/* Read a .secrets key file: 0, -ENOENT (no file: passwords are plain), or
 * another -errno with err[] saying why. */
int sl__secrets_read(const char *path, unsigned char key[SL_SECRETS_KEY_LEN],
                     char *err, size_t errlen);
/* Create a new key file (mode 0400, never overwriting): 0 or -errno. */
int sl__secrets_write(const char *path, char *err, size_t errlen);
/* Whether a parameter's value is a password (monitorpw, *password). */
bool sl__is_password_name(const char *name);
/* Hex (IV + AES-256-CBC ciphertext), malloc'd; NULL on failure. */
char *sl__secret_encrypt(const unsigned char key[SL_SECRETS_KEY_LEN],
                         const char *plain);
/* The plain text of an encrypted value, malloc'd; NULL if it does not
 * decrypt with key. */
char *sl__secret_decrypt(const unsigned char key[SL_SECRETS_KEY_LEN],
                         const char *hex);

#endif
