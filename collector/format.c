/*
 * format.c - SPEC 7 format strings.
 *
 * DESIGN
 * One scanner serves both checking (configuration time, no values) and
 * expanding (save time).  The grammar is Python str.format's without format
 * specs: "{name}" substitutes a variable, "{{" and "}}" are literal braces, a
 * lone "}" or an unterminated "{" is an error, as Composer's
 * folder.format(...) would raise.  Variables are a fixed list so that a typo
 * ("{runname}") is a configuration error at start-up rather than a
 * surprise at the first save.  {path} exists only for TRAINPROF_EXEC.
 * Output never overflows: a result that does not fit is an error, never a
 * silently truncated path.
 */
#include "format.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum fmt_var {
    FV_RUN_NAME, FV_RANK, FV_LOCAL_RANK, FV_WORLD_SIZE, FV_LOCAL_WORLD_SIZE,
    FV_NODE_RANK, FV_BATCH, FV_PID, FV_HOSTNAME, FV_PATH, FV_COUNT
};

static const char *const fmt_names[FV_COUNT] = {
    [FV_RUN_NAME] = "run_name", [FV_RANK] = "rank", [FV_LOCAL_RANK] = "local_rank",
    [FV_WORLD_SIZE] = "world_size", [FV_LOCAL_WORLD_SIZE] = "local_world_size",
    [FV_NODE_RANK] = "node_rank", [FV_BATCH] = "batch", [FV_PID] = "pid",
    [FV_HOSTNAME] = "hostname", [FV_PATH] = "path",
};

static void set_err(char *err, size_t errsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errsz, const char *fmt, ...)
{
    if (!err || !errsz)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsz, fmt, ap);
    va_end(ap);
}

static void accepted_list(char *buf, size_t n, int with_path)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < FV_COUNT; i++) {
        if (i == FV_PATH && !with_path)
            continue;
        int m = snprintf(buf + len, n - len, "%s{%s}", len ? ", " : "", fmt_names[i]);
        if (m < 0 || (size_t)m >= n - len)
            return;
        len += (size_t)m;
    }
}

struct sink {
    char *out;
    size_t size, len;
    int overflow;
};

static void put(struct sink *s, const char *p, size_t n)
{
    if (!s->out)
        return;
    if (s->len + n >= s->size) {
        s->overflow = 1;
        return;
    }
    memcpy(s->out + s->len, p, n);
    s->len += n;
    s->out[s->len] = '\0';
}

static int put_var(struct sink *s, enum fmt_var var, const struct tp_format_vars *v,
                   char *err, size_t errsz)
{
    char num[32];
    const char *str = NULL;
    switch (var) {
    case FV_RUN_NAME: str = v->run_name; break;
    case FV_HOSTNAME: str = v->hostname; break;
    case FV_PATH: str = v->path; break;
    case FV_RANK: snprintf(num, sizeof num, "%d", v->rank); str = num; break;
    case FV_LOCAL_RANK: snprintf(num, sizeof num, "%d", v->local_rank); str = num; break;
    case FV_WORLD_SIZE: snprintf(num, sizeof num, "%d", v->world_size); str = num; break;
    case FV_LOCAL_WORLD_SIZE:
        snprintf(num, sizeof num, "%d", v->local_world_size); str = num; break;
    case FV_NODE_RANK: snprintf(num, sizeof num, "%d", v->node_rank); str = num; break;
    case FV_PID: snprintf(num, sizeof num, "%d", v->pid); str = num; break;
    case FV_BATCH:
        if (v->batch < 0) {
            set_err(err, errsz, "{batch} is not known here");
            return -1;
        }
        snprintf(num, sizeof num, "%" PRId64, v->batch);
        str = num;
        break;
    case FV_COUNT: break;
    }
    if (!str)
        str = "";
    put(s, str, strlen(str));
    return 0;
}

/* v == NULL: check only.  with_path: {path} is a variable. */
static int scan(const char *fmt, const struct tp_format_vars *v, int with_path,
                struct sink *s, char *err, size_t errsz)
{
    if (!fmt) {
        set_err(err, errsz, "no format string");
        return -1;
    }
    const char *p = fmt;
    while (*p) {
        if (*p == '{' && p[1] == '{') {
            put(s, "{", 1);
            p += 2;
            continue;
        }
        if (*p == '}') {
            if (p[1] != '}') {
                set_err(err, errsz, "single '}' at offset %zu (write }} for a literal brace)",
                        (size_t)(p - fmt));
                return -1;
            }
            put(s, "}", 1);
            p += 2;
            continue;
        }
        if (*p != '{') {
            const char *q = p;
            while (*q && *q != '{' && *q != '}')
                q++;
            put(s, p, (size_t)(q - p));
            p = q;
            continue;
        }
        const char *close = strchr(p + 1, '}');
        const char *open2 = strchr(p + 1, '{');
        if (!close || (open2 && open2 < close)) {
            set_err(err, errsz, "unterminated '{' at offset %zu (write {{ for a literal brace)",
                    (size_t)(p - fmt));
            return -1;
        }
        size_t nlen = (size_t)(close - p - 1);
        int var = -1;
        for (int i = 0; i < FV_COUNT; i++) {
            if (i == FV_PATH && !with_path)
                continue;
            if (strlen(fmt_names[i]) == nlen && memcmp(fmt_names[i], p + 1, nlen) == 0) {
                var = i;
                break;
            }
        }
        if (var < 0) {
            char acc[256];
            accepted_list(acc, sizeof acc, with_path);
            int shown = nlen > 64 ? 64 : (int)nlen;
            set_err(err, errsz, "unknown variable {%.*s%s}; accepted: %s", shown, p + 1,
                    nlen > 64 ? "..." : "", acc);
            return -1;
        }
        if (v && put_var(s, (enum fmt_var)var, v, err, errsz) < 0)
            return -1;
        p = close + 1;
    }
    if (s->overflow) {
        set_err(err, errsz, "expanded result longer than %zu bytes", s->size ? s->size - 1 : 0);
        return -1;
    }
    return 0;
}

int tp_format_expand(const char *fmt, const struct tp_format_vars *v,
                     char *out, size_t outsz, char *err, size_t errsz)
{
    if (!out || !outsz || !v) {
        set_err(err, errsz, "no output buffer");
        return -1;
    }
    out[0] = '\0';
    struct sink s = { out, outsz, 0, 0 };
    if (scan(fmt, v, v->path != NULL, &s, err, errsz) < 0) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}

int tp_format_check(const char *fmt, char *err, size_t errsz)
{
    struct sink s = { NULL, 0, 0, 0 };
    return scan(fmt, NULL, 0, &s, err, errsz);
}

int tp_format_check_exec(const char *fmt, char *err, size_t errsz)
{
    struct sink s = { NULL, 0, 0, 0 };
    return scan(fmt, NULL, 1, &s, err, errsz);
}
