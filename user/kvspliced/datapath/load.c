// SPDX-License-Identifier: MIT
/* The data path's BPF object: loaded, pinned and attached (or the backend
 * records in memory, where BPF is not permitted), its maps mmapped, and
 * closed; the controller's counters published. */
#include "datapath.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvsplice.skel.h"
#include "kvsplice/place.h"
#include "log.h"
#include "pins.h"

static size_t mmap_bytes(size_t bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (bytes + page - 1) / page * page;
}

static size_t backends_map_bytes(void)
{
	return mmap_bytes(sizeof(struct kvs_backend) * KVS_MAX_BACKENDS);
}

static size_t shares_map_bytes(void)
{
	return mmap_bytes(sizeof(struct kvs_route_share) * KVS_MAX_TENANTS);
}

static size_t ttft_map_bytes(void)
{
	return mmap_bytes(sizeof(struct kvs_ttft) * KVS_MAX_BACKENDS);
}

/* The map's bytes, shared with the kernel's, in *out. 0 or -errno. */
static int map_mmap(const struct bpf_map *m, size_t bytes, void **out)
{
	void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(m), 0);

	if (mem == MAP_FAILED) {
		int err = -errno;

		pr_warn("event=map_mmap_failed map=%s err=\"%s\"", bpf_map__name(m),
			strerror(-err));
		return err;
	}
	*out = mem;
	return 0;
}

