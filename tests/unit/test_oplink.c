/*
 * test_oplink.c - torch's operators as a tree (collector/drain/oplink.c): the
 * innermost operator around a tick, and Kineto's autograd links: an
 * evaluate_function wrapper takes its node's sequence number, and a fwdbwd
 * flow joins each backward node to the forward operator of its number that
 * started last before it.  Records are written into the buffers of the
 * test process (activated with TRAINPROF_SCHEDULE=all) as the range code
 * writes torch's operators.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "collector/record/buffer.h"
#include "collector/common/clock.h"
#include "collector/config/config.h"
#include "collector/wrap/core.h"
#include "collector/record/intern.h"
#include "collector/drain/oplink.h"
#include "collector/control/steps.h"
#include "tests/unit/tp_test.h"

static uint8_t gen;

static void activate(void)
{
    setenv("TRAINPROF_SCHEDULE", "all", 1);
    setenv("TRAINPROF_ACTIVITIES", "cpu", 1);
    setenv("TRAINPROF_SYS", "none", 1);
    setenv("TRAINPROF_PROFILE_MEMORY", "0", 1);
    tp_config_init();
    tp_clock_init();
    ck_assert_int_eq(tp_buf_init(4), 0);
    tp_steps_begin(tp_clock_now());
    ck_assert_int_eq(tp_steps_on(), 1);
    gen = TP_HOT_GEN(tp_hot_load());
}

/* One of torch's operators, as tp_close writes it. */
static void op(int32_t tid, const char *name, uint64_t t0, uint64_t t1, uint64_t id, int64_t seq)
{
    struct tp_record *r = tp_buf_reserve();
    ck_assert_ptr_nonnull(r);
    memset(r, 0, sizeof *r);
    r->kind = TP_REC_RANGE;
    r->gen = gen;
    r->t0 = t0;
    r->t1 = t1;
    r->u.range.name = tp_intern(name, (size_t)-1);
    r->u.range.tid = tid;
    r->u.range.source = TP_RANGE_TORCH;
    r->u.range.range_id = id;
    r->u.range.seq = seq;
    tp_buf_commit();
}

static struct tp_op_autograd of(const struct tp_oplink *l, uint64_t id, int64_t seq)
{
    struct tp_op_autograd a = { .seq = seq };
    tp_oplink_autograd_of(l, id, &a);
    return a;
}

static void peek(void *ctx, const struct tp_tbuf *t, const struct tp_record *r)
{
    tp_oplink_add(ctx, t, r);
}

/* The window's operators, as window.c's peek gathers them. */
static struct tp_oplink *oplink_of_window(void)
{
    struct tp_oplink *l = tp_oplink_new();
    ck_assert_ptr_nonnull(l);
    tp_buf_drain(gen, peek, l, NULL, 1);
    tp_oplink_finish(l);
    return l;
}

#define W "autograd::engine::evaluate_function: "

/* A linear layer's forward and backward on one thread: aten::linear and
 * its aten::t share number 14 (the node TBackward0 links to the later,
 * aten::t), aten::addmm has 15; AccumulateGrad has no number. */
START_TEST(test_links_one_thread)
{
    activate();
    op(7, "aten::t", 110, 120, 2, 14);
    op(7, "aten::addmm", 130, 180, 3, 15);
    op(7, "aten::linear", 100, 190, 1, 14);
    op(7, "aten::mm", 310, 330, 12, -1);          /* inside the node */
    op(7, "AddmmBackward0", 305, 350, 11, 15);
    op(7, W "AddmmBackward0", 300, 360, 10, -1);
    op(7, "torch::autograd::AccumulateGrad", 372, 378, 21, -1);
    op(7, W "torch::autograd::AccumulateGrad", 370, 380, 20, -1);
    op(7, "TBackward0", 402, 410, 31, 14);
    op(7, W "TBackward0", 400, 420, 30, -1);
    struct tp_oplink *l = oplink_of_window();
    ck_assert_ptr_nonnull(l);

    struct tp_op_autograd a = of(l, 10, -1);      /* the wrapper: its node's number */
    ck_assert_int_eq(a.seq, 15);
    ck_assert_int_eq(a.flow_end, 0);
    ck_assert_uint_eq(a.n_flows_out, 0);
    a = of(l, 11, 15);                            /* the node: a flow ends */
    ck_assert_int_eq(a.seq, 15);
    ck_assert_int_eq(a.flow_end, 1);
    a = of(l, 3, 15);                             /* addmm starts it */
    ck_assert_uint_eq(a.n_flows_out, 1);
    ck_assert_uint_eq(a.flows_out[0], 11);
    a = of(l, 2, 14);                             /* aten::t, not aten::linear */
    ck_assert_uint_eq(a.n_flows_out, 1);
    ck_assert_uint_eq(a.flows_out[0], 31);
    ck_assert_uint_eq(of(l, 1, 14).n_flows_out, 0);
    a = of(l, 20, -1);                            /* no number, no flow */
    ck_assert_int_eq(a.seq, -1);
    ck_assert_int_eq(of(l, 21, -1).flow_end, 0);
    ck_assert_int_eq(of(l, 12, -1).flow_end, 0);  /* ops inside a node are no nodes */
    ck_assert_int_eq(of(l, 12, -1).seq, -1);
    /* calls still find their innermost operator */
    ck_assert_uint_eq(tp_oplink_find(l, 7, 315), 12);
    ck_assert_uint_eq(tp_oplink_find(l, 7, 340), 11);
    tp_oplink_free(l);
}
END_TEST

