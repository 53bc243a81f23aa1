/*
 * format.c - the format strings of file names and commands (README "Configuration").
 *
 * DESIGN
 * One scanner serves both checking (configuration time, no values) and
 * expanding (save time).  The grammar is Python str.format's: "{name}"
 * substitutes a variable, "{{" and "}}" are literal braces, a lone "}" or
 * an unterminated "{" is an error, as Composer's folder.format(...) would
 * raise.  Of format specs only the integer padding of Python's mini-language
 * is taken, "{batch:08d}" (also "{batch:08}", "{rank:3d}"): a width of 1 to
 * 32, '0' to pad with zeros, else spaces, as Python pads; the default file
 * name pads {batch} so that the windows of a run sort by name as they
 * happened (TensorBoard's plugin and `ls` order spans by name as text).
 * Any other spec, or one on a string variable, is a configuration error
 * rather than a name Python would write differently.  Variables are a fixed list so that a typo
 * ("{runname}") is a configuration error at start-up rather than a
 * surprise at the first save.  {path} exists only for TRAINPROF_EXEC.
 * Output never overflows: a result that does not fit is an error, never a
 * silently truncated path.
 *
 * For TRAINPROF_EXEC (tp_format_expand_sh) every value must reach /bin/sh
 * as data, never as code, whatever quotes the user put around the
 * variable: the scanner follows the shell's quoting through the literal
 * text (outside quotes, '...', "...", backslash escapes, # comments,
 * $(...) and `...` with their own quoting inside, nested) and writes each
 * value so that it reads back as exactly its bytes in that place:
 * outside quotes as 'value'; inside '...' as the value with each ' written
 * '\''; inside "..." as "'value'" (the double quotes closed around a
 * single-quoted value, then reopened).  A value made only of characters no
 * shell treats specially (letters, digits, _ . / , : + @ % -) is written as
 * it is, so the common path reads the same in every context, here-documents
 * included.  Not followed: here-document bodies, $'...', and a case
 * pattern's unmatched ')' inside $(...); a value there is quoted as if
 * outside quotes.  Values quoted here are data for this shell; a command
 * that evaluates them again (eval, sh -c '... {path}') must quote again.
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

/* The shell's quoting at a point of the command (TRAINPROF_EXEC). */
enum sh_quote { SH_NONE, SH_SINGLE, SH_DOUBLE };
enum sh_frame_kind { SH_TOP, SH_DOLLAR_PAREN, SH_BACKTICK };
#define SH_DEPTH 16

struct sh_frame {
    enum sh_frame_kind kind;
    enum sh_quote quote;
    int parens;                  /* open '(' of this frame, outside quotes */
    int escaped;                 /* the last byte was an unquoted or "-quoted '\' */
    int comment;                 /* in a # comment, until the newline */
    int word_start;              /* the next byte starts a word (a # there is a comment) */
    int dollar;                  /* the last byte was an unquoted or "-quoted '$' */
};

struct sink {
    char *out;
    size_t size, len;
    int overflow;
    int sh;                      /* quote values for /bin/sh */
    int depth;                   /* frames in use, frame[depth - 1] the current one */
    int too_deep;
    struct sh_frame frame[SH_DEPTH];
};

static void sh_push(struct sink *s, enum sh_frame_kind kind)
{
    if (s->depth >= SH_DEPTH) {
        s->too_deep = 1;
        return;
    }
    s->frame[s->depth++] = (struct sh_frame){ .kind = kind, .quote = SH_NONE, .word_start = 1 };
}

/* Follows the quoting through one byte of the command's literal text. */
static void sh_track(struct sink *s, char c)
{
    struct sh_frame *f = &s->frame[s->depth - 1];
    int dollar = f->dollar;
    f->dollar = 0;
    if (f->escaped) {
        f->escaped = 0;
        f->word_start = 0;
        return;
    }
    if (f->quote == SH_SINGLE) {
        if (c == '\'')
            f->quote = SH_NONE;
        return;
    }
    if (f->quote == SH_NONE && f->comment) {
        if (c == '\n') {
            f->comment = 0;
            f->word_start = 1;
        }
        return;
    }
    int word_start = f->word_start;
    f->word_start = 0;
    switch (c) {
    case '\\': f->escaped = 1; return;
    case '$': f->dollar = 1; return;
    case '"': f->quote = f->quote == SH_DOUBLE ? SH_NONE : SH_DOUBLE; return;
    case '`':
        if (f->kind == SH_BACKTICK && f->quote == SH_NONE && s->depth > 1)
            s->depth--;
        else
            sh_push(s, SH_BACKTICK);
        return;
    case '(':
        if (dollar)
            sh_push(s, SH_DOLLAR_PAREN);
        else if (f->quote == SH_NONE)
            f->parens++;
        f->word_start = 1;
        return;
    default: break;
    }
    if (f->quote == SH_DOUBLE)
        return;
    switch (c) {
    case '\'': f->quote = SH_SINGLE; return;
    case ')':
        if (f->parens > 0)
            f->parens--;
        else if (f->kind == SH_DOLLAR_PAREN && s->depth > 1)
            s->depth--;
        f->word_start = 1;
        return;
    case '#':
        if (word_start)
            f->comment = 1;
        return;
    case ' ': case '\t': case '\n': case ';': case '&': case '|': case '<': case '>':
        f->word_start = 1;
        return;
    default: return;
    }
}

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

