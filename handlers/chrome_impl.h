/*
 * chrome_impl.h - what the three files of the chrome handler share
 * (private): the handler's state and the writers each lends the others.
 * chrome.c writes the events and is the handler (open, event, close);
 * chrome_header.c writes the top-level keys before "traceEvents";
 * chrome_args.c writes the arguments of host calls (launches, library
 * calls and their FLOPs and shapes, collectives, copies).
 */
#ifndef TRAINPROF_HANDLERS_CHROME_IMPL_H
#define TRAINPROF_HANDLERS_CHROME_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "handler.h"
#include "jsonw.h"
#include "output.h"

#define LIT TP_JSONW_LIT

struct chrome_thread {
    int32_t pid, tid;
    int used;
    int gpu;                       /* a device's stream track */
    char name[64];
};

/* A name's text as the trace writes it, kept for the window (chrome_text.c
 * tp_chrome_text): the literal before it ("key" ph and cat and "name": , or
 * "kernel": ) and the name quoted and escaped, for one memcpy per event
 * instead of strlen and the escaper.  "raw" is the name (NUL-terminated)
 * the entry stands for, compared with strcmp at each use, since a name may
 * come from a buffer that holds another name later. */
struct chrome_text {
    const char *prefix, *key;      /* what it was made from (pointers) */
    char *raw;                     /* the name, then NUL, then "text" */
    const char *text;              /* prefix + quoted name, 16 bytes readable past "len" */
    uint32_t len;
};

/* Entries of the table (direct-mapped on the two pointers), and the
 * longest name kept (longer ones are escaped per event). */
#define CHROME_TEXTS 512
#define CHROME_TEXT_MAX 2048

struct chrome {
    struct tp_output out;
    struct tp_jsonw j;
    int64_t base;
    int64_t meta_ts;               /* ts of the metadata events, relative */
    uint64_t events;
    int32_t ids_pid, ids_tid;      /* whose text "ids" holds (chrome.c ids_text) */
    size_t ids_len;                /* 0: none yet */
    char ids[64];                  /* , "pid": P, "tid": T, "ts": (at most 48 bytes) */
    struct chrome_text *texts;     /* CHROME_TEXTS entries, NULL: none */
    uint64_t xid;                  /* the last External id written, and its digits */
    uint32_t xid_len;              /* 0: none yet */
    char xid_text[32];             /* 20 digits at most, read 16 at a time */
    struct chrome_thread *threads; /* open addressing on (pid, tid) */
    size_t nthreads, cap;
    size_t last;                   /* slot of the previous event's thread */
    int record_shapes;
    const struct tp_window_step *steps;
    uint64_t n_steps;
    int flops_track;               /* some step has library FLOPs: the FLOPs and TFLOP/s tracks */
    int rank, world_size;          /* the process's, for its process groups */
};

/* At most this many ranks are listed in "Process Group Ranks" and pg_config. */
#define TP_PG_RANKS_LISTED 64

static inline void put_key_str(struct tp_jsonw *j, const char *key, const char *v)
{
    tp_jsonw_lit(j, key);
    tp_jsonw_str(j, v);
}

static inline void put_key_u64(struct tp_jsonw *j, const char *key, uint64_t v)
{
    tp_jsonw_lit(j, key);
    tp_jsonw_u64(j, v);
}

static inline void put_triple(struct tp_jsonw *j, uint64_t x, uint64_t y, uint64_t z)
{
    tp_jsonw_char(j, '[');
    tp_jsonw_u64(j, x);
    LIT(j, ", ");
    tp_jsonw_u64(j, y);
    LIT(j, ", ");
    tp_jsonw_u64(j, z);
    tp_jsonw_char(j, ']');
}

/* chrome_header.c */

/* tp_chrome_put_header - the top-level keys of window "w", up to and
 * including "traceEvents": [. */
void tp_chrome_put_header(struct chrome *c, const struct tp_window *w);

/* tp_chrome_dist_rank - this process's rank and world size for
 * distributedInfo and the process groups. */
void tp_chrome_dist_rank(const struct tp_window *w, int *rank, int *world_size);

/* tp_chrome_is_world - whether a process group of "size" where this
 * process has "rank" is the world (world_size, my_rank: tp_chrome_dist_rank's). */
int tp_chrome_is_world(int size, int rank, int world_size, int my_rank);

/* tp_chrome_put_rank_list - "[0, 1, ..., n-1]", quoted when "as_string". */
void tp_chrome_put_rank_list(struct tp_jsonw *j, int n, int as_string);

/* chrome_text.c */

/* tp_chrome_text - "prefix" (a literal, "prefix_len" bytes) then "s"
 * quoted and escaped, from the table (made on a miss), or NULL (too long,
 * no memory: write it the long way).  Its text may be read 16 bytes past
 * its length (tp_chrome_copy16). */
const struct chrome_text *tp_chrome_text(struct chrome *c, const char *prefix, size_t prefix_len,
                                         const char *s);

/* tp_chrome_free_texts - free the table and its texts; c->texts NULL after. */
void tp_chrome_free_texts(struct chrome *c);

/* tp_chrome_copy16 - "n" bytes of "s" to "p" sixteen at a time: both may
 * be read or written up to 15 bytes past "n"; the end. */
static inline char *tp_chrome_copy16(char *p, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i += 16)
        __builtin_memcpy(p + i, s + i, 16);
    return p + n;
}

/* chrome_args.c */

/* tp_chrome_put_call_args - the form's arguments of call event "ev",
 * inside its "args" object. */
void tp_chrome_put_call_args(struct chrome *c, const struct tp_event *ev);

/* tp_chrome_put_coll - collective "r"'s record_param_comms arguments. */
void tp_chrome_put_coll(struct chrome *c, const struct tp_record *r);

/* tp_chrome_coll_nelems - collective "r"'s elements in and out per rank. */
void tp_chrome_coll_nelems(const struct tp_record *r, uint64_t *in, uint64_t *out);

#endif
