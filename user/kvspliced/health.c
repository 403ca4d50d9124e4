// SPDX-License-Identifier: MIT
/* Health checks: a PING to each backend through the kernel, and ejection of
 * one that stops answering, or answers that it is not ready (its
 * reconnections are probed, probe.c: readmitted once they answer ready). */
#include "health.h"

#include <linux/sockios.h>
#include <stdio.h>
#include <sys/ioctl.h>

#include "backend.h"
#include "kpath.h"
#include "log.h"

/* A PING to backend b through the kernel (its pool slot 0): req_id names
 * the backend and the check, gw_conn 0 marks it as the controller's. */
static void ping_backend(struct gw *g, uint32_t b, uint64_t now)
{
	struct gw_backend *be = &g->be[b];
	struct kvs_msg m = {
		.type = KVS_T_PING,
		.req_id = (uint64_t)b << 32 | ++be->ping_seq,
		.gw_backend = kvs_gw_pack(b, 0),
	};

	/* Whatever the kernel noted of an earlier check (or of a former
	 * controller's) is not an answer to this one. */
	__atomic_store_n(&g->dp.backends[b].pong_seen, 0, __ATOMIC_RELAXED);
	if (gw_kpath_put(g, &m, NULL, 0))
		return;
	be->ping_sent_ns = now;
	be->ping_known = be->instance;
	be->pong_held = false;
}

/*
 * A PONG with NOT_READY: the backend is there but cannot serve (its
 * inference server is down or loading). It counts as no answer: the clock
 * of the first such answer in a row runs on, and three intervals of it eject
 * the backend as silence would (gw_health_tick). The next PING goes at the
 * next interval, so a backend that turns ready is seen at once.
 */
static void not_ready(struct gw *g, uint32_t b)
{
	struct gw_backend *be = &g->be[b];

	if (!be->unready_since_ns)
		be->unready_since_ns = be->ping_sent_ns;
	be->ping_sent_ns = 0;
	gw_backend_readiness(g, b, false);
}

void gw_health_on_pong(struct gw *g, const struct kvs_msg *m, const uint8_t *payload)
{
	uint32_t b = (uint32_t)(m->req_id >> 32);
	struct gw_backend *be;
	bool ready = true;

	if (b >= g->nslots || !g->be[b].present)
		return;
	be = &g->be[b];
	if ((uint32_t)m->req_id != be->ping_seq || !be->ping_sent_ns) {
		/* an answer to a check that was already given up */
		pr_debug("event=pong_late backend=%s seq=%u current=%u", be->name,
			 (uint32_t)m->req_id, be->ping_seq);
		return;
	}
	/* (a late answer is not compared: it may be the former process's) */
	gw_backend_instance(g, b, m->instance, be->ping_known);
	if (m->payload_len == sizeof(struct kvs_load)) {
		struct kvs_load_info li;

		kvs_load_decode(payload, &li);
		kvs_dp_set_report(&g->dp, b,
				  &(struct kvs_be_report){ .running = li.running,
							   .waiting = li.waiting,
							   .kv_used_blocks = li.kv_used_blocks,
							   .kv_total_blocks = li.kv_total_blocks,
							   .at_ns = kvs_now_ns() });
		ready = !(li.flags & KVS_LOAD_F_NOT_READY);
		if (li.flags & KVS_LOAD_F_KV_BLOCKS)
			gw_backend_capacity(g, b, li.kv_total_blocks);
	}
	if (!ready) {
		not_ready(g, b);
		return;
	}
	gw_backend_readiness(g, b, true);
	be->unready_since_ns = 0;
	be->said_unready_wait = false;
	{
		/* The last report, as operators see it in the backends map. */
		const struct kvs_be_report *rep = &g->dp.backends[b].report;

		pr_debug("event=pong backend=%s rtt_us=%llu running=%u waiting=%u kv_used=%u/%u",
			 be->name, (unsigned long long)((kvs_now_ns() - be->ping_sent_ns) / 1000),
			 rep->running, rep->waiting, rep->kv_used_blocks, rep->kv_total_blocks);
	}
	be->ping_sent_ns = 0;
}

/* b is ejected by the health check (why, for the log): down, and on
 * probation once it reconnects. Silent (no PONG: hung, stopped, cut off,
 * its cache still there) or not ready (its server says it cannot serve:
 * starting, or down, its cache presumed gone). */
static void eject(struct gw *g, uint32_t b, const char *why, bool silent)
{
	struct gw_backend *be = &g->be[b];

	g->ctl.health_failures++;
	be->ping_sent_ns = 0;
	be->unready_since_ns = 0;
	be->said_unready_wait = false;
	be->probation = true;
	/* its probation said once this ejection (backend.c), not once ever:
	 * a readmission clears no flag the dial would see */
	be->said_probation = false;
	if (silent)
		gw_backend_silent(g, b, why);
	else
		gw_backend_down(g, b, why);
}

