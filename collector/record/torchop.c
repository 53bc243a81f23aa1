/*
 * torchop.c - DESIGN: torch's operator ranges read back (torchop.h).
 * torch's getNvtxStr (torch/csrc/profiler/util.cpp) appends its fields in a
 * fixed order, each as ", key = value": seq (the autograd sequence number),
 * op_id (the RecordFunction handle), sizes (the input shapes, with
 * record_shapes) and input_op_ids (the producers of a backward op's
 * inputs).  The name is everything before the first such field; a message
 * is torch's only if the fields that follow it parse completely and one is
 * op_id, so that a user's own range that merely looks alike stays a plain
 * range.  The shapes are checked to be a JSON array of arrays of integers,
 * so that the trace can carry them as they are.  Runs on tp-flush only;
 * nothing here allocates.
 */
#include "torchop.h"
#include "intern.h"
#include "collector/contract/record.h"

#include <string.h>

/* An unsigned decimal at *p; advances *p.  0 if none. */
static int read_u64(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    if (*s < '0' || *s > '9')
        return 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    *p = s;
    return 1;
}

/* A decimal with an optional minus at *p, written as a JSON integer (no
 * leading zero: the shapes are pasted into the trace as they are), of at
 * most 19 digits; advances *p.  Only its form is checked: its value is not
 * needed (inline, a loop of two compares a digit: this runs for every
 * number of every operator's shapes, 15 to a GEMM's message). */
static inline int read_i64(const char **p)
{
    const char *s = *p;
    if (*s == '-')
        s++;
    const char *d = s;
    while ((unsigned)(*s - '0') < 10)
        s++;
    if (s == d || s - d > 19 || (*d == '0' && s - d > 1))
        return 0;
    *p = s;
    return 1;
}

/* [[a, b], [], [c]] of (possibly negative) integers at *p; advances *p. */
static int read_shapes(const char **p)
{
    const char *s = *p;
    if (*s++ != '[')
        return 0;
    if (*s == ']') {
        *p = s + 1;
        return 1;
    }
    for (;;) {
        if (*s++ != '[')
            return 0;
        if (*s != ']') {
            for (;;) {
                if (!read_i64(&s))
                    return 0;
                if (*s == ']')
                    break;
                if (s[0] != ',' || s[1] != ' ')
                    return 0;
                s += 2;
            }
        }
        s++;                                /* the inner ']' */
        if (*s == ']') {
            *p = s + 1;
            return 1;
        }
        if (s[0] != ',' || s[1] != ' ')
            return 0;
        s += 2;
    }
}

/* [(id,n), (id,n)] at *p (n is -1 for an input with no producer);
 * advances *p. */
static int read_input_ids(const char **p)
{
    const char *s = *p;
    if (*s++ != '[')
        return 0;
    while (*s != ']') {
        if (*s++ != '(' || !read_i64(&s) || *s++ != ',' || !read_i64(&s) || *s++ != ')')
            return 0;
        if (*s == ',' && s[1] == ' ')
            s += 2;
        else if (*s != ']')
            return 0;
    }
    *p = s + 1;
    return 1;
}

/* An operator rather than a record_function annotation: a qualified name
 * (aten::mm, autograd::engine::evaluate_function: ..., c10d::...), an
 * autograd node (AddmmBackward0) or torch's detach. */
int tp_torch_op_is_operator(const char *name, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        if (name[i] == ':' && name[i + 1] == ':')
            return 1;
    size_t d = n;
    while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9')
        d--;
    static const char backward[] = "Backward";
    size_t b = sizeof backward - 1;
    if (d < n && d >= b && memcmp(name + d - b, backward, b) == 0)
        return 1;
    return n == 6 && memcmp(name, "detach", 6) == 0;
}

#define KEY(k) { k, sizeof k - 1 }
static const struct {
    const char *text;
    size_t len;
} keys[] = { KEY(", seq = "), KEY(", op_id = "), KEY(", sizes = "), KEY(", input_op_ids = ") };
#define NKEYS (sizeof keys / sizeof keys[0])

/* The field key at "c" (", seq = ", ...), by index; -1 if none.  Their
 * third bytes differ ('s', 'o', 's', 'i'): most commas of a message (those
 * of its shapes) are refused by one compare. */
static inline int key_at(const char *c)
{
    if (c[1] != ' ')
        return -1;
    for (size_t k = 0; k < NKEYS; k++)
        if (c[2] == keys[k].text[2] && strncmp(c, keys[k].text, keys[k].len) == 0)
            return (int)k;
    return -1;
}

int tp_torch_op_parse(const char *msg, struct tp_torch_op *op)
{
    if (!msg)
        return 0;
    /* the name ends at the first field torch appends (one pass over the
     * commas: this runs on every push of an operator range) */
    const char *end = NULL;
    size_t first = 0;
    for (const char *c = strchr(msg, ','); c && !end; c = strchr(c + 1, ',')) {
        int k = key_at(c);
        if (k >= 0) {
            end = c;
            first = (size_t)k;
        }
    }
    if (!end || end == msg)
        return 0;
    struct tp_torch_op o = { .name_len = (size_t)(end - msg), .seq = -1 };
    const char *s = end;
    for (size_t k = first; k < NKEYS && *s; k++) {
        if (strncmp(s, keys[k].text, keys[k].len) != 0)
            continue;                       /* fields are optional, in this order */
        s += keys[k].len;
        uint64_t v;
        switch (k) {
        case 0:
            if (!read_u64(&s, &v) || v > INT64_MAX)
                return 0;
            o.seq = (int64_t)v;
            break;
        case 1:
            if (!read_u64(&s, &o.op_id))
                return 0;
            break;
        case 2:
            o.sizes = s;
            if (!read_shapes(&s))
                return 0;
            o.sizes_len = (size_t)(s - o.sizes);
            break;
        default:
            if (!read_input_ids(&s))
                return 0;
        }
    }
    if (*s || !o.op_id)
        return 0;
    o.cpu_op = tp_torch_op_is_operator(msg, o.name_len);
    *op = o;
    return 1;
}

int tp_torch_op_of(const struct tp_record *r, const char *name, struct tp_torch_op *op)
{
    if (r->kind != TP_REC_RANGE || !name)
        return 0;
    if (r->u.range.source != TP_RANGE_TORCH)
        return tp_torch_op_parse(name, op);
    const char *sizes = r->u.range.sizes ? tp_intern_str(r->u.range.sizes) : NULL;
    *op = (struct tp_torch_op){
        .name_len = strlen(name), .seq = r->u.range.seq, .op_id = r->u.range.range_id,
        .sizes = sizes, .sizes_len = sizes ? strlen(sizes) : 0,
    };
    op->cpu_op = tp_torch_op_is_operator(name, op->name_len);
    return op->op_id != 0;
}
