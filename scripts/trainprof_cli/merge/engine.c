/*
 * engine.c - the event array of one input of `trainprof merge`,
 * rewritten and compressed at the speed of the codec
 * (build/libtrainprof_merge.so, loaded by scripts/trainprof_cli/merge/__init__.py).
 *
 * DESIGN
 * merge/__init__.py plans the merge (headers, ranks, the time base) and
 * keeps the slow general path; this file does what dominates its time on a
 * large trace: inflate, rewrite each event line, deflate.  Python's zlib and
 * regular expressions reach about 10 MB/s of gzip input on one core; ISA-L's
 * igzip inflates about 6x and deflates about 6x faster than zlib at level 1
 * (measured on a generated 25 MB trace: 0.10 s against 0.65 s, 0.22 s
 * against 1.28 s), so that the rewrite itself is the larger part here.
 *
 * Each element of the array is scanned as JSON: strings (whose raw
 * control bytes are refused), brackets matched on a stack, so that an event
 * is found whatever its layout (trainprof's one per line, Kineto's over
 * several indented lines, json.dump's all on one) and written as one line,
 * its line breaks outside strings dropped.  The rewrite is merge/__init__.py's
 * line mode, byte for byte on trainprof's layout (tests/cli/test_merge.py
 * compares the two): every "pid": N or "pid": "S" outside strings becomes
 * the rank's slot x 2^22 plus the pid (new_pid there), every "id"/"bind_id":
 * N gets the slot's suffix digits, every "ts" moves by the shift when it is
 * not 0; an event holding "ph": "M" (process names, sort indexes) is then
 * handed to the caller's callback, which rewrites it with json.  An element
 * that is not an object, or whose brackets do not match, stops the work:
 * the caller goes on from its offset (and its json says what is wrong).
 *
 * Work spreads over threads as pigz does: the calling thread inflates and
 * rewrites into pieces of PIECE bytes; compressor threads deflate each piece
 * on its own (raw deflate, byte-aligned by a full flush, no final block, so
 * that pieces concatenate into one deflate stream); the calling thread
 * writes them in order and combines their CRC-32s.  Memory is bounded by the
 * ring of pieces, whatever the input's size.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include "scripts/trainprof_cli/merge/engine.h"

#define TP_EXPORT __attribute__((visibility("default")))

enum {
    PID_STRIDE = 1 << 22,       /* merge/__init__.py's PID_STRIDE */
    PIECE = 4 << 20,            /* event text per piece of work */
    READ = 1 << 20,             /* compressed bytes read at a time */
    MAX_EVENT = 16 << 20,       /* one event at most (merge/__init__.py's MAX_EVENT) */
    MAX_TRAILER = 16 << 20,     /* the keys after the event array at most (its MAX_HEADER) */
    MAX_THREADS = 32,
};

static void fail(struct tp_merge_job *job, const char *fmt, const char *what)
{
    if (job->status != -1) {
        snprintf(job->error, sizeof job->error, fmt, what);
        job->status = -1;
    }
}

/* ---- reading ----------------------------------------------------------- */

struct src {
    int fd;
    bool gz, eof_in, eof;
    struct inflate_state st;
    uint8_t *in;
    char *buf;                  /* decompressed, [beg, end) not consumed yet */
    size_t cap, beg, end;
    uint64_t offset;            /* decompressed offset of buf[beg] */
    uint64_t read_in;
};

