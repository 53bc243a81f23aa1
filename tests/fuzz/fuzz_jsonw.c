/*
 * fuzz_jsonw.c - libFuzzer harness: the JSON string writer
 * (handlers/jsonw.c: tp_jsonw_strn, tp_jsonw_str) that writes every name,
 * argument and metadata string of a trace.
 *
 * DESIGN
 * The input bytes, arbitrary, are written as one JSON string (plain text,
 * no gzip) into a memfd, in an array beside the same bytes cut at their
 * first NUL through tp_jsonw_str; the text is read back and parsed with
 * jansson.  It must parse, hold no raw control byte (Perfetto rejects any
 * iscntrl byte, even inside strings), and decode to the expected string:
 * the input with each valid UTF-8 sequence kept as it is and each byte that
 * does not start one (a stray continuation byte, a truncated or overlong
 * sequence, a surrogate, a code point above U+10FFFF, 0xc0, 0xc1,
 * 0xf5..0xff) replaced by U+FFFD, one U+FFFD per byte, as jsonw.h
 * documents.  The expected string is computed here by a separate decoder
 * written from the Unicode standard's table 3-7 of well-formed sequences,
 * so the harness checks the writer rather than repeating it.
 */
#include "handlers/jsonw.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Length of the well-formed UTF-8 sequence at s (n bytes left), 0 if none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char b = s[0];
    if (b < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;   /* range of the second byte */
    if (b >= 0xc2 && b <= 0xdf)
        len = 2;
    else if (b >= 0xe0 && b <= 0xef) {
        len = 3;
        if (b == 0xe0)
            lo = 0xa0;
        if (b == 0xed)
            hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
        len = 4;
        if (b == 0xf0)
            lo = 0x90;
        if (b == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

/* The expected decoded string; its length in *outn. */
static char *expected(const unsigned char *s, size_t n, size_t *outn)
{
    char *e = malloc(n * 3 + 1);
    size_t k = 0;
    if (!e)
        abort();
    for (size_t i = 0; i < n;) {
        size_t len = utf8_len(s + i, n - i);
        if (len) {
            memcpy(e + k, s + i, len);
            k += len;
            i += len;
        } else {
            memcpy(e + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        }
    }
    *outn = k;
    return e;
}

static int fd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fd < 0)
        fd = memfd_create("fuzz_jsonw", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)
        abort();
    char *cstr = strndup((const char *)data, size);
    if (!cstr)
        abort();
    struct tp_jsonw w;
    if (tp_jsonw_init(&w, fd, 0, 0) != 0)
        abort();
    tp_jsonw_char(&w, '[');
    tp_jsonw_strn(&w, (const char *)data, size);
    tp_jsonw_char(&w, ',');
    tp_jsonw_str(&w, cstr);
    tp_jsonw_char(&w, ',');
    tp_jsonw_str(&w, NULL);
    tp_jsonw_char(&w, ']');
    if (tp_jsonw_finish(&w) != 0)
        abort();

    off_t len = lseek(fd, 0, SEEK_END);
    char *text = malloc((size_t)len + 1);
    if (!text || pread(fd, text, (size_t)len, 0) != len)
        abort();
    for (off_t i = 0; i < len; i++)
        if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f) {
            fprintf(stderr, "raw control byte 0x%02x at %lld\n", (unsigned char)text[i], (long long)i);
            abort();
        }
    json_error_t err;
    json_t *a = json_loadb(text, (size_t)len, JSON_ALLOW_NUL, &err);
    if (!json_is_array(a) || json_array_size(a) != 3) {
        fprintf(stderr, "not JSON: %s: %.*s\n", err.text, (int)len, text);
        abort();
    }
    const char *want_in[2] = { (const char *)data, cstr };
    size_t want_n[2] = { size, strlen(cstr) };
    for (int i = 0; i < 2; i++) {
        size_t en;
        char *e = expected((const unsigned char *)want_in[i], want_n[i], &en);
        json_t *s = json_array_get(a, (size_t)i);
        if (!json_is_string(s) || json_string_length(s) != en ||
            memcmp(json_string_value(s), e, en) != 0) {
            fprintf(stderr, "string %d does not decode to the expected text: %.*s\n", i, (int)len, text);
            abort();
        }
        free(e);
    }
    if (json_string_length(json_array_get(a, 2)) != 0)
        abort();
    json_decref(a);
    free(text);
    free(cstr);
    return 0;
}
