/*
 * fuzz_torchop.c - libFuzzer harness: the NVTX message parser
 * (collector/record/torchop.c, tp_torch_op_parse): torch's operator ranges
 * "NAME[, seq = N][, op_id = N][, sizes = [[...]]][, input_op_ids = [...]]"
 * read back into a cpu_op's name and args.
 *
 * DESIGN
 * The input, NUL-terminated, is the message (as a range push hands it to
 * the collector).  Checks beyond the sanitizers, from torchop.h's contract:
 * an accepted message has a non-empty name that is a prefix of the message,
 * a non-zero op_id, and "sizes", when set, points inside the message and is
 * valid JSON (the chrome handler pastes it into the trace as it is).
 * tp_torch_op_is_operator is also asked about every prefix length.
 */
#include "collector/record/torchop.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *msg = strndup((const char *)data, size);
    if (!msg)
        abort();
    size_t len = strlen(msg);
    struct tp_torch_op op;
    memset(&op, 0xa5, sizeof op);
    if (tp_torch_op_parse(msg, &op)) {
        if (op.name_len == 0 || op.name_len > len || op.op_id == 0)
            abort();
        if (op.sizes) {
            if (op.sizes < msg || op.sizes + op.sizes_len > msg + len)
                abort();
            json_error_t err;
            json_t *j = json_loadb(op.sizes, op.sizes_len, 0, &err);
            if (!json_is_array(j)) {
                fprintf(stderr, "sizes \"%.*s\" is not a JSON array: %s\n", (int)op.sizes_len,
                        op.sizes, err.text);
                abort();
            }
            json_decref(j);
        }
    }
    tp_torch_op_parse(NULL, &op);
    volatile int sink = 0;
    for (size_t n = 0; n <= len && n < 64; n++)
        sink += tp_torch_op_is_operator(msg, n);
    (void)sink;
    free(msg);
    return 0;
}
