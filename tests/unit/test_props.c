/*
 * test_props.c - occupancy from cuda_occupancy.h on a hand-filled H100
 * (H100 SXM: 2048 threads, 65536 registers, 32 blocks and 228 KiB shared
 * memory per SM, 1 KiB reserved per block), with values worked out by hand;
 * and the device table read from the fake driver (build/fakes/libcuda.so.1)
 * only once the process has loaded it and called cuInit.
 */
#include <check.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "collector/device/props.h"
#include "tests/unit/tp_test.h"

static struct tp_device_prop h100(void)
{
    struct tp_device_prop d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "H100-like");
    d.compute_major = 9;
    d.compute_minor = 0;
    d.max_threads_per_block = 1024;
    d.max_threads_per_sm = 2048;
    d.regs_per_block = 65536;
    d.regs_per_sm = 65536;
    d.warp_size = 32;
    d.smem_per_block = 49152;
    d.smem_per_sm = 233472;
    d.smem_per_block_optin = 232448;
    d.reserved_smem_per_block = 1024;
    d.num_sms = 132;
    return d;
}

START_TEST(test_register_bound)
{
    struct tp_device_prop d = h100();
    /* 32 regs x 256 threads = 8192 per block: 8 blocks = 2048 threads */
    ck_assert_double_eq_tol(tp_device_props_occupancy(&d, 32, 0, 0, 256, 1000.0), 100.0, 1e-9);
    /* 64 regs: 16384 per block, 4 blocks x 256 / 2048 */
    ck_assert_double_eq_tol(tp_device_props_occupancy(&d, 64, 0, 0, 256, 1000.0), 50.0, 1e-9);
    /* 255 regs round up to 256 per thread: 256 x 32 = 8192 per warp, 8
     * warps per SM: 2 blocks of 128 threads = 256 / 2048 */
    ck_assert_double_eq_tol(tp_device_props_occupancy(&d, 255, 0, 0, 128, 1000.0), 12.5, 1e-9);
}
END_TEST

START_TEST(test_grid_bound)
{
    struct tp_device_prop d = h100();
    /* the calculator allows 8 blocks; the grid only gives 2 per SM */
    ck_assert_double_eq_tol(tp_device_props_occupancy(&d, 32, 0, 0, 256, 2.0), 25.0, 1e-9);
    ck_assert_double_eq_tol(tp_device_props_occupancy(&d, 32, 0, 0, 256, 0.5), 6.25, 1e-9);
}
END_TEST

START_TEST(test_shared_memory_bound)
{
    struct tp_device_prop d = h100();
    /* 48 KiB static + 1 KiB reserved per block: 233472 / 50176 -> 4 blocks
     * of 128 threads = 512 / 2048 */
    ck_assert_double_eq_tol(tp_device_props_occupancy(&d, 16, 49152, 0, 128, 1000.0), 25.0, 1e-9);
    /* the same split between static and dynamic */
    ck_assert_double_eq_tol(tp_device_props_occupancy(&d, 16, 16384, 32768, 128, 1000.0), 25.0, 1e-9);
}
END_TEST

START_TEST(test_invalid)
{
    struct tp_device_prop d = h100();
    ck_assert_double_eq(tp_device_props_occupancy(NULL, 32, 0, 0, 256, 1.0), -1);
    ck_assert_double_eq(tp_device_props_occupancy(&d, 32, 0, 0, 0, 1.0), -1);
    ck_assert_double_eq(tp_device_props_occupancy(&d, -1, 0, 0, 256, 1.0), -1);
    struct tp_device_prop z = d;
    z.max_threads_per_sm = 0;
    ck_assert_double_eq(tp_device_props_occupancy(&z, 32, 0, 0, 256, 1.0), -1);
    /* a block the device cannot run: never above 100, never below 0 */
    double o = tp_device_props_occupancy(&d, 32, 0, 0, 2048, 1.0);
    ck_assert(o == -1 || (o >= 0 && o <= 100));
}
END_TEST

/* build/fakes/libcuda.so.1, beside this test's build/tests folder. */
static void fake_driver_path(char *lib, size_t size)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert(n > 0);
    exe[n] = 0;
    snprintf(lib, size, "%s/../fakes/libcuda.so.1", dirname(exe));
}

