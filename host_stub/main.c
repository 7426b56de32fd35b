/*
 * main.c — auxtrunk-host, the stand-in trainer: command line, subcommands
 * (train, the default, and bench), --help generated from the option tables
 * so help and parsing cannot drift apart.
 *
 * The program knows only abi/: plugins are found and loaded at run time.
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "loader.h"
#include "swap.h"
#include "train.h"
#include "util.h"

#ifndef AUXTRUNK_HOST_VERSION
#define AUXTRUNK_HOST_VERSION "1.0.0"
#endif

/* ------------------------------------------------------------------------- */
/* Option tables                                                             */

typedef enum kind { K_FLAG, K_INT, K_U64, K_FLOAT, K_DOUBLE, K_STR, K_PLUGIN, K_NAMED, K_LIST } kind_t;

typedef struct opt {
    const char *name; /* without the leading "--" */
    const char *arg;  /* metavariable, NULL for a flag */
    kind_t kind;
    void *dst;
    const char *help;
} opt_t;

/* Plugin arguments collect here for both subcommands: --plugin-dir DIR and
 * --plugin NAME (resolved under the plugins root) in command-line order. */
typedef struct plugin_list {
    const char *items[ATH_BENCH_MAX_PLUGINS];
    char named[ATH_BENCH_MAX_PLUGINS][ATH_PATH_MAX];
    int n;
} plugin_list_t;

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
    "--plugin, $AUXTRUNK_PLUGIN_DIR is used if set, else the CPU plugin next to this\n"
    "program: <build>/plugins/cpu in a build tree (this program is\n"
    "<build>/host_stub/auxtrunk-host), <prefix>/lib/auxtrunk/plugins/cpu when\n"
    "installed. --plugin NAME picks <plugins root>/NAME (cpu, cuda-v1, ...).\n";

/* A command's --help: its usage and description, the options, then the
 * plugin lookup and the exit codes every command shares. */
static void print_help(const char *intro, const opt_t *opts, size_t n)
{
    printf("%sOptions:\n", intro);
    for (size_t i = 0; i < n; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", opts[i].name, opts[i].arg ? " " : "",
                 opts[i].arg ? opts[i].arg : "");
        printf("  %-24s %s\n", left, opts[i].help);
    }
    printf("  %-24s %s\n\n%s\n%s", "--help", "this text", plugins_help, exit_codes_help);
}

/* ------------------------------------------------------------------------- */
/* Parsing                                                                   */

static int parse_u64(const char *s, uint64_t *v)
{
    if (!s[0] || s[0] == '-')
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *v = (uint64_t)x;
    return 0;
}

static int parse_int(const char *s, int *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 0);
    if (errno || *end || !s[0] || x < INT_MIN || x > INT_MAX)
        return -1;
    *v = (int)x;
    return 0;
}

static int parse_double(const char *s, double *v)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || *end || !s[0])
        return -1;
    *v = x;
    return 0;
}

/* "32,256,1024" into a batch list. */
typedef struct batch_list {
    int32_t v[ATH_BENCH_MAX_BATCHES];
    int n;
} batch_list_t;

static int parse_list(const char *s, batch_list_t *l)
{
    l->n = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int x;
        if (l->n == ATH_BENCH_MAX_BATCHES || parse_int(tok, &x) != 0 || x < 1)
            return -1;
        l->v[l->n++] = x;
    }
    return l->n ? 0 : -1;
}

static int add_plugin(plugin_list_t *pl, const char *value, int named, const char *cmd)
{
    if (pl->n == ATH_BENCH_MAX_PLUGINS) {
        fprintf(stderr, "auxtrunk-host %s: at most %d plugins\n", cmd, ATH_BENCH_MAX_PLUGINS);
        return -1;
    }
    if (named) {
        char root[ATH_PATH_MAX];
        ath_err_t err;
        if (ath_plugins_root(root, sizeof root, &err) != 0) {
            fprintf(stderr, "auxtrunk-host %s: --plugin %s: %s\n", cmd, value, err.msg);
            return -1;
        }
        int len = snprintf(pl->named[pl->n], sizeof pl->named[pl->n], "%s/%s", root, value);
        if (len < 0 || (size_t)len >= sizeof pl->named[pl->n]) {
            fprintf(stderr, "auxtrunk-host %s: --plugin %s: path too long\n", cmd, value);
            return -1;
        }
        pl->items[pl->n] = pl->named[pl->n];
    } else {
        pl->items[pl->n] = value;
    }
    pl->n++;
    return 0;
}

