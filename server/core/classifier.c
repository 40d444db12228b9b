/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The query classifier (include/sluice/classifier.h): what a statement does,
 * from its SQL text, in one pass, without a syntax tree, regex or
 * allocation (sl_qc_classify_buf copies only a statement that spans buffer
 * segments or packets).
 *
 * Two layers:
 *
 *   lexer      bytes -> tokens. Skips whitespace and comments (--, #, C
 *              style; a routing hint in any of them is recorded), reads
 *              the inside of executable comments (/ *! / *!50100 / *M!
 *              / *M!100100) as SQL, and returns quoted strings, backticked
 *              identifiers, @uservars, @@sysvars, numbers, punctuation and
 *              words. A word is looked up in a keyword hash table while it
 *              is scanned (its hash is computed on the way), so keywords
 *              inside strings, comments or longer identifiers never count.
 *
 *   statements the first word picks a handler (a flat switch); handlers
 *              peek at a few following words (START TRANSACTION READ
 *              ONLY, CREATE TEMPORARY TABLE, SET GLOBAL x=...) and then
 *              hand the rest to the body scanner, which reacts to a small
 *              set of keywords (FROM/JOIN start table references, FOR
 *              UPDATE, LOCK IN SHARE MODE, INTO, master-only functions
 *              followed by '(', NEXT VALUE FOR, @var := ...).
 *
 * Table references are a three-state machine inside the body scanner:
 *
 *        FROM, JOIN, INTO (DML), UPDATE/DELETE/LOCK TABLES head
 *   NONE ------------------------------------------------> EXPECT
 *    ^                                                    |  name
 *    |  any reserved word or other token                  v
 *    +------------------------------------------------- AFTER
 *                      ',' at the same depth -> EXPECT;  alias, AS x,
 *                      index hints, PARTITION (...) stay in AFTER
 *
 * Statements are separated by ';' (outside strings and comments). Each is
 * classified and the type bits of all of them are OR-ed; op, name and the
 * first tables come from the first one that sets them. Two or more
 * non-empty statements set SL_QC_MULTI_STMT.
 *
 * Backslash escapes in strings are assumed on (NO_BACKSLASH_ESCAPES off),
 * "..." is a string (ANSI_QUOTES off): the server defaults.
 *
 * Context: pure functions, any thread. The keyword table is built once on
 * first use (pthread_once).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sluice/buf.h>
#include <sluice/classifier.h>
#include <sluice/mariadb.h>

#include "stats.h"

/*
 * Keywords the classifier reacts to. Flags:
 *   R  reserved here: ends a table reference, never a table name or alias
 *   N  noise where a table name is expected (INSERT LOW_PRIORITY INTO t)
 *   F  a function that must run on the primary when followed by '('
 */
enum { KF_RES = 1, KF_NOISE = 2, KF_FUNC = 4 };
#define R KF_RES
#define N KF_NOISE
#define F KF_FUNC
#define KEYWORDS(X)                                                         \
    X(ALTER, R) X(ANALYZE, R) X(AND, R) X(AS, R) X(ATOMIC, 0)               \
    X(AUTOCOMMIT, 0) X(BACKUP, 0) X(BEGIN, 0) X(BINLOG, 0) X(CACHE, 0)      \
    X(CALL, R) X(CASE, R) X(CHAIN, 0) X(CHANGE, R) X(CHARACTER, R)          \
    X(CHARSET, 0) X(CHECK, R) X(CHECKSUM, 0) X(COMMIT, 0) X(CONCURRENT, 0)  \
    X(CREATE, R) X(CROSS, R) X(DATA, 0) X(DEALLOCATE, 0) X(DECLARE, R) X(DEFAULT, R)      \
    X(DELAYED, R | N) X(DELETE, R) X(DESC, R) X(DESCRIBE, R) X(DO, 0)       \
    X(DROP, R) X(DUAL, R) X(ELSE, R) X(END, 0) X(EXCEPT, R) X(EXECUTE, 0)              \
    X(EXISTS, R) X(EXPLAIN, R) X(FALSE, R) X(FLUSH, 0) X(FOR, R)            \
    X(FORCE, R) X(FORMAT, 0) X(FOUND_ROWS, F) X(FROM, R | N) X(GET, R)      \
    X(GET_LOCK, F) X(GLOBAL, 0) X(GRANT, R) X(GROUP, R) X(HANDLER, 0)       \
    X(HAVING, R) X(HELP, 0) X(HIGH_PRIORITY, R | N) X(IF, R)                \
    X(IGNORE, R | N) X(IMMEDIATE, 0) X(IN, R) X(INNER, R) X(INSERT, R)      \
    X(INSTALL, 0) X(INTERSECT, R) X(INTO, R | N) X(IS_FREE_LOCK, F)         \
    X(IS_USED_LOCK, F) X(JOIN, R) X(KILL, R) X(LASTVAL, F)                  \
    X(LAST_INSERT_ID, F) X(LEFT, R) X(LIKE, R) X(LIMIT, R) X(LOAD, R)       \
    X(LOCAL, 0) X(LOCK, R) X(LOOP, R) X(LOW_PRIORITY, R | N) X(NAMES, 0)    \
    X(NATURAL, R) X(NEXT, 0) X(NEXTVAL, F) X(NO, 0) X(NOT, R) X(OFF, 0)     \
    X(ON, R) X(ONLINE, 0) X(ONLY, 0) X(OPTIMIZE, R) X(OR, R) X(ORDER, R)    \
    X(OUTER, R) X(PARTITION, R) X(PASSWORD, 0) X(PERSIST, 0)                \
    X(PERSIST_ONLY, 0) X(PREPARE, 0) X(PREVIOUS, 0) X(PROCEDURE, R)         \
    X(PURGE, R) X(QUICK, N) X(READ, 0) X(RECOVER, 0) X(RELEASE, R)          \
    X(RELEASE_ALL_LOCKS, F) X(RELEASE_LOCK, F) X(RENAME, R) X(REPAIR, 0)    \
    X(REPEAT, R) X(REPLACE, R) X(RESET, 0) X(RESIGNAL, R) X(RETURNING, R)   \
    X(REVOKE, R) X(RIGHT, R) X(ROLE, 0) X(ROLLBACK, 0) X(ROW_COUNT, F)      \
    X(SAVEPOINT, 0) X(SELECT, R) X(SESSION, 0) X(SET, R) X(SETVAL, F)       \
    X(SHARE, 0) X(SHOW, R) X(SHUTDOWN, 0) X(SIGNAL, R) X(START, 0)          \
    X(STATEMENT, 0) X(STOP, 0) X(STRAIGHT_JOIN, R) X(TABLE, R | N)          \
    X(TABLES, N) X(TEMPORARY, N) X(THEN, R) X(TO, R) X(TRANSACTION, 0) X(TRUE, R)      \
    X(TRUNCATE, 0) X(UNINSTALL, 0) X(UNION, R) X(UNLOCK, 0) X(UPDATE, R)    \
    X(USE, R) X(USING, R) X(VALUE, R) X(VALUES, R) X(WHERE, R) X(WHILE, R)  \
    X(WINDOW, R) X(WITH, R) X(WORK, 0) X(WRITE, 0) X(XA, 0) X(XML, 0)

enum kw {
    KW_NONE = 0,
#define X(k, f) KW_##k,
    KEYWORDS(X)
#undef X
    KW__COUNT
};

struct kwdef {
    const char *name;
    uint8_t len;
    uint8_t flags;
};

static const struct kwdef kwdefs[KW__COUNT] = {
#define X(k, f) [KW_##k] = {#k, sizeof(#k) - 1, f},
    KEYWORDS(X)
#undef X
};
#undef R
#undef N
#undef F

#define KW_MAXLEN 17            /* RELEASE_ALL_LOCKS */
#define KWH_SIZE 512            /* power of two, > 2 * KW__COUNT */

static uint16_t kwhash[KWH_SIZE];       /* keyword id + 0, 0 = empty slot */
static uint32_t kwhval[KW__COUNT];
static pthread_once_t kw_once = PTHREAD_ONCE_INIT;

enum cclass { C_OTHER = 0, C_SPACE, C_IDENT, C_DIGIT };

/* Identifier bytes: letters, digits, _ $ and any non-ASCII byte. */
static const uint8_t cclass[256] = {
    [' '] = C_SPACE, ['\t'] = C_SPACE, ['\n'] = C_SPACE,
    ['\r'] = C_SPACE, ['\f'] = C_SPACE, ['\v'] = C_SPACE,
    ['0' ... '9'] = C_DIGIT,
    ['A' ... 'Z'] = C_IDENT, ['a' ... 'z'] = C_IDENT,
    ['_'] = C_IDENT, ['$'] = C_IDENT,
    [0x80 ... 0xff] = C_IDENT,
};

static inline unsigned
upper(unsigned char c)
{
    return c - (((unsigned)(c - 'a') < 26u) << 5);
}

static inline uint32_t
hash_step(uint32_t h, unsigned char c)
{
    return (h ^ upper(c)) * 16777619u;
}

#define HASH_INIT 2166136261u

static void
kw_init(void)
{
    for (unsigned k = 1; k < KW__COUNT; k++) {
        uint32_t h = HASH_INIT;

        for (unsigned i = 0; i < kwdefs[k].len; i++) {
            h = hash_step(h, (unsigned char)kwdefs[k].name[i]);
        }
        kwhval[k] = h;
        for (unsigned i = h & (KWH_SIZE - 1);; i = (i + 1) & (KWH_SIZE - 1)) {
            if (kwhash[i] == 0) {
                kwhash[i] = (uint16_t)k;
                break;
            }
        }
    }
}

/* The keyword table, built once; the flag spares the data path a call to
 * pthread_once per statement. */
static void
kw_ensure(void)
{
    static bool ready;

    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        pthread_once(&kw_once, kw_init);
        __atomic_store_n(&ready, true, __ATOMIC_RELEASE);
    }
}

