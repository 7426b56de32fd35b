/*
 * cpb_pool.c — the thread pool of kernels/cpu_blocked (cpb_pool.h).
 *
 * A phase's tasks are cut into one contiguous home range per thread, the
 * same ranges in every call with the same task count, so a task's outputs
 * stay in the cache of the core that wrote them last time (an output that
 * moves between cores costs more than computing it here). Each range is
 * one 64-bit word, (generation, next, end), on its own cache line. A thread
 * takes its own range's tasks from the front by compare-and-swap, then
 * steals from the back of the others'; the caller returns once the
 * threads' counts of finished tasks add up to every task it has handed
 * out. So the caller waits only for tasks that were actually claimed: a worker that the system has not
 * scheduled yet (the machine may be busy with other work) finds its range
 * taken when it wakes, and never holds the others up. A successful claim
 * also pins the phase's fields: they cannot change before that task is done.
 *
 * A phase boundary moves as few cache lines between the cores as it can:
 * the caller publishes the phase by one store of the phase word, which
 * shares its line with the phase's fields and nothing that another thread
 * writes; a range word of an older generation stands for the whole range
 * (its bounds follow from ntasks), so the first thread to claim from a
 * range sets it and the caller never writes the workers' range lines; each
 * thread counts its finished tasks on a line of its own, which the caller
 * reads only once its own tasks have run out.
 *
 * Waiting spins briefly (phases of one call follow each other within
 * microseconds) and then sleeps on a condition variable, so idle workers
 * cost nothing between calls. The mutex and the condition variables are
 * touched only when a thread sleeps: a sleeper count (workers) and a flag
 * (the caller), each read after a sequentially consistent store of the
 * word the sleeper waits on and set under the mutex before the sleeper's
 * last look at that word, so a wake is never lost and never paid for when
 * nobody sleeps. No spinning when the pool has more threads than the
 * machine has CPUs: a spinning thread would only take time from one that
 * has work.
 */
#define _GNU_SOURCE
#include "cpb_pool.h"

#include <errno.h>
#include <fenv.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPB_PAUSE() _mm_pause()
#else
#define CPB_PAUSE() atomic_signal_fence(memory_order_seq_cst)
#endif

/* Polls of a waiting thread before it sleeps (a pause each). */
#define SPIN_POLLS 4000
/* Workers only run kernels, whose scratch is in the handle's workspace. */
#define WORKER_STACK (512u * 1024u)
/* The phase word: generation (24 bits) | ntasks (20) | 0 (20); a range
 * word: generation | next (20) | end (20). */
#define TASK_BITS 20
#define TASK_MASK ((UINT64_C(1) << TASK_BITS) - 1)
#define GEN_MASK UINT64_C(0xFFFFFF)
#define WORD_GEN(w) ((uint32_t)((w) >> (2 * TASK_BITS)))
#define WORD_NTASKS(w) ((int32_t)(((w) >> TASK_BITS) & TASK_MASK))
#define RANGE_NEXT(w) ((int32_t)(((w) >> TASK_BITS) & TASK_MASK))
#define RANGE_END(w) ((int32_t)((w)&TASK_MASK))
#define WORD(gen, hi, lo) \
    (((uint64_t)(gen)&GEN_MASK) << (2 * TASK_BITS) | (uint64_t)(hi) << TASK_BITS | (uint64_t)(lo))
#define CACHE_LINE 64

/* One thread's home range of the current phase, alone on its line. */
typedef struct range {
    _Alignas(CACHE_LINE) _Atomic uint64_t word;
} range_t;

/* Tasks one thread has finished since the pool was made, alone on its
 * line: written by that thread only. */
typedef struct count {
    _Alignas(CACHE_LINE) _Atomic uint64_t word;
} count_t;

typedef struct worker {
    cpb_pool_t *pool;
    int32_t index; /* 1 .. threads-1; the caller is 0 */
} worker_t;

struct cpb_pool {
    int32_t threads; /* the caller included */
    int32_t started; /* workers created so far */
    pid_t pid;       /* process that owns the workers */
    int spin;        /* polls before sleeping: SPIN_POLLS or 0 */
    range_t *ranges; /* [threads] */
    count_t *counts; /* [threads] */
    uint64_t expected; /* the caller's: tasks of every phase so far */
    pthread_t *tid;
    worker_t *workers;

    /* The phase: written by the caller alone, fields first, then the word
     * (generation, ntasks); the fields are stable while any of the phase's
     * tasks is claimed. Workers spin on this line. */
    _Alignas(CACHE_LINE) _Atomic uint64_t word;
    cpb_task_fn fn;
    void *ctx;
    fenv_t env;

