// SPDX-License-Identifier: MIT
/* The pin directory: its lock, and read access to the pinned maps. */
#include "pins.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "kvsplice/admission.h"

static const char *const pinned_maps[] = {
	KVS_MAP_SOCKS,	      KVS_MAP_CONNS,	    KVS_MAP_BACKENDS,	 KVS_MAP_ROUTES,
	KVS_MAP_STATS,	      KVS_MAP_CTL_STATS,    KVS_MAP_CHAIN,	 KVS_MAP_INFLIGHT,
	KVS_MAP_REPORTS,      KVS_MAP_XDP_ALLOW_V4, KVS_MAP_XDP_DENY_V4, KVS_MAP_XDP_ALLOW_V6,
	KVS_MAP_XDP_DENY_V6,  KVS_MAP_XDP_SYN,	    KVS_MAP_XDP_STATS,	 KVS_MAP_TENANTS,
	KVS_MAP_ROUTE_SHARES, KVS_MAP_BACKEND_TTFT, KVS_MAP_NEST,
};

int kvs_bpffs_ensure(void)
{
	struct statfs st;

	if (statfs("/sys/fs/bpf", &st) == 0 && st.f_type == BPF_FS_MAGIC)
		return 0;
	mkdir("/sys/fs/bpf", 0755);
	if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"))
		return -errno;
	return 0;
}

/* Records in m that the prefix of dir of length len was made here. */
static void note_made(struct kvs_pin_made *m, size_t len)
{
	for (unsigned int i = 0; i < m->n; i++)
		if (m->len[i] == len)
			return; /* (made again after a retry) */
	if (m->n < sizeof(m->len) / sizeof(m->len[0]))
		m->len[m->n++] = len;
}

/* mkdir of one level; *made true if this call made it. 0 or -errno. */
static int mkdir_level(const char *path, bool *made)
{
	*made = !mkdir(path, 0700);
	return *made || errno == EEXIST ? 0 : -errno;
}

/* Makes dir and every level above it that is missing; the levels made
 * are noted in m (if not NULL) for kvs_pin_dir_remove. */
static int mkdir_p(const char *dir, struct kvs_pin_made *m)
{
	char tmp[4096];
	bool made;
	size_t i;
	int err;

	if (strlen(dir) >= sizeof(tmp))
		return -ENAMETOOLONG;
	strcpy(tmp, dir);
	for (i = 1; tmp[i]; i++) {
		if (tmp[i] != '/' || tmp[i - 1] == '/')
			continue;
		tmp[i] = '\0';
		err = mkdir_level(tmp, &made);
		if (err)
			return err;
		if (made && m)
			note_made(m, i);
		tmp[i] = '/';
	}
	err = mkdir_level(tmp, &made);
	if (!err && made && m)
		note_made(m, i);
	return err;
}

int kvs_pin_dir_fs(const char *dir, long *fs_type)
{
	char path[4096];
	struct statfs st;
	char *slash;

	if (strlen(dir) >= sizeof(path))
		return -ENAMETOOLONG;
	strcpy(path, dir);
	/* Not made yet: it would be made on the file system above it. */
	while (statfs(path, &st)) {
		if (errno != ENOENT)
			return -errno;
		slash = strrchr(path, '/');
		if (!slash)
			strcpy(path, ".");
		else if (slash == path)
			path[1] = '\0';
		else
			*slash = '\0';
	}
	*fs_type = (long)st.f_type;
	return st.f_type == BPF_FS_MAGIC ? 0 : -ENOTSUP;
}

static int pin_lock_once(const char *dir, struct kvs_pin_made *made)
{
	int fd, err;
	struct stat st, now;

	if (made && access(dir, F_OK) && errno == ENOENT)
		made->dir = true;
	err = mkdir_p(dir, made);
	if (err)
		return err;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -EPERM : errno == ENOENT ? -EAGAIN : -errno;
	/* /sys/fs/bpf is often world-writable: a directory someone else made
	 * there first could have its pins swapped under us. Ours alone, and
	 * closed to everybody else. */
	if (fstat(fd, &st) || st.st_uid != geteuid() || fchmod(fd, 0700)) {
		close(fd);
		return -EPERM;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		err = errno == EWOULDBLOCK ? -EBUSY : -errno;
		close(fd);
		return err;
	}
	/* The controller that held it last removes it at its exit if empty
	 * (kvs_pin_dir_remove): locked after that, we hold a directory that
	 * is gone. Made anew and locked again, then. */
	if (stat(dir, &now) || now.st_ino != st.st_ino || now.st_dev != st.st_dev) {
		close(fd);
		return -EAGAIN;
	}
	return fd;
}