/* Literal text of the format: copied, and followed for its quoting. */
static void put_text(struct sink *s, const char *p, size_t n)
{
    if (s->sh)
        for (size_t i = 0; i < n; i++)
            sh_track(s, p[i]);
    put(s, p, n);
}

/* A value, so that the shell reads back exactly its bytes where it stands. */
static void put_value(struct sink *s, const char *str)
{
    size_t n = strlen(str);
    if (!s->sh || (n && strspn(str, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "0123456789_./,:+@%-") == n)) {
        put(s, str, n);
        return;
    }
    enum sh_quote q = s->frame[s->depth - 1].quote;
    if (q == SH_DOUBLE)
        put(s, "\"", 1);
    if (q != SH_SINGLE)
        put(s, "'", 1);
    for (const char *p = str; *p;) {
        size_t run = strcspn(p, "'");
        put(s, p, run);
        p += run;
        if (*p == '\'') {
            put(s, "'\\''", 4);
            p++;
        }
    }
    if (q != SH_SINGLE)
        put(s, "'", 1);
    if (q == SH_DOUBLE)
        put(s, "\"", 1);
}

/* An integer variable's format spec, "[0][width][d]": how it pads. */
struct fmt_spec {
    int zero;                    /* pad with '0', else ' ' */
    int width;                   /* 0: no padding */
};

#define FMT_MAX_WIDTH 32

static int is_int_var(enum fmt_var var)
{
    return var != FV_RUN_NAME && var != FV_HOSTNAME && var != FV_PATH;
}

/* Parses spec "p" (n bytes, after the ':') of variable "var". */
static int parse_spec(const char *p, size_t n, enum fmt_var var, struct fmt_spec *out,
                      char *err, size_t errsz)
{
    struct fmt_spec sp = { 0, 0 };
    size_t i = 0;
    if (!is_int_var(var)) {
        set_err(err, errsz, "{%s} takes no format spec (only integer variables take one, "
                "e.g. {batch:08d})", fmt_names[var]);
        return -1;
    }
    if (i < n && p[i] == '0') {
        sp.zero = 1;
        i++;
    }
    while (i < n && p[i] >= '0' && p[i] <= '9') {
        sp.width = sp.width * 10 + (p[i] - '0');
        if (sp.width > FMT_MAX_WIDTH)
            break;
        i++;
    }
    if (i < n && p[i] == 'd')
        i++;
    if (i != n || n == 0 || sp.width > FMT_MAX_WIDTH || (sp.zero && !sp.width)) {
        int shown = n > 32 ? 32 : (int)n;
        set_err(err, errsz, "format spec \"%.*s%s\" of {%s} not accepted: only [0]WIDTH[d] "
                "(WIDTH 1 to %d), e.g. {batch:08d}", shown, p, n > 32 ? "..." : "",
                fmt_names[var], FMT_MAX_WIDTH);
        return -1;
    }
    *out = sp;
    return 0;
}

/* "num" padded as "sp" says, into "buf" (size > FMT_MAX_WIDTH + 21). */
static const char *pad_num(char *buf, size_t n, const char *num, const struct fmt_spec *sp)
{
    size_t len = strlen(num);
    if (!sp || (size_t)sp->width <= len) {
        snprintf(buf, n, "%s", num);
        return buf;
    }
    size_t pad = (size_t)sp->width - len, at = 0;
    /* Python puts a zero pad after the sign: -0005 */
    if (sp->zero && num[0] == '-') {
        buf[at++] = '-';
        num++;
    }
    memset(buf + at, sp->zero ? '0' : ' ', pad);
    snprintf(buf + at + pad, n - at - pad, "%s", num);
    return buf;
}

