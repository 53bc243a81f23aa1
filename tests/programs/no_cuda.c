/*
 * no_cuda.c - a program that links the runtime but never calls it.
 *
 * DESIGN
 * Stands in for the processes a launcher starts besides the training ranks
 * (agents, DataLoader workers, compilers): with the library preloaded it must
 * stay inert, with no files, threads or output of the library's.  It also
 * looks up (but never calls) a trainprof symbol, since a lookup alone must
 * not activate the profiler.  Prints its thread count from /proc so a test
 * can see that no helper thread was started.
 */
#include <dirent.h>

#include "prog.h"

int main(void)
{
    void *sym = dlsym(RTLD_DEFAULT, "trainprof_step");
    (void)sym;
    int threads = 0;
    DIR *d = opendir("/proc/self/task");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                threads++;
        closedir(d);
    }
    printf("hello from a program without CUDA, threads %d\n", threads);
    return 0;
}
