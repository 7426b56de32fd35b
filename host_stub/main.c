/*
 * main.c — auxtrunk-host, the stand-in trainer: command line, subcommands
 * (train, the default, and bench), --help generated from the option tables
 * (options.h) so help, defaults and parsing cannot drift apart.
 *
 * The program knows only abi/: plugins are found and loaded at run time.
 */
#define _POSIX_C_SOURCE 200809L /* lstat */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "bench.h"
#include "checkpoint.h"
#include "dist.h"
#include "loader.h"
#include "options.h"
#include "safefile.h"
#include "swap.h"
#include "train.h"
#include "util.h"
#include "vet.h"

#include "auxtrunk_version.h"
#define AUXTRUNK_HOST_VERSION AUXTRUNK_PROJECT_VERSION

/* ------------------------------------------------------------------------- */
/* Texts                                                                     */

static const char *exit_codes_help =
    "Exit codes:\n"
    "  0  success\n"
    "  1  failure while running: a plugin call, the device, I/O, or a non-finite loss\n"
    "  2  bad command line\n"
    "  3  plugin refused: missing, not loadable, no entry symbol, incompatible ABI,\n"
    "     broken API table, no CUDA support/device, or init failed\n"
    "  4  checkpoint refused (truncated, corrupted, wrong magic/version/topology/\n"
    "     settings) or could not be written\n"
    "  5  a plugin call or the device hung (--call-timeout); the last checkpoint is intact\n"
    "  130, 143  stopped by SIGINT, SIGTERM (after the final checkpoint, if configured)\n";

static const char *train_intro =
    "Usage: auxtrunk-host [train] [options]\n\n"
    "Trains the auxiliary trunk on a synthetic task: regress a fixed random teacher\n"
    "network's outputs from synthetic encoder features, fresh samples every step.\n"
    "The host owns parameters, gradients and Adam state; the plugin computes\n"
    "forward and backward. Prints progress (step, loss, steps/s) and a summary.\n\n";

static const char *bench_intro =
    "Usage: auxtrunk-host bench [options]\n\n"
    "Times forward, backward and a whole step (forward + backward) of one or more\n"
    "plugins at several batch sizes: median of many iterations after warm-up, on\n"
    "random inputs rotated among sets larger than an L2 cache. CUDA plugins run\n"
    "on a non-blocking stream and are timed with CUDA events, host plugins with\n"
    "the monotonic clock. Prints a table (us per call, TFLOP/s, memory per\n"
    "handle) and, with --csv, a CSV.\n\n"
    "step_graph_us: for CUDA plugins that claim AUXTRUNK_CAP_GRAPH_CAPTURE, the host\n"
    "also captures one step (forward + backward) into a CUDA graph and times its\n"
    "replay, as the --cublas column is timed. Every replay reads the same input\n"
    "set, so at small batches the inputs may be L2-resident; the eager columns\n"
    "rotate inputs. '-' (empty in the CSV) for other plugins.\n\n"
    "FLOP per call: forward = 2*B*(ENC*H1 + H1*H2 + H2*AUX),\n"
    "backward = 2*B*(ENC*H1 + 2*H1*H2 + 2*H2*AUX), step = the sum.\n\n";

static const char *plugins_help =
    "Plugins: a plugin directory holds one libauxtrunk.so. Without --plugin-dir or\n"
    "--plugin, $AUXTRUNK_PLUGIN_DIR is used if set, else the fast exact CPU plugin\n"
    "next to this program: <build>/plugins/cpu-blocked in a build tree (this program\n"
    "is <build>/host_stub/auxtrunk-host), <prefix>/lib/auxtrunk/plugins/cpu-blocked\n"
    "when installed. --plugin NAME picks NAME/libauxtrunk.so in the first entry of\n"
    "$AUXTRUNK_PLUGIN_PATH (':'-separated plugin roots) that has it, else\n"
    "<plugins root>/NAME (cpu, cuda-v1, ...).\n";

/* A command's --help: its usage and description, the options (defaults read
 * from the table), then the plugin lookup and the exit codes every command
 * shares. */
static void print_help(const char *intro, const ath_opt_t *opts, size_t n)
{
    printf("%sOptions:\n", intro);
    ath_opts_help(stdout, opts, n);
    printf("  %-24s %s\n\n%s\n%s", "--help", "this text", plugins_help, exit_codes_help);
}

