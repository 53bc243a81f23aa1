/*
 * chrome_args.c - DESIGN: the arguments of a host call's event in the
 * chrome trace (chrome.c writes the event around them): a launch's kernel,
 * grid, block and stream (under "cuda stream", never "stream": HTA treats
 * any event with a "stream" arg as a GPU event); a library call's FLOPs
 * and precision, and with record_shapes its sizes as torch writes them; a
 * collective's record_param_comms args, which Kineto copies onto the
 * collective's kernel too; a runtime call's bytes, copy kind, stream or
 * event.  Each field is written straight into the trace's writer: nothing
 * is kept per event.
 */
#include <stdint.h>
#include <string.h>

#include "collector/contract/vocab.h"
#include "chrome_impl.h"

static const char *const copy_kinds[] = { "HtoH", "HtoD", "DtoH", "DtoD", "Default" };

/* A cuBLAS routine that is no product (TP_LIB_BLAS): its own sizes under
 * its own names (no "Input Dims": they would say A is m x k, B k x n), the
 * batch and the data type; bytes of copy and swap in put_gemm. */
static void put_blas_shapes(struct tp_jsonw *j, const struct tp_record *r)
{
    unsigned has = r->u.lib.op;
    if (has & TP_BLAS_HAS_M)
        put_key_u64(j, ", \"m\": ", r->u.lib.m);
    if (has & TP_BLAS_HAS_N)
        put_key_u64(j, ", \"n\": ", r->u.lib.n);
    if (has & TP_BLAS_HAS_K)
        put_key_u64(j, ", \"k\": ", r->u.lib.k);
    if (has & TP_BLAS_HAS_NRHS)
        put_key_u64(j, ", \"nrhs\": ", r->u.lib.k);
    put_key_u64(j, ", \"batch\": ", r->u.lib.batch);
    put_key_str(j, ", \"dtype\": ", tp_dtype_name(r->u.lib.dtype));
}

/* cuBLAS/cuBLASLt: FLOPs and precision always; sizes and types as torch's
 * record_shapes writes them (A is m x k, B is k x n; c10's C++ type names)
 * when asked. */
/* The FLOPs of a library call (tp_form_counts_flops) and their class. */
static void put_flops(struct tp_jsonw *j, const struct tp_record *r)
{
    put_key_u64(j, ", \"flops\": ", r->u.lib.flops);
    put_key_str(j, ", \"precision\": ", tp_precision_name(r->u.lib.precision));
    if (r->u.lib.flags & TP_LIB_CAPTURED)
        LIT(j, ", \"captured\": true");
}

/* "Input type": ["t", "t", ...], n times the record's dtype. */
static void put_input_types(struct tp_jsonw *j, unsigned dtype, int n)
{
    LIT(j, ", \"Input type\": [");
    for (int i = 0; i < n; i++) {
        if (i)
            LIT(j, ", ");
        tp_jsonw_str(j, tp_dtype_cpp_name(dtype));
    }
    tp_jsonw_char(j, ']');
}

/* One dims list "[a, b, ...]". */
static void put_dims(struct tp_jsonw *j, const uint32_t *d, int n)
{
    tp_jsonw_char(j, '[');
    for (int i = 0; i < n; i++) {
        if (i)
            LIT(j, ", ");
        tp_jsonw_u64(j, d[i]);
    }
    tp_jsonw_char(j, ']');
}

/* An RNN call (TP_FORM_RNN): its FLOPs; with shapes, x [T, B, I] and
 * hx [layers x directions, B, state], the first two inputs of torch's
 * aten::_cudnn_rnn. */
static void put_rnn(struct chrome *c, const struct tp_record *r)
{
    struct tp_jsonw *j = &c->j;
    put_flops(j, r);
    if (!c->record_shapes)
        return;
    const uint32_t x[3] = { r->u.lib.m, r->u.lib.n, r->u.lib.k };
    const uint32_t h[3] = { r->u.lib.op, r->u.lib.n, r->u.lib.batch };
    LIT(j, ", \"Input Dims\": [");
    put_dims(j, x, 3);
    LIT(j, ", ");
    put_dims(j, h, 3);
    tp_jsonw_char(j, ']');
    put_input_types(j, r->u.lib.dtype, 2);
}

/* A cuDNN op counted for no FLOPs (TP_FORM_TENSOR): with shapes, its main
 * tensor, when its descriptor could be read. */
static void put_tensor(struct chrome *c, const struct tp_record *r)
{
    struct tp_jsonw *j = &c->j;
    int nd = r->u.tensor.nd;
    if (!c->record_shapes || nd == 0 || nd > 8)
        return;
    LIT(j, ", \"Input Dims\": [");
    put_dims(j, r->u.tensor.dim, nd);
    tp_jsonw_char(j, ']');
    put_input_types(j, r->u.tensor.dtype, 1);
}

