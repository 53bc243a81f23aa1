/*
 * jsonw.c - DESIGN: text is appended to one 64 KiB buffer; a full buffer
 * goes to deflate (gzip) or straight to write(2).  Everything on the per-event
 * path is hand-rolled (integers from a two-digit table, microseconds as
 * integer division of nanoseconds, string escaping that copies runs of
 * plain bytes with memcpy) because printf per field costs about 80 ns and
 * a trace must be written at >= 1 M events/s (README "Overhead").  Even so deflate
 * level 1 takes about 60% of the time of a gzip trace (perf, 1 M launch
 * events), so with gzip a helper thread ("tp-gzip", signals blocked, alive
 * only while one file is written) compresses and writes full buffers while
 * the caller formats the next ones: a ring of four 64 KiB buffers, the
 * caller waiting only when all four are queued.  gzip is one member
 * (deflateInit2 windowBits 15+16, ended by Z_FINISH) because catapult
 * (chrome://tracing, TensorBoard's trace view) reads only the first member.  Strings come
 * out valid UTF-8 with no byte for which iscntrl() is true, since Perfetto's
 * tokenizer rejects those and JSON.parse rejects raw controls.
 */
#include "jsonw.h"
#include "collector/common/log.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char tp_digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

#define PIPE_BUFS 4

/*
 * Buffers bufs[head..tail-1] (mod PIPE_BUFS) wait for or are under
 * compression; the caller fills bufs[tail]; the worker takes bufs[head].
 */
struct tp_jsonw_pipe {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_full, cv_free;
    char *bufs[PIPE_BUFS];
    size_t lens[PIPE_BUFS];
    unsigned head, tail;
    int done;
    int err;                    /* the sink's error, published under mu */
    struct tp_jsonw_sink *sink;
};

static void sink_fail(struct tp_jsonw_sink *k, int e)
{
    if (!k->err)
        k->err = e ? e : EIO;
}

static void sink_write(struct tp_jsonw_sink *k, const void *p, size_t n)
{
    const char *c = p;
    while (n && !k->err) {
        ssize_t r = write(k->fd, c, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            sink_fail(k, errno);
            return;
        }
        if (r == 0) {
            sink_fail(k, EIO);
            return;
        }
        c += r;
        n -= (size_t)r;
        k->bytes_out += (uint64_t)r;
    }
}

/* Text to the sink; flush is Z_NO_FLUSH or Z_FINISH (ends the member). */
static void sink_put(struct tp_jsonw_sink *k, const char *text, size_t n, int flush)
{
    if (k->err)
        return;
    if (!k->gzip) {
        sink_write(k, text, n);
        return;
    }
    k->zs.next_in = (unsigned char *)text;
    k->zs.avail_in = (unsigned)n;
    for (;;) {
        k->zs.next_out = k->zbuf;
        k->zs.avail_out = TP_JSONW_BUF;
        int rc = deflate(&k->zs, flush);
        if (rc == Z_STREAM_ERROR) {
            sink_fail(k, EIO);
            return;
        }
        size_t have = TP_JSONW_BUF - k->zs.avail_out;
        if (have)
            sink_write(k, k->zbuf, have);
        if (k->err)
            return;
        if (flush == Z_FINISH ? rc == Z_STREAM_END : k->zs.avail_out != 0)
            return;
    }
}

static void *pipe_main(void *arg)
{
    struct tp_jsonw_pipe *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->head == p->tail && !p->done)
            pthread_cond_wait(&p->cv_full, &p->mu);
        if (p->head == p->tail)
            break;
        unsigned i = p->head % PIPE_BUFS;
        pthread_mutex_unlock(&p->mu);
        sink_put(p->sink, p->bufs[i], p->lens[i], Z_NO_FLUSH);
        pthread_mutex_lock(&p->mu);
        p->err = p->sink->err;
        p->head++;
        pthread_cond_signal(&p->cv_free);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void pipe_free(struct tp_jsonw_pipe *p)
{
    for (int i = 0; i < PIPE_BUFS; i++)
        free(p->bufs[i]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_full);
    pthread_cond_destroy(&p->cv_free);
    free(p);
}

/* A compressor thread for w, or NULL (then compression stays inline). */
static struct tp_jsonw_pipe *pipe_start(struct tp_jsonw *w)
{
    struct tp_jsonw_pipe *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_full, NULL);
    pthread_cond_init(&p->cv_free, NULL);
    p->sink = &w->sink;
    p->bufs[0] = w->buf;
    for (int i = 1; i < PIPE_BUFS; i++) {
        p->bufs[i] = malloc(TP_JSONW_BUF);
        if (!p->bufs[i]) {
            p->bufs[0] = NULL;
            pipe_free(p);
            return NULL;
        }
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&p->thread, NULL, pipe_main, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        p->bufs[0] = NULL;
        pipe_free(p);
        return NULL;
    }
    pthread_setname_np(p->thread, "tp-gzip");
    return p;
}