/* ------------------------------------------------------------------------- */
/* Values the table parser does not know                                     */

/* Plugin arguments collect here for both subcommands: --plugin-dir DIR and
 * --plugin NAME (resolved under the plugins root) in command-line order. */
typedef struct plugin_list {
    const char *items[ATH_BENCH_MAX_PLUGINS];
    char named[ATH_BENCH_MAX_PLUGINS][ATH_PATH_MAX];
    int n;
} plugin_list_t;

static int add_plugin(plugin_list_t *pl, const char *value, int named, ath_err_t *err)
{
    if (pl->n == ATH_BENCH_MAX_PLUGINS)
        return ath_errf(err, "at most %d plugins", ATH_BENCH_MAX_PLUGINS);
    if (named) {
        ath_err_t e;
        if (ath_plugin_named(value, pl->named[pl->n], sizeof pl->named[pl->n], &e) != 0)
            return ath_errf(err, "--plugin %s: %s", value, e.msg);
        pl->items[pl->n] = pl->named[pl->n];
    } else {
        pl->items[pl->n] = value;
    }
    pl->n++;
    return 0;
}

static int set_plugin_path(void *dst, const char *v, ath_err_t *err)
{
    return add_plugin(dst, v, 0, err);
}

static int set_plugin_named(void *dst, const char *v, ath_err_t *err)
{
    return add_plugin(dst, v, 1, err);
}

/* --swap-at STEP:PATH, checked as it comes (ascending steps). */
typedef struct swap_at_list {
    ath_swap_at_t at[ATH_SWAP_MAX_AT];
    int n;
} swap_at_list_t;

static int set_swap_at(void *dst, const char *v, ath_err_t *err)
{
    swap_at_list_t *l = dst;
    if (l->n == ATH_SWAP_MAX_AT)
        return ath_errf(err, "at most %d --swap-at entries", ATH_SWAP_MAX_AT);
    if (ath_swap_parse_at(v, &l->at[l->n], err) != 0)
        return -1;
    if (l->n > 0 && l->at[l->n].step < l->at[l->n - 1].step)
        return ath_errf(err, "--swap-at entries must be in ascending step order");
    l->n++;
    return 0;
}

/* "32,256,1024" into a batch list. */
typedef struct batch_list {
    int32_t v[ATH_BENCH_MAX_BATCHES];
    int n;
} batch_list_t;

static int set_batches(void *dst, const char *s, ath_err_t *err)
{
    batch_list_t *l = dst;
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf)
        return ath_errf(err, "--batches: list too long");
    l->n = 0;
    for (char *p = buf, *comma; p; p = comma ? comma + 1 : NULL) {
        comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (l->n == ATH_BENCH_MAX_BATCHES)
            return ath_errf(err, "--batches: at most %d sizes", ATH_BENCH_MAX_BATCHES);
        int64_t x;
        if (ath_parse_i64(p, 1, AUXTRUNK_MAX_BATCH, "--batches: a batch size", &x, err) != 0)
            return -1;
        l->v[l->n++] = (int32_t)x;
    }
    return 0;
}

static void show_batches(const void *dst, char *buf, size_t n)
{
    const batch_list_t *l = dst;
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < l->n && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%d", i ? "," : "", (int)l->v[i]);
}

/* Parses argv[first..] against opts. Returns 0, 1 for --help, -1 after
 * printing the error. */
static int parse(int argc, char **argv, int first, const ath_opt_t *opts, size_t n_opts,
                 const char *cmd)
{
    ath_err_t err;
    int rc = ath_opts_parse(argc, argv, first, opts, n_opts, &err);
    if (rc < 0)
        fprintf(stderr, "auxtrunk-host %s: %s\n", cmd, err.msg);
    return rc;
}

/* The one plugin a command uses when it takes one. */
static int default_plugin(plugin_list_t *pl, const char *cmd)
{
    if (pl->n > 0)
        return 0;
    ath_err_t err;
    if (ath_default_plugin_dir(pl->named[0], sizeof pl->named[0], &err) != 0) {
        fprintf(stderr, "auxtrunk-host %s: no plugin given and %s\n", cmd, err.msg);
        return -1;
    }
    pl->items[0] = pl->named[0];
    pl->n = 1;
    return 0;
}

/* Table shorthands: an option with a range whose default --help prints from
 * its destination, one with a text for a default, one with none. */
