// SPDX-License-Identifier: MIT
/*
 * Backend slots (user/kvspliced/backend.c) as a state machine, on the
 * controller's in-memory data path (no BPF, no sockets: connecting needs
 * nothing there): added, drained and back, removed when idle or at the
 * drain deadline, down with a doubling back-off and retried, on probation
 * after an ejection, and a new list applied as a reload does. What the
 * kernel would see of each is checked in the backends map's records.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "backend.h"
#include "decide.h"
#include "kpath.h"
#include "log.h"
#include "upath.h"

struct fixture {
	struct gw g;
};

static int setup(void **state)
{
	static struct fixture f;
	struct kvs_policy_params pp;
	const char *none[KVS_MAX_BACKENDS] = { NULL };
	struct gw *g = &f.g;

	memset(&f, 0, sizeof(f));
	kvs_log_init("test_backend", KVS_LOG_WARN);
	gw_config_defaults(&g->live);
	g->cfg = &g->live;
	g->live.drain_timeout_ms = 1000;
	g->kpath = &gw_kpath_ops;
	g->upath = &gw_upath_ops;
	g->listen_fd = g->inject_fd = g->ho_fd = g->metrics_fd = g->control_fd = -1;
	if (kvs_dp_open_memory(&g->dp) || kvs_idmap_init(&g->clients, 16))
		return -1;
	kvs_policy_defaults(&pp);
	pp.nbackends = 1;
	pp.index_blocks = 1024;
	if (kvs_policy_init(&g->policy, &pp, none))
		return -1;
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	kvs_policy_free(&f->g.policy);
	kvs_idmap_free(&f->g.clients);
	kvs_dp_close(&f->g.dp, false);
	return 0;
}

static int add(struct gw *g, const char *name)
{
	struct kvs_addr a;

	assert_int_equal(kvs_parse_addr(name, &a), 0);
	return gw_backend_add(g, &a);
}

/* What the kernel reads of backend b. */
static uint32_t kstate(struct gw *g, uint32_t b)
{
	return g->dp.backends[b].state;
}

static void add_find_drain(void **state)
{
	struct gw *g = &((struct fixture *)*state)->g;

	assert_int_equal(add(g, "127.0.0.1:9001"), 0);
	assert_int_equal(add(g, "127.0.0.1:9002"), 1);
	assert_int_equal(add(g, "127.0.0.1:9001"), -EEXIST);
	assert_int_equal(g->nslots, 2);
	assert_int_equal(gw_backend_find(g, "127.0.0.1:9002"), 1);
	assert_int_equal(gw_backend_find(g, "127.0.0.1:9009"), -ENOENT);
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_UP);
	assert_int_equal(kstate(g, 0), KVS_BE_UP);
	assert_int_equal(g->dp.backends[1].addr.port, 9002);

	gw_backend_drain(g, 0, true);
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_DRAINING);
	assert_int_equal(kstate(g, 0), KVS_BE_DRAINING);
	gw_backend_drain(g, 0, false);
	assert_int_equal(kstate(g, 0), KVS_BE_UP);

	/* A PONG saying its server cannot serve: no new work at once, in the
	 * kernel too, and why; draining wins the state, the reason stays. */
	gw_backend_readiness(g, 0, false);
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_NOT_READY);
	assert_int_equal(kstate(g, 0), KVS_BE_NOT_READY);
	assert_string_equal(g->dp.backends[0].reason, "its server says it is not ready");
	gw_backend_drain(g, 0, true);
	assert_int_equal(kstate(g, 0), KVS_BE_DRAINING);
	assert_string_equal(g->dp.backends[0].reason, "its server says it is not ready");
	gw_backend_drain(g, 0, false);
	gw_backend_readiness(g, 0, true);
	assert_int_equal(kstate(g, 0), KVS_BE_UP);
	assert_string_equal(g->dp.backends[0].reason, "");
}

