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
#define TP_JSONW_GZIP_LEVEL 1

/* Where finished text goes: deflate (gzip) and write(2), or write(2) only. */
struct tp_jsonw_sink {
    int fd;
    int gzip;
    int err;                /* first errno of this sink */
    uint64_t bytes_out;     /* bytes written to fd */
    z_stream zs;
    unsigned char *zbuf;    /* TP_JSONW_BUF bytes of deflate output (gzip only) */
};

struct tp_jsonw_pipe;       /* the compressor thread, jsonw.c */

struct tp_jsonw {
    int err;                /* first errno, 0 = fine */
    size_t len;             /* bytes pending in "buf" */
    uint64_t bytes_in;      /* uncompressed bytes accepted so far */
    uint64_t bytes_out;     /* bytes written to fd, valid after tp_jsonw_finish */
    char *buf;              /* TP_JSONW_BUF bytes of text being filled */
    struct tp_jsonw_sink sink;  /* owned by the compressor thread while "pipe" runs */
    struct tp_jsonw_pipe *pipe; /* NULL: the caller's thread compresses */
};

/*
 * tp_jsonw_init - start writing to "fd" (not closed by the writer).
 * gzip: 0 plain text; 1 one gzip member (deflateInit2, windowBits 15+16)
 * at zlib "level" (-1..9; TP_JSONW_GZIP_LEVEL is the default), compressed
 * on a helper thread ("tp-gzip", all signals blocked) while the caller
 * formats the next buffers; if the thread cannot be started, inline.
 * Returns 0, or -1 with w->err and errno set (w may still be passed to
 * every other function, and must be passed to tp_jsonw_finish).
 */
int tp_jsonw_init(struct tp_jsonw *w, int fd, int gzip, int level);

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
    if (__builtin_expect(w->len + n <= TP_JSONW_BUF && w->buf != NULL, 1)) {
        __builtin_memcpy(w->buf + w->len, s, n);
        w->len += n;
        w->bytes_in += n;
    } else {
        tp_jsonw_raw_slow(w, s, n);
    }
}

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
