/* SPDX-License-Identifier: MIT */
/*
 * The pin directory (/sys/fs/bpf/kvsplice by default): its lock, so two
 * controllers never load over each other, and read access to the pinned
 * maps for tools that run beside (or without) the controller.
 */
#ifndef KVS_PINS_H
#define KVS_PINS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvsplice/maps.h"

/* Map names, as pinned (the names in bpf/kvsplice.bpf.c). */
#define KVS_MAP_SOCKS "socks"
#define KVS_MAP_CONNS "conns"
#define KVS_MAP_BACKENDS "backends"
#define KVS_MAP_ROUTES "routes"
#define KVS_MAP_STATS "stats"
#define KVS_MAP_CTL_STATS "ctl_stats"
#define KVS_MAP_CHAIN "chain"
#define KVS_MAP_NEST "nest"
#define KVS_MAP_INFLIGHT "inflight"
#define KVS_MAP_REPORTS "reports"
#define KVS_MAP_TENANTS "tenants"
#define KVS_MAP_ROUTE_SHARES "route_shares"
#define KVS_MAP_BACKEND_TTFT "backend_ttft"
/* The admission program's (bpf/admission.bpf.c), pinned when it runs. */
#define KVS_MAP_XDP_ALLOW_V4 "xdp_allow_v4"
#define KVS_MAP_XDP_DENY_V4 "xdp_deny_v4"
#define KVS_MAP_XDP_ALLOW_V6 "xdp_allow_v6"
#define KVS_MAP_XDP_DENY_V6 "xdp_deny_v6"
#define KVS_MAP_XDP_SYN "xdp_syn"
#define KVS_MAP_XDP_STATS "xdp_stats"

/* The controller's sockets, named after its pin directory (so that one
 * --pin-dir names one gateway instance for the controller and kvsplicectl):
 * KVS_CONTROL_DIR/<last component of dir><suffix>. The control socket, for
 * kvsplicectl, has suffix ".sock"; the hand-over socket ".handover". */
#define KVS_CONTROL_DIR "/run/kvsplice"
#define KVS_CONTROL_SUFFIX ".sock"
#define KVS_HANDOVER_SUFFIX ".handover"
const char *kvs_run_path(const char *pin_dir, const char *suffix, char *buf, size_t len);
/* Creates path's directory (one level, mode 0700) if it is not there. 0 or
 * -errno. */
int kvs_mkdir_parent(const char *path);

/* "up", "draining", ... for enum kvs_backend_state. */
const char *kvs_backend_state_name(uint32_t state);

/* Mounts bpffs on /sys/fs/bpf when it is not there. 0 or -errno. */
int kvs_bpffs_ensure(void);

/*
 * Creates dir if needed (mode 0700) and takes an exclusive, non-blocking
 * lock on it. Returns the lock's fd (held until closed) or -errno: -EBUSY
 * when another process holds it, -EPERM when dir is a symlink or is owned by
 * another user (its mode is set back to 0700 otherwise).
 */
int kvs_pin_lock(const char *dir);

/* What kvs_pin_lock_made made, for kvs_pin_dir_remove to take away at
 * exit: dir itself, and the levels above it (a nested --pin-dir) as the
 * lengths of their paths, deepest last; never a level that was there. */
struct kvs_pin_made {
	bool dir;
	unsigned int n;
	size_t len[64];
};

/* The same, *made filled in (dir made here, and each level made). */
int kvs_pin_lock_made(const char *dir, struct kvs_pin_made *made);
/* Removes dir if it is empty (called holding its lock: a controller that
 * locks it meanwhile sees it gone and makes it anew), then each level
 * above it in made (kvs_pin_lock_made's; NULL: none), deepest first, while
 * they are empty. 0 (removed, or not empty) or -errno. */
int kvs_pin_dir_remove(const char *dir, const struct kvs_pin_made *made);
/* Is dir on a bpf file system, where maps can be pinned? 0, -ENOTSUP (not
 * bpffs: *fs_type is its f_type), or -errno. A dir that does not exist yet
 * is judged by the directory it would be made in. */
int kvs_pin_dir_fs(const char *dir, long *fs_type);

/* Removes kvsplice's pinned maps from dir (stale pins of a dead run). */
void kvs_pin_clear(const char *dir);
/* Whether dir holds any of kvsplice's pinned maps (a kvspliced's pin
 * directory, whoever made it). */
bool kvs_pin_dir_used(const char *dir);

/* fd of the pinned map dir/name, or -errno: -EPROTO when its values are
 * not the size this build reads them as (a kvspliced of another build
 * pinned it: reading its values into this build's structs would misread
 * them, or write past them). */
int kvs_pin_open(const char *dir, const char *name);

/* Sums a per-CPU array's entry 0, a struct of size bytes that is all __u64
 * counters, over the CPUs. 0 or -errno. */
int kvs_read_percpu_sum(int fd, void *out, size_t size);

/* Sums the per-CPU kernel counters of the stats map. 0 or -errno. */
int kvs_read_kstats(int stats_fd, struct kvs_stats *out);
int kvs_read_ctl_stats(int ctl_fd, struct kvs_ctl_stats *out);
/* Deletes every route (the kernel then hands each prompt to the controller
 * once more, which routes it and installs the routes again); how many.
 * gone (KVS_MAX_TENANTS entries, or NULL): how many of them each tenant's
 * share counted (struct kvs_route_share), for kvs_route_shares_uncount or
 * the controller's own count. */
long kvs_routes_clear(int routes_fd, uint64_t *gone);
/* Takes gone[t] off tenant t's count in the route_shares map (through
 * its mmap, atomically, never below 0): routes removed by someone other
 * than the controller, which would otherwise count them until its next
 * recount. 0 or -errno. */
int kvs_route_shares_uncount(int shares_fd, const uint64_t *gone);

#endif
