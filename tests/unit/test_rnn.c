/*
 * test_rnn.c - the pure RNN helpers of collector/record/flops/rnn.c: FLOPs of one
 * pass from the descriptors' sizes (one LSTM layer, a bidirectional GRU,
 * an LSTM projection, skip input, variable sequence lengths, the basic
 * cells), the record shape, saturation and rejects.  Every expected value
 * is written out as the GEMMs it counts, to be checked by hand.
 */
#include <check.h>
#include <string.h>

#include "collector/record/flops/rnn.c"
#include "tests/unit/tp_test.h"

static struct tp_rnn_shape shape(int cell, int bi, int64_t in, int64_t hidden, int64_t proj,
                                 int64_t layers, int64_t seq, int64_t batch)
{
    struct tp_rnn_shape s = {
        .cell = cell, .bidirectional = bi, .input = in, .hidden = hidden, .proj = proj,
        .layers = layers, .seq = seq, .batch = batch, .tokens = (uint64_t)(seq * batch),
    };
    return s;
}

START_TEST(test_one_lstm_layer)
{
    /* 4 gates, input 10, hidden 20, 5 steps x batch 3 = 15 steps:
     * per step W_x: 4*20 x 10, W_h: 4*20 x 20, times 2 FLOPs per MAC */
    struct tp_rnn_shape s = shape(CUDNN_LSTM, 0, 10, 20, 20, 1, 5, 3);
    ck_assert_uint_eq(tp_rnn_flops(&s), 2ull * 15 * (80 * 10 + 80 * 20));
    ck_assert_uint_eq(tp_rnn_flops(&s), 72000);
}
END_TEST

START_TEST(test_bidirectional_gru)
{
    /* 3 gates, input 8, hidden 16, 2 layers, both directions; layer 1
     * reads both directions of layer 0: 2*16 = 32 wide; 6 x 4 = 24 steps */
    struct tp_rnn_shape s = shape(CUDNN_GRU, 1, 8, 16, 16, 2, 6, 4);
    uint64_t layer0 = 48 * 8 + 48 * 16, layer1 = 48 * 32 + 48 * 16;
    ck_assert_uint_eq(tp_rnn_flops(&s), 2ull * 2 * 24 * (layer0 + layer1));
    ck_assert_uint_eq(tp_rnn_flops(&s), 2ull * 2 * 24 * 3456);
    /* one direction of it: layer 1 reads 16 */
    s.bidirectional = 0;
    ck_assert_uint_eq(tp_rnn_flops(&s), 2ull * 24 * (48 * 8 + 48 * 16 + 48 * 16 + 48 * 16));
}
END_TEST

START_TEST(test_lstm_projection)
{
    /* hidden 32 projected to 8: h(t-1) and the next layer's input are 8
     * wide, and each step adds the projection GEMM 8 x 32 */
    struct tp_rnn_shape s = shape(CUDNN_LSTM, 0, 12, 32, 8, 2, 4, 2);
    uint64_t layer0 = 128 * 12 + 128 * 8 + 8 * 32, layer1 = 128 * 8 + 128 * 8 + 8 * 32;
    ck_assert_uint_eq(tp_rnn_flops(&s), 2ull * 8 * (layer0 + layer1));
    ck_assert_uint_eq(tp_rnn_flops(&s), 81920);
    /* bidirectional: layer 1 reads 2 x 8 */
    s.bidirectional = 1;
    layer1 = 128 * 16 + 128 * 8 + 8 * 32;
    ck_assert_uint_eq(tp_rnn_flops(&s), 2ull * 2 * 8 * (layer0 + layer1));
}
END_TEST

START_TEST(test_basic_cells_skip_input_and_lengths)
{
    /* one gate; skip input: layer 0 has no input GEMM */
    struct tp_rnn_shape s = shape(CUDNN_RNN_TANH, 0, 16, 16, 16, 2, 3, 2);
    s.skip_input = 1;
    ck_assert_uint_eq(tp_rnn_flops(&s), 2ull * 6 * (16 * 16 + (16 * 16 + 16 * 16)));
    /* sequence lengths 3 and 2: 5 steps computed, not 6 */
    s.tokens = 5;
    ck_assert_uint_eq(tp_rnn_flops(&s), 2ull * 5 * 768);
    s.cell = CUDNN_RNN_RELU;
    ck_assert_uint_eq(tp_rnn_flops(&s), 2ull * 5 * 768);
    s.tokens = 0;
    ck_assert_uint_eq(tp_rnn_flops(&s), 0);
}
END_TEST

START_TEST(test_fill_and_rejects)
{
    struct tp_record r;
    memset(&r, 0, sizeof r);
    struct tp_rnn_shape s = shape(CUDNN_LSTM, 1, 12, 32, 8, 3, 7, 5);
    ck_assert_int_eq(tp_rnn_fill(&r, &s), 0);
    ck_assert_uint_eq(r.u.lib.flops, tp_rnn_flops(&s));
    ck_assert_uint_eq(r.u.lib.m, 7);      /* x: [T, B, I] */
    ck_assert_uint_eq(r.u.lib.n, 5);
    ck_assert_uint_eq(r.u.lib.k, 12);
    ck_assert_uint_eq(r.u.lib.batch, 8);  /* hx: [L x D, B, P] */
    ck_assert_uint_eq(r.u.lib.op, 6);

    const struct tp_rnn_shape bad[] = {
        shape(7, 0, 10, 20, 20, 1, 5, 3),           /* no such cell */
        shape(CUDNN_LSTM, 0, 0, 20, 20, 1, 5, 3),   /* no input */
        shape(CUDNN_LSTM, 0, 10, 20, 21, 1, 5, 3),  /* projection larger than hidden */
        shape(CUDNN_LSTM, 0, 10, 20, 0, 1, 5, 3),
        shape(CUDNN_LSTM, 0, 10, 20, 20, 0, 5, 3),  /* no layer */
        shape(CUDNN_GRU, 0, 10, -1, 20, 1, 5, 3),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&r, 0, sizeof r);
        ck_assert_uint_eq(tp_rnn_flops(&bad[i]), 0);
        ck_assert_int_eq(tp_rnn_fill(&r, &bad[i]), -1);
        ck_assert_uint_eq(r.u.lib.flops, 0);
        ck_assert_uint_eq(r.u.lib.m, 0);
    }
}
END_TEST

START_TEST(test_saturation)
{
    struct tp_record r;
    memset(&r, 0, sizeof r);
    struct tp_rnn_shape s = shape(CUDNN_LSTM, 1, 1 << 30, 1 << 30, 1 << 30, 1000, 1 << 30, 1 << 20);
    ck_assert_uint_eq(tp_rnn_flops(&s), UINT64_MAX);
    s.layers = 300;
    ck_assert_int_eq(tp_rnn_fill(&r, &s), 0);
    ck_assert_uint_eq(r.u.lib.op, 255);
    s = shape(CUDNN_LSTM, 0, 10, 20, 20, 1, (int64_t)1 << 33, 1);
    ck_assert_int_eq(tp_rnn_fill(&r, &s), 0);
    ck_assert_uint_eq(r.u.lib.m, UINT32_MAX);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rnn");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_one_lstm_layer);
    tcase_add_test(tc, test_bidirectional_gru);
    tcase_add_test(tc, test_lstm_projection);
    tcase_add_test(tc, test_basic_cells_skip_input_and_lengths);
    tcase_add_test(tc, test_fill_and_rejects);
    tcase_add_test(tc, test_saturation);
    suite_add_tcase(s, tc);
    return tp_test_run(s);
}