    /* Sleeping: touched only by a thread about to sleep and by whoever
     * wakes it. */
    _Alignas(CACHE_LINE) pthread_mutex_t mu;
    pthread_cond_t wake;     /* a new phase, or stop */
    pthread_cond_t idle;     /* the phase's tasks are all finished */
    atomic_int sleepers;     /* workers on `wake` or about to be */
    atomic_int caller_waits; /* the caller on `idle` or about to be */
    atomic_int stop;
};

/* Claims one task of phase `gen` (ntasks tasks) from range `owner`: its
 * front for the owner, its back for a thief; a range of an older generation
 * is the whole range [owner*ntasks/T, (owner+1)*ntasks/T). -1 once the range
 * is empty or the phase is over. Ranges are never more than one generation
 * behind the phase (the caller looks at every range in every phase), so
 * "older" is "a generation up to half the counter behind". */
static int32_t claim(cpb_pool_t *p, int32_t owner, uint32_t gen, int32_t ntasks, int front)
{
    range_t *r = &p->ranges[owner];
    uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);
    for (;;) {
        int32_t next = RANGE_NEXT(w), end = RANGE_END(w);
        const uint32_t behind = (gen - WORD_GEN(w)) & GEN_MASK;
        if (behind != 0) {
            if (behind > GEN_MASK / 2)
                return -1; /* the range is ahead: this thread's phase is over */
            const int64_t T = p->threads;
            next = (int32_t)(owner * (int64_t)ntasks / T);
            end = (int32_t)((owner + 1) * (int64_t)ntasks / T);
        }
        if (next >= end) {
            if (behind == 0)
                return -1;
            /* An empty range, set so that it is not looked at as older. */
            if (atomic_compare_exchange_weak_explicit(&r->word, &w, WORD(gen, next, end),
                                                      memory_order_acq_rel, memory_order_acquire))
                return -1;
            continue;
        }
        const uint64_t claimed = front ? WORD(gen, next + 1, end) : WORD(gen, next, end - 1);
        if (atomic_compare_exchange_weak_explicit(&r->word, &w, claimed, memory_order_acq_rel,
                                                  memory_order_acquire))
            return front ? next : end - 1;
    }
}

/* Runs tasks of phase `word` until none is left: the own range first, then
 * the others' from their backs. Each finished task is counted on the
 * thread's own line; a worker sets the caller's floating-point environment
 * once, after its first claim (which pins the phase's fields). */
static void run_tasks(cpb_pool_t *p, int32_t thread, uint64_t word)
{
    const uint32_t gen = WORD_GEN(word);
    const int32_t ntasks = WORD_NTASKS(word);
    _Atomic uint64_t *mine = &p->counts[thread].word;
    uint64_t finished = atomic_load_explicit(mine, memory_order_relaxed);
    int env = thread == 0;
    for (int32_t k = 0; k < p->threads; k++) {
        const int32_t owner = (thread + k) % p->threads;
        for (int32_t task; (task = claim(p, owner, gen, ntasks, k == 0)) >= 0;) {
            if (!env) {
                fesetenv(&p->env);
                env = 1;
            }
            p->fn(p->ctx, task, thread);
            finished++;
            if (thread == 0) {
                atomic_store_explicit(mine, finished, memory_order_relaxed);
                continue;
            }
            /* Seen by the caller's sum; then, if it sleeps, wake it (it
             * sets caller_waits before its last sum, under the mutex). */
            atomic_store_explicit(mine, finished, memory_order_seq_cst);
            if (atomic_load_explicit(&p->caller_waits, memory_order_seq_cst)) {
                pthread_mutex_lock(&p->mu);
                pthread_cond_signal(&p->idle);
                pthread_mutex_unlock(&p->mu);
            }
        }
    }
}

/* Whether every task of every phase so far has finished: the threads'
 * counts add up to what the caller has handed out. No count can include a
 * later phase's task before the caller sees this true. */
static int all_finished(cpb_pool_t *p)
{
    uint64_t n = 0;
    for (int32_t i = 0; i < p->threads; i++)
        n += atomic_load_explicit(&p->counts[i].word, memory_order_seq_cst);
    return n == p->expected;
}

