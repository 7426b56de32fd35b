/* scan.c — see scan.h. */
#define _POSIX_C_SOURCE 200809L
#include "scan.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static void note(char *first, size_t len, int line, const char *what, size_t n)
{
    if (first && len)
        snprintf(first, len, "line %d: %.*s", line, (int)(n > 120 ? 120 : n), what);
}

/* ------------------------------------------------------------------------- */
/* PTX                                                                       */

static int ptx_opcode_is_atomic(const char *op, size_t n)
{
    static const char *const bad[] = {"atom.", "red.", "cp.reduce.", "multimem.red."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t m = strlen(bad[i]);
        if (n >= m && strncmp(op, bad[i], m) == 0)
            return 1;
    }
    return n == 4 && strncmp(op, "atom", 4) == 0;
}

/* One statement (text between ';', '{' and '}'): skip labels and a guard
 * predicate, then look at the opcode. */
static int ptx_statement(const char *s, const char *end, int line, char *first, size_t len,
                         int found)
{
    for (;;) {
        while (s < end && isspace((unsigned char)*s))
            s++;
        const char *t = s;
        while (t < end && !isspace((unsigned char)*t))
            t++;
        if (t == s)
            return 0;
        if (*s == '@' || t[-1] == ':') { /* guard predicate or label */
            s = t;
            continue;
        }
        if (*s == '.' || !ptx_opcode_is_atomic(s, (size_t)(t - s)))
            return 0; /* a directive or an ordinary instruction */
        if (!found)
            note(first, len, line, s, (size_t)(end - s));
        return 1;
    }
}

int scan_ptx_atomics(const char *ptx, char *first, size_t first_len)
{
    int found = 0, line = 1, in_block = 0;
    const char *p = ptx;
    while (*p) {
        const char *eol = strchr(p, '\n');
        if (!eol)
            eol = p + strlen(p);
        /* Cut the line into statements, skipping comments. */
        const char *s = p;
        for (const char *q = p; q <= eol; q++) {
            if (in_block) {
                if (q + 1 < eol && q[0] == '*' && q[1] == '/') {
                    in_block = 0;
                    s = q + 2;
                    q++;
                }
                continue;
            }
            int cut = q == eol || *q == ';' || *q == '{' || *q == '}';
            int line_comment = q + 1 < eol && q[0] == '/' && q[1] == '/';
            int block_comment = q + 1 < eol && q[0] == '/' && q[1] == '*';
            if (cut || line_comment || block_comment)
                found += ptx_statement(s, q, line, first, first_len, found);
            if (line_comment)
                break;
            if (block_comment) {
                in_block = 1;
                q++;
                continue;
            }
            if (cut)
                s = q + 1;
        }
        p = *eol ? eol + 1 : eol;
        line++;
    }
    return found;
}

/* ------------------------------------------------------------------------- */
/* SASS                                                                      */

static int sass_opcode_is_atomic(const char *s, size_t n)
{
    char op[64];
    size_t m = n < sizeof op - 1 ? n : sizeof op - 1;
    memcpy(op, s, m);
    op[m] = '\0';
    if (strncmp(op, "ATOM", 4) == 0) /* ATOM, ATOMG, ATOMS */
        return 1;
    if (strncmp(op, "RED", 3) == 0 && strncmp(op, "REDUX", 5) != 0)
        return 1; /* RED, REDG, REDAS; REDUX reduces registers only */
    return strstr(op, "UTMAREDG") != NULL || strstr(op, "UBLKRED") != NULL;
}

/* The opcode of a cuobjdump instruction line [p, eol), "/ *addr* /  [@P0]
 * OPCODE operands ; / *encoding* /": its start, and its length in *n; NULL
 * for any other line. */
static const char *sass_opcode(const char *p, const char *eol, size_t *n)
{
    const char *s = p;
    while (s < eol && isspace((unsigned char)*s))
        s++;
    if (eol - s <= 2 || s[0] != '/' || s[1] != '*')
        return NULL;
    const char *close = strstr(s + 2, "*/");
    if (!close || close >= eol)
        return NULL;
    s = close + 2;
    for (;;) {
        while (s < eol && isspace((unsigned char)*s))
            s++;
        const char *t = s;
        while (t < eol && !isspace((unsigned char)*t) && *t != ';')
            t++;
        if (t > s && *s == '@') { /* guard predicate */
            s = t;
            continue;
        }
        *n = (size_t)(t - s);
        return t > s ? s : NULL;
    }
}

