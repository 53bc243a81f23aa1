/*
 * test_coverage.c - handlers/coverage.c, the one writer of the coverage
 * object: the bytes under the trace's names and under summary.json's, with
 * CUPTI's figures (a ratio below 1) and without them (nulls), as the two
 * writers it replaced in chrome.c (now chrome_header.c) and summary_json.c wrote
 * them.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handlers/handler.h"
#include "handlers/jsonw.h"
#include "tests/unit/tp_test.h"

static const struct tp_coverage_keys trace_keys = {
    .launches = "launches_seen_by_wrappers",
    .kernels = "kernels_seen_by_cupti",
    .linked = "kernels_linked_to_launches",
    .records = "device_records",
    .dropped = "device_records_dropped",
};
static const struct tp_coverage_keys summary_keys = {
    .launches = "host_launches",
    .kernels = "gpu_kernels",
    .linked = "gpu_kernels_linked",
};

static char *render(const struct tp_window *w, const struct tp_coverage_keys *k)
{
    char path[] = "/tmp/tp-coverage-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    struct tp_jsonw j;
    ck_assert_int_eq(tp_jsonw_init(&j, fd, 0, 0), 0);
    tp_coverage_put(&j, w, k);
    ck_assert_int_eq(tp_jsonw_finish(&j), 0);
    off_t n = lseek(fd, 0, SEEK_END);
    char *s = calloc(1, (size_t)n + 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(pread(fd, s, (size_t)n, 0), n);
    close(fd);
    return s;
}

START_TEST(test_with_cupti)
{
    struct tp_window w;
    memset(&w, 0, sizeof w);
    w.gpu = 1;
    w.host_launches = 3;
    w.gpu_kernels = 4;
    w.gpu_kernels_linked = 3;
    w.coverage = 0.75;
    w.gpu_records = 9;
    w.gpu_dropped = 2;
    char *t = render(&w, &trace_keys), *s = render(&w, &summary_keys);
    ck_assert_str_eq(t, "{\"launches_seen_by_wrappers\": 3, \"kernels_seen_by_cupti\": 4, "
                        "\"kernels_linked_to_launches\": 3, \"ratio\": 0.75, \"device_records\": 9, "
                        "\"device_records_dropped\": 2}");
    ck_assert_str_eq(s, "{\"host_launches\": 3, \"gpu_kernels\": 4, \"gpu_kernels_linked\": 3, "
                        "\"ratio\": 0.75}");
    free(t);
    free(s);
}
END_TEST

START_TEST(test_without_cupti)
{
    struct tp_window w;
    memset(&w, 0, sizeof w);
    w.host_launches = 16;
    w.gpu_kernels = 5; /* not shown: CUPTI did not run */
    w.coverage = -1;
    char *t = render(&w, &trace_keys), *s = render(&w, &summary_keys);
    ck_assert_str_eq(t,
                     "{\"launches_seen_by_wrappers\": 16, \"kernels_seen_by_cupti\": null, "
                     "\"kernels_linked_to_launches\": null, \"ratio\": null, \"device_records\": 0, "
                     "\"device_records_dropped\": 0}");
    ck_assert_str_eq(s,
                     "{\"host_launches\": 16, \"gpu_kernels\": null, \"gpu_kernels_linked\": null, "
                     "\"ratio\": null}");
    free(t);
    free(s);
    w.gpu = 1; /* CUPTI ran, no ratio (no launch to link) */
    s = render(&w, &summary_keys);
    ck_assert_str_eq(s, "{\"host_launches\": 16, \"gpu_kernels\": 5, \"gpu_kernels_linked\": 0, "
                        "\"ratio\": null}");
    free(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("coverage");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_with_cupti);
    tcase_add_test(tc, test_without_cupti);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