static void *worker_main(void *arg)
{
    const worker_t *w = arg;
    cpb_pool_t *p = w->pool;
    uint32_t seen = 0;
    for (;;) {
        uint64_t word = atomic_load_explicit(&p->word, memory_order_acquire);
        for (int s = 0; WORD_GEN(word) == seen && s < p->spin; s++) {
            CPB_PAUSE();
            word = atomic_load_explicit(&p->word, memory_order_acquire);
        }
        if (WORD_GEN(word) == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
            while (WORD_GEN(word = atomic_load_explicit(&p->word, memory_order_seq_cst)) == seen &&
                   !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            return NULL;
        seen = WORD_GEN(word);
        run_tasks(p, w->index, word);
    }
}

/* Joins the workers started so far and frees everything. */
static void pool_free(cpb_pool_t *p)
{
    if (p->started > 0) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->stop, 1);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int32_t i = 0; i < p->started; i++)
            pthread_join(p->tid[i], NULL);
    }
    pthread_cond_destroy(&p->idle);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p->tid);
    free(p->counts);
    free(p->ranges);
    free(p);
}

int cpb_pool_create(int32_t threads, cpb_pool_t **out)
{
    if (threads < 1)
        threads = 1;
    cpb_pool_t *p = aligned_alloc(CACHE_LINE, sizeof *p);
    if (!p)
        return ENOMEM;
    memset(p, 0, sizeof *p);
    p->threads = threads;
    p->pid = getpid();
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    p->spin = cpus > 0 && threads <= cpus ? SPIN_POLLS : 0;
    atomic_init(&p->word, UINT64_C(0));
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->caller_waits, 0);
    atomic_init(&p->stop, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->idle, NULL);
    const int32_t n = threads - 1;
    p->tid = calloc((size_t)n + 1, sizeof *p->tid);
    p->workers = calloc((size_t)n + 1, sizeof *p->workers);
    p->ranges = aligned_alloc(CACHE_LINE, (size_t)threads * sizeof *p->ranges);
    p->counts = aligned_alloc(CACHE_LINE, (size_t)threads * sizeof *p->counts);
    if (p->ranges)
        for (int32_t i = 0; i < threads; i++)
            atomic_init(&p->ranges[i].word, UINT64_C(0));
    if (p->counts)
        for (int32_t i = 0; i < threads; i++)
            atomic_init(&p->counts[i].word, UINT64_C(0));
    if (!p->tid || !p->workers || !p->ranges || !p->counts) {
        pool_free(p);
        return ENOMEM;
    }

    /* Workers block every signal (they inherit the mask at creation), so a
     * host's handlers and sigwait() only ever see the host's own threads. */
    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (err != 0) {
        pool_free(p);
        return err;
    }
    pthread_attr_setstacksize(&attr, WORKER_STACK);
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    for (int32_t i = 0; i < n && err == 0; i++) {
        p->workers[i] = (worker_t){p, i + 1};
        err = pthread_create(&p->tid[i], &attr, worker_main, &p->workers[i]);
        if (err == 0)
            p->started++;
    }
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        pool_free(p);
        return err;
    }
    *out = p;
    return 0;
}

void cpb_pool_destroy(cpb_pool_t *p)
{
    if (p)
        pool_free(p);
}

int32_t cpb_pool_threads(const cpb_pool_t *p) { return p->threads; }

void cpb_pool_run(cpb_pool_t *p, int32_t ntasks, cpb_task_fn fn, void *ctx)
{
    if (ntasks <= 0)
        return;
    if (p->threads == 1 || ntasks == 1 || (uint64_t)ntasks > TASK_MASK || getpid() != p->pid) {
        for (int32_t i = 0; i < ntasks; i++)
            fn(ctx, i, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    fegetenv(&p->env);
    const uint32_t gen =
        (uint32_t)((WORD_GEN(atomic_load_explicit(&p->word, memory_order_relaxed)) + 1u) &
                   GEN_MASK);
    const uint64_t word = WORD(gen, ntasks, 0);
    p->expected += (uint64_t)ntasks;
    /* Publish, then wake only if a worker sleeps or is about to (it counts
     * itself under the mutex before its last look at the word). */
    atomic_store_explicit(&p->word, word, memory_order_seq_cst);
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }

    run_tasks(p, 0, word);

    /* Every task is claimed now; wait for the ones still running. */
    for (int s = 0; !all_finished(p) && s < p->spin; s++)
        CPB_PAUSE();
    if (!all_finished(p)) {
        pthread_mutex_lock(&p->mu);
        atomic_store_explicit(&p->caller_waits, 1, memory_order_seq_cst);
        while (!all_finished(p))
            pthread_cond_wait(&p->idle, &p->mu);
        atomic_store_explicit(&p->caller_waits, 0, memory_order_relaxed);
        pthread_mutex_unlock(&p->mu);
    }
}
