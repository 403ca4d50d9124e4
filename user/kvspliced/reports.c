// SPDX-License-Identifier: MIT
/* The kernel's reports: the index learns, routes are marked. */
#include "reports.h"

#include <bpf/libbpf.h>
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>

#include "decide.h"
#include "kvsplice/hash.h"
#include "log.h"
#include "loop.h"

/*
 * The routes the verdict learned for this request (learn_routes() and, for
 * a placement, learn_route()): every checkpoint deeper than the matched
 * depth within what it hashed, and the hint's. Marked in the index of the
 * backend they name, so that its eviction of the prefix withdraws them. A
 * route the kernel did not install (one existed) names another backend or
 * this one already: withdrawing (hash, b) only removes it if it names b.
 */
static void mark_learned(struct gw *g, const struct kvs_report *r)
{
	uint32_t j, b = r->backend;

	for (j = 0; j < KVS_MAX_CHECKPOINTS; j++) {
		uint32_t cp = kvs_checkpoint(j);

		if (cp <= r->depth)
			continue;
		if (cp / KVS_INDEX_GROUP > r->ngroups)
			break;
		kvs_policy_mark(&g->policy, b, r->g[cp / KVS_INDEX_GROUP - 1]);
	}
	/* a void route the kernel replaced at the matched depth */
	if (r->why == KVS_WHY_STALE && r->depth >= KVS_INDEX_GROUP &&
	    r->depth / KVS_INDEX_GROUP <= r->ngroups)
		kvs_policy_mark(&g->policy, b, r->g[r->depth / KVS_INDEX_GROUP - 1]);
	if (r->why >= KVS_WHY_COLD && r->hint > r->depth &&
	    r->hint / KVS_INDEX_GROUP <= r->ngroups && r->hint >= KVS_INDEX_GROUP)
		kvs_policy_mark(&g->policy, b, r->g[r->hint / KVS_INDEX_GROUP - 1]);
}

static int on_report(void *ctx, void *data, size_t size)
{
	struct gw *g = ctx;
	const struct kvs_report *r = data;
	size_t head = offsetof(struct kvs_report, g);

	if (size < head || r->ngroups > KVS_REPORT_MAX_GROUPS ||
	    size < head + (size_t)r->ngroups * sizeof(r->g[0]) || r->backend >= g->nslots ||
	    !g->be[r->backend].present || r->why == 0 || r->why > KVS_WHY_MAX) {
		g->ctl.reports_bad++;
		return 0;
	}
	/* sent to a backend that has left since (its slot may be another's
	 * now): nothing to learn of the one there */
	if (!kvs_dp_gen_current(&g->dp, r->backend, r->gen)) {
		g->ctl.reports_stale++;
		return 0;
	}
	g->ctl.reports_read++;
	/* charged for the route's depth, or as if nothing were cached */
	kvs_policy_report(&g->policy, r->backend, (const uint64_t *)r->g, r->ngroups,
			  r->why < KVS_WHY_COLD ? r->depth : 0);
	mark_learned(g, r);
	return 0;
}

int gw_reports_open(struct gw *g)
{
	g->reports = NULL;
	if (g->dp.reports_fd < 0)
		return 0;
	g->reports = ring_buffer__new(g->dp.reports_fd, on_report, g, NULL);
	if (!g->reports) {
		int err = -errno;

		pr_warn("event=reports_open_failed err=\"%s\" hint=\"the kernel routes all the "
			"same; the controller's index of the backends' caches learns nothing from "
			"it, so routes to evicted prefixes are not withdrawn\"",
			strerror(-err));
		return err;
	}
	return 0;
}

void gw_reports_close(struct gw *g)
{
	ring_buffer__free(g->reports);
	g->reports = NULL;
}

void gw_reports_arm(struct gw *g)
{
	struct io_uring_sqe *sqe;

	if (!g->reports || g->reports_armed || g->quiescing)
		return;
	sqe = gw_get_sqe(g);
	if (!sqe)
		return; /* the tick drains, and arms again */
	io_uring_prep_poll_add(sqe, ring_buffer__epoll_fd(g->reports), POLLIN);
	io_uring_sqe_set_data64(sqe, ud(OP_REPORTS, NULL));
	g->reports_armed = true;
}

void gw_reports_drain(struct gw *g)
{
	int n;

	if (!g->reports)
		return;
	n = ring_buffer__consume(g->reports);
	if (n < 0)
		pr_warn("event=reports_read_failed err=\"%s\"", strerror(-n));
	if (n > 0)
		gw_withdraw_flush(g);
}

void gw_reports_on_poll(struct gw *g, struct io_uring_cqe *cqe)
{
	(void)cqe;
	g->reports_armed = false;
	gw_reports_drain(g);
	gw_reports_arm(g);
}
