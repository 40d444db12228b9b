/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MariaDB's `dialog` client plugin and `mysql_clear_password`, the
 * packets only (see mdb_parse.h), for PAM accounts (auth_pam).
 *
 * A dialog question is one packet: a type byte, then the question's text
 * (no terminator). The type is 2 for a question whose answer is echoed,
 * 4 for a password (not echoed); the low bit (3, 5) marks the last
 * question, which neither MariaDB's auth_pam nor Sluice sends: the client
 * plugin keeps answering until an OK or ERR arrives. The first question
 * travels inside the AuthSwitchRequest (0xFE "dialog" NUL type text).
 * The client answers each with a NUL-terminated string; with
 * mysql_clear_password it sends the password the same way.
 *
 * The answers a client gave are kept, in order, as a NUL-separated list
 * (struct mdb_session's pam_answers): Sluice replays them to each server's
 * own PAM conversation.
 */
#include <string.h>
#include <strings.h>

#include "mdb_parse.h"

size_t
mdb_dialog_question(unsigned char *out, size_t cap, bool first, bool echo,
                    const char *text, size_t text_len)
{
    static const char plugin[] = MDB_DIALOG_PLUGIN;
    size_t need = 1 + text_len + (first ? 1 + sizeof(plugin) : 0);
    size_t n = 0;

    if (need > cap) {
        return 0;
    }
    if (first) {
        out[n++] = 0xfe;
        memcpy(out + n, plugin, sizeof(plugin));
        n += sizeof(plugin);
    }
    out[n++] = echo ? MDB_DIALOG_QUESTION : MDB_DIALOG_PASSWORD;
    if (text_len > 0) {
        memcpy(out + n, text, text_len);
    }
    return n + text_len;
}

int
mdb_dialog_answer(const unsigned char *p, size_t len, char *out, size_t cap,
                  size_t *out_len)
{
    if (len > 0 && p[len - 1] == '\0') {
        len--;   /* the client's terminator */
    }
    if (cap == 0 || len >= cap || memchr(p, '\0', len) != NULL) {
        return -1;
    }
    memcpy(out, p, len);
    out[len] = '\0';
    *out_len = len;
    return 0;
}

int
mdb_dialog_parse_question(const unsigned char *p, size_t len, bool *echo)
{
    if (len == 0 || p[0] < MDB_DIALOG_QUESTION || p[0] > 5) {
        return -1;
    }
    *echo = (p[0] >> 1) != (MDB_DIALOG_PASSWORD >> 1);
    return 0;
}

int
mdb_pam_answers_add(char *buf, size_t cap, size_t *len, const char *a,
                    size_t alen)
{
    if (memchr(a, '\0', alen) != NULL || *len + alen + 1 > cap) {
        return -1;
    }
    memcpy(buf + *len, a, alen);
    buf[*len + alen] = '\0';
    *len += alen + 1;
    return 0;
}

const char *
mdb_pam_answer_at(const char *buf, size_t len, size_t i, size_t *alen)
{
    const char *last = NULL;
    size_t off = 0;

    for (size_t k = 0; off < len; k++) {
        const char *s = buf + off;
        size_t n = strnlen(s, len - off);

        if (n == len - off) {
            return NULL;   /* not terminated: not a list */
        }
        last = s;
        *alen = n;
        if (k == i) {
            return s;
        }
        off += n + 1;
    }
    return last;   /* beyond the list: the last answer again */
}

bool
mdb_pam_is_password_prompt(const char *text, size_t len)
{
    static const char word[] = "password";
    size_t k = sizeof(word) - 1;

    for (size_t i = 0; i + k <= len; i++) {
        if (strncasecmp(text + i, word, k) == 0) {
            return true;
        }
    }
    return false;
}

const char *
mdb_pam_replay(struct mdb_pam_replay *r, const char *answers, size_t len,
               bool first_echo, enum mdb_pam_step step,
               const unsigned char *p, size_t plen, size_t *alen)
{
    const char *a;
    bool echo;

    if (r->two_factor) {
        size_t want = 0;   /* the password, unless a question says else */

        switch (step) {
        case MDB_PAM_SWITCH_CLEAR:
            r->dialog = false;
            break;
        case MDB_PAM_SWITCH_DIALOG:
            r->dialog = true;
            /* a bare switch: the password goes ahead, as the dialog
             * client plugin sends it */
            if (plen > 0) {
                if (mdb_dialog_parse_question(p, plen, &echo) != 0) {
                    return NULL;
                }
                want = mdb_pam_is_password_prompt((const char *)p + 1,
                                                  plen - 1) ? 0 : 1;
            }
            break;
        default:
            if (!r->dialog || mdb_dialog_parse_question(p, plen, &echo) != 0) {
                return NULL;
            }
            want = mdb_pam_is_password_prompt((const char *)p + 1, plen - 1)
                       ? 0 : 1;
            break;
        }
        if (answers == NULL ||
            (a = mdb_pam_answer_at(answers, len, want, alen)) == NULL) {
            return NULL;
        }
        return a;
    }
    switch (step) {
    case MDB_PAM_SWITCH_CLEAR:
        r->dialog = false;
        r->ahead = false;
        r->next = 0;
        break;
    case MDB_PAM_SWITCH_DIALOG:
        r->dialog = true;
        r->next = 0;
        r->ahead = plen == 0;   /* no question: answer 0 goes ahead */
        if (plen > 0 && mdb_dialog_parse_question(p, plen, &echo) != 0) {
            return NULL;
        }
        break;
    default:
        if (!r->dialog || mdb_dialog_parse_question(p, plen, &echo) != 0) {
            return NULL;
        }
        if (r->ahead && r->next == 1 && first_echo) {
            r->next = 0;   /* the server asks its first one itself */
        }
        r->ahead = false;
        break;
    }
    if (answers == NULL ||
        (a = mdb_pam_answer_at(answers, len, r->next, alen)) == NULL) {
        return NULL;
    }
    if (r->next < 255) {
        r->next++;
    }
    return a;
}
