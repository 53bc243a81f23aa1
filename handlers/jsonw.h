/*
 * jsonw.h - a streaming JSON (and plain text) writer to a file descriptor,
 * optionally through zlib as one gzip member.
 *
 * Traces are streamed, never built as a document in memory.  The
 * writer owns no file: it writes to an fd that handlers/output.c opened.
 * Errors are sticky: the first failure (write, zlib, memory) is kept in
 * "err" as an errno value, every later call is a no-op, and
 * tp_jsonw_finish() returns it.  Nothing here prints.
 */
#ifndef TRAINPROF_HANDLERS_JSONW_H
#define TRAINPROF_HANDLERS_JSONW_H

#include <stddef.h>
#include <stdint.h>

#include <zlib.h>

#define TP_JSONW_BUF (64u * 1024u)
/* The text buffer of a gzip writer: each full one handed to tp-gzip costs
 * two futex calls and, on a busy machine, two switches, so 8 times fewer
 * of them (tests/bench/RESULTS.md, "writer3m": on two CPUs 2.41 M events
 * per CPU second against 2.01 M with 64 KiB); igzip also takes fewer
 * cycles per byte given larger pieces.  A -D may set another size. */
#ifndef TP_JSONW_GZ_BUF
#define TP_JSONW_GZ_BUF (512u * 1024u)
#endif
#define TP_JSONW_GZIP_LEVEL 1

/* tp_jsonw_init's "gzip": plain text, one gzip member by the fastest
 * deflate there is (ISA-L once tp_jsonw_load found it, else zlib), or one
 * gzip member by zlib whatever is loaded (tests, comparisons). */
#define TP_JSONW_PLAIN     0
#define TP_JSONW_GZIP      1
#define TP_JSONW_GZIP_ZLIB 2

struct tp_jsonw_isal;       /* ISA-L's stream and level buffer, jsonw.c */

/* Where finished text goes: deflate (gzip) and write(2), or write(2) only. */
struct tp_jsonw_sink {
    int fd;
    int gzip;               /* 0 plain, 1 zlib, 2 ISA-L */
    int err;                /* first errno of this sink */
    uint64_t bytes_out;     /* bytes written to fd */
    z_stream zs;
    struct tp_jsonw_isal *isal; /* gzip == 2 */
    unsigned char *zbuf;    /* TP_JSONW_BUF bytes of deflate output (gzip only) */
};

struct tp_jsonw_pipe;       /* the compressor thread, jsonw.c */

struct tp_jsonw {
    int err;                /* first errno, 0 = fine */
    size_t len;             /* bytes pending in "buf" */
    uint64_t bytes_in;      /* uncompressed bytes accepted so far */
    uint64_t bytes_out;     /* bytes written to fd, valid after tp_jsonw_finish */
    char *buf;              /* "cap" bytes of text being filled */
    size_t cap;             /* TP_JSONW_BUF, or TP_JSONW_GZ_BUF with gzip */
    struct tp_jsonw_sink sink;  /* owned by the compressor thread while "pipe" runs */
    struct tp_jsonw_pipe *pipe; /* NULL: the caller's thread compresses */
};

/*
 * tp_jsonw_init - start writing to "fd" (not closed by the writer).
 * gzip: TP_JSONW_PLAIN (0) plain text; TP_JSONW_GZIP (1) one gzip member
 * at "level" (-1..9; TP_JSONW_GZIP_LEVEL is the default): at level 1 by
 * ISA-L's igzip level 1 when tp_jsonw_load has loaded it, else (and at
 * every other level) by zlib (deflateInit2, windowBits 15+16);
 * TP_JSONW_GZIP_ZLIB (2) the same member by zlib always.  Compressed
 * on a helper thread ("tp-gzip", all signals blocked) while the caller
 * formats the next buffers, unless the process may run on one CPU only
 * (its affinity mask: the two threads could only take turns, paying a
 * switch each way) or the thread cannot be started: then inline.
 * Returns 0, or -1 with w->err and errno set (w may still be passed to
 * every other function, and must be passed to tp_jsonw_finish).
 */
int tp_jsonw_init(struct tp_jsonw *w, int fd, int gzip, int level);

/*
 * tp_jsonw_load - load ISA-L (libisal.so.2, dlopen) for gzip traces, once;
 * a missing library (or a build without its header) leaves zlib.  It runs
 * the library's initialisers, so it is called where a load may be (as the
 * collector activates, through the sink's "load": handlers.c), never from
 * a handler, which may run once exit has begun.  Returns 1 when ISA-L is
 * in use, else 0.
 */
int tp_jsonw_load(void);

/* tp_jsonw_gzip_name - "isal" or "zlib": what TP_JSONW_GZIP compresses
 * with at level 1 now. */
const char *tp_jsonw_gzip_name(void);

