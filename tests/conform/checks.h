/* checks.h — every check of the conformance runner; the table in checks.c
 * gives each its name, what it needs and its one-line summary. */
#ifndef AUXTRUNK_CONFORM_CHECKS_H
#define AUXTRUNK_CONFORM_CHECKS_H

#include "conform.h"

/* 1. load hygiene */
void check_load_dlopen(cf_ctx_t *ctx);
void check_load_symbols(cf_ctx_t *ctx);
void check_load_table(cf_ctx_t *ctx);
void check_load_init_fast(cf_ctx_t *ctx);
void check_load_status_string(cf_ctx_t *ctx);
void check_load_silent(cf_ctx_t *ctx);
/* 2. negotiation */
void check_negotiate_host_range(cf_ctx_t *ctx);
void check_negotiate_struct_sizes(cf_ctx_t *ctx);
void check_negotiate_flags(cf_ctx_t *ctx);
/* 3. lifecycle */
void check_lifecycle_cycles(cf_ctx_t *ctx);
void check_lifecycle_unused_handle(cf_ctx_t *ctx);
void check_lifecycle_two_handles(cf_ctx_t *ctx);
void check_lifecycle_no_forward(cf_ctx_t *ctx);
void check_lifecycle_not_a_handle(cf_ctx_t *ctx);
void check_lifecycle_after_destroy(cf_ctx_t *ctx);
void check_lifecycle_memory_usage(cf_ctx_t *ctx);
void check_lifecycle_no_alloc_in_calls(cf_ctx_t *ctx);
/* 4. numerics */
void check_numerics_forward(cf_ctx_t *ctx);
void check_numerics_backward(cf_ctx_t *ctx);
void check_numerics_accumulate(cf_ctx_t *ctx);
void check_numerics_finite_diff(cf_ctx_t *ctx);
void check_numerics_nonfinite(cf_ctx_t *ctx);
void check_numerics_unaligned(cf_ctx_t *ctx);
void check_numerics_fast_mode(cf_ctx_t *ctx);
/* 5. stop-gradient and outputs */
void check_stopgrad_x_unchanged(cf_ctx_t *ctx);
void check_stopgrad_outputs_written(cf_ctx_t *ctx);
void check_stopgrad_guard_zones(cf_ctx_t *ctx);
void check_stopgrad_inputs_read_only(cf_ctx_t *ctx);
void check_stopgrad_backward_inputs(cf_ctx_t *ctx);
/* 6. determinism and exactness */
void check_determinism_repeat(cf_ctx_t *ctx);
void check_determinism_canonical(cf_ctx_t *ctx);
void check_determinism_exact(cf_ctx_t *ctx);
/* 7. target-network forward */
void check_target_infer_between(cf_ctx_t *ctx);
/* 8. bad inputs */
void check_bad_init(cf_ctx_t *ctx);
void check_bad_forward(cf_ctx_t *ctx);
void check_bad_backward(cf_ctx_t *ctx);
/* 9. CUDA */
void check_cuda_stream(cf_ctx_t *ctx);
void check_cuda_graph(cf_ctx_t *ctx);
void check_cuda_two_streams(cf_ctx_t *ctx);
void check_cuda_memory_space(cf_ctx_t *ctx);
/* 11. process state */
void check_process_fp_environment(cf_ctx_t *ctx);
void check_process_signals(cf_ctx_t *ctx);
void check_process_threads(cf_ctx_t *ctx);
void check_process_mmap(cf_ctx_t *ctx);
void check_process_stack(cf_ctx_t *ctx);
/* 10. threads */
void check_thread_two_handles(cf_ctx_t *ctx);
void check_thread_handle_migration(cf_ctx_t *ctx);
void check_thread_entry_strings(cf_ctx_t *ctx);

#endif
