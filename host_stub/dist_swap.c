/*
 * dist_swap.c — the hot swap of a data-parallel run (dist_swap.h): the
 * decision and answer records on the wire, and one decision boundary over
 * a link. No NCCL here: the link is the caller's.
 */
#include "dist_swap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEX_DIGITS 64
#define DECISION_MAGIC "ATKD"
#define ANSWER_MAGIC "ATKA"
#define DECISION_FORMAT 1u

/* Offsets in the decision record. */
enum {
    OFF_MAGIC = 0,
    OFF_FORMAT = 4,
    OFF_KIND = 8,
    OFF_RESERVED = 12,
    OFF_STEP = 16,
    OFF_LIVE_SHA = 24,
    OFF_SHA = OFF_LIVE_SHA + HEX_DIGITS,
    OFF_PATH = OFF_SHA + HEX_DIGITS,
};
_Static_assert(OFF_PATH + ATH_PATH_MAX == ATH_DIST_DECISION_BYTES, "decision record layout");
_Static_assert(ATH_SHA256_HEX == HEX_DIGITS + 1, "a digest is 64 hex digits and a NUL");

int ath_dist_swap_decides(const ath_swap_opts_t *o, uint64_t step0, uint64_t done)
{
    if (done == step0 || done % ATH_DIST_SWAP_EVERY == 0)
        return 1;
    for (int i = 0; i < o->n_at; i++)
        if (o->at[i].step == done)
            return 1;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Little-endian fields, text fields                                         */

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A text into a field of n bytes, NUL-padded (cut to n - 1 bytes). */
static void put_text(unsigned char *p, size_t n, const char *s)
{
    memset(p, 0, n);
    const char *end = memchr(s, 0, n - 1);
    memcpy(p, s, end ? (size_t)(end - s) : n - 1);
}

/* A NUL-terminated, zero-padded text field into out [n]. */
static int get_text(const unsigned char *p, size_t n, char *out, const char *what, ath_err_t *err)
{
    const unsigned char *nul = memchr(p, 0, n);
    if (!nul)
        return ath_errf(err, "its %s is not terminated", what);
    for (const unsigned char *q = nul; q < p + n; q++)
        if (*q)
            return ath_errf(err, "its %s has bytes after its end", what);
    memcpy(out, p, (size_t)(nul - p) + 1);
    return 0;
}

/* A digest field: 64 lower-case hex digits, or 64 zero bytes for none. */
static void put_sha(unsigned char *p, const char *sha)
{
    memset(p, 0, HEX_DIGITS);
    if (sha[0])
        memcpy(p, sha, HEX_DIGITS);
}

enum { SHA_FORBIDDEN, SHA_OPTIONAL, SHA_REQUIRED };

static int get_sha(const unsigned char *p, char out[ATH_SHA256_HEX], int want, const char *what,
                   ath_err_t *err)
{
    int zeros = 0;
    for (int i = 0; i < HEX_DIGITS; i++)
        zeros += p[i] == 0;
    if (zeros == HEX_DIGITS) {
        out[0] = '\0';
        return want == SHA_REQUIRED ? ath_errf(err, "it has no %s", what) : 0;
    }
    if (want == SHA_FORBIDDEN)
        return ath_errf(err, "it has a %s it should not have", what);
    for (int i = 0; i < HEX_DIGITS; i++) {
        const unsigned char c = p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return ath_errf(err, "its %s is not 64 lower-case hex digits", what);
        out[i] = (char)c;
    }
    out[HEX_DIGITS] = '\0';
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The records                                                               */

void ath_dist_decision_encode(const ath_dist_decision_t *d,
                              unsigned char out[ATH_DIST_DECISION_BYTES])
{
    memset(out, 0, ATH_DIST_DECISION_BYTES);
    memcpy(out + OFF_MAGIC, DECISION_MAGIC, 4);
    put_u32(out + OFF_FORMAT, DECISION_FORMAT);
    put_u32(out + OFF_KIND, (uint32_t)d->kind);
    put_u64(out + OFF_STEP, d->step);
    put_sha(out + OFF_LIVE_SHA, d->live_sha);
    put_sha(out + OFF_SHA, d->sha);
    put_text(out + OFF_PATH, ATH_PATH_MAX, d->path);
}

static int decode_decision(const unsigned char *in, ath_dist_decision_t *d, ath_err_t *err)
{
    memset(d, 0, sizeof *d);
    if (memcmp(in + OFF_MAGIC, DECISION_MAGIC, 4) != 0)
        return ath_errf(err, "it does not start with " DECISION_MAGIC);
    if (get_u32(in + OFF_FORMAT) != DECISION_FORMAT)
        return ath_errf(err, "its format is %u, not %u", get_u32(in + OFF_FORMAT), DECISION_FORMAT);
    const uint32_t kind = get_u32(in + OFF_KIND);
    if (kind > ATH_DECISION_END)
        return ath_errf(err, "its kind %u is unknown", kind);
    if (get_u32(in + OFF_RESERVED) != 0)
        return ath_errf(err, "its reserved field is not 0");
    d->kind = (int32_t)kind;
    d->step = get_u64(in + OFF_STEP);
    /* An END may come before rank 0 has a live version. */
    if (get_sha(in + OFF_LIVE_SHA, d->live_sha,
                kind == ATH_DECISION_END ? SHA_OPTIONAL : SHA_REQUIRED, "live version's digest",
                err) != 0 ||
        get_sha(in + OFF_SHA, d->sha, kind == ATH_DECISION_SWAP ? SHA_REQUIRED : SHA_FORBIDDEN,
                "digest to take", err) != 0 ||
        get_text(in + OFF_PATH, ATH_PATH_MAX, d->path, "path", err) != 0)
        return -1;
    if ((kind == ATH_DECISION_NONE) != (d->path[0] == '\0'))
        return ath_errf(err, kind == ATH_DECISION_NONE ? "a decision of none has a path"
                                                       : "it has no path or reason");
    return 0;
}

int ath_dist_decision_decode(const unsigned char in[ATH_DIST_DECISION_BYTES],
                             ath_dist_decision_t *d, ath_err_t *err)
{
    ath_err_t why = {{0}};
    if (decode_decision(in, d, &why) == 0)
        return 0;
    memset(d, 0, sizeof *d);
    return ath_errf(err, "not a valid decision record: %s", why.msg);
}

void ath_dist_answer_encode(const ath_dist_answer_t *a, unsigned char out[ATH_DIST_ANSWER_BYTES])
{
    memcpy(out, ANSWER_MAGIC, 4);
    put_u32(out + 4, a->ok ? 1u : 0u);
    put_text(out + 8, ATH_DIST_ANSWER_MSG, a->ok ? "" : a->msg);
}

int ath_dist_answer_decode(const unsigned char in[ATH_DIST_ANSWER_BYTES], ath_dist_answer_t *a,
                           ath_err_t *err)
{
    ath_err_t why = {{0}};
    memset(a, 0, sizeof *a);
    const uint32_t ok = get_u32(in + 4);
    if (memcmp(in, ANSWER_MAGIC, 4) != 0)
        ath_errf(&why, "it does not start with " ANSWER_MAGIC);
    else if (ok > 1)
        ath_errf(&why, "its ok field is %u", ok);
    else if (get_text(in + 8, ATH_DIST_ANSWER_MSG, a->msg, "message", &why) != 0)
        ;
    else if ((ok == 1) != (a->msg[0] == '\0'))
        ath_errf(&why, ok ? "it is ok with a message" : "it is not ok and says no reason");
    else {
        a->ok = (int32_t)ok;
        return 0;
    }
    memset(a, 0, sizeof *a);
    return ath_errf(err, "not a valid answer record: %s", why.msg);
}

/* ------------------------------------------------------------------------- */
/* A boundary                                                                */

static int prepare_once(ath_dist_swap_rank_t *me, int *prepared, ath_err_t *err)
{
    if (*prepared)
        return 0;
    if (me->prepare && me->prepare(me->ctx, err) != 0)
        return -1;
    *prepared = 1;
    return 0;
}

/* Rank 0: the next decision. The state comes to the host only when a
 * trigger is due (ath_swap_due), as in a one-GPU run. */
static void decide(ath_dist_swap_rank_t *me, uint64_t done, int *prepared, ath_dist_decision_t *d)
{
    memset(d, 0, sizeof *d);
    d->kind = ATH_DECISION_NONE;
    d->step = done;
    snprintf(d->live_sha, sizeof d->live_sha, "%s", ath_swap_live_sha(me->swap));
    ath_err_t err = {{0}};
    if (!*prepared && !ath_swap_due(me->swap, done))
        return;
    if (prepare_once(me, prepared, &err) != 0) {
        /* Every rank must hear it: an END, not a silent exit. */
        d->kind = ATH_DECISION_END;
        snprintf(d->path, sizeof d->path, "%s", err.msg);
        return;
    }
    if (ath_swap_poll_one(me->swap, done, me->params, me->live)) {
        d->kind = ATH_DECISION_SWAP;
        snprintf(d->sha, sizeof d->sha, "%s", ath_swap_live_sha(me->swap));
        snprintf(d->path, sizeof d->path, "%s", ath_swap_live_source(me->swap));
    }
}

/* Every rank: can it apply d (rank 0 already has)? */
static void answer(ath_dist_swap_rank_t *me, int rank, int world, const ath_dist_decision_t *d,
                   int *prepared, ath_dist_answer_t *a)
{
    memset(a, 0, sizeof *a);
    a->ok = 1;
    if (rank == 0)
        return;
    ath_err_t err = {{0}};
    const char *mine = ath_swap_live_sha(me->swap);
    if (strcmp(d->live_sha, mine) != 0)
        ath_errf(&err,
                 "runs the plugin with SHA-256 %.16s..., rank 0 the one with %.16s... (every "
                 "rank must load the same file)",
                 mine, d->live_sha);
    else if (d->kind != ATH_DECISION_SWAP)
        return;
    else if (prepare_once(me, prepared, &err) == 0 &&
             ath_swap_follow(me->swap, d->path, d->sha, d->step, me->params, me->live, &err) == 0)
        return;
    a->ok = 0;
    ath_mark_cut(a->msg, sizeof a->msg,
                 snprintf(a->msg, sizeof a->msg, "rank %d of %d: %s", rank, world, err.msg));
}

/* Every rank: the answers in rank order; -1 when one is not ok. */
static int conclude(const unsigned char *all, int world, int rank, ath_err_t *err)
{
    int failed = 0;
    char first[ATH_DIST_ANSWER_MSG] = "";
    for (int r = 0; r < world; r++) {
        ath_dist_answer_t a;
        ath_err_t why = {{0}};
        if (ath_dist_answer_decode(all + (size_t)r * ATH_DIST_ANSWER_BYTES, &a, &why) != 0)
            ath_mark_cut(a.msg, sizeof a.msg,
                         snprintf(a.msg, sizeof a.msg, "rank %d: %s", r, why.msg));
        else if (a.ok)
            continue;
        if (failed++ == 0)
            snprintf(first, sizeof first, "%s", a.msg);
    }
    if (!failed)
        return 0;
    char more[64] = "";
    if (failed > 1)
        snprintf(more, sizeof more, " (and %d other rank%s)", failed - 1, failed > 2 ? "s" : "");
    return ath_errf(err,
                    "rank %d: hot swap: %s%s; ending the run on every rank before a step "
                    "runs with the new version",
                    rank, first, more);
}

int ath_dist_swap_boundary(const ath_dist_link_t *link, ath_dist_swap_rank_t *me, uint64_t done,
                           int *taken, ath_err_t *err)
{
    *taken = 0;
    unsigned char rec[ATH_DIST_DECISION_BYTES], mine[ATH_DIST_ANSWER_BYTES];
    unsigned char *all = malloc((size_t)link->world * ATH_DIST_ANSWER_BYTES);
    int prepared = 0, rc = -1;
    if (!all)
        return ath_errf(err, "rank %d: out of host memory", link->rank);
    for (;;) {
        ath_dist_decision_t d;
        ath_err_t why = {{0}};
        memset(&d, 0, sizeof d);
        if (link->rank == 0)
            decide(me, done, &prepared, &d);
        ath_dist_decision_encode(&d, rec);
        if (link->broadcast(link->ctx, rec, sizeof rec, err) != 0)
            break;
        if (ath_dist_decision_decode(rec, &d, &why) != 0 || d.step != done) {
            if (!why.msg[0])
                ath_errf(&why, "it is for the boundary after step %llu, not %llu",
                         (unsigned long long)d.step, (unsigned long long)done);
            ath_errf(err, "rank %d: the hot-swap decision from rank 0 is %s", link->rank, why.msg);
            break;
        }
        if (d.kind == ATH_DECISION_END) {
            ath_errf(err, "rank %d: rank 0 ends the run at the boundary after step %llu: %s",
                     link->rank, (unsigned long long)done, d.path);
            break;
        }
        ath_dist_answer_t a;
        answer(me, link->rank, link->world, &d, &prepared, &a);
        ath_dist_answer_encode(&a, mine);
        if (link->gather(link->ctx, mine, all, sizeof mine, err) != 0 ||
            conclude(all, link->world, link->rank, err) != 0)
            break;
        if (d.kind == ATH_DECISION_NONE) {
            rc = 0;
            break;
        }
        ++*taken;
    }
    free(all);
    return rc;
}