static void remove_when_idle_or_at_deadline(void **state)
{
	struct gw *g = &((struct fixture *)*state)->g;
	uint64_t now = kvs_now_ns();
	struct kvs_feedback miss = { .predicted = 100000, .mispredicted = 100000 };
	uint32_t size = kvs_policy_index_blocks(&g->policy, 1);

	/* Its index shrunk by the reports (its cache was small)... */
	assert_int_equal(kvs_policy_feedback(&g->policy, 1, &miss), 1);
	assert_true(kvs_policy_index_blocks(&g->policy, 1) < size);
	/* Idle: gone on the next tick, its slot free for the next add. */
	gw_backend_remove(g, 1);
	assert_int_equal(gw_backend_state(g, 1), KVS_BE_REMOVING);
	assert_int_equal(kstate(g, 1), KVS_BE_REMOVING);
	gw_backends_tick(g, now);
	assert_int_equal(gw_backend_state(g, 1), KVS_BE_ABSENT);
	assert_int_equal(gw_backend_find(g, "127.0.0.1:9002"), -ENOENT);
	assert_int_equal(g->dp.backends[1].addr.port, 0);
	assert_int_equal(add(g, "127.0.0.1:9003"), 1);
	/* ... which says nothing of the next backend's in the slot */
	assert_int_equal(kvs_policy_index_blocks(&g->policy, 1), size);

	/* Busy: it stays until nothing is in flight, or the deadline. */
	g->dp.backends[1].outstanding = 3;
	gw_backend_remove(g, 1);
	gw_backends_tick(g, now);
	assert_int_equal(gw_backend_state(g, 1), KVS_BE_REMOVING);
	/* Undrained while removing: the removal is called off. */
	gw_backend_drain(g, 1, false);
	gw_backends_tick(g, now + 2000000000ull);
	assert_int_equal(gw_backend_state(g, 1), KVS_BE_UP);
	gw_backend_remove(g, 1);
	gw_backends_tick(g, g->be[1].remove_deadline_ns);
	assert_int_equal(gw_backend_state(g, 1), KVS_BE_ABSENT);
}

static void down_backoff_retry_probation(void **state)
{
	struct gw *g = &((struct fixture *)*state)->g;
	struct gw_backend *be = &g->be[0];
	uint64_t now;
	uint32_t expect = 100;

	/* Each failure doubles the wait, up to 5 s. */
	for (int i = 0; i < 8; i++) {
		gw_backend_down(g, 0, "test");
		assert_int_equal(be->backoff_ms, expect);
		expect = expect * 2 > 5000 ? 5000 : expect * 2;
	}
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_DOWN);
	assert_int_equal(kstate(g, 0), KVS_BE_DOWN);
	now = be->retry_at_ns;
	gw_backends_tick(g, now - 1);
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_DOWN);
	gw_backends_tick(g, now);
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_UP);
	assert_int_equal(be->backoff_ms, 0);

	/* Ejected by the health check: reconnected, it is on probation while
	 * its new connections' probes run (here two, as if it had them; this
	 * fixture's data path needs none), and the kernel sends it nothing;
	 * up once both have answered. */
	be->probation = true;
	gw_backend_down(g, 0, "no PONG");
	assert_string_equal(g->dp.backends[0].reason, "no PONG");
	be->probing = 2;
	gw_publish_backend(g, 0);
	assert_false(be->up);
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_PROBATION);
	assert_int_equal(kstate(g, 0), KVS_BE_PROBATION);
	assert_int_not_equal(be->backoff_ms, 0);
	gw_backend_probed(g, 0, 0, "ready");
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_PROBATION);
	gw_backend_probed(g, 0, 0, "ready");
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_UP);
	assert_int_equal(kstate(g, 0), KVS_BE_UP);
	assert_false(be->probation);
	assert_int_equal(be->backoff_ms, 0);
	assert_string_equal(g->dp.backends[0].reason, "");

	/* A connection that answers with something else than KVS1: down,
	 * with why, said once however often it is retried. */
	be->up = false;
	be->probing = 2;
	gw_backend_probed(g, 0, -EPROTO, "HTTP/1.1 400 Bad Request");
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_DOWN);
	assert_int_equal(be->probing, 0);
	assert_true(be->said_not_kvs1);
	assert_string_equal(g->dp.backends[0].reason,
			    "not KVS1, put kvsplice-adapter in front of "
			    "it; it answered \"HTTP/1.1 400 Bad Request\"");

	/* No connection to wait for (this data path): up at its retry. */
	gw_backends_tick(g, be->retry_at_ns);
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_UP);
	assert_false(be->said_not_kvs1);
}