int scan_sass_atomics(const char *sass, char *first, size_t first_len)
{
    int found = 0, line = 1;
    const char *p = sass;
    while (*p) {
        const char *eol = strchr(p, '\n');
        if (!eol)
            eol = p + strlen(p);
        size_t n = 0;
        const char *op = sass_opcode(p, eol, &n);
        if (op && sass_opcode_is_atomic(op, n)) {
            if (!found)
                note(first, first_len, line, op, (size_t)(eol - op));
            found++;
        }
        p = *eol ? eol + 1 : eol;
        line++;
    }
    return found;
}

int scan_sass_serialized_wgmma(const char *sass, char *first, size_t first_len)
{
    int found = 0, line = 1, fn_line = 0, hgmma = 0, ends = 0;
    const char *p = sass, *fn = NULL, *fn_end = NULL;
    for (;;) {
        const char *eol = strchr(p, '\n');
        if (!eol)
            eol = p + strlen(p);
        const char *f = strstr(p, "Function : ");
        const int new_fn = f && f < eol;
        if (new_fn || !*p) { /* the function before ends here */
            if (hgmma >= 2 && ends == hgmma) {
                if (!found)
                    note(first, first_len, fn_line, fn, (size_t)(fn_end - fn));
                found++;
            }
            if (!*p)
                break;
            fn = f + strlen("Function : "), fn_end = eol, fn_line = line;
            hgmma = ends = 0;
        }
        size_t n = 0;
        const char *op = sass_opcode(p, eol, &n);
        if (op && n >= 5 && strncmp(op, "HGMMA", 5) == 0) {
            const char *semi = memchr(op, ';', (size_t)(eol - op));
            const char *end = semi ? semi : eol;
            hgmma++;
            for (const char *q = op; q + 4 <= end; q++)
                if (strncmp(q, "gsb0", 4) == 0) {
                    ends++;
                    break;
                }
        }
        p = *eol ? eol + 1 : eol;
        line++;
    }
    return found;
}

/* ------------------------------------------------------------------------- */
/* Source                                                                    */

static int is_ident(int c) { return isalnum((unsigned char)c) || c == '_'; }

static int dx_style(const char *id, size_t n)
{
    static const char *const prefixes[] = {"dx",     "gradx",     "xgrad",
                                           "dinput", "gradinput", "inputgrad"};
    char norm[64];
    size_t m = 0;
    for (size_t i = 0; i < n && m + 1 < sizeof norm; i++)
        if (id[i] != '_')
            norm[m++] = (char)tolower((unsigned char)id[i]);
    norm[m] = '\0';
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(norm, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

int scan_source_dx(const char *src, char *first, size_t first_len)
{
    int found = 0, line = 1;
    const char *p = src;
    while (*p) {
        if (*p == '\n') {
            line++;
            p++;
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                p++;
        } else if (p[0] == '/' && p[1] == '*') {
            p += 2;
            while (*p && !(p[0] == '*' && p[1] == '/'))
                line += *p++ == '\n';
            if (*p)
                p += 2;
        } else if (*p == '"' || *p == '\'') {
            char quote = *p++;
            while (*p && *p != quote && *p != '\n')
                p += (p[0] == '\\' && p[1]) ? 2 : 1;
            if (*p == quote)
                p++;
        } else if (is_ident(*p)) {
            const char *s = p;
            while (is_ident(*p))
                p++;
            if (!isdigit((unsigned char)*s) && dx_style(s, (size_t)(p - s))) {
                if (!found)
                    note(first, first_len, line, s, (size_t)(p - s));
                found++;
            }
        } else {
            p++;
        }
    }
    return found;
}

/* ------------------------------------------------------------------------- */
/* Files and commands                                                        */

int scan_count(const char *text, const char *needle)
{
    int n = 0;
    size_t m = strlen(needle);
    for (const char *p = text; m && (p = strstr(p, needle)) != NULL; p += m)
        n++;
    return n;
}

static char *read_stream(FILE *f)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
        if (len + 1 == cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
        }
    }
    if (buf)
        buf[len] = '\0';
    return buf;
}

char *scan_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *text = read_stream(f);
    fclose(f);
    return text;
}

char *scan_read_command(const char *cmd, int *status)
{
    FILE *f = popen(cmd, "r");
    if (!f)
        return NULL;
    char *text = read_stream(f);
    int st = pclose(f);
    *status = st == -1 ? -1 : (WIFEXITED(st) ? WEXITSTATUS(st) : 128);
    return text;
}