/* True when s[0..n) equals the upper-case word kw, ignoring case. */
static bool
ci_equal(const char *s, const char *kw, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (upper((unsigned char)s[i]) != (unsigned char)kw[i]) {
            return false;
        }
    }
    return true;
}

static unsigned
kw_lookup(const char *s, size_t n, uint32_t h)
{
    if (n > KW_MAXLEN) {
        return KW_NONE;
    }
    for (unsigned i = h & (KWH_SIZE - 1);; i = (i + 1) & (KWH_SIZE - 1)) {
        unsigned k = kwhash[i];

        if (k == 0) {
            return KW_NONE;
        }
        if (kwhval[k] == h && kwdefs[k].len == n
            && ci_equal(s, kwdefs[k].name, n)) {
            return k;
        }
    }
}

/* ---- lexer ---------------------------------------------------------- */

enum tok_type {
    T_END,          /* end of input */
    T_WORD,         /* unquoted word; kw set when it is a keyword */
    T_QIDENT,       /* `identifier`: s/n inside the backticks, raw */
    T_STRING,       /* '...' or "...": s/n inside the quotes, raw */
    T_NUMBER,       /* digits and dots only */
    T_USERVAR,      /* @name, @'name', @`name` */
    T_SYSVAR,       /* @@name, @@scope.name: s/n after the @@ */
    T_ASSIGN,       /* := */
    T_PUNCT,        /* any other single byte, in c */
};

struct tok {
    uint8_t type;
    uint8_t c;      /* T_PUNCT: the byte */
    uint16_t kw;    /* T_WORD: enum kw */
    size_t n;
    const char *s;
};

enum tstate { TS_NONE, TS_EXPECT, TS_AFTER };

#define MAX_NEST 8  /* SET STATEMENT ... FOR / ANALYZE <stmt> nesting */

struct qc {
    const char *p;
    const char *end;
    int exec;                   /* executable comments open */
    bool has_la;
    struct tok la;              /* lookahead */
    struct sl_qc_result *out;
    unsigned nstmt;             /* non-empty statements seen */
    /* The statement being classified. */
    uint32_t type;
    enum sl_qc_op op;
    int depth;                  /* parentheses */
    enum tstate ts;
    int ts_depth;               /* depth of the table list */
    uint32_t open_lists;        /* bit d: a table list at depth d goes on
                                 * after the ( derived table ) now open */
    int nest;
    bool with_pending;          /* WITH ...: main verb not seen yet */
    bool into;                  /* SELECT ... INTO seen */
    bool prev_dot;              /* previous token was '.' */
};

static bool
is_space(unsigned char c)
{
    return cclass[c] == C_SPACE;
}

static void hint_parse(struct qc *q, const char *s, const char *e);

/* Skips a comment starting at q->p; false when it is not one. */
static bool
skip_comment(struct qc *q)
{
    const char *p = q->p, *e = q->end, *s;

    if (*p == '#' || (*p == '-' && e - p >= 2 && p[1] == '-'
                      && (e - p == 2 || (unsigned char)p[2] <= ' '
                          || p[2] == 0x7f))) {
        s = p + (*p == '#' ? 1 : 2);
        p = memchr(s, '\n', (size_t)(e - s));
        p = p ? p : e;
        hint_parse(q, s, p);
        q->p = p;
        return true;
    }
    if (*p != '/' || e - p < 2 || p[1] != '*') {
        return false;
    }
    if (e - p >= 3 && (p[2] == '!' || (p[2] == 'M' && e - p >= 4
                                       && p[3] == '!'))) {
        /* Executable comment: its content is SQL; skip the version. */
        p += p[2] == '!' ? 3 : 4;
        for (int i = 0; i < 6 && p < e && cclass[(unsigned char)*p] == C_DIGIT;
             i++) {
            p++;
        }
        q->exec++;
        q->p = p;
        return true;
    }
    for (s = p + 2, p = s; p + 1 < e && !(p[0] == '*' && p[1] == '/'); p++) {
    }
    if (p + 1 < e) {
        hint_parse(q, s, p);
        q->p = p + 2;
    } else {
        hint_parse(q, s, e);
        q->p = e;
    }
    return true;
}

/* Scans a quoted run ending with `quote` at q->p (just past the opening
 * quote). A doubled quote continues it; backslash escapes unless `. */
static void
lex_quoted(struct qc *q, struct tok *t, char quote, uint8_t type)
{
    const char *p = q->p, *e = q->end;

    t->type = type;
    t->s = p;
    while (p < e) {
        if (*p == quote) {
            if (p + 1 < e && p[1] == quote) {
                p += 2;
                continue;
            }
            break;
        }
        p += (*p == '\\' && quote != '`' && p + 1 < e) ? 2 : 1;
    }
    t->n = (size_t)(p - t->s);
    q->p = p < e ? p + 1 : e;
}

static void
lex_word(struct qc *q, struct tok *t)
{
    const char *p = q->p, *e = q->end;
    uint32_t h = HASH_INIT;

    while (p < e && cclass[(unsigned char)*p] >= C_IDENT) {
        h = hash_step(h, (unsigned char)*p++);
    }
    t->type = T_WORD;
    t->s = q->p;
    t->n = (size_t)(p - q->p);
    t->kw = (uint16_t)kw_lookup(t->s, t->n, h);
    q->p = p;
}

/* A token starting with a digit: a number, or a word like 1e5, 0x1f. */
static void
lex_number(struct qc *q, struct tok *t)
{
    const char *p = q->p, *e = q->end;
    bool word = false;

    while (p < e && (cclass[(unsigned char)*p] >= C_IDENT || *p == '.')) {
        word |= cclass[(unsigned char)*p] == C_IDENT;
        p++;
    }
    t->type = word ? T_WORD : T_NUMBER;
    t->kw = KW_NONE;
    t->s = q->p;
    t->n = (size_t)(p - q->p);
    q->p = p;
}

/* @var, @'var', @`var`, @@var, @@scope.var */
static void
lex_var(struct qc *q, struct tok *t)
{
    const char *p = q->p + 1, *e = q->end;
    bool sys = p < e && *p == '@';

    p += sys;
    if (!sys && p < e && (*p == '\'' || *p == '"' || *p == '`')) {
        q->p = p + 1;
        lex_quoted(q, t, *p, T_USERVAR);
        return;
    }
    t->s = p;
    while (p < e && (cclass[(unsigned char)*p] >= C_IDENT || *p == '.')) {
        p++;
    }
    t->type = sys ? T_SYSVAR : T_USERVAR;
    t->n = (size_t)(p - t->s);
    q->p = p;
}

static void
lex(struct qc *q, struct tok *t)
{
    for (;;) {
        while (q->p < q->end && is_space((unsigned char)*q->p)) {
            q->p++;
        }
        if (q->p >= q->end) {
            t->type = T_END;
            return;
        }
        unsigned char c = (unsigned char)*q->p;

        if (cclass[c] == C_IDENT) {
            lex_word(q, t);
            return;
        }
        if (cclass[c] == C_DIGIT) {
            lex_number(q, t);
            return;
        }
        if ((c == '#' || c == '-' || c == '/') && skip_comment(q)) {
            continue;
        }
        if (c == '*' && q->exec > 0 && q->end - q->p >= 2 && q->p[1] == '/') {
            q->exec--;
            q->p += 2;
            continue;
        }
        switch (c) {
        case '\'':
        case '"':
            q->p++;
            lex_quoted(q, t, (char)c, T_STRING);
            return;
        case '`':
            q->p++;
            lex_quoted(q, t, '`', T_QIDENT);
            return;
        case '@':
            lex_var(q, t);
            return;
        case ':':
            if (q->end - q->p >= 2 && q->p[1] == '=') {
                t->type = T_ASSIGN;
                q->p += 2;
                return;
            }
            break;
        }
        t->type = T_PUNCT;
        t->c = c;
        q->p++;
        return;
    }
}

static void
next(struct qc *q, struct tok *t)
{
    if (q->has_la) {
        *t = q->la;
        q->has_la = false;
    } else {
        lex(q, t);
    }
}

static const struct tok *
peek(struct qc *q)
{
    if (!q->has_la) {
        lex(q, &q->la);
        q->has_la = true;
    }
    return &q->la;
}

static void
take(struct qc *q)
{
    q->has_la = false;
}

static bool
is_kw(const struct tok *t, unsigned kw)
{
    return t->type == T_WORD && t->kw == kw;
}

static bool
is_punct(const struct tok *t, char c)
{
    return t->type == T_PUNCT && t->c == (uint8_t)c;
}

static bool
ends_stmt(const struct tok *t)
{
    return t->type == T_END || is_punct(t, ';');
}

/* Consumes the next token when it is keyword kw. */
static bool
want(struct qc *q, unsigned kw)
{
    if (is_kw(peek(q), kw)) {
        take(q);
        return true;
    }
    return false;
}

static bool
is_name(const struct tok *t)
{
    return t->type == T_QIDENT
           || (t->type == T_WORD && !(kwdefs[t->kw].flags & KF_RES));
}

/* ---- hints and names ------------------------------------------------ */

/* Appends token text to dst (of SL_QC_NAME_MAX, holding *len bytes),
 * unescaping doubled backticks of a quoted identifier; truncates. */
static void
name_append(char *dst, size_t *len, const struct tok *t)
{
    size_t j = *len;

    for (size_t i = 0; i < t->n && j < SL_QC_NAME_MAX - 1; i++) {
        dst[j++] = t->s[i];
        if (t->type == T_QIDENT && t->s[i] == '`' && i + 1 < t->n) {
            i++;
        }
    }
    dst[j] = '\0';
    *len = j;
}

static void
name_set(char *dst, const struct tok *t)
{
    size_t len = 0;

    name_append(dst, &len, t);
}

/* The next whitespace-separated word of [*s, e) into *w, *wn. */
static bool
hint_word(const char **s, const char *e, const char **w, size_t *wn)
{
    const char *p = *s;

    while (p < e && is_space((unsigned char)*p)) {
        p++;
    }
    *w = p;
    while (p < e && !is_space((unsigned char)*p)) {
        p++;
    }
    *wn = (size_t)(p - *w);
    *s = p;
    return *wn > 0;
}

