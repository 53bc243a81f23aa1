/*
 * test_jsonw.c - the streaming JSON writer: escaping (quotes, backslashes,
 * every control byte, invalid UTF-8, multi-byte UTF-8 kept), microsecond
 * and integer formatting, doubles that are never NaN/Inf, gzip as exactly
 * one member, sticky write errors, and the writer's throughput (printed).
 * The cursor's formatters (tp_jsonw_put_*) against snprintf at every power
 * of ten and its neighbours, the limits and random values of every length,
 * and its string escaper against the streaming one (tp_jsonw_strbody) on
 * random hostile bytes, within its room; gzip by ISA-L where it loads.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <zlib.h>

#include "handlers/jsonw.h"
#include "tests/unit/tp_test.h"

/* A writer on a fresh temporary file; out_fd keeps it readable. */
static int tmp_fd(void)
{
    char path[] = "/tmp/tp-jsonw-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    return fd;
}

static char *read_all(int fd, size_t *len)
{
    off_t n = lseek(fd, 0, SEEK_END);
    ck_assert_int_ge(n, 0);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(pread(fd, buf, (size_t)n, 0), n);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

/* Text produced by "fill" through a plain writer, NUL-terminated. */
static char *render(void (*fill)(struct tp_jsonw *, const void *), const void *arg)
{
    int fd = tmp_fd();
    struct tp_jsonw w;
    ck_assert_int_eq(tp_jsonw_init(&w, fd, 0, 0), 0);
    fill(&w, arg);
    ck_assert_int_eq(tp_jsonw_finish(&w), 0);
    size_t n;
    char *s = read_all(fd, &n);
    close(fd);
    return s;
}

struct bytes { const char *p; size_t n; };

static void fill_str(struct tp_jsonw *w, const void *arg)
{
    const struct bytes *b = arg;
    tp_jsonw_strn(w, b->p, b->n);
}

static void fill_null(struct tp_jsonw *w, const void *arg)
{
    (void)arg;
    tp_jsonw_str(w, NULL);
}

static char *esc(const char *p, size_t n)
{
    struct bytes b = { p, n };
    return render(fill_str, &b);
}

#define ESC_EQ(in, expect) do { \
        char *got_ = esc((in), sizeof(in) - 1); \
        ck_assert_str_eq(got_, (expect)); \
        free(got_); \
    } while (0)

START_TEST(test_escape_basic)
{
    ESC_EQ("plain", "\"plain\"");
    ESC_EQ("", "\"\"");
    ESC_EQ("a\"b\\c", "\"a\\\"b\\\\c\"");
    ESC_EQ("tab\there\nnl\rcr", "\"tab\\there\\nnl\\rcr\"");
    ESC_EQ("/slash", "\"/slash\"");
    ESC_EQ("del\x7f", "\"del\\u007f\"");

    char *s = render(fill_null, NULL);
    ck_assert_str_eq(s, "\"\"");
    free(s);
}
END_TEST