static void apply_list(void **state)
{
	struct gw *g = &((struct fixture *)*state)->g;
	struct kvs_addr list[2];
	uint32_t added, removed;

	/* Present: 9001 (slot 0), readmitted as a PONG would. The list: 9001
	 * and 9004. */
	g->be[0].probation = false;
	gw_publish_backend(g, 0);
	for (uint32_t b = 1; b < g->nslots; b++)
		assert_false(g->be[b].present);
	assert_int_equal(kvs_parse_addr("127.0.0.1:9004", &list[0]), 0);
	assert_int_equal(kvs_parse_addr("127.0.0.1:9001", &list[1]), 0);
	assert_int_equal(gw_backends_apply(g, list, 2, &added, &removed), 0);
	assert_int_equal(added, 1);
	assert_int_equal(removed, 0);
	assert_int_equal(gw_backend_find(g, "127.0.0.1:9004"), 1);

	/* Now only 9004: 9001 is drained, then removed. */
	assert_int_equal(gw_backends_apply(g, list, 1, &added, &removed), 0);
	assert_int_equal(added, 0);
	assert_int_equal(removed, 1);
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_REMOVING);
	/* Listed again before it went: kept. */
	assert_int_equal(gw_backends_apply(g, list, 2, &added, &removed), 0);
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_UP);
}

/* A slot filled over a map a predecessor left (a take-over, a restart):
 * its END counters are that backend's whole history, not an interval of
 * this controller's; the index correction starts counting from there. */
static void taken_over_counters(void **state)
{
	struct gw *g = &((struct fixture *)*state)->g;
	struct kvs_addr a;
	uint32_t b = g->nslots, size;

	assert_false(g->be[b].present);
	/* the hits the predecessor's index knew count as unexpected here */
	g->dp.backends[b].predicted_cached = 1000000;
	g->dp.backends[b].unexpected_cached = 1000000;
	assert_int_equal(kvs_parse_addr("127.0.0.1:9005", &a), 0);
	assert_int_equal(kvs_policy_set_backends(
				 &g->policy, (const char *const[KVS_MAX_BACKENDS]){ NULL }, b + 1),
			 0);
	gw_slot_fill(g, b, &a);
	g->nslots = b + 1;
	size = kvs_policy_index_blocks(&g->policy, b);
	gw_feedback(g);
	assert_int_equal(kvs_policy_index_blocks(&g->policy, b), size);
}

/* The outstanding work the controller sees on its ticks is the squeeze
 * kvs_policy_feedback weighs misses against: the peak over the interval,
 * even when the load has gone by the tick that corrects, and only since
 * the last correction. */
static void loaded_backend_keeps_its_index(void **state)
{
	struct gw *g = &((struct fixture *)*state)->g;
	struct kvs_backend *k = &g->dp.backends[0];
	uint32_t size = kvs_policy_index_blocks(&g->policy, 0);

	assert_true(g->be[0].present);
	/* a tick under load, too little evidence yet */
	k->outstanding_work = 1ull << 40;
	k->predicted_cached += 1000;
	k->mispredicted += 1000;
	gw_feedback(g);
	assert_int_equal(kvs_policy_index_blocks(&g->policy, 0), size);
	/* the evidence arrives after the load has gone: every prediction
	 * missed, all of it the load's doing */
	k->outstanding_work = 0;
	k->predicted_cached += 10000000;
	k->mispredicted += 10000000;
	gw_feedback(g);
	assert_int_equal(kvs_policy_index_blocks(&g->policy, 0), size);
	/* the next interval has no load: the same misses shrink it */
	k->predicted_cached += 10000000;
	k->mispredicted += 10000000;
	gw_feedback(g);
	assert_true(kvs_policy_index_blocks(&g->policy, 0) < size);
}

