// SPDX-License-Identifier: MIT
/*
 * kvsplicectl: the operator's view of a kvsplice gateway, read from the maps
 * pinned under the pin directory (so it works even when the controller is
 * down).
 *
 *   kvsplicectl [--pin-dir DIR] [--json] stats
 *   kvsplicectl [--pin-dir DIR] [--json] backends
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvsplice/admission.h"
#include "kvsplice/maps.h"
#include "pins.h"

#define PROG "kvsplicectl"

struct ctl_opts {
	const char *pin_dir;
	bool json;
};

static int open_map(const struct ctl_opts *o, const char *name)
{
	int fd = kvs_pin_open(o->pin_dir, name);

	if (fd == -EACCES || fd == -EPERM)
		fprintf(stderr,
			PROG ": cannot open %s/%s: %s (the maps are root's: run as root)\n",
			o->pin_dir, name, strerror(-fd));
	else if (fd < 0)
		fprintf(stderr,
			PROG ": cannot open %s/%s: %s (is kvspliced running with this --pin-dir?)\n",
			o->pin_dir, name, strerror(-fd));
	return fd;
}

/* Field names and values in one table, so the JSON and the text output
 * cannot drift apart. */
#define KSTAT_FIELDS(X)                                                                            \
	X(fast_path_frames)                                                                        \
	X(slow_path_frames)                                                                        \
	X(inject_frames)                                                                           \
	X(resp_frames)                                                                             \
	X(cache_key_hits)                                                                          \
	X(drop_no_client)                                                                          \
	X(pass_no_upstream)                                                                        \
	X(pass_saturated)                                                                          \
	X(pass_shallow)                                                                            \
	X(pass_stale)                                                                              \
	X(routes_learned)                                                                          \
	X(pass_bad_frame)                                                                          \
	X(pass_other)                                                                              \
	X(drop_bad_upstream)                                                                       \
	X(drop_punt)                                                                               \
	X(frames_at_offset)                                                                        \
	X(inflight_lost)                                                                           \
	X(pass_client_limit)

#define CSTAT_FIELDS(X)                                                                            \
	X(slow_frames)                                                                             \
	X(slow_bytes)                                                                              \
	X(routes_installed)                                                                        \
	X(routes_withdrawn)                                                                        \
	X(errors_sent)                                                                             \
	X(bad_frames)                                                                              \
	X(no_backend)                                                                              \
	X(clients_accepted)                                                                        \
	X(clients_closed)                                                                          \
	X(upstream_failures)                                                                       \
	X(decided_prefix)                                                                          \
	X(decided_spill)                                                                           \
	X(decided_shared)                                                                          \
	X(decided_cold)                                                                            \
	X(failed_inflight)                                                                         \
	X(clients_half_closed)                                                                     \
	X(clients_early_closed)                                                                    \
	X(frame_timeouts)                                                                          \
	X(busy_client)                                                                             \
	X(health_failures)

#define XSTAT_FIELDS(X)                                                                            \
	X(passed)                                                                                  \
	X(syn_passed)                                                                              \
	X(drop_denied)                                                                             \
	X(drop_not_allowed)                                                                        \
	X(drop_syn_rate)

static int count_entries(int fd, size_t key_size)
{
	unsigned char key[16], next[16];
	void *prev = NULL;
	int n = 0;

	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		memcpy(key, next, key_size);
		prev = key;
		n++;
	}
	return n;
}

static const char *const backend_states[] = { "absent", "up", "draining", "down" };

static const char *state_name(__u32 st)
{
	return st < 4 ? backend_states[st] : "unknown";
}

/* Cached / prompt tokens, as the backend's END frames reported them. */
static double hit_rate(const struct kvs_backend *be)
{
	return be->prompt_tokens ? (double)be->cached_tokens / (double)be->prompt_tokens : 0;
}