static bool
hint_is(const char *w, size_t n, const char *kw)
{
    return n == strlen(kw) && ci_equal(w, kw, n);
}

/* "maxscale route to master|slave|last|all|server NAME" in a comment
 * body [s, e); the first hint of the input wins. */
static void
hint_parse(struct qc *q, const char *s, const char *e)
{
    static const char *const words[] = {"MAXSCALE", "ROUTE", "TO"};
    struct sl_hint *h = &q->out->hint;
    const char *w;
    size_t n;

    if (h->type != SL_HINT_NONE) {
        return;
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(words); i++) {
        if (!hint_word(&s, e, &w, &n) || !hint_is(w, n, words[i])) {
            return;
        }
    }
    if (!hint_word(&s, e, &w, &n)) {
        return;
    }
    if (hint_is(w, n, "MASTER")) {
        h->type = SL_HINT_ROUTE_TO_MASTER;
    } else if (hint_is(w, n, "SLAVE")) {
        h->type = SL_HINT_ROUTE_TO_SLAVE;
    } else if (hint_is(w, n, "LAST")) {
        h->type = SL_HINT_ROUTE_TO_LAST_USED;
    } else if (hint_is(w, n, "ALL")) {
        h->type = SL_HINT_ROUTE_TO_ALL;
    } else if (hint_is(w, n, "SERVER") && hint_word(&s, e, &w, &n)) {
        h->type = SL_HINT_ROUTE_TO_NAMED_SERVER;
        n = n < SL_QC_NAME_MAX - 1 ? n : SL_QC_NAME_MAX - 1;
        memcpy(h->server, w, n);
        h->server[n] = '\0';
    }
}

/* ---- tables --------------------------------------------------------- */

/* Records the table named by t (and ".name" parts that follow). */
static void
table_add(struct qc *q, const struct tok *t)
{
    struct sl_qc_result *out = q->out;
    char name[SL_QC_NAME_MAX];
    size_t len = 0;
    struct tok part;

    name_append(name, &len, t);
    while (is_punct(peek(q), '.')) {
        take(q);
        next(q, &part);
        if (part.type != T_WORD && part.type != T_QIDENT) {
            break;
        }
        if (len < SL_QC_NAME_MAX - 1) {
            name[len++] = '.';
        }
        name_append(name, &len, &part);
    }
    unsigned stored = out->ntables < SL_QC_MAX_TABLES ? out->ntables
                                                      : SL_QC_MAX_TABLES;
    for (unsigned i = 0; i < stored; i++) {
        if (strcmp(out->tables[i], name) == 0) {
            return;
        }
    }
    if (stored < SL_QC_MAX_TABLES) {
        memcpy(out->tables[stored], name, len + 1);
    }
    out->ntables++;
}

static void
table_expect(struct qc *q)
{
    q->ts = TS_EXPECT;
    q->ts_depth = q->depth;
}

/* Skips index hints / PARTITION: words up to a (...) group. */
static void
skip_group(struct qc *q)
{
    struct tok t;
    int depth = 0;

    while (!ends_stmt(peek(q))) {
        next(q, &t);
        if (is_punct(&t, '(')) {
            depth++;
        } else if (is_punct(&t, ')') && --depth <= 0) {
            return;
        } else if (depth == 0 && t.type != T_WORD) {
            return;
        }
    }
}

/* The table-reference state machine; true when it consumed t. */
static bool
table_state(struct qc *q, const struct tok *t)
{
    if (q->ts == TS_EXPECT) {
        if (t->type == T_WORD && (kwdefs[t->kw].flags & KF_NOISE)) {
            return true;
        }
        if (is_punct(t, '(')) {
            /* A derived table or a parenthesized join. */
            if (q->depth < 32) {
                q->open_lists |= 1u << q->depth;
            }
            q->depth++;
            if (is_name(peek(q))) {
                q->ts_depth = q->depth;
            } else {
                q->ts = TS_NONE;
            }
            return true;
        }
        if (is_name(t)) {
            table_add(q, t);
            q->ts = TS_AFTER;
            return true;
        }
        q->ts = TS_NONE;
        return false;
    }
    if (is_punct(t, ',') && q->depth == q->ts_depth) {
        q->ts = TS_EXPECT;
        return true;
    }
    if (is_kw(t, KW_AS)) {
        if (!ends_stmt(peek(q))) {
            take(q);
        }
        return true;
    }
    if (is_name(t)) {
        return true;   /* alias, or READ/WRITE of LOCK TABLES */
    }
    if (is_kw(t, KW_USE) || is_kw(t, KW_FORCE) || is_kw(t, KW_IGNORE)
        || is_kw(t, KW_PARTITION)) {
        skip_group(q);
        return true;
    }
    q->ts = TS_NONE;
    return false;
}

/* ---- statement bodies ----------------------------------------------- */

static void
set_verb(struct qc *q, enum sl_qc_op op, uint32_t type)
{
    q->op = op;
    q->type |= type;
}

/* WITH ...: the first DML verb at the WITH's own level decides. */
static void
with_verb(struct qc *q, unsigned kw)
{
    switch (kw) {
    case KW_SELECT:
        set_verb(q, SL_QC_OP_SELECT, SL_QC_READ);
        break;
    case KW_INSERT:
        set_verb(q, SL_QC_OP_INSERT, SL_QC_WRITE);
        table_expect(q);
        break;
    case KW_REPLACE:
        set_verb(q, SL_QC_OP_REPLACE, SL_QC_WRITE);
        table_expect(q);
        break;
    case KW_UPDATE:
        set_verb(q, SL_QC_OP_UPDATE, SL_QC_WRITE);
        table_expect(q);
        break;
    case KW_DELETE:
        set_verb(q, SL_QC_OP_DELETE, SL_QC_WRITE);
        table_expect(q);
        break;
    default:
        return;
    }
    q->with_pending = false;
}

static void
body_keyword(struct qc *q, const struct tok *t)
{
    const struct tok *la;

    switch (t->kw) {
    case KW_FROM:
    case KW_JOIN:
    case KW_STRAIGHT_JOIN:
        table_expect(q);
        return;
    case KW_TO:
        if (q->op == SL_QC_OP_RENAME) {
            table_expect(q);
        }
        return;
    case KW_INTO:
        if (q->op == SL_QC_OP_SELECT) {
            q->type |= SL_QC_MASTER_READ;
            q->into = true;
        } else {
            table_expect(q);
        }
        return;
    case KW_FOR:
        la = peek(q);
        if (is_kw(la, KW_UPDATE) || is_kw(la, KW_SHARE)) {
            take(q);
            q->type |= SL_QC_MASTER_READ;
        }
        return;
    case KW_LOCK:
        if (want(q, KW_IN)) {
            q->type |= SL_QC_MASTER_READ;
        }
        return;
    case KW_NEXT:
    case KW_PREVIOUS:
        if (want(q, KW_VALUE)) {
            q->type |= SL_QC_MASTER_READ;
        }
        return;
    default:
        break;
    }
    if ((kwdefs[t->kw].flags & KF_FUNC) && is_punct(peek(q), '(')) {
        q->type |= SL_QC_MASTER_READ;
        if (t->kw == KW_FOUND_ROWS) {
            q->type |= SL_QC_PREV_RESULT;
        }
    } else if (q->with_pending && q->depth == 0) {
        with_verb(q, t->kw);
    }
}

/* One token of a statement body. */
static void
body_token(struct qc *q, const struct tok *t)
{
    bool dot = q->prev_dot;

    q->prev_dot = false;
    if (q->ts != TS_NONE && table_state(q, t)) {
        return;
    }
    switch (t->type) {
    case T_PUNCT:
        if (t->c == '(') {
            q->depth++;
        } else if (t->c == ')' && q->depth > 0) {
            q->depth--;
            if (q->depth < 32 && (q->open_lists & (1u << q->depth))) {
                q->open_lists &= ~(1u << q->depth);
                q->ts = TS_AFTER;
                q->ts_depth = q->depth;
            }
        }
        q->prev_dot = t->c == '.';
        break;
    case T_SYSVAR:
        q->type |= SL_QC_SYSVAR_READ;
        break;
    case T_USERVAR:
        if (peek(q)->type == T_ASSIGN) {
            q->type |= SL_QC_USERVAR_WRITE | SL_QC_MASTER_READ;
        } else {
            q->type |= q->into ? SL_QC_USERVAR_WRITE : SL_QC_USERVAR_READ;
        }
        break;
    case T_WORD:
        if (t->kw != KW_NONE && !dot) {
            body_keyword(q, t);
        }
        break;
    default:
        break;
    }
}

/* The rest of the statement, through its ';' or the end. */
static void
scan_body(struct qc *q)
{
    struct tok t;

    for (next(q, &t); !ends_stmt(&t); next(q, &t)) {
        body_token(q, &t);
    }
}

/* The rest of the statement, ignored (only hints and ';' matter). */
static void
skip_body(struct qc *q)
{
    struct tok t;

    for (next(q, &t); !ends_stmt(&t); next(q, &t)) {
    }
}

/*
 * The rest of a compound statement (BEGIN NOT ATOMIC ... END, FOR/WHILE/
 * LOOP/REPEAT/IF/CASE ... END x, labelled blocks) or of one that holds a
 * compound body (CREATE PROCEDURE ... BEGIN ... END), `level` blocks
 * already open: ';' ends it only outside every block. Every block ends
 * with END (END IF, END LOOP, END CASE, ...): BEGIN and CASE open one
 * anywhere (a CASE expression ends with END too); FOR, WHILE, LOOP,
 * REPEAT and IF open one only where a statement starts (after ';', a
 * label's ':', BEGIN NOT ATOMIC, DO, THEN, ELSE, LOOP, REPEAT), since
 * elsewhere they are SELECT ... FOR UPDATE or the IF() and REPEAT()
 * functions.
 *
 * With `body` (a compound statement run now, not a definition): a
 * statement inside that may change the session's state marks the whole
 * statement SL_QC_SESSION_WRITE — a SET (at a statement start: not
 * UPDATE t SET or CHARACTER SET), PREPARE, DEALLOCATE, EXECUTE [IMMEDIATE],
 * a user variable, a TEMPORARY table, USE — so that a router knows the
 * session's state may now differ between servers.
 */