/* A backend only silent keeps its routes (route_gen unmoved) while it is
 * down, up to gw_silent_keep_ns; one whose cache is gone, at once. */
static void silent_keeps_routes_for_a_while(void **state)
{
	struct gw *g = &((struct fixture *)*state)->g;
	struct gw_backend *be = &g->be[0];
	uint32_t gen = g->dp.backends[0].route_gen;
	uint64_t since;

	assert_true(be->up);
	assert_true(gw_backend_err_silent(-ETIMEDOUT));
	assert_true(gw_backend_err_silent(-EHOSTUNREACH));
	assert_false(gw_backend_err_silent(-ECONNREFUSED));
	assert_false(gw_backend_err_silent(-ECONNRESET));
	gw_backend_silent(g, 0, "no PONG");
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_DOWN);
	assert_int_equal(g->dp.backends[0].route_gen, gen);
	since = be->silent_since_ns;
	assert_int_not_equal(since, 0);
	/* its probe times out: still only silent, the clock not restarted */
	be->probing = 1;
	gw_backend_probed(g, 0, -ETIMEDOUT, "no answer to a PING");
	assert_int_equal(be->silent_since_ns, since);
	/* back in time: the routes stand */
	gw_backends_tick(g, be->retry_at_ns);
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_UP);
	assert_int_equal(g->dp.backends[0].route_gen, gen);
	assert_int_equal(be->silent_since_ns, 0);

	/* silent past the bound (no retry meanwhile): withdrawn */
	gw_backend_silent(g, 0, "no PONG");
	since = be->silent_since_ns;
	be->retry_at_ns = UINT64_MAX;
	gw_backends_tick(g, since + gw_silent_keep_ns(g) - 1);
	assert_int_equal(g->dp.backends[0].route_gen, gen);
	gw_backends_tick(g, since + gw_silent_keep_ns(g));
	assert_int_not_equal(g->dp.backends[0].route_gen, gen);
	assert_int_equal(be->silent_since_ns, 0);

	/* silent, then refused (restarted): withdrawn at once */
	be->retry_at_ns = 0;
	gw_backends_tick(g, kvs_now_ns());
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_UP);
	gen = g->dp.backends[0].route_gen;
	gw_backend_silent(g, 0, "no PONG");
	assert_int_equal(g->dp.backends[0].route_gen, gen);
	be->probing = 1;
	gw_backend_probed(g, 0, -ECONNRESET, "closed the connection without answering a PING");
	assert_int_not_equal(g->dp.backends[0].route_gen, gen);
	assert_int_equal(be->silent_since_ns, 0);
	be->retry_at_ns = 0;
	gw_backends_tick(g, kvs_now_ns());
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_UP);
}

/* A PONG's instance (gw_backend_instance): the first one said is only
 * remembered, as are 0 (an old backend's) and the same one ignored; another
 * one is a restart: its routes withdrawn at once (route_gen moves on),
 * whether it stayed up (restarted between two checks: it keeps taking
 * work, and the routes to its new cache count as live) or came back from
 * silence (its kept routes no longer kept), and counted. */