/*
 * tp_jsonw_finish - flush, end the gzip member, join the compressor
 * thread, free the buffers.  Does not close the fd.  Returns 0, or the first error as an errno value
 * (also left in w->err).  Safe to call twice.
 */
int tp_jsonw_finish(struct tp_jsonw *w);

/* tp_jsonw_raw_slow - tp_jsonw_raw when the buffer may not hold "n" more bytes. */
void tp_jsonw_raw_slow(struct tp_jsonw *w, const char *s, size_t n);

/* tp_jsonw_raw - append "n" bytes of text as they are. */
static inline void tp_jsonw_raw(struct tp_jsonw *w, const char *s, size_t n)
{
    if (__builtin_expect(w->len + n <= w->cap && w->buf != NULL, 1)) {
        __builtin_memcpy(w->buf + w->len, s, n);
        w->len += n;
        w->bytes_in += n;
    } else {
        tp_jsonw_raw_slow(w, s, n);
    }
}

/*
 * The cursor: a fixed-shape event asks once for room for its longest text
 * (tp_jsonw_room), writes its fields with the tp_jsonw_put_* functions
 * below, each taking and returning the write position, with no check and
 * no call per field, and says where it ended (tp_jsonw_done).  This is how
 * the chrome handler writes a call event (chrome.c).
 */

/* tp_jsonw_room_slow - tp_jsonw_room when the buffer may be full. */
char *tp_jsonw_room_slow(struct tp_jsonw *w, size_t n);

/* tp_jsonw_room - "n" (<= TP_JSONW_BUF) writable bytes at the end of the
 * text, the buffer handed on first if they do not fit; NULL after an
 * error (then write nothing). */
static inline char *tp_jsonw_room(struct tp_jsonw *w, size_t n)
{
    if (__builtin_expect(w->len + n <= w->cap && w->buf != NULL && !w->err, 1))
        return w->buf + w->len;
    return tp_jsonw_room_slow(w, n);
}

/* tp_jsonw_done - the text now ends at "end", inside the room last asked for. */
static inline void tp_jsonw_done(struct tp_jsonw *w, char *end)
{
    size_t n = (size_t)(end - (w->buf + w->len));
    w->len += n;
    w->bytes_in += n;
}

/* TP_JSONW_PUT_LIT - copy a string literal to "p"; the position after it. */
#define TP_JSONW_PUT_LIT(p, lit) ((char *)__builtin_memcpy((p), "" lit, sizeof(lit) - 1) + sizeof(lit) - 1)

/* The pairs "00" to "99", and the powers of ten 10^0..10^19 (jsonw.c). */
extern const char tp_jsonw_digits2[200];
extern const uint64_t tp_jsonw_pow10[20];

/* tp_jsonw_u64_len - the decimal digits of "v" (1 for 0, 20 at most):
 * log10 from the bit length (1233/4096 ~ log10(2)), then one compare. */
static inline unsigned tp_jsonw_u64_len(uint64_t v)
{
    unsigned t = ((unsigned)(64 - __builtin_clzll(v | 1)) * 1233u) >> 12;
    return t + 1 - ((v | 1) < tp_jsonw_pow10[t]);
}

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* tp_jsonw_digits8 - the 8 decimal digits of "x" (< 10^8, leading zeros
 * kept) as ASCII in one word whose first byte in memory is the first
 * digit: x split in two 4-digit halves, each in two 2-digit quarters,
 * each in two digits, by multiplications that divide every lane of the
 * word at once (the quotients are exact for these ranges: /100 is
 * *10486 >> 20 below 43,690, /10 is *103 >> 10 below 179). */
static inline uint64_t tp_jsonw_digits8(uint32_t x)
{
    uint64_t m = (x / 10000) | ((uint64_t)(x % 10000) << 32);
    uint64_t hi = ((m * 10486) >> 20) & 0x0000007f0000007full;
    m = hi | ((m - 100 * hi) << 16);
    hi = ((m * 103) >> 10) & 0x000f000f000f000full;
    m = hi | ((m - 10 * hi) << 8);
    return m + 0x3030303030303030ull;
}
#endif

/* tp_jsonw_put_u64_big - tp_jsonw_put_u64 for v >= 100 (jsonw.c). */
char *tp_jsonw_put_u64_big(char *p, uint64_t v);

/* tp_jsonw_put_u64 - the decimal digits of "v" at "p"; the end.  It
 * writes max(8, digits) <= 20 bytes: eight digits to a store (the first
 * store of a shorter number also writes up to 7 bytes past its end, for
 * the text after it to overwrite).  One and two digits (most of a
 * launch's: its block, grid, stream) here, inline; longer in jsonw.c. */