START_TEST(test_no_driver_loaded)
{
    const struct tp_device_prop *p = (const struct tp_device_prop *)1;
    ck_assert_int_eq(tp_device_props_get(&p), 0);
    ck_assert_ptr_null(p);
}
END_TEST

START_TEST(test_fake_driver)
{
    char lib[PATH_MAX + 32];
    fake_driver_path(lib, sizeof lib);
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* make check-unit builds the fakes first: missing there is a failure */
        ck_assert_msg(!getenv("TP_TEST_NEED_FAKES"), "%s: %s", lib, dlerror());
        fprintf(stderr, "test_props: %s not built (make fakes): skipped\n", lib);
        return;
    }
    const struct tp_device_prop *p = NULL;
    ck_assert_int_eq(tp_device_props_get(&p), 0);   /* loaded, cuInit not called */
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    ck_assert_ptr_nonnull(init);
    ck_assert_int_eq(init(0), 0);
    ck_assert_int_eq(tp_device_props_get(&p), 1);
    ck_assert_str_eq(p[0].name, "Fake H100");
    ck_assert_int_eq(p[0].num_sms, 132);
    ck_assert_int_eq(p[0].compute_major, 9);
    ck_assert_int_eq(p[0].max_threads_per_sm, 2048);
    ck_assert_int_eq(p[0].smem_per_sm, 233472);
    const struct tp_device_prop *again = NULL;
    ck_assert_int_eq(tp_device_props_get(&again), 1);
    ck_assert_ptr_eq(again, p);
    ck_assert_double_eq_tol(tp_device_props_occupancy(&p[0], 64, 0, 0, 256, 1000.0), 50.0, 1e-9);
}
END_TEST

/* The CUPTI gate (collector/device/props.h, tp_driver_ready): a driver that is loaded, initialised
 * and has a device, and a context - an active primary context, or a CUDA
 * call that already succeeded. */
START_TEST(test_driver_ready)
{
    char why[120];
    ck_assert_int_eq(tp_driver_ready(0, NULL, why, sizeof why), 0);    /* no libcuda in the process */
    ck_assert_str_eq(why, "no CUDA driver in this process (libcuda not loaded)");
    ck_assert_int_eq(tp_driver_ready(1, NULL, NULL, 0), 0);
    char lib[PATH_MAX + 32];
    fake_driver_path(lib, sizeof lib);
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s not built (make fakes)", lib);
    ck_assert_int_eq(tp_driver_ready(1, NULL, why, sizeof why), 0);    /* loaded, cuInit not called */
    ck_assert_str_eq(why, "CUDA driver not initialized (cuInit not called yet)");
    ck_assert_int_eq(tp_driver_ready(1, "", why, sizeof why), 0);  /* every device hidden */
    ck_assert_str_eq(why, "no CUDA device visible (CUDA_VISIBLE_DEVICES=\"\")");
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    ck_assert_int_eq(init(0), 0);
    ck_assert_int_eq(tp_driver_ready(0, NULL, why, sizeof why), 0);    /* no context yet */
    ck_assert_str_eq(why, "no CUDA context yet (no CUDA call has succeeded)");
    ck_assert_int_eq(tp_driver_ready(1, NULL, NULL, 0), 1);    /* a CUDA call succeeded */
    int (*retain)(void **, int) = (int (*)(void **, int))dlsym(h, "cuDevicePrimaryCtxRetain");
    int (*release)(int) = (int (*)(int))dlsym(h, "cuDevicePrimaryCtxRelease_v2");
    void *ctx = NULL;
    ck_assert_int_eq(retain(&ctx, 0), 0);
    ck_assert_int_eq(tp_driver_ready(0, NULL, NULL, 0), 1);    /* primary context active */
    ck_assert_int_eq(release(0), 0);
    ck_assert_int_eq(tp_driver_ready(0, NULL, NULL, 0), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("props");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_register_bound);
    tcase_add_test(tc, test_grid_bound);
    tcase_add_test(tc, test_shared_memory_bound);
    tcase_add_test(tc, test_invalid);
    tcase_add_test(tc, test_no_driver_loaded);
    tcase_add_test(tc, test_fake_driver);
    tcase_add_test(tc, test_driver_ready);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
