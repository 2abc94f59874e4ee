/* Names in BRAID_ALGO and BRAID_PLUGINS checked against the plugin table
 * (see validate.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hier/hier.h"
#include "select/validate.h"
#include "util/log.h"
#include "util/suggest.h"

#define MAX_KNOWN 256

/* Distinct names, for lookups and suggestions. */
typedef struct names {
    int         n;
    const char *v[MAX_KNOWN];
} names_t;

static void names_add(names_t *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return;
    if (s->n < MAX_KNOWN)
        s->v[s->n++] = name;
}

static int names_has(const names_t *s, const char *name, size_t len)
{
    for (int i = 0; i < s->n; i++)
        if (strlen(s->v[i]) == len && strncmp(s->v[i], name, len) == 0)
            return 1;
    return 0;
}

static void names_list(char *buf, size_t n, const names_t *s)
{
    size_t off = 0;
    buf[0]     = '\0';
    for (int i = 0; i < s->n && off < n; i++) {
        int k = snprintf(buf + off, n - off, "%s%s", i ? ", " : "", s->v[i]);
        if (k < 0)
            break;
        off += (size_t)k;
    }
    if (s->n == 0)
        snprintf(buf, n, "none");
}

/* The plugin table is the only place that knows descriptors: everything
 * below works on names.  A plugin that loaded but is unavailable here still
 * declares its names; an excluded or rejected one declares none. */
static void collect(const braid_plugin_table_t *t, int coll, names_t *algos,
                    names_t *tls, names_t *excluded)
{
    memset(algos, 0, sizeof(*algos));
    memset(tls, 0, sizeof(*tls));
    memset(excluded, 0, sizeof(*excluded));
    for (int p = 0; p < t->n; p++) {
        const braid_plugin_entry_t *e = &t->entries[p];
        if (e->state == BRAID_PLUGIN_EXCLUDED)
            names_add(excluded, e->name);
        if (e->desc == NULL)
            continue;
        for (int a = 0; a < e->desc->n_algos; a++)
            if (coll < 0 || (int)e->desc->algos[a]->coll == coll)
                names_add(algos, e->desc->algos[a]->name);
        for (int k = 0; k < e->desc->n_transports; k++)
            names_add(tls, e->desc->transports[k]->name);
    }
    /* The core's own composites (hier/): no plugin brings them. */
    for (int c = 0; c < BRAID_COLL_COUNT; c++)
        if ((coll < 0 || coll == c) && braid_hier_algo((braid_coll_t)c))
            names_add(algos, BRAID_HIER_NAME);
}

static int is_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-';
}

/* Position of the first whole word `word` in text after one of `before`
 * (blanks skipped), or 0. */
static size_t word_pos(const char *text, const char *word, const char *before)
{
    size_t wl = strlen(word);
    for (const char *p = strstr(text, word); p != NULL;
         p             = strstr(p + 1, word)) {
        if (is_name_char(p[wl]) || (p > text && is_name_char(p[-1])))
            continue;
        const char *q = p;
        while (q > text && (q[-1] == ' ' || q[-1] == '\t'))
            q--;
        if (q == text ? strchr(before, '^') != NULL
                      : strchr(before, q[-1]) != NULL)
            return (size_t)(p - text);
    }
    return 0;
}

braid_status_t braid_validate_plugins(const char                 *text,
                                      const braid_plugin_table_t *t)
{
    braid_plugin_filter_t f;
    names_t               found = {0};
    char                  list[512], hint[96];
    if (text == NULL || *text == '\0')
        return BRAID_OK;
    if (braid_plugin_filter_parse(&f, text) != BRAID_OK)
        return BRAID_ERR_PARSE; /* the loader said so already */
    for (int p = 0; p < t->n; p++)
        names_add(&found, t->entries[p].name);
    for (int i = 0; i < f.n; i++) {
        if (names_has(&found, f.names[i], strlen(f.names[i])))
            continue;
        names_list(list, sizeof(list), &found);
        braid_suggest_phrase(hint, sizeof(hint), f.names[i],
                             strlen(f.names[i]), found.v, found.n);
        return braid_error(BRAID_ERR_NOT_FOUND,
                           "BRAID_PLUGINS='%s': no plugin '%s' (at position "
                           "%zu) was found%s; found: %s (braid-info shows "
                           "where it looks)",
                           text, f.names[i], word_pos(text, f.names[i], "^,"),
                           hint, list);
    }
    return BRAID_OK;
}