int kvs_pin_lock_made(const char *dir, struct kvs_pin_made *made)
{
	int fd = -EAGAIN;

	if (made)
		*made = (struct kvs_pin_made){ 0 };

	for (int i = 0; i < 10 && fd == -EAGAIN; i++)
		fd = pin_lock_once(dir, made);
	return fd == -EAGAIN ? -EBUSY : fd;
}

int kvs_pin_lock(const char *dir)
{
	return kvs_pin_lock_made(dir, NULL);
}

/* rmdir removes only an empty directory: one with pins left (the maps
 * kept for inspection, a map of something else) stays, and so does a mount
 * point. 0 (removed, or not empty) or -errno; *gone whether it went. */
static int rmdir_empty(const char *dir, bool *gone)
{
	*gone = !rmdir(dir);
	if (!*gone && errno != ENOTEMPTY && errno != EEXIST && errno != EBUSY)
		return -errno;
	return 0;
}

int kvs_pin_dir_remove(const char *dir, const struct kvs_pin_made *made)
{
	size_t len = strlen(dir);
	char tmp[4096];
	bool gone;
	int err = rmdir_empty(dir, &gone);
	unsigned int i;

	if (err || !gone || !made)
		return err;
	while (len > 1 && dir[len - 1] == '/')
		len--; /* dir/ is dir */
	/* The levels above it this process made, deepest first; the first
	 * one not empty (something else made there since) ends it. */
	snprintf(tmp, sizeof(tmp), "%s", dir);
	for (i = made->n; i-- > 0;) {
		if (made->len[i] >= len)
			continue; /* dir itself: gone above */
		tmp[made->len[i]] = '\0';
		err = rmdir_empty(tmp, &gone);
		if (err || !gone)
			break;
	}
	return err;
}

void kvs_pin_clear(const char *dir)
{
	char path[4096];
	size_t i;

	for (i = 0; i < sizeof(pinned_maps) / sizeof(pinned_maps[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, pinned_maps[i]);
		unlink(path);
	}
}

bool kvs_pin_dir_used(const char *dir)
{
	char path[4096];
	size_t i;

	for (i = 0; i < sizeof(pinned_maps) / sizeof(pinned_maps[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, pinned_maps[i]);
		if (!access(path, F_OK))
			return true;
	}
	return false;
}

/* The value each pinned map holds, as this build reads it. */
static const struct {
	const char *name;
	size_t size;
} value_sizes[] = {
	{ KVS_MAP_CONNS, sizeof(struct kvs_conn) },
	{ KVS_MAP_BACKENDS, sizeof(struct kvs_backend) },
	{ KVS_MAP_ROUTES, sizeof(struct kvs_route) },
	{ KVS_MAP_ROUTE_SHARES, sizeof(struct kvs_route_share) },
	{ KVS_MAP_BACKEND_TTFT, sizeof(struct kvs_ttft) },
	{ KVS_MAP_TENANTS, sizeof(struct kvs_tenant) },
	{ KVS_MAP_STATS, sizeof(struct kvs_stats) },
	{ KVS_MAP_CTL_STATS, sizeof(struct kvs_ctl_stats) },
	{ KVS_MAP_CHAIN, sizeof(struct kvs_chain) },
	{ KVS_MAP_NEST, sizeof(__u32) },
	{ KVS_MAP_XDP_STATS, sizeof(struct kvs_xdp_stats) },
};

int kvs_pin_open(const char *dir, const char *name)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);
	char path[4096];
	size_t i;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	for (i = 0; i < sizeof(value_sizes) / sizeof(value_sizes[0]); i++) {
		if (strcmp(name, value_sizes[i].name))
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
		    info.value_size != value_sizes[i].size) {
			close(fd);
			return -EPROTO;
		}
		break;
	}
	return fd;
}

int kvs_read_percpu_sum(int fd, void *out, size_t size)
{
	int ncpu = libbpf_num_possible_cpus(), i;
	__u64 *per;
	__u32 zero = 0;
	size_t f, n = size / sizeof(__u64);

	if (ncpu <= 0)
		return -EINVAL;
	per = calloc((size_t)ncpu, size);
	if (!per)
		return -ENOMEM;
	if (bpf_map_lookup_elem(fd, &zero, per)) {
		int err = -errno;

		free(per);
		return err;
	}
	memset(out, 0, size);
	for (i = 0; i < ncpu; i++)
		for (f = 0; f < n; f++)
			((__u64 *)out)[f] += per[(size_t)i * n + f];
	free(per);
	return 0;
}