/* Parses argv[first..] against opts. Returns 0, 1 for --help, -1 on error. */
static int parse(int argc, char **argv, int first, const opt_t *opts, size_t n_opts,
                 const char *cmd)
{
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return 1;
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "auxtrunk-host %s: unexpected argument '%s' (see --help)\n", cmd, a);
            return -1;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const opt_t *o = NULL;
        for (size_t k = 0; k < n_opts; k++)
            if (strlen(opts[k].name) == len && strncmp(opts[k].name, name, len) == 0)
                o = &opts[k];
        if (!o) {
            fprintf(stderr, "auxtrunk-host %s: unknown option '%s' (see --help)\n", cmd, a);
            return -1;
        }
        if (o->kind == K_FLAG) {
            if (eq) {
                fprintf(stderr, "auxtrunk-host %s: --%s takes no value\n", cmd, o->name);
                return -1;
            }
            *(int *)o->dst = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) {
            fprintf(stderr, "auxtrunk-host %s: --%s needs a value (%s)\n", cmd, o->name, o->arg);
            return -1;
        }
        int bad = 0;
        switch (o->kind) {
        case K_INT: bad = parse_int(v, (int *)o->dst); break;
        case K_U64: bad = parse_u64(v, (uint64_t *)o->dst); break;
        case K_FLOAT: {
            double d;
            bad = parse_double(v, &d) || !(d > 0) || d > 1e30;
            if (!bad)
                *(float *)o->dst = (float)d;
            break;
        }
        case K_DOUBLE: bad = parse_double(v, (double *)o->dst); break;
        case K_STR: *(const char **)o->dst = v; break;
        case K_PLUGIN:
            if (add_plugin(o->dst, v, 0, cmd) != 0)
                return -1;
            break;
        case K_NAMED:
            if (add_plugin(o->dst, v, 1, cmd) != 0)
                return -1;
            break;
        case K_LIST: bad = parse_list(v, o->dst); break;
        case K_FLAG: break;
        }
        if (bad) {
            fprintf(stderr, "auxtrunk-host %s: bad value '%s' for --%s (%s)\n", cmd, v, o->name,
                    o->arg);
            return -1;
        }
    }
    return 0;
}

/* --enc, --h1, --h2, --aux each in [1, AUXTRUNK_MAX_WIDTH]; the first one
 * outside is reported. */
