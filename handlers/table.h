/*
 * table.h - text tables for the reports (the summary's key_averages()-like
 * tables), written through a tp_jsonw.
 */
#ifndef TRAINPROF_HANDLERS_TABLE_H
#define TRAINPROF_HANDLERS_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "jsonw.h"

#define TP_TABLE_COLS 10        /* columns at most */
#define TP_TABLE_CELL 48        /* bytes of a formatted cell */
#define TP_TABLE_NAME_MAX 100   /* bytes of the name column before it is cut */

struct tp_table {
    int ncols;
    const char *const *titles;  /* column 0 is the left-aligned name */
    size_t width[TP_TABLE_COLS];
    unsigned left;              /* bit c: column c is left-aligned text, cut
                                   as the name is (column 0 always) */
};

/* tp_table_fit - widen the columns of "t" to hold "cells". */
void tp_table_fit(struct tp_table *t, const char *const *cells);

/* tp_table_rule - a dashed rule across the columns. */
void tp_table_rule(struct tp_jsonw *j, const struct tp_table *t);

/* tp_table_row - one row, aligned to the widths fitted. */
void tp_table_row(struct tp_jsonw *j, const struct tp_table *t, const char *const *cells);

/* Fills row "row": cells[c], for each column, points at buf[c] (TP_TABLE_CELL
 * bytes) on entry; fill writes there or points cells[c] elsewhere.  Called
 * twice per row, once per pass. */
typedef void (*tp_table_fill)(void *ctx, size_t row, const char **cells,
                              char (*buf)[TP_TABLE_CELL]);

/* tp_table_write - a whole table of "nrows" rows filled by "fill" under
 * "titles": fitted in a first pass, then ruled and written in a second. */
void tp_table_write(struct tp_jsonw *j, const char *const *titles, int ncols, size_t nrows,
                    tp_table_fill fill, void *ctx);

/* tp_table_write_left - tp_table_write with the columns of bitmask "left"
 * (bit c for column c) left-aligned and cut like the name, for text such
 * as torch's "Input Shapes". */
void tp_table_write_left(struct tp_jsonw *j, const char *const *titles, int ncols, unsigned left,
                         size_t nrows, tp_table_fill fill, void *ctx);

/* tp_table_cells - a whole table of "nrows" rows of "ncols" cells
 * (cells[row * ncols + col]) under "titles": fitted, ruled and written. */
void tp_table_cells(struct tp_jsonw *j, const char *const *titles, int ncols,
                    char (*cells)[TP_TABLE_CELL], size_t nrows);

/* tp_fmt3 - "ns" in units of "unit_ns" (1000: us, 1000000: ms) with three
 * decimals, rounded, into "buf"; returns buf. */
const char *tp_fmt3(char *buf, size_t n, int64_t ns, int64_t unit_ns);

#endif