#define NUM(name, arg, kind, dst, lo, hi, help)                 \
    {                                                           \
        name, arg, kind, dst, help, lo, hi, 1, NULL, NULL, NULL \
    }
#define NUM_T(name, arg, kind, dst, lo, hi, text, help)         \
    {                                                           \
        name, arg, kind, dst, help, lo, hi, 0, text, NULL, NULL \
    }
#define PLAIN(name, arg, kind, dst, help)                     \
    {                                                         \
        name, arg, kind, dst, help, 0, 0, 0, NULL, NULL, NULL \
    }
#define CUSTOM(name, arg, dst, set, show, help)                                   \
    {                                                                             \
        name, arg, ATH_OPT_CUSTOM, dst, help, 0, 0, show != NULL, NULL, set, show \
    }
#define WIDTH(name, dst, help) NUM(name, "N", ATH_OPT_INT, dst, 1, AUXTRUNK_MAX_WIDTH, help)
#define U64_MAX_D 0x1p64 /* the whole uint64_t range */

/* ------------------------------------------------------------------------- */
/* train                                                                     */

/* The run's files, checked before anything is loaded or trained: no output
 * may be an input or another output (exit 2), each output must be creatable
 * (exit 4 for the checkpoint, 1 for the CSV and SVG), and an existing
 * checkpoint is replaced only by the run that resumes from it or with
 * --overwrite (exit 4). Returns an ATH_EXIT_* code. */
static int check_train_paths(const ath_train_opts_t *o, const ath_swap_opts_t *sw,
                             const swap_at_list_t *at, int overwrite)
{
    char plugin[ATH_PATH_MAX], at_file[ATH_SWAP_MAX_AT][ATH_PATH_MAX];
    ath_plugin_file(o->plugin, plugin, sizeof plugin);
    ath_io_path_t p[6 + ATH_SWAP_MAX_AT] = {
        {.path = plugin, .what = "the plugin file"},
        {.path = o->resume, .what = "--resume"},
        {.path = sw->sha256_file, .what = "--plugin-sha256"},
        {.path = o->checkpoint, .what = "--checkpoint", .output = 1, .may_equal = "--resume"},
        {.path = o->csv, .what = "--csv", .output = 1},
        {.path = o->svg, .what = "--svg", .output = 1},
    };
    int n = 6;
    for (int i = 0; i < at->n; i++, n++) {
        ath_plugin_file(at->at[i].path, at_file[i], sizeof at_file[i]);
        p[n] = (ath_io_path_t){.path = at_file[i], .what = "--swap-at"};
    }
    int which = 0;
    ath_err_t err;
    switch (ath_io_check(p, n, &which, &err)) {
    case ATH_IO_OK:
        break;
    case ATH_IO_COLLISION:
        fprintf(stderr, "auxtrunk-host train: %s\n", err.msg);
        return ATH_EXIT_USAGE;
    case ATH_IO_UNWRITABLE:
        fprintf(stderr, "auxtrunk-host train: %s\n", err.msg);
        return p[which].path == o->checkpoint ? ATH_EXIT_CHECKPOINT : ATH_EXIT_FAILURE;
    }
    struct stat ck, rs;
    int resumes_it = o->resume && stat(o->resume, &rs) == 0 && o->checkpoint &&
                     stat(o->checkpoint, &ck) == 0 && rs.st_dev == ck.st_dev &&
                     rs.st_ino == ck.st_ino;
    if (o->checkpoint && !overwrite && !resumes_it && lstat(o->checkpoint, &ck) == 0) {
        ath_ckpt_meta_t m;
        char held[1100];
        if (ath_ckpt_peek(o->checkpoint, &m, &err) == 0)
            snprintf(held, sizeof held, "a checkpoint at step %llu", (unsigned long long)m.step);
        else
            snprintf(held, sizeof held, "not a checkpoint this program reads");
        fprintf(stderr,
                "auxtrunk-host train: --checkpoint %s exists (%s) and this run does not resume "
                "from it; add --resume %s to continue that run, or --overwrite to replace it\n",
                o->checkpoint, held, o->checkpoint);
        return ATH_EXIT_CHECKPOINT;
    }
    return ATH_EXIT_OK;
}

