/*
 * test_merge_engine.c - the engine of `trainprof merge`
 * (scripts/trainprof_cli/merge/engine.c, included here): the rewrite rules of one
 * line (pids, flow ids, ts, metadata through the callback), the output as a
 * raw deflate stream whose CRC-32 and length the caller gets, the same
 * text whatever the number of compressor threads (TSan runs this under
 * make check-tsan), gzip members and plain input, the stop at the first
 * line that is not one event (the line before taken back), and the errors:
 * truncated gzip, an array without its end, a callback that refuses.
 */
#include "scripts/trainprof_cli/merge/engine.c"

#include <check.h>
#include "tests/unit/tp_test.h"

static char dir[64];

static void setup(void)
{
    tp_test_mkdtemp(dir, sizeof dir, "mergeeng");
}

static void teardown(void)
{
    tp_test_rmtree(dir);
}

/* Writes text to dir/name: plain, or gzip in `members` members. */
static char *put_file(const char *name, const char *text, size_t len, int members)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (members == 0) {
        ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    } else {
        size_t step = len / (size_t)members + 1;
        for (size_t a = 0; a < len; a += step) {
            size_t n = len - a < step ? len - a : step;
            z_stream z = {0};
            ck_assert_int_eq(deflateInit2(&z, 1, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY), Z_OK);
            uLong cap = deflateBound(&z, (uLong)n);
            unsigned char *out = malloc(cap);
            z.next_in = (Bytef *)(text + a);
            z.avail_in = (uInt)n;
            z.next_out = out;
            z.avail_out = (uInt)cap;
            ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
            ck_assert_uint_eq(fwrite(out, 1, z.total_out, f), z.total_out);
            deflateEnd(&z);
            free(out);
        }
    }
    fclose(f);
    return path;
}

struct result {
    struct tp_merge_job job;
    char *text;                 /* what the engine wrote, inflated */
    size_t len;
};

/* Runs the engine on path into a fresh file and reads back its text. */
static void run_engine(struct result *r, const char *path, uint64_t skip, int threads, int plain)
{
    char out[128];
    snprintf(out, sizeof out, "%s/out.%d.%d", dir, threads, plain);
    int fd = open(out, O_CREAT | O_TRUNC | O_RDWR, 0600);
    ck_assert_int_ge(fd, 0);
    r->job.path = path;
    r->job.skip = skip;
    r->job.out_fd = fd;
    r->job.threads = threads;
    r->job.plain = plain;
    tp_merge_events(&r->job);
    close(fd);
    size_t n = 0;
    char *raw = tp_test_slurp(out, &n);
    ck_assert_ptr_nonnull(raw);
    if (plain) {
        r->text = raw;
        r->len = n;
        return;
    }
    /* raw deflate without a final block: inflate until the input is used */
    size_t cap = 64 * n + 4096;
    r->text = malloc(cap);
    z_stream z = {0};
    ck_assert_int_eq(inflateInit2(&z, -15), Z_OK);
    z.next_in = (Bytef *)raw;
    z.avail_in = (uInt)n;
    z.next_out = (Bytef *)r->text;
    z.avail_out = (uInt)cap;
    int rc = inflate(&z, Z_SYNC_FLUSH);
    ck_assert(rc == Z_OK || rc == Z_BUF_ERROR);
    ck_assert_uint_eq(z.avail_in, 0);
    r->len = z.total_out;
    inflateEnd(&z);
    free(raw);
    ck_assert_uint_eq(r->job.text_bytes, r->len);
    ck_assert_uint_eq(r->job.crc, (uint32_t)crc32(0, (const Bytef *)r->text, (uInt)r->len));
}

static void done(struct result *r)
{
    tp_merge_free(&r->job);
    free(r->text);
}

static bool has_pid(const struct result *r, int64_t pid)
{
    for (uint64_t i = 0; i < r->job.npids; i++)
        if (r->job.pids[i] == pid)
            return true;
    return false;
}

#define SLOT 3
#define BASE ((int64_t)SLOT << 22)