static void put_gemm(struct chrome *c, const struct tp_record *r)
{
    struct tp_jsonw *j = &c->j;
    put_flops(j, r);
    int blas = (r->u.lib.flags & TP_LIB_BLAS) != 0;
    if (blas && r->u.lib.bytes)
        put_key_u64(j, ", \"bytes\": ", r->u.lib.bytes);
    if (!c->record_shapes)
        return;
    if (blas) {
        put_blas_shapes(j, r);
        return;
    }
    put_key_u64(j, ", \"m\": ", r->u.lib.m);
    put_key_u64(j, ", \"n\": ", r->u.lib.n);
    put_key_u64(j, ", \"k\": ", r->u.lib.k);
    put_key_u64(j, ", \"batch\": ", r->u.lib.batch);
    LIT(j, ", \"Input Dims\": [[");
    tp_jsonw_u64(j, r->u.lib.m);
    tp_jsonw_char(j, ',');
    tp_jsonw_char(j, ' ');
    tp_jsonw_u64(j, r->u.lib.k);
    LIT(j, "], [");
    tp_jsonw_u64(j, r->u.lib.k);
    tp_jsonw_char(j, ',');
    tp_jsonw_char(j, ' ');
    tp_jsonw_u64(j, r->u.lib.n);
    LIT(j, "]]");
    put_input_types(j, r->u.lib.dtype, 2);
}

/* A collective's elements in and out per rank, from its bytes. */
void tp_chrome_coll_nelems(const struct tp_record *r, uint64_t *in, uint64_t *out)
{
    unsigned size = tp_dtype_size(r->u.lib.dtype);
    tp_coll_nelems(r->u.lib.op, size ? r->u.lib.bytes / size : 0, r->u.lib.m, in, out);
}

/* NCCL: the args of torch's record_param_comms (Kineto copies them onto
 * the collective's kernel), plus bytes and the nccl-tests bus bandwidth
 * factor.  The process group is the communicator, named by its creation
 * order in this process. */
void tp_chrome_put_coll(struct chrome *c, const struct tp_record *r)
{
    struct tp_jsonw *j = &c->j;
    unsigned op = r->u.lib.op, n = r->u.lib.m;
    uint64_t in, out;
    tp_chrome_coll_nelems(r, &in, &out);
    put_key_str(j, ", \"Collective name\": ", tp_coll_name(op));
    put_key_u64(j, ", \"In msg nelems\": ", in);
    put_key_u64(j, ", \"Out msg nelems\": ", out);
    put_key_u64(j, ", \"Group size\": ", n);
    put_key_u64(j, ", \"Rank\": ", r->u.lib.n);
    put_key_str(j, ", \"dtype\": ", tp_dtype_name(r->u.lib.dtype));
    LIT(j, ", \"In split size\": \"[]\", \"Out split size\": \"[]\"");
    if (r->u.lib.batch != TP_COLL_NO_COMM) {
        int world = tp_chrome_is_world((int)n, (int)r->u.lib.n, c->world_size, c->rank);
        LIT(j, ", \"Process Group Name\": \"");
        tp_jsonw_u64(j, r->u.lib.batch);
        tp_jsonw_lit(j, world ? "\", \"Process Group Description\": \"default_pg\""
                     : "\", \"Process Group Description\": \"undefined\"");
        if (world) {
            if (n <= TP_PG_RANKS_LISTED) {
                LIT(j, ", \"Process Group Ranks\": ");
                tp_chrome_put_rank_list(j, (int)n, 1);
            }
            LIT(j, ", \"Global rank start\": 0, \"Global rank stride\": 1");
        }
    }
    put_key_u64(j, ", \"bytes\": ", r->u.lib.bytes);
    LIT(j, ", \"busbw factor\": ");
    tp_jsonw_double(j, tp_coll_busbw_factor(op, n));
    if (tp_coll_peered(op) && r->u.lib.k != TP_COLL_PEERS)
        put_key_u64(j, ", \"peer\": ", r->u.lib.k);
    else if (tp_coll_rooted(op))
        put_key_u64(j, ", \"root\": ", r->u.lib.k);
    if (r->u.lib.flags & TP_LIB_GROUPED)
        LIT(j, ", \"grouped\": true");
}

/* "x, y, z" of a grid or a block at "p" (62 bytes at most). */
static char *put_dim3(char *p, uint32_t x, uint32_t y, uint32_t z)
{
    p = tp_jsonw_put_u64(p, x);
    p = TP_JSONW_PUT_LIT(p, ", ");
    p = tp_jsonw_put_u64(p, y);
    p = TP_JSONW_PUT_LIT(p, ", ");
    return tp_jsonw_put_u64(p, z);
}

static const char kernel_key[] = ", \"kernel\": ";

/* A launch's kernel (of "kn" bytes; its text "kt" from the table when
 * there), grid, block, shared memory and stream (or a graph's FLOPs) in
 * one room of the writer (jsonw.h's cursor): what the loop below writes
 * field by field for a longer name. */
