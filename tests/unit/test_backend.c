/*
 * test_backend.c - the descriptor tracking of collector/record/flops/cudnn_graph.c
 * without cuDNN (fake addresses): the heuristics path (GetAttribute
 * ENGINEHEUR_RESULTS fills configs the program created, which cannot run
 * without a GPU, so it is tested here), an engine read back from a config,
 * the plan cache and its invalidation by a change in the chain, a
 * destroyed descriptor whose address is reused, SDPA ops (paged K/V
 * included) and a graph longer than TP_BD_MAXOPS whose matmuls all count.
 * tests/preload/test_backend.py holds the same counts against
 * torch.utils.flop_counter with the real cuDNN's descriptors.
 */
#include <check.h>
#include <string.h>

#include "collector/record/flops/conv.c"
#include "collector/record/flops/cudnn_graph.c"
#include "tests/unit/tp_test.h"

static char mem[64];  /* fake descriptor addresses, D(0)..D(63) */
#define D(i) ((void *)&mem[i])

static void tensor(void *d, int64_t a, int64_t b, int64_t c, int64_t e)
{
    int64_t dims[4] = { a, b, c, e };
    int dt = CUDNN_DATA_FLOAT;
    tp_bd_create(d, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    tp_bd_set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    tp_bd_set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
}

static void bd_link(void *d, int type, int attr, void *to)
{
    if (type)
        tp_bd_create(d, type);
    tp_bd_set(d, attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &to);
}

static uint64_t flops(void *plan)
{
    struct tp_record r;
    memset(&r, 0, sizeof r);
    tp_backend_record(&r, plan);
    return r.u.lib.flops;
}

/* x D(0), w D(1), y D(2), op D(3), graph D(4), heur D(5), cfgs D(6), D(7),
 * plan D(8), engine D(9) */
static void fwd_graph(int64_t k)
{
    tensor(D(0), 2, 8, 16, 16);
    tensor(D(1), k, 8, 3, 3);
    tensor(D(2), 2, k, 16, 16);
    bd_link(D(3), CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, D(0));
    bd_link(D(3), 0, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, D(1));
    bd_link(D(3), 0, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, D(2));
    bd_link(D(4), CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_OPS, D(3));
}

START_TEST(test_heuristics_and_cache)
{
    uint64_t f16 = 2ull * (2 * 16 * 16 * 16) * 8 * 9;
    fwd_graph(16);
    bd_link(D(5), CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, D(4));
    tp_bd_create(D(6), CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    tp_bd_create(D(7), CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    bd_link(D(8), CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
         D(7));
    ck_assert_uint_eq(flops(D(8)), 0);           /* config not filled yet */
    void *cfgs[2] = { D(6), D(7) };
    int64_t n = 2;
    tp_bd_get(D(5), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 2, &n, cfgs);
    ck_assert_uint_eq(flops(D(8)), f16);
    /* cached: the second read is the lock-free one */
    uint64_t e = tp_bd_epoch;
    ck_assert_uint_eq(flops(D(8)), f16);
    ck_assert_uint_eq(tp_bd_epoch, e);
    ck_assert_uint_eq(__atomic_load_n(&tp_bd_probe(D(8))->c_epoch, __ATOMIC_RELAXED), e);
    /* an engine read back from the config leads to the same graph */
    tp_bd_create(D(9), CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    void *eng = D(9);
    n = 1;
    tp_bd_get(D(7), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng);
    bd_link(D(6), 0, CUDNN_ATTR_ENGINECFG_ENGINE, D(9));
    bd_link(D(8), 0, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, D(6));
    ck_assert_uint_eq(flops(D(8)), f16);
    /* the filter and output destroyed, their addresses reused by K = 32:
     * the cached value is not used */
    tp_bd_destroy(D(1));
    tp_bd_destroy(D(2));
    ck_assert_uint_eq(flops(D(8)), 0);
    tensor(D(1), 32, 8, 3, 3);
    tensor(D(2), 2, 32, 16, 16);
    ck_assert_uint_eq(flops(D(8)), 2 * f16);
    /* untracked descriptors and attributes change nothing */
    e = tp_bd_epoch;
    tp_bd_create(D(20), CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    tp_bd_set(D(20), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &eng);
    tp_bd_destroy(D(20));
    ck_assert_uint_eq(tp_bd_epoch, e);
    for (int i = 0; i < 10; i++)
        tp_bd_destroy(D(i));
    ck_assert_uint_eq(flops(D(8)), 0);
}
END_TEST

START_TEST(test_matmul_and_eviction)
{
    int64_t a[3] = { 3, 32, 64 }, c[3] = { 3, 32, 40 };
    int dt = CUDNN_DATA_BFLOAT16;
    tp_bd_create(D(0), CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    tp_bd_set(D(0), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 3, a);
    tp_bd_set(D(0), CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    tp_bd_create(D(2), CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    tp_bd_set(D(2), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 3, c);
    bd_link(D(3), CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, CUDNN_ATTR_OPERATION_MATMUL_ADESC, D(0));
    bd_link(D(3), 0, CUDNN_ATTR_OPERATION_MATMUL_CDESC, D(2));
    bd_link(D(4), CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_OPS, D(3));
    bd_link(D(9), CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, D(4));
    bd_link(D(6), CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_ENGINE, D(9));
    bd_link(D(8), CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
         D(6));
    struct tp_record r;
    memset(&r, 0, sizeof r);
    tp_backend_record(&r, D(8));
    ck_assert_uint_eq(r.u.lib.flops, 2ull * 3 * 32 * 40 * 64);
    ck_assert_uint_eq(r.u.lib.m, 32);
    ck_assert_uint_eq(r.u.lib.n, 40);
    ck_assert_uint_eq(r.u.lib.k, 64);
    ck_assert_uint_eq(r.u.lib.batch, 3);
    ck_assert_uint_eq(r.u.lib.precision, TP_PREC_BF16);
    /* far more descriptors than slots: the table stays bounded, no crash */
    static char many[3 * TP_BD_SLOTS];
    for (int i = 0; i < 3 * TP_BD_SLOTS; i++)
        tp_bd_create(&many[i], CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    tp_backend_record(&r, D(8));
}
END_TEST

/* SDPA as torch.utils.flop_counter counts it: forward 2 b h sq sk (dq + dv),
 * backward 2 b h sq sk (3 dq + 2 dv); d_v != d_q to tell the terms apart. */
START_TEST(test_sdpa_forward_and_backward)
{
    static const struct { int op, q, k, v; uint64_t coef; } cases[2] = {
        { CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC,
          CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, 64 + 32 },
        { CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR, CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC,
          CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, 3 * 64 + 2 * 32 },
    };
    for (int i = 0; i < 2; i++) {
        int base = 20 + 10 * i;
        tensor(D(base + 0), 2, 4, 128, 64);     /* Q [b, h, sq, dq] */
        tensor(D(base + 1), 2, 4, 256, 64);     /* K [b, h, sk, dq] */
        tensor(D(base + 2), 2, 4, 256, 32);     /* V [b, h, sk, dv] */
        bd_link(D(base + 3), cases[i].op, cases[i].q, D(base + 0));
        bd_link(D(base + 3), 0, cases[i].k, D(base + 1));
        bd_link(D(base + 3), 0, cases[i].v, D(base + 2));
        bd_link(D(base + 4), CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_OPS, D(base + 3));
        bd_link(D(base + 5), CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, D(base + 4));
        bd_link(D(base + 6), CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_ENGINE, D(base + 5));
        bd_link(D(base + 7), CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
             D(base + 6));
        struct tp_record r;
        memset(&r, 0, sizeof r);
        tp_backend_record(&r, D(base + 7));
        ck_assert_uint_eq(r.u.lib.flops, 2ull * 2 * 4 * 128 * 256 * cases[i].coef);
        ck_assert_uint_eq(r.u.lib.m, 128);
        ck_assert_uint_eq(r.u.lib.n, 256);
        ck_assert_uint_eq(r.u.lib.k, 64);
        ck_assert_uint_eq(r.u.lib.batch, 8);
    }
    /* a V of the wrong rank makes the op unknown, not a crash */
    tensor(D(50), 2, 4, 256, 32);
    int64_t dims3[3] = { 8, 256, 32 };
    tp_bd_set(D(50), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 3, dims3);
    bd_link(D(51), CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, D(20));
    bd_link(D(51), 0, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, D(21));
    bd_link(D(51), 0, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, D(50));
    bd_link(D(52), CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_OPS, D(51));
    bd_link(D(53), CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, D(52));
    bd_link(D(54), CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_ENGINE, D(53));
    bd_link(D(55), CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, D(54));
    ck_assert_uint_eq(flops(D(55)), 0);
}
END_TEST

static char mem2[256];  /* more fake addresses, E(0)..E(255) */
#define E(i) ((void *)&mem2[i])

/* engine, config and plan at E(p)..E(p + 2) over graph "g"; the plan's record */
static struct tp_record plan_record(void *g, int p)
{
    bd_link(E(p), CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, g);
    bd_link(E(p + 1), CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_ENGINE, E(p));
    bd_link(E(p + 2), CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
            CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, E(p + 1));
    struct tp_record r;
    memset(&r, 0, sizeof r);
    tp_backend_record(&r, E(p + 2));
    return r;
}

/* Paged attention (cudnn_graph.h, SDPA_FWD_KDESC/VDESC): K and V are page
 * containers [blocks, h_k, block size, d] and the page tables [b, 1, pages,
 * 1] give S_kv = pages * block size; torch counts the logical S_kv. */
START_TEST(test_sdpa_paged)
{
    static const struct { int pk, pv; uint64_t skv; } cases[3] = {
        { 1, 1, 4 * 64 },   /* both paged: pages x block size */
        { 1, 0, 200 },      /* only K paged: V is literal [b, h, s_kv, d_v] */
        { 0, 1, 256 },      /* only V paged: K is literal */
    };
    for (int i = 0; i < 3; i++) {
        int o = 40 * i;
        tensor(E(o + 0), 2, 8, 128, 64);                 /* Q [b, h_q, s_q, d] */
        if (cases[i].pk)
            tensor(E(o + 1), 16, 2, 64, 64);             /* K container, block 64 */
        else
            tensor(E(o + 1), 2, 2, 256, 64);
        if (cases[i].pv)
            tensor(E(o + 2), 16, 2, 64, 32);             /* V container */
        else
            tensor(E(o + 2), 2, 2, 200, 32);
        tensor(E(o + 3), 2, 1, 4, 1);                    /* page tables: 4 pages */
        tensor(E(o + 4), 2, 1, 4, 1);
        bd_link(E(o + 5), CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR,
                CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, E(o + 0));
        bd_link(E(o + 5), 0, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, E(o + 1));
        bd_link(E(o + 5), 0, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, E(o + 2));
        if (cases[i].pk)
            bd_link(E(o + 5), 0, CUDNN_ATTR_OPERATION_SDPA_FWD_PAGE_TABLE_KDESC, E(o + 3));
        if (cases[i].pv)
            bd_link(E(o + 5), 0, CUDNN_ATTR_OPERATION_SDPA_FWD_PAGE_TABLE_VDESC, E(o + 4));
        bd_link(E(o + 6), CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_OPS,
                E(o + 5));
        struct tp_record r = plan_record(E(o + 6), o + 7);
        ck_assert_uint_eq(r.u.lib.flops, 2ull * 2 * 8 * 128 * cases[i].skv * (64 + 32));
        ck_assert_uint_eq(r.u.lib.n, cases[i].skv);
        ck_assert_uint_eq(r.u.lib.batch, 2 * 8);
    }
}
END_TEST

/* cudnn-frontend's composite attention backward puts its last matmul (dQ =
 * dS K) after some 34 other ops when causal, dropout, padding and GQA are on:
 * every matmul counts however long the graph, pointwise ops count nothing. */
START_TEST(test_long_graph_counts_every_matmul)
{
    enum { NOPS = 3 * TP_BD_MAXOPS };
    void *ops[NOPS];
    tensor(E(200), 3, 32, 16, 64);                      /* A [b, h, m, k] */
    tensor(E(201), 3, 32, 16, 40);                      /* C [b, h, m, n] */
    int nmm = 0;
    for (int i = 0; i < NOPS; i++) {
        ops[i] = E(i);
        if (i % TP_BD_MAXOPS == TP_BD_MAXOPS - 1 || i == NOPS - 1) {
            bd_link(E(i), CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
                    CUDNN_ATTR_OPERATION_MATMUL_ADESC, E(200));
            bd_link(E(i), 0, CUDNN_ATTR_OPERATION_MATMUL_CDESC, E(201));
            nmm++;
        } else {
            tp_bd_create(E(i), CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
        }
    }
    ck_assert_int_eq(nmm, 3);
    tp_bd_create(E(210), CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    tp_bd_set(E(210), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, NOPS, ops);
    struct tp_record r = plan_record(E(210), 211);
    ck_assert_uint_eq(r.u.lib.flops, 3ull * 2 * (3 * 32) * 16 * 40 * 64);
    /* a graph of pointwise ops only: no FLOPs */
    tp_bd_create(E(220), CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    tp_bd_set(E(220), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 5, ops);
    r = plan_record(E(220), 221);
    ck_assert_uint_eq(r.u.lib.flops, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_heuristics_and_cache);
    tcase_add_test(tc, test_matmul_and_eviction);
    tcase_add_test(tc, test_sdpa_forward_and_backward);
    tcase_add_test(tc, test_sdpa_paged);
    tcase_add_test(tc, test_long_graph_counts_every_matmul);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
