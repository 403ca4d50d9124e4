// SPDX-License-Identifier: MIT
/*
 * The slow path's decision (user/kvspliced/decide.c) on the in-memory data
 * path: a cold prompt is placed and stays placed, a prompt sharing its
 * prefix follows it, a backend that is not up or at its limit is passed
 * over, and with none left the client is refused with the right code
 * (busy when backends are full, no_backend when none is up). The request
 * leaves with its backend and its client stamped in the header.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend.h"
#include "codec.h"
#include "decide.h"
#include "kpath.h"
#include "log.h"
#include "sendq.h"
#include "upath.h"

#define PROMPT 32000 /* bytes: 8,000 tokens */

struct fixture {
	struct gw g;
	struct gw_conn client;
	uint8_t prompt[PROMPT];
};

static int setup(void **state)
{
	static struct fixture f;
	struct kvs_policy_params pp;
	const char *none[KVS_MAX_BACKENDS] = { NULL };
	struct gw *g = &f.g;

	memset(&f, 0, sizeof(f));
	kvs_log_init("test_decide", KVS_LOG_WARN);
	gw_config_defaults(&g->live);
	g->cfg = &g->live;
	g->live.max_outstanding = 4;
	g->kpath = &gw_kpath_ops;
	g->upath = &gw_upath_ops;
	g->inject_fd = -1;
	gw_sendq_init(&g->inject_q, 1 << 20);
	g->hashes = calloc(KVS_POLICY_MAX_BLOCKS, sizeof(*g->hashes));
	if (!g->hashes || io_uring_queue_init(64, &g->ring, 0) || kvs_dp_open_memory(&g->dp) ||
	    kvs_idmap_init(&g->clients, 16))
		return -1;
	kvs_policy_defaults(&pp);
	pp.nbackends = 1;
	if (kvs_policy_init(&g->policy, &pp, none))
		return -1;
	f.client.cookie = 77;
	f.client.role = KVS_ROLE_CLIENT;
	for (size_t i = 0; i < PROMPT; i++)
		f.prompt[i] = (uint8_t)('a' + (i * 7 + i / 64) % 26);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	kvs_policy_free(&f->g.policy);
	kvs_idmap_free(&f->g.clients);
	kvs_dp_close(&f->g.dp, false);
	gw_sendq_free(&f->g.inject_q);
	io_uring_queue_exit(&f->g.ring);
	free(f->g.hashes);
	return 0;
}

static void add(struct gw *g, const char *name)
{
	struct kvs_addr a;

	assert_int_equal(kvs_parse_addr(name, &a), 0);
	assert_true(gw_backend_add(g, &a) >= 0);
}

/* Decides for a request whose prompt is the fixture's first len bytes;
 * returns the backend, or -1 if refused. */
static int decide(struct fixture *f, uint32_t len, uint64_t req)
{
	struct kvs_msg m = {
		.type = KVS_T_REQUEST, .req_id = req, .payload_len = len, .max_tokens = 100
	};
	uint32_t b;

	if (gw_decide(&f->g, &f->client, &m, f->prompt, false, &b))
		return -1;
	assert_int_equal(kvs_gw_backend(m.gw_backend), b);
	assert_true(kvs_gw_charge(m.gw_backend) > 0);
	assert_int_equal(m.gw_conn, f->client.cookie);
	return (int)b;
}

/* The ERROR queued for the client last: its status. */
static uint16_t last_error(struct gw *g)
{
	struct kvs_buf *b = &g->inject_q.out[g->inject_q.cur ^ 1];
	const uint8_t *frame;
	struct kvs_msg m = { 0 };

	if (!b->len)
		b = gw_sendq_buf(&g->inject_q);
	while (kvs_next_frame(b, 1 << 20, &m, &frame) > 0)
		kvs_buf_consume(b, KVS_HDR_LEN + (size_t)m.payload_len);
	assert_int_equal(m.type, KVS_T_ERROR);
	assert_int_equal(m.gw_conn, 77);
	return m.status;
}

static void place_and_follow(void **state)
{
	struct fixture *f = *state;
	int first, again, deeper;

	add(&f->g, "127.0.0.1:9001");
	add(&f->g, "127.0.0.1:9002");
	add(&f->g, "127.0.0.1:9003");
	first = decide(f, 24000, 1);
	assert_true(first >= 0);
	assert_int_equal(f->g.ctl.decided_cold, 1);
	/* The same prompt, and one that extends it: where its prefix is. */
	again = decide(f, 24000, 2);
	deeper = decide(f, PROMPT, 3);
	assert_int_equal(again, first);
	assert_int_equal(deeper, first);
	assert_int_equal(f->g.ctl.decided_prefix, 2);
}

static void pass_over_unavailable(void **state)
{
	struct fixture *f = *state;
	int first = decide(f, PROMPT, 4), other;

	/* Down: its prefix goes elsewhere. */
	gw_backend_down(&f->g, (uint32_t)first, "test");
	other = decide(f, PROMPT, 5);
	assert_true(other >= 0);
	assert_int_not_equal(other, first);
	/* At --max-outstanding: passed over too, for the one left. */
	f->g.dp.backends[other].outstanding = f->g.cfg->max_outstanding;
	assert_int_equal(decide(f, PROMPT, 6), 3 - first - other);
}

static void refuse_when_none(void **state)
{
	struct fixture *f = *state;
	uint64_t refused = f->g.ctl.no_backend;

	/* Every backend up is full: busy. */
	for (uint32_t b = 0; b < f->g.nslots; b++)
		f->g.dp.backends[b].outstanding = f->g.cfg->max_outstanding;
	assert_int_equal(decide(f, PROMPT, 7), -1);
	assert_int_equal(last_error(&f->g), KVS_E_BUSY);
	/* None up: no_backend. */
	for (uint32_t b = 0; b < f->g.nslots; b++)
		gw_backend_down(&f->g, b, "test");
	assert_int_equal(decide(f, PROMPT, 8), -1);
	assert_int_equal(last_error(&f->g), KVS_E_NO_BACKEND);
	assert_int_equal(f->g.ctl.no_backend, refused + 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(place_and_follow),
		cmocka_unit_test(pass_over_unavailable),
		cmocka_unit_test(refuse_when_none),
	};

	/* One fleet through all three, in order. */
	return cmocka_run_group_tests(tests, setup, teardown);
}