int kvs_dp_open(struct kvs_datapath *dp, const struct kvs_dp_opts *o)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = o->pin_dir);
	int err, sock_fd;
	long fs_type = 0;

	memset(dp, 0, sizeof(*dp));
	dp->lock_fd = -1;
	snprintf(dp->pin_dir, sizeof(dp->pin_dir), "%s", o->pin_dir);

	err = kvs_bpffs_ensure();
	if (err) {
		pr_warn("event=bpffs_mount_failed err=\"%s\"", strerror(-err));
		return err;
	}
	err = kvs_pin_dir_fs(o->pin_dir, &fs_type);
	if (err == -ENOTSUP) {
		/* libbpf would fail to pin the first map, and the load with
		 * EINVAL, which says nothing of why. */
		pr_warn("event=pin_dir_not_bpffs dir=%s fs_type=0x%lx hint=\"maps can be pinned "
			"only on a bpf file system: choose a --pin-dir under /sys/fs/bpf, or "
			"mount one there first (mount -t bpf bpf DIR)\"",
			o->pin_dir, fs_type);
		return err;
	}
	dp->lock_fd = kvs_pin_lock_made(o->pin_dir, &dp->made_pin);
	/* Taking over: the old controller lets go of the lock once it has
	 * handed everything over; wait for that, a little. */
	for (int i = 0; o->takeover && dp->lock_fd == -EBUSY && i < 100; i++) {
		usleep(50000);
		dp->lock_fd = kvs_pin_lock(o->pin_dir);
	}
	if (dp->lock_fd < 0) {
		err = dp->lock_fd;
		if (err == -EPERM)
			pr_warn("event=pin_dir_refused dir=%s hint=\"it is a symlink or belongs to "
				"another user; remove it or choose another --pin-dir\"",
				o->pin_dir);
		else
			pr_warn("event=pin_dir_locked dir=%s err=\"%s\" hint=\"another kvspliced "
				"runs with this --pin-dir\"",
				o->pin_dir, strerror(-err));
		return err;
	}
	/* We hold the lock, so pins left here belong to a run that is gone.
	 * Their routes name backends by index in that run's list: start clean.
	 * Unless we take over: then they are the live state we go on with
	 * (libbpf reuses every pinned map of the same definition). Either way
	 * the directory is a kvspliced's, and no other will remove it. */
	dp->adopted_pin = !dp->made_pin.dir && kvs_pin_dir_used(o->pin_dir);
	if (!o->takeover)
		kvs_pin_clear(o->pin_dir);
	/* Taking over with another --pin-dir (changed with an upgrade): the
	 * sockets handed over are in the maps pinned at the old one, which
	 * this controller would never see. Refused: the old one carries on. */
	if (o->takeover) {
		char path[sizeof(dp->pin_dir) + 16];

		snprintf(path, sizeof(path), "%s/socks", o->pin_dir);
		if (access(path, F_OK)) {
			err = -ENOENT;
			pr_warn("event=takeover_refused reason=\"no maps pinned at %s\" "
				"hint=\"--pin-dir cannot change across an upgrade: restart "
				"instead\"",
				o->pin_dir);
			goto fail;
		}
	}

	dp->skel = kvsplice_bpf__open_opts(&oo);
	if (!dp->skel) {
		err = -errno;
		pr_warn("event=bpf_open_failed err=\"%s\"", strerror(-err));
		goto fail;
	}
	dp->skel->rodata->cfg_max_payload = o->max_payload;
	dp->skel->rodata->cfg_window_blocks = o->window_blocks;
	dp->skel->rodata->cfg_min_match_pct = o->min_match_pct;
	dp->skel->rodata->cfg_release_prefill_early = o->release_prefill_early;
	dp->skel->rodata->cfg_client_max_inflight = o->client_max_inflight;
	dp->skel->rodata->cfg_kernel_place = o->kernel_place;
	dp->skel->rodata->cfg_keep_balance = o->keep_balance_fp;
	dp->keep_balance_fp = o->keep_balance_fp;
	dp->skel->rodata->cfg_recompute_weight = o->recompute_weight;
	err = kvsplice_bpf__load(dp->skel);
	if (err) {
		pr_warn("event=bpf_load_failed err=\"%s\" hint=\"%s\"", strerror(-err),
			geteuid() ? "run as root (BPF and sockmap need it)" :
				    "capabilities dropped (CAP_BPF, CAP_NET_ADMIN), or a "
				    "kernel without BTF or sockmap: the libbpf lines above "
				    "say which");
		goto fail;
	}

	sock_fd = bpf_map__fd(dp->skel->maps.socks);
	dp->socks_fd = sock_fd;
	dp->conns_fd = bpf_map__fd(dp->skel->maps.conns);
	dp->routes_fd = bpf_map__fd(dp->skel->maps.routes);
	dp->ctl_fd = bpf_map__fd(dp->skel->maps.ctl_stats);
	dp->stats_fd = bpf_map__fd(dp->skel->maps.stats);
	dp->inflight_fd = bpf_map__fd(dp->skel->maps.inflight);
	dp->reports_fd = bpf_map__fd(dp->skel->maps.reports);
	dp->tenants_fd = bpf_map__fd(dp->skel->maps.tenants);

	if ((err = map_mmap(dp->skel->maps.backends, backends_map_bytes(),
			    (void **)&dp->backends)) ||
	    (err = map_mmap(dp->skel->maps.route_shares, shares_map_bytes(),
			    (void **)&dp->shares)) ||
	    (err = map_mmap(dp->skel->maps.backend_ttft, ttft_map_bytes(), (void **)&dp->ttft)))
		goto fail;

	/* libbpf 1.1 has no bpf_program__attach_sockmap: attach to the map. */
	if (bpf_prog_attach(bpf_program__fd(dp->skel->progs.kvs_parser), sock_fd,
			    BPF_SK_SKB_STREAM_PARSER, 0) ||
	    bpf_prog_attach(bpf_program__fd(dp->skel->progs.kvs_verdict), sock_fd,
			    BPF_SK_SKB_STREAM_VERDICT, 0)) {
		err = -errno;
		pr_warn("event=bpf_attach_failed err=\"%s\"", strerror(-err));
		goto fail;
	}
	pr_info("event=datapath_loaded pin_dir=%s max_payload=%u window_blocks=%u min_match_pct=%u "
		"release_prefill=%s kernel_place=%s keep_balance=%.2f",
		o->pin_dir, o->max_payload, o->window_blocks, o->min_match_pct,
		o->release_prefill_early ? "first-token" : "end", o->kernel_place ? "yes" : "no",
		(double)o->keep_balance_fp / KVS_PLACE_ONE);
	/* The routes count's program, loaded now rather than at the first
	 * count: the descriptors it holds are the controller's from the
	 * start (a kernel without the count is logged, and walks later). */
	kvs_route_count_open(&dp->count, dp->routes_fd);
	return 0;
