/*
 * dlsym_local.c - look functions up in a library opened RTLD_LOCAL, as
 * ctypes and many plugin loaders do.
 *
 * DESIGN
 * Usage: dlsym_local LIBRARY [call]  (function names on stdin, one a line).
 * Opens LIBRARY with dlopen(RTLD_NOW | RTLD_LOCAL), looks each name up with
 * dlsym(handle, name) and prints "name<TAB>object" where object is the file
 * that defines the pointer it got (dladdr), or "-" for NULL.  Under the
 * preload that lookup goes through trainprof's dlsym interposer, which once
 * recursed with its own resolution until the stack overflowed,
 * enabled or not.  With "call", it then calls cudaMalloc(&p, 256) through
 * the pointer it was handed (LIBRARY must be a CUDA runtime) and prints
 * "cudaMalloc<TAB>rc", so that a test can see a failed call (no driver)
 * leave the profiler inert.  Last line: "threads<TAB>comm,comm,...", the
 * names of the process's threads.  Built without the fake runtime (its own
 * Makefile rule): a real library's dependencies must resolve to real ones.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*malloc_fn)(void **, size_t);

static void print_threads(void)
{
    printf("threads\t");
    DIR *d = opendir("/proc/self/task");
    if (!d) {
        printf("?\n");
        return;
    }
    struct dirent *e;
    int first = 1;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(comm, sizeof comm, f))
                comm[strcspn(comm, "\n")] = 0;
            fclose(f);
        }
        printf("%s%s", first ? "" : ",", comm);
        first = 0;
    }
    closedir(d);
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: dlsym_local LIBRARY [call] < names\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlsym_local: %s\n", dlerror());
        return 3;
    }
    char name[512];
    while (fgets(name, sizeof name, stdin)) {
        name[strcspn(name, "\r\n")] = 0;
        if (!name[0])
            continue;
        void *p = dlsym(h, name);
        Dl_info info;
        const char *obj = "-";
        if (p)
            obj = dladdr(p, &info) && info.dli_fname ? info.dli_fname : "?";
        printf("%s\t%s\n", name, obj);
    }
    if (argc > 2 && strcmp(argv[2], "call") == 0) {
        malloc_fn m = (malloc_fn)dlsym(h, "cudaMalloc");
        void *p = NULL;
        printf("cudaMalloc\t%d\n", m ? m(&p, 256) : -1);
    }
    print_threads();
    fflush(stdout);
    return 0;
}