START_TEST(test_rewrite_rules)
{
    const char *in =
        "{\n  \"traceEvents\": [\n"
        "{\"ph\": \"X\", \"pid\": 40000, \"tid\": 40000, \"ts\": 1.5, \"dur\": 2, \"args\": {\"External id\": 7}},\n"
        "{\"ph\": \"s\", \"pid\":7, \"ts\": 0.2, \"id\": 12},\n"
        "{\"ph\": \"f\", \"pid\": \"Spans\", \"ts\": 1.23456, \"bind_id\": 3, \"id\":5},\n"
        "{\"ph\": \"X\", \"pid\": -5, \"ts\": -2.25, \"args\": {\"pid\": -5000}},\n"
        "{\"ph\": \"X\", \"pid\": 123456789012345678901234, \"ts\": 7},\n"
        "{\"ph\": \"t\", \"pid\": 1, \"id\": 0, \"bind_id\": 0}\n"
        "  ],\n  \"traceName\": \"t\"\n}\n";
    const char *want =
        "{\"ph\": \"X\", \"pid\": 12622912, \"tid\": 40000, \"ts\": 0.500, \"dur\": 2, \"args\": {\"External id\": 7}},\n"
        "{\"ph\": \"s\", \"pid\": 12582919, \"ts\": -0.800, \"id\": 1207},\n"
        "{\"ph\": \"f\", \"pid\": 16777023, \"ts\": 0.234, \"bind_id\": 307, \"id\":507},\n"
        "{\"ph\": \"X\", \"pid\": 16777211, \"ts\": -3.250, \"args\": {\"pid\": 16776192}},\n"
        "{\"ph\": \"X\", \"pid\": 14069746, \"ts\": 6.000},\n"
        "{\"ph\": \"t\", \"pid\": 12582913, \"id\": 7, \"bind_id\": 7},\n";   /* 0 x 100 + 7 */
    /* the string pid: slot x 2^22 + 2^22 - 1 - crc32("\"Spans\"") % 1024 */
    int64_t spans = BASE + (1 << 22) - 1 - (int64_t)(crc32(0, (const Bytef *)"\"Spans\"", 7) % 1024);
    ck_assert_int_eq(spans, 16777023);
    ck_assert_int_eq(BASE + 1486834, 14069746);     /* 123456789012345678901234 mod 2^22 */
    const char *path = put_file("rules.json.gz", in, strlen(in), 1);
    struct result r = {.job = {.slot = SLOT, .suffix = "07", .shift_ns = -1000}};
    run_engine(&r, path, (uint64_t)(strchr(in, '[') + 1 - in), 0, 0);
    ck_assert_int_eq(r.job.status, 0);
    ck_assert_uint_eq(r.job.events, 6);
    ck_assert_uint_eq(r.len, strlen(want));
    ck_assert(memcmp(r.text, want, r.len) == 0);
    ck_assert_str_eq(r.job.trailer, ",\n  \"traceName\": \"t\"\n}\n");
    ck_assert_uint_eq(r.job.npids, 7);
    int64_t pids[] = {BASE + 40000, BASE + 7, spans, BASE + (1 << 22) - 5,
                      BASE + (1 << 22) - 1024, BASE + 1486834, BASE + 1};
    for (size_t i = 0; i < 7; i++)
        ck_assert_msg(has_pid(&r, pids[i]), "pid %lld", (long long)pids[i]);
    done(&r);
}
END_TEST

START_TEST(test_nothing_to_move)
{
    /* no suffix, no shift: ids and ts stay as written; "pid": 1.5 is seen
     * but not replaced, as the script does */
    const char *in = "[{\"pid\": 1.5, \"ts\": 1.23456, \"id\": 4},\n{\"pid\": 2}\n]";
    const char *path = put_file("plain.json", in, strlen(in), 0);
    struct result r = {.job = {.slot = 0}};
    run_engine(&r, path, 1, 0, 1);
    ck_assert_int_eq(r.job.status, 0);
    const char *want = "{\"pid\": 1.5, \"ts\": 1.23456, \"id\": 4},\n{\"pid\": 2},\n";
    ck_assert_uint_eq(r.len, strlen(want));
    ck_assert(memcmp(r.text, want, r.len) == 0);
    ck_assert_uint_eq(r.job.npids, 2);
    ck_assert_uint_eq(r.job.trailer_len, 0);
    done(&r);
}
END_TEST