/*
 * A backend that has said it is not ready for three intervals is ejected,
 * which fails its requests in flight (backend_gone) - but not while it
 * still has some, for --drain-timeout-ms at most, as a removed backend's
 * are let finish: it takes no new work from its first not-ready answer,
 * and one that says so while it still streams (a server whose health
 * check fails under load; an adapter whose /health poll timed out, before
 * it learnt better) had every stream cut 3 s on, and its load went to the
 * others at once. A server that cannot serve them any more fails them
 * itself (its adapter answers them). Its PINGs go on meanwhile: a ready
 * answer readmits it.
 */
static bool unready_waits(struct gw *g, uint32_t b, uint64_t now, uint64_t interval)
{
	struct gw_backend *be = &g->be[b];
	uint64_t left = kvs_dp_outstanding(&g->dp, b);

	if (!left || now - be->unready_since_ns >
			     3 * interval + (uint64_t)g->cfg->drain_timeout_ms * 1000000ull)
		return false;
	if (!be->said_unready_wait)
		pr_info("event=backend_not_ready_draining backend=%s index=%u in_flight=%llu "
			"timeout_ms=%u hint=\"ejected once they end\"",
			be->name, b, (unsigned long long)left, g->cfg->drain_timeout_ms);
	be->said_unready_wait = true;
	return true;
}

/* Bytes waiting unread in the controller's end of the punt socket. */
static int punt_unread(const struct gw *g)
{
	int n = 0;

	if (!g->punt || ioctl(g->punt->fd, SIOCINQ, &n) < 0)
		return -1;
	return n;
}

/*
 * Past its deadline, b's check is held, not failed, when the kernel has
 * passed its PONG up to the controller (the backends map's pong_seen names
 * this check) and the controller has not read it yet: the backend
 * answered; its answer waits in the punt socket behind the frames clients
 * had punted before it (and in the kernel's queue into that socket, which
 * no ioctl counts), and the controller, starved of CPU or flooded, reads
 * slower than they come. It is held until read, as the controller reads
 * that socket in order; the reading then goes on as for any answer
 * (ready or not). It ends without the answer only if the punt pair is
 * lost or its stream discarded as corrupt (kpath.c forgets the notes):
 * then the check fails as before. Held once per check: counted, logged.
 */
static bool pong_queued(struct gw *g, uint32_t b, uint64_t now)
{
	struct gw_backend *be = &g->be[b];
	uint64_t seen = __atomic_load_n(&g->dp.backends[b].pong_seen, __ATOMIC_RELAXED);

	if (!g->punt || !be->ping_sent_ns || seen != ((uint64_t)b << 32 | be->ping_seq))
		return false;
	if (!be->pong_held) {
		be->pong_held = true;
		g->ctl.health_held++;
		pr_warn("event=health_pong_queued backend=%s waited_ms=%llu punt_unread_bytes=%d "
			"hint=\"its PONG came in time and waits unread in the controller's punt "
			"socket: the controller is behind (starved of CPU, or flooded)\"",
			be->name, (unsigned long long)((now - be->ping_sent_ns) / 1000000),
			punt_unread(g));
	}
	return true;
}

/* On the tick: check every backend that is up; eject one that has not
 * answered, or has answered only that it is not ready, for three intervals
 * (it may hang with its connections open). */
void gw_health_tick(struct gw *g, uint64_t now)
{
	uint64_t interval = (uint64_t)g->cfg->health_interval_ms * 1000000ull;
	/* The controller itself did not run for a while (stopped, starved):
	 * the PONGs of that time may still wait, unread, behind this tick, and
	 * a silence it did not watch proves nothing, so the clocks start again
	 * (the kernel served the backends meanwhile). A pause is a gap of an
	 * interval and at least a second (ten ticks): a late tick is none. */
	uint64_t pause = interval > 1000000000ull ? interval : 1000000000ull;
	bool paused = g->health_tick_ns && now - g->health_tick_ns > pause;
	uint32_t b;

	g->health_tick_ns = now;
	if (!interval || g->dp.in_memory) /* PINGs go through the kernel */
		return;
	for (b = 0; b < g->nslots; b++) {
		struct gw_backend *be = &g->be[b];
		char why[64];

		if (!be->present || !be->up) {
			be->ping_sent_ns = 0;
			be->unready_since_ns = 0;
			continue;
		}
		if (paused && be->ping_sent_ns)
			be->ping_sent_ns = now;
		if (paused && be->unready_since_ns)
			be->unready_since_ns = now;
		if (be->ping_sent_ns && now - be->ping_sent_ns > 3 * interval) {
			if (pong_queued(g, b, now))
				continue;
			snprintf(why, sizeof(why), "no PONG in %llu ms",
				 (unsigned long long)(3 * interval / 1000000));
			eject(g, b, why, true);
			continue;
		}
		if (be->unready_since_ns && now - be->unready_since_ns > 3 * interval) {
			/* the answer waiting may say it is ready */
			if (pong_queued(g, b, now))
				continue;
			if (!unready_waits(g, b, now, interval)) {
				snprintf(why, sizeof(why), "reported not ready for %llu ms",
					 (unsigned long long)(3 * interval / 1000000));
				eject(g, b, why, false);
				continue;
			}
		}
		if (!be->ping_sent_ns && now >= be->next_ping_ns) {
			ping_backend(g, b, now);
			be->next_ping_ns = now + interval;
		}
	}
}
