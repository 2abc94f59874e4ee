/* braid_mem_alloc and braid_mem_free (core/mem/alloc.c): what the calls
 * return, what the memory is (zeroed, a shared memfd mapping that another
 * process maps and sees writes through), and what svc->mem_shared_find
 * answers for buffers inside, across and outside an allocation. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <braid/braid.h>

#include "../check.h"
#include "loader/loader.h"
#include "mem/mem.h"

static void test_args(void)
{
    void *p = (void *)1;
    CHECK(braid_mem_alloc(64, NULL) == BRAID_ERR_INVALID_ARG &&
              strstr(braid_last_error(), "ptr is NULL") != NULL,
          "NULL ptr refused: %s", braid_last_error());
    CHECK(braid_mem_alloc(0, &p) == BRAID_OK && p == NULL, "0 bytes: NULL");
    CHECK(braid_mem_alloc(SIZE_MAX - 10, &p) == BRAID_ERR_INVALID_ARG &&
              p == NULL,
          "an impossible size refused: %s", braid_last_error());
    CHECK(braid_mem_free(NULL) == BRAID_OK, "free(NULL)");
    int local = 0;
    CHECK(braid_mem_free(&local) == BRAID_ERR_INVALID_ARG &&
              strstr(braid_last_error(), "not an address") != NULL,
          "a foreign pointer refused: %s", braid_last_error());
}

static void test_memory(void)
{
    const size_t       len = 3 * 4096 + 100;
    unsigned char     *p = NULL, *q = NULL;
    braid_mem_shared_t ms;

    CHECK(braid_mem_alloc(len, (void **)&p) == BRAID_OK && p != NULL,
          "alloc: %s", braid_last_error());
    CHECK(braid_mem_alloc(len, (void **)&q) == BRAID_OK && q != NULL && q != p,
          "a second alloc");
    if (p == NULL || q == NULL)
        return;
    size_t zero = 0;
    for (size_t i = 0; i < len; i++)
        zero += p[i] == 0;
    CHECK(zero == len, "zero-filled (%zu of %zu)", zero, len);
    memset(p, 0x5a, len);

    const braid_services_t *svc = braid_core_services();
    CHECK(BRAID_HAS(svc, braid_services_t, copy), "services revision 3");
    CHECK(svc->mem_shared_find(p + 100, 200, &ms) == 1 && ms.off == 100 &&
              ms.len == 4 * 4096 && ms.fd >= 0,
          "a buffer inside: off %llu len %llu", (unsigned long long)ms.off,
          (unsigned long long)ms.len);
    CHECK(svc->mem_shared_find(p, 4 * 4096, &ms) == 1 && ms.off == 0,
          "the whole allocation (its last page included)");
    CHECK(svc->mem_shared_find(p + 4096, 4 * 4096, &ms) == 0,
          "a buffer running past the end is not inside");
    int local = 0;
    CHECK(svc->mem_shared_find(&local, sizeof(local), &ms) == 0,
          "a stack buffer is not inside");

    /* Another process maps the fd and sees this process's writes, and this
     * one sees its writes: one file, shared. */
    CHECK(svc->mem_shared_find(p, len, &ms) == 1, "find p");
    struct stat stt;
    CHECK(fstat(ms.fd, &stt) == 0 && (uint64_t)stt.st_ino == ms.ino &&
              (uint64_t)stt.st_size == ms.len,
          "fd, inode and length agree");
    pid_t child = fork();
    if (child == 0) {
        unsigned char *m =
            mmap(NULL, ms.len, PROT_READ | PROT_WRITE, MAP_SHARED, ms.fd, 0);
        int ok = m != MAP_FAILED && m[0] == 0x5a && m[len - 1] == 0x5a;
        if (ok)
            m[7] = 0x11;
        _exit(ok ? 0 : 1);
    }
    int wst = -1;
    CHECK(child > 0 && waitpid(child, &wst, 0) == child && WIFEXITED(wst) &&
              WEXITSTATUS(wst) == 0,
          "another process maps it and reads this one's bytes");
    CHECK(p[7] == 0x11, "and this one sees the other's write");

    int fd = ms.fd;
    CHECK(braid_mem_free(p) == BRAID_OK, "free");
    CHECK(svc->mem_shared_find(p, 1, &ms) == 0, "freed: no longer found");
    CHECK(fcntl(fd, F_GETFD) == -1, "its fd is closed");
    CHECK(braid_mem_free(p) == BRAID_ERR_INVALID_ARG &&
              strstr(braid_last_error(), "freed") != NULL,
          "a second free refused: %s", braid_last_error());
    CHECK(braid_mem_free(q + 1) == BRAID_ERR_INVALID_ARG,
          "free of an inner address refused");
    CHECK(braid_mem_free(q) == BRAID_OK, "free q");
}

int main(void)
{
    test_args();
    test_memory();
    return check_summary("mem");
}