/* Hands w->buf to the compressor thread and takes the next free buffer. */
static void pipe_push(struct tp_jsonw *w)
{
    struct tp_jsonw_pipe *p = w->pipe;
    pthread_mutex_lock(&p->mu);
    p->lens[p->tail % PIPE_BUFS] = w->len;
    p->tail++;
    pthread_cond_signal(&p->cv_full);
    while (p->tail - p->head >= PIPE_BUFS)
        pthread_cond_wait(&p->cv_free, &p->mu);
    if (p->err && !w->err)
        w->err = p->err;
    w->buf = p->bufs[p->tail % PIPE_BUFS];
    pthread_mutex_unlock(&p->mu);
    w->len = 0;
}

/* Ends the thread; every buffer has been compressed when this returns. */
static void pipe_stop(struct tp_jsonw *w)
{
    struct tp_jsonw_pipe *p = w->pipe;
    pthread_mutex_lock(&p->mu);
    p->done = 1;
    pthread_cond_signal(&p->cv_full);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    w->buf = NULL;
    pipe_free(p);
    w->pipe = NULL;
}

static void jw_fail(struct tp_jsonw *w, int e)
{
    if (!w->err)
        w->err = e ? e : EIO;
}

static void jw_flush(struct tp_jsonw *w)
{
    if (w->err || !w->len) {
        w->len = 0;
        return;
    }
    if (w->pipe) {
        pipe_push(w);
        return;
    }
    sink_put(&w->sink, w->buf, w->len, Z_NO_FLUSH);
    if (w->sink.err)
        jw_fail(w, w->sink.err);
    w->len = 0;
}

/* Room for "n" more bytes (n <= TP_JSONW_BUF); NULL after an error. */
static inline char *jw_room(struct tp_jsonw *w, size_t n)
{
    if (w->len + n > TP_JSONW_BUF)
        jw_flush(w);
    if (w->err || !w->buf)
        return NULL;
    return w->buf + w->len;
}

static inline void jw_commit(struct tp_jsonw *w, size_t n)
{
    w->len += n;
    w->bytes_in += n;
}

int tp_jsonw_init(struct tp_jsonw *w, int fd, int gzip, int level)
{
    memset(w, 0, sizeof *w);
    w->sink.fd = fd;
    w->buf = malloc(TP_JSONW_BUF);
    if (!w->buf) {
        jw_fail(w, ENOMEM);
        errno = w->err;
        return -1;
    }
    if (gzip) {
        w->sink.zbuf = malloc(TP_JSONW_BUF);
        if (level < -1 || level > 9)
            level = TP_JSONW_GZIP_LEVEL;
        if (!w->sink.zbuf || deflateInit2(&w->sink.zs, level, Z_DEFLATED, 15 + 16, 8,
                                          Z_DEFAULT_STRATEGY) != Z_OK) {
            free(w->sink.zbuf);
            w->sink.zbuf = NULL;
            jw_fail(w, ENOMEM);
            errno = w->err;
            return -1;
        }
        w->sink.gzip = 1;
        w->pipe = pipe_start(w);
    }
    return 0;
}

int tp_jsonw_finish(struct tp_jsonw *w)
{
    if (w->pipe) {
        if (!w->err && w->len)
            pipe_push(w);
        pipe_stop(w);
    }
    if (w->buf && !w->err && w->len)
        sink_put(&w->sink, w->buf, w->len, Z_NO_FLUSH);
    if (w->sink.gzip) {
        if (!w->err)
            sink_put(&w->sink, NULL, 0, Z_FINISH);
        deflateEnd(&w->sink.zs);
        w->sink.gzip = 0;
    }
    if (w->sink.err)
        jw_fail(w, w->sink.err);
    free(w->buf);
    free(w->sink.zbuf);
    w->buf = NULL;
    w->sink.zbuf = NULL;
    w->len = 0;
    w->bytes_out = w->sink.bytes_out;
    return w->err;
}

void tp_jsonw_raw_slow(struct tp_jsonw *w, const char *s, size_t n)
{
    if (!w->buf)
        return;
    while (n && !w->err) {
        size_t room = TP_JSONW_BUF - w->len;
        if (room == 0) {
            jw_flush(w);
            continue;
        }
        size_t k = n < room ? n : room;
        memcpy(w->buf + w->len, s, k);
        jw_commit(w, k);
        s += k;
        n -= k;
    }
}

void tp_jsonw_lit(struct tp_jsonw *w, const char *s)
{
    tp_jsonw_raw(w, s, strlen(s));
}

void tp_jsonw_char(struct tp_jsonw *w, char c)
{
    char *p = jw_room(w, 1);
    if (p) {
        *p = c;
        jw_commit(w, 1);
    }
}

