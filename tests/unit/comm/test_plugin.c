/* One source, several test plugins: TEST_KIND selects how it is broken. */
#include <braid/plugin.h>
#include <stdio.h>

#define EXPORT __attribute__((visibility("default")))

__attribute__((unused)) static braid_status_t
probe_ok(const braid_plugin_t *self, const braid_services_t *svc, char *why,
         size_t len)
{
    (void)self, (void)svc, (void)why, (void)len;
    return BRAID_OK;
}

__attribute__((unused)) static braid_status_t
probe_unavailable(const braid_plugin_t *self, const braid_services_t *svc,
                  char *why, size_t len)
{
    (void)self, (void)svc;
    snprintf(why, len, "no widget device found");
    return BRAID_ERR_UNAVAILABLE;
}

#if TEST_KIND == 0 /* good */
EXPORT const braid_plugin_t braid_plugin_v4 = {BRAID_PLUGIN_ABI_VERSION,
                                               sizeof(braid_plugin_t),
                                               "tgood",
                                               "1.2",
                                               probe_ok,
                                               0,
                                               NULL,
                                               0,
                                               NULL,
                                               NULL};
#elif TEST_KIND == 1 /* unavailable */
EXPORT const braid_plugin_t braid_plugin_v4 = {BRAID_PLUGIN_ABI_VERSION,
                                               sizeof(braid_plugin_t),
                                               "tunavail",
                                               "1.0",
                                               probe_unavailable,
                                               0,
                                               NULL,
                                               0,
                                               NULL,
                                               NULL};
#elif TEST_KIND == 2 /* wrong ABI version */
EXPORT const braid_plugin_t braid_plugin_v4 = {
    999, sizeof(braid_plugin_t), "tbadabi", "1.0", probe_ok, 0, NULL, 0, NULL,
    NULL};
#elif TEST_KIND == 3 /* no descriptor symbol at all */
EXPORT int braid_plugin_v0 = 1;
#elif TEST_KIND == 4 /* descriptor names another plugin */
EXPORT const braid_plugin_t braid_plugin_v4 = {BRAID_PLUGIN_ABI_VERSION,
                                               sizeof(braid_plugin_t),
                                               "someoneelse",
                                               "1.0",
                                               probe_ok,
                                               0,
                                               NULL,
                                               0,
                                               NULL,
                                               NULL};
#elif TEST_KIND == 5 /* truncated descriptor */
EXPORT const braid_plugin_t braid_plugin_v4 = {BRAID_PLUGIN_ABI_VERSION,
                                               8,
                                               "tshort",
                                               "1.0",
                                               probe_ok,
                                               0,
                                               NULL,
                                               0,
                                               NULL,
                                               NULL};
#elif TEST_KIND == 6 /* built for a future ABI: its own symbol */
EXPORT const braid_plugin_t braid_plugin_v5 = {
    5,   sizeof(braid_plugin_t), "tfuture", "9.0", probe_ok, 0, NULL, 0, NULL,
    NULL};
#elif TEST_KIND == 7 /* built for ABI 2, too old to adapt */
EXPORT const braid_plugin_t braid_plugin_v2 = {
    2,   sizeof(braid_plugin_t), "tabi2", "0.1", probe_ok, 0, NULL, 0, NULL,
    NULL};
#elif TEST_KIND == 8 /* a transport descriptor smaller than ABI 4's */
static const braid_transport_t small_tl = {.struct_size = 16, .name = "x"};
static const braid_transport_t *const small_tls[] = {&small_tl};
EXPORT const braid_plugin_t braid_plugin_v4       = {BRAID_PLUGIN_ABI_VERSION,
                                                     sizeof(braid_plugin_t),
                                                     "tsmalltl",
                                                     "1.0",
                                                     probe_ok,
                                                     1,
                                                     small_tls,
                                                     0,
                                                     NULL,
                                                     NULL};
#endif