static inline char *tp_jsonw_put_u64(char *p, uint64_t v)
{
    if (__builtin_expect(v < 10, 1)) {
        *p = (char)('0' + v);
        return p + 1;
    }
    if (v < 100) {
        __builtin_memcpy(p, tp_jsonw_digits2 + 2 * v, 2);
        return p + 2;
    }
    return tp_jsonw_put_u64_big(p, v);
}

/* tp_jsonw_put_i64 - a signed decimal (21 bytes at most). */
static inline char *tp_jsonw_put_i64(char *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    if (v < 0) {
        *p++ = '-';
        u = 0 - u;
    }
    return tp_jsonw_put_u64(p, u);
}

/* tp_jsonw_put_us - nanoseconds as microseconds with exactly three
 * decimals (25 bytes at most): 1234567 -> 1234.567, -5 -> -0.005. */
static inline char *tp_jsonw_put_us(char *p, int64_t ns)
{
    uint64_t u = (uint64_t)ns;
    if (ns < 0) {
        *p++ = '-';
        u = 0 - u;
    }
    uint64_t us = u / 1000;
    unsigned f = (unsigned)(u - us * 1000);
    p = tp_jsonw_put_u64(p, us);
    p[0] = '.';
    p[1] = (char)('0' + f / 100);
    __builtin_memcpy(p + 2, tp_jsonw_digits2 + 2 * (f % 100), 2);
    return p + 4;
}

/* Room tp_jsonw_put_strn may take for "n" bytes: each byte becomes at most
 * 6 (\u00XX, or U+FFFD's 3 for 1), the quotes, and 16 bytes it may write
 * past its end (its last 1-15 bytes are stored as 16). */
#define TP_JSONW_STR_ROOM(n) (6 * (size_t)(n) + 18)

/* tp_jsonw_put_strn - tp_jsonw_strn's quoted string at "p", which has
 * TP_JSONW_STR_ROOM(n) bytes; the end. */
char *tp_jsonw_put_strn(char *p, const char *s, size_t n);

/* TP_JSONW_LIT - append a string literal (length known at compile time). */
#define TP_JSONW_LIT(w, lit) tp_jsonw_raw((w), "" lit, sizeof(lit) - 1)

/* tp_jsonw_lit - append a NUL-terminated text as it is (literal keys, punctuation). */
void tp_jsonw_lit(struct tp_jsonw *w, const char *s);

/* tp_jsonw_char - append one byte. */
void tp_jsonw_char(struct tp_jsonw *w, char c);

/*
 * tp_jsonw_printf - append formatted text (for reports; not per event).
 * Output longer than 4 KiB is cut.
 */
void tp_jsonw_printf(struct tp_jsonw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * tp_jsonw_str - append "s" as a quoted JSON string: '"' and '\' escaped,
 * bytes < 0x20 and 0x7f as \u00XX (Perfetto rejects any iscntrl byte), valid
 * UTF-8 kept, every byte that does not start a valid UTF-8 sequence (also
 * overlong forms, surrogates, > U+10FFFF) replaced by U+FFFD.  NULL writes "".
 */
void tp_jsonw_str(struct tp_jsonw *w, const char *s);

/* tp_jsonw_strn - tp_jsonw_str for the first "n" bytes of "s" (NUL bytes escaped). */
void tp_jsonw_strn(struct tp_jsonw *w, const char *s, size_t n);

/* tp_jsonw_strbody - like tp_jsonw_strn without the surrounding quotes. */
void tp_jsonw_strbody(struct tp_jsonw *w, const char *s, size_t n);

/* tp_jsonw_u64, tp_jsonw_i64 - append a decimal integer. */
void tp_jsonw_u64(struct tp_jsonw *w, uint64_t v);
void tp_jsonw_i64(struct tp_jsonw *w, int64_t v);

/*
 * tp_jsonw_us - append nanoseconds "ns" as microseconds with exactly three
 * decimals, without floating point: 1234567 -> 1234.567, -5 -> -0.005.
 */
void tp_jsonw_us(struct tp_jsonw *w, int64_t ns);

/*
 * tp_jsonw_double - append a JSON number for "v": integers without a
 * fraction, else %.15g if it reads back exactly, else %.17g; NaN and
 * infinities are written as 0.
 */
void tp_jsonw_double(struct tp_jsonw *w, double v);

/* tp_jsonw_u64_or_null, ... - the number when "have", else null (a figure
 * that does not apply: no CUPTI, no steps, no peak). */
void tp_jsonw_u64_or_null(struct tp_jsonw *w, int have, uint64_t v);
void tp_jsonw_i64_or_null(struct tp_jsonw *w, int have, int64_t v);
void tp_jsonw_double_or_null(struct tp_jsonw *w, int have, double v);

/*
 * tp_jsonw_fmt_u64 - write the decimal digits of "v" to "out" (at least 20
 * bytes), no NUL.  Returns the number of digits.
 */
size_t tp_jsonw_fmt_u64(char *out, uint64_t v);

#endif
