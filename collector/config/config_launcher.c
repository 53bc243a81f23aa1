/*
 * config_launcher.c - DESIGN: what the launcher tells us.  Ranks and sizes come
 * from the first well-formed variable of README's list (torchrun, MPI
 * implementations, SLURM); launcher variables are not ours to validate, so
 * a malformed one is skipped, not reported.  The run name, when
 * TRAINPROF_RUN_NAME is unset, is the launcher's run id or job id, else the
 * program's name with its start time, so that the ranks of one job agree
 * on it without talking to each other.  Whether a rank or world-size
 * variable was there at all is kept too (launched): the trace claims a
 * distributed job only on a launcher's or a process group's word.  Every name that ends up in a path
 * is sanitised to one path component.
 */
#include "config_impl.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* The first well-formed value of "srcs", else "def"; *found is set when
 * one was (NULL: not wanted). */
static int first_int(const char *(*get)(const char *), const char *const *srcs,
                     long long lo, int def, int *found)
{
    for (; *srcs; srcs++) {
        const char *v = get(*srcs);
        long long n;
        if (v && tp_opt_to_ll(v, &n) == 0 && n >= lo && n <= INT_MAX) {
            if (found)
                *found = 1;
            return (int)n;
        }
    }
    return def;
}

void tp_launcher_read(struct tp_config *c, const char *(*get)(const char *))
{
    static const char *const rank[] = { "RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK",
                                        "SLURM_PROCID", NULL };
    static const char *const local_rank[] = { "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                              "MPI_LOCALRANKID", "SLURM_LOCALID", NULL };
    static const char *const world[] = { "WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE",
                                         "SLURM_NTASKS", NULL };
    static const char *const local_world[] = { "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                               "MPI_LOCALNRANKS", NULL };
    static const char *const node[] = { "NODE_RANK", "GROUP_RANK", "SLURM_NODEID", NULL };
    /* launched: the process is one of a job's ranks by its launcher's word,
     * what the trace's distributedInfo needs (a program run by hand gets
     * rank 0 of 1 too, but no distributedInfo, as torch writes none) */
    c->launched = 0;
    c->rank_given = 0;
    c->rank = first_int(get, rank, 0, 0, &c->rank_given);
    c->launched = c->rank_given;
    c->local_rank = first_int(get, local_rank, 0, 0, NULL);
    c->world_size = first_int(get, world, 1, 1, &c->launched);
    c->local_world_size = first_int(get, local_world, 1, 1, NULL);
    c->node_rank = first_int(get, node, 0, 0, NULL);

    if (gethostname(c->hostname, sizeof c->hostname - 1) != 0)
        snprintf(c->hostname, sizeof c->hostname, "localhost");
    c->hostname[sizeof c->hostname - 1] = '\0';
    tp_config_sanitize(c->hostname);

    const char *nvtx = get("NVTX_INJECTION64_PATH");
    snprintf(c->nvtx_injection_path, sizeof c->nvtx_injection_path, "%s", nvtx ? nvtx : "");
    const char *itt = get("INTEL_LIBITTNOTIFY64");
    snprintf(c->itt_collector_path, sizeof c->itt_collector_path, "%s", itt ? itt : "");

    snprintf(c->program, sizeof c->program, "%s",
             program_invocation_short_name && *program_invocation_short_name
                 ? program_invocation_short_name : "program");
    tp_config_sanitize(c->program);
}

/* Start time (Unix seconds) of process "pid" from /proc; -1 if unknown. */
static long long proc_start_time(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long long ticks = 0;
    /* Fields after comm start at 3 (state); starttime is field 22. */
    int field_no = 2;
    for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " ")) {
        if (++field_no == 22) {
            ticks = strtoull(tok, NULL, 10);
            break;
        }
    }
    if (field_no != 22)
        return -1;
    f = fopen("/proc/stat", "re");
    if (!f)
        return -1;
    long long btime = -1;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %lld", &btime) == 1)
            break;
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (btime < 0 || hz <= 0)
        return -1;
    return btime + (long long)(ticks / (unsigned long long)hz);
}

void tp_launcher_run_name(struct tp_config *c, const char *(*get)(const char *))
{
    const char *v = get("TORCHELASTIC_RUN_ID");
    if (!v || !*v || strcmp(v, "none") == 0)
        v = get("SLURM_JOB_ID");
    if (v && *v) {
        snprintf(c->run_name, sizeof c->run_name, "%s", v);
    } else {
        long long t = proc_start_time((int)getppid());
        if (t < 0)
            t = proc_start_time((int)getpid());
        if (t < 0)
            t = (long long)time(NULL);
        time_t tt = (time_t)t;
        struct tm tm;
        char when[32] = "00000000-000000";
        if (gmtime_r(&tt, &tm))
            strftime(when, sizeof when, "%Y%m%d-%H%M%S", &tm);
        snprintf(c->run_name, sizeof c->run_name, "%.200s-%s", c->program, when);
    }
    tp_config_sanitize(c->run_name);
}