static int cmd_train(int argc, char **argv, int first)
{
    ath_train_opts_t o = {
        .device = -1,
        .enc = ATH_TRAIN_ENC,
        .h1 = ATH_TRAIN_H1,
        .h2 = ATH_TRAIN_H2,
        .aux = ATH_TRAIN_AUX,
        .batch = ATH_TRAIN_BATCH,
        .steps = ATH_TRAIN_STEPS,
        .seed = ATH_TRAIN_SEED,
        .lr = ATH_TRAIN_LR,
        .call_timeout_s = ATH_TRAIN_CALL_TIMEOUT_S,
    };
    plugin_list_t plugins = {.n = 0};
    int batch = o.batch;
    ath_swap_opts_t sw;
    memset(&sw, 0, sizeof sw);
    sw.vet_timeout_s = ATH_VET_TIMEOUT_S;
    sw.rollback_steps = ATH_SWAP_ROLLBACK_STEPS;
    swap_at_list_t swap_at = {.n = 0};
    int overwrite = 0;
    const ath_opt_t opts[] = {
        CUSTOM("plugin-dir", "DIR", &plugins, set_plugin_path, NULL,
               "plugin directory (or a libauxtrunk.so file)"),
        CUSTOM("plugin", "NAME", &plugins, set_plugin_named, NULL,
               "plugin NAME in $AUXTRUNK_PLUGIN_PATH or the plugins root (cpu, cuda-v1, ...)"),
        NUM("steps", "N", ATH_OPT_U64, &o.steps, 0, U64_MAX_D,
            "train until step N (a resumed run continues to N)"),
        NUM("batch", "B", ATH_OPT_INT, &batch, 1, AUXTRUNK_MAX_BATCH, "samples per step"),
        NUM("seed", "S", ATH_OPT_U64, &o.seed, 0, U64_MAX_D,
            "seed of the task, the data and the initial parameters"),
        NUM("lr", "LR", ATH_OPT_FLOAT, &o.lr, FLT_MIN, 1e30, "Adam learning rate"),
        WIDTH("enc", &o.enc, "ENC, the encoder width"),
        WIDTH("h1", &o.h1, "H1"),
        WIDTH("h2", &o.h2, "H2"),
        WIDTH("aux", &o.aux, "AUX, the output width"),
        PLAIN("csv", "FILE", ATH_OPT_STR, &o.csv,
              "write the loss curve as CSV (step,loss; '-' = stdout)"),
        PLAIN("svg", "FILE", ATH_OPT_STR, &o.svg,
              "write the loss curve as an SVG chart (log-scale loss)"),
        PLAIN("checkpoint", "FILE", ATH_OPT_STR, &o.checkpoint,
              "write a checkpoint to FILE at the end (atomically)"),
        PLAIN("overwrite", NULL, ATH_OPT_FLAG, &overwrite,
              "replace an existing --checkpoint FILE this run does not --resume from"),
        NUM_T("checkpoint-every", "N", ATH_OPT_U64, &o.checkpoint_every, 1, U64_MAX_D, NULL,
              "also write it every N steps"),
        PLAIN("resume", "FILE", ATH_OPT_STR, &o.resume,
              "continue from checkpoint FILE (same topology and settings)"),
        NUM_T("log-every", "N", ATH_OPT_U64, &o.log_every, 1, U64_MAX_D, "about 10 per run",
              "progress line every N steps"),
        NUM_T("device", "N", ATH_OPT_INT, &o.device, 0, 1023, "the current one",
              "CUDA device for a CUDA plugin"),
        PLAIN("quiet", NULL, ATH_OPT_FLAG, &o.quiet, "no progress lines, only the summary"),
        PLAIN("no-graph", NULL, ATH_OPT_FLAG, &o.no_graph,
              "CUDA plugins: enqueue each step, do not replay it as a CUDA graph"),
        NUM_T("gpus", "N", ATH_OPT_INT, &o.gpus, 1, ATH_DIST_MAX_RANKS, NULL,
              "data parallel: one process per GPU, NCCL between them (--batch is the global "
              "batch; a hot swap is decided on rank 0 and applied on every rank)"),
        NUM("call-timeout", "SECONDS", ATH_OPT_DOUBLE, &o.call_timeout_s, 0, 1e9,
            "end the run (exit 5) if a plugin call or the device hangs this long (0 = never)"),
        PLAIN("watch-plugin-dir", NULL, ATH_OPT_FLAG, &sw.watch,
              "hot-swap: take a new libauxtrunk.so dropped into the plugin directory"),
        NUM_T("swap-poll-ms", "MS", ATH_OPT_INT, &sw.poll_ms, 1, 3600000, "inotify",
              "hot-swap: poll the directory every MS ms instead of inotify"),
        CUSTOM("swap-at", "STEP:PATH", &swap_at, set_swap_at, NULL,
               "hot-swap: swap to PATH after step STEP (repeatable, ascending)"),
        NUM("swap-timeout", "SECONDS", ATH_OPT_DOUBLE, &sw.vet_timeout_s, 0.001, 86400,
            "hot-swap: limit for vetting a candidate"),
        NUM("rollback-steps", "N", ATH_OPT_U64, &sw.rollback_steps, 1, U64_MAX_D,
            "hot-swap: steps a new version may still roll back"),
        PLAIN("plugin-sha256", "FILE", ATH_OPT_STR, &sw.sha256_file,
              "only load plugins whose SHA-256 is listed in FILE (sha256sum format)"),
    };
    const size_t n_opts = sizeof opts / sizeof opts[0];
    int p = parse(argc, argv, first, opts, n_opts, "train");
    if (p == 1) {
        print_help(train_intro, opts, n_opts);
        return ATH_EXIT_OK;
    }
    if (p != 0)
        return ATH_EXIT_USAGE;
    o.batch = batch;
    if (o.checkpoint_every && !o.checkpoint) {
        fprintf(stderr, "auxtrunk-host train: --checkpoint-every needs --checkpoint FILE\n");
        return ATH_EXIT_USAGE;
    }
    if (plugins.n > 1) {
        fprintf(stderr, "auxtrunk-host train: give one plugin (--plugin-dir or --plugin)\n");
        return ATH_EXIT_USAGE;
    }
    if (default_plugin(&plugins, "train") != 0)
        return ATH_EXIT_PLUGIN;
    o.plugin = plugins.items[0];
    int code = check_train_paths(&o, &sw, &swap_at, overwrite);
    if (code != ATH_EXIT_OK)
        return code;
    /* Any hot-swap option turns the swapper on (and SIGHUP into "re-read the
     * plugin directory"); the vetting child of a CUDA process is this program. */
    if (sw.watch || swap_at.n || sw.sha256_file || sw.poll_ms) {
        memcpy(sw.at, swap_at.at, sizeof sw.at);
        sw.n_at = swap_at.n;
        sw.vet_exe = "/proc/self/exe";
        o.swap = &sw;
    }
    ath_dist_env_t env;
    if (o.gpus && ath_dist_train_prepare(&o, &env, argc, argv, &code) != 0)
        return code;
    return ath_train_run(&o);
}

