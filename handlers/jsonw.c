/*
 * jsonw.c - DESIGN: text is appended to one buffer (64 KiB, 512 KiB with
 * gzip); a full buffer goes to deflate (gzip) or straight to write(2).
 * Everything on the per-event
 * path is hand-rolled (integers of one to four digits from a two-digit
 * table, longer ones eight digits to a store by dividing every lane of a
 * word at once, microseconds as integer division of nanoseconds, string
 * escaping that tests sixteen bytes at a time) because
 * printf per field costs about 80 ns and a trace must be written at >= 3 M
 * events/s (README "Overhead"); a fixed-shape event asks once for room for
 * its longest text and writes its fields with no check between them (the
 * cursor, jsonw.h).  Deflate is the larger part even so, so with gzip a
 * helper thread ("tp-gzip", signals blocked, alive
 * only while one file is written) compresses and writes full buffers while
 * the caller formats the next ones: a ring of three 512 KiB buffers, the
 * caller waiting only when all three are queued (a gzip writer's buffer
 * is 512 KiB because igzip is faster on larger pieces and each hand-over
 * costs two futex calls and, on a busy core, two switches); where the
 * process may run on one CPU only, the two threads could only take turns,
 * so the caller compresses each full buffer itself.  The deflate is ISA-L's
 * igzip level 1 where libisal.so.2 loads (7 times fewer instructions than
 * zlib's level 1 for as small a file), zlib's otherwise.  gzip is one member
 * (zlib: deflateInit2 windowBits 15+16, ended by Z_FINISH; ISA-L:
 * IGZIP_GZIP, ended by end_of_stream) because catapult
 * (chrome://tracing, TensorBoard's trace view) reads only the first member.  Strings come
 * out valid UTF-8 with no byte for which iscntrl() is true, since Perfetto's
 * tokenizer rejects those and JSON.parse rejects raw controls.
 */
#include "jsonw.h"
#include "collector/common/loader.h"
#include "collector/common/log.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char tp_jsonw_digits2[200] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

const uint64_t tp_jsonw_pow10[20] = {
    1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
    100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
    10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull,
    100000000000000000ull, 1000000000000000000ull, 10000000000000000000ull,
};

#define PIPE_BUFS 3

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

/*
 * ISA-L (Debian libisal2): its igzip level 1 makes the same one-member gzip
 * as zlib's level 1, as small (62.9 MB of launch events: 2.09 MB against
 * zlib's 2.08 MB), in a quarter of the time and a seventh of the
 * instructions (tests/bench/RESULTS.md, "Trace writer").  The header gives
 * the stream's layout; the library itself is opened at run time
 * (tp_jsonw_load), so that a host without it keeps zlib and the preload
 * never fails to load for want of it.  TP_NO_ISAL builds without it.
 */
#if !defined(TP_NO_ISAL) && defined(__has_include)
#if __has_include(<isa-l/igzip_lib.h>)
#include <isa-l/igzip_lib.h>
#define TP_HAVE_ISAL 1
#endif
#endif

#ifdef TP_HAVE_ISAL
struct tp_jsonw_isal {
    struct isal_zstream zs;
    uint8_t level_buf[ISAL_DEF_LVL1_DEFAULT];
};

static void (*tp_isal_init)(struct isal_zstream *);
static int (*tp_isal_deflate)(struct isal_zstream *);
#endif
static _Atomic int tp_isal_loaded;       /* 1: both entry points are set */

#ifdef TP_HAVE_ISAL
static void isal_load_once(void)
{
    /* the soname whose stream layout the header describes */
    void *h = dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    tp_isal_init = (void (*)(struct isal_zstream *))tp_dlsym_real(h, "isal_deflate_init");
    tp_isal_deflate = (int (*)(struct isal_zstream *))tp_dlsym_real(h, "isal_deflate");
    if (tp_isal_init && tp_isal_deflate)
        atomic_store(&tp_isal_loaded, 1);
}
#endif

int tp_jsonw_load(void)
{
#ifdef TP_HAVE_ISAL
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, isal_load_once);
#endif
    return atomic_load(&tp_isal_loaded);
}

const char *tp_jsonw_gzip_name(void)
{
    return atomic_load(&tp_isal_loaded) ? "isal" : "zlib";
}

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