static int meta_calls;

/* Wraps the line in {"was": ...}: first asks for more room once. */
static long meta_wrap(const char *line, size_t len, char *out, size_t cap)
{
    meta_calls++;
    size_t need = len + 9;
    if (cap < need || meta_calls == 1)
        return meta_calls == 1 ? (long)(cap + 1 > need ? cap + 1 : need) : (long)need;
    memcpy(out, "{\"was\": ", 8);
    memcpy(out + 8, line, len);
    out[8 + len] = '}';
    return (long)need;
}

static long meta_refuse(const char *line, size_t len, char *out, size_t cap)
{
    (void)line, (void)len, (void)out, (void)cap;
    return -1;
}

START_TEST(test_metadata_through_the_callback)
{
    const char *in = "[\n{\"ph\": \"M\", \"pid\": 9, \"name\": \"process_name\"},\n{\"ph\": \"X\", \"pid\": 9}\n]\n";
    const char *path = put_file("meta.json.gz", in, strlen(in), 1);
    struct result r = {.job = {.slot = 1, .meta = meta_wrap}};
    meta_calls = 0;
    run_engine(&r, path, 1, 0, 0);
    ck_assert_int_eq(r.job.status, 0);
    ck_assert_int_eq(meta_calls, 2);                /* asked once more, with room */
    const char *want = "{\"was\": {\"ph\": \"M\", \"pid\": 4194313, \"name\": \"process_name\"}},\n"
                       "{\"ph\": \"X\", \"pid\": 4194313},\n";
    ck_assert_uint_eq(r.len, strlen(want));
    ck_assert(memcmp(r.text, want, r.len) == 0);
    done(&r);

    struct result bad = {.job = {.slot = 1, .meta = meta_refuse}};
    run_engine(&bad, path, 1, 0, 0);
    ck_assert_int_eq(bad.job.status, -1);
    ck_assert_ptr_nonnull(strstr(bad.job.error, "metadata event is not valid JSON"));
    done(&bad);
}
END_TEST

/* About 26 MB of events: several pieces for the compressor threads. */
static char *many_events(size_t *len)
{
    size_t cap = 32u << 20, n = 0;
    char *t = malloc(cap);
    n += (size_t)sprintf(t, "{\"traceEvents\": [\n");
    for (int i = 0; n < (26u << 20); i++)
        n += (size_t)sprintf(t + n, "{\"ph\": \"X\", \"name\": \"kernel_%d\", \"pid\": %d, \"tid\": %d, "
                             "\"ts\": %d.%03d, \"dur\": 1.5, \"id\": %d},\n",
                             i % 977, 40000 + i % 3, i % 7, i, i % 1000, i);
    n -= 2;                                         /* the last event has no comma */
    n += (size_t)sprintf(t + n, "\n]}\n");
    *len = n;
    return t;
}

START_TEST(test_threads_write_the_same_text)
{
    size_t len;
    char *in = many_events(&len);
    const char *path = put_file("many.json.gz", in, len, 1);
    struct result one = {.job = {.slot = 2, .suffix = "5", .shift_ns = 123456}};
    run_engine(&one, path, 17, 0, 0);
    ck_assert_int_eq(one.job.status, 0);
    ck_assert_uint_gt(one.job.text_bytes, 3 * (size_t)PIECE);
    ck_assert_uint_eq(one.job.npids, 3);           /* no partial pid of an event cut by a read */
    for (int threads = 1; threads <= 4; threads += 3) {
        struct result r = {.job = {.slot = 2, .suffix = "5", .shift_ns = 123456}};
        run_engine(&r, path, 17, threads, 0);
        ck_assert_int_eq(r.job.status, 0);
        ck_assert_uint_eq(r.job.events, one.job.events);
        ck_assert_uint_eq(r.len, one.len);
        ck_assert(memcmp(r.text, one.text, r.len) == 0);
        done(&r);
    }
    /* the text is the input's lines, rewritten: one line per event */
    size_t lines = 0;
    for (size_t i = 0; i < one.len; i++)
        lines += one.text[i] == '\n';
    ck_assert_uint_eq(lines, one.job.events);
    ck_assert_ptr_nonnull(strstr(one.text, "\"pid\": 8428609, \"tid\": 1, \"ts\": 124.457, \"dur\": 1.5, \"id\": 15},\n"));
    done(&one);
    free(in);
}
END_TEST