static int put_var(struct sink *s, enum fmt_var var, const struct fmt_spec *sp,
                   const struct tp_format_vars *v, char *err, size_t errsz)
{
    char num[32], padded[FMT_MAX_WIDTH + 32];
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
        if (v->batch_text) {
            str = v->batch_text;
            break;
        }
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
    else if (str == num && sp)
        str = pad_num(padded, sizeof padded, num, sp);
    put_value(s, str);
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
            put_text(s, "{", 1);
            p += 2;
            continue;
        }
        if (*p == '}') {
            if (p[1] != '}') {
                set_err(err, errsz, "single '}' at offset %zu (write }} for a literal brace)",
                        (size_t)(p - fmt));
                return -1;
            }
            put_text(s, "}", 1);
            p += 2;
            continue;
        }
        if (*p != '{') {
            const char *q = p;
            while (*q && *q != '{' && *q != '}')
                q++;
            put_text(s, p, (size_t)(q - p));
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
        const char *colon = memchr(p + 1, ':', (size_t)(close - p - 1));
        size_t nlen = (size_t)((colon ? colon : close) - p - 1);
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
        struct fmt_spec spec, *sp = NULL;
        if (colon) {
            if (parse_spec(colon + 1, (size_t)(close - colon - 1), (enum fmt_var)var, &spec,
                           err, errsz) < 0)
                return -1;
            sp = &spec;
        }
        if (v && put_var(s, (enum fmt_var)var, sp, v, err, errsz) < 0)
            return -1;
        p = close + 1;
    }
    if (s->too_deep) {
        set_err(err, errsz, "$(...) and `...` nested more than %d deep", SH_DEPTH - 1);
        return -1;
    }
    if (s->overflow) {
        set_err(err, errsz, "expanded result longer than %zu bytes", s->size ? s->size - 1 : 0);
        return -1;
    }
    return 0;
}

static int expand(const char *fmt, const struct tp_format_vars *v, int sh,
                  char *out, size_t outsz, char *err, size_t errsz)
{
    if (!out || !outsz || !v) {
        set_err(err, errsz, "no output buffer");
        return -1;
    }
    out[0] = '\0';
    static struct sink zero;
    struct sink s = zero;
    s.out = out;
    s.size = outsz;
    s.sh = sh;
    sh_push(&s, SH_TOP);
    if (scan(fmt, v, v->path != NULL, &s, err, errsz) < 0) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}

int tp_format_expand(const char *fmt, const struct tp_format_vars *v,
                     char *out, size_t outsz, char *err, size_t errsz)
{
    return expand(fmt, v, 0, out, outsz, err, errsz);
}

int tp_format_expand_sh(const char *fmt, const struct tp_format_vars *v,
                        char *out, size_t outsz, char *err, size_t errsz)
{
    return expand(fmt, v, 1, out, outsz, err, errsz);
}

int tp_format_expand_at(const char *fmt, const struct tp_format_vars *v, const char *base,
                        char *out, size_t outsz, char *err, size_t errsz)
{
    if (tp_format_expand(fmt, v, out, outsz, err, errsz) != 0)
        return -1;
    if (out[0] == '/' || !base || base[0] != '/')
        return 0;
    /* "" and "." are the base itself; "./x" is "x" */
    const char *rel = out;
    while (rel[0] == '.' && rel[1] == '/')
        for (rel += 2; *rel == '/'; rel++)
            ;
    if (strcmp(rel, ".") == 0)
        rel = "";
    size_t nb = strlen(base), nr = strlen(rel);
    while (nb > 1 && base[nb - 1] == '/')
        nb--;
    int sep = nr && !(nb == 1 && base[0] == '/');
    if (nb + (size_t)sep + nr + 1 > outsz) {
        set_err(err, errsz, "the path, with the working directory at activation (%.*s), is "
                "longer than %zu bytes", (int)(nb > 120 ? 120 : nb), base, outsz - 1);
        out[0] = '\0';
        return -1;
    }
    memmove(out + nb + (size_t)sep, rel, nr + 1);
    memcpy(out, base, nb);
    if (sep)
        out[nb] = '/';
    return 0;
}

int tp_format_check(const char *fmt, char *err, size_t errsz)
{
    struct sink s = { .out = NULL };
    return scan(fmt, NULL, 0, &s, err, errsz);
}

int tp_format_check_exec(const char *fmt, char *err, size_t errsz)
{
    struct sink s = { .out = NULL };
    return scan(fmt, NULL, 1, &s, err, errsz);
}