fail:
	kvs_dp_close(dp, !o->takeover);
	return err;
}

void kvs_dp_release_lock(struct kvs_datapath *dp)
{
	if (dp->lock_fd >= 0)
		close(dp->lock_fd);
	dp->lock_fd = -1;
}

int kvs_dp_relock(struct kvs_datapath *dp)
{
	dp->lock_fd = kvs_pin_lock(dp->pin_dir);
	return dp->lock_fd < 0 ? dp->lock_fd : 0;
}

int kvs_dp_open_memory(struct kvs_datapath *dp)
{
	memset(dp, 0, sizeof(*dp));
	dp->lock_fd = dp->socks_fd = dp->conns_fd = dp->routes_fd = -1;
	dp->ctl_fd = dp->stats_fd = dp->inflight_fd = dp->reports_fd = dp->tenants_fd = -1;
	dp->in_memory = true;
	dp->backends = calloc(KVS_MAX_BACKENDS, sizeof(*dp->backends));
	dp->shares = calloc(KVS_MAX_TENANTS, sizeof(*dp->shares));
	dp->ttft = calloc(KVS_MAX_BACKENDS, sizeof(*dp->ttft));
	if (!dp->backends || !dp->shares || !dp->ttft) {
		kvs_dp_close(dp, false);
		return -ENOMEM;
	}
	return 0;
}

void kvs_dp_close(struct kvs_datapath *dp, bool unpin)
{
	if (dp->in_memory) {
		free(dp->backends);
		free(dp->shares);
		free(dp->ttft);
		dp->backends = NULL;
		dp->shares = NULL;
		dp->ttft = NULL;
		return;
	}
	kvs_route_count_close(&dp->count);
	if (dp->backends)
		munmap(dp->backends, backends_map_bytes());
	if (dp->shares)
		munmap(dp->shares, shares_map_bytes());
	if (dp->ttft)
		munmap(dp->ttft, ttft_map_bytes());
	dp->backends = NULL;
	dp->shares = NULL;
	dp->ttft = NULL;
	/* Handed over: the programs stay attached and the maps pinned, for
	 * the controller that took over (it has attached its own already). */
	if (dp->handed_over && dp->skel) {
		kvsplice_bpf__destroy(dp->skel);
		dp->skel = NULL;
		unpin = false;
	}
	if (dp->skel) {
		bpf_prog_detach2(bpf_program__fd(dp->skel->progs.kvs_parser), dp->socks_fd,
				 BPF_SK_SKB_STREAM_PARSER);
		bpf_prog_detach2(bpf_program__fd(dp->skel->progs.kvs_verdict), dp->socks_fd,
				 BPF_SK_SKB_STREAM_VERDICT);
		kvsplice_bpf__destroy(dp->skel);
		dp->skel = NULL;
	}
	if (unpin && dp->pin_dir[0])
		kvs_pin_clear(dp->pin_dir);
	/* Ours, and still locked: no other controller pins there (one taking
	 * over waits for the lock, which a hand-over has let go of already).
	 * Left empty (unpinned, or a take-over refused), pin dirs would pile
	 * up; with pins left, rmdir leaves it. */
	if ((dp->made_pin.dir || dp->adopted_pin) && dp->lock_fd >= 0) {
		int err = kvs_pin_dir_remove(dp->pin_dir, &dp->made_pin);

		if (err)
			pr_warn("event=pin_dir_not_removed dir=%s err=\"%s\"", dp->pin_dir,
				strerror(-err));
	}
	if (dp->lock_fd >= 0)
		close(dp->lock_fd);
	dp->lock_fd = -1;
}

int kvs_dp_publish_ctl(struct kvs_datapath *dp, const struct kvs_ctl_stats *s)
{
	__u32 zero = 0;

	return bpf_map_update_elem(dp->ctl_fd, &zero, s, BPF_ANY) ? -errno : 0;
}
