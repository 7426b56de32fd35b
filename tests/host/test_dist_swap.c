/*
 * test_dist_swap.c — Check tests of the hot swap of a data-parallel run
 * (host_stub/dist_swap.c) without NCCL or a GPU:
 *   records  the decision and answer records: every field round-trips, every
 *            malformed record is refused, and any record that decodes
 *            encodes back to the same bytes (random mutations of valid ones);
 *   schedule the decision boundaries every rank computes;
 *   boundary N ranks as threads of this process, each with its own swapper
 *            and CPU plugin handle, joined by an in-process link (a barrier
 *            and a shared buffer standing in for NCCL's broadcast and
 *            gather): rank 0's swaps are applied on every rank, with the same
 *            rollback target; a rank that cannot take the file (the file
 *            changed under it, its state could not come to the host, it runs
 *            another version) or a rank 0 that cannot go on ends the
 *            boundary on every rank with a message naming the rank; every
 *            rank makes the same collectives.
 */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dist_swap.h"
#include "scratch.h"
#include "swap.h"
#include "trunk.h"

#define ck_assert_contains(hay, needle) \
    ck_assert_msg(strstr((hay), (needle)) != NULL, "expected \"%s\" in:\n%s", (needle), (hay))

static const char SHA_A[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
static const char SHA_B[] = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

/* ------------------------------------------------------------------------- */
/* records                                                                   */

static ath_dist_decision_t decision(int32_t kind, uint64_t step, const char *live, const char *sha,
                                    const char *path)
{
    ath_dist_decision_t d;
    memset(&d, 0, sizeof d);
    d.kind = kind;
    d.step = step;
    snprintf(d.live_sha, sizeof d.live_sha, "%s", live);
    snprintf(d.sha, sizeof d.sha, "%s", sha);
    snprintf(d.path, sizeof d.path, "%s", path);
    return d;
}

static void assert_round_trip(const ath_dist_decision_t *d)
{
    unsigned char b[ATH_DIST_DECISION_BYTES], again[ATH_DIST_DECISION_BYTES];
    ath_dist_decision_encode(d, b);
    ath_dist_decision_t got;
    ath_err_t err = {{0}};
    ck_assert_msg(ath_dist_decision_decode(b, &got, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(got.kind, d->kind);
    ck_assert_uint_eq(got.step, d->step);
    ck_assert_str_eq(got.live_sha, d->live_sha);
    ck_assert_str_eq(got.sha, d->sha);
    ck_assert_str_eq(got.path, d->path);
    ath_dist_decision_encode(&got, again);
    ck_assert(memcmp(b, again, sizeof b) == 0);
}

/* Decoding b (after mutate) must fail with a message containing want. */
static void assert_refused(const unsigned char *valid, void (*mutate)(unsigned char *),
                           const char *want)
{
    unsigned char b[ATH_DIST_DECISION_BYTES];
    memcpy(b, valid, sizeof b);
    mutate(b);
    ath_dist_decision_t got;
    memset(&got, 0x5A, sizeof got); /* poisoned: must come back cleared */
    ath_err_t err = {{0}};
    ck_assert_msg(ath_dist_decision_decode(b, &got, &err) != 0, "accepted (want \"%s\")", want);
    ck_assert_contains(err.msg, want);
    ck_assert_int_eq(got.kind, 0);
    ck_assert_str_eq(got.path, "");
}

static void m_magic(unsigned char *b) { b[0] = 'X'; }
static void m_format(unsigned char *b) { b[4] = 2; }
static void m_kind(unsigned char *b) { b[8] = 3; }
static void m_reserved(unsigned char *b) { b[13] = 1; }
static void m_live_hex(unsigned char *b) { b[24 + 5] = 'g'; }
static void m_live_upper(unsigned char *b) { b[24 + 10] = 'A'; }
static void m_live_gone(unsigned char *b) { memset(b + 24, 0, 64); }
static void m_sha_gone(unsigned char *b) { memset(b + 88, 0, 64); }
static void m_sha_half(unsigned char *b) { memset(b + 88 + 32, 0, 32); }
static void m_path_unterminated(unsigned char *b) { memset(b + 152, 'p', ATH_PATH_MAX); }
static void m_path_tail(unsigned char *b) { b[152 + ATH_PATH_MAX - 1] = 'x'; }
static void m_path_gone(unsigned char *b) { memset(b + 152, 0, ATH_PATH_MAX); }
static void m_none_has_sha(unsigned char *b) { memcpy(b + 88, SHA_B, 64); }
static void m_none_has_path(unsigned char *b) { b[152] = '/'; }

START_TEST(test_decision_records)
{
    ath_dist_decision_t n = decision(ATH_DECISION_NONE, 64, SHA_A, "", "");
    assert_round_trip(&n);
    ath_dist_decision_t s = decision(ATH_DECISION_SWAP, UINT64_C(0x0123456789ABCDEF), SHA_A, SHA_B,
                                     "/x/libauxtrunk.so");
    assert_round_trip(&s);
    ath_dist_decision_t e = decision(ATH_DECISION_END, 7, "", "", "the device failed");
    assert_round_trip(&e);
    e = decision(ATH_DECISION_END, 7, SHA_B, "", "the device failed");
    assert_round_trip(&e);
    /* The longest path that fits. */
    ath_dist_decision_t l = decision(ATH_DECISION_SWAP, 1, SHA_A, SHA_B, "");
    memset(l.path, 'q', ATH_PATH_MAX - 1);
    l.path[ATH_PATH_MAX - 1] = '\0';
    assert_round_trip(&l);

    /* The layout: little-endian step at 16, the path at 152. */
    unsigned char b[ATH_DIST_DECISION_BYTES];
    ath_dist_decision_encode(&s, b);
    ck_assert(memcmp(b, "ATKD", 4) == 0);
    ck_assert_uint_eq(b[16], 0xEF);
    ck_assert_uint_eq(b[23], 0x01);
    ck_assert(memcmp(b + 152, "/x/libauxtrunk.so", 18) == 0);

    assert_refused(b, m_magic, "does not start with ATKD");
    assert_refused(b, m_format, "format is 2");
    assert_refused(b, m_kind, "kind 3 is unknown");
    assert_refused(b, m_reserved, "reserved");
    assert_refused(b, m_live_hex, "not 64 lower-case hex digits");
    assert_refused(b, m_live_upper, "not 64 lower-case hex digits");
    assert_refused(b, m_live_gone, "has no live version's digest");
    assert_refused(b, m_sha_gone, "has no digest to take");
    assert_refused(b, m_sha_half, "not 64 lower-case hex digits");
    assert_refused(b, m_path_unterminated, "path is not terminated");
    assert_refused(b, m_path_tail, "path has bytes after its end");
    assert_refused(b, m_path_gone, "no path or reason");
    unsigned char none[ATH_DIST_DECISION_BYTES];
    ath_dist_decision_encode(&n, none);
    assert_refused(none, m_none_has_sha, "digest to take it should not have");
    assert_refused(none, m_none_has_path, "a decision of none has a path");
    assert_refused(none, m_live_gone, "has no live version's digest");
}
END_TEST

/* Any record that decodes is the encoding of what it decodes to: nothing
 * in it is ignored. Random mutations of valid records, seeded. */
START_TEST(test_decision_canonical)
{
    const uint64_t seed = (uint64_t)time(NULL);
    uint64_t z = seed | 1;
    const ath_dist_decision_t valid[] = {
        decision(ATH_DECISION_NONE, 64, SHA_A, "", ""),
        decision(ATH_DECISION_SWAP, 40, SHA_A, SHA_B, "pl/libauxtrunk.so"),
        decision(ATH_DECISION_END, 3, SHA_B, "", "why"),
    };
    unsigned accepted = 0, refused = 0;
    for (int i = 0; i < 30000; i++) {
        unsigned char b[ATH_DIST_DECISION_BYTES], again[ATH_DIST_DECISION_BYTES];
        ath_dist_decision_encode(&valid[i % 3], b);
        for (int k = 0; k < 1 + i % 3; k++) {
            z ^= z << 13, z ^= z >> 7, z ^= z << 17;
            /* Mostly the header, the digests and the path's start. */
            const size_t at = (z >> 8) % (i % 5 == 0 ? sizeof b : 200);
            const unsigned char vals[] = {0, '0', 'a', 'f', 'g', 'A', '/', 1, 2, 3, 0xFF};
            b[at] = vals[(z >> 40) % sizeof vals];
        }
        ath_dist_decision_t d;
        ath_err_t err = {{0}};
        if (ath_dist_decision_decode(b, &d, &err) != 0) {
            refused++;
            continue;
        }
        accepted++;
        ath_dist_decision_encode(&d, again);
        ck_assert_msg(memcmp(b, again, sizeof b) == 0,
                      "seed %llu, mutation %d: a record decoded but does not encode back",
                      (unsigned long long)seed, i);
    }
    ck_assert(accepted > 100 && refused > 100);
    printf("records: %u mutated records decoded and re-encoded identically, %u refused (seed "
           "%llu)\n",
           accepted, refused, (unsigned long long)seed);
}
END_TEST

START_TEST(test_answer_records)
{
    unsigned char b[ATH_DIST_ANSWER_BYTES];
    ath_dist_answer_t a = {.ok = 1}, got;
    ath_err_t err = {{0}};
    ath_dist_answer_encode(&a, b);
    ck_assert_msg(ath_dist_answer_decode(b, &got, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(got.ok, 1);
    ck_assert_str_eq(got.msg, "");
    a.ok = 0;
    snprintf(a.msg, sizeof a.msg, "rank 2 of 4: cannot take x");
    ath_dist_answer_encode(&a, b);
    ck_assert_msg(ath_dist_answer_decode(b, &got, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(got.ok, 0);
    ck_assert_str_eq(got.msg, a.msg);
    /* Refusals: not ok without a reason, ok with one, bad magic, bad ok. */
    unsigned char c[ATH_DIST_ANSWER_BYTES];
    memcpy(c, b, sizeof c);
    memset(c + 8, 0, ATH_DIST_ANSWER_MSG);
    ck_assert(ath_dist_answer_decode(c, &got, &err) != 0);
    ck_assert_contains(err.msg, "says no reason");
    memcpy(c, b, sizeof c);
    c[4] = 1;
    ck_assert(ath_dist_answer_decode(c, &got, &err) != 0);
    ck_assert_contains(err.msg, "ok with a message");
    memcpy(c, b, sizeof c);
    c[1] = 'X';
    ck_assert(ath_dist_answer_decode(c, &got, &err) != 0);
    ck_assert_contains(err.msg, "ATKA");
    memcpy(c, b, sizeof c);
    c[4] = 2;
    ck_assert(ath_dist_answer_decode(c, &got, &err) != 0);
    ck_assert_contains(err.msg, "ok field is 2");
    memcpy(c, b, sizeof c);
    c[sizeof c - 1] = 'x';
    ck_assert(ath_dist_answer_decode(c, &got, &err) != 0);
    ck_assert_contains(err.msg, "message has bytes after its end");
    memset(c + 8, 'x', ATH_DIST_ANSWER_MSG);
    ck_assert(ath_dist_answer_decode(c, &got, &err) != 0);
    ck_assert_contains(err.msg, "message is not terminated");
}
END_TEST

START_TEST(test_schedule)
{
    ath_swap_opts_t o;
    memset(&o, 0, sizeof o);
    o.at[0] = (ath_swap_at_t){.step = 10, .path = "a"};
    o.at[1] = (ath_swap_at_t){.step = 100, .path = "b"};
    o.n_at = 2;
    int n = 0;
    for (uint64_t s = 0; s <= 200; s++) {
        const int want = s == 0 || s == 10 || s == 100 || s % ATH_DIST_SWAP_EVERY == 0;
        ck_assert_msg(ath_dist_swap_decides(&o, 0, s) == want, "step %llu", (unsigned long long)s);
        n += want;
    }
    ck_assert_int_eq(n, 6); /* 0, 10, 64, 100, 128, 192 */
    /* A resumed run's first boundary is one. */
    ck_assert(ath_dist_swap_decides(&o, 77, 77));
    ck_assert(!ath_dist_swap_decides(&o, 77, 78));
}
END_TEST

/* ------------------------------------------------------------------------- */
/* boundary: N ranks in one process                                          */

#define MAX_RANKS 4

/* The in-process link: a barrier and one shared buffer. */
typedef struct fake_net {
    int world;
    pthread_barrier_t bar;
    unsigned char buf[ATH_DIST_DECISION_BYTES + MAX_RANKS * ATH_DIST_ANSWER_BYTES];
    /* Run by rank 0 between its broadcast and the others' reading it. */
    void (*after_decision)(void);
    int fail_from; /* collectives from this one on fail on every rank (0: never) */
} fake_net_t;

typedef struct rank_ctx {
    fake_net_t *net;
    int rank;
    ath_swap_t *swap;
    ath_trunk_t live;
    float *params;
    int fail_prepare, prepared;
    int collectives;
    uint64_t done;
    int rc, taken;
    ath_err_t err;
} rank_ctx_t;

static int fake_fails(rank_ctx_t *c, ath_err_t *err)
{
    c->collectives++;
    if (c->net->fail_from && c->collectives >= c->net->fail_from)
        return ath_errf(err, "rank %d: the link failed (test)", c->rank);
    return 0;
}

static int fake_broadcast(void *ctx, void *buf, size_t n, ath_err_t *err)
{
    rank_ctx_t *c = ctx;
    ck_assert_uint_le(n, sizeof c->net->buf);
    if (c->rank == 0) {
        memcpy(c->net->buf, buf, n);
        if (c->net->after_decision)
            c->net->after_decision();
    }
    pthread_barrier_wait(&c->net->bar);
    if (c->rank != 0)
        memcpy(buf, c->net->buf, n);
    pthread_barrier_wait(&c->net->bar);
    return fake_fails(c, err);
}

static int fake_gather(void *ctx, const void *mine, void *all, size_t n, ath_err_t *err)
{
    rank_ctx_t *c = ctx;
    ck_assert_uint_le((size_t)c->net->world * n, sizeof c->net->buf);
    memcpy(c->net->buf + (size_t)c->rank * n, mine, n);
    pthread_barrier_wait(&c->net->bar);
    memcpy(all, c->net->buf, (size_t)c->net->world * n);
    pthread_barrier_wait(&c->net->bar);
    return fake_fails(c, err);
}

static int fake_prepare(void *ctx, ath_err_t *err)
{
    rank_ctx_t *c = ctx;
    c->prepared++;
    if (c->fail_prepare)
        return ath_errf(err, "the state could not come to the host (test)");
    return 0;
}

static void *rank_main(void *arg)
{
    rank_ctx_t *c = arg;
    ath_dist_link_t link = {.rank = c->rank,
                            .world = c->net->world,
                            .broadcast = fake_broadcast,
                            .gather = fake_gather,
                            .ctx = c};
    ath_dist_swap_rank_t me = {
        .swap = c->swap, .live = &c->live, .prepare = fake_prepare, .ctx = c, .params = c->params};
    c->rc = ath_dist_swap_boundary(&link, &me, c->done, &c->taken, &c->err);
    return NULL;
}

/* A small topology, so the canary is quick. */
static const auxtrunk_config_t g_config = {sizeof(auxtrunk_config_t), 0, 16, 16, 16, 8, 16, -1};

/* world ranks; rank r opens first[r] (NULL: CPU_PLUGIN_DIR) with options o
 * (rank 0's; the others get no watch, as train.c does). */
static void ranks_open(fake_net_t *net, rank_ctx_t *c, int world, const ath_swap_opts_t *o,
                       const char *const *first)
{
    memset(net, 0, sizeof *net);
    net->world = world;
    pthread_barrier_init(&net->bar, NULL, (unsigned)world);
    for (int r = 0; r < world; r++) {
        memset(&c[r], 0, sizeof c[r]);
        c[r].net = net;
        c[r].rank = r;
        ath_swap_opts_t so = *o;
        so.log = stderr;
        if (r != 0)
            so.watch = so.poll_ms = 0;
        ath_err_t err = {{0}};
        ck_assert_msg(ath_swap_create(&c[r].swap, &so, &g_config, -1, &err) == 0, "%s", err.msg);
        const char *pl = first && first[r] ? first[r] : CPU_PLUGIN_DIR;
        ck_assert_msg(ath_swap_open(c[r].swap, pl, &c[r].live, &err) == ATH_LOAD_OK, "%s: %s", pl,
                      err.msg);
        c[r].params = malloc(c[r].live.n_params * sizeof(float));
        for (size_t i = 0; i < c[r].live.n_params; i++)
            c[r].params[i] = (float)((int)(i % 17) - 8) * 0.01f; /* the same on every rank */
    }
}

static void ranks_close(fake_net_t *net, rank_ctx_t *c, int world)
{
    for (int r = 0; r < world; r++) {
        ath_trunk_close(&c[r].live);
        ath_swap_destroy(c[r].swap);
        free(c[r].params);
    }
    pthread_barrier_destroy(&net->bar);
}

/* One boundary after step done on every rank, each in its own thread; every
 * rank must have made the same number of collectives. */
static void boundary(rank_ctx_t *c, int world, uint64_t done)
{
    pthread_t th[MAX_RANKS];
    for (int r = 0; r < world; r++) {
        c[r].done = done;
        c[r].collectives = 0;
        c[r].err.msg[0] = '\0';
        ck_assert(pthread_create(&th[r], NULL, rank_main, &c[r]) == 0);
    }
    for (int r = 0; r < world; r++)
        pthread_join(th[r], NULL);
    for (int r = 1; r < world; r++)
        ck_assert_int_eq(c[r].collectives, c[0].collectives);
}

static ath_swap_opts_t swap_opts(void)
{
    ath_swap_opts_t o;
    memset(&o, 0, sizeof o);
    o.rollback_steps = 5;
    o.vet_exe = AUXTRUNK_HOST_EXE; /* exec'd: this process has threads */
    o.vet_exec_always = 1;
    return o;
}

static void assert_all(rank_ctx_t *c, int world, int rc, int taken, const char *impl)
{
    for (int r = 0; r < world; r++) {
        ck_assert_msg(c[r].rc == rc, "rank %d: rc %d, want %d: %s", r, c[r].rc, rc, c[r].err.msg);
        if (rc == 0)
            ck_assert_int_eq(c[r].taken, taken);
        if (impl)
            ck_assert_str_eq(c[r].live.plugin.api.impl_name, impl);
        ck_assert_str_eq(ath_swap_live_sha(c[r].swap), ath_swap_live_sha(c[0].swap));
    }
}

/* world ranks of the CPU plugin whose only trigger is --swap-at step:path. */
static void ranks_open_at(fake_net_t *net, rank_ctx_t *c, int world, uint64_t step,
                          const char *path)
{
    ath_swap_opts_t o = swap_opts();
    o.at[0] = (ath_swap_at_t){.step = step, .path = path};
    o.n_at = 1;
    ranks_open(net, c, world, &o, NULL);
}

/* Every rank's boundary failed, with want in its message. */
static void assert_all_end(const rank_ctx_t *c, int world, const char *want)
{
    for (int r = 0; r < world; r++) {
        ck_assert_msg(c[r].rc == -1, "rank %d went on", r);
        ck_assert_contains(c[r].err.msg, want);
    }
}

START_TEST(test_swaps_applied_everywhere)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const int world = 3;
    fake_net_t net;
    rank_ctx_t c[MAX_RANKS];
    ath_swap_opts_t o = swap_opts();
    /* Two entries at one step, and one later. */
    o.at[0] = (ath_swap_at_t){.step = 10, .path = BLOCKED_PLUGIN_DIR};
    o.at[1] = (ath_swap_at_t){.step = 10, .path = CPU_PLUGIN_DIR};
    o.at[2] = (ath_swap_at_t){.step = 20, .path = BLOCKED_PLUGIN_DIR};
    o.n_at = 3;
    ranks_open(&net, c, world, &o, NULL);
    const char *first = c[0].live.plugin.api.impl_name;
    ck_assert_str_eq(first, "cpu-ref");

    /* The start: nothing due; the first version agreed, no state fetched. */
    boundary(c, world, 0);
    assert_all(c, world, 0, 0, "cpu-ref");
    for (int r = 0; r < world; r++)
        ck_assert_int_eq(c[r].prepared, 0);
    ck_assert_int_eq(c[0].collectives, 2); /* one decision, one gather */

    /* Step 10: both entries, one decision each, applied on every rank. */
    boundary(c, world, 10);
    assert_all(c, world, 0, 2, "cpu-ref");
    ck_assert_int_eq(c[0].collectives, 6);
    for (int r = 0; r < world; r++) {
        ck_assert_int_eq(c[r].prepared, 1);
        ath_swap_stats_t st = ath_swap_stats(c[r].swap);
        ck_assert_uint_eq(st.taken, 2);
    }
    /* The same rollback target everywhere: the version the second entry
     * replaced (cpu-blocked). */
    for (int r = 0; r < world; r++) {
        ck_assert_int_eq(ath_swap_failed(c[r].swap, 12, &c[r].live, "test"), 0);
        ck_assert_str_eq(c[r].live.plugin.api.impl_name, "cpu-blocked");
        ck_assert_str_eq(ath_swap_live_sha(c[r].swap), ath_swap_live_sha(c[0].swap));
    }
    /* Step 20: cpu-blocked again is the running version (unchanged): none. */
    boundary(c, world, 20);
    assert_all(c, world, 0, 0, "cpu-blocked");
    ck_assert_uint_eq(ath_swap_stats(c[0].swap).unchanged, 1);
    ranks_close(&net, c, world);
    tst_scratch_done();
}
END_TEST

/* The watched file replaced on rank 0's host, taken at the boundary. */
static char g_watched[4200], g_other[4200];

static void replace_watched(const char *from)
{
    size_t n;
    char *bytes = tst_slurp(from, &n);
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", g_watched);
    tst_spit(tmp, bytes, n, 0644);
    ck_assert(rename(tmp, g_watched) == 0);
    free(bytes);
}

static void replace_with_other(void) { replace_watched(g_other); }

static void stage_plugins(void)
{
    const char *dir = tst_path_in("pl");
    ck_assert(mkdir(dir, 0755) == 0);
    ck_assert(snprintf(g_watched, sizeof g_watched, "%s/libauxtrunk.so", dir) <
              (int)sizeof g_watched);
    snprintf(g_other, sizeof g_other, "%s", tst_path_in("cpu-ref.so"));
    char src[4300];
    snprintf(src, sizeof src, "%s/libauxtrunk.so", CPU_PLUGIN_DIR);
    size_t n;
    char *bytes = tst_slurp(src, &n);
    tst_spit(g_other, bytes, n, 0644);
    free(bytes);
    snprintf(src, sizeof src, "%s/libauxtrunk.so", BLOCKED_PLUGIN_DIR);
    replace_watched(src);
}

START_TEST(test_watched_change_applied_everywhere)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    stage_plugins();
    const int world = 2;
    fake_net_t net;
    rank_ctx_t c[MAX_RANKS];
    ath_swap_opts_t o = swap_opts();
    o.watch = 1;
    o.poll_ms = 10;
    const char *first[] = {g_watched, g_watched};
    ranks_open(&net, c, world, &o, first);
    ck_assert_str_eq(c[0].live.plugin.api.impl_name, "cpu-blocked");
    replace_watched(g_other);
    /* Rank 0's poll sees the change once it reads the same twice. */
    for (int i = 0; i < 100 && c[0].taken == 0; i++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        boundary(c, world, 64 * (uint64_t)(i + 1));
        assert_all(c, world, 0, c[0].taken, NULL);
    }
    assert_all(c, world, 0, 1, "cpu-ref");
    ranks_close(&net, c, world);
    tst_scratch_done();
}
END_TEST

/* The file changes between rank 0's copy and the others': they cannot
 * take it (the digest), and every rank ends the boundary. */
START_TEST(test_file_changed_under_followers)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    stage_plugins();
    const int world = 3;
    fake_net_t net;
    rank_ctx_t c[MAX_RANKS];
    ranks_open_at(&net, c, world, 5, g_watched);
    net.after_decision = replace_with_other;
    boundary(c, world, 5);
    assert_all_end(c, world, "hot swap: rank 1 of 3: cannot take");
    for (int r = 0; r < world; r++) {
        ck_assert_contains(c[r].err.msg, "digest");
        ck_assert_contains(c[r].err.msg, "not the");
        ck_assert_contains(c[r].err.msg, "(and 1 other rank)");
        ck_assert_contains(c[r].err.msg, "ending the run on every rank");
    }
    /* The followers did not switch. */
    ck_assert_str_eq(c[1].live.plugin.api.impl_name, "cpu-ref");
    ck_assert_str_eq(c[2].live.plugin.api.impl_name, "cpu-ref");
    fprintf(stderr, "boundary: rank 0 says: %s\n", c[0].err.msg);
    ranks_close(&net, c, world);
    tst_scratch_done();
}
END_TEST

/* One rank fails (its state cannot come to the host): every rank ends,
 * naming it; the same with a rank that runs another first version. */
START_TEST(test_one_rank_fails)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const int world = 4;
    fake_net_t net;
    rank_ctx_t c[MAX_RANKS];
    ranks_open_at(&net, c, world, 3, BLOCKED_PLUGIN_DIR);
    c[2].fail_prepare = 1;
    boundary(c, world, 3);
    assert_all_end(c, world, "rank 2 of 4: the state could not come to the host");
    for (int r = 0; r < world; r++)
        ck_assert(strstr(c[r].err.msg, "other rank") == NULL);
    ranks_close(&net, c, world);

    const char *first[] = {NULL, BLOCKED_PLUGIN_DIR, NULL};
    ath_swap_opts_t o = swap_opts();
    ranks_open(&net, c, 3, &o, first);
    boundary(c, 3, 0);
    assert_all_end(c, 3, "rank 1 of 3: runs the plugin with SHA-256");
    ranks_close(&net, c, 3);
    tst_scratch_done();
}
END_TEST

/* Rank 0 cannot go on: an END record, and every rank ends with its reason;
 * a failing link ends every rank too. */
START_TEST(test_rank0_ends_and_link_fails)
{
    tst_scratch(AUXTRUNK_TEST_TMP);
    const int world = 2;
    fake_net_t net;
    rank_ctx_t c[MAX_RANKS];
    ranks_open_at(&net, c, world, 3, BLOCKED_PLUGIN_DIR);
    c[0].fail_prepare = 1;
    boundary(c, world, 3);
    assert_all_end(c, world, "rank 0 ends the run at the boundary after step 3");
    for (int r = 0; r < world; r++) {
        ck_assert_contains(c[r].err.msg, "could not come to the host");
        ck_assert_str_eq(c[r].live.plugin.api.impl_name, "cpu-ref");
    }
    ck_assert_int_eq(c[0].collectives, 1);
    c[0].fail_prepare = 0;
    net.fail_from = 2; /* the gather */
    boundary(c, world, 4);
    assert_all_end(c, world, "the link failed");
    ranks_close(&net, c, world);
    tst_scratch_done();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dist_swap");
    TCase *tc = tcase_create("records");
    tcase_add_test(tc, test_decision_records);
    tcase_add_test(tc, test_decision_canonical);
    tcase_add_test(tc, test_answer_records);
    tcase_add_test(tc, test_schedule);
    suite_add_tcase(s, tc);
    tc = tcase_create("boundary");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_swaps_applied_everywhere);
    tcase_add_test(tc, test_watched_change_applied_everywhere);
    tcase_add_test(tc, test_file_changed_under_followers);
    tcase_add_test(tc, test_one_rank_fails);
    tcase_add_test(tc, test_rank0_ends_and_link_fails);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