START_TEST(test_members_and_plain_read_alike)
{
    size_t len;
    char *in = many_events(&len);
    struct result ref = {.job = {.slot = 1}};
    run_engine(&ref, put_file("one.json.gz", in, len, 1), 17, 1, 0);
    ck_assert_int_eq(ref.job.status, 0);
    struct result members = {.job = {.slot = 1}};
    run_engine(&members, put_file("members.json.gz", in, len, 5), 17, 1, 0);
    struct result plain = {.job = {.slot = 1}};
    run_engine(&plain, put_file("plain.json", in, len, 0), 17, 1, 0);
    for (struct result *r = &members; r; r = r == &members ? &plain : NULL) {
        ck_assert_int_eq(r->job.status, 0);
        ck_assert_uint_eq(r->len, ref.len);
        ck_assert(memcmp(r->text, ref.text, ref.len) == 0);
        ck_assert_str_eq(r->job.trailer, "}\n");
    }
    ck_assert_uint_eq(plain.job.read_bytes, len);
    done(&ref);
    done(&members);
    done(&plain);
    free(in);
}
END_TEST

/* Runs the engine on the plain text "in" from byte 1 (after "["). */
static void run_text(struct result *r, const char *name, const char *in)
{
    r->job.slot = 0;
    run_engine(r, put_file(name, in, strlen(in), 0), 1, 0, 1);
}

static void expect_text(const struct result *r, const char *want)
{
    ck_assert_msg(r->len == strlen(want) && memcmp(r->text, want, r->len) == 0,
                  "got \"%.*s\"", (int)r->len, r->text);
}

START_TEST(test_events_over_lines_and_on_one_line)
{
    /* an event over two lines, whose first line looks whole: read as one */
    struct result r = {0};
    run_text(&r, "split.json", "[\n{\"pid\": 1},\n{\"pid\": 2},\n{\"a\": {\"pid\": 3},\n\"b\": 4},\n{\"pid\": 5}\n]");
    ck_assert_int_eq(r.job.status, 0);
    ck_assert_uint_eq(r.job.events, 4);
    expect_text(&r, "{\"pid\": 1},\n{\"pid\": 2},\n{\"a\": {\"pid\": 3},\"b\": 4},\n{\"pid\": 5},\n");
    done(&r);

    /* Kineto's layout: an event of several indented lines becomes one line */
    struct result k = {0};
    run_text(&k, "kineto.json", "[\n  {\n    \"ph\": \"X\", \"pid\": 0, \"tid\": 7,\n    \"args\": {\n"
                                "      \"External id\": 5\n    }\n  },\n  {\n    \"ph\": \"i\", \"pid\": \"\"\n  }\n  ],\n"
                                "  \"traceName\": \"k\"\n}");
    ck_assert_int_eq(k.job.status, 0);
    ck_assert_uint_eq(k.job.events, 2);
    char want[256];                     /* pid "": 2^22 - 1 - crc32("\"\"") % 1024 */
    snprintf(want, sizeof want, "{\"ph\": \"X\", \"pid\": 0, \"tid\": 7,\"args\": {\"External id\": 5}},\n"
             "{\"ph\": \"i\", \"pid\": %lu},\n",
             (1ul << 22) - 1 - crc32(0, (const Bytef *)"\"\"", 2) % 1024);
    expect_text(&k, want);
    ck_assert_str_eq(k.job.trailer, ",\n  \"traceName\": \"k\"\n}");
    done(&k);

    /* keys and values over lines, kept as they are (a string pid before
     * a digit, a flow id): joined on one line (found by fuzz_merge) */
    struct result j = {.job = {.suffix = "3"}};
    j.job.slot = 0;
    const char *kv = "[{\"pid\"\n :\n \"x\"5, \"id\" :\n  12}]";
    run_engine(&j, put_file("kv.json", kv, strlen(kv), 0), 1, 0, 1);
    ck_assert_int_eq(j.job.status, 0);
    expect_text(&j, "{\"pid\":\"x\"5, \"id\" :123},\n");
    done(&j);

    /* json.dump's one line, and no space after the colons */
    struct result o = {0};
    run_text(&o, "one.json", "[{\"pid\":1, \"s\": \"}]\\\"{\"}, {\"pid\" : 2}], \"x\": 3}");
    ck_assert_int_eq(o.job.status, 0);
    ck_assert_uint_eq(o.job.events, 2);
    expect_text(&o, "{\"pid\": 1, \"s\": \"}]\\\"{\"},\n{\"pid\": 2},\n");
    ck_assert_str_eq(o.job.trailer, ", \"x\": 3}");
    done(&o);
}
END_TEST