/* ------------------------------------------------------------------------- */
/* bench                                                                     */

static int cmd_bench(int argc, char **argv, int first)
{
    ath_bench_opts_t o;
    memset(&o, 0, sizeof o);
    o.device = -1;
    o.enc = ATH_TRAIN_ENC;
    o.h1 = ATH_TRAIN_H1;
    o.h2 = ATH_TRAIN_H2;
    o.aux = ATH_TRAIN_AUX;
    o.iters = 200;
    o.warmup = 20;
    o.min_iters = 3;
    o.budget_s = 5.0;
    o.seed = 1;
    uint64_t rotate = 128;
    plugin_list_t plugins = {.n = 0};
    batch_list_t batches = {{32, 256, 1024, 4096, 65536}, 5};
    const ath_opt_t opts[] = {
        CUSTOM("plugin-dir", "DIR", &plugins, set_plugin_path, NULL,
               "plugin directory or file; repeat to compare plugins"),
        CUSTOM("plugin", "NAME", &plugins, set_plugin_named, NULL,
               "plugin NAME in $AUXTRUNK_PLUGIN_PATH or the plugins root; repeatable"),
        CUSTOM("batches", "LIST", &batches, set_batches, show_batches,
               "batch sizes, comma-separated"),
        NUM("iters", "N", ATH_OPT_INT, &o.iters, 1, 100000000,
            "timed iterations per batch, at most"),
        NUM("warmup", "N", ATH_OPT_INT, &o.warmup, 0, 100000000,
            "untimed warm-up iterations, at most"),
        NUM("min-iters", "N", ATH_OPT_INT, &o.min_iters, 1, 100000000,
            "timed iterations, at least"),
        NUM("budget", "SECONDS", ATH_OPT_DOUBLE, &o.budget_s, 0, 86400,
            "stop a timing loop after this long once min-iters ran"),
        NUM("rotate-mib", "MIB", ATH_OPT_U64, &rotate, 0, 1 << 20,
            "rotate input sets through this much memory (0 = one set)"),
        WIDTH("enc", &o.enc, "ENC"),
        WIDTH("h1", &o.h1, "H1"),
        WIDTH("h2", &o.h2, "H2"),
        WIDTH("aux", &o.aux, "AUX"),
        NUM("seed", "S", ATH_OPT_U64, &o.seed, 0, U64_MAX_D,
            "seed of the random parameters and inputs"),
        PLAIN("csv", "FILE", ATH_OPT_STR, &o.csv, "also write the results as CSV ('-' = stdout)"),
        PLAIN("svg", "FILE", ATH_OPT_STR, &o.svg,
              "chart of step time against batch size (log-log SVG)"),
        PLAIN("cublas", NULL, ATH_OPT_FLAG, &o.cublas,
              "also time the same trunk written with cuBLAS (CUDA graph)"),
        NUM_T("device", "N", ATH_OPT_INT, &o.device, 0, 1023, "the current one",
              "CUDA device for CUDA plugins"),
        PLAIN("fast", NULL, ATH_OPT_FLAG, &o.fast,
              "request AUXTRUNK_CONFIG_FAST (plugins without it are skipped; TF32 for --cublas)"),
        PLAIN("quiet", NULL, ATH_OPT_FLAG, &o.quiet, "print only the table"),
    };
    const size_t n_opts = sizeof opts / sizeof opts[0];
    int p = parse(argc, argv, first, opts, n_opts, "bench");
    if (p == 1) {
        print_help(bench_intro, opts, n_opts);
        return ATH_EXIT_OK;
    }
    if (p != 0)
        return ATH_EXIT_USAGE;
    if (o.min_iters > o.iters) {
        fprintf(stderr, "auxtrunk-host bench: --min-iters %d is above --iters %d\n", o.min_iters,
                o.iters);
        return ATH_EXIT_USAGE;
    }
    if (default_plugin(&plugins, "bench") != 0)
        return ATH_EXIT_PLUGIN;
    o.rotate_mib = (size_t)rotate;
    o.n_plugins = plugins.n;
    for (int i = 0; i < plugins.n; i++)
        o.plugins[i] = plugins.items[i];
    o.n_batches = batches.n;
    memcpy(o.batches, batches.v, sizeof batches.v);
    return ath_bench_run(&o);
}

