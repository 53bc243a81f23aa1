/*
 * cupti_layout_probe.c - prints, for the CUPTI headers it is compiled
 * against, the size of each activity record struct we read and the offset
 * and width of each field collector/device/cupti_decode.c reads from it (the field
 * lists of collector/device/cupti_layouts.h).  Not a test by itself: the script
 * scripts/dev/cupti-layouts compiles it once per CUPTI header version, with
 * -DTP_PROBE_<family>=<struct> naming the struct that version's header
 * documents for the kind, and writes the output to
 * tests/unit/data/cupti_layouts.txt, which tests/unit/test_cupti.c
 * compares with the table in cupti_decode.c.
 *
 * Output, one line per family:
 *   <api version> <family> <struct> size <n> <field>@<offset>:<width> ...
 */
#include "collector/device/cupti_layouts.h"

#include <cupti_activity.h>
#include <cupti_version.h>

#include <stddef.h>
#include <stdio.h>

#define TP_PROBE_FIELD(T, f) \
    printf(" %s@%zu:%zu", #f, offsetof(T, f), sizeof(((T *)0)->f));
#define TP_STR2(x) #x
#define TP_STR(x) TP_STR2(x)
#define TP_PROBE_FAMILY(member, FIELDS, REF, KIND) \
    printf("%u %s %s size %zu", (unsigned)CUPTI_API_VERSION, #member, TP_STR(TP_PROBE_##member), \
           sizeof(TP_PROBE_##member)); \
    FIELDS(TP_PROBE_FIELD, TP_PROBE_##member) \
    printf("\n");

int main(void)
{
    TP_CUPTI_FAMILIES(TP_PROBE_FAMILY)
    return 0;
}
