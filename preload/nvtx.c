/*
 * nvtx.c - DESIGN: libtrainprof.so is its own NVTX injection library.
 *
 * NVTX3 is header-only; each DSO that uses it dlopen()s NVTX_INJECTION64_PATH
 * on its first NVTX call and calls InitializeInjectionNvtx2 with an export
 * table through which we fill that DSO's CORE and CORE2 function slots
 * (NVTX's nvtxInit.h, in CUDA's headers, is the loader's side).  The
 * constructor points the variable at our own file (dladdr + realpath, never
 * overwriting another tool's value), so dlopen() returns the already
 * preloaded object.  Each callback hands its message to the range API of
 * collector/wrap/ranges.h as text, which interns it only when a window records it:
 * before activation and outside windows a message costs no memory, however
 * many distinct ones a program sends.
 * Outside windows a push whose range needs only its place on the stack
 * (no window records, no nvtx:GLOB signal can count its end: checked by
 * the message's first byte while one is live) is ranges.h's bare push, a
 * per-thread counter, inline here; its pop is the counter going down.
 * Nothing here allocates per call, locks (beyond a first-time intern), calls
 * CUDA or prints.  Handles are encodings of interned ids (id + 1, so never
 * NULL): a domain handle carries its name's id and a registered string handle
 * its text's id, so resolving them needs no table and no lock.  They are
 * interned when made, before activation too (a handle lives as long as the
 * process), within the name table's budget: past it the handle names
 * "<name table full>".
 */
#define NVTX_NO_IMPL     /* types and declarations only: we are the tool */
#include <nvtx3/nvToolsExt.h>

#include <dlfcn.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <wchar.h>

#include "collector/config/config.h"
#include "collector/record/intern.h"
#include "collector/record/torchop.h"
#include "collector/wrap/ranges.h"

#define TP_NVTX_EXPORT __attribute__((visibility("default")))

/* The fields we read end with the message; older or foreign structs that
 * stop short of it are treated as unnamed. */
#define TP_NVTX_ATTR_MIN (offsetof(nvtxEventAttributes_t, message) + sizeof(nvtxMessageValue_t))

/* ---- handles ------------------------------------------------------------ */

static inline uint32_t tp_nvtx_handle_id(const void *h)
{
    uintptr_t v = (uintptr_t)h;
    /* NULL (the default domain) and anything not made by us map to id 0 */
    return (v == 0 || v > TP_INTERN_MAX) ? 0 : (uint32_t)(v - 1);
}

static inline void *tp_nvtx_id_handle(uint32_t id)
{
    return (void *)((uintptr_t)id + 1);
}

/* ---- messages ----------------------------------------------------------- */

