/* ENG_HOT: one clone of a hot loop per x86-64 ISA level (AVX-512, AVX2,
 * baseline), the dynamic loader picking one for this CPU, as the reduction
 * kernels do (kernels/reduce.c).  Elsewhere a plain function.  Internal to
 * engine/common. */
#ifndef BRAID_ENG_HOT_H
#define BRAID_ENG_HOT_H

#if defined(__x86_64__) && defined(__ELF__) && defined(__has_attribute) &&    \
    !defined(__clang__) && __GNUC__ >= 12 && !defined(BRAID_ENG_NO_CLONES)
#define ENG_HOT                                                               \
    __attribute__((                                                           \
        target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ENG_HOT
#endif

#endif
