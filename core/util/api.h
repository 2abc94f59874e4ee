/* Marks the functions of the public API: the core is built with
 * -fvisibility=hidden so that nothing else leaks into plugins' namespace. */
#ifndef BRAID_CORE_API_H
#define BRAID_CORE_API_H

#define BRAID_API __attribute__((visibility("default")))

#endif