static bool src_open(struct src *s, const char *path, struct tp_merge_job *job)
{
    memset(s, 0, sizeof *s);
    /* A regular file only: the caller checked, but the name may have been
     * swapped since for a FIFO (whose open would wait for a writer, hence
     * O_NONBLOCK) or a device that never ends (/dev/zero). */
    s->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (s->fd < 0) {
        fail(job, "%s: cannot open", path);
        return false;
    }
    struct stat st;
    if (fstat(s->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fail(job, "%s: not a regular file", path);
        return false;
    }
    s->in = malloc(READ);
    s->cap = READ;                      /* grows for a longer event */
    s->buf = malloc(s->cap);
    if (!s->in || !s->buf) {
        fail(job, "%s: out of memory", path);
        return false;
    }
    unsigned char magic[2];
    ssize_t n = pread(s->fd, magic, 2, 0);
    s->gz = n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    isal_inflate_init(&s->st);
    s->st.crc_flag = ISAL_GZIP;
    return true;
}

static void src_close(struct src *s)
{
    if (s->fd >= 0)
        close(s->fd);
    free(s->in);
    free(s->buf);
}

static ssize_t read_some(int fd, void *p, size_t n)
{
    ssize_t got;
    do
        got = read(fd, p, n);
    while (got < 0 && errno == EINTR);
    return got;
}

/* Appends more decompressed bytes to buf: the number added, 0 at the end,
 * -1 on an error (said in job).  Moves the unconsumed bytes to the front
 * first, and grows buf when they fill it (an event longer than buf). */
static long src_fill(struct src *s, struct tp_merge_job *job)
{
    if (s->beg > 0) {
        memmove(s->buf, s->buf + s->beg, s->end - s->beg);
        s->end -= s->beg;
        s->beg = 0;
    }
    if (s->end == s->cap) {
        if (s->cap >= MAX_EVENT) {
            fail(job, "%s: an event longer than 16 MiB", job->path);
            return -1;
        }
        char *b = realloc(s->buf, s->cap * 2);
        if (!b) {
            fail(job, "%s: out of memory", job->path);
            return -1;
        }
        s->buf = b;
        s->cap *= 2;
    }
    size_t before = s->end;
    while (s->end == before && !s->eof) {
        if (!s->gz) {
            ssize_t got = read_some(s->fd, s->buf + s->end, s->cap - s->end);
            if (got < 0) {
                fail(job, "%s: read error", job->path);
                return -1;
            }
            s->read_in += (uint64_t)got;
            s->end += (size_t)got;
            s->eof = got == 0;
            continue;
        }
        if (s->st.avail_in == 0 && !s->eof_in) {
            ssize_t got = read_some(s->fd, s->in, READ);
            if (got < 0) {
                fail(job, "%s: read error", job->path);
                return -1;
            }
            s->read_in += (uint64_t)got;
            s->eof_in = got == 0;
            s->st.next_in = s->in;
            s->st.avail_in = (uint32_t)got;
        }
        if (s->st.block_state == ISAL_BLOCK_FINISH) {
            if (s->st.avail_in == 0) {
                s->eof = s->eof_in;
                continue;
            }
            /* another gzip member follows (concatenated files, pigz -i) */
            uint8_t *next = s->st.next_in;
            uint32_t avail = s->st.avail_in;
            isal_inflate_reset(&s->st);
            s->st.crc_flag = ISAL_GZIP;
            s->st.next_in = next;
            s->st.avail_in = avail;
        }
        s->st.next_out = (uint8_t *)s->buf + s->end;
        s->st.avail_out = (uint32_t)(s->cap - s->end);
        int rc = isal_inflate(&s->st);
        if (rc < 0) {
            fail(job, "%s: not a valid gzip file (truncated or corrupt)", job->path);
            return -1;
        }
        s->end = s->cap - s->st.avail_out;
        if (s->end == before && s->eof_in && s->st.avail_in == 0 &&
            s->st.block_state != ISAL_BLOCK_FINISH) {
            fail(job, "%s: not a JSON trace (truncated or invalid)", job->path);
            return -1;
        }
    }
    return (long)(s->end - before);
}

/* ---- the pids seen ----------------------------------------------------- */

struct pidset {
    int64_t *v;
    bool *used;
    size_t cap, n;
};

static bool pidset_add(struct pidset *p, int64_t pid)
{
    if (2 * (p->n + 1) > p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        int64_t *v = calloc(cap, sizeof *v);
        bool *used = calloc(cap, sizeof *used);
        if (!v || !used) {
            free(v);
            free(used);
            return false;
        }
        for (size_t i = 0; i < p->cap; i++) {
            if (!p->used[i])
                continue;
            size_t j = (size_t)((uint64_t)p->v[i] * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
            while (used[j])
                j = (j + 1) & (cap - 1);
            v[j] = p->v[i];
            used[j] = true;
        }
        free(p->v);
        free(p->used);
        p->v = v;
        p->used = used;
        p->cap = cap;
    }
    size_t j = (size_t)((uint64_t)pid * 0x9E3779B97F4A7C15ull >> 20) & (p->cap - 1);
    while (p->used[j]) {
        if (p->v[j] == pid)
            return true;
        j = (j + 1) & (p->cap - 1);
    }
    p->v[j] = pid;
    p->used[j] = true;
    p->n++;
    return true;
}

/* ---- rewriting one line ------------------------------------------------- */

struct text {
    char *p;
    size_t len, cap;
};

static bool text_reserve(struct text *t, size_t more)
{
    if (t->len + more <= t->cap)
        return true;
    size_t cap = t->cap ? t->cap : 1024;
    while (cap < t->len + more)
        cap *= 2;
    char *p = realloc(t->p, cap);
    if (!p)
        return false;
    t->p = p;
    t->cap = cap;
    return true;
}

/* Appends n bytes; false when out of memory. */
static bool put(struct text *t, const void *p, size_t n)
{
    if (!text_reserve(t, n))
        return false;
    memcpy(t->p + t->len, p, n);
    t->len += n;
    return true;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Appends [a, b), outside any string, with its lines joined: a line break
 * and the blanks after it go (a key and its value over several lines). */
static bool put_joined(struct text *t, const char *a, const char *b)
{
    bool ok = true;
    for (const char *p = a; p < b; p++) {
        if (*p != '\n' && *p != '\r')
            continue;
        ok &= put(t, a, (size_t)(p - a));
        while (p < b && is_blank(*p))
            p++;
        a = p--;
    }
    return ok && put(t, a, (size_t)(b - a));
}

/* The end of the JSON string whose opening quote is at p (one past its
 * closing quote), or NULL: when it does not end before e, or, with *bad
 * set, when it holds a raw control byte (not JSON; a line break there would
 * split the event's line). */
static const char *string_end(const char *p, const char *e, bool *bad)
{
    for (p++; p < e; p++) {
        unsigned char c = (unsigned char)*p;
        if (c > '\\')
            continue;
        if (c == '\\')
            p++;
        else if (c == '"')
            return p + 1;
        else if (c < 0x20) {
            *bad = true;
            return NULL;
        }
    }
    return NULL;
}

/* The value of the key whose closing quote is just before k: past the blanks,
 * the colon and the blanks after it; NULL when no colon follows (a string
 * value that reads like one of our keys). */
static const char *value_of(const char *k, const char *e)
{
    while (k < e && is_blank(*k))
        k++;
    if (k >= e || *k != ':')
        return NULL;
    for (k++; k < e && is_blank(*k); k++)
        ;
    return k;
}

static bool pid_follow(const char *p, const char *e)
{
    /* merge/__init__.py replaces a pid only before [,}\s] */
    return p < e && (*p == ',' || *p == '}' || is_blank(*p) || *p == '\f' || *p == '\v');
}

struct rewrite {
    int64_t slot_base;
    const char *suffix;
    size_t suffix_len;
    size_t suffix_zeros;        /* its leading zeros, all but a last one */
    int64_t shift;
    struct pidset pids;
    bool failed;                /* out of memory */
};

/* A pid value at v (the key's quote at key): appends "pid": N and returns
 * where scanning goes on, or NULL when no pid value is there. */
static const char *rewrite_pid(struct rewrite *rw, const char *key, const char *v,
                               const char *e, struct text *out)
{
    int64_t pid;
    const char *end;
    if (v < e && *v == '"') {
        bool bad = false;
        end = string_end(v, e, &bad);
        if (!end)
            return NULL;
        uint32_t crc = (uint32_t)crc32(0, (const Bytef *)v, (uInt)(end - v));
        pid = rw->slot_base + PID_STRIDE - 1 - (int64_t)(crc % 1024);
    } else {
        const char *d = v;
        bool neg = d < e && *d == '-';
        if (neg)
            d++;
        if (d >= e || !is_digit(*d))
            return NULL;
        uint64_t mod = 0, mag = 0;
        for (end = d; end < e && is_digit(*end); end++) {
            mod = (mod * 10 + (uint64_t)(*end - '0')) % PID_STRIDE;
            if (mag <= 1024)
                mag = mag * 10 + (uint64_t)(*end - '0');
        }
        if (neg && mag > 0)
            pid = rw->slot_base + PID_STRIDE - (int64_t)(mag > 1024 ? 1024 : mag);
        else
            pid = rw->slot_base + (int64_t)mod;
    }
    if (end == e)                       /* cut by the buffer's end: scanned again */
        return NULL;
    if (!pidset_add(&rw->pids, pid))
        rw->failed = true;
    if (!pid_follow(end, e)) {          /* not replaced, as the script does */
        rw->failed |= !put_joined(out, key, end);
        return end;
    }
    char num[32];
    int n = snprintf(num, sizeof num, "\"pid\": %lld", (long long)pid);
    rw->failed |= !put(out, num, (size_t)n);
    return end;
}

/* A ts value at v: appends "ts": the sum and returns where scanning goes
 * on, or NULL when no number is there.  ts is microseconds with up to 3
 * decimals; the sum is formatted as the script formats it ("%d.%03d"). */
static const char *rewrite_ts(struct rewrite *rw, const char *key, const char *v,
                              const char *e, struct text *out)
{
    const char *d = v;
    bool neg = d < e && *d == '-';
    if (neg)
        d++;
    const char *end = d;
    while (end < e && is_digit(*end))
        end++;
    if (end == d)
        return NULL;
    size_t int_digits = (size_t)(end - d);
    int64_t frac = 0;
    if (end + 1 < e && *end == '.' && is_digit(end[1])) {
        int k = 0;
        for (end++; end < e && is_digit(*end); end++, k++)
            if (k < 3)
                frac = frac * 10 + (*end - '0');
        for (; k < 3; k++)
            frac *= 10;
    }
    if (int_digits > 15) {              /* beyond any clock: kept as it is */
        rw->failed |= !put_joined(out, key, end);
        return end;
    }
    int64_t us = 0;
    for (const char *p = d; p < d + int_digits; p++)
        us = us * 10 + (*p - '0');
    int64_t ns = us * 1000 + frac;
    if (neg)
        ns = -ns;
    ns += rw->shift;
    const char *sign = ns < 0 ? "-" : "";
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    char num[48];
    int n = snprintf(num, sizeof num, "\"ts\": %s%llu.%03llu", sign,
                     (unsigned long long)(a / 1000), (unsigned long long)(a % 1000));
    rw->failed |= !put(out, num, (size_t)n);
    return end;
}

/* The key "K" at q, K of length n: its value, or NULL. */
static const char *key_is(const char *q, const char *e, const char *k, size_t n)
{
    if ((size_t)(e - q) < n + 2 || memcmp(q + 1, k, n) != 0 || q[n + 1] != '"')
        return NULL;
    return value_of(q + n + 2, e);
}

/* A string outside any other string, at q: when it is one of the keys we
 * rewrite with its value, the text up to it and the rewrite are appended
 * (*copied moves past them) and the return is where scanning goes on;
 * else NULL (an ordinary string; "ph": "M" is noted in *meta). */
static const char *rewrite_key(struct rewrite *rw, const char *q, const char *e,
                               struct text *out, const char **copied, bool *meta)
{
    const char *v, *next = NULL;
    switch (q + 1 < e ? q[1] : 0) {
    case 'p':
        if ((v = key_is(q, e, "pid", 3))) {
            rw->failed |= !put(out, *copied, (size_t)(q - *copied));
            next = rewrite_pid(rw, q, v, e, out);
            *copied = next ? next : q;
        } else if ((v = key_is(q, e, "ph", 2)) && e - v >= 3 && memcmp(v, "\"M\"", 3) == 0) {
            *meta = true;
        }
        return next;
    case 't':
        if (rw->shift && (v = key_is(q, e, "ts", 2))) {
            rw->failed |= !put(out, *copied, (size_t)(q - *copied));
            next = rewrite_ts(rw, q, v, e, out);
            *copied = next ? next : q;
        }
        return next;
    case 'i':
    case 'b':
        if (!rw->suffix_len || !((v = key_is(q, e, "id", 2)) || (v = key_is(q, e, "bind_id", 7))))
            return NULL;
        for (next = v; next < e && is_digit(*next); next++)
            ;
        if (next == v)
            return NULL;
        rw->failed |= !put(out, *copied, (size_t)(q - *copied));
        if (next - v == 1 && *v == '0') {       /* id 0: the slot alone ("03" is not JSON) */
            rw->failed |= !put_joined(out, q, v) ||
                          !put(out, rw->suffix + rw->suffix_zeros, rw->suffix_len - rw->suffix_zeros);
        } else {
            rw->failed |= !put_joined(out, q, next) || !put(out, rw->suffix, rw->suffix_len);
        }
        *copied = next;
        return next;
    default:
        return NULL;
    }
}

enum { SCAN_DONE, SCAN_MORE, SCAN_BAD, MAX_DEPTH = 128 };

/* The JSON object at a ('{') within [a, e), rewritten onto out, its lines
 * joined: a line break outside strings goes, with the blanks after it, so
 * that Kineto's events of several lines become one line each while a line
 * of trainprof's is copied as it is.  Returns SCAN_DONE (*end: one past the
 * object), SCAN_MORE (it does not end before e) or SCAN_BAD (brackets that
 * do not match, or nest deeper than MAX_DEPTH). */
static int scan_object(struct rewrite *rw, const char *a, const char *e, struct text *out,
                       bool *meta, const char **end)
{
    char close[MAX_DEPTH];
    int depth = 0;
    const char *p = a, *copied = a;
    while (p < e) {
        char c = *p;
        if (c == '"') {
            bool bad = false;
            const char *next = rewrite_key(rw, p, e, out, &copied, meta);
            if (!next && !(next = string_end(p, e, &bad)))
                return bad ? SCAN_BAD : SCAN_MORE;
            p = next;
            continue;
        }
        if (c == '{' || c == '[') {
            if (depth == MAX_DEPTH)
                return SCAN_BAD;
            close[depth++] = c == '{' ? '}' : ']';
        } else if (c == '}' || c == ']') {
            if (depth == 0 || close[depth - 1] != c)
                return SCAN_BAD;
            if (--depth == 0) {
                rw->failed |= !put(out, copied, (size_t)(p + 1 - copied));
                *end = p + 1;
                return SCAN_DONE;
            }
        } else if (c == '\n' || c == '\r') {
            rw->failed |= !put(out, copied, (size_t)(p - copied));
            while (p < e && is_blank(*p))
                p++;
            copied = p;
            continue;
        }
        p++;
    }
    return SCAN_MORE;
}

/* ---- compressing ----------------------------------------------------------- */

struct piece {
    struct text text;
    uint8_t *z;
    size_t zlen, zcap;
    uint32_t crc;
    int state;                  /* FREE, FILLED, DONE */
    bool failed;
};

enum { FREE, FILLED, DONE };

struct pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    struct piece *ring;
    size_t nring;
    uint64_t next_seq;          /* the next piece a compressor takes */
    uint64_t filled_seq;        /* pieces submitted */
    bool quit;
};

static bool deflate_piece(struct piece *pc, uint8_t *level_buf)
{
    size_t bound = pc->text.len + (pc->text.len / 65535 + 2) * 5 + ISAL_DEF_MAX_HDR_SIZE + 64;
    if (pc->zcap < bound) {
        uint8_t *z = realloc(pc->z, bound);
        if (!z)
            return false;
        pc->z = z;
        pc->zcap = bound;
    }
    struct isal_zstream zs;
    isal_deflate_stateless_init(&zs);
    zs.level = 1;
    zs.level_buf = level_buf;
    zs.level_buf_size = ISAL_DEF_LVL1_DEFAULT;
    zs.flush = FULL_FLUSH;
    zs.end_of_stream = 0;
    zs.gzip_flag = IGZIP_DEFLATE;
    zs.next_in = (uint8_t *)pc->text.p;
    zs.avail_in = (uint32_t)pc->text.len;
    zs.next_out = pc->z;
    zs.avail_out = (uint32_t)pc->zcap;
    if (isal_deflate_stateless(&zs) != COMP_OK || zs.avail_in != 0)
        return false;
    pc->zlen = pc->zcap - zs.avail_out;
    pc->crc = crc32_gzip_refl(0, (const unsigned char *)pc->text.p, pc->text.len);
    return true;
}

static void *compressor(void *arg)
{
    struct pool *pl = arg;
    uint8_t *level_buf = malloc(ISAL_DEF_LVL1_DEFAULT);
    pthread_mutex_lock(&pl->mu);
    for (;;) {
        while (!pl->quit && pl->next_seq == pl->filled_seq)
            pthread_cond_wait(&pl->work, &pl->mu);
        if (pl->quit && pl->next_seq == pl->filled_seq)
            break;
        struct piece *pc = &pl->ring[pl->next_seq % pl->nring];
        pl->next_seq++;
        pthread_mutex_unlock(&pl->mu);
        bool ok = level_buf && deflate_piece(pc, level_buf);
        pthread_mutex_lock(&pl->mu);
        pc->failed = !ok;
        pc->state = DONE;
        pthread_cond_broadcast(&pl->done);
    }
    pthread_mutex_unlock(&pl->mu);
    free(level_buf);
    return NULL;
}

static bool write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* The output side: pieces go round the ring in order. */
struct sink {
    struct pool pool;
    pthread_t threads[MAX_THREADS];
    int nthreads;
    uint8_t *level_buf;         /* the caller's, when it compresses itself */
    uint64_t seq;               /* the piece being filled */
    uint64_t written;           /* pieces written */
    struct tp_merge_job *job;
};

static struct piece *sink_current(struct sink *k)
{
    return &k->pool.ring[k->seq % k->pool.nring];
}

/* Writes piece number `written` once compressed; false on an error. */
static bool sink_write_oldest(struct sink *k)
{
    struct pool *pl = &k->pool;
    struct piece *pc = &pl->ring[k->written % pl->nring];
    pthread_mutex_lock(&pl->mu);
    while (pc->state != DONE)
        pthread_cond_wait(&pl->done, &pl->mu);
    pthread_mutex_unlock(&pl->mu);
    struct tp_merge_job *job = k->job;
    if (pc->failed) {
        fail(job, "%s: compression failed (out of memory)", job->path);
        return false;
    }
    if (!(job->plain ? write_all(job->out_fd, (const uint8_t *)pc->text.p, pc->text.len)
                     : write_all(job->out_fd, pc->z, pc->zlen))) {
        fail(job, "cannot write the output (%s)", strerror(errno));
        return false;
    }
    job->crc = (uint32_t)crc32_combine(job->crc, pc->crc, (z_off_t)pc->text.len);
    job->text_bytes += pc->text.len;
    pc->text.len = 0;
    pc->state = FREE;
    k->written++;
    return true;
}

/* Hands the piece being filled to the compressors and moves to the next
 * slot, writing the oldest piece first when the ring is full. */
static bool sink_submit(struct sink *k)
{
    struct pool *pl = &k->pool;
    struct piece *pc = sink_current(k);
    if (pc->text.len == 0)
        return true;
    if (k->nthreads == 0) {
        pc->failed = !k->job->plain && !deflate_piece(pc, k->level_buf);
        pc->state = DONE;
    } else {
        pthread_mutex_lock(&pl->mu);
        pc->state = FILLED;
        pl->filled_seq++;
        pthread_cond_signal(&pl->work);
        pthread_mutex_unlock(&pl->mu);
    }
    k->seq++;
    while (k->seq - k->written >= pl->nring)
        if (!sink_write_oldest(k))
            return false;
    return true;
}

static bool sink_open(struct sink *k, struct tp_merge_job *job)
{
    memset(k, 0, sizeof *k);
    k->job = job;
    int n = job->threads < 0 || job->plain ? 0
            : job->threads > MAX_THREADS ? MAX_THREADS : job->threads;
    struct pool *pl = &k->pool;
    pthread_mutex_init(&pl->mu, NULL);
    pthread_cond_init(&pl->work, NULL);
    pthread_cond_init(&pl->done, NULL);
    pl->nring = (size_t)(n ? 2 * n + 1 : 1);
    pl->ring = calloc(pl->nring, sizeof *pl->ring);
    k->level_buf = job->plain ? NULL : malloc(ISAL_DEF_LVL1_DEFAULT);
    if (!pl->ring || (!job->plain && !k->level_buf))
        return false;
    for (int i = 0; i < n; i++) {
        if (pthread_create(&k->threads[i], NULL, compressor, pl) != 0)
            break;
        k->nthreads++;
    }
    return true;
}

/* Writes what is left (when ok), stops the threads, frees the ring. */
static bool sink_close(struct sink *k, bool ok)
{
    struct pool *pl = &k->pool;
    if (ok)
        ok = sink_submit(k);
    while (ok && k->written < k->seq)
        ok = sink_write_oldest(k);
    pthread_mutex_lock(&pl->mu);
    pl->quit = true;
    pthread_cond_broadcast(&pl->work);
    pthread_mutex_unlock(&pl->mu);
    for (int i = 0; i < k->nthreads; i++)
        pthread_join(k->threads[i], NULL);
    for (size_t i = 0; pl->ring && i < pl->nring; i++) {
        free(pl->ring[i].text.p);
        free(pl->ring[i].z);
    }
    pthread_mutex_destroy(&pl->mu);
    pthread_cond_destroy(&pl->work);
    pthread_cond_destroy(&pl->done);
    free(pl->ring);
    free(k->level_buf);
    return ok;
}

/* ---- one input ---------------------------------------------------------- */

/* Ensures buf holds at least one byte at beg: false at the end or an error. */
static bool src_more(struct src *s, struct tp_merge_job *job)
{
    while (s->beg == s->end) {
        long got = src_fill(s, job);
        if (got <= 0)
            return false;
    }
    return true;
}

static void src_consume(struct src *s, size_t n)
{
    s->beg += n;
    s->offset += n;
}

/* Everything after "]": the trailer, read to the end. */
static bool read_trailer(struct src *s, struct tp_merge_job *job)
{
    struct text t = {0};
    for (;;) {
        size_t n = s->end - s->beg;
        if (t.len + n > MAX_TRAILER) {
            free(t.p);
            fail(job, "%s: more than 16 MiB after traceEvents", job->path);
            return false;
        }
        if (!text_reserve(&t, n + 1)) {
            free(t.p);
            fail(job, "%s: out of memory", job->path);
            return false;
        }
        put(&t, s->buf + s->beg, n);
        src_consume(s, n);
        long got = src_fill(s, job);
        if (got < 0) {
            free(t.p);
            return false;
        }
        if (got == 0)
            break;
    }
    if (t.p)
        t.p[t.len] = '\0';             /* room was reserved */
    job->trailer = t.p ? t.p : calloc(1, 1);
    job->trailer_len = t.len;
    return true;
}

/* Handles one metadata line through the caller's callback. */
static bool meta_line(struct tp_merge_job *job, struct text *out, size_t from,
                      struct text *scratch)
{
    size_t len = out->len - from;
    for (;;) {
        long n = job->meta(out->p + from, len, scratch->p, scratch->cap);
        if (n < 0) {
            fail(job, "%s: a metadata event is not valid JSON", job->path);
            return false;
        }
        if ((size_t)n <= scratch->cap) {
            out->len = from;
            return put(out, scratch->p, (size_t)n);
        }
        if (!text_reserve(scratch, (size_t)n))
            return false;
    }
}

static void run(struct tp_merge_job *job, struct src *s, struct sink *k, struct rewrite *rw)
{
    struct text scratch = {0};
    if (!text_reserve(&scratch, 4096)) {
        fail(job, "%s: out of memory", job->path);
        return;
    }
    while (s->offset < job->skip) {     /* to the array's first byte */
        if (!src_more(s, job))
            goto truncated;
        size_t n = s->end - s->beg;
        if (n > job->skip - s->offset)
            n = (size_t)(job->skip - s->offset);
        src_consume(s, n);
    }
    for (;;) {
        if (!src_more(s, job))
            goto truncated;
        char c = s->buf[s->beg];
        if (is_blank(c) || c == ',') {  /* between events */
            src_consume(s, 1);
            continue;
        }
        if (c == ']') {
            src_consume(s, 1);
            read_trailer(s, job);
            goto out;
        }
        if (c != '{') {                 /* not an event: the caller says what it is */
            job->status = 1;
            job->resume = s->offset;
            goto out;
        }
        struct piece *pc = sink_current(k);
        if (pc->text.len >= PIECE) {
            if (!sink_submit(k))
                goto out;
            pc = sink_current(k);
        }
        size_t from = pc->text.len;
        bool meta = false;
        const char *end = NULL;
        int r = scan_object(rw, s->buf + s->beg, s->buf + s->end, &pc->text, &meta, &end);
        if (r != SCAN_DONE)
            pc->text.len = from;        /* scanned again once more is read */
        if (r == SCAN_MORE) {
            long got = src_fill(s, job);
            if (got < 0)
                goto out;
            if (got == 0)
                goto truncated;
            continue;
        }
        if (r == SCAN_BAD) {            /* not well nested: the caller's json says why */
            job->status = 1;
            job->resume = s->offset;
            goto out;
        }
        if (rw->failed || (meta && !meta_line(job, &pc->text, from, &scratch)) ||
            !put(&pc->text, ",\n", 2)) {
            fail(job, "%s: out of memory", job->path);
            goto out;
        }
        job->events++;
        src_consume(s, (size_t)(end - (s->buf + s->beg)));
    }
truncated:
    if (job->status == 0)
        fail(job, "%s: the event array does not end", job->path);
out:
    free(scratch.p);
}

TP_EXPORT int tp_merge_events(struct tp_merge_job *job)
{
    job->status = 0;
    job->resume = job->events = job->text_bytes = job->read_bytes = job->npids = 0;
    job->crc = 0;
    job->trailer = NULL;
    job->trailer_len = 0;
    job->pids = NULL;
    job->error[0] = '\0';

    struct rewrite rw = {
        .slot_base = (int64_t)job->slot * PID_STRIDE,
        .suffix = job->suffix ? job->suffix : "",
        .suffix_len = job->suffix ? strlen(job->suffix) : 0,
        .shift = job->shift_ns,
    };
    while (rw.suffix_zeros + 1 < rw.suffix_len && rw.suffix[rw.suffix_zeros] == '0')
        rw.suffix_zeros++;
    struct src s;
    struct sink k;
    if (src_open(&s, job->path, job)) {
        if (sink_open(&k, job)) {
            run(job, &s, &k, &rw);
            if (!sink_close(&k, job->status >= 0) && job->status >= 0)
                fail(job, "%s: out of memory", job->path);
        } else {
            sink_close(&k, false);
            fail(job, "%s: out of memory", job->path);
        }
    }
    job->read_bytes = s.read_in;
    src_close(&s);
    if (job->status >= 0 && rw.pids.n) {
        job->pids = malloc(rw.pids.n * sizeof *job->pids);
        if (!job->pids) {
            fail(job, "%s: out of memory", job->path);
        } else {
            for (size_t i = 0; i < rw.pids.cap; i++)
                if (rw.pids.used[i])
                    job->pids[job->npids++] = rw.pids.v[i];
        }
    }
    free(rw.pids.v);
    free(rw.pids.used);
    return job->status;
}

TP_EXPORT void tp_merge_free(struct tp_merge_job *job)
{
    free(job->trailer);
    free(job->pids);
    job->trailer = NULL;
    job->pids = NULL;
}