int kvs_read_kstats(int stats_fd, struct kvs_stats *out)
{
	return kvs_read_percpu_sum(stats_fd, out, sizeof(*out));
}

int kvs_read_ctl_stats(int ctl_fd, struct kvs_ctl_stats *out)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(ctl_fd, &zero, out) ? -errno : 0;
}

/* kvs_routes_clear's tally: the tenant whose share counted each route. */
static void tally(uint64_t *gone, const struct kvs_route *r, uint32_t n)
{
	for (uint32_t i = 0; gone && i < n; i++)
		gone[r[i].tenant < KVS_MAX_TENANTS ? r[i].tenant : 0]++;
}

long kvs_routes_clear(int routes_fd, uint64_t *gone)
{
	enum { BATCH = 1024 };
	__u64 *keys = malloc(sizeof(*keys) * BATCH), key;
	struct kvs_route *vals = malloc(sizeof(*vals) * BATCH), r;
	uint8_t in[16], out[16]; /* batch cursors: a key's size suffices */
	bool first = true;
	long n = 0;

	if (gone)
		memset(gone, 0, sizeof(*gone) * KVS_MAX_TENANTS);
	/* In batches, each entry read as it goes (so its tenant's count can
	 * follow); deleting one key at a time from the map's first bucket on
	 * rescanned the emptied buckets at every step. */
	while (keys && vals) {
		__u32 count = BATCH;
		int err = bpf_map_lookup_and_delete_batch(routes_fd, first ? NULL : in, out, keys,
							  vals, &count, NULL);

		if (err && errno != ENOENT)
			break; /* (a kernel without it: one at a time below) */
		tally(gone, vals, count);
		n += count;
		if (err)
			goto out;
		memcpy(in, out, sizeof(in));
		first = false;
	}
	while (bpf_map_get_next_key(routes_fd, NULL, &key) == 0) {
		if (bpf_map_lookup_elem(routes_fd, &key, &r))
			memset(&r, 0, sizeof(r));
		if (bpf_map_delete_elem(routes_fd, &key))
			break;
		tally(gone, &r, 1);
		n++;
	}
out:
	free(keys);
	free(vals);
	return n;
}

int kvs_route_shares_uncount(int shares_fd, const uint64_t *gone)
{
	size_t len = sizeof(struct kvs_route_share) * KVS_MAX_TENANTS;
	long page = sysconf(_SC_PAGESIZE);
	struct kvs_route_share *rs;

	len = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
	rs = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, shares_fd, 0);
	if (rs == MAP_FAILED)
		return -errno;
	/* As the kernel's and the controller's own: atomic, never below 0
	 * (a count the LRU already took from silently, say). */
	for (uint32_t t = 0; t < KVS_MAX_TENANTS; t++) {
		__u64 cur = __atomic_load_n(&rs[t].routes, __ATOMIC_RELAXED), to;

		if (!gone[t])
			continue;
		do
			to = cur > gone[t] ? cur - gone[t] : 0;
		while (!__atomic_compare_exchange_n(&rs[t].routes, &cur, to, false,
						    __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	}
	munmap(rs, len);
	return 0;
}

const char *kvs_run_path(const char *pin_dir, const char *suffix, char *buf, size_t len)
{
	const char *end = pin_dir + strlen(pin_dir), *base;

	while (end > pin_dir && end[-1] == '/')
		end--;
	for (base = end; base > pin_dir && base[-1] != '/'; base--)
		;
	if (base == end)
		snprintf(buf, len, KVS_CONTROL_DIR "/kvsplice%s", suffix);
	else
		snprintf(buf, len, KVS_CONTROL_DIR "/%.*s%s", (int)(end - base), base, suffix);
	return buf;
}

const char *kvs_backend_state_name(uint32_t state)
{
	static const char *const names[KVS_BE_STATES] = {
		[KVS_BE_ABSENT] = "absent",	  [KVS_BE_UP] = "up",
		[KVS_BE_DRAINING] = "draining",	  [KVS_BE_DOWN] = "down",
		[KVS_BE_REMOVING] = "removing",	  [KVS_BE_PROBATION] = "probation",
		[KVS_BE_NOT_READY] = "not-ready",
	};

	return state < KVS_BE_STATES ? names[state] : "unknown";
}

int kvs_mkdir_parent(const char *path)
{
	char dir[4096];
	char *slash;

	if (strlen(path) >= sizeof(dir))
		return -ENAMETOOLONG;
	strcpy(dir, path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	return mkdir(dir, 0700) && errno != EEXIST ? -errno : 0;
}