void tp_jsonw_printf(struct tp_jsonw *w, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    tp_jsonw_raw(w, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

size_t tp_jsonw_fmt_u64(char *out, uint64_t v)
{
    char tmp[20];
    char *p = tmp + sizeof tmp;
    while (v >= 100) {
        unsigned i = (unsigned)(v % 100) * 2;
        v /= 100;
        p -= 2;
        p[0] = tp_digits2[i];
        p[1] = tp_digits2[i + 1];
    }
    if (v >= 10) {
        p -= 2;
        p[0] = tp_digits2[v * 2];
        p[1] = tp_digits2[v * 2 + 1];
    } else {
        *--p = (char)('0' + v);
    }
    size_t n = (size_t)(tmp + sizeof tmp - p);
    memcpy(out, p, n);
    return n;
}

void tp_jsonw_u64(struct tp_jsonw *w, uint64_t v)
{
    char *p = jw_room(w, 20);
    if (p)
        jw_commit(w, tp_jsonw_fmt_u64(p, v));
}

void tp_jsonw_i64(struct tp_jsonw *w, int64_t v)
{
    char *p = jw_room(w, 21);
    if (!p)
        return;
    size_t n = 0;
    uint64_t u = (uint64_t)v;
    if (v < 0) {
        p[n++] = '-';
        u = 0 - u;
    }
    jw_commit(w, n + tp_jsonw_fmt_u64(p + n, u));
}

void tp_jsonw_us(struct tp_jsonw *w, int64_t ns)
{
    char *p = jw_room(w, 25);
    if (!p)
        return;
    size_t n = 0;
    uint64_t u = (uint64_t)ns;
    if (ns < 0) {
        p[n++] = '-';
        u = 0 - u;
    }
    n += tp_jsonw_fmt_u64(p + n, u / 1000);
    unsigned f = (unsigned)(u % 1000);
    p[n++] = '.';
    p[n++] = (char)('0' + f / 100);
    p[n++] = tp_digits2[(f % 100) * 2];
    p[n++] = tp_digits2[(f % 100) * 2 + 1];
    jw_commit(w, n);
}

void tp_jsonw_double(struct tp_jsonw *w, double v)
{
    if (!isfinite(v) || v == 0) {
        tp_jsonw_char(w, '0');
        return;
    }
    if (fabs(v) < 9007199254740992.0 && v == (double)(int64_t)v) {
        tp_jsonw_i64(w, (int64_t)v);
        return;
    }
    char s[40];
    int n = snprintf(s, sizeof s, "%.15g", v);
    if (strtod(s, NULL) != v)
        n = snprintf(s, sizeof s, "%.17g", v);
    tp_jsonw_raw(w, s, (size_t)n);
}

/* 0: copy as is; 1: escape; 2: start of a multi-byte sequence (or invalid). */
static const uint8_t jw_class[256] = {
    [0x00 ... 0x1f] = 1, ['"'] = 1, ['\\'] = 1, [0x7f] = 1, [0x80 ... 0xff] = 2,
};

void tp_jsonw_strbody(struct tp_jsonw *w, const char *str, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n && !w->err) {
        size_t j = i;
        while (j < n && jw_class[s[j]] == 0)
            j++;
        if (j > i) {
            tp_jsonw_raw(w, (const char *)s + i, j - i);
            i = j;
            continue;
        }
        char *p = jw_room(w, 6);
        if (!p)
            return;
        unsigned c = s[i];
        if (jw_class[c] == 1) {
            p[0] = '\\';
            switch (c) {
            case '"':  p[1] = '"';  jw_commit(w, 2); break;
            case '\\': p[1] = '\\'; jw_commit(w, 2); break;
            case '\n': p[1] = 'n';  jw_commit(w, 2); break;
            case '\t': p[1] = 't';  jw_commit(w, 2); break;
            case '\r': p[1] = 'r';  jw_commit(w, 2); break;
            default:
                memcpy(p + 1, "u00", 3);
                p[4] = hex[c >> 4];
                p[5] = hex[c & 15];
                jw_commit(w, 6);
            }
            i++;
            continue;
        }
        size_t len = tp_utf8_len(s + i, n - i);
        if (len) {
            memcpy(p, s + i, len);
            jw_commit(w, len);
            i += len;
        } else {
            memcpy(p, "\xef\xbf\xbd", 3);
            jw_commit(w, 3);
            i++;
        }
    }
}

void tp_jsonw_strn(struct tp_jsonw *w, const char *s, size_t n)
{
    tp_jsonw_char(w, '"');
    tp_jsonw_strbody(w, s, n);
    tp_jsonw_char(w, '"');
}

void tp_jsonw_str(struct tp_jsonw *w, const char *s)
{
    tp_jsonw_strn(w, s ? s : "", s ? strlen(s) : 0);
}

void tp_jsonw_u64_or_null(struct tp_jsonw *w, int have, uint64_t v)
{
    if (have)
        tp_jsonw_u64(w, v);
    else
        tp_jsonw_lit(w, "null");
}

void tp_jsonw_i64_or_null(struct tp_jsonw *w, int have, int64_t v)
{
    if (have)
        tp_jsonw_i64(w, v);
    else
        tp_jsonw_lit(w, "null");
}

void tp_jsonw_double_or_null(struct tp_jsonw *w, int have, double v)
{
    if (have)
        tp_jsonw_double(w, v);
    else
        tp_jsonw_lit(w, "null");
}