/* The backends that are configured, as a JSON array. */
static void print_backends_json(int fd)
{
	struct kvs_backend be;
	__u32 i;
	int n = 0;

	printf("[");
	for (i = 0; i < KVS_MAX_BACKENDS; i++) {
		if (bpf_map_lookup_elem(fd, &i, &be) || be.state == KVS_BE_ABSENT)
			continue;
		printf("%s{\"index\":%u,\"state\":\"%s\",\"pool\":%u,\"outstanding\":%llu,"
		       "\"outstanding_work\":%llu,\"work_limit\":%llu,"
		       "\"requests\":%llu,\"responses\":%llu,\"ends\":%llu,"
		       "\"req_bytes\":%llu,\"resp_bytes\":%llu,\"prompt_tokens\":%llu,"
		       "\"cached_tokens\":%llu,\"hit_rate\":%.4f,\"predicted_cached\":%llu,"
		       "\"mispredicted\":%llu,\"index_blocks\":%llu,\"charged_tokens\":%llu}",
		       n++ ? "," : "", i, state_name(be.state), be.pool_size,
		       (unsigned long long)be.outstanding, (unsigned long long)be.outstanding_work,
		       (unsigned long long)be.work_limit, (unsigned long long)be.req_frames,
		       (unsigned long long)be.resp_frames, (unsigned long long)be.ends,
		       (unsigned long long)be.req_bytes, (unsigned long long)be.resp_bytes,
		       (unsigned long long)be.prompt_tokens, (unsigned long long)be.cached_tokens,
		       hit_rate(&be), (unsigned long long)be.predicted_cached,
		       (unsigned long long)be.mispredicted, (unsigned long long)be.index_blocks,
		       (unsigned long long)be.charged_tokens);
	}
	printf("]");
}

