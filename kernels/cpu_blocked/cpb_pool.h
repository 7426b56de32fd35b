/*
 * cpb_pool.h — the thread pool of kernels/cpu_blocked: threads - 1 workers
 * created by cpb_pool_create and joined by cpb_pool_destroy, plus the calling
 * thread, run the independent tasks of one phase at a time.
 *
 * Which thread runs which task is decided at run time (each thread prefers
 * the same contiguous range of a phase's tasks in every call, and takes
 * over others' tasks when it runs out) and must never matter: a task only
 * writes outputs that no other task of the phase reads or writes. cpb_pool_run returns when every task of
 * the phase has finished, so the next phase sees all of its results.
 *
 * Workers run each phase under the calling thread's floating-point
 * environment (rounding, exception masks, flush-to-zero), copied at the start
 * of the phase, so the pool is invisible to the arithmetic. In a child
 * process after fork() the workers do not exist; cpb_pool_run then runs every
 * task on the calling thread. Nothing here prints, allocates after create, or
 * fails after create.
 */
#ifndef AUXTRUNK_CPB_POOL_H
#define AUXTRUNK_CPB_POOL_H

#include <stdint.h>

typedef struct cpb_pool cpb_pool_t;

/* One task of a phase: `task` in [0, ntasks), `thread` in [0, threads) names
 * the running thread (the caller is 0), for per-thread scratch. */
typedef void (*cpb_task_fn)(void *ctx, int32_t task, int32_t thread);

/* 0, or an errno value: ENOMEM, or pthread_create's (EAGAIN: a resource
 * limit). On failure nothing is left: no thread, no memory. threads >= 1. */
int cpb_pool_create(int32_t threads, cpb_pool_t **pool);

/* Stops and joins every worker, frees the pool. NULL is a no-op. */
void cpb_pool_destroy(cpb_pool_t *pool);

/* Threads the pool runs a phase on, the caller included. */
int32_t cpb_pool_threads(const cpb_pool_t *pool);

/* Runs fn(ctx, i, thread) for every i in [0, ntasks), each once, and returns
 * when all have returned. Not reentrant: one phase at a time per pool.
 * Phases of 2^20 tasks or more run on the calling thread alone. */
void cpb_pool_run(cpb_pool_t *pool, int32_t ntasks, cpb_task_fn fn, void *ctx);

#endif /* AUXTRUNK_CPB_POOL_H */
