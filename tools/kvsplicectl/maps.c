// SPDX-License-Identifier: MIT
/*
 * kvsplicectl's commands that read the pinned maps (stats, backends,
 * routes, routes flush): they work while the controller is down.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "jsonstr.h"
#include "kvsplice/admission.h"
#include "kvsplice/maps.h"
#include "kvsplice/place.h"
#include "mapwalk.h"
#include "netutil.h"
#include "pins.h"

/* kvs_pin_open's -EPROTO, said by name: also for the maps a command may go
 * without (a missing one is no error there, one of another build is). */
static int other_build(const struct ctl_opts *o, const char *name, int fd)
{
	if (fd == -EPROTO)
		fprintf(o->err,
			PROG ": %s/%s was pinned by a kvspliced of another build: its values are "
			     "not the size this kvsplicectl reads (use the kvsplicectl installed "
			     "with the running kvspliced)\n",
			o->pin_dir, name);
	return fd == -EPROTO;
}

int ctl_open_map(const struct ctl_opts *o, const char *name)
{
	int fd = kvs_pin_open(o->pin_dir, name);

	if (fd == -EACCES || fd == -EPERM)
		fprintf(o->err, PROG ": cannot open %s/%s: %s (the maps are root's: run as root)\n",
			o->pin_dir, name, strerror(-fd));
	else if (other_build(o, name, fd))
		;
	else if (fd < 0)
		fprintf(o->err,
			PROG
			": cannot open %s/%s: %s (is kvspliced running with this --pin-dir?)\n",
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
	X(pass_client_limit)                                                                       \
	X(cancel_frames)                                                                           \
	X(drop_cancel)                                                                             \
	X(placed_cold)                                                                             \
	X(placed_shallow)                                                                          \
	X(placed_spill)                                                                            \
	X(placed_stale)                                                                            \
	X(kept_holder)                                                                             \
	X(hot_replica)                                                                             \
	X(reports)                                                                                 \
	X(reports_lost)                                                                            \
	X(drop_budget)                                                                             \
	X(pass_budget)                                                                             \
	X(verdict_nested)                                                                          \
	X(verdict_nest_full)

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
	X(health_failures)                                                                         \
	X(user_path_frames)                                                                        \
	X(user_path_bytes)                                                                         \
	X(user_path_no_client)                                                                     \
	X(cancels_sent)                                                                            \
	X(user_path_cancels)                                                                       \
	X(user_cancels_dropped)                                                                    \
	X(reports_read)                                                                            \
	X(reports_bad)                                                                             \
	X(reports_stale)                                                                           \
	X(accept_failed)                                                                           \
	X(clients_shed)                                                                            \
	X(clients_over_source)                                                                     \
	X(clients_idle_closed)                                                                     \
	X(busy_budget)                                                                             \
	X(budget_dropped)                                                                          \
	X(budget_closed)                                                                           \
	X(decided_hot)                                                                             \
	X(health_held)

#define XSTAT_FIELDS(X)                                                                            \
	X(passed)                                                                                  \
	X(syn_passed)                                                                              \
	X(drop_denied)                                                                             \
	X(drop_not_allowed)                                                                        \
	X(drop_syn_rate)

static int count_batch(void *ctx, const void *keys, const void *vals, uint32_t n)
{
	*(int *)ctx += (int)n;
	return 0;
}

/* Entries of a hash map, or -1: walked by bucket (mapwalk.h says why). */
static int count_entries(int fd, size_t key_size, size_t value_size)
{
	int n = 0;

	return kvs_map_walk_batches(fd, key_size, value_size, 4096, count_batch, &n) ? -1 : n;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Seconds since a PONG report (-1: none yet). The clock is read after the
 * report was: one read before it can be older than a report the gateway
 * writes meanwhile, and the difference would wrap to 2^64 ns. A report
 * stamped later still (another clock) reads as just now. */
static double report_age_s(const struct kvs_be_report *r)
{
	uint64_t now = mono_ns();

	if (!r->at_ns)
		return -1.0;
	return now > r->at_ns ? (double)(now - r->at_ns) / 1e9 : 0;
}

/* Cached / prompt tokens, as the backend's END frames reported them. */
static double hit_rate(const struct kvs_backend *be)
{
	return be->prompt_tokens ? (double)be->cached_tokens / (double)be->prompt_tokens : 0;
}

int ctl_count_backends(const struct ctl_opts *o, uint32_t *by_state, uint32_t nstates)
{
	int fd = kvs_pin_open(o->pin_dir, KVS_MAP_BACKENDS);
	struct kvs_backend be;

	if (fd < 0) {
		other_build(o, KVS_MAP_BACKENDS, fd);
		return fd;
	}
	for (__u32 i = 0; i < KVS_MAX_BACKENDS; i++)
		if (bpf_map_lookup_elem(fd, &i, &be) == 0 && be.state < nstates)
			by_state[be.state]++;
	close(fd);
	return 0;
}

int ctl_count_spliced(const struct ctl_opts *o, struct ctl_spliced *n)
{
	int socks = kvs_pin_open(o->pin_dir, KVS_MAP_SOCKS), conns;
	__u64 key, next, *prev = NULL;

	memset(n, 0, sizeof(*n));
	if (socks < 0)
		return socks;
	/* Without conns every client would count as "other": a status saying
	 * the kernel splices nothing while it does. */
	conns = kvs_pin_open(o->pin_dir, KVS_MAP_CONNS);
	if (other_build(o, KVS_MAP_CONNS, conns)) {
		close(socks);
		return conns;
	}
	while (bpf_map_get_next_key(socks, prev, &next) == 0) {
		struct kvs_conn c;

		key = next;
		prev = &key;
		if (key & KVS_UPSTREAM_KEY_BIT)
			n->upstreams++;
		else if (key == KVS_PUNT_KEY)
			n->punt++;
		else if (conns >= 0 && bpf_map_lookup_elem(conns, &key, &c) == 0 &&
			 c.role == KVS_ROLE_CLIENT)
			n->clients++;
		else
			n->other++; /* the controller's inject socket */
	}
	if (conns >= 0)
		close(conns);
	close(socks);
	return 0;
}

/* Backend i's first-token counts (backend_ttft), zeros where the map is
 * not there (tfd < 0: a gateway from before it). */
static struct kvs_ttft ttft_of(int tfd, __u32 i)
{
	struct kvs_ttft t = { 0 };

	if (tfd >= 0 && bpf_map_lookup_elem(tfd, &i, &t))
		memset(&t, 0, sizeof(t));
	return t;
}

/* The mean of a sum over count, in ms. */
static double mean_ms(uint64_t sum_us, uint64_t count)
{
	return count ? (double)sum_us / (double)count / 1000.0 : 0;
}

/* The backends that are configured, as a JSON array (their first-token
 * counts from tfd, -1: none). */
static void print_backends_json(FILE *out, int fd, int tfd)
{
	struct kvs_backend be;
	struct kvs_ttft t;
	__u32 i;
	int n = 0;

	fprintf(out, "[");
	for (i = 0; i < KVS_MAX_BACKENDS; i++) {
		if (bpf_map_lookup_elem(fd, &i, &be) || be.state == KVS_BE_ABSENT)
			continue;
		char addr[80];

		kvs_endpoint_str(&be.addr, addr, sizeof(addr));
		fprintf(out,
			"%s{\"index\":%u,\"backend\":\"%s\",\"state\":\"%s\",\"pool\":%u,"
			"\"outstanding\":%llu,"
			"\"outstanding_work\":%llu,\"work_limit\":%llu,"
			"\"requests\":%llu,\"responses\":%llu,\"ends\":%llu,"
			"\"req_bytes\":%llu,\"resp_bytes\":%llu,\"prompt_tokens\":%llu,"
			"\"cached_tokens\":%llu,\"hit_rate\":%.4f,\"predicted_cached\":%llu,"
			"\"mispredicted\":%llu,\"unexpected_cached\":%llu,\"index_blocks\":%llu,\"charged_tokens\":%llu,"
			"\"output_tokens\":%llu,\"expect_output\":%llu,\"placed\":%.2f,"
			"\"hot_prev_work\":%llu,"
			"\"pong\":{\"running\":%u,\"waiting\":%u,\"kv_used_blocks\":%u,"
			"\"kv_total_blocks\":%u,\"age_s\":%.3f},\"reason\":",
			n++ ? "," : "", i, addr, kvs_backend_state_name(be.state), be.pool_size,
			(unsigned long long)be.outstanding, (unsigned long long)be.outstanding_work,
			(unsigned long long)be.work_limit, (unsigned long long)be.req_frames,
			(unsigned long long)be.resp_frames, (unsigned long long)be.ends,
			(unsigned long long)be.req_bytes, (unsigned long long)be.resp_bytes,
			(unsigned long long)be.prompt_tokens, (unsigned long long)be.cached_tokens,
			hit_rate(&be), (unsigned long long)be.predicted_cached,
			(unsigned long long)be.mispredicted,
			(unsigned long long)be.unexpected_cached,
			(unsigned long long)be.index_blocks, (unsigned long long)be.charged_tokens,
			(unsigned long long)be.output_tokens, (unsigned long long)be.expect_output,
			/* the kernel's decaying count of new prefixes placed here */
			(double)be.placed / KVS_PLACE_UNIT, (unsigned long long)be.hot.prev,
			be.report.running, be.report.waiting, be.report.kv_used_blocks,
			be.report.kv_total_blocks, report_age_s(&be.report));
		kvs_json_str(out, be.reason, sizeof(be.reason)); /* may hold quotes */
		/* since the backend took the slot (or the controller started
		 * counting): /metrics has them as a histogram */
		t = ttft_of(tfd, i);
		fprintf(out,
			",\"ttft\":{\"count\":%llu,\"mean_ms\":%.3f,\"queue_ms\":%.3f,"
			"\"prefill_ms\":%.3f}}",
			(unsigned long long)t.count, mean_ms(t.queue_us + t.prefill_us, t.count),
			mean_ms(t.queue_us, t.count), mean_ms(t.prefill_us, t.count));
	}
	fprintf(out, "]");
}

int ctl_stats(const struct ctl_opts *o, int argc, char **argv)
{
	struct kvs_stats k;
	struct kvs_ctl_stats c;
	struct kvs_xdp_stats x;
	int sfd, cfd, rfd = -1, nfd = -1, bfd = -1, tfd = -1, xfd = -1, err, routes = -1,
		      conns = -1, rc = 1;
	bool have_xdp = false;
	const char *sep = "";
	double share;

	sfd = ctl_open_map(o, KVS_MAP_STATS);
	cfd = ctl_open_map(o, KVS_MAP_CTL_STATS);
	if (sfd < 0 || cfd < 0)
		goto cleanup;
	err = kvs_read_kstats(sfd, &k);
	if (!err)
		err = kvs_read_ctl_stats(cfd, &c);
	if (err) {
		fprintf(o->err, PROG ": cannot read counters: %s\n", strerror(-err));
		goto cleanup;
	}
	/* The maps stats goes without if absent: one of another build is an
	 * error all the same (not a backends list shown empty, exit 0). */
	rfd = kvs_pin_open(o->pin_dir, KVS_MAP_ROUTES);
	nfd = kvs_pin_open(o->pin_dir, KVS_MAP_CONNS);
	/* Pinned only while the gateway runs with --xdp-iface. */
	xfd = kvs_pin_open(o->pin_dir, KVS_MAP_XDP_STATS);
	bfd = kvs_pin_open(o->pin_dir, KVS_MAP_BACKENDS);
	tfd = kvs_pin_open(o->pin_dir, KVS_MAP_BACKEND_TTFT);
	if (other_build(o, KVS_MAP_ROUTES, rfd) + other_build(o, KVS_MAP_CONNS, nfd) +
	    other_build(o, KVS_MAP_BACKEND_TTFT, tfd) + other_build(o, KVS_MAP_XDP_STATS, xfd) +
	    other_build(o, KVS_MAP_BACKENDS, bfd))
		goto cleanup;
	if (rfd >= 0)
		routes = count_entries(rfd, sizeof(__u64), sizeof(struct kvs_route));
	if (nfd >= 0)
		conns = count_entries(nfd, sizeof(__u64), sizeof(struct kvs_conn));
	if (xfd >= 0)
		have_xdp = kvs_read_percpu_sum(xfd, &x, sizeof(x)) == 0;
	share = k.fast_path_frames + k.slow_path_frames ?
			(double)k.fast_path_frames /
				(double)(k.fast_path_frames + k.slow_path_frames) :
			0;

	if (o->json) {
		fprintf(o->out, "{");
#define J(f)                                                                                       \
	fprintf(o->out, "%s\"%s\":%llu", sep, #f, (unsigned long long)k.f);                        \
	sep = ",";
		KSTAT_FIELDS(J)
#undef J
		fprintf(o->out,
			",\"fast_path_share\":%.4f,\"routes\":%d,\"connections\":%d,\"controller\":{",
			share, routes, conns);
		sep = "";
#define J(f)                                                                                       \
	fprintf(o->out, "%s\"%s\":%llu", sep, #f, (unsigned long long)c.f);                        \
	sep = ",";
		CSTAT_FIELDS(J)
#undef J
		fprintf(o->out, "},\"xdp\":");
		if (have_xdp) {
			sep = "";
			fprintf(o->out, "{");
#define J(f)                                                                                       \
	fprintf(o->out, "%s\"%s\":%llu", sep, #f, (unsigned long long)x.f);                        \
	sep = ",";
			XSTAT_FIELDS(J)
#undef J
			fprintf(o->out, "}");
		} else {
			fprintf(o->out, "null");
		}
		fprintf(o->out, ",\"backends\":");
		if (bfd >= 0) {
			print_backends_json(o->out, bfd, tfd);
		} else {
			fprintf(o->out, "[]");
		}
		fprintf(o->out, "}\n");
	} else {
		fprintf(o->out, "kernel\n");
#define T(f) fprintf(o->out, "  %-20s %llu\n", #f, (unsigned long long)k.f);
		KSTAT_FIELDS(T)
#undef T
		fprintf(o->out, "  %-20s %.1f%%\n", "fast_path_share", 100 * share);
		fprintf(o->out, "  %-20s %d\n", "routes", routes);
		fprintf(o->out, "  %-20s %d\n", "connections", conns);
		fprintf(o->out, "controller\n");
#define T(f) fprintf(o->out, "  %-20s %llu\n", #f, (unsigned long long)c.f);
		CSTAT_FIELDS(T)
#undef T
		if (have_xdp) {
			fprintf(o->out, "xdp admission\n");
#define T(f) fprintf(o->out, "  %-20s %llu\n", #f, (unsigned long long)x.f);
			XSTAT_FIELDS(T)
#undef T
		}
	}
	rc = 0;
cleanup:
	if (sfd >= 0)
		close(sfd);
	if (cfd >= 0)
		close(cfd);
	if (rfd >= 0)
		close(rfd);
	if (nfd >= 0)
		close(nfd);
	if (xfd >= 0)
		close(xfd);
	if (bfd >= 0)
		close(bfd);
	if (tfd >= 0)
		close(tfd);
	return rc;
}

int ctl_backends(const struct ctl_opts *o, int argc, char **argv)
{
	int fd = ctl_open_map(o, KVS_MAP_BACKENDS), tfd;
	struct kvs_backend be;
	struct kvs_ttft t;
	__u32 i;

	if (fd < 0)
		return 1;
	/* Pinned by gateways from 2026-12-03 on: without it, no TTFT. */
	tfd = kvs_pin_open(o->pin_dir, KVS_MAP_BACKEND_TTFT);
	if (other_build(o, KVS_MAP_BACKEND_TTFT, tfd)) {
		close(fd);
		return 1;
	}
	if (o->json) {
		print_backends_json(o->out, fd, tfd);
		fprintf(o->out, "\n");
		close(fd);
		if (tfd >= 0)
			close(tfd);
		return 0;
	}
	fprintf(o->out, "%-5s %-22s %-9s %11s %12s %10s %10s %10s %8s %9s %8s  %s\n", "index",
		"backend", "state", "outstanding", "work_tokens", "requests", "req_MB", "resp_MB",
		"hit_rate", "run/wait", "ttft_ms", "reason");
	for (i = 0; i < KVS_MAX_BACKENDS; i++) {
		char addr[80], load[24] = "-", ttft[24];

		if (bpf_map_lookup_elem(fd, &i, &be) || be.state == KVS_BE_ABSENT)
			continue;
		kvs_endpoint_str(&be.addr, addr, sizeof(addr));
		if (be.report.at_ns)
			snprintf(load, sizeof(load), "%u/%u", be.report.running, be.report.waiting);
		/* why it is not up: the last failure, for a backend that is not */
		be.reason[sizeof(be.reason) - 1] = '\0';
		t = ttft_of(tfd, i);
		if (t.count)
			snprintf(ttft, sizeof(ttft), "%.1f",
				 mean_ms(t.queue_us + t.prefill_us, t.count));
		else
			snprintf(ttft, sizeof(ttft), "-");
		fprintf(o->out,
			"%-5u %-22s %-9s %11llu %12llu %10llu %10.1f %10.1f %7.1f%% %9s %8s  %s\n",
			i, addr, kvs_backend_state_name(be.state),
			(unsigned long long)be.outstanding, (unsigned long long)be.outstanding_work,
			(unsigned long long)be.req_frames, (double)be.req_bytes / 1e6,
			(double)be.resp_bytes / 1e6, 100 * hit_rate(&be), load, ttft,
			be.state == KVS_BE_UP ? "" : be.reason);
	}
	close(fd);
	if (tfd >= 0)
		close(tfd);
	return 0;
}

struct route_row {
	__u64 hash;
	struct kvs_route r;
};

static int by_hits(const void *a, const void *b)
{
	const struct route_row *x = a, *y = b;

	return x->r.hits < y->r.hits ? 1 : x->r.hits > y->r.hits ? -1 : 0;
}

/* The routes with the most hits. A route is current while its backend's
 * route_gen is the one it was installed under (it is void otherwise: the
 * backend left after it was installed). Read by bucket (mapwalk.h). */
static int list_routes(const struct ctl_opts *o)
{
	int rfd = ctl_open_map(o, KVS_MAP_ROUTES), bfd = ctl_open_map(o, KVS_MAP_BACKENDS), err;
	struct route_row *rows = NULL;
	struct kvs_route *vals = NULL;
	__u64 *keys = NULL, now = mono_ns();
	size_t n = 0, i;
	int rc = 1;

	if (rfd < 0 || bfd < 0)
		goto out;
	err = kvs_map_read_all(rfd, sizeof(*keys), sizeof(*vals), (void **)&keys, (void **)&vals,
			       &n);
	if (!err && !(rows = calloc(n ? n : 1, sizeof(*rows))))
		err = -ENOMEM;
	for (i = 0; !err && i < n; i++) {
		rows[i].hash = keys[i];
		rows[i].r = vals[i];
	}
	free(keys);
	free(vals);
	if (err) {
		fprintf(o->err, PROG ": cannot read the routes: %s\n", strerror(-err));
		goto out;
	}
	if (n)
		qsort(rows, n, sizeof(*rows), by_hits);
	if (o->json)
		fprintf(o->out, "{\"routes\":%zu,\"top\":[", n);
	else
		fprintf(o->out, "%zu routes; top %zu by hits\n%-18s %7s %6s %10s %10s %7s\n", n,
			n < o->limit ? n : o->limit, "hash", "backend", "depth", "age_s", "hits",
			"current");
	for (i = 0; i < n && i < o->limit; i++) {
		const struct kvs_route *r = &rows[i].r;
		struct kvs_backend be;
		bool cur = bpf_map_lookup_elem(bfd, &r->backend, &be) == 0 &&
			   be.route_gen == r->gen;
		double age = now > r->installed_ns ? (double)(now - r->installed_ns) / 1e9 : 0;

		if (o->json)
			fprintf(o->out,
				"%s{\"hash\":\"%016llx\",\"backend\":%u,\"depth_blocks\":%u,"
				"\"age_s\":%.3f,\"hits\":%llu,\"current\":%s}",
				i ? "," : "", (unsigned long long)rows[i].hash, r->backend,
				r->depth_blocks, age, (unsigned long long)r->hits,
				cur ? "true" : "false");
		else
			fprintf(o->out, "%016llx %7u %6u %10.1f %10llu %7s\n",
				(unsigned long long)rows[i].hash, r->backend, r->depth_blocks, age,
				(unsigned long long)r->hits, cur ? "yes" : "no");
	}
	if (o->json)
		fprintf(o->out, "]}\n");
	rc = 0;
out:
	free(rows);
	if (rfd >= 0)
		close(rfd);
	if (bfd >= 0)
		close(bfd);
	return rc;
}

/* Deletes every route: the kernel sends each prompt to the controller once
 * more, which routes it by its index and installs the routes again. The
 * tenants' counts of their routes (route_shares) go down by what was
 * removed of theirs: left, they would hold each tenant's share full of
 * routes that are gone until the controller's next recount (10 s). */
static int flush_routes(const struct ctl_opts *o)
{
	uint64_t gone[KVS_MAX_TENANTS];
	int fd = ctl_open_map(o, KVS_MAP_ROUTES), sfd, err;
	long n;

	if (fd < 0)
		return 1;
	n = kvs_routes_clear(fd, gone);
	close(fd);
	/* (no route_shares map: a controller from before them) */
	sfd = kvs_pin_open(o->pin_dir, KVS_MAP_ROUTE_SHARES);
	if (sfd >= 0) {
		err = kvs_route_shares_uncount(sfd, gone);
		if (err)
			fprintf(o->err,
				PROG ": the tenants' route counts were not lowered: %s (the "
				     "controller's recount corrects them within 10 s)\n",
				strerror(-err));
		close(sfd);
	} else if (other_build(o, KVS_MAP_ROUTE_SHARES, sfd)) {
		fprintf(o->err, PROG ": the tenants' route counts were not lowered (the "
				     "controller's recount corrects them within 10 s)\n");
	}
	if (o->json)
		fprintf(o->out, "{\"flushed\":%ld}\n", n);
	else
		fprintf(o->out, "%ld routes flushed\n", n);
	return 0;
}

/* routes, or routes flush. */
int ctl_routes(const struct ctl_opts *o, int argc, char **argv)
{
	if (argc == 0)
		return list_routes(o);
	if (strcmp(argv[0], "flush")) {
		fprintf(o->err, PROG ": unexpected argument '%s' (see --help)\n", argv[0]);
		return 2;
	}
	return flush_routes(o);
}