START_TEST(test_escape_all_controls)
{
    char in[33];
    for (int i = 0; i < 32; i++)
        in[i] = (char)i;
    in[32] = 0x7f;
    char *out = esc(in, sizeof in);
    for (const char *p = out; *p; p++)
        ck_assert_msg((unsigned char)*p >= 0x20 && *p != 0x7f, "raw control byte in %s", out);
    ck_assert_ptr_nonnull(strstr(out, "\\u0000"));
    ck_assert_ptr_nonnull(strstr(out, "\\u001f"));
    ck_assert_ptr_nonnull(strstr(out, "\\u007f"));
    json_error_t err;
    json_t *v = json_loads(out, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    ck_assert_msg(v != NULL, "not JSON: %s: %s", out, err.text);
    ck_assert_int_eq(json_string_length(v), sizeof in);
    ck_assert_mem_eq(json_string_value(v), in, sizeof in);
    json_decref(v);
    free(out);
}
END_TEST

START_TEST(test_escape_utf8)
{
    /* valid 2-, 3- and 4-byte sequences are kept as they are */
    ESC_EQ("\xc3\xa9t\xc3\xa9", "\"\xc3\xa9t\xc3\xa9\"");
    ESC_EQ("\xe2\x82\xac", "\"\xe2\x82\xac\"");
    ESC_EQ("\xf0\x9f\x98\x80!", "\"\xf0\x9f\x98\x80!\"");
    ESC_EQ("\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"");
    ESC_EQ("\xef\xbf\xbd", "\"\xef\xbf\xbd\"");

#define FFFD "\xef\xbf\xbd"
    ESC_EQ("\xff", "\"" FFFD "\"");
    ESC_EQ("a\x80z", "\"a" FFFD "z\"");
    ESC_EQ("\xc0\xaf", "\"" FFFD FFFD "\"");              /* overlong '/' */
    ESC_EQ("\xe0\x80\xaf", "\"" FFFD FFFD FFFD "\"");     /* overlong */
    ESC_EQ("\xed\xa0\x80", "\"" FFFD FFFD FFFD "\"");     /* surrogate */
    ESC_EQ("\xf4\x90\x80\x80", "\"" FFFD FFFD FFFD FFFD "\""); /* > U+10FFFF */
    ESC_EQ("\xf5\x80", "\"" FFFD FFFD "\"");
    ESC_EQ("x\xe2\x82", "\"x" FFFD FFFD "\"");             /* truncated at the end */
    ESC_EQ("\xe2\x82" "A", "\"" FFFD FFFD "A\"");          /* truncated mid-string */
    ESC_EQ("\xf0\x9f\x98", "\"" FFFD FFFD FFFD "\"");
#undef FFFD

    const char hostile[] = "k<\"\\\n\x01\xff\xfe\xc3(\xf0\x9f\x98\x80>";
    char *out = esc(hostile, sizeof hostile - 1);
    json_error_t err;
    json_t *v = json_loads(out, JSON_DECODE_ANY, &err);
    ck_assert_msg(v != NULL, "invalid JSON/UTF-8: %s", err.text);
    ck_assert_str_eq(json_string_value(v),
                     "k<\"\\\n\x01\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd(\xf0\x9f\x98\x80>");
    json_decref(v);
    free(out);
}
END_TEST

START_TEST(test_escape_long)
{
    static const char unit[] = "ab\"\\\n\x01\xc3\xa9\xff";
    static const char decoded[] = "ab\"\\\n\x01\xc3\xa9\xef\xbf\xbd";
    size_t reps = 40000, un = sizeof unit - 1, dn = sizeof decoded - 1;
    ck_assert_uint_gt(reps * un, 3 * TP_JSONW_BUF);
    char *in = malloc(reps * un);
    ck_assert_ptr_nonnull(in);
    for (size_t i = 0; i < reps; i++)
        memcpy(in + i * un, unit, un);
    char *out = esc(in, reps * un);
    json_t *v = json_loads(out, JSON_DECODE_ANY, NULL);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(json_string_length(v), reps * dn);
    const char *d = json_string_value(v);
    for (size_t i = 0; i < reps; i++)
        ck_assert_mem_eq(d + i * dn, decoded, dn);
    json_decref(v);
    free(out);
    free(in);
}
END_TEST

static void fill_us(struct tp_jsonw *w, const void *arg)
{
    tp_jsonw_us(w, *(const int64_t *)arg);
}

static void fill_i64(struct tp_jsonw *w, const void *arg)
{
    tp_jsonw_i64(w, *(const int64_t *)arg);
}

static void fill_u64(struct tp_jsonw *w, const void *arg)
{
    tp_jsonw_u64(w, *(const uint64_t *)arg);
}

static void fill_double(struct tp_jsonw *w, const void *arg)
{
    tp_jsonw_double(w, *(const double *)arg);
}

START_TEST(test_us)
{
    static const struct { int64_t ns; const char *s; } cases[] = {
        { 0, "0.000" }, { 1, "0.001" }, { 999, "0.999" }, { 1000, "1.000" },
        { 1001, "1.001" }, { 1010, "1.010" }, { 1100, "1.100" }, { 1234567, "1234.567" },
        { 86400000000000LL, "86400000000.000" }, { -5, "-0.005" }, { -1234567, "-1234.567" },
        { INT64_MAX, "9223372036854775.807" }, { INT64_MIN, "-9223372036854775.808" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = render(fill_us, &cases[i].ns);
        ck_assert_str_eq(s, cases[i].s);
        free(s);
    }
}
END_TEST

START_TEST(test_integers)
{
    static const struct { uint64_t v; const char *s; } u[] = {
        { 0, "0" }, { 9, "9" }, { 10, "10" }, { 99, "99" }, { 100, "100" }, { 101, "101" },
        { 12345678901ull, "12345678901" }, { UINT64_MAX, "18446744073709551615" },
    };
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        char *s = render(fill_u64, &u[i].v);
        ck_assert_str_eq(s, u[i].s);
        free(s);
    }
    static const struct { int64_t v; const char *s; } d[] = {
        { 0, "0" }, { -1, "-1" }, { 42, "42" }, { INT64_MAX, "9223372036854775807" },
        { INT64_MIN, "-9223372036854775808" },
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        char *s = render(fill_i64, &d[i].v);
        ck_assert_str_eq(s, d[i].s);
        free(s);
    }
}
END_TEST

START_TEST(test_doubles)
{
    static const struct { double v; const char *s; } d[] = {
        { 0.0, "0" }, { 3.0, "3" }, { -2.0, "-2" }, { 0.5, "0.5" }, { 0.1, "0.1" },
        { 1e300, "1.0000000000000001e+300" }, { 1e-7, "9.9999999999999995e-08" },
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        char *s = render(fill_double, &d[i].v);
        ck_assert_msg(strtod(s, NULL) == d[i].v, "%s does not read back as %.17g", s, d[i].v);
        json_t *v = json_loads(s, JSON_DECODE_ANY, NULL);
        ck_assert_ptr_nonnull(v);
        json_decref(v);
        free(s);
    }
    const double bad[] = { NAN, -NAN, INFINITY, -INFINITY };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *s = render(fill_double, &bad[i]);
        ck_assert_str_eq(s, "0");
        free(s);
    }
}
END_TEST


START_TEST(test_gzip_one_member)
{
    int fd = tmp_fd();
    struct tp_jsonw w;
    ck_assert_int_eq(tp_jsonw_init(&w, fd, 1, TP_JSONW_GZIP_LEVEL), 0);
    char *expect = malloc(4u << 20);
    size_t en = 0;
    tp_jsonw_lit(&w, "[");
    en += (size_t)sprintf(expect + en, "[");
    for (int i = 0; i < 50000; i++) {
        tp_jsonw_lit(&w, i ? ",\n{\"i\": " : "\n{\"i\": ");
        tp_jsonw_i64(&w, i);
        tp_jsonw_lit(&w, ", \"ts\": ");
        tp_jsonw_us(&w, (int64_t)i * 1234567);
        tp_jsonw_lit(&w, ", \"s\": ");
        tp_jsonw_str(&w, "q\"x");
        tp_jsonw_char(&w, '}');
        en += (size_t)sprintf(expect + en, "%s{\"i\": %d, \"ts\": %lld.%03lld, \"s\": \"q\\\"x\"}",
                              i ? ",\n" : "\n", i, (long long)i * 1234567 / 1000,
                              (long long)i * 1234567 % 1000);
    }
    tp_jsonw_lit(&w, "\n]\n");
    en += (size_t)sprintf(expect + en, "\n]\n");
    ck_assert_uint_eq(w.bytes_in, en);
    ck_assert_int_eq(tp_jsonw_finish(&w), 0);
    ck_assert_int_eq(tp_jsonw_finish(&w), 0);

    size_t zn, n;
    char *z = read_all(fd, &zn);
    ck_assert_uint_eq((unsigned char)z[0], 0x1f);
    ck_assert_uint_eq((unsigned char)z[1], 0x8b);
    ck_assert_uint_eq((unsigned char)z[2], 8);
    char *text = tp_test_gunzip_one(z, zn, &n);
    ck_assert_uint_eq(n, en);
    ck_assert_mem_eq(text, expect, n);
    json_t *v = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(json_array_size(v), 50000);
    json_decref(v);
    free(text);
    free(z);
    free(expect);
    close(fd);
}
END_TEST

START_TEST(test_gzip_empty)
{
    int fd = tmp_fd();
    struct tp_jsonw w;
    ck_assert_int_eq(tp_jsonw_init(&w, fd, 1, TP_JSONW_GZIP_LEVEL), 0);
    ck_assert_int_eq(tp_jsonw_finish(&w), 0);
    size_t zn, n;
    char *z = read_all(fd, &zn);
    char *text = tp_test_gunzip_one(z, zn, &n);
    ck_assert_uint_eq(n, 0);
    free(text);
    free(z);
    close(fd);
}
END_TEST

START_TEST(test_write_error_sticky)
{
    int fd = open("/dev/full", O_WRONLY);
    if (fd < 0)
        return;
    for (int gz = 0; gz < 2; gz++) {
        struct tp_jsonw w;
        ck_assert_int_eq(tp_jsonw_init(&w, fd, gz, TP_JSONW_GZIP_LEVEL), 0);
        for (int i = 0; i < 200000; i++) {
            tp_jsonw_str(&w, "some text that fills the buffer");
            tp_jsonw_u64(&w, (uint64_t)i * 7919);
        }
        ck_assert_int_eq(tp_jsonw_finish(&w), ENOSPC);
    }
    close(fd);

    struct tp_jsonw w;
    ck_assert_int_eq(tp_jsonw_init(&w, -1, 0, 0), 0);
    tp_jsonw_lit(&w, "x");
    ck_assert_int_eq(tp_jsonw_finish(&w), EBADF);
}
END_TEST

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* An event shaped like chrome's launch lines, through the writer only. */
START_TEST(test_throughput)
{
    int fd = open("/dev/null", O_WRONLY);
    ck_assert_int_ge(fd, 0);
    /* a million events, or 50,000 with TP_TEST_QUICK set (scripts/dev/
     * check-arm64 under qemu, where a million take half a minute) */
    const int n = getenv("TP_TEST_QUICK") ? 50000 : 1000000;
    for (int gz = 1; gz >= 0; gz--) {
        struct tp_jsonw w;
        ck_assert_int_eq(tp_jsonw_init(&w, fd, gz, TP_JSONW_GZIP_LEVEL), 0);
        double t0 = now_s();
        int64_t ts = 1234567890123LL;
        for (int i = 0; i < n; i++) {
            tp_jsonw_lit(&w, ",\n{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": ");
            tp_jsonw_str(&w, "cudaLaunchKernel");
            tp_jsonw_lit(&w, ", \"pid\": ");
            tp_jsonw_i64(&w, 4242);
            tp_jsonw_lit(&w, ", \"tid\": ");
            tp_jsonw_i64(&w, 4242 + (i & 3));
            tp_jsonw_lit(&w, ", \"ts\": ");
            tp_jsonw_us(&w, ts);
            tp_jsonw_lit(&w, ", \"dur\": ");
            tp_jsonw_us(&w, 2345 + (i % 977));
            tp_jsonw_lit(&w, ", \"args\": {\"correlation\": ");
            tp_jsonw_u64(&w, (uint64_t)i + 1);
            tp_jsonw_lit(&w, ", \"cbid\": 211, \"kernel\": ");
            tp_jsonw_str(&w, (i & 1) ? "void gemm_kernel<float, 128>(float const*, float*, int)"
                                     : "elementwise_add_kernel");
            tp_jsonw_lit(&w, ", \"grid\": [");
            tp_jsonw_u64(&w, 1024);
            tp_jsonw_lit(&w, ", 1, 1], \"block\": [256, 1, 1], \"shared memory\": 0, \"cuda stream\": ");
            tp_jsonw_u64(&w, 0);
            tp_jsonw_lit(&w, "}}");
            ts += 3000 + (i % 1013);
        }
        uint64_t bytes = w.bytes_in, zbytes = 0;
        ck_assert_int_eq(tp_jsonw_finish(&w), 0);
        zbytes = w.bytes_out;
        double dt = now_s() - t0;
        fprintf(stderr, "jsonw throughput (%s): %.2f M events/s, %.0f MB/s of text, %.1f bytes/event, %llu bytes out\n",
                gz ? "gzip level 1" : "plain", n / dt / 1e6, (double)bytes / dt / 1e6,
                (double)bytes / n, (unsigned long long)zbytes);
    }
    close(fd);
}
END_TEST

/* A xorshift64 stream: the same values on every run. */
static uint64_t rnd_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* tp_jsonw_put_u64 and tp_jsonw_u64_len of "v" against snprintf's %PRIu64. */
static void check_u64(uint64_t v)
{
    char want[32], got[32];
    int n = snprintf(want, sizeof want, "%" PRIu64, v);
    memset(got, 'x', sizeof got);
    char *end = tp_jsonw_put_u64(got, v);
    ck_assert_msg(end - got == n, "%s: %d digits written, snprintf %d", want, (int)(end - got), n);
    ck_assert_msg(memcmp(got, want, (size_t)n) == 0, "%.*s for %s", n, got, want);
    ck_assert_uint_eq(tp_jsonw_u64_len(v), (unsigned)n);
    /* nothing past max(8, digits): a shorter number's one store of eight
     * digits may write past its end, never further */
    size_t i = n < 8 ? 8 : (size_t)n;
    while (i < sizeof got && got[i] == 'x')
        i++;
    ck_assert_msg(i == sizeof got, "%s: byte %zu written", want, i);   /* one check: each is a write in a fork */
}

static void check_i64(int64_t v)
{
    char want[32], got[32];
    int n = snprintf(want, sizeof want, "%" PRId64, v);
    char *end = tp_jsonw_put_i64(got, v);
    ck_assert_msg(end - got == n && memcmp(got, want, (size_t)n) == 0, "%.*s for %s",
                  (int)(end - got), got, want);
}

/* Microseconds with three decimals: the integer part and the remainder
 * printed by snprintf (exact: a ns count has three decimals in us). */
static void check_us(int64_t ns)
{
    char want[40], got[40];
    uint64_t u = ns < 0 ? 0 - (uint64_t)ns : (uint64_t)ns;
    int n = snprintf(want, sizeof want, "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", u / 1000,
                     (unsigned)(u % 1000));
    char *end = tp_jsonw_put_us(got, ns);
    ck_assert_msg(end - got == n && memcmp(got, want, (size_t)n) == 0, "%.*s for %s",
                  (int)(end - got), got, want);
    ck_assert_int_le(n, 25);
}

START_TEST(test_put_numbers_vs_snprintf)
{
    check_u64(0);
    check_u64(UINT64_MAX);
    check_u64(UINT64_MAX - 1);
    check_u64((uint64_t)INT64_MAX);
    check_u64((uint64_t)INT64_MAX + 1);
    for (uint64_t p = 1;; p *= 10) {   /* 10^k - 1, 10^k, 10^k + 1 */
        check_u64(p - 1);
        check_u64(p);
        check_u64(p + 1);
        if (p > UINT64_MAX / 10)
            break;
    }
    for (int b = 0; b < 64; b++) {      /* every bit length's ends */
        check_u64(UINT64_C(1) << b);
        check_u64((UINT64_C(1) << b) - 1);
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 200000; i++) {
        uint64_t r = rnd_next(&x);
        check_u64(r >> (i % 64));        /* values of every length */
        check_i64((int64_t)(r >> (i % 64)) * ((i & 1) ? -1 : 1));
        check_us((int64_t)(r >> (i % 64)) * ((i & 2) ? -1 : 1));
    }
    static const int64_t edges[] = {
        0, 1, -1, 9, 10, 99, 100, 999, 1000, 1001, 1999, -999, -1000, -1001, 123456789,
        INT64_MAX, INT64_MIN, INT64_MIN + 1, INT64_MAX - 999,
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        check_i64(edges[i]);
        check_us(edges[i]);
    }
}
END_TEST

static void fill_strbody(struct tp_jsonw *w, const void *arg)
{
    const struct bytes *b = arg;
    tp_jsonw_char(w, '"');
    tp_jsonw_strbody(w, b->p, b->n);
    tp_jsonw_char(w, '"');
}

/* tp_jsonw_put_strn, the whole string in one room, writes what the
 * streaming escaper writes, and nothing past TP_JSONW_STR_ROOM. */
START_TEST(test_put_strn_vs_strbody)
{
    static const unsigned char alphabet[] = {
        'a', 'Z', ' ', '"', '\\', '/', 0x00, 0x01, 0x1f, 0x7f, 0x80, 0xbf, 0xc3, 0xa9, 0xe2, 0x82,
        0xac, 0xf0, 0x9f, 0x98, 0x80, 0xed, 0xa0, 0xff, 0xc0, 0xf5, '\n', '\t', '\r', 'q',
    };
    uint64_t x = 12345;
    unsigned char in[64];
    char out[6 * 64 + 10 + 16];
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = (size_t)(rnd_next(&x) % 41);
        int plain = iter % 3 == 0;  /* mostly plain runs, to reach the 16-byte path */
        for (size_t i = 0; i < n; i++) {
            uint64_t r = rnd_next(&x);
            in[i] = plain && r % 8 ? (unsigned char)('a' + r % 26) : alphabet[r % sizeof alphabet];
        }
        struct bytes b = { (const char *)in, n };
        char *want = render(fill_strbody, &b);
        size_t room = TP_JSONW_STR_ROOM(n);
        memset(out, '#', sizeof out);
        char *end = tp_jsonw_put_strn(out, (const char *)in, n);
        size_t len = (size_t)(end - out);
        ck_assert_uint_le(len, room);
        ck_assert_msg(len == strlen(want) && memcmp(out, want, len) == 0,
                      "iteration %d: %.*s against %s", iter, (int)len, out, want);
        for (size_t i = room; i < sizeof out; i++)
            ck_assert_int_eq(out[i], '#');
        free(want);
    }
}
END_TEST

/* The text of test_gzip_one_member's kind through "gzip" (TP_JSONW_GZIP
 * or TP_JSONW_GZIP_ZLIB): one member, the text back. */
static void check_gzip_roundtrip(int gzip)
{
    int fd = tmp_fd();
    struct tp_jsonw w;
    ck_assert_int_eq(tp_jsonw_init(&w, fd, gzip, TP_JSONW_GZIP_LEVEL), 0);
    size_t cap = 16u << 20, en = 0;
    char *expect = malloc(cap);
    uint64_t x = 7;
    for (int i = 0; i < 200000; i++) {
        char line[96];
        int n = snprintf(line, sizeof line, "{\"i\": %d, \"r\": %" PRIu64 "},\n", i, rnd_next(&x) % 1000);
        tp_jsonw_raw(&w, line, (size_t)n);
        memcpy(expect + en, line, (size_t)n);
        en += (size_t)n;
    }
    ck_assert_int_eq(tp_jsonw_finish(&w), 0);
    size_t zn, n;
    char *z = read_all(fd, &zn);
    ck_assert_uint_eq((unsigned char)z[0], 0x1f);
    ck_assert_uint_eq((unsigned char)z[1], 0x8b);
    char *text = tp_test_gunzip_one(z, zn, &n);
    ck_assert_uint_eq(n, en);
    ck_assert_mem_eq(text, expect, n);
    ck_assert_uint_lt(zn, en / 4);   /* compressed */
    free(text);
    free(z);
    free(expect);
    close(fd);
}

/* Where libisal.so.2 loads (LD_LIBRARY_PATH may point at one), gzip goes
 * through it and still makes one member with the same text; zlib stays
 * available; where it does not, both are zlib's. */
START_TEST(test_gzip_isal_or_zlib)
{
    int isal = tp_jsonw_load();
    ck_assert_int_eq(tp_jsonw_load(), isal);   /* once */
    ck_assert_str_eq(tp_jsonw_gzip_name(), isal ? "isal" : "zlib");
    fprintf(stderr, "jsonw: gzip level 1 by %s\n", tp_jsonw_gzip_name());
    check_gzip_roundtrip(TP_JSONW_GZIP);
    check_gzip_roundtrip(TP_JSONW_GZIP_ZLIB);
    /* an empty member too */
    int fd = tmp_fd();
    struct tp_jsonw w;
    ck_assert_int_eq(tp_jsonw_init(&w, fd, TP_JSONW_GZIP, TP_JSONW_GZIP_LEVEL), 0);
    ck_assert_int_eq(tp_jsonw_finish(&w), 0);
    size_t zn, n;
    char *z = read_all(fd, &zn);
    char *text = tp_test_gunzip_one(z, zn, &n);
    ck_assert_uint_eq(n, 0);
    free(text);
    free(z);
    close(fd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jsonw");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_escape_basic);
    tcase_add_test(tc, test_escape_all_controls);
    tcase_add_test(tc, test_escape_utf8);
    tcase_add_test(tc, test_escape_long);
    tcase_add_test(tc, test_us);
    tcase_add_test(tc, test_integers);
    tcase_add_test(tc, test_doubles);
    tcase_add_test(tc, test_gzip_one_member);
    tcase_add_test(tc, test_gzip_empty);
    tcase_add_test(tc, test_write_error_sticky);
    tcase_add_test(tc, test_put_numbers_vs_snprintf);
    tcase_add_test(tc, test_put_strn_vs_strbody);
    tcase_add_test(tc, test_gzip_isal_or_zlib);
    tcase_add_test(tc, test_throughput);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
