// SPDX-License-Identifier: MIT
/* Health checks: a PING to each backend through the kernel, and ejection of
 * one that stops answering, or answers that it is not ready (its
 * reconnections are probed, probe.c: readmitted once they answer ready). */
#include "health.h"

#include <errno.h>
#include <linux/sockios.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "backend.h"
#include "conn.h"
#include "kpath.h"
#include "log.h"

/* Intervals without an answer that fail a check; and at most how many
 * since its PING it may be held past that while other evidence says the
 * backend is alive (its responses, a direct PING): a PING that never
 * comes back through the kernel path means that path to it is broken,
 * and its connections are made anew. */
#define HEALTH_MISSES 3
#define HEALTH_HOLD_MAX 10

/* Response frames backend b has sent, as the data path counted them. */
static uint64_t resp_frames(const struct gw *g, uint32_t b)
{
	return __atomic_load_n(&g->dp.backends[b].resp_frames, __ATOMIC_RELAXED);
}

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
	be->heard_ns = now;
	be->heard_frames = resp_frames(g, b);
	be->said_heard = false;
	be->answered_ns = 0;
	be->said_direct = false;
	be->direct_running = false; /* one of an earlier check: not this one's */
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
	be->direct_running = false;
	if (silent)
		gw_backend_silent(g, b, why);
	else
		gw_backend_down(g, b, why);
}

/* A check failed: no PONG, nothing else heard, for HEALTH_MISSES intervals
 * (or held for HEALTH_HOLD_MAX). */
static void eject_silent(struct gw *g, uint32_t b, uint64_t now, uint64_t interval)
{
	uint64_t waited = now - g->be[b].ping_sent_ns;
	char why[64];

	snprintf(why, sizeof(why), "no PONG in %llu ms",
		 (unsigned long long)((waited > HEALTH_HOLD_MAX * interval ? HEALTH_HOLD_MAX :
									     HEALTH_MISSES) *
				      interval / 1000000));
	eject(g, b, why, true);
}

/*
 * The outcome of b's direct PING (ask_directly), if it still belongs to
 * the check that is waiting. Ready: b is alive, and it is the check's
 * PING or PONG that waits in the kernel (still_heard() says why), so the
 * check is held three more intervals, when b is asked again; its PONG
 * still answers it when it comes. Not ready: taken as a not-ready PONG
 * is. Anything else (no answer within the interval, a close, a wrong
 * frame): b is silent, ejected.
 */
