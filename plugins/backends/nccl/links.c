/* The links NCCL's model needs, found the way NCCL's topology search
 * would see them: NVLink between the GPUs of a node (counted through NVML
 * when it is there), else PCIe; the fastest active network port between
 * nodes (InfiniBand/RoCE ports, else Ethernet interfaces). */
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

/* GB/s of one NVLink by compute capability, and of a PCIe Gen4 x16 link,
 * as NCCL's model takes them. */
static double nvlink_gbps(int sm)
{
    return sm >= 100  ? 40.1
           : sm >= 90 ? 20.6
           : sm == 86 ? 12.0
           : sm >= 70 ? 20.0
                      : 18.0;
}
#define PCI_GBPS 24.0
/* Links per GPU of the usual NVLink systems, when NVML cannot count them. */
static int nvlink_default_links(int sm)
{
    return sm >= 90 ? 18 : sm >= 80 ? 12 : 6;
}
/* A network we cannot measure: 10 Gb/s Ethernet. */
#define NET_FALLBACK_GBPS 1.25

/* Active NVLinks of device (bus id) through NVML; -1 without NVML. */
static int nvml_links(const char *bus_id)
{
    void *dl = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL)
        return -1;
    int (*init)(void) = (int (*)(void))dlsym(dl, "nvmlInit_v2");
    int (*fini)(void) = (int (*)(void))dlsym(dl, "nvmlShutdown");
    int (*by_bus)(const char *, void **) = (int (*)(
        const char *, void **))dlsym(dl, "nvmlDeviceGetHandleByPciBusId_v2");
    int (*state)(void *, unsigned, int *) =
        (int (*)(void *, unsigned, int *))dlsym(dl,
                                                "nvmlDeviceGetNvLinkState");
    int   links = -1;
    void *dev   = NULL;
    if (init && fini && by_bus && state && init() == 0) {
        if (by_bus(bus_id, &dev) == 0) {
            links = 0;
            for (unsigned l = 0; l < 18; l++) { /* NVML_NVLINK_MAX_LINKS */
                int on = 0;
                if (state(dev, l, &on) == 0 && on == 1)
                    links++;
            }
        }
        fini();
    }
    dlclose(dl);
    return links;
}

static double read_number(const char *path)
{
    char  buf[64] = "";
    FILE *f       = fopen(path, "r");
    if (f == NULL)
        return -1;
    if (fgets(buf, sizeof(buf), f) == NULL)
        buf[0] = '\0';
    fclose(f);
    char  *end;
    double v = strtod(buf, &end);
    return end == buf ? -1 : v;
}

static int contains(const char *path, const char *word)
{
    char  buf[64] = "";
    FILE *f       = fopen(path, "r");
    if (f == NULL)
        return 0;
    if (fgets(buf, sizeof(buf), f) == NULL)
        buf[0] = '\0';
    fclose(f);
    return strstr(buf, word) != NULL;
}

/* GB/s of one InfiniBand/RoCE device's fastest active port ("200 Gb/sec
 * (4X HDR)"), or -1. */
static double ib_device(const char *dir, const char *name)
{
    double best = -1;
    for (int port = 1; port <= 8; port++) {
        char p[1024];
        snprintf(p, sizeof(p), "%s/%s/ports/%d/state", dir, name, port);
        if (!contains(p, "ACTIVE"))
            continue;
        snprintf(p, sizeof(p), "%s/%s/ports/%d/rate", dir, name, port);
        best = fmax(best, read_number(p) / 8);
    }
    return best;
}

/* GB/s of an Ethernet interface that is up (speed in Mb/s), or -1. */
static double eth_device(const char *dir, const char *name)
{
    char p[1024];
    if (strcmp(name, "lo") == 0)
        return -1;
    snprintf(p, sizeof(p), "%s/%s/operstate", dir, name);
    if (!contains(p, "up"))
        return -1;
    snprintf(p, sizeof(p), "%s/%s/speed", dir, name);
    return read_number(p) / 8000;
}

/* The best that device() says of the devices of sysfs/class/cls, or -1. */
static double best_in_class(const char *sysfs, const char *cls,
                            double (*device)(const char *dir,
                                             const char *name))
{
    char   dir[512];
    double best = -1;
    snprintf(dir, sizeof(dir), "%s/class/%s", sysfs, cls);
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            best = fmax(best, device(dir, e->d_name));
    closedir(d);
    return best;
}

double braid_nccl_links_net_gbps(const char *sysfs)
{
    double gbps = best_in_class(sysfs, "infiniband", ib_device);
    if (gbps <= 0)
        gbps = best_in_class(sysfs, "net", eth_device);
    return gbps > 0 ? gbps : NET_FALLBACK_GBPS;
}

void braid_nccl_links_detect(braid_nccl_model_t     *model,
                             const braid_nccl_lib_t *lib, int device)
{
    int major = 0, minor = 0, ndev = 0, links = -1;
    lib->device_get_attribute(&major, cudaDevAttrComputeCapabilityMajor,
                              device);
    lib->device_get_attribute(&minor, cudaDevAttrComputeCapabilityMinor,
                              device);
    lib->get_device_count(&ndev);
    int  sm = major * 10 + minor;
    char bus[32];
    if (lib->device_get_pci_bus_id(bus, sizeof(bus), device) == cudaSuccess)
        links = nvml_links(bus);
    if (links < 0) {
        /* No NVML: native atomics to a peer only come with NVLink. */
        links = 0;
        for (int peer = 0; peer < ndev && links == 0; peer++) {
            int atomics = 0;
            if (peer != device &&
                lib->device_get_p2p_attribute(
                    &atomics, cudaDevP2PAttrNativeAtomicSupported, device,
                    peer) == cudaSuccess &&
                atomics)
                links = nvlink_default_links(sm);
        }
    }
    model->intra = links > 0 ? BRAID_NCCL_LINK_NVLINK : BRAID_NCCL_LINK_PCI;
    model->intra_gbps = links > 0 ? links * nvlink_gbps(sm) : PCI_GBPS;
    model->inter_gbps = braid_nccl_links_net_gbps("/sys");
    braid_nccl_host.log(BRAID_LOG_DEBUG, LOG_COMP,
                        "device %d (sm_%d): %s "
                        "%.1f GB/s inside the node (%d NVLinks), network "
                        "%.1f GB/s",
                        device, sm, links > 0 ? "NVLink" : "PCIe",
                        model->intra_gbps, links > 0 ? links : 0,
                        model->inter_gbps);
}