/* The local variables of a compound statement (DECLARE a, b INT; FOR i
 * IN ...): SET of one of them changes no session state. */
#define MAX_LOCALS 16
struct locals {
    const char *s[MAX_LOCALS];
    size_t n[MAX_LOCALS];
    unsigned count;
};

static bool
is_local(const struct locals *l, const struct tok *t)
{
    if (t->type != T_WORD && t->type != T_QIDENT) {
        return false;
    }
    for (unsigned i = 0; i < l->count; i++) {
        if (l->n[i] == t->n && strncasecmp(l->s[i], t->s, t->n) == 0) {
            return true;
        }
    }
    return false;
}

static void
add_local(struct locals *l, const struct tok *t)
{
    if ((t->type == T_WORD || t->type == T_QIDENT) && l->count < MAX_LOCALS) {
        l->s[l->count] = t->s;
        l->n[l->count++] = t->n;
    }
}

static void
skip_compound(struct qc *q, int level, int ctl, bool body, bool for_var)
{
    struct tok t;
    const struct tok *la;
    bool start = true;          /* t is where a statement may start */
    struct locals loc = {.count = 0};
    int decl = for_var ? 2 : 0; /* 1: DECLARE names, 2: FOR's variable */
    bool local_set = false;     /* in SET local = ...: a ',' may follow */

    for (next(q, &t); t.type != T_END; next(q, &t)) {
        bool opens_stmt = false;

        if (is_punct(&t, ';') && level <= 0 && ctl <= 0) {
            return;
        }
        if (decl == 1 && (t.type == T_WORD || t.type == T_QIDENT) &&
            t.kw == KW_NONE) {
            add_local(&loc, &t);        /* DECLARE a, b INT */
            la = peek(q);
            decl = is_punct(la, ',') ? 1 : 0;
            if (decl) {
                take(q);
            }
            start = false;
            continue;
        }
        if (decl == 2) {
            add_local(&loc, &t);        /* FOR i IN ... */
            decl = 0;
            start = false;
            continue;
        }
        decl = 0;
        if (is_punct(&t, ';')) {
            local_set = false;
        } else if (local_set && is_punct(&t, ',') && !is_local(&loc, peek(q))) {
            q->type |= SL_QC_SESSION_WRITE;   /* SET x = 1, sql_mode = '' */
        }
        if (start && is_kw(&t, KW_DECLARE)) {
            decl = 1;
        } else if (start && is_kw(&t, KW_FOR)) {
            decl = 2;
        }
        if (is_kw(&t, KW_BEGIN) || is_kw(&t, KW_CASE)) {
            level++;
            opens_stmt = is_kw(&t, KW_BEGIN);
        } else if (start && (is_kw(&t, KW_FOR) || is_kw(&t, KW_WHILE) ||
                             is_kw(&t, KW_LOOP) || is_kw(&t, KW_REPEAT) ||
                             is_kw(&t, KW_IF))) {
            ctl++;
            opens_stmt = is_kw(&t, KW_LOOP) || is_kw(&t, KW_REPEAT);
        } else if (is_kw(&t, KW_END)) {
            la = peek(q);
            if (is_kw(la, KW_IF) || is_kw(la, KW_LOOP) ||
                is_kw(la, KW_WHILE) || is_kw(la, KW_REPEAT) ||
                is_kw(la, KW_FOR)) {
                take(q);   /* END IF: its IF does not open a block */
                ctl -= ctl > 0;
            } else {
                level--;   /* END, END CASE, END label */
            }
        } else if (body) {
            if (start && is_kw(&t, KW_SET) && is_local(&loc, peek(q))) {
                local_set = true;
            } else if ((start && is_kw(&t, KW_SET)) || is_kw(&t, KW_PREPARE) ||
                is_kw(&t, KW_DEALLOCATE) || is_kw(&t, KW_EXECUTE) ||
                is_kw(&t, KW_TEMPORARY) || (start && is_kw(&t, KW_USE)) ||
                t.type == T_USERVAR) {
                q->type |= SL_QC_SESSION_WRITE;
            }
        }
        start = opens_stmt || is_punct(&t, ';') || is_punct(&t, ':') ||
                is_kw(&t, KW_ATOMIC) || is_kw(&t, KW_DO) ||
                is_kw(&t, KW_THEN) || is_kw(&t, KW_ELSE);
    }
}

/* A compound statement run at once (not a definition): it may write and
 * may change the session's state (see skip_compound). `level` blocks are
 * open already. */
static void
stmt_compound(struct qc *q, int level, int ctl, bool for_var)
{
    set_verb(q, SL_QC_OP_OTHER, SL_QC_WRITE);
    skip_compound(q, level, ctl, true, for_var);
}

/* ---- statement handlers --------------------------------------------- */

static void stmt_dispatch(struct qc *q, const struct tok *first);

/* Continues with the statement starting at the next token (SET STATEMENT
 * ... FOR stmt, ANALYZE stmt). */
static void
stmt_nested(struct qc *q)
{
    struct tok t;

    next(q, &t);
    if (ends_stmt(&t) || q->nest >= MAX_NEST) {
        q->type |= SL_QC_UNKNOWN;
        if (!ends_stmt(&t)) {
            skip_body(q);
        }
        return;
    }
    q->nest++;
    stmt_dispatch(q, &t);
}

/* Reads a name (USE db, PREPARE s) into out->name when it is the first. */
static void
stmt_name(struct qc *q)
{
    const struct tok *t = peek(q);

    if (t->type == T_WORD || t->type == T_QIDENT) {
        if (q->out->name[0] == '\0') {
            name_set(q->out->name, t);
        }
        take(q);
    }
}

/* COMMIT/ROLLBACK [WORK] [AND [NO] CHAIN] [[NO] RELEASE] */
static void
trx_end_tail(struct qc *q)
{
    want(q, KW_WORK);
    if (want(q, KW_AND) && !want(q, KW_NO) && want(q, KW_CHAIN)) {
        q->type |= SL_QC_BEGIN_TRX;
    }
    skip_body(q);
}

/* START TRANSACTION [READ ONLY | READ WRITE | WITH CONSISTENT SNAPSHOT]
 * [, ...]; anything else after START (SLAVE, REPLICA, ALL) is admin. */
static void
stmt_start(struct qc *q)
{
    struct tok t;

    if (!want(q, KW_TRANSACTION)) {
        set_verb(q, SL_QC_OP_OTHER, SL_QC_WRITE);
        skip_body(q);
        return;
    }
    set_verb(q, SL_QC_OP_BEGIN, SL_QC_BEGIN_TRX);
    for (next(q, &t); !ends_stmt(&t); next(q, &t)) {
        if (!is_kw(&t, KW_READ)) {
            continue;
        }
        if (want(q, KW_ONLY)) {
            q->type |= SL_QC_READ_ONLY_TRX;
        } else if (want(q, KW_WRITE)) {
            q->type |= SL_QC_READ_WRITE_TRX;
        }
    }
}

static void
stmt_rollback(struct qc *q)
{
    want(q, KW_WORK);
    if (want(q, KW_TO)) {
        set_verb(q, SL_QC_OP_SAVEPOINT, SL_QC_WRITE);
        skip_body(q);
        return;
    }
    set_verb(q, SL_QC_OP_ROLLBACK, SL_QC_ROLLBACK);
    trx_end_tail(q);
}

static void
stmt_xa(struct qc *q)
{
    const struct tok *t = peek(q);

    set_verb(q, SL_QC_OP_XA, SL_QC_XA | SL_QC_WRITE);
    if (is_kw(t, KW_START) || is_kw(t, KW_BEGIN)) {
        q->type |= SL_QC_BEGIN_TRX;
    } else if (is_kw(t, KW_COMMIT)) {
        q->type |= SL_QC_COMMIT;
    } else if (is_kw(t, KW_ROLLBACK)) {
        q->type |= SL_QC_ROLLBACK;
    }
    skip_body(q);
}

/* CREATE [OR REPLACE] [TEMPORARY] TABLE [IF NOT EXISTS] name ... */
static void
stmt_create(struct qc *q)
{
    bool tmp;
    const struct tok *t;

    set_verb(q, SL_QC_OP_CREATE, SL_QC_DDL | SL_QC_WRITE);
    if (want(q, KW_OR)) {
        want(q, KW_REPLACE);
    }
    tmp = want(q, KW_TEMPORARY);
    if (!want(q, KW_TABLE)) {
        skip_compound(q, 0, 0, false, false);    /* PROCEDURE, TRIGGER, VIEW, ... */
        return;
    }
    if (want(q, KW_IF)) {
        want(q, KW_NOT);
        want(q, KW_EXISTS);
    }
    if (tmp) {
        q->type |= SL_QC_CREATE_TMP_TABLE;
    }
    t = peek(q);
    if (t->type == T_WORD || t->type == T_QIDENT) {
        struct tok name = *t;

        take(q);
        table_add(q, &name);
    }
    if (want(q, KW_LIKE)) {
        table_expect(q);
    }
    scan_body(q);
}

/* DROP [TEMPORARY] TABLE [IF EXISTS] a, b | DROP PREPARE s | DROP ... */
static void
stmt_drop(struct qc *q)
{
    if (want(q, KW_PREPARE)) {
        set_verb(q, SL_QC_OP_DEALLOCATE,
                 SL_QC_DEALLOC_PREPARE | SL_QC_SESSION_WRITE);
        stmt_name(q);
        skip_body(q);
        return;
    }
    set_verb(q, SL_QC_OP_DROP, SL_QC_DDL | SL_QC_WRITE);
    want(q, KW_TEMPORARY);
    if (!want(q, KW_TABLE) && !want(q, KW_TABLES)) {
        skip_body(q);
        return;
    }
    q->type |= SL_QC_DROP_TABLE;
    if (want(q, KW_IF)) {
        want(q, KW_EXISTS);
    }
    table_expect(q);
    scan_body(q);
}

