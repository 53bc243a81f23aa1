/*
 * table.c - DESIGN: the text tables of the reports, laid out like torch's
 * key_averages().table(): the name column left-aligned and cut (on a UTF-8
 * boundary, with "...") at TP_TABLE_NAME_MAX bytes, numbers right-aligned,
 * other text columns (torch's "Input Shapes") left-aligned and cut alike,
 * columns two spaces apart (an empty last cell ends the line, with no
 * trailing spaces), dashed rules above and below the header and under the
 * last row.  A table is written in two passes over its rows:
 * tp_table_fit() to find each column's width, then the rules and
 * tp_table_row().  Numbers are formatted with integer arithmetic
 * (tp_fmt3), so that the figures of a report add up exactly.
 */
#include "table.h"

#include <stdio.h>
#include <string.h>

/* "ns" in units of "unit_ns" with three decimals, rounded, integer arithmetic only. */
const char *tp_fmt3(char *buf, size_t n, int64_t ns, int64_t unit_ns)
{
    int64_t milli = unit_ns / 1000;
    int64_t q = ns >= 0 ? (ns + milli / 2) / milli : -((-ns + milli / 2) / milli);
    int64_t a = q < 0 ? -q : q;
    snprintf(buf, n, "%s%lld.%03lld", q < 0 ? "-" : "", (long long)(a / 1000), (long long)(a % 1000));
    return buf;
}

/* Length of at most "max" bytes of s, cut on a UTF-8 boundary. */
static size_t cut_utf8(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max)
        return n;
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        max--;
    return max;
}

void tp_table_rule(struct tp_jsonw *j, const struct tp_table *t)
{
    for (int c = 0; c < t->ncols; c++) {
        if (c)
            tp_jsonw_raw(j, "  ", 2);
        for (size_t k = 0; k < t->width[c]; k++)
            tp_jsonw_char(j, '-');
    }
    tp_jsonw_char(j, '\n');
}

/* Whether column "c" of "t" is left-aligned text (column 0 always is). */
static int is_left(const struct tp_table *t, int c)
{
    return c == 0 || (c < 32 && (t->left >> c & 1u));
}

void tp_table_row(struct tp_jsonw *j, const struct tp_table *t, const char *const *cells)
{
    for (int c = 0; c < t->ncols; c++) {
        int left = is_left(t, c);
        size_t len = left ? cut_utf8(cells[c], TP_TABLE_NAME_MAX) : strlen(cells[c]);
        int cut = left && len < strlen(cells[c]);
        size_t shown = len + (cut ? 3 : 0);
        size_t pad = t->width[c] > shown ? t->width[c] - shown : 0;
        if (c + 1 == t->ncols && !cells[c][0])
            break;                      /* no trailing spaces */
        if (c)
            tp_jsonw_raw(j, "  ", 2);
        for (size_t k = 0; !left && k < pad; k++)
            tp_jsonw_char(j, ' ');
        tp_jsonw_raw(j, cells[c], len);
        if (cut)
            tp_jsonw_raw(j, "...", 3);
        for (size_t k = 0; left && k < pad && c + 1 < t->ncols; k++)
            tp_jsonw_char(j, ' ');
    }
    tp_jsonw_char(j, '\n');
}

void tp_table_fit(struct tp_table *t, const char *const *cells)
{
    for (int c = 0; c < t->ncols; c++) {
        size_t len = strlen(cells[c]);
        if (is_left(t, c) && len > TP_TABLE_NAME_MAX)
            len = cut_utf8(cells[c], TP_TABLE_NAME_MAX) + 3;
        if (len > t->width[c])
            t->width[c] = len;
    }
}

void tp_table_write(struct tp_jsonw *j, const char *const *titles, int ncols, size_t nrows,
                    tp_table_fill fill, void *ctx)
{
    tp_table_write_left(j, titles, ncols, 1u, nrows, fill, ctx);
}

void tp_table_write_left(struct tp_jsonw *j, const char *const *titles, int ncols, unsigned left,
                         size_t nrows, tp_table_fill fill, void *ctx)
{
    struct tp_table t = { .ncols = ncols, .titles = titles, .left = left };
    char buf[TP_TABLE_COLS][TP_TABLE_CELL];
    const char *cells[TP_TABLE_COLS];
    tp_table_fit(&t, titles);
    for (int pass = 0; pass < 2; pass++) {
        if (pass) {
            tp_table_rule(j, &t);
            tp_table_row(j, &t, titles);
            tp_table_rule(j, &t);
        }
        for (size_t i = 0; i < nrows; i++) {
            for (int c = 0; c < ncols; c++)
                cells[c] = buf[c];
            fill(ctx, i, cells, buf);
            if (pass)
                tp_table_row(j, &t, cells);
            else
                tp_table_fit(&t, cells);
        }
    }
    tp_table_rule(j, &t);
}

struct cells_ctx {
    int ncols;
    char (*cells)[TP_TABLE_CELL];
};

static void fill_from_cells(void *ctx, size_t row, const char **cells, char (*buf)[TP_TABLE_CELL])
{
    const struct cells_ctx *x = ctx;
    (void)buf;
    for (int c = 0; c < x->ncols; c++)
        cells[c] = x->cells[row * (size_t)x->ncols + (size_t)c];
}

void tp_table_cells(struct tp_jsonw *j, const char *const *titles, int ncols,
                    char (*cells)[TP_TABLE_CELL], size_t nrows)
{
    struct cells_ctx x = { ncols, cells };
    tp_table_write(j, titles, ncols, nrows, fill_from_cells, &x);
}