static int check_widths(const char *cmd, int enc, int h1, int h2, int aux)
{
    const char *names[4] = {"enc", "h1", "h2", "aux"};
    const int v[4] = {enc, h1, h2, aux};
    for (int i = 0; i < 4; i++)
        if (v[i] < 1 || v[i] > AUXTRUNK_MAX_WIDTH) {
            fprintf(stderr, "auxtrunk-host %s: --%s %d is outside [1, %d]\n", cmd, names[i],
                    v[i], AUXTRUNK_MAX_WIDTH);
            return -1;
        }
    return 0;
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

/* ------------------------------------------------------------------------- */
/* train                                                                     */

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
    plugin_list_t swap_at = {.n = 0};
    opt_t opts[] = {
        {"plugin-dir", "DIR", K_PLUGIN, &plugins, "plugin directory (or a libauxtrunk.so file)"},
        {"plugin", "NAME", K_NAMED, &plugins, "plugin NAME under the plugins root (cpu, cuda-v1, ...)"},
        {"steps", "N", K_U64, &o.steps, "train until step N (default 2000; a resumed run continues to N)"},
        {"batch", "B", K_INT, &batch, "samples per step (default 64)"},
        {"seed", "S", K_U64, &o.seed, "seed of the task, the data and the initial parameters (default 1)"},
        {"lr", "LR", K_FLOAT, &o.lr, "Adam learning rate (default 1e-3)"},
        {"enc", "N", K_INT, &o.enc, "ENC, the encoder width (default 256)"},
        {"h1", "N", K_INT, &o.h1, "H1 (default 256)"},
        {"h2", "N", K_INT, &o.h2, "H2 (default 256)"},
        {"aux", "N", K_INT, &o.aux, "AUX, the output width (default 128)"},
        {"csv", "FILE", K_STR, &o.csv, "write the loss curve as CSV (step,loss; '-' = stdout)"},
        {"svg", "FILE", K_STR, &o.svg, "write the loss curve as an SVG chart (log-scale loss)"},
        {"checkpoint", "FILE", K_STR, &o.checkpoint, "write a checkpoint to FILE at the end (atomically)"},
        {"checkpoint-every", "N", K_U64, &o.checkpoint_every, "also write it every N steps"},
        {"resume", "FILE", K_STR, &o.resume, "continue from checkpoint FILE (same topology and settings)"},
        {"log-every", "N", K_U64, &o.log_every, "progress line every N steps (default: about 10 per run)"},
        {"device", "N", K_INT, &o.device, "CUDA device for a CUDA plugin (default: the current one)"},
        {"quiet", NULL, K_FLAG, &o.quiet, "no progress lines, only the summary"},
        {"no-graph", NULL, K_FLAG, &o.no_graph, "CUDA plugins: enqueue each step, do not replay it as a CUDA graph"},
        {"call-timeout", "SECONDS", K_DOUBLE, &o.call_timeout_s, "end the run (exit 5) if a plugin call or the device hangs this long (default 120; 0 = never)"},
        {"watch-plugin-dir", NULL, K_FLAG, &sw.watch, "hot-swap: take a new libauxtrunk.so dropped into the plugin directory"},
        {"swap-poll-ms", "MS", K_INT, &sw.poll_ms, "hot-swap: poll the directory every MS ms instead of inotify"},
        {"swap-at", "STEP:PATH", K_PLUGIN, &swap_at, "hot-swap: swap to PATH after step STEP (repeatable)"},
        {"swap-timeout", "SECONDS", K_DOUBLE, &sw.vet_timeout_s, "hot-swap: limit for vetting a candidate (default 30)"},
        {"rollback-steps", "N", K_U64, &sw.rollback_steps, "hot-swap: steps a new version may still roll back (default 50)"},
        {"plugin-sha256", "FILE", K_STR, &sw.sha256_file, "only load plugins whose SHA-256 is listed in FILE (sha256sum format)"},
    };
    const size_t n_opts = sizeof opts / sizeof opts[0];
    int p = parse(argc, argv, first, opts, n_opts, "train");
    if (p == 1) {
        print_help(train_intro, opts, n_opts);
        return ATH_EXIT_OK;
    }
    if (p != 0)
        return ATH_EXIT_USAGE;
    if (check_widths("train", o.enc, o.h1, o.h2, o.aux) != 0)
        return ATH_EXIT_USAGE;
    if (batch < 1 || batch > AUXTRUNK_MAX_BATCH) {
        fprintf(stderr, "auxtrunk-host train: --batch %d is outside [1, %d]\n", batch,
                AUXTRUNK_MAX_BATCH);
        return ATH_EXIT_USAGE;
    }
    o.batch = batch;
    if (!(o.call_timeout_s >= 0.0 && o.call_timeout_s <= 1e9)) {
        fprintf(stderr, "auxtrunk-host train: --call-timeout must be in [0, 1e9] seconds\n");
        return ATH_EXIT_USAGE;
    }
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
    /* Any hot-swap option turns the swapper on (and SIGHUP into "re-read the
     * plugin directory"); the vetting child of a CUDA process is this program. */
    if (sw.watch || swap_at.n || sw.sha256_file || sw.poll_ms) {
        for (int i = 0; i < swap_at.n; i++) {
            ath_err_t err;
            if (ath_swap_parse_at(swap_at.items[i], &sw.at[i], &err) != 0) {
                fprintf(stderr, "auxtrunk-host train: %s\n", err.msg);
                return ATH_EXIT_USAGE;
            }
            if (i > 0 && sw.at[i].step < sw.at[i - 1].step) {
                fprintf(stderr, "auxtrunk-host train: --swap-at entries must be in ascending "
                                "step order\n");
                return ATH_EXIT_USAGE;
            }
        }
        sw.n_at = swap_at.n;
        sw.vet_exe = "/proc/self/exe";
        o.swap = &sw;
    }
    return ath_train_run(&o);
}