static void put_launch_args(struct tp_jsonw *j, const struct tp_event *ev, size_t kn,
                            const struct chrome_text *kt)
{
    const struct tp_record *r = ev->rec;
    /* 12 + the name, 11 + 3 * 20 + 4, 13 + 3 * 20 + 4, 19 + 20, 17 + 20 */
    char *p = tp_jsonw_room(j, (kt ? kt->len + 16 : 12 + TP_JSONW_STR_ROOM(kn)) + 240);
    if (!p)
        return;
    if (kt) {
        p = tp_chrome_copy16(p, kt->text, kt->len);
    } else if (kn) {
        p = TP_JSONW_PUT_LIT(p, ", \"kernel\": ");
        p = tp_jsonw_put_strn(p, ev->kernel, kn);
    }
    if (r->u.launch.func_kind != TP_FUNC_GRAPH) {
        p = TP_JSONW_PUT_LIT(p, ", \"grid\": [");
        p = put_dim3(p, r->u.launch.grid_x, r->u.launch.grid_y, r->u.launch.grid_z);
        p = TP_JSONW_PUT_LIT(p, "], \"block\": [");
        p = put_dim3(p, r->u.launch.block_x, r->u.launch.block_y, r->u.launch.block_z);
        p = TP_JSONW_PUT_LIT(p, "], \"shared memory\": ");
        p = tp_jsonw_put_u64(p, r->u.launch.smem);
    } else if (ev->flops) {
        p = TP_JSONW_PUT_LIT(p, ", \"flops\": ");
        p = tp_jsonw_put_u64(p, ev->flops);
    }
    p = TP_JSONW_PUT_LIT(p, ", \"cuda stream\": ");
    p = tp_jsonw_put_u64(p, r->u.launch.stream);
    tp_jsonw_done(j, p);
}

/* The arguments of a call event after its ids and "cbid": a launch's
 * kernel, grid, block and stream; a library call's by its form (FLOPs,
 * shapes, a collective's record_param_comms args); a runtime call's
 * bytes, copy kind, stream or event. */
void tp_chrome_put_call_args(struct chrome *c, const struct tp_event *ev)
{
    struct tp_jsonw *j = &c->j;
    const struct tp_record *r = ev->rec;
    if (r->kind == TP_REC_LAUNCH) {
        if (ev->kernel && ev->kernel[0]) {
            const struct chrome_text *kt = tp_chrome_text(c, kernel_key, sizeof kernel_key - 1, ev->kernel);
            if (kt) {
                put_launch_args(j, ev, 0, kt);
                return;
            }
        }
        size_t kn = ev->kernel ? strlen(ev->kernel) : 0;
        if (kn <= 4096) {
            put_launch_args(j, ev, kn, NULL);
            return;
        }
        if (ev->kernel && ev->kernel[0]) {
            LIT(j, ", \"kernel\": ");
            tp_jsonw_str(j, ev->kernel);
        }
        if (r->u.launch.func_kind != TP_FUNC_GRAPH) {
            LIT(j, ", \"grid\": ");
            put_triple(j, r->u.launch.grid_x, r->u.launch.grid_y, r->u.launch.grid_z);
            LIT(j, ", \"block\": ");
            put_triple(j, r->u.launch.block_x, r->u.launch.block_y, r->u.launch.block_z);
            LIT(j, ", \"shared memory\": ");
            tp_jsonw_u64(j, r->u.launch.smem);
        } else if (ev->flops) {
            put_key_u64(j, ", \"flops\": ", ev->flops);
        }
        LIT(j, ", \"cuda stream\": ");
        tp_jsonw_u64(j, r->u.launch.stream);
    } else if (ev->form == TP_FORM_GEMM || ev->form == TP_FORM_CONV) {
        put_gemm(c, r);
    } else if (ev->form == TP_FORM_RNN) {
        put_rnn(c, r);
    } else if (ev->form == TP_FORM_TENSOR) {
        put_tensor(c, r);
    } else if (ev->form == TP_FORM_COLL) {
        tp_chrome_put_coll(c, r);
    } else {
        int copy = ev->form == TP_FORM_COPY;
        int set = ev->form == TP_FORM_SET;
        if (ev->form == TP_FORM_ALLOC || ev->form == TP_FORM_FREE) {
            put_key_u64(j, ", \"addr\": ", r->u.mem.addr);
            put_key_u64(j, ", \"bytes\": ", r->u.mem.bytes);
            if (r->u.mem.flags & TP_MEM_FAILED)
                LIT(j, ", \"failed\": 1");
        }
        if (copy || set) {
            LIT(j, ", \"bytes\": ");
            tp_jsonw_u64(j, r->u.api.bytes);
        }
        if (copy && r->u.api.copy_kind < sizeof copy_kinds / sizeof copy_kinds[0]) {
            LIT(j, ", \"kind\": \"");
            tp_jsonw_lit(j, copy_kinds[r->u.api.copy_kind]);
            tp_jsonw_char(j, '"');
        }
        if (copy || set || ev->form == TP_FORM_SYNC_STREAM) {
            LIT(j, ", \"cuda stream\": ");
            tp_jsonw_u64(j, r->u.api.stream);
        } else if (ev->form == TP_FORM_SYNC_EVENT) {
            LIT(j, ", \"cuda event\": ");
            tp_jsonw_u64(j, r->u.api.stream);
        }
    }
}