/* One candidate of a rule of collective coll. */
static braid_status_t check_cand(const braid_cand_ref_t *c, braid_coll_t coll,
                                 const char                 *text,
                                 const braid_plugin_table_t *t)
{
    names_t algos, tls, excluded, all_algos, ignore_tls, ignore_ex;
    char    list[512], hint[96], ex[160] = "";
    collect(t, (int)coll, &algos, &tls, &excluded);
    if (excluded.n > 0) {
        char l[128];
        names_list(l, sizeof(l), &excluded);
        snprintf(ex, sizeof(ex), "; BRAID_PLUGINS excludes %s", l);
    }
    if (!names_has(&algos, c->algo, strlen(c->algo))) {
        size_t pos = word_pos(text, c->algo, ":,=");
        collect(t, -1, &all_algos, &ignore_tls, &ignore_ex);
        names_list(list, sizeof(list), &algos);
        if (names_has(&all_algos, c->algo, strlen(c->algo)))
            return braid_error(BRAID_ERR_NOT_FOUND,
                               "BRAID_ALGO: '%s' (at position %zu) is no "
                               "plugin's algorithm for %s; %s algorithms: "
                               "%s%s",
                               c->algo, pos, braid_coll_name(coll),
                               braid_coll_name(coll), list, ex);
        braid_suggest_phrase(hint, sizeof(hint), c->algo, strlen(c->algo),
                             all_algos.v, all_algos.n);
        return braid_error(BRAID_ERR_NOT_FOUND,
                           "BRAID_ALGO: no plugin found has an algorithm "
                           "'%s' (at position %zu)%s; %s algorithms: %s%s",
                           c->algo, pos, hint, braid_coll_name(coll), list,
                           ex);
    }
    if (c->tl[0] != '\0' && strcmp(c->algo, BRAID_HIER_NAME) == 0)
        return braid_error(BRAID_ERR_NOT_FOUND,
                           "BRAID_ALGO: '%s@%s' (at position %zu): the "
                           "composite '%s' takes no transport (its levels' "
                           "steps pick theirs)",
                           c->algo, c->tl, word_pos(text, c->algo, ":,="),
                           BRAID_HIER_NAME);
    if (c->tl[0] != '\0' && !names_has(&tls, c->tl, strlen(c->tl))) {
        names_list(list, sizeof(list), &tls);
        braid_suggest_phrase(hint, sizeof(hint), c->tl, strlen(c->tl), tls.v,
                             tls.n);
        return braid_error(BRAID_ERR_NOT_FOUND,
                           "BRAID_ALGO: no plugin found brings a transport "
                           "'%s' (at position %zu)%s; transports: %s%s",
                           c->tl, word_pos(text, c->tl, "@"), hint, list, ex);
    }
    return BRAID_OK;
}

braid_status_t braid_validate_algo(const braid_algo_spec_t    *spec,
                                   const char                 *text,
                                   const braid_plugin_table_t *t)
{
    for (int r = 0; r < spec->n; r++) {
        const braid_algo_rule_t *rule = &spec->rules[r];
        for (int i = 0; i < rule->ncands; i++) {
            braid_status_t st =
                check_cand(&rule->cands[i], rule->coll, text ? text : "", t);
            if (st != BRAID_OK)
                return st;
        }
    }
    return BRAID_OK;
}

