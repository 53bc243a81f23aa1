/*
 * elfsym.c - DESIGN: function names from an object's full symbol table.
 *
 * Each object is read once: the file is mapped read-only, its SHT_SYMTAB
 * section's function symbols (with a size) are copied into an array sorted
 * by address, and the string table is used in place, so names cost nothing
 * to keep.  A lookup is a binary search.  An object without .symtab (a
 * stripped file) is remembered as empty, so it is not read again.  Every
 * offset read from the file is checked against the file's size: a file that
 * changed on disk or is damaged gives no name, never a fault.
 *
 * The main program is opened as /proc/self/exe: dladdr names it by argv[0],
 * which may be relative to a directory the program has left.
 */
#include "elfsym.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct tp_fsym {
    uint64_t value, size;
    uint32_t name;                /* offset in the string table */
};

struct tp_elfobj {
    char *path;
    uintptr_t base;
    int exec;                     /* ET_EXEC: symbol values are addresses */
    void *map;
    size_t len;
    const char *strtab;
    size_t strsz;
    struct tp_fsym *syms;
    size_t n;
};

#define TP_ELF_MAX_OBJECTS 512

static struct tp_elfobj tp_objs[TP_ELF_MAX_OBJECTS];
static size_t tp_n_objs;

static int tp_fsym_cmp(const void *a, const void *b)
{
    const struct tp_fsym *x = a, *y = b;
    return x->value < y->value ? -1 : x->value > y->value;
}

static int tp_in_file(const struct tp_elfobj *o, uint64_t off, uint64_t size)
{
    return off <= o->len && size <= o->len - off;
}

/* Fills o->syms from the mapped file; leaves o->n = 0 if it has no .symtab. */
static void tp_elf_read(struct tp_elfobj *o)
{
    const Elf64_Ehdr *eh = o->map;
    if (o->len < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        !tp_in_file(o, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)))
        return;
    o->exec = eh->e_type == ET_EXEC;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)((const char *)o->map + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_entsize != sizeof(Elf64_Sym) ||
            sh[i].sh_link >= eh->e_shnum)
            continue;
        const Elf64_Shdr *st = &sh[sh[i].sh_link];
        if (!tp_in_file(o, sh[i].sh_offset, sh[i].sh_size) || !tp_in_file(o, st->sh_offset, st->sh_size))
            return;
        o->strtab = (const char *)o->map + st->sh_offset;
        o->strsz = st->sh_size;
        if (!o->strsz || o->strtab[o->strsz - 1] != '\0')
            return;                      /* names could run past the table */
        const Elf64_Sym *sym = (const Elf64_Sym *)((const char *)o->map + sh[i].sh_offset);
        size_t count = sh[i].sh_size / sizeof *sym, n = 0;
        struct tp_fsym *v = malloc((count ? count : 1) * sizeof *v);
        if (!v)
            return;
        for (size_t k = 0; k < count; k++) {
            unsigned type = ELF64_ST_TYPE(sym[k].st_info);
            if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym[k].st_shndx == SHN_UNDEF ||
                !sym[k].st_size || sym[k].st_name >= o->strsz)
                continue;
            v[n++] = (struct tp_fsym){ sym[k].st_value, sym[k].st_size, sym[k].st_name };
        }
        qsort(v, n, sizeof *v, tp_fsym_cmp);
        o->syms = v;
        o->n = n;
        return;
    }
}

static uintptr_t tp_main_base(void)
{
    static uintptr_t base = 1;
    if (base == 1) {
        Dl_info info;
        void *phdr = (void *)getauxval(AT_PHDR);
        base = phdr && dladdr(phdr, &info) ? (uintptr_t)info.dli_fbase : 0;
    }
    return base;
}

static struct tp_elfobj *tp_elf_object(const char *path, uintptr_t base)
{
    for (size_t i = 0; i < tp_n_objs; i++)
        if (tp_objs[i].base == base && strcmp(tp_objs[i].path, path) == 0)
            return &tp_objs[i];
    if (tp_n_objs == TP_ELF_MAX_OBJECTS)
        return NULL;
    struct tp_elfobj *o = &tp_objs[tp_n_objs];
    memset(o, 0, sizeof *o);
    if (!(o->path = strdup(path)))
        return NULL;
    o->base = base;
    tp_n_objs++;
    const char *file = base && base == tp_main_base() ? "/proc/self/exe" : path;
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0)
        return o;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
        o->len = (size_t)sb.st_size;
        o->map = mmap(NULL, o->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (o->map == MAP_FAILED)
            o->map = NULL;
    }
    close(fd);
    if (o->map) {
        tp_elf_read(o);
        if (!o->n) {
            munmap(o->map, o->len);
            o->map = NULL;
        }
    }
    return o;
}

const char *tp_elfsym_lookup(const char *path, uintptr_t base, uintptr_t addr, uintptr_t *start)
{
    if (!path || !path[0])
        return NULL;
    struct tp_elfobj *o = tp_elf_object(path, base);
    if (!o || !o->n)
        return NULL;
    uint64_t rel = o->exec ? addr : addr - base;
    size_t lo = 0, hi = o->n;            /* first symbol above rel */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->syms[mid].value <= rel)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* symbols may nest (aliases, .cold parts): look back a little for one
     * that contains rel */
    for (size_t i = lo, k = 0; i > 0 && k < 8; i--, k++) {
        const struct tp_fsym *s = &o->syms[i - 1];
        if (rel - s->value < s->size) {
            if (start)
                *start = o->exec ? (uintptr_t)s->value : base + (uintptr_t)s->value;
            return o->strtab + s->name;
        }
    }
    return NULL;
}

void tp_elfsym_reset(void)
{
    for (size_t i = 0; i < tp_n_objs; i++) {
        if (tp_objs[i].map)
            munmap(tp_objs[i].map, tp_objs[i].len);
        free(tp_objs[i].syms);
        free(tp_objs[i].path);
    }
    tp_n_objs = 0;
}