/* ALTER [ONLINE] [IGNORE] TABLE t, TRUNCATE [TABLE] t, RENAME TABLE a TO b */
static void
stmt_ddl_table(struct qc *q, enum sl_qc_op op)
{
    set_verb(q, op, SL_QC_DDL | SL_QC_WRITE);
    want(q, KW_ONLINE);
    want(q, KW_IGNORE);
    if (!want(q, KW_TABLE) && !want(q, KW_TABLES) && op != SL_QC_OP_TRUNCATE) {
        skip_body(q);
        return;
    }
    table_expect(q);
    if (op == SL_QC_OP_RENAME) {
        scan_body(q);
        return;
    }
    const struct tok *t = peek(q);

    if (is_name(t)) {
        struct tok name = *t;

        take(q);
        table_add(q, &name);
    }
    q->ts = TS_NONE;
    skip_body(q);
}

/* LOAD DATA|XML [LOW_PRIORITY|CONCURRENT] [LOCAL] INFILE ... INTO TABLE t */
static void
stmt_load(struct qc *q)
{
    set_verb(q, SL_QC_OP_LOAD, SL_QC_WRITE);
    if (!want(q, KW_DATA) && !want(q, KW_XML)) {
        skip_body(q);   /* LOAD INDEX INTO CACHE */
        return;
    }
    want(q, KW_LOW_PRIORITY);
    want(q, KW_CONCURRENT);
    if (want(q, KW_LOCAL)) {
        q->type |= SL_QC_LOAD_LOCAL;
    }
    scan_body(q);
}

/* The statement name after PREPARE/EXECUTE/DEALLOCATE PREPARE. */
static void
stmt_ps(struct qc *q, enum sl_qc_op op, uint32_t type, bool body)
{
    set_verb(q, op, type);
    stmt_name(q);
    if (body) {
        scan_body(q);
    } else {
        skip_body(q);
    }
}

static void
stmt_execute(struct qc *q)
{
    if (want(q, KW_IMMEDIATE)) {
        /* Dynamic SQL may do anything, change the session's state too. */
        set_verb(q, SL_QC_OP_EXECUTE, SL_QC_WRITE | SL_QC_SESSION_WRITE);
        scan_body(q);
        return;
    }
    stmt_ps(q, SL_QC_OP_EXECUTE, SL_QC_EXEC_PREPARED, true);
}

static void
stmt_analyze(struct qc *q)
{
    if (want(q, KW_TABLE)) {
        set_verb(q, SL_QC_OP_OTHER, SL_QC_WRITE);
        skip_body(q);
        return;
    }
    if (want(q, KW_FORMAT)) {       /* ANALYZE FORMAT=JSON stmt */
        if (is_punct(peek(q), '=')) {
            take(q);
        }
        if (peek(q)->type == T_WORD) {
            take(q);
        }
    }
    stmt_nested(q);
}

/* ---- SET ------------------------------------------------------------ */

/* The left side of one SET assignment. */
struct set_lhs {
    bool uservar;
    bool global;
    bool autocommit;
};

/* @@[global.|session.|local.]name */
static void
sysvar_lhs(const struct tok *t, struct set_lhs *lhs)
{
    const char *s = t->s, *dot = memchr(s, '.', t->n);
    size_t n = t->n;

    if (dot != NULL) {
        size_t pn = (size_t)(dot - s);

        lhs->global = (pn == 6 && ci_equal(s, "GLOBAL", 6))
                      || (pn == 7 && ci_equal(s, "PERSIST", 7));
        n -= pn + 1;
        s = dot + 1;
    } else {
        lhs->global = false;
    }
    lhs->autocommit = n == 10 && ci_equal(s, "AUTOCOMMIT", 10);
}

/* 1 for ON/TRUE/1/'ON'..., 0 for OFF/FALSE/0, -1 otherwise. */
static int
bool_value(const struct tok *t)
{
    static const char *const on[] = {"1", "ON", "TRUE"};
    static const char *const off[] = {"0", "OFF", "FALSE"};

    if (t->type != T_NUMBER && t->type != T_WORD && t->type != T_STRING) {
        return -1;
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(on); i++) {
        if (hint_is(t->s, t->n, on[i])) {
            return 1;
        }
        if (hint_is(t->s, t->n, off[i])) {
            return 0;
        }
    }
    return -1;
}

static void
set_apply(struct qc *q, const struct set_lhs *lhs, const struct tok *val,
          unsigned nval)
{
    int v;

    if (lhs->uservar) {
        q->type |= SL_QC_USERVAR_WRITE | SL_QC_SESSION_WRITE;
    } else if (lhs->global) {
        q->type |= SL_QC_GSYSVAR_WRITE | SL_QC_WRITE;
    } else {
        q->type |= SL_QC_SESSION_WRITE;
        v = lhs->autocommit && nval == 1 ? bool_value(val) : -1;
        /* Like the server: enabling commits an open transaction, and
         * disabling starts one. */
        if (v == 1) {
            q->type |= SL_QC_ENABLE_AUTOCOMMIT | SL_QC_COMMIT;
        } else if (v == 0) {
            q->type |= SL_QC_DISABLE_AUTOCOMMIT | SL_QC_BEGIN_TRX;
        }
    }
}

/* One "[scope] lhs = value" of a SET list; false when the statement ended
 * (its terminator consumed) or is not an assignment list. */
static bool
set_assignment(struct qc *q, bool *global)
{
    struct set_lhs lhs = {.global = *global};
    struct tok t, val = {.type = T_END};
    unsigned nval = 0;

    next(q, &t);
    if (is_kw(&t, KW_GLOBAL) || is_kw(&t, KW_PERSIST)
        || is_kw(&t, KW_PERSIST_ONLY) || is_kw(&t, KW_SESSION)
        || is_kw(&t, KW_LOCAL)) {
        *global = lhs.global = !is_kw(&t, KW_SESSION) && !is_kw(&t, KW_LOCAL);
        next(q, &t);
    }
    if (is_kw(&t, KW_TRANSACTION)) {
        q->type |= lhs.global ? SL_QC_GSYSVAR_WRITE | SL_QC_WRITE
                              : SL_QC_SESSION_WRITE;
        skip_body(q);
        return false;
    }
    if (t.type == T_USERVAR) {
        lhs.uservar = true;
    } else if (t.type == T_SYSVAR) {
        sysvar_lhs(&t, &lhs);
    } else if (t.type == T_WORD || t.type == T_QIDENT) {
        lhs.autocommit = is_kw(&t, KW_AUTOCOMMIT)
                         || (t.type == T_QIDENT
                             && hint_is(t.s, t.n, "AUTOCOMMIT"));
        while (is_punct(peek(q), '.')) {   /* structured: default.x */
            take(q);
            next(q, &t);
        }
    } else {
        t.type = T_END;
    }
    if (!ends_stmt(&t)) {
        next(q, &t);
    }
    if (!is_punct(&t, '=') && t.type != T_ASSIGN) {
        q->type |= SL_QC_UNKNOWN;
        if (!ends_stmt(&t)) {
            skip_body(q);
        }
        return false;
    }
    for (next(q, &t); !ends_stmt(&t); next(q, &t)) {
        if (is_punct(&t, ',') && q->depth == 0) {
            break;
        }
        if (nval++ == 0) {
            val = t;
        }
        body_token(q, &t);
    }
    set_apply(q, &lhs, &val, nval);
    return !ends_stmt(&t);
}

/*
 * SET STATEMENT a=1 FOR stmt   the type of stmt
 * SET NAMES | CHARACTER SET | CHARSET | ROLE       session
 * SET PASSWORD | DEFAULT ROLE                      write
 * SET [GLOBAL|SESSION] TRANSACTION ...             session / global
 * SET [scope] lhs = expr [, [scope] lhs = expr]... (scope is sticky)
 */
static void
stmt_set(struct qc *q)
{
    struct tok t;
    bool global = false;

    q->op = SL_QC_OP_SET;
    if (want(q, KW_STATEMENT)) {
        for (next(q, &t); !ends_stmt(&t); next(q, &t)) {
            if (is_kw(&t, KW_FOR)) {
                stmt_nested(q);
                return;
            }
        }
        q->type |= SL_QC_UNKNOWN;
        return;
    }
    if (want(q, KW_NAMES) || want(q, KW_CHARSET) || want(q, KW_CHARACTER)
        || want(q, KW_ROLE)) {
        q->type |= SL_QC_SESSION_WRITE;
        skip_body(q);
        return;
    }
    if (want(q, KW_PASSWORD) || want(q, KW_DEFAULT)) {
        q->type |= SL_QC_WRITE;
        skip_body(q);
        return;
    }
    while (set_assignment(q, &global)) {
    }
}

/* ---- dispatch ------------------------------------------------------- */

/* BEGIN [WORK] starts a transaction; BEGIN NOT ATOMIC is a compound
 * statement. */
static void
stmt_begin(struct qc *q)
{
    if (want(q, KW_NOT)) {
        stmt_compound(q, 1, 0, false);
        return;
    }
    set_verb(q, SL_QC_OP_BEGIN, SL_QC_BEGIN_TRX);
    skip_body(q);
}

/* Statements fully decided by their first word: op, type, and whether the
 * body is scanned (tables, functions, variables) or skipped. */