static const char *caps_str(uint32_t caps)
{
    if (caps & BRAID_CAP_GET)
        return caps & BRAID_CAP_PUT_SIGNAL ? "single-copy get and "
                                             "put-with-signal"
                                           : "single-copy get";
    return (caps & BRAID_CAP_PUT_SIGNAL) && (caps & BRAID_CAP_SENDRECV)
               ? "send/recv and put-with-signal"
           : caps & BRAID_CAP_PUT_SIGNAL ? "put-with-signal"
           : caps & BRAID_CAP_SENDRECV   ? "send/recv"
                                         : "any";
}

/* Why the transports that algorithm a needs are not open: each one that the
 * plugins bring, with its probe's reason when it is unavailable. */
static void transports_why(char *buf, size_t n, const braid_algo_t *a,
                           const braid_plugin_table_t *t)
{
    size_t off = 0;
    buf[0]     = '\0';
    for (int p = 0; p < t->n && off < n; p++) {
        const braid_plugin_entry_t *e = &t->entries[p];
        for (int k = 0; e->desc != NULL && k < e->desc->n_transports &&
                        k < BRAID_LOADER_MAX_TLS && off < n;
             k++) {
            const braid_transport_t *tl = e->desc->transports[k];
            if ((tl->caps & a->needs_caps) != a->needs_caps ||
                (a->transport != NULL && strcmp(a->transport, tl->name)))
                continue;
            const char *why = e->state != BRAID_PLUGIN_AVAILABLE ? e->why
                              : !e->tl_ok[k]                     ? e->tl_why[k]
                                             : "not open on every rank";
            int k2 = snprintf(buf + off, n - off, "%s%s: %s", off ? "; " : "",
                              tl->name, why);
            if (k2 < 0)
                return;
            off += (size_t)k2;
        }
    }
    if (off == 0) {
        names_t algos, tls, excluded;
        char    list[128];
        collect(t, -1, &algos, &tls, &excluded);
        names_list(list, sizeof(list), &excluded);
        snprintf(buf, n, "no plugin loaded brings one%s%.80s",
                 excluded.n ? "; BRAID_PLUGINS excludes " : "",
                 excluded.n ? list : "");
    }
}

void braid_validate_why_none(braid_selector_t           *sel,
                             const braid_plugin_table_t *t,
                             const braid_tl_t *tls, int ntls)
{
    (void)tls;
    (void)ntls;
    for (int c = 0; c < BRAID_COLL_COUNT; c++) {
        char  *out = sel->none_why[c];
        size_t n   = sizeof(sel->none_why[c]);
        int    has = 0;
        out[0]     = '\0';
        for (int i = 0; i < sel->ncands && !has; i++)
            has = (int)sel->cands[i].algo->coll == c;
        if (has)
            continue;
        /* The first algorithm of an available plugin explains it: its
         * transport is what is missing.  None at all: the algorithm is. */
        for (int p = 0; p < t->n && out[0] == '\0'; p++) {
            const braid_plugin_entry_t *e = &t->entries[p];
            if (e->state != BRAID_PLUGIN_AVAILABLE)
                continue;
            for (int a = 0; a < e->desc->n_algos; a++) {
                const braid_algo_t *al = e->desc->algos[a];
                if ((int)al->coll != c)
                    continue;
                char why[160];
                transports_why(why, sizeof(why), al, t);
                snprintf(out, n,
                         "the transport is missing: %.40s's %s "
                         "algorithm '%.40s' needs a transport with %s%s%.40s, "
                         "and "
                         "none is open (%.120s)",
                         e->name, braid_coll_name(c), al->name,
                         caps_str(al->needs_caps),
                         al->transport ? " named " : "",
                         al->transport ? al->transport : "", why);
                break;
            }
        }
        if (out[0] == '\0')
            snprintf(out, n,
                     "the algorithm is missing: no available plugin "
                     "has an algorithm for %s (see braid-info; "
                     "BRAID_PLUGINS=%s)",
                     braid_coll_name(c),
                     getenv("BRAID_PLUGINS") ? getenv("BRAID_PLUGINS")
                                             : "unset");
    }
}