static int cmd_stats(const struct ctl_opts *o)
{
	struct kvs_stats k;
	struct kvs_ctl_stats c;
	struct kvs_xdp_stats x;
	int sfd, cfd, rfd, nfd, bfd, xfd, err, routes = -1, conns = -1;
	bool have_xdp = false;
	const char *sep = "";
	double share;

	sfd = open_map(o, KVS_MAP_STATS);
	cfd = open_map(o, KVS_MAP_CTL_STATS);
	if (sfd < 0 || cfd < 0)
		return 1;
	err = kvs_read_kstats(sfd, &k);
	if (!err)
		err = kvs_read_ctl_stats(cfd, &c);
	if (err) {
		fprintf(stderr, PROG ": cannot read counters: %s\n", strerror(-err));
		return 1;
	}
	rfd = kvs_pin_open(o->pin_dir, KVS_MAP_ROUTES);
	if (rfd >= 0) {
		routes = count_entries(rfd, sizeof(__u64));
		close(rfd);
	}
	nfd = kvs_pin_open(o->pin_dir, KVS_MAP_CONNS);
	if (nfd >= 0) {
		conns = count_entries(nfd, sizeof(__u64));
		close(nfd);
	}
	/* Pinned only while the gateway runs with --xdp-iface. */
	xfd = kvs_pin_open(o->pin_dir, KVS_MAP_XDP_STATS);
	if (xfd >= 0) {
		have_xdp = kvs_read_percpu_sum(xfd, &x, sizeof(x)) == 0;
		close(xfd);
	}
	share = k.fast_path_frames + k.slow_path_frames
			? (double)k.fast_path_frames / (double)(k.fast_path_frames + k.slow_path_frames)
			: 0;

	if (o->json) {
		printf("{");
#define J(f)                                                                                       \
	printf("%s\"%s\":%llu", sep, #f, (unsigned long long)k.f);                                 \
	sep = ",";
		KSTAT_FIELDS(J)
#undef J
		printf(",\"fast_path_share\":%.4f,\"routes\":%d,\"connections\":%d,\"controller\":{",
		       share, routes, conns);
		sep = "";
#define J(f)                                                                                       \
	printf("%s\"%s\":%llu", sep, #f, (unsigned long long)c.f);                                 \
	sep = ",";
		CSTAT_FIELDS(J)
#undef J
		printf("},\"xdp\":");
		if (have_xdp) {
			sep = "";
			printf("{");
#define J(f)                                                                                       \
	printf("%s\"%s\":%llu", sep, #f, (unsigned long long)x.f);                                 \
	sep = ",";
			XSTAT_FIELDS(J)
#undef J
			printf("}");
		} else {
			printf("null");
		}
		printf(",\"backends\":");
		bfd = kvs_pin_open(o->pin_dir, KVS_MAP_BACKENDS);
		if (bfd >= 0) {
			print_backends_json(bfd);
			close(bfd);
		} else {
			printf("[]");
		}
		printf("}\n");
	} else {
		printf("kernel\n");
#define T(f) printf("  %-20s %llu\n", #f, (unsigned long long)k.f);
		KSTAT_FIELDS(T)
#undef T
		printf("  %-20s %.1f%%\n", "fast_path_share", 100 * share);
		printf("  %-20s %d\n", "routes", routes);
		printf("  %-20s %d\n", "connections", conns);
		printf("controller\n");
#define T(f) printf("  %-20s %llu\n", #f, (unsigned long long)c.f);
		CSTAT_FIELDS(T)
#undef T
		if (have_xdp) {
			printf("xdp admission\n");
#define T(f) printf("  %-20s %llu\n", #f, (unsigned long long)x.f);
			XSTAT_FIELDS(T)
#undef T
		}
	}
	close(sfd);
	close(cfd);
	return 0;
}

static int cmd_backends(const struct ctl_opts *o)
{
	int fd = open_map(o, KVS_MAP_BACKENDS);
	struct kvs_backend be;
	__u32 i;

	if (fd < 0)
		return 1;
	if (o->json) {
		print_backends_json(fd);
		printf("\n");
		close(fd);
		return 0;
	}
	printf("%-5s %-8s %5s %11s %12s %12s %10s %10s %8s %12s\n", "index", "state", "pool",
	       "outstanding", "work_tokens", "work_limit", "requests", "responses", "hit_rate",
	       "index_blocks");
	for (i = 0; i < KVS_MAX_BACKENDS; i++) {
		if (bpf_map_lookup_elem(fd, &i, &be) || be.state == KVS_BE_ABSENT)
			continue;
		printf("%-5u %-8s %5u %11llu %12llu %12llu %10llu %10llu %7.1f%% %12llu\n", i,
		       state_name(be.state), be.pool_size, (unsigned long long)be.outstanding,
		       (unsigned long long)be.outstanding_work, (unsigned long long)be.work_limit,
		       (unsigned long long)be.req_frames, (unsigned long long)be.resp_frames,
		       100 * hit_rate(&be), (unsigned long long)be.index_blocks);
	}
	close(fd);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " [--pin-dir DIR] [--json] COMMAND\n"
		"\n"
		"Reads a kvsplice gateway's state from its pinned BPF maps.\n"
		"\n"
		"Commands:\n"
		"  stats      kernel and controller counters: frames routed by the kernel\n"
		"             (fast path) and by the controller (slow path), responses,\n"
		"             drops, routes, connections, the controller's decisions by\n"
		"             reason, and (with --json) each backend's outstanding work\n"
		"  backends   per backend: state, pool, outstanding requests and work, frames,\n"
		"             hit rate (its own END reports) and the size of the controller's\n"
		"             index of its cache (--json adds bytes and prediction counters)\n"
		"\n"
		"Options:\n"
		"      --pin-dir DIR   the gateway's pin directory (default %s)\n"
		"  -j, --json          machine-readable output\n"
		"  -h, --help          this text\n",
		KVS_DEFAULT_PIN_DIR);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pin-dir", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct ctl_opts o = { .pin_dir = KVS_DEFAULT_PIN_DIR };
	int opt;

	while ((opt = getopt_long(argc, argv, "+p:jh", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			o.pin_dir = optarg;
			break;
		case 'j':
			o.json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	/* Options may also follow the command: kvsplicectl stats --json. */
	if (optind < argc) {
		const char *cmd = argv[optind];

		optind++;
		while ((opt = getopt_long(argc, argv, "+p:jh", opts, NULL)) != -1) {
			if (opt == 'p')
				o.pin_dir = optarg;
			else if (opt == 'j')
				o.json = true;
			else if (opt == 'h') {
				usage(stdout);
				return 0;
			} else {
				usage(stderr);
				return 2;
			}
		}
		if (optind < argc) {
			fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
			return 2;
		}
		if (!strcmp(cmd, "stats"))
			return cmd_stats(&o);
		if (!strcmp(cmd, "backends"))
			return cmd_backends(&o);
		fprintf(stderr, PROG ": unknown command '%s' (see --help)\n", cmd);
		return 2;
	}
	usage(stderr);
	return 2;
}