#ifdef TP_HAVE_ISAL
/* sink_put by ISA-L: deflate until the input is taken and the output is
 * not full; at the end until the trailer is out (ZSTATE_END). */
static void sink_put_isal(struct tp_jsonw_sink *k, const char *text, size_t n, int finish)
{
    struct isal_zstream *s = &k->isal->zs;
    s->next_in = (uint8_t *)text;
    s->avail_in = (uint32_t)n;
    s->end_of_stream = finish != 0;
    s->flush = NO_FLUSH;
    for (;;) {
        s->next_out = k->zbuf;
        s->avail_out = TP_JSONW_BUF;
        if (tp_isal_deflate(s) != COMP_OK) {
            sink_fail(k, EIO);
            return;
        }
        size_t have = TP_JSONW_BUF - s->avail_out;
        if (have)
            sink_write(k, k->zbuf, have);
        if (k->err)
            return;
        if (finish ? s->internal_state.state == ZSTATE_END : s->avail_in == 0 && s->avail_out != 0)
            return;
    }
}

/* An ISA-L stream at level 1 writing one gzip member, or NULL. */
static struct tp_jsonw_isal *isal_start(void)
{
    struct tp_jsonw_isal *z = malloc(sizeof *z);
    if (!z)
        return NULL;
    tp_isal_init(&z->zs);
    z->zs.level = 1;
    z->zs.level_buf = z->level_buf;
    z->zs.level_buf_size = sizeof z->level_buf;
    z->zs.gzip_flag = IGZIP_GZIP;
    return z;
}
#endif