/* ------------------------------------------------------------------------- */
/* bench                                                                     */

static int cmd_bench(int argc, char **argv, int first)
{
    ath_bench_opts_t o;
    memset(&o, 0, sizeof o);
    o.device = -1;
    o.enc = 256;
    o.h1 = 256;
    o.h2 = 256;
    o.aux = 128;
    o.iters = 200;
    o.warmup = 20;
    o.min_iters = 3;
    o.budget_s = 5.0;
    o.seed = 1;
    uint64_t rotate = 128;
    plugin_list_t plugins = {.n = 0};
    batch_list_t batches = {{32, 256, 1024, 4096, 65536}, 5};
    opt_t opts[] = {
        {"plugin-dir", "DIR", K_PLUGIN, &plugins, "plugin directory or file; repeat to compare plugins"},
        {"plugin", "NAME", K_NAMED, &plugins, "plugin NAME under the plugins root; repeatable"},
        {"batches", "LIST", K_LIST, &batches, "batch sizes, comma-separated (default 32,256,1024,4096,65536)"},
        {"iters", "N", K_INT, &o.iters, "timed iterations per batch, at most (default 200)"},
        {"warmup", "N", K_INT, &o.warmup, "untimed warm-up iterations, at most (default 20)"},
        {"min-iters", "N", K_INT, &o.min_iters, "timed iterations, at least (default 3)"},
        {"budget", "SECONDS", K_DOUBLE, &o.budget_s, "stop a timing loop after this long once min-iters ran (default 5)"},
        {"rotate-mib", "MIB", K_U64, &rotate, "rotate input sets through this much memory (default 128; 0 = one set)"},
        {"enc", "N", K_INT, &o.enc, "ENC (default 256)"},
        {"h1", "N", K_INT, &o.h1, "H1 (default 256)"},
        {"h2", "N", K_INT, &o.h2, "H2 (default 256)"},
        {"aux", "N", K_INT, &o.aux, "AUX (default 128)"},
        {"seed", "S", K_U64, &o.seed, "seed of the random parameters and inputs (default 1)"},
        {"csv", "FILE", K_STR, &o.csv, "also write the results as CSV ('-' = stdout)"},
        {"svg", "FILE", K_STR, &o.svg, "chart of step time against batch size (log-log SVG)"},
        {"cublas", NULL, K_FLAG, &o.cublas, "also time the same trunk written with cuBLAS (CUDA graph)"},
        {"device", "N", K_INT, &o.device, "CUDA device for CUDA plugins (default: the current one)"},
        {"fast", NULL, K_FLAG, &o.fast, "request AUXTRUNK_CONFIG_FAST (plugins without it are skipped; TF32 for --cublas)"},
        {"quiet", NULL, K_FLAG, &o.quiet, "print only the table"},
    };
    const size_t n_opts = sizeof opts / sizeof opts[0];
    int p = parse(argc, argv, first, opts, n_opts, "bench");
    if (p == 1) {
        print_help(bench_intro, opts, n_opts);
        return ATH_EXIT_OK;
    }
    if (p != 0)
        return ATH_EXIT_USAGE;
    if (check_widths("bench", o.enc, o.h1, o.h2, o.aux) != 0)
        return ATH_EXIT_USAGE;
    if (o.iters < 1 || o.warmup < 0 || o.min_iters < 1 || o.min_iters > o.iters ||
        !(o.budget_s >= 0)) {
        fprintf(stderr, "auxtrunk-host bench: need --iters >= --min-iters >= 1, --warmup >= 0, "
                        "--budget >= 0\n");
        return ATH_EXIT_USAGE;
    }
    for (int i = 0; i < batches.n; i++)
        if (batches.v[i] > AUXTRUNK_MAX_BATCH) {
            fprintf(stderr, "auxtrunk-host bench: batch %d is above %d\n", batches.v[i],
                    AUXTRUNK_MAX_BATCH);
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
    if (argc >= 2 && strcmp(argv[1], ATH_SWAP_VET_COMMAND) == 0) /* internal: swap.h */
        return ath_swap_vet_main(argc, argv);
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
