/*
 * test_torchop.c - torch's operator range messages (collector/record/torchop.c):
 * every form getNvtxStr writes (seq, op_id, sizes, input_op_ids, each
 * optional, in that order), names with colons and spaces, and messages that
 * only look alike, which must stay plain ranges.
 */
#include "collector/record/torchop.h"

#include <check.h>
#include <string.h>
#include "tests/unit/tp_test.h"

struct op_case {
    const char *msg;
    int is_op;
    const char *name;
    int64_t seq;
    uint64_t op_id;
    const char *sizes;    /* NULL: none */
    int cpu_op;
};

static const struct op_case cases[] = {
    { "aten::addmm, seq = 8, op_id = 352", 1, "aten::addmm", 8, 352, NULL, 1 },
    { "aten::as_strided, op_id = 351", 1, "aten::as_strided", -1, 351, NULL, 1 },
    { "Optimizer.zero_grad#AdamW.zero_grad, op_id = 347", 1, "Optimizer.zero_grad#AdamW.zero_grad",
      -1, 347, NULL, 0 },
    { "aten::addmm, seq = 0, op_id = 12, sizes = [[10], [32, 64], [64, 10], [], []]", 1,
      "aten::addmm", 0, 12, "[[10], [32, 64], [64, 10], [], []]", 1 },
    { "aten::view, op_id = 5, sizes = [[2, -1]]", 1, "aten::view", -1, 5, "[[2, -1]]", 1 },
    { "aten::empty, op_id = 6, sizes = []", 1, "aten::empty", -1, 6, "[]", 1 },
    { "autograd::engine::evaluate_function: AddmmBackward0, op_id = 401, "
      "input_op_ids = [(352,0), (399,1)]", 1,
      "autograd::engine::evaluate_function: AddmmBackward0", -1, 401, NULL, 1 },
    { "AddmmBackward0, seq = 8, op_id = 402, sizes = [[32, 10]], input_op_ids = [(401,0)]", 1,
      "AddmmBackward0", 8, 402, "[[32, 10]]", 1 },
    { "detach, op_id = 9", 1, "detach", -1, 9, NULL, 1 },
    { "aten::item, seq = 7, op_id = 1, sizes = [[]], input_op_ids = [(0,-1)]", 1, "aten::item",
      7, 1, "[[]]", 1 },
    { "my_block, op_id = 10", 1, "my_block", -1, 10, NULL, 0 },
    { "Backward, op_id = 11", 1, "Backward", -1, 11, NULL, 0 },
    { "NllLossBackward12, seq = 3, op_id = 12", 1, "NllLossBackward12", 3, 12, NULL, 1 },
    /* not torch's */
    { "step", 0, NULL, 0, 0, NULL, 0 },
    { "aten::addmm", 0, NULL, 0, 0, NULL, 0 },
    { "aten::addmm, seq = 8", 0, NULL, 0, 0, NULL, 0 },            /* no op_id */
    { ", op_id = 3", 0, NULL, 0, 0, NULL, 0 },                     /* no name */
    { "mine, op_id = 3 and more", 0, NULL, 0, 0, NULL, 0 },
    { "mine, op_id = x", 0, NULL, 0, 0, NULL, 0 },
    { "mine, op_id = 3, sizes = [[1, 2]", 0, NULL, 0, 0, NULL, 0 },
    { "mine, op_id = 3, sizes = [[1,2]]", 0, NULL, 0, 0, NULL, 0 },
    { "mine, op_id = 3, sizes = [[\"a\"]]", 0, NULL, 0, 0, NULL, 0 },
    { "mine, op_id = 3, input_op_ids = [(1,2)", 0, NULL, 0, 0, NULL, 0 },
    { "mine, op_id = 99999999999999999999999", 0, NULL, 0, 0, NULL, 0 },
    { "mine, op_id = 0", 0, NULL, 0, 0, NULL, 0 },
};

START_TEST(test_table)
{
    const struct op_case *c = &cases[_i];
    struct tp_torch_op op;
    memset(&op, 0x5a, sizeof op);
    int got = tp_torch_op_parse(c->msg, &op);
    ck_assert_msg(got == c->is_op, "%s: %d", c->msg, got);
    if (!got)
        return;
    ck_assert_uint_eq(op.name_len, strlen(c->name));
    ck_assert(strncmp(c->msg, c->name, op.name_len) == 0);
    ck_assert_int_eq(op.seq, c->seq);
    ck_assert_uint_eq(op.op_id, c->op_id);
    ck_assert_int_eq(op.cpu_op, c->cpu_op);
    if (!c->sizes) {
        ck_assert_ptr_null(op.sizes);
    } else {
        ck_assert_uint_eq(op.sizes_len, strlen(c->sizes));
        ck_assert(strncmp(op.sizes, c->sizes, op.sizes_len) == 0);
    }
}
END_TEST

START_TEST(test_null)
{
    struct tp_torch_op op;
    ck_assert_int_eq(tp_torch_op_parse(NULL, &op), 0);
}
END_TEST

static Suite *torchop_suite(void)
{
    Suite *s = suite_create("torchop");
    TCase *t = tcase_create("torchop");
    tcase_add_loop_test(t, test_table, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(t, test_null);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tp_test_run(torchop_suite());
}
