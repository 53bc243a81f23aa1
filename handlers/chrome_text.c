/*
 * chrome_text.c - DESIGN: the table of names' texts of a chrome trace
 * (struct chrome_text in chrome_impl.h): for a name the window's events
 * repeat, the literal before it and the name quoted and escaped, made once
 * and then copied whole into each event (chrome.c's heads, chrome_args.c's
 * kernel names).  Direct-mapped on the name's pointer and the literal's,
 * CHROME_TEXTS entries, names up to CHROME_TEXT_MAX bytes; each use
 * compares the kept name with the one given (strcmp), since a name may
 * come from a buffer that holds another name at the next event.  Apart
 * from chrome.c so that the two files that use it do not use each other.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chrome_impl.h"

const struct chrome_text *tp_chrome_text(struct chrome *c, const char *prefix, size_t prefix_len,
                                         const char *s)
{
    if (!c->texts)
        return NULL;
    uint64_t k = ((uint64_t)(uintptr_t)s ^ ((uint64_t)(uintptr_t)prefix << 7)) * 0x9e3779b97f4a7c15ull;
    struct chrome_text *t = &c->texts[(k >> 40) & (CHROME_TEXTS - 1)];
    if (t->key == s && t->prefix == prefix) {
        if (strcmp(t->raw, s) == 0)
            return t;
        return NULL;    /* a buffer that holds one name after another: not kept */
    }
    size_t n = strnlen(s, CHROME_TEXT_MAX + 1);
    if (n > CHROME_TEXT_MAX || prefix_len > 128)
        return NULL;
    /* the name and its NUL, then the text with the escaper's spare bytes
     * and 16 more to read (zeroed: nothing unset is ever copied) */
    char *raw = calloc(1, n + 1 + prefix_len + TP_JSONW_STR_ROOM(n) + 16);
    if (!raw)
        return NULL;
    memcpy(raw, s, n);
    char *text = raw + n + 1;
    memcpy(text, prefix, prefix_len);
    char *end = tp_jsonw_put_strn(text + prefix_len, s, n);
    memset(end, 0, 16);
    size_t len = (size_t)(end - text);
    char *fit = realloc(raw, n + 1 + len + 16);     /* the escaper's spare room back */
    if (fit)
        raw = fit;
    free(t->raw);
    t->prefix = prefix;
    t->key = s;
    t->raw = raw;
    t->text = raw + n + 1;
    t->len = (uint32_t)len;
    return t;
}

void tp_chrome_free_texts(struct chrome *c)
{
    if (!c->texts)
        return;
    for (size_t i = 0; i < CHROME_TEXTS; i++)
        free(c->texts[i].raw);
    free(c->texts);
    c->texts = NULL;
}