/* ------------------------------------------------------------------------- */
/* main                                                                      */

static void usage(void)
{
    printf("Usage: auxtrunk-host [train] [options]    train the trunk on the synthetic task\n"
           "       auxtrunk-host bench [options]      time forward/backward of plugins\n"
           "       auxtrunk-host <command> --help     options of a command\n"
           "       auxtrunk-host --version\n\n"
           "auxtrunk-host is the stand-in trainer of auxtrunk: it loads a libauxtrunk.so\n"
           "plugin (ABI %u.%u), owns the parameters, gradients and Adam state, and calls\n"
           "the plugin for the trunk's forward and backward.\n\n%s\n%s",
           (unsigned)AUXTRUNK_ABI_MAJOR, (unsigned)AUXTRUNK_ABI_MINOR, plugins_help,
           exit_codes_help);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                      strcmp(argv[1], "help") == 0)) {
        usage();
        return ATH_EXIT_OK;
    }
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        printf("auxtrunk-host %s (ABI %u.%u, %s)\n", AUXTRUNK_HOST_VERSION,
               (unsigned)AUXTRUNK_ABI_MAJOR, (unsigned)AUXTRUNK_ABI_MINOR,
#if defined(AUXTRUNK_HOST_HAVE_CUDA)
               "with CUDA"
#else
               "without CUDA"
#endif
        );
        return ATH_EXIT_OK;
    }
    if (argc >= 2 && strcmp(argv[1], ATH_VET_COMMAND) == 0) /* internal: vet.h */
        return ath_vet_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "bench") == 0)
        return cmd_bench(argc, argv, 2);
    if (argc >= 2 && strcmp(argv[1], "train") == 0)
        return cmd_train(argc, argv, 2);
    if (argc >= 2 && strncmp(argv[1], "--", 2) != 0) {
        fprintf(stderr, "auxtrunk-host: unknown command '%s' (train, bench; see --help)\n",
                argv[1]);
        return ATH_EXIT_USAGE;
    }
    return cmd_train(argc, argv, 1);
}