/* Backward on another thread (the GPU's autograd thread); a wrapper whose
 * first child is not its node; a node whose forward operator fell outside
 * the window (no flow); through ITT, no numbers at all: no flows. */
START_TEST(test_links_across_threads_and_misses)
{
    activate();
    op(7, "aten::relu", 100, 120, 1, 16);
    op(7, "aten::mul", 130, 140, 2, 17);          /* number 17, but after the node */
    op(9, "ReluBackward0", 105 + 100, 230, 11, 16);
    op(9, W "ReluBackward0", 200, 240, 10, -1);
    op(9, "aten::zero_", 252, 255, 13, -1);       /* not the node the wrapper names */
    op(9, "MulBackward0", 256, 258, 14, 17);
    op(9, W "MulBackward0", 250, 260, 12, -1);
    op(9, "SubBackward0", 272, 278, 16, 3);       /* its forward is not in the window */
    op(9, W "SubBackward0", 270, 280, 15, -1);
    op(9, "DivBackward0", 292, 298, 18, -1);      /* as through ITT: no number */
    op(9, W "DivBackward0", 290, 299, 17, -1);
    struct tp_oplink *l = oplink_of_window();
    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq(of(l, 11, 16).flow_end, 1);
    ck_assert_uint_eq(of(l, 1, 16).n_flows_out, 1);
    ck_assert_int_eq(of(l, 10, -1).seq, 16);
    ck_assert_int_eq(of(l, 12, -1).seq, -1);      /* first child is aten::zero_ */
    ck_assert_int_eq(of(l, 14, 17).flow_end, 0);
    ck_assert_uint_eq(of(l, 2, 17).n_flows_out, 0);
    ck_assert_int_eq(of(l, 15, -1).seq, 3);
    ck_assert_int_eq(of(l, 16, 3).flow_end, 0);
    ck_assert_int_eq(of(l, 17, -1).seq, -1);
    ck_assert_int_eq(of(l, 18, -1).flow_end, 0);
    tp_oplink_free(l);
}
END_TEST

/* Two nodes of one number (a graph run backward twice, retain_graph):
 * both link to the one forward operator, which starts two flows. */
START_TEST(test_two_nodes_one_forward)
{
    activate();
    op(7, "aten::exp", 100, 110, 1, 5);
    op(7, "ExpBackward0", 202, 208, 11, 5);
    op(7, W "ExpBackward0", 200, 210, 10, -1);
    op(7, "ExpBackward0", 302, 308, 21, 5);
    op(7, W "ExpBackward0", 300, 310, 20, -1);
    struct tp_oplink *l = oplink_of_window();
    ck_assert_ptr_nonnull(l);
    struct tp_op_autograd a = of(l, 1, 5);
    ck_assert_uint_eq(a.n_flows_out, 2);
    ck_assert_uint_eq(a.flows_out[0], 11);
    ck_assert_uint_eq(a.flows_out[1], 21);
    tp_oplink_free(l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("oplink");
    TCase *tc = tcase_create("autograd");
    tcase_add_test(tc, test_links_one_thread);
    tcase_add_test(tc, test_links_across_threads_and_misses);
    tcase_add_test(tc, test_two_nodes_one_forward);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