static void answered_directly(struct gw *g, struct gw_conn *c, int err, const char *why)
{
	uint32_t b = c->backend, instance = c->probe_instance, known = c->probe_known;
	struct gw_backend *be = &g->be[b];
	bool ours = be->direct_running && be->direct_id == c->id && be->direct_gen == c->gen;
	uint64_t now = kvs_now_ns();

	gw_conn_close(g, c);
	if (!ours)
		return;
	be->direct_running = false;
	if (!be->present || !be->up || !be->ping_sent_ns)
		return;
	pr_debug("event=health_direct_pong backend=%s err=%d why=\"%s\"", be->name, err, why);
	if (err && err != -EAGAIN) {
		eject_silent(g, b, now, (uint64_t)g->cfg->health_interval_ms * 1000000ull);
		return;
	}
	gw_backend_instance(g, b, instance, known);
	if (err) {
		not_ready(g, b);
		return;
	}
	be->answered_ns = now;
	if (!be->said_direct) {
		be->said_direct = true;
		g->ctl.health_held++;
		pr_warn("event=health_answered_directly backend=%s waited_ms=%llu "
			"hint=\"no PONG through the kernel, but it answered a PING on a connection of "
			"its own: kept; its PING or PONG waits in the kernel's queues for a redirect "
			"worker (short of CPU)\"",
			be->name, (unsigned long long)((now - be->ping_sent_ns) / 1000000));
	}
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
 * had punted before it, or before it, in the kernel's queue into that
 * socket (each redirected frame waits there for a kernel worker, which
 * can go unscheduled for seconds on a loaded machine: docs/RUNBOOK.md, "A
 * backend goes down"). It is held until read, as the controller reads
 * that socket in order; the reading then goes on as for any answer
 * (ready or not). It ends without the answer only if the punt pair is
 * lost or its stream discarded as corrupt (kpath.c forgets the notes):
 * then the check fails as before. Held once per check: counted, logged,
 * the hint naming the queue it waits in (an empty socket: the kernel's).
 */
static bool pong_queued(struct gw *g, uint32_t b, uint64_t now)
{
	struct gw_backend *be = &g->be[b];
	uint64_t seen = __atomic_load_n(&g->dp.backends[b].pong_seen, __ATOMIC_RELAXED);
	int unread;

	if (!g->punt || !be->ping_sent_ns || seen != ((uint64_t)b << 32 | be->ping_seq))
		return false;
	if (!be->pong_held) {
		be->pong_held = true;
		g->ctl.health_held++;
		unread = punt_unread(g);
		pr_warn("event=health_pong_queued backend=%s waited_ms=%llu punt_unread_bytes=%d "
			"hint=\"%s\"",
			be->name, (unsigned long long)((now - be->ping_sent_ns) / 1000000), unread,
			unread == 0 ? "its PONG came in time and waits in the kernel's queue into "
				      "the controller's punt socket: a kernel redirect worker has "
				      "not run (short of CPU)" :
				      "its PONG came in time and waits unread in the controller's "
				      "punt socket: the controller is behind (starved of CPU, or "
				      "flooded)");
	}
	return true;
}

/* b's response frames moved since they were last read: heard now. */
static void listen_for(struct gw *g, uint32_t b, uint64_t now)
{
	struct gw_backend *be = &g->be[b];
	uint64_t n = resp_frames(g, b);

	if (n != be->heard_frames) {
		be->heard_frames = n;
		be->heard_ns = now;
	}
}

/*
 * Past its deadline with no PONG, b's check is held while b's response
 * frames (CHUNKs, ENDs, ERRORs, counted by the data path as they pass)
 * came within the last three intervals: a backend that streams is not
 * hung, whatever became of its PING. The PING and the PONG each take an
 * egress redirect and wait in the target socket's queue for a kernel
 * worker, which a loaded machine can leave unscheduled for seconds while
 * the streams' redirects run on another CPU's worker: every backend's
 * PING, redirected from the controller's CPU in one go, then waits, and
 * every backend was ejected with its requests (docs/RUNBOOK.md, "A
 * backend goes down"). Logged once per check, counted as held.
 */
static bool still_heard(struct gw *g, uint32_t b, uint64_t now, uint64_t interval)
{
	struct gw_backend *be = &g->be[b];

	if (now - be->heard_ns > HEALTH_MISSES * interval)
		return false;
	if (!be->said_heard) {
		be->said_heard = true;
		g->ctl.health_held++;
		pr_warn("event=health_pong_late backend=%s waited_ms=%llu "
			"hint=\"no PONG yet, but its responses still come: kept; its PING or PONG "
			"may wait in the kernel's queues for a redirect worker (short of CPU)\"",
			be->name, (unsigned long long)((now - be->ping_sent_ns) / 1000000));
	}
	return true;
}

static void answered_directly(struct gw *g, struct gw_conn *c, int err, const char *why);

/*
 * Past its deadline with no PONG and nothing else heard, b is asked
 * directly before it is ejected: a PING on a connection of its own, which
 * the controller writes and reads itself, through no redirect and so no
 * kernel worker, answered within an interval (a backend that answers at
 * all answers at once). Held while that runs; its outcome is taken in
 * answered_directly(). A hung backend (its kernel still completes the
 * handshake) does not answer it either: ejected an interval later than
 * the missing PONG alone would have. One that cannot be asked (refused,
 * no room) is ejected at once.
 */
static bool ask_directly(struct gw *g, uint32_t b, uint64_t interval)
{
	struct gw_backend *be = &g->be[b];
	struct gw_conn *c;
	int err;

	if (be->direct_running)
		return true;
	err = gw_kpath_dial_direct(g, b, (uint32_t)(interval / 1000000), answered_directly, &c);
	if (err) {
		pr_debug("event=health_direct_ping_failed backend=%s err=\"%s\"", be->name,
			 strerror(-err));
		return false;
	}
	be->direct_running = true;
	be->direct_id = c->id;
	be->direct_gen = c->gen;
	return true;
}

/* What a check past its deadline with no PONG comes to: held (true) or
 * failed. Held at most HEALTH_HOLD_MAX intervals from its PING, but for
 * a PONG the kernel passed up (pong_queued: the answer is there). */
static bool check_held(struct gw *g, uint32_t b, uint64_t now, uint64_t interval)
{
	struct gw_backend *be = &g->be[b];

	if (pong_queued(g, b, now))
		return true;
	if (now - be->ping_sent_ns > HEALTH_HOLD_MAX * interval)
		return false;
	if (still_heard(g, b, now, interval))
		return true;
	/* a direct answer holds the check as long as a PONG would have */
	if (be->answered_ns && now - be->answered_ns <= HEALTH_MISSES * interval)
		return true;
	return ask_directly(g, b, interval);
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
			be->direct_running = false;
			continue;
		}
		if (paused && be->ping_sent_ns)
			be->ping_sent_ns = be->heard_ns = now;
		if (paused && be->answered_ns)
			be->answered_ns = now;
		if (paused && be->unready_since_ns)
			be->unready_since_ns = now;
		if (be->ping_sent_ns)
			listen_for(g, b, now);
		if (be->ping_sent_ns && now - be->ping_sent_ns > HEALTH_MISSES * interval) {
			if (!check_held(g, b, now, interval))
				eject_silent(g, b, now, interval);
			continue;
		}
		if (be->unready_since_ns && now - be->unready_since_ns > HEALTH_MISSES * interval) {
			/* the answer waiting may say it is ready */
			if (pong_queued(g, b, now))
				continue;
			if (!unready_waits(g, b, now, interval)) {
				snprintf(why, sizeof(why), "reported not ready for %llu ms",
					 (unsigned long long)(HEALTH_MISSES * interval / 1000000));
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