/* Text to the sink; flush is Z_NO_FLUSH or Z_FINISH (ends the member). */
static void sink_put(struct tp_jsonw_sink *k, const char *text, size_t n, int flush)
{
    if (k->err)
        return;
    if (!k->gzip) {
        sink_write(k, text, n);
        return;
    }
#ifdef TP_HAVE_ISAL
    if (k->gzip == 2) {
        sink_put_isal(k, text, n, flush == Z_FINISH);
        return;
    }
#endif
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
        p->bufs[i] = malloc(w->cap);
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

char *tp_jsonw_room_slow(struct tp_jsonw *w, size_t n)
{
    if (!w->buf || w->err || n > w->cap)
        return NULL;
    if (w->len + n > w->cap)
        jw_flush(w);
    if (w->err || !w->buf)
        return NULL;
    return w->buf + w->len;
}

/* Whether this process may run on one CPU only (taskset, a cgroup's
 * cpuset, a one-core container): a compressor thread would then only
 * take turns with the caller, each buffer costing a switch each way. */
static int one_cpu(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1;
}

int tp_jsonw_init(struct tp_jsonw *w, int fd, int gzip, int level)
{
    memset(w, 0, sizeof *w);
    w->sink.fd = fd;
    w->cap = gzip ? TP_JSONW_GZ_BUF : TP_JSONW_BUF;
    w->buf = malloc(w->cap);
    if (!w->buf) {
        jw_fail(w, ENOMEM);
        errno = w->err;
        return -1;
    }
    if (gzip) {
        w->sink.zbuf = malloc(TP_JSONW_BUF);
        if (level < -1 || level > 9)
            level = TP_JSONW_GZIP_LEVEL;
#ifdef TP_HAVE_ISAL
        if (w->sink.zbuf && gzip == TP_JSONW_GZIP && level == 1 && atomic_load(&tp_isal_loaded) &&
            (w->sink.isal = isal_start()) != NULL)
            w->sink.gzip = 2;
#endif
        if (!w->sink.gzip) {
            if (!w->sink.zbuf || deflateInit2(&w->sink.zs, level, Z_DEFLATED, 15 + 16, 8,
                                              Z_DEFAULT_STRATEGY) != Z_OK) {
                free(w->sink.zbuf);
                w->sink.zbuf = NULL;
                jw_fail(w, ENOMEM);
                errno = w->err;
                return -1;
            }
            w->sink.gzip = 1;
        }
        if (!one_cpu())
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
        if (w->sink.gzip == 1)
            deflateEnd(&w->sink.zs);
        free(w->sink.isal);
        w->sink.isal = NULL;
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
        size_t room = w->cap - w->len;
        if (room == 0) {
            jw_flush(w);
            continue;
        }
        size_t k = n < room ? n : room;
        memcpy(w->buf + w->len, s, k);
        w->len += k;
        w->bytes_in += k;
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
    char *p = tp_jsonw_room(w, 1);
    if (p) {
        *p = c;
        tp_jsonw_done(w, p + 1);
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

/* Eight digits to a store (jsonw.h, tp_jsonw_digits8) where the words are
 * little-endian; pairs from the last back elsewhere. */
char *tp_jsonw_put_u64_big(char *p, uint64_t v)
{
    if (v < 10000) {            /* a block, a grid, a cbid: a digit or a pair, a pair */
        unsigned h = (unsigned)v / 100, l = (unsigned)v - 100 * h;
        if (h < 10) {
            p[0] = (char)('0' + h);
            memcpy(p + 1, tp_jsonw_digits2 + 2 * l, 2);
            return p + 3;
        }
        memcpy(p, tp_jsonw_digits2 + 2 * h, 2);
        memcpy(p + 2, tp_jsonw_digits2 + 2 * l, 2);
        return p + 4;
    }
    unsigned len = tp_jsonw_u64_len(v);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t d;
    if (len <= 8) {
        d = tp_jsonw_digits8((uint32_t)v) >> (8 * (8 - len));
        __builtin_memcpy(p, &d, 8);
        return p + len;
    }
    char *q = p;
    unsigned lead = len - 8;            /* the digits before the last eight */
    uint64_t top = v / 100000000;
    uint32_t low = (uint32_t)(v - top * 100000000);
    if (len > 16) {
        uint64_t top2 = top / 100000000;  /* <= 1844 */
        lead = len - 16;
        d = tp_jsonw_digits8((uint32_t)top2) >> (8 * (8 - lead));
        __builtin_memcpy(q, &d, 8);
        q += lead;
        top -= top2 * 100000000;
        lead = 8;
    }
    d = tp_jsonw_digits8((uint32_t)top) >> (8 * (8 - lead));
    __builtin_memcpy(q, &d, 8);
    q += lead;
    d = tp_jsonw_digits8(low);
    __builtin_memcpy(q, &d, 8);
    return q + 8;
#else
    char *end = p + len, *q = end;
    while (v >= 100) {
        uint64_t d = v / 100;
        q -= 2;
        __builtin_memcpy(q, tp_jsonw_digits2 + 2 * (v - 100 * d), 2);
        v = d;
    }
    if (v >= 10)
        __builtin_memcpy(q - 2, tp_jsonw_digits2 + 2 * v, 2);
    else
        q[-1] = (char)('0' + v);
    return end;
#endif
}

size_t tp_jsonw_fmt_u64(char *out, uint64_t v)
{
    return (size_t)(tp_jsonw_put_u64(out, v) - out);
}

void tp_jsonw_u64(struct tp_jsonw *w, uint64_t v)
{
    char *p = tp_jsonw_room(w, 20);
    if (p)
        tp_jsonw_done(w, tp_jsonw_put_u64(p, v));
}

void tp_jsonw_i64(struct tp_jsonw *w, int64_t v)
{
    char *p = tp_jsonw_room(w, 21);
    if (p)
        tp_jsonw_done(w, tp_jsonw_put_i64(p, v));
}

void tp_jsonw_us(struct tp_jsonw *w, int64_t ns)
{
    char *p = tp_jsonw_room(w, 25);
    if (p)
        tp_jsonw_done(w, tp_jsonw_put_us(p, ns));
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

/* Strings up to this long are escaped in one room (24 KiB at most); longer
 * ones stream through tp_jsonw_strbody. */
#define TP_JSONW_STR_ONCE 4096

/* 0: copy as is; 1: escape; 2: start of a multi-byte sequence (or invalid). */
static const uint8_t jw_class[256] = {
    [0x00 ... 0x1f] = 1, ['"'] = 1, ['\\'] = 1, [0x7f] = 1, [0x80 ... 0xff] = 2,
};

static const char jw_hex[] = "0123456789abcdef";

/* One byte of class 1 at "p", escaped; the end. */
static inline char *jw_escape(char *p, unsigned c)
{
    p[0] = '\\';
    switch (c) {
    case '"':  p[1] = '"';  return p + 2;
    case '\\': p[1] = '\\'; return p + 2;
    case '\n': p[1] = 'n';  return p + 2;
    case '\t': p[1] = 't';  return p + 2;
    case '\r': p[1] = 'r';  return p + 2;
    default:
        memcpy(p + 1, "u00", 3);
        p[4] = jw_hex[c >> 4];
        p[5] = jw_hex[c & 15];
        return p + 6;
    }
}

/* Sixteen bytes as one vector (GCC's vector extensions: SSE2 on x86-64,
 * NEON on aarch64, plain code elsewhere). */
typedef int8_t jw_v16 __attribute__((vector_size(16)));

/* The bytes of "x" that are not copied as they are (jw_class not 0) as
 * 0xff, the others 0: as signed bytes, those below 0x20 and from 0x80 up
 * are all below 0x20; then 0x7f, '"' and '\\'. */
static inline jw_v16 jw_special16(jw_v16 x)
{
    return (jw_v16)((x < 0x20) | (x == 0x7f) | (x == '"') | (x == '\\'));
}

/* Index (0-15) of the first 0xff byte of a mask that has one. */
static inline unsigned jw_first16(jw_v16 m)
{
    uint64_t h[2];
    memcpy(h, &m, 16);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return h[0] ? (unsigned)__builtin_ctzll(h[0]) / 8 : 8 + (unsigned)__builtin_ctzll(h[1]) / 8;
#else
    return h[0] ? (unsigned)__builtin_clzll(h[0]) / 8 : 8 + (unsigned)__builtin_clzll(h[1]) / 8;
#endif
}

/* Sixteen bytes at a time: one load, one store, four compares; the bytes
 * before the first that is not plain are kept, that one escaped (or its
 * UTF-8 sequence copied or replaced), and on from the byte after it.  The
 * last 1-15 bytes are padded with plain 'A's to a vector and stored whole
 * (the room has 16 bytes to spare).  The same text as tp_jsonw_strbody. */
char *tp_jsonw_put_strn(char *p, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str, *e = s + n;
    *p++ = '"';
    for (;;) {
        size_t rem = (size_t)(e - s);
        jw_v16 x;
        if (rem >= 16) {
            memcpy(&x, s, 16);
        } else if (rem > 0) {
            memset(&x, 'A', 16);
            memcpy(&x, s, rem);
        } else {
            break;
        }
        memcpy(p, &x, 16);
        jw_v16 m = jw_special16(x);
        uint64_t h[2];
        memcpy(h, &m, 16);
        if (!(h[0] | h[1])) {
            if (rem <= 16) {
                p += rem;
                break;
            }
            p += 16;
            s += 16;
            continue;
        }
        unsigned k = jw_first16(m);      /* < rem: the padding is plain */
        p += k;
        s += k;
        unsigned c = *s;
        if (jw_class[c] == 1) {
            p = jw_escape(p, c);
            s++;
        } else {
            size_t len = tp_utf8_len(s, (size_t)(e - s));
            if (len) {
                memcpy(p, s, len);
                p += len;
                s += len;
            } else {
                memcpy(p, "\xef\xbf\xbd", 3);
                p += 3;
                s++;
            }
        }
    }
    *p++ = '"';
    return p;
}

void tp_jsonw_strbody(struct tp_jsonw *w, const char *str, size_t n)
{
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
        char *p = tp_jsonw_room(w, 6);
        if (!p)
            return;
        unsigned c = s[i];
        if (jw_class[c] == 1) {
            tp_jsonw_done(w, jw_escape(p, c));
            i++;
            continue;
        }
        size_t len = tp_utf8_len(s + i, n - i);
        if (len) {
            memcpy(p, s + i, len);
            tp_jsonw_done(w, p + len);
            i += len;
        } else {
            memcpy(p, "\xef\xbf\xbd", 3);
            tp_jsonw_done(w, p + 3);
            i++;
        }
    }
}

void tp_jsonw_strn(struct tp_jsonw *w, const char *s, size_t n)
{
    if (n <= TP_JSONW_STR_ONCE) {
        char *p = tp_jsonw_room(w, TP_JSONW_STR_ROOM(n));
        if (p)
            tp_jsonw_done(w, tp_jsonw_put_strn(p, s, n));
        return;
    }
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
