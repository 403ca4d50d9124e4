// SPDX-License-Identifier: MIT
/*
 * The restarted controller's first read of the kept punt socket
 * (user/kvspliced/fdstore.c, gw_punt_resync): the controller that died may
 * have read the start of a frame, so what is there may begin mid-frame. It
 * must start at the next whole frame, never at a frame header that a
 * client wrote into its own prompt (one naming a client it does not hold,
 * or whose frames do not run to the end of what was read).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "codec.h"
#include "fdstore.h"

#define MAXP 4096

static const uint64_t cookies[] = { 5, 7, 9 }; /* sorted */

static void put_request(struct kvs_buf *b, uint64_t conn, const void *payload, uint32_t len)
{
	struct kvs_msg m = { .type = KVS_T_REQUEST,
			     .req_id = 42,
			     .prefix_len = 0,
			     .max_tokens = 8,
			     .gw_conn = conn };

	assert_int_equal(kvs_put_frame(b, &m, payload, len), 0);
}

static void put_ping(struct kvs_buf *b, uint64_t conn)
{
	struct kvs_msg m = { .type = KVS_T_PING, .req_id = 1, .gw_conn = conn };

	assert_int_equal(kvs_put_frame(b, &m, NULL, 0), 0);
}

static size_t resync(const struct kvs_buf *b, size_t cut)
{
	return gw_punt_resync(kvs_buf_head(b) + cut, b->len - cut, cookies, 3, MAXP);
}

/* Frames of 200, 64 and 300 bytes of payload after a cut at every offset
 * of the first: the next frame's start. */
static void cut_anywhere_in_the_first(void **state)
{
	uint8_t payload[300];
	struct kvs_buf b;
	size_t first;

	(void)state;
	memset(payload, 'a', sizeof(payload));
	kvs_buf_init(&b, 0);
	put_request(&b, 5, payload, 200);
	first = b.len;
	put_ping(&b, 7);
	put_request(&b, 9, payload, 300);
	assert_int_equal(resync(&b, 0), 0); /* at a frame: nothing skipped */
	for (size_t cut = 1; cut < first; cut++)
		assert_int_equal(resync(&b, cut), first - cut);
	kvs_buf_free(&b);
}

/* The last frame still arriving: a whole one before it is still found. */
static void last_frame_unfinished(void **state)
{
	uint8_t payload[300];
	struct kvs_buf b;
	size_t first;

	(void)state;
	memset(payload, 'b', sizeof(payload));
	kvs_buf_init(&b, 0);
	put_request(&b, 5, payload, 100);
	first = b.len;
	put_request(&b, 7, payload, 300);
	b.len -= 150; /* half of the second frame's payload read so far */
	assert_int_equal(resync(&b, 10), first - 10);
	b.len = first + 10; /* the second's header: 10 bytes so far */
	assert_int_equal(resync(&b, 10), first - 10);
	kvs_buf_free(&b);
}

/* A prompt holding a frame header: one naming a client we do not hold, and
 * one naming a client we do but whose length does not fit what follows,
 * are passed over for the real next frame. */
static void forged_headers_passed_over(void **state)
{
	struct kvs_buf fake, b;
	uint8_t payload[600];
	size_t first, at;

	(void)state;
	memset(payload, 'c', sizeof(payload));
	kvs_buf_init(&fake, 0);
	put_ping(&fake, 1234); /* nobody's */
	at = 100;
	memcpy(payload + at, kvs_buf_head(&fake), fake.len);
	kvs_buf_consume(&fake, fake.len);
	put_request(&fake, 7, payload, 50); /* a known client, 50 bytes claimed */
	memcpy(payload + 300, kvs_buf_head(&fake), KVS_HDR_LEN);
	kvs_buf_free(&fake);

	kvs_buf_init(&b, 0);
	put_request(&b, 5, payload, sizeof(payload));
	first = b.len;
	put_ping(&b, 9);
	assert_int_equal(resync(&b, 20), first - 20);
	kvs_buf_free(&b);
}

/* Nothing that parses: all of it skipped. */
static void garbage_skipped(void **state)
{
	uint8_t junk[500];

	(void)state;
	memset(junk, 0x5a, sizeof(junk));
	assert_int_equal(gw_punt_resync(junk, sizeof(junk), cookies, 3, MAXP), sizeof(junk));
	assert_int_equal(gw_punt_resync(junk, 0, cookies, 3, MAXP), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cut_anywhere_in_the_first),
		cmocka_unit_test(last_frame_unfinished),
		cmocka_unit_test(forged_headers_passed_over),
		cmocka_unit_test(garbage_skipped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