static void new_instance_withdraws_routes(void **state)
{
	struct gw *g = &((struct fixture *)*state)->g;
	struct gw_backend *be = &g->be[0];
	uint32_t gen = g->dp.backends[0].route_gen;

	assert_int_equal(gw_backend_state(g, 0), KVS_BE_UP);
	assert_int_equal(be->instance, 0);
	gw_backend_instance(g, 0, 0, be->instance);
	gw_backend_instance(g, 0, 7, be->instance);
	gw_backend_instance(g, 0, 7, be->instance);
	gw_backend_instance(g, 0, 0, be->instance);
	assert_int_equal(be->instance, 7);
	assert_int_equal(be->restarts, 0);
	assert_int_equal(g->dp.backends[0].route_gen, gen);

	gw_backend_instance(g, 0, 8, be->instance);
	assert_int_not_equal(g->dp.backends[0].route_gen, gen);
	assert_int_equal(be->instance, 8);
	assert_int_equal(be->restarts, 1);
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_UP);
	assert_true(be->routes_live);

	gen = g->dp.backends[0].route_gen;
	gw_backend_silent(g, 0, "no PONG");
	assert_int_equal(g->dp.backends[0].route_gen, gen);
	assert_int_not_equal(be->silent_since_ns, 0);
	gw_backend_instance(g, 0, 9, be->instance); /* its probe's PONG, as it comes back */
	assert_int_not_equal(g->dp.backends[0].route_gen, gen);
	assert_int_equal(be->silent_since_ns, 0);
	assert_int_equal(be->restarts, 2);
	be->retry_at_ns = 0;
	gw_backends_tick(g, kvs_now_ns());
	assert_int_equal(gw_backend_state(g, 0), KVS_BE_UP);
	assert_true(be->routes_live);
}

/* An answer to a PING sent before the controller learned the backend's
 * current instance (a health PONG that waited in the punt socket while a
 * new connection's probe said the new one) may be the former instance's:
 * not a restart back to it, nor does it withdraw the new instance's
 * routes; an answer to a PING sent since is compared. */
static void late_answer_is_not_a_restart(void **state)
{
	struct gw *g = &((struct fixture *)*state)->g;
	struct gw_backend *be = &g->be[0];
	uint32_t gen, asked;
	uint64_t restarts;

	gw_backend_instance(g, 0, 7, be->instance);
	asked = be->instance; /* a health PING goes, knowing 7 */
	restarts = be->restarts;
	gw_backend_instance(g, 0, 8, be->instance); /* a probe says 8 first */
	assert_int_equal(be->restarts, restarts + 1);
	gen = g->dp.backends[0].route_gen;
	gw_backend_instance(g, 0, 7, asked); /* the PING's answer, written before */
	assert_int_equal(be->instance, 8);
	assert_int_equal(be->restarts, restarts + 1);
	assert_int_equal(g->dp.backends[0].route_gen, gen);
	assert_true(be->routes_live);
	gw_backend_instance(g, 0, 9, be->instance); /* the next check's: compared */
	assert_int_equal(be->instance, 9);
	assert_int_equal(be->restarts, restarts + 2);
	assert_int_not_equal(g->dp.backends[0].route_gen, gen);
}

static void full(void **state)
{
	struct gw *g = &((struct fixture *)*state)->g;
	char name[32];
	int r = 0;

	for (int port = 10000; r >= 0; port++) {
		snprintf(name, sizeof(name), "127.0.0.1:%d", port);
		r = add(g, name);
	}
	assert_int_equal(r, -ENOSPC);
	assert_int_equal(g->nslots, KVS_MAX_BACKENDS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(add_find_drain),
		cmocka_unit_test(remove_when_idle_or_at_deadline),
		cmocka_unit_test(down_backoff_retry_probation),
		cmocka_unit_test(apply_list),
		cmocka_unit_test(taken_over_counters),
		cmocka_unit_test(loaded_backend_keeps_its_index),
		cmocka_unit_test(silent_keeps_routes_for_a_while),
		cmocka_unit_test(new_instance_withdraws_routes),
		cmocka_unit_test(late_answer_is_not_a_restart),
		cmocka_unit_test(full),
	};

	/* One fleet through them all, in order: each starts where the last
	 * left it. */
	return cmocka_run_group_tests(tests, setup, teardown);
}