static bool
stmt_simple(struct qc *q, unsigned kw)
{
    static const struct {
        uint8_t op;
        bool scan;
        uint32_t type;
    } simple[KW__COUNT] = {
        [KW_SELECT] = {SL_QC_OP_SELECT, true, SL_QC_READ},
        [KW_VALUES] = {SL_QC_OP_SELECT, true, SL_QC_READ},
        [KW_SHOW] = {SL_QC_OP_SHOW, false, SL_QC_READ | SL_QC_SHOW},
        [KW_EXPLAIN] = {SL_QC_OP_EXPLAIN, false, SL_QC_READ},
        [KW_DESCRIBE] = {SL_QC_OP_EXPLAIN, false, SL_QC_READ},
        [KW_DESC] = {SL_QC_OP_EXPLAIN, false, SL_QC_READ},
        [KW_HELP] = {SL_QC_OP_OTHER, false, SL_QC_READ},
        [KW_GET] = {SL_QC_OP_OTHER, false, SL_QC_READ},
        [KW_CALL] = {SL_QC_OP_CALL, true, SL_QC_WRITE | SL_QC_CALL},
        [KW_DO] = {SL_QC_OP_DO, true, SL_QC_WRITE},
        [KW_GRANT] = {SL_QC_OP_GRANT, false, SL_QC_DDL | SL_QC_WRITE},
        [KW_REVOKE] = {SL_QC_OP_REVOKE, false, SL_QC_DDL | SL_QC_WRITE},
        [KW_COMMIT] = {SL_QC_OP_COMMIT, false, SL_QC_COMMIT},
        [KW_SAVEPOINT] = {SL_QC_OP_SAVEPOINT, false, SL_QC_WRITE},
        [KW_UNLOCK] = {SL_QC_OP_UNLOCK, false, SL_QC_WRITE},
        [KW_KILL] = {SL_QC_OP_KILL, false, SL_QC_WRITE},
        [KW_FLUSH] = {SL_QC_OP_FLUSH, false, SL_QC_WRITE},
        [KW_INSERT] = {SL_QC_OP_INSERT, true, SL_QC_WRITE},
        [KW_REPLACE] = {SL_QC_OP_REPLACE, true, SL_QC_WRITE},
        [KW_UPDATE] = {SL_QC_OP_UPDATE, true, SL_QC_WRITE},
        [KW_DELETE] = {SL_QC_OP_DELETE, true, SL_QC_WRITE},
        [KW_LOCK] = {SL_QC_OP_LOCK, true, SL_QC_WRITE},
        [KW_HANDLER] = {SL_QC_OP_HANDLER, true, SL_QC_WRITE},
#define ADMIN {SL_QC_OP_OTHER, false, SL_QC_WRITE}
        [KW_RESET] = ADMIN, [KW_PURGE] = ADMIN, [KW_CHANGE] = ADMIN,
        [KW_STOP] = ADMIN, [KW_INSTALL] = ADMIN, [KW_UNINSTALL] = ADMIN,
        [KW_OPTIMIZE] = ADMIN, [KW_REPAIR] = ADMIN, [KW_CHECK] = ADMIN,
        [KW_CHECKSUM] = ADMIN, [KW_CACHE] = ADMIN, [KW_BINLOG] = ADMIN,
        [KW_SHUTDOWN] = ADMIN, [KW_BACKUP] = ADMIN, [KW_SIGNAL] = ADMIN,
        [KW_RESIGNAL] = ADMIN,
#undef ADMIN
    };

    if (simple[kw].type == 0) {
        return false;
    }
    set_verb(q, simple[kw].op, simple[kw].type);
    if (kw == KW_COMMIT) {
        trx_end_tail(q);
        return true;
    }
    /* These name tables right after their verb. */
    if (kw == KW_INSERT || kw == KW_REPLACE || kw == KW_UPDATE
        || kw == KW_DELETE || kw == KW_LOCK || kw == KW_HANDLER) {
        table_expect(q);
    }
    if (simple[kw].scan) {
        scan_body(q);
    } else {
        skip_body(q);
    }
    return true;
}

static void
stmt_keyword(struct qc *q, unsigned kw)
{
    if (stmt_simple(q, kw)) {
        return;
    }
    switch (kw) {
    case KW_WITH:
        q->with_pending = true;
        scan_body(q);
        break;
    case KW_SET:
        stmt_set(q);
        break;
    case KW_USE:
        stmt_ps(q, SL_QC_OP_USE, SL_QC_SESSION_WRITE, false);
        break;
    case KW_BEGIN:
        stmt_begin(q);
        break;
    case KW_START:
        stmt_start(q);
        break;
    case KW_ROLLBACK:
        stmt_rollback(q);
        break;
    case KW_RELEASE:        /* RELEASE SAVEPOINT s */
        set_verb(q, SL_QC_OP_SAVEPOINT, SL_QC_WRITE);
        skip_body(q);
        break;
    case KW_XA:
        stmt_xa(q);
        break;
    case KW_CREATE:
        stmt_create(q);
        break;
    case KW_DROP:
        stmt_drop(q);
        break;
    case KW_ALTER:
        stmt_ddl_table(q, SL_QC_OP_ALTER);
        break;
    case KW_TRUNCATE:
        stmt_ddl_table(q, SL_QC_OP_TRUNCATE);
        break;
    case KW_RENAME:
        stmt_ddl_table(q, SL_QC_OP_RENAME);
        break;
    case KW_LOAD:
        stmt_load(q);
        break;
    case KW_PREPARE:
        stmt_ps(q, SL_QC_OP_PREPARE,
                SL_QC_PREPARE_NAMED | SL_QC_SESSION_WRITE, false);
        break;
    case KW_EXECUTE:
        stmt_execute(q);
        break;
    case KW_DEALLOCATE:
        want(q, KW_PREPARE);
        stmt_ps(q, SL_QC_OP_DEALLOCATE,
                SL_QC_DEALLOC_PREPARE | SL_QC_SESSION_WRITE, false);
        break;
    case KW_ANALYZE:
        stmt_analyze(q);
        break;
    default:
        q->type |= SL_QC_UNKNOWN;
        skip_body(q);
        break;
    }
}

/* Classifies one statement whose first token is `first`, through its
 * terminator. Leading '(' (a parenthesized SELECT) are skipped. */
static void
stmt_dispatch(struct qc *q, const struct tok *first)
{
    struct tok t = *first;

    while (is_punct(&t, '(')) {
        q->depth++;
        next(q, &t);
    }
    if (is_kw(&t, KW_FOR) || is_kw(&t, KW_WHILE) || is_kw(&t, KW_LOOP) ||
        is_kw(&t, KW_REPEAT) || is_kw(&t, KW_IF)) {
        stmt_compound(q, 0, 1, is_kw(&t, KW_FOR));
        return;
    }
    if (is_kw(&t, KW_CASE)) {
        stmt_compound(q, 1, 0, false);
        return;
    }
    if ((t.type == T_WORD || t.type == T_QIDENT) && is_punct(peek(q), ':')) {
        /* label: BEGIN NOT ATOMIC ... END label, label: LOOP ... */
        take(q);
        next(q, &t);
        if (is_kw(&t, KW_BEGIN)) {
            want(q, KW_NOT);
            stmt_compound(q, 1, 0, false);
        } else if (is_kw(&t, KW_FOR) || is_kw(&t, KW_WHILE) ||
                   is_kw(&t, KW_LOOP) || is_kw(&t, KW_REPEAT)) {
            stmt_compound(q, 0, 1, is_kw(&t, KW_FOR));
        } else {
            q->type |= SL_QC_UNKNOWN;
            if (!ends_stmt(&t)) {
                skip_body(q);
            }
        }
        return;
    }
    if (t.type == T_WORD && t.kw != KW_NONE) {
        stmt_keyword(q, t.kw);
        return;
    }
    q->type |= SL_QC_UNKNOWN;
    if (!ends_stmt(&t)) {
        skip_body(q);
    }
}

static void
stmt_run(struct qc *q, const struct tok *first)
{
    struct sl_qc_result *out = q->out;

    q->type = 0;
    q->op = SL_QC_OP_UNDEFINED;
    q->depth = 0;
    q->ts = TS_NONE;
    q->open_lists = 0;
    q->nest = 0;
    q->with_pending = q->into = q->prev_dot = false;
    stmt_dispatch(q, first);
    if (q->op == SL_QC_OP_UNDEFINED) {
        q->type |= SL_QC_UNKNOWN;       /* e.g. WITH without a verb */
    }
    out->type |= q->type;
    if (++q->nstmt == 1) {
        out->op = q->op;
    }
}

void
sl_qc_classify(const char *sql, size_t len, struct sl_qc_result *out)
{
    struct qc q = {.p = sql, .end = sql + len, .out = out};
    struct tok t;

    kw_ensure();
    out->type = 0;
    out->op = SL_QC_OP_UNDEFINED;
    out->hint.type = SL_HINT_NONE;
    out->hint.server[0] = '\0';
    out->ntables = 0;
    out->name[0] = '\0';
    if (sql == NULL) {
        q.p = q.end = "";
    }
    for (next(&q, &t); t.type != T_END; next(&q, &t)) {
        if (!is_punct(&t, ';')) {
            stmt_run(&q, &t);
        }
    }
    if (q.nstmt == 0) {
        out->type = SL_QC_UNKNOWN;
    } else if (q.nstmt > 1) {
        out->type |= SL_QC_MULTI_STMT;
    }
}

bool
sl_qc_classify_buf(const struct sl_buf *cmd, struct sl_qc_result *out)
{
    unsigned char hdr[SL_MDB_HDR_LEN + 1];
    const unsigned char *head;
    size_t n, plen, total = 0, off = 0;
    char *copy;

    if (sl_buf_copy_out(cmd, 0, sizeof(hdr), hdr) < sizeof(hdr)
        || (hdr[4] != SL_COM_QUERY && hdr[4] != SL_COM_STMT_PREPARE)) {
        return false;
    }
    plen = hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16;
    if (plen == 0) {
        return false;   /* hdr[4] belongs to another packet */
    }
    head = sl_buf_head_data(cmd, &n);
    if (plen < SL_MDB_MAX_PAYLOAD && n >= SL_MDB_HDR_LEN + plen) {
        sl_qc_classify((const char *)head + 5, plen - 1, out);
        return true;
    }
    /* Spans segments or packets: gather the payloads (minus headers). */
    copy = malloc(sl_buf_len(cmd));
    if (copy == NULL) {
        return false;
    }
    while (sl_buf_copy_out(cmd, off, SL_MDB_HDR_LEN, hdr) == SL_MDB_HDR_LEN) {
        plen = hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16;
        total += sl_buf_copy_out(cmd, off + SL_MDB_HDR_LEN, plen,
                                 copy + total);
        off += SL_MDB_HDR_LEN + plen;
        if (plen < SL_MDB_MAX_PAYLOAD) {
            break;
        }
    }
    sl_qc_classify(copy + 1, total - 1, out);
    free(copy);
    return true;
}

