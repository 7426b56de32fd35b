/*
 * sass_waits.c — auxtrunk-sass-waits: how far ahead of its FFMAs a kernel's
 * inner loops issue their shared-memory loads, read from the SASS alone (no
 * GPU). For every loop (a backward branch) with at least --min-ffma FFMAs and
 * one LDS, it prints the loop's instructions, its issue clocks (the sum of
 * the stall counts ptxas wrote into the control bits), its FFMA and LDS
 * counts, and, for each FFMA that waits on a scoreboard an LDS set, the
 * distance in instructions (through the back edge) from the newest such LDS.
 *
 * Why it exists: ptxas tracks variable-latency results on six scoreboards
 * and may put several loads on one; an FFMA then waits for the newest load
 * on its scoreboard, not only for its own operands. A chain loop whose
 * FFMAs wait on loads a few instructions back runs at the shared-memory
 * latency, whatever the source's prefetch distance
 * (docs/perf-notes-v3.md, "Chains three fragments ahead").
 *
 * Control bits (the second 64-bit word of each sm_90 instruction): stall
 * count bits 41-44, write scoreboard 46-48 and read scoreboard 49-51 (7:
 * none), wait mask 52-57.
 *
 *   auxtrunk-sass-waits [--cuobjdump PATH] [--min-ffma N] FILE [FUNCTION-SUBSTRING]
 *
 * FILE: an object, library or plugin with sm_90 SASS. Exit 0 when at least
 * one loop was printed, 1 when none, 2 on bad use or a tool that fails.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_INS = 1 << 17, TEXT = 96, NONE = 7 };

typedef struct {
    unsigned addr;
    char text[TEXT];
    uint64_t hi; /* control word */
} ins_t;

static ins_t g_ins[MAX_INS];
static int g_n;
static char g_fn[1024];
static int g_min_ffma = 16;
static int g_loops;
static int g_named; /* g_fn's name printed */

static int stall_of(uint64_t hi) { return (int)((hi >> 41) & 0xf); }
static int wb_of(uint64_t hi) { return (int)((hi >> 46) & 0x7); }
static int rb_of(uint64_t hi) { return (int)((hi >> 49) & 0x7); }
static int wait_of(uint64_t hi) { return (int)((hi >> 52) & 0x3f); }

/* The opcode, past an optional predicate. */
static const char *opcode(const char *t)
{
    if (t[0] == '@') {
        t = strchr(t, ' ');
        if (!t)
            return "";
        while (*t == ' ')
            t++;
    }
    return t;
}