START_TEST(test_what_is_not_an_event_goes_back)
{
    /* not an object, brackets that do not match: the caller goes on from
     * there (its json says what is wrong); what came before is written */
    /* (the third found by fuzz_merge: a raw line break in a string split
     * the event's line) */
    static const char *in[] = {"[{\"pid\": 1}, 2, {\"pid\": 3}]", "[{\"pid\": 1}, {\"a\": [1}, {}]",
                               "[{\"pid\": 1}, {\"}\n{\"}]"};
    static const char *at[] = {"2, {", "{\"a\"", "{\"}"};
    for (int i = 0; i < 3; i++) {
        struct result r = {0};
        run_text(&r, "bad.json", in[i]);
        ck_assert_int_eq(r.job.status, 1);
        ck_assert_uint_eq(r.job.events, 1);
        ck_assert_uint_eq(r.job.resume, (uint64_t)(strstr(in[i], at[i]) - in[i]));
        expect_text(&r, "{\"pid\": 1},\n");
        done(&r);
    }
}
END_TEST

START_TEST(test_errors_are_said)
{
    size_t len;
    char *in = many_events(&len);
    /* a gzip file cut in two */
    const char *full = put_file("full.json.gz", in, len, 1);
    size_t n = 0;
    char *raw = tp_test_slurp(full, &n);
    const char *cut = put_file("cut.json.gz", raw, n / 2, 0);
    struct result r = {.job = {.slot = 0}};
    run_engine(&r, cut, 17, 2, 0);
    ck_assert_int_eq(r.job.status, -1);
    ck_assert_ptr_nonnull(strstr(r.job.error, "truncated"));
    ck_assert_ptr_null(strchr(r.job.error, '\n'));
    done(&r);
    free(raw);
    free(in);

    /* an array that does not end */
    const char *open_ended = "[\n{\"pid\": 1},\n{\"pid\": 2},\n";
    struct result o = {.job = {.slot = 0}};
    run_engine(&o, put_file("open.json", open_ended, strlen(open_ended), 0), 1, 0, 1);
    ck_assert_int_eq(o.job.status, -1);
    ck_assert_ptr_nonnull(strstr(o.job.error, "does not end"));
    done(&o);

    /* no such file */
    struct tp_merge_job j = {.path = "/nonexistent/trace.json.gz", .out_fd = -1};
    ck_assert_int_eq(tp_merge_events(&j), -1);
    ck_assert_ptr_nonnull(strstr(j.error, "cannot open"));
    tp_merge_free(&j);
}
END_TEST

static Suite *merge_engine_suite(void)
{
    Suite *s = suite_create("merge_engine");
    TCase *t = tcase_create("merge_engine");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_rewrite_rules);
    tcase_add_test(t, test_nothing_to_move);
    tcase_add_test(t, test_metadata_through_the_callback);
    tcase_add_test(t, test_threads_write_the_same_text);
    tcase_add_test(t, test_members_and_plain_read_alike);
    tcase_add_test(t, test_events_over_lines_and_on_one_line);
    tcase_add_test(t, test_what_is_not_an_event_goes_back);
    tcase_add_test(t, test_errors_are_said);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(merge_engine_suite());
}
