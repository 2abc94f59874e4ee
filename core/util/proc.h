/* What /proc says of a process (internal). */
#ifndef BRAID_CORE_PROC_H
#define BRAID_CORE_PROC_H

/* The state letter of process pid ('R' running, 'S' sleeping, 'T' stopped,
 * 'Z' zombie, ...), 0 when there is no such process here. */
char braid_proc_state(long pid);

#endif