static int is_op(const ins_t *x, const char *op)
{
    return strncmp(opcode(x->text), op, strlen(op)) == 0;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

static void loop_report(int s, int e)
{
    const int n = e - s + 1;
    int ffma = 0, lds = 0, clocks = 0;
    for (int i = s; i <= e; i++) {
        ffma += is_op(&g_ins[i], "FFMA");
        lds += is_op(&g_ins[i], "LDS");
        clocks += stall_of(g_ins[i].hi);
    }
    if (ffma < g_min_ffma || lds == 0)
        return;
    int last[6] = {-1, -1, -1, -1, -1, -1}, *d = malloc(sizeof(int) * (size_t)n), nd = 0;
    if (!d)
        return;
    for (int j = 0; j < 2 * n; j++) { /* the body twice: waits through the back edge */
        const ins_t *x = &g_ins[s + j % n];
        const int wm = wait_of(x->hi), wb = wb_of(x->hi), rb = rb_of(x->hi);
        if (j >= n && wm && is_op(x, "FFMA")) {
            int best = -1;
            for (int b = 0; b < 6; b++)
                if ((wm >> b & 1) && last[b] >= 0 && (best < 0 || j - last[b] < best))
                    best = j - last[b];
            if (best >= 0)
                d[nd++] = best;
        }
        if (wb != NONE)
            last[wb] = is_op(x, "LDS") ? j : -1;
        if (rb != NONE)
            last[rb] = -1;
    }
    qsort(d, (size_t)nd, sizeof *d, cmp_int);
    if (!g_named)
        printf("%s\n", g_fn);
    g_named = 1;
    printf("  loop 0x%04x-0x%04x: %d instructions, %d issue clocks, %d FFMA, %d LDS; "
           "FFMA waits on LDS at distances",
           g_ins[s].addr, g_ins[e].addr, n, clocks, ffma, lds);
    for (int i = 0; i < nd; i++)
        printf("%s%d", i ? ", " : " ", d[i]);
    printf("%s\n", nd ? "" : " (none)");
    free(d);
    g_loops++;
}

static void analyse(const char *want)
{
    if (g_n == 0 || (want && !strstr(g_fn, want)))
        return;
    for (int i = 0; i < g_n; i++) {
        const char *b = strstr(g_ins[i].text, "BRA ");
        if (!b || strchr(b, ','))
            continue;
        const unsigned t = (unsigned)strtoul(b + 4, NULL, 16);
        if (t >= g_ins[i].addr)
            continue;
        for (int s = 0; s < i; s++)
            if (g_ins[s].addr == t) {
                loop_report(s, i);
                break;
            }
    }
}

static int usage(FILE *f)
{
    fprintf(f, "usage: auxtrunk-sass-waits [--cuobjdump PATH] [--min-ffma N] FILE "
               "[FUNCTION-SUBSTRING]\n"
               "  how far ahead of their FFMAs the inner loops of FILE's kernels issue their\n"
               "  shared-memory loads, from the SASS's scoreboards (no GPU needed)\n"
               "  --cuobjdump  the cuobjdump to run (default: cuobjdump on PATH)\n"
               "  --min-ffma   report loops with at least N FFMAs (default 16)\n");
    return f == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
    const char *tool = "cuobjdump", *file = NULL, *want = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return usage(stdout);
        if (!strcmp(argv[i], "--cuobjdump") && i + 1 < argc)
            tool = argv[++i];
        else if (!strcmp(argv[i], "--min-ffma") && i + 1 < argc)
            g_min_ffma = atoi(argv[++i]);
        else if (argv[i][0] == '-')
            return usage(stderr);
        else if (!file)
            file = argv[i];
        else if (!want)
            want = argv[i];
        else
            return usage(stderr);
    }
    if (!file)
        return usage(stderr);
    char cmd[4096];
    if (snprintf(cmd, sizeof cmd, "'%s' -sass '%s'", tool, file) >= (int)sizeof cmd) {
        fprintf(stderr, "auxtrunk-sass-waits: path too long\n");
        return 2;
    }
    FILE *p = popen(cmd, "r");
    if (!p) {
        fprintf(stderr, "auxtrunk-sass-waits: cannot run %s\n", tool);
        return 2;
    }
    char line[4096];
    int pending = -1; /* instruction waiting for its control word */
    while (fgets(line, sizeof line, p)) {
        const char *f = strstr(line, "Function : ");
        if (f) {
            analyse(want);
            g_n = 0, pending = -1, g_named = 0;
            snprintf(g_fn, sizeof g_fn, "%s", f + 11);
            g_fn[strcspn(g_fn, "\r\n")] = '\0';
            continue;
        }
        const char *a = strstr(line, "/*");
        const char *w = strstr(line, "/* 0x");
        if (!w)
            continue;
        const uint64_t word = strtoull(w + 3, NULL, 16);
        /* An instruction line holds its address comment, its text and its first
         * word; the control word follows on a line of its own. */
        if (a && a < w && a[2] != ' ' && g_n < MAX_INS) {
            ins_t *x = &g_ins[g_n];
            x->addr = (unsigned)strtoul(a + 2, NULL, 16);
            const char *t = strstr(a, "*/") + 2;
            while (*t == ' ')
                t++;
            size_t len = strcspn(t, ";");
            while (len && t[len - 1] == ' ')
                len--;
            snprintf(x->text, sizeof x->text, "%.*s", (int)len, t);
            pending = g_n++;
        } else if (pending >= 0) { /* the control word on its own line */
            g_ins[pending].hi = word;
            pending = -1;
        }
    }
    analyse(want);
    const int rc = pclose(p);
    if (rc != 0) {
        fprintf(stderr, "auxtrunk-sass-waits: %s failed (status %d)\n", cmd, rc);
        return 2;
    }
    return g_loops > 0 ? 0 : 1;
}
