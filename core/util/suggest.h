/* "Did you mean": the closest of a list of known names to a misspelled one.
 *
 * Distance is the optimal string alignment distance (insertions, deletions,
 * substitutions and transpositions of neighbours each cost 1), case-blind:
 * "rign" is 1 from "ring", "lowhop" 2 from "lwohp".  A name counts as near
 * within 1 edit for words of up to 3 characters and 2 for longer ones, so
 * that a short word is not "corrected" into an unrelated name. */
#ifndef BRAID_CORE_SUGGEST_H
#define BRAID_CORE_SUGGEST_H

#include <stddef.h>

/* Edit distance between a[0..na) and b[0..nb). */
int braid_edit_distance(const char *a, size_t na, const char *b, size_t nb);
/* The nearest of names[0..n) to word[0..len), or NULL if none is near. */
const char *braid_suggest(const char *word, size_t len,
                          const char *const *names, int n);
/* " (did you mean 'x'?)" into buf when there is a near name, else "". */
const char *braid_suggest_phrase(char *buf, size_t n, const char *word,
                                 size_t len, const char *const *names,
                                 int count);

#endif