const char *
sl_qc_type_str(uint32_t type, char *buf, size_t len)
{
    static const char *const names[32] = {
        "READ", "WRITE", "DDL", "SESSION_WRITE", "USERVAR_WRITE",
        "USERVAR_READ", "SYSVAR_READ", "GSYSVAR_WRITE", "BEGIN_TRX",
        "COMMIT", "ROLLBACK", "ENABLE_AUTOCOMMIT", "DISABLE_AUTOCOMMIT",
        "READ_ONLY_TRX", "READ_WRITE_TRX", "MASTER_READ", "CREATE_TMP_TABLE",
        "DROP_TABLE", "PREPARE_NAMED", "DEALLOC_PREPARE", "EXEC_PREPARED",
        "MULTI_STMT", "XA", "CALL", "LOAD_LOCAL", "SHOW", "PREV_RESULT",
        [31] = "UNKNOWN",
    };
    size_t used = 0;

    if (len == 0) {
        return buf;
    }
    buf[0] = '\0';
    for (unsigned i = 0; i < 32 && used < len; i++) {
        if (!(type & (1u << i)) || names[i] == NULL) {
            continue;
        }
        int w = snprintf(buf + used, len - used, "%s%s", used ? "|" : "",
                         names[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    if (used == 0) {
        snprintf(buf, len, "NONE");
    }
    return buf;
}

/* ---- digests: the statement's canonical text (stats.h) ------------- */

struct canon {
    char *out;
    size_t cap;      /* bytes of out usable for text (one kept for NUL) */
    size_t len;      /* bytes written */
    size_t total;    /* bytes emitted, kept or not */
    uint64_t hash;   /* FNV-1a over everything emitted, kept or not */
    bool glue;       /* next token attaches without a space */
};

#define FNV64_INIT 0xcbf29ce484222325ULL
#define FNV64_PRIME 0x100000001b3ULL

static void
canon_put(struct canon *c, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        c->hash = (c->hash ^ (unsigned char)s[i]) * FNV64_PRIME;
        if (c->len < c->cap) {
            c->out[c->len++] = s[i];
        }
    }
    c->total += n;
}

static void
canon_tok(struct canon *c, const char *s, size_t n, bool attach_left,
          bool attach_right)
{
    if (c->len > 0 && !c->glue && !attach_left) {
        canon_put(c, " ", 1);
    }
    canon_put(c, s, n);
    c->glue = attach_right;
}

static bool
is_literal(const struct tok *t)
{
    return t->type == T_STRING || t->type == T_NUMBER ||
           (t->type == T_WORD && t->n > 0 &&
            cclass[(unsigned char)t->s[0]] == C_DIGIT);
}

/* After IN '(' : a list of literals only (and commas) up to ')'? Consumes
 * it from q when so. */
static bool
canon_in_list(struct qc *q)
{
    struct qc save = *q;
    struct tok t;
    bool any = false;

    for (next(q, &t); t.type != T_END; next(q, &t)) {
        if (is_punct(&t, ')')) {
            if (any) {
                return true;
            }
            break;
        }
        if (is_punct(&t, ',') || is_punct(&t, '-') || is_punct(&t, '+')) {
            continue;
        }
        if (is_literal(&t) || (t.type == T_PUNCT && t.c == '?')) {
            any = true;
            continue;
        }
        if (t.type == T_WORD && t.n == 1 && q->p < q->end &&
            (*q->p == '\'') && strchr("xXbBnN", t.s[0])) {
            continue;   /* x'..', b'..', N'..': the string follows */
        }
        if (t.type == T_WORD && t.n > 1 && t.s[0] == '_' && q->p < q->end &&
            *q->p == '\'') {
            continue;   /* _charset'...' */
        }
        break;
    }
    *q = save;
    return false;
}

/* The kind (SL_STATS_Q_*) a statement's leading keyword gives, as
 * sl__stats_query_kind(classify) would for the common statements; the
 * second token and a few body tokens refine it (kind_refine). */
static int
lead_kind(unsigned kw)
{
    switch (kw) {
    case KW_SELECT: case KW_SHOW: case KW_DESC: case KW_DESCRIBE:
    case KW_EXPLAIN: case KW_WITH: case KW_VALUES: case KW_HELP:
        return SL_STATS_Q_READ;
    case KW_SET: case KW_USE: case KW_BEGIN: case KW_START:
    case KW_COMMIT: case KW_ROLLBACK: case KW_PREPARE: case KW_DEALLOCATE:
        return SL_STATS_Q_SESSION;
    case KW_EXECUTE:
        return SL_STATS_Q_OTHER;
    default:
        return SL_STATS_Q_WRITE;   /* DML, DDL, admin, unknown: the primary */
    }
}

/* The kind after the statement's token number pos (1: the second) t. */
static int
kind_refine(int kind, unsigned lead_kw, int pos, const struct tok *t,
            bool after_into)
{
    if (pos == 1) {
        switch (lead_kw) {
        case KW_SET:
            /* SET GLOBAL x, SET PERSIST x, SET @@global.x: server-wide */
            if ((t->type == T_WORD &&
                 (t->kw == KW_GLOBAL || t->kw == KW_PERSIST ||
                  t->kw == KW_PERSIST_ONLY)) ||
                (t->type == T_SYSVAR &&
                 ((t->n > 7 && strncasecmp(t->s, "global.", 7) == 0) ||
                  (t->n > 8 && strncasecmp(t->s, "persist.", 8) == 0)))) {
                return SL_STATS_Q_WRITE;
            }
            break;
        case KW_START:     /* START SLAVE, START REPLICA ... */
            return t->type == T_WORD && t->kw == KW_TRANSACTION
                       ? kind : SL_STATS_Q_WRITE;
        case KW_ROLLBACK:  /* ROLLBACK TO SAVEPOINT */
        case KW_BEGIN:     /* BEGIN NOT ATOMIC */
            return t->type == T_WORD && (t->kw == KW_TO || t->kw == KW_NOT)
                       ? SL_STATS_Q_WRITE : kind;
        case KW_DROP:      /* DROP PREPARE */
            return t->type == T_WORD && t->kw == KW_PREPARE
                       ? SL_STATS_Q_SESSION : kind;
        default:
            break;
        }
    }
    /* A read that assigns a user variable (@a := ..., INTO @a). */
    if (kind == SL_STATS_Q_READ &&
        (t->type == T_ASSIGN || (after_into && t->type == T_USERVAR))) {
        return SL_STATS_Q_SESSION;
    }
    return kind;
}

/* Of two statements' kinds, the one sl__stats_query_kind would report for
 * their OR-ed type bits: write, then session, then read, then other. */
static int
kind_merge(int a, int b)
{
    static const int rank[SL_STATS_Q_KINDS] = {
        [SL_STATS_Q_WRITE] = 3, [SL_STATS_Q_SESSION] = 2,
        [SL_STATS_Q_READ] = 1, [SL_STATS_Q_OTHER] = 0};

    return a < 0 || rank[b] > rank[a] ? b : a;
}

/* sl__qc_canonical, also giving the length of the whole canonical text
 * (*total: bytes emitted, kept in out or not). */
static size_t
canonical(const char *sql, size_t len, char *out, size_t outlen,
          uint64_t *hash, int *kind, size_t *total)
{
    struct sl_qc_result dummy;
    struct qc q = {.p = sql, .end = sql + len, .out = &dummy};
    struct canon c = {.out = out, .cap = outlen ? outlen - 1 : 0,
                      .hash = FNV64_INIT, .glue = true};
    struct tok t;
    bool prev_in = false;
    bool semi = false;   /* a ';' to write before the next token */
    bool prev_word = false;
    const char *prev_end = NULL;
    int pos = 0;         /* tokens of the current statement so far */
    int lead = -1;       /* its kind so far (-1: no token yet) */
    unsigned lead_kw = KW_NONE;
    bool after_into = false;
    int all = -1;        /* merged over the statements */

    kw_ensure();
    dummy.hint.type = SL_HINT_NONE;
    if (sql == NULL) {
        q.p = q.end = "";
    }
    for (next(&q, &t); t.type != T_END; next(&q, &t)) {
        bool was_in = prev_in;
        bool was_word = prev_word;
        const char *was_end = prev_end;

        prev_word = t.type == T_WORD || t.type == T_QIDENT;
        prev_end = q.p;
        if (is_punct(&t, ';')) {
            semi = c.len > 0;
            if (lead >= 0) {
                all = kind_merge(all, lead);
            }
            pos = 0;
            lead = -1;
            continue;
        }
        if (pos == 0 && !is_punct(&t, '(')) {
            lead_kw = t.type == T_WORD ? t.kw : KW_NONE;
            lead = lead_kind(lead_kw);
            pos = 1;
        } else if (pos > 0) {
            lead = kind_refine(lead, lead_kw, pos, &t, after_into);
            pos = 2;
        }
        after_into = t.type == T_WORD && t.kw == KW_INTO;
        if (semi) {
            canon_tok(&c, ";", 1, true, false);
            semi = false;
        }
        prev_in = t.type == T_WORD && t.kw == KW_IN;
        switch (t.type) {
        case T_STRING:
        case T_NUMBER:
            canon_tok(&c, "?", 1, false, false);
            break;
        case T_WORD:
            if (is_literal(&t)) {
                canon_tok(&c, "?", 1, false, false);
            } else if (q.p < q.end && *q.p == '\'' &&
                       ((t.n == 1 && strchr("xXbBnN", t.s[0])) ||
                        (t.n > 1 && t.s[0] == '_'))) {
                next(&q, &t);   /* introducer + string: one literal */
                canon_tok(&c, "?", 1, false, false);
            } else {
                canon_tok(&c, t.s, t.n, false, false);
            }
            break;
        case T_QIDENT:
            canon_tok(&c, "`", 1, false, true);
            canon_put(&c, t.s, t.n);
            canon_put(&c, "`", 1);
            c.glue = false;
            break;
        case T_USERVAR:
            canon_tok(&c, "@", 1, false, true);
            canon_put(&c, t.s, t.n);
            c.glue = false;
            break;
        case T_SYSVAR:
            canon_tok(&c, "@@", 2, false, true);
            canon_put(&c, t.s, t.n);
            c.glue = false;
            break;
        case T_ASSIGN:
            canon_tok(&c, ":=", 2, false, false);
            break;
        default:
            if (t.c == '(' && was_in && canon_in_list(&q)) {
                canon_tok(&c, "(...)", 5, false, false);
            } else if (t.c == '(') {
                /* f(x) stays f(x); "IN (" and "t (a, b)" keep the space */
                canon_tok(&c, "(", 1, was_word && !was_in &&
                                          was_end == q.p - 1, true);
            } else if (t.c == ')' || t.c == ',') {
                canon_tok(&c, (const char *)&t.c, 1, true, false);
            } else if (t.c == '.') {
                canon_tok(&c, ".", 1, true, true);
            } else {
                canon_tok(&c, (const char *)&t.c, 1, false, false);
            }
            break;
        }
    }
    /* A trailing ';' is not part of the statement: never written. */
    if (outlen > 0) {
        out[c.len] = '\0';
    }
    *hash = c.hash;
    *total = c.total;
    if (kind != NULL) {
        if (lead >= 0) {
            all = kind_merge(all, lead);
        }
        *kind = all < 0 ? SL_STATS_Q_WRITE : all;   /* empty: as classify */
    }
    return c.len;
}

size_t
sl__qc_canonical(const char *sql, size_t len, char *out, size_t outlen,
                 uint64_t *hash, int *kind)
{
    size_t total;

    return canonical(sql, len, out, outlen, hash, kind, &total);
}

size_t
sl__qc_canonical_len(const char *sql, size_t len, char *out, size_t outlen,
                     uint64_t *hash, int *kind, size_t *total)
{
    return canonical(sql, len, out, outlen, hash, kind, total);
}

/*
 * The fast form of the canonical pass for the data path (stats.h): the
 * hash, whole length and kind sl__qc_canonical gives, in one scan of the
 * bytes without tokens, keyword table (but for a statement's first two
 * words) or output text. It takes the statements applications send most:
 * words, numbers, quoted strings, spaces and plain punctuation. Anything
 * whose canonical form needs the full lexer's context -- comments (and
 * executable comments), backticks, variables, ':=', ';', IN (its list may
 * collapse), x'..'/_charset'..' introducers -- makes it give up (false)
 * before emitting anything that would differ; the caller then runs the
 * full pass. test_digest and fuzz_classifier check that both agree.
 */

/* The emitting side: canon_tok with no text, inlined. */
#define FAST_EMIT_BYTE(b)                                                 \
    (h = (h ^ (unsigned char)(b)) * FNV64_PRIME)
#define FAST_TOKEN(attach_left)                                           \
    do {                                                                  \
        if (n > 0 && !glue && !(attach_left)) {                           \
            FAST_EMIT_BYTE(' ');                                          \
            n++;                                                          \
        }                                                                 \
    } while (0)

/* The state the fast pass carries from token to token. */
struct fast {
    const char *p, *e;
    uint64_t h;               /* FNV-1a of the canonical text so far */
    size_t n;                 /* its length */
    bool glue;                /* the next token attaches without a space */
    bool prev_word;           /* the previous token was a word ... */
    const char *prev_end;     /* ... ending here */
};

/* The keywords after which kind_refine looks at the second word. */
static inline bool
refined_by_second(unsigned kw)
{
    return kw == KW_SET || kw == KW_START || kw == KW_ROLLBACK ||
           kw == KW_BEGIN || kw == KW_DROP;
}

/* Scan the next token at f->p (spaces skipped) and emit its canonical
 * form (canon_tok's spacing, then the token): 1 with *t its type (and its
 * keyword when want_kw, its byte when punctuation), 0 at the end, -1
 * where the full lexer must decide. Always inlined (the compiler would
 * rather call it: 30 % more instructions per statement): with want_kw
 * false the loop over the rest of a statement has no keyword work. */
static inline __attribute__((always_inline)) int
fast_token(struct fast *f, struct tok *t, bool want_kw)
{
    const char *p = f->p, *e = f->e;
    uint64_t h = f->h;
    size_t n = f->n;
    bool glue = f->glue;
    const char *s;
    unsigned char c;
    uint8_t cl;
    bool word = false;        /* a word to the lexer (1e5, 0x1f too) */

    while (p < e && cclass[(unsigned char)*p] == C_SPACE) {
        p++;
    }
    if (p == e) {
        f->p = p;
        return 0;
    }
    s = p;
    c = (unsigned char)*p;
    cl = cclass[c];
    t->kw = KW_NONE;
    if (cl == C_IDENT) {
        FAST_TOKEN(false);
        do {
            FAST_EMIT_BYTE(*p++);
        } while (p < e && cclass[(unsigned char)*p] >= C_IDENT);
        if ((p < e && *p == '\'') ||            /* an introducer */
            (p - s == 2 && upper((unsigned char)s[0]) == 'I' &&
             upper((unsigned char)s[1]) == 'N')) {   /* IN (list) */
            return -1;
        }
        if (want_kw) {
            if (p - s == 6 && (s[0] | 0x20) == 's' &&
                (s[1] | 0x20) == 'e' && (s[2] | 0x20) == 'l' &&
                (s[3] | 0x20) == 'e' && (s[4] | 0x20) == 'c' &&
                (s[5] | 0x20) == 't') {   /* (c | 0x20: only its pair) */
                t->kw = KW_SELECT;        /* the common one, no table */
            } else {
                uint32_t kh = HASH_INIT;

                for (const char *w = s; w < p; w++) {
                    kh = hash_step(kh, (unsigned char)*w);
                }
                t->kw = (uint16_t)kw_lookup(s, (size_t)(p - s), kh);
            }
        }
        n += (size_t)(p - s);
        glue = false;
        word = true;
        t->type = T_WORD;
    } else if (cl == C_DIGIT) {
        while (p < e && (cclass[(unsigned char)*p] >= C_IDENT ||
                         *p == '.')) {
            word |= cclass[(unsigned char)*p] == C_IDENT;
            p++;
        }
        t->type = T_NUMBER;       /* 12, 1.5, 1e5, 0x1f: all literals */
        FAST_TOKEN(false);
        FAST_EMIT_BYTE('?');
        n++;
        glue = false;
    } else if (c == '\'' || c == '"') {
        for (p++; p < e; p++) {    /* lex_quoted's rules */
            if (*p == (char)c) {
                if (p + 1 < e && p[1] == (char)c) {
                    p++;
                    continue;
                }
                break;
            }
            if (*p == '\\' && p + 1 < e) {
                p++;
            }
        }
        p = p < e ? p + 1 : e;
        t->type = T_STRING;
        FAST_TOKEN(false);
        FAST_EMIT_BYTE('?');
        n++;
        glue = false;
    } else if (c == '#' || c == '/' || c == '`' || c == '@' ||
               c == ':' || c == ';' ||
               (c == '-' && e - p >= 2 && p[1] == '-')) {
        return -1;                /* the full lexer's business */
    } else {
        p++;
        t->type = T_PUNCT;
        t->c = c;
        if (c == '(') {
            FAST_TOKEN(f->prev_word && f->prev_end == s);
            glue = true;
        } else if (c == ')' || c == ',') {
            FAST_TOKEN(true);
            glue = false;
        } else if (c == '.') {
            FAST_TOKEN(true);
            glue = true;
        } else {
            FAST_TOKEN(false);
            glue = false;
        }
        FAST_EMIT_BYTE(c);
        n++;
    }
    f->p = p;
    f->h = h;
    f->n = n;
    f->glue = glue;
    f->prev_word = word;
    f->prev_end = p;
    return 1;
}

bool
sl__qc_canonical_fast(const char *sql, size_t len, uint64_t *hash,
                      size_t *total, int *kind)
{
    struct fast f = {sql, sql + len, FNV64_INIT, 0, true, false, NULL};
    struct tok t;
    int pos = 0;              /* tokens of the statement so far (max 2) */
    int lead = -1;
    unsigned lead_kw = KW_NONE;
    int r;

    if (sql == NULL) {
        f.p = f.e = "";
    }
    kw_ensure();
    /* the statement's kind, as the full pass derives it, from its first
     * two tokens: the first word's keyword, and the second's after the
     * few leading keywords kind_refine looks past */
    while (pos < 2 &&
           (r = fast_token(&f, &t, pos == 0 ||
                                   refined_by_second(lead_kw))) != 0) {
        if (r < 0) {
            return false;
        }
        if (pos == 0 && !(t.type == T_PUNCT && t.c == '(')) {
            lead_kw = t.type == T_WORD ? t.kw : KW_NONE;
            lead = lead_kind(lead_kw);
            pos = 1;
        } else if (pos == 1) {
            if (refined_by_second(lead_kw)) {   /* the rest: nothing to
                                                 * refine without ':='
                                                 * or '@' */
                lead = kind_refine(lead, lead_kw, pos, &t, false);
            }
            pos = 2;
        }
    }
    /* the rest: tokens only */
    while ((r = fast_token(&f, &t, false)) > 0) {
    }
    if (r < 0) {
        return false;
    }
    *hash = f.h;
    *total = f.n;
    if (kind != NULL) {
        *kind = lead < 0 ? SL_STATS_Q_WRITE : lead;
    }
    return true;
}
#undef FAST_TOKEN
#undef FAST_EMIT_BYTE
