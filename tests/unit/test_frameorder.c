// SPDX-License-Identifier: MIT
/* kvs_frames_by_client (user/core/frameorder.c): a backend's queued answers
 * grouped by client, each client's in the order queued. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "codec.h"
#include "frameorder.h"

/* Appends a CHUNK of request req for client conn, its payload "req:seq". */
static void chunk(struct kvs_buf *b, uint64_t conn, uint64_t req, int seq)
{
	struct kvs_msg m = { .type = KVS_T_CHUNK, .req_id = req, .gw_conn = conn };
	char text[32];
	int n = snprintf(text, sizeof(text), "%llu:%d", (unsigned long long)req, seq);

	assert_int_equal(kvs_put_frame(b, &m, text, (uint32_t)n), 0);
}

/* The frames in b as "conn/req:seq" words. */
static void words(const struct kvs_buf *b, char *out, size_t cap)
{
	struct kvs_buf v = *b;
	const uint8_t *f;
	struct kvs_msg m;

	out[0] = 0;
	while (kvs_next_frame(&v, 1 << 20, &m, &f) == 1) {
		size_t at = strlen(out);

		snprintf(out + at, cap - at, "%s%llu/%.*s", at ? " " : "",
			 (unsigned long long)m.gw_conn, (int)m.payload_len, f + KVS_HDR_LEN);
		v.off += KVS_HDR_LEN + m.payload_len;
		v.len -= KVS_HDR_LEN + m.payload_len;
	}
}

static void groups_each_client_in_order(void **state)
{
	struct kvs_buf b;
	char got[512];

	(void)state;
	kvs_buf_init(&b, 0);
	/* a decode step's tokens as an adapter receives them: interleaved */
	chunk(&b, 7, 1, 0);
	chunk(&b, 3, 2, 0);
	chunk(&b, 7, 4, 0);
	chunk(&b, 3, 2, 1);
	chunk(&b, 7, 1, 1);
	chunk(&b, 9, 5, 0);
	chunk(&b, 7, 4, 1);
	assert_int_equal(kvs_frames_by_client(kvs_buf_head(&b), b.len), 7);
	words(&b, got, sizeof(got));
	assert_string_equal(got, "3/2:0 3/2:1 7/1:0 7/4:0 7/1:1 7/4:1 9/5:0");
	kvs_buf_free(&b);
}

static void leaves_what_is_not_whole_frames(void **state)
{
	struct kvs_buf b;
	uint8_t copy[256];
	size_t len;

	(void)state;
	kvs_buf_init(&b, 0);
	chunk(&b, 7, 1, 0);
	chunk(&b, 3, 2, 0);
	len = b.len;
	memcpy(copy, kvs_buf_head(&b), len);
	/* a frame cut short (a send that took part of the queue) */
	assert_int_equal(kvs_frames_by_client(kvs_buf_head(&b), len - 1), -EINVAL);
	assert_memory_equal(kvs_buf_head(&b), copy, len);
	/* not at a frame's start */
	assert_int_equal(kvs_frames_by_client(kvs_buf_head(&b) + 1, len - 1), -EINVAL);
	assert_memory_equal(kvs_buf_head(&b), copy, len);
	/* lengths that tile the queue, but no frame's start where one should
	 * be (a queue read from the wrong offset): untouched */
	kvs_buf_head(&b)[KVS_HDR_LEN + 3] ^= 0xff; /* the second frame's magic: after "1:0" */
	memcpy(copy, kvs_buf_head(&b), len);
	assert_int_equal(kvs_frames_by_client(kvs_buf_head(&b), len), -EINVAL);
	assert_memory_equal(kvs_buf_head(&b), copy, len);
	/* nothing, or one frame: nothing to do */
	assert_int_equal(kvs_frames_by_client(kvs_buf_head(&b), 0), 0);
	assert_int_equal(kvs_frames_by_client(kvs_buf_head(&b), KVS_HDR_LEN + 3), 1);
	kvs_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(groups_each_client_in_order),
		cmocka_unit_test(leaves_what_is_not_whole_frames),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