/* Encode one code point as UTF-8 into out (4 bytes free); returns bytes. */
static size_t tp_nvtx_utf8(uint32_t c, char *out)
{
    if (c >= 0xD800 && c <= 0xDFFF)
        c = 0xFFFD;
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    if (c > 0x10FFFF)
        return tp_nvtx_utf8(0xFFFD, out);
    out[0] = (char)(0xF0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* A wide string (UTF-32 on Linux) as UTF-8 text in "buf" (TP_NVTX_WIDE
 * bytes), cut at the intern limit and NUL-terminated; the W entry points
 * are rare (Windows-first API). */
#define TP_NVTX_WIDE (TP_INTERN_LEN_MAX + 5)

static struct tp_msg tp_nvtx_wide(const wchar_t *w, char *buf)
{
    size_t n = 0;

    if (!w)
        return TP_MSG_ID(0);
    for (; *w && n + 4 <= TP_INTERN_LEN_MAX; w++)
        n += tp_nvtx_utf8((uint32_t)*w, buf + n);
    buf[n] = 0;
    return TP_MSG_TEXT(buf, n);
}

static inline struct tp_msg tp_nvtx_text(const char *s)
{
    return s ? TP_MSG_TEXT(s, (size_t)-1) : TP_MSG_ID(0);
}

/* The message of "a"; "buf" (TP_NVTX_WIDE bytes) holds a wide one's text. */
static struct tp_msg tp_nvtx_message(const nvtxEventAttributes_t *a, char *buf)
{
    if (!a || a->size < TP_NVTX_ATTR_MIN)
        return TP_MSG_ID(0);
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
        return tp_nvtx_text(a->message.ascii);
    case NVTX_MESSAGE_TYPE_REGISTERED:
        return TP_MSG_ID(tp_nvtx_handle_id(a->message.registered));
    case NVTX_MESSAGE_TYPE_UNICODE:
        return tp_nvtx_wide(a->message.unicode, buf);
    default:
        return TP_MSG_ID(0);
    }
}

/* ---- CORE callbacks ----------------------------------------------------- */

static void NVTX_API tp_nvtx_mark_a(const char *message)
{
    tp_mark(tp_nvtx_text(message), 0);
}

static void NVTX_API tp_nvtx_mark_w(const wchar_t *message)
{
    char buf[TP_NVTX_WIDE];
    if (tp_ranges_taken())
        tp_mark(tp_nvtx_wide(message, buf), 0);
}

static void NVTX_API tp_nvtx_mark_ex(const nvtxEventAttributes_t *a)
{
    char buf[TP_NVTX_WIDE];
    if (tp_ranges_taken())
        tp_mark(tp_nvtx_message(a, buf), 0);
}

static nvtxRangeId_t NVTX_API tp_nvtx_range_start_a(const char *message)
{
    return tp_range_start(tp_nvtx_text(message), 0);
}

static nvtxRangeId_t NVTX_API tp_nvtx_range_start_w(const wchar_t *message)
{
    char buf[TP_NVTX_WIDE];
    return tp_range_start(tp_nvtx_wide(message, buf), 0);
}

static nvtxRangeId_t NVTX_API tp_nvtx_range_start_ex(const nvtxEventAttributes_t *a)
{
    char buf[TP_NVTX_WIDE];
    return tp_range_start(tp_nvtx_message(a, buf), 0);
}

static void NVTX_API tp_nvtx_range_end(nvtxRangeId_t id)
{
    tp_range_end(id);
}

/* An ASCII push: one of torch's operator ranges keeps its fields in the
 * record (collector/record/torchop.h), and torch's own ProfilerStep#N ranges are
 * not recorded (they still end a step if an nvtx:GLOB signal names them);
 * nothing is parsed while ranges are off (before activation a range keeps
 * only its place on the stack and whether it ends a step: ranges.h). */
static __attribute__((noinline)) int tp_nvtx_push_ascii_full(const char *message, uint32_t domain)
{
    if (!tp_ranges_taken())
        return tp_range_push_hidden(tp_nvtx_text(message), 1);
    if (tp_ranges_placed_only())        /* outside windows: no parse */
        return tp_range_push_hidden(TP_MSG_ID(0), 0);
    struct tp_torch_op op;
    if (message && tp_torch_op_parse(message, &op)) {
        if (tp_torch_op_is_profiler_step(message, op.name_len))
            return tp_range_push_hidden(TP_MSG_TEXT(message, op.name_len), 1);
        return tp_range_push_torch(message, &op, domain);
    }
    return tp_range_push(tp_nvtx_text(message), domain, TP_RANGE_NVTX);
}

static inline int tp_nvtx_push_ascii(const char *message, uint32_t domain)
{
    if (__builtin_expect(tp_range_bare_text(message), 1))   /* outside windows */
        return tp_range_push_bare();
    return tp_nvtx_push_ascii_full(message, domain);
}

static int NVTX_API tp_nvtx_range_push_a(const char *message)
{
    return tp_nvtx_push_ascii(message, 0);
}

static int NVTX_API tp_nvtx_range_push_w(const wchar_t *message)
{
    char buf[TP_NVTX_WIDE];
    if (tp_range_bare())                /* no text is made */
        return tp_range_push_bare();
    return tp_range_push(tp_nvtx_wide(message, buf), 0, TP_RANGE_NVTX);
}

static int NVTX_API tp_nvtx_range_push_ex(const nvtxEventAttributes_t *a)
{
    char buf[TP_NVTX_WIDE];
    if (a && a->size >= TP_NVTX_ATTR_MIN && a->messageType == NVTX_MESSAGE_TYPE_ASCII)
        return tp_nvtx_push_ascii(a->message.ascii, 0);
    if (tp_range_bare())
        return tp_range_push_bare();
    return tp_range_push(tp_nvtx_message(a, buf), 0, TP_RANGE_NVTX);
}

static int NVTX_API tp_nvtx_range_pop(void)
{
    return tp_range_pop();
}

/* Thread and category names have no place in the record stream yet; the
 * slots are filled so that the NVTX stubs stay trivially cheap (CUPTI 13.0.0
 * as injection crashed in nvtxNameOsThreadA, NVIDIA/NVTX#125). */
static void NVTX_API tp_nvtx_name_category_a(uint32_t category, const char *name)
{
    (void)category;
    (void)name;
}

static void NVTX_API tp_nvtx_name_os_thread_a(uint32_t tid, const char *name)
{
    (void)tid;
    (void)name;
}

/* ---- CORE2 (domain) callbacks ------------------------------------------- */

/*
 * One domain per name: creating "NCCL" twice yields the same handle, which
 * NVTX allows (a domain handle is only a scope).  All domains share the
 * thread's one range stack (collector/wrap/ranges.h), so pops in one domain close
 * the innermost range of any domain: NVTX's per-domain stacks differ only
 * for interleaved, non-nested use across domains.
 */
/* The interned id of a handle's text (bounded: the table's budget). */
static uint32_t tp_nvtx_intern(struct tp_msg m)
{
    return m.text ? tp_intern(m.text, m.len) : m.id;
}

static nvtxDomainHandle_t NVTX_API tp_nvtx_domain_create_a(const char *name)
{
    return (nvtxDomainHandle_t)tp_nvtx_id_handle(tp_nvtx_intern(tp_nvtx_text(name)));
}

static nvtxDomainHandle_t NVTX_API tp_nvtx_domain_create_w(const wchar_t *name)
{
    char buf[TP_NVTX_WIDE];
    return (nvtxDomainHandle_t)tp_nvtx_id_handle(tp_nvtx_intern(tp_nvtx_wide(name, buf)));
}

static void NVTX_API tp_nvtx_domain_destroy(nvtxDomainHandle_t domain)
{
    (void)domain;   /* interned names live as long as the process */
}

static nvtxStringHandle_t NVTX_API tp_nvtx_register_string_a(nvtxDomainHandle_t domain,
                                                           const char *s)
{
    (void)domain;
    return (nvtxStringHandle_t)tp_nvtx_id_handle(tp_nvtx_intern(tp_nvtx_text(s)));
}

static nvtxStringHandle_t NVTX_API tp_nvtx_register_string_w(nvtxDomainHandle_t domain,
                                                           const wchar_t *s)
{
    (void)domain;
    char buf[TP_NVTX_WIDE];
    return (nvtxStringHandle_t)tp_nvtx_id_handle(tp_nvtx_intern(tp_nvtx_wide(s, buf)));
}

static void NVTX_API tp_nvtx_domain_mark_ex(nvtxDomainHandle_t domain,
                                            const nvtxEventAttributes_t *a)
{
    char buf[TP_NVTX_WIDE];
    if (tp_ranges_taken())
        tp_mark(tp_nvtx_message(a, buf), tp_nvtx_handle_id(domain));
}

static nvtxRangeId_t NVTX_API tp_nvtx_domain_range_start_ex(nvtxDomainHandle_t domain,
                                                           const nvtxEventAttributes_t *a)
{
    char buf[TP_NVTX_WIDE];
    return tp_range_start(tp_nvtx_message(a, buf), tp_nvtx_handle_id(domain));
}

static void NVTX_API tp_nvtx_domain_range_end(nvtxDomainHandle_t domain, nvtxRangeId_t id)
{
    (void)domain;
    tp_range_end(id);
}

static int NVTX_API tp_nvtx_domain_range_push_ex(nvtxDomainHandle_t domain,
                                                 const nvtxEventAttributes_t *a)
{
    char buf[TP_NVTX_WIDE];
    if (a && a->size >= TP_NVTX_ATTR_MIN && a->messageType == NVTX_MESSAGE_TYPE_ASCII
            ? tp_range_bare_text(a->message.ascii) : tp_range_bare())
        return tp_range_push_bare();
    return tp_range_push(tp_nvtx_message(a, buf), tp_nvtx_handle_id(domain), TP_RANGE_NVTX);
}

static int NVTX_API tp_nvtx_domain_range_pop(nvtxDomainHandle_t domain)
{
    (void)domain;
    return tp_range_pop();
}

static void NVTX_API tp_nvtx_initialize(const void *reserved)
{
    (void)reserved;
}

/* ---- the injection entry point ------------------------------------------ */

struct tp_nvtx_slot {
    unsigned id;
    NvtxFunctionPointer fn;
};

#define TP_SLOT(id, fn) { (unsigned)(id), (NvtxFunctionPointer)(fn) }

static const struct tp_nvtx_slot tp_nvtx_core[] = {
    TP_SLOT(NVTX_CBID_CORE_MarkEx,         tp_nvtx_mark_ex),
    TP_SLOT(NVTX_CBID_CORE_MarkA,          tp_nvtx_mark_a),
    TP_SLOT(NVTX_CBID_CORE_MarkW,          tp_nvtx_mark_w),
    TP_SLOT(NVTX_CBID_CORE_RangeStartEx,   tp_nvtx_range_start_ex),
    TP_SLOT(NVTX_CBID_CORE_RangeStartA,    tp_nvtx_range_start_a),
    TP_SLOT(NVTX_CBID_CORE_RangeStartW,    tp_nvtx_range_start_w),
    TP_SLOT(NVTX_CBID_CORE_RangeEnd,       tp_nvtx_range_end),
    TP_SLOT(NVTX_CBID_CORE_RangePushEx,    tp_nvtx_range_push_ex),
    TP_SLOT(NVTX_CBID_CORE_RangePushA,     tp_nvtx_range_push_a),
    TP_SLOT(NVTX_CBID_CORE_RangePushW,     tp_nvtx_range_push_w),
    TP_SLOT(NVTX_CBID_CORE_RangePop,       tp_nvtx_range_pop),
    TP_SLOT(NVTX_CBID_CORE_NameCategoryA,  tp_nvtx_name_category_a),
    TP_SLOT(NVTX_CBID_CORE_NameOsThreadA,  tp_nvtx_name_os_thread_a),
};

static const struct tp_nvtx_slot tp_nvtx_core2[] = {
    TP_SLOT(NVTX_CBID_CORE2_DomainMarkEx,          tp_nvtx_domain_mark_ex),
    TP_SLOT(NVTX_CBID_CORE2_DomainRangeStartEx,    tp_nvtx_domain_range_start_ex),
    TP_SLOT(NVTX_CBID_CORE2_DomainRangeEnd,        tp_nvtx_domain_range_end),
    TP_SLOT(NVTX_CBID_CORE2_DomainRangePushEx,     tp_nvtx_domain_range_push_ex),
    TP_SLOT(NVTX_CBID_CORE2_DomainRangePop,        tp_nvtx_domain_range_pop),
    TP_SLOT(NVTX_CBID_CORE2_DomainRegisterStringA, tp_nvtx_register_string_a),
    TP_SLOT(NVTX_CBID_CORE2_DomainRegisterStringW, tp_nvtx_register_string_w),
    TP_SLOT(NVTX_CBID_CORE2_DomainCreateA,         tp_nvtx_domain_create_a),
    TP_SLOT(NVTX_CBID_CORE2_DomainCreateW,         tp_nvtx_domain_create_w),
    TP_SLOT(NVTX_CBID_CORE2_DomainDestroy,         tp_nvtx_domain_destroy),
    TP_SLOT(NVTX_CBID_CORE2_Initialize,            tp_nvtx_initialize),
};

/* Fill one module's slots; returns 0 if NVTX does not offer the module. */
static int tp_nvtx_fill(const NvtxExportTableCallbacks *cb, NvtxCallbackModule module,
                        const struct tp_nvtx_slot *slots, size_t n)
{
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;

    if (!cb->GetModuleFunctionTable(module, &table, &size) || !table)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (slots[i].id < size && table[slots[i].id])   /* ids 1..size-1; [size] is NULL */
            *table[slots[i].id] = slots[i].fn;
    return 1;
}

/*
 * InitializeInjectionNvtx2 - called by NVTX once per NVTX-using DSO (each has
 * its own tables), so it keeps no state of its own and may run any number of
 * times, concurrently too.  Returns 1 on success.  With profiling disabled
 * or this rank excluded (a child that inherited the variable, the exec
 * handler's children run with TRAINPROF_ENABLED=0) it returns 0: NVTX then
 * turns every call of that DSO into its built-in no-op, cheaper than ours.
 */
TP_NVTX_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable)
{
    const NvtxExportTableCallbacks *cb;
    const NvtxExportTableVersionInfo *vi;

    tp_config_init();
    if (!tp_cfg.enabled || !tp_cfg.rank_selected || !getExportTable)
        return 0;
    cb = (const NvtxExportTableCallbacks *)getExportTable(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof(*cb) || !cb->GetModuleFunctionTable)
        return 0;
    if (!tp_nvtx_fill(cb, NVTX_CB_MODULE_CORE, tp_nvtx_core,
                      sizeof(tp_nvtx_core) / sizeof(tp_nvtx_core[0])))
        return 0;
    /* CORE2 is absent only in NVTX 1 clients, which have no domains */
    tp_nvtx_fill(cb, NVTX_CB_MODULE_CORE2, tp_nvtx_core2,
                 sizeof(tp_nvtx_core2) / sizeof(tp_nvtx_core2[0]));

    /* "must be set by tools when attaching" (nvtxTypes.h); ignored today */
    vi = (const NvtxExportTableVersionInfo *)getExportTable(NVTX_ETID_VERSIONINFO);
    if (vi && vi->struct_size >= sizeof(*vi) && vi->SetInjectionNvtxVersion)
        vi->SetInjectionNvtxVersion(NVTX_VERSION);
    return 1;
}
