/* SPDX-License-Identifier: Apache-2.0 */
/*
 * connection_init_sql_file (init_sql.c): read a listener's statements.
 */
#ifndef SL_INIT_SQL_H
#define SL_INIT_SQL_H

#include <stddef.h>

/* A bigger file is refused: it is a list of SET statements, not a dump. */
#define SL_INIT_SQL_MAX (1024 * 1024)

/* Split text into its non-blank lines, trimmed (*out: *nout strings,
 * free with sl__init_sql_free). 0, or a negative error with err[] set. */
int sl__init_sql_parse(const char *text, size_t len, char ***out,
                       size_t *nout, char *err, size_t errlen);
/* Read and split the file at path. 0, or a negative error with err[]
 * naming the path and the cause. */
int sl__init_sql_read(const char *path, char ***out, size_t *nout, char *err,
                      size_t errlen);
void sl__init_sql_free(char **stmts, size_t n);

#endif
