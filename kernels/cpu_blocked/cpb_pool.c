/*
 * cpb_pool.c — the thread pool of kernels/cpu_blocked (cpb_pool.h).
 *
 * A phase's tasks are cut into one contiguous home range per thread, the
 * same ranges in every call with the same task count, so a task's outputs
 * stay in the cache of the core that wrote them last time (an output that
 * moves between cores costs more than computing it here). Each range is
 * one 64-bit word, (generation, next, end), on its own cache line. A thread
 * takes its own range's tasks from the front by compare-and-swap, then
 * steals from the back of the others'; the caller returns once `done`
 * reaches ntasks. So the caller waits only for tasks that were actually
 * claimed: a worker that the system has not scheduled yet (the machine may
 * be busy with other work) finds its range taken when it wakes, and never
 * holds the others up. A successful claim also pins the phase's fields:
 * they cannot change before that task is done. The phase word (generation,
 * ntasks) is published after the ranges, and wakes the workers.
 *
 * Waiting spins briefly (phases of one call follow each other within
 * microseconds) and then sleeps on a condition variable, so idle workers cost
 * nothing between calls. No spinning when the pool has more threads than the
 * machine has CPUs: a spinning thread would only take time from one that has
 * work.
 */
#define _GNU_SOURCE
#include "cpb_pool.h"

#include <errno.h>
#include <fenv.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
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

typedef struct worker {
    cpb_pool_t *pool;
    int32_t index; /* 1 .. threads-1; the caller is 0 */
} worker_t;

struct cpb_pool {
    int32_t threads; /* the caller included */
    int32_t started; /* workers created so far */
    pid_t pid;       /* process that owns the workers */
    int spin;        /* polls before sleeping: SPIN_POLLS or 0 */

    pthread_mutex_t mu;
    pthread_cond_t wake;   /* a new phase, or stop */
    pthread_cond_t idle;   /* done reached ntasks */
    _Atomic uint64_t word; /* the phase: generation, ntasks */
    atomic_int done;       /* tasks of the phase finished */
    atomic_int stop;

    /* The current phase's fields, stable while any of its tasks is claimed. */
    cpb_task_fn fn;
    void *ctx;
    fenv_t env;

    range_t *ranges; /* [threads] */
    pthread_t *tid;
    worker_t *workers;
};

/* Claims one task of phase `gen` from range r: its front for the owner,
 * its back for a thief. -1 once the range is empty or the phase is over. */
static int32_t claim(range_t *r, uint32_t gen, int front)
{
    uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);
    for (;;) {
        const int32_t next = RANGE_NEXT(w), end = RANGE_END(w);
        if (WORD_GEN(w) != gen || next >= end)
            return -1;
        const uint64_t claimed = front ? WORD(gen, next + 1, end) : WORD(gen, next, end - 1);
        if (atomic_compare_exchange_weak_explicit(&r->word, &w, claimed, memory_order_acq_rel,
                                                  memory_order_acquire))
            return front ? next : end - 1;
    }
}

/* Runs one claimed task and counts it done. */
static void run_task(cpb_pool_t *p, int32_t task, int32_t thread, int32_t ntasks, int set_env)
{
    if (set_env)
        fesetenv(&p->env);
    p->fn(p->ctx, task, thread);
    if (atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel) + 1 == ntasks) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_signal(&p->idle);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Runs tasks of phase `gen` until none is left: the own range first, then
 * the others' from their backs. */
static void run_tasks(cpb_pool_t *p, int32_t thread, uint64_t word, int set_env)
{
    const uint32_t gen = WORD_GEN(word);
    const int32_t ntasks = WORD_NTASKS(word);
    for (int32_t k = 0; k < p->threads; k++) {
        const int32_t owner = (thread + k) % p->threads;
        for (int32_t task; (task = claim(&p->ranges[owner], gen, k == 0)) >= 0;)
            run_task(p, task, thread, ntasks, set_env);
    }
}

static void *worker_main(void *arg)
{
    const worker_t *w = arg;
    cpb_pool_t *p = w->pool;
    uint32_t seen = 0;
    for (;;) {
        uint32_t g = WORD_GEN(atomic_load_explicit(&p->word, memory_order_acquire));
        for (int s = 0; g == seen && s < p->spin; s++) {
            CPB_PAUSE();
            g = WORD_GEN(atomic_load_explicit(&p->word, memory_order_acquire));
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = WORD_GEN(atomic_load_explicit(&p->word, memory_order_acquire))) == seen &&
                   !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            return NULL;
        seen = g;
        run_tasks(p, w->index, atomic_load_explicit(&p->word, memory_order_acquire), 1);
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
    free(p->ranges);
    free(p);
}

int cpb_pool_create(int32_t threads, cpb_pool_t **out)
{
    if (threads < 1)
        threads = 1;
    cpb_pool_t *p = calloc(1, sizeof *p);
    if (!p)
        return ENOMEM;
    p->threads = threads;
    p->pid = getpid();
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    p->spin = cpus > 0 && threads <= cpus ? SPIN_POLLS : 0;
    atomic_init(&p->word, UINT64_C(0));
    atomic_init(&p->done, 0);
    atomic_init(&p->stop, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->idle, NULL);
    const int32_t n = threads - 1;
    p->tid = calloc((size_t)n + 1, sizeof *p->tid);
    p->workers = calloc((size_t)n + 1, sizeof *p->workers);
    p->ranges = aligned_alloc(CACHE_LINE, (size_t)threads * sizeof *p->ranges);
    if (p->ranges)
        for (int32_t i = 0; i < threads; i++)
            atomic_init(&p->ranges[i].word, UINT64_C(0));
    if (!p->tid || !p->workers || !p->ranges) {
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
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    const uint32_t gen =
        (uint32_t)((WORD_GEN(atomic_load_explicit(&p->word, memory_order_relaxed)) + 1u) &
                   GEN_MASK);
    const int64_t T = p->threads;
    for (int64_t i = 0; i < T; i++)
        atomic_store_explicit(&p->ranges[i].word, WORD(gen, i * ntasks / T, (i + 1) * ntasks / T),
                              memory_order_relaxed);
    const uint64_t word = WORD(gen, ntasks, 0);
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->word, word, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    run_tasks(p, 0, word, 0);

    for (int s = 0; atomic_load_explicit(&p->done, memory_order_acquire) != ntasks && s < p->spin;
         s++)
        CPB_PAUSE();
    if (atomic_load_explicit(&p->done, memory_order_acquire) != ntasks) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->done, memory_order_acquire) != ntasks)
            pthread_cond_wait(&p->idle, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
