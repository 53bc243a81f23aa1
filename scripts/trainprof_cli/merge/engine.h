/*
 * engine.h - the engine of `trainprof merge` (engine.c):
 * one input's event array, rewritten for its rank and compressed.  Its one
 * caller is scripts/trainprof_cli/merge/__init__.py (ctypes; its _Job mirrors struct
 * tp_merge_job field for field) and tests/unit/test_merge_engine.c.
 */
#ifndef TRAINPROF_SCRIPTS_TRAINPROF_CLI_MERGE_ENGINE_H
#define TRAINPROF_SCRIPTS_TRAINPROF_CLI_MERGE_ENGINE_H

#include <stdint.h>
#include <stddef.h>

/* Rewrites one metadata line (the rewritten line, without its trailing
 * comma) into out[0, cap): returns the length written, the length needed
 * when cap is too small (the call is repeated with a larger out), or -1 when
 * the line is not valid JSON. */
typedef long (*tp_merge_meta_fn)(const char *line, size_t len, char *out, size_t cap);

/* One input's event array.  Mirrored by merge/__init__.py's _Job. */
struct tp_merge_job {
    /* in */
    const char *path;
    uint64_t skip;              /* decompressed bytes before the array's first byte */
    int out_fd;                 /* raw deflate pieces are appended here */
    uint32_t slot;
    const char *suffix;         /* digits appended to flow ids ("": none) */
    int64_t shift_ns;           /* added to every ts (0: ts untouched) */
    int threads;                /* compressor threads (0: the caller compresses) */
    int plain;                  /* write the text itself, not deflated */
    tp_merge_meta_fn meta;
    /* out */
    int status;                 /* 0: array ended; 1: not an object; -1: error */
    uint64_t resume;            /* status 1: decompressed offset to go on from */
    uint64_t events;            /* events (lines) written */
    uint64_t text_bytes;        /* uncompressed bytes written */
    uint64_t read_bytes;        /* compressed bytes read */
    uint32_t crc;               /* CRC-32 of the text written */
    char *trailer;              /* status 0: what follows "]", NUL-terminated (tp_merge_free) */
    uint64_t trailer_len;
    int64_t *pids;              /* the new pids seen (tp_merge_free) */
    uint64_t npids;
    char error[256];
};

/*
 * tp_merge_events - read job->path (gzip, several members allowed, or
 * plain) from decompressed offset job->skip, the first byte of its event
 * array; rewrite each event line and append it to job->out_fd as raw
 * deflate pieces (byte-aligned, no final block: the caller writes the gzip
 * header, the final block and the trailer from job->crc and
 * job->text_bytes), or as text when job->plain; each event is one line
 * ending in ",\n", whatever its layout in the input.  Returns job->status:
 * 0 at the array's end (job->trailer holds the rest of the file), 1 at the
 * first element that is not a well-formed object (job->resume: where the
 * caller goes on), -1 on an error (job->error says it in one line).  Never
 * exits, never prints.
 */
int tp_merge_events(struct tp_merge_job *job);

/* tp_merge_free - free what tp_merge_events allocated in job. */
void tp_merge_free(struct tp_merge_job *job);

#endif
