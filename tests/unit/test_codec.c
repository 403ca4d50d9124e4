// SPDX-License-Identifier: MIT
/* KVS1 codec: the byte-level test vectors of docs/PROTOCOL.md, every
 * validation rule, and stream framing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "codec.h"

/* The vectors as PROTOCOL.md prints them, not reflowed. */
/* clang-format off */
/* docs/PROTOCOL.md, vector 1: a REQUEST with a 5-byte prompt. */
static const uint8_t vec_request[] = {
	0x4b, 0x56, 0x53, 0x31, 0x01, 0x01, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x05, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x00, 0x00, 0x00, 0x07, 0x00,
	0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 'h',  'e',  'l',  'l',  'o',
};

/* docs/PROTOCOL.md, vector 2: the END frame of request 1 for client 42. */
static const uint8_t vec_end[] = {
	0x4b, 0x56, 0x53, 0x31, 0x01, 0x03, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x2a,
	/* payload: prompt 2000, cached 1536, output 8, queue 100 us,
	 * prefill 2500 us, decode 800 us, backend 9, reserved */
	0x00, 0x00, 0x07, 0xd0, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00,
	0x64, 0x00, 0x00, 0x09, 0xc4, 0x00, 0x00, 0x03, 0x20, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00,
	0x00, 0x00,
};

/* docs/PROTOCOL.md, vector 3: ERROR bad_magic for request 0 ("bad"). */
static const uint8_t vec_error[] = {
	0x4b, 0x56, 0x53, 0x31, 0x01, 0x04, 0x00, 0x00, 0x00, 0x40, 0x00, 0x01, 0x00, 0x00, 0x00,
	0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 'b',  'a',  'd',
};
/* docs/PROTOCOL.md, vector 4: a CANCEL of the request of vector 1, as a
 * backend receives it (client connection 42, backend index 3). */
static const uint8_t vec_cancel[] = {
	0x4b, 0x56, 0x53, 0x31, 0x01, 0x07, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x2a,
};
/* clang-format on */

static void encode_request_matches_vector(void **state)
{
	struct kvs_msg m = {
		.type = KVS_T_REQUEST,
		.req_id = 0x0102030405060708ull,
		.cache_salt = 0x1122334455667788ull,
		.model_id = 7,
		.prefix_len = 4,
		.max_tokens = 16,
	};
	struct kvs_buf b;

	(void)state;
	kvs_buf_init(&b, 0);
	assert_int_equal(kvs_put_frame(&b, &m, "hello", 5), 0);
	assert_int_equal(b.len, sizeof(vec_request));
	assert_memory_equal(kvs_buf_head(&b), vec_request, sizeof(vec_request));
	kvs_buf_free(&b);
}

static void decode_request_vector(void **state)
{
	struct kvs_msg m;

	(void)state;
	assert_int_equal(kvs_hdr_decode(vec_request, 1024, &m), KVS_E_OK);
	assert_int_equal(m.type, KVS_T_REQUEST);
	assert_int_equal(m.payload_len, 5);
	assert_true(m.req_id == 0x0102030405060708ull);
	assert_true(m.cache_salt == 0x1122334455667788ull);
	assert_int_equal(m.model_id, 7);
	assert_int_equal(m.prefix_len, 4);
	assert_int_equal(m.max_tokens, 16);
	assert_int_equal(m.gw_backend, 0);
	assert_true(m.gw_conn == 0);
}

static void end_vector_roundtrip(void **state)
{
	struct kvs_end_info e = {
		.prompt_tokens = 2000, .cached_tokens = 1536, .output_tokens = 8, .queue_us = 100,
		.prefill_us = 2500, .decode_us = 800, .backend_id = 9,
	}, d;
	uint8_t payload[sizeof(struct kvs_end)];
	struct kvs_msg m = { .type = KVS_T_END, .req_id = 1, .gw_conn = 42 };
	struct kvs_buf b;

	(void)state;
	kvs_buf_init(&b, 0);
	kvs_end_encode(&e, payload);
	assert_int_equal(kvs_put_frame(&b, &m, payload, sizeof(payload)), 0);
	assert_int_equal(b.len, sizeof(vec_end));
	assert_memory_equal(kvs_buf_head(&b), vec_end, sizeof(vec_end));
	assert_int_equal(kvs_hdr_decode(vec_end, 1024, &m), KVS_E_OK);
	kvs_end_decode(vec_end + KVS_HDR_LEN, &d);
	assert_memory_equal(&d, &e, sizeof(e));
	kvs_buf_free(&b);
}

static void error_vector(void **state)
{
	struct kvs_buf b;
	struct kvs_msg m;

	(void)state;
	kvs_buf_init(&b, 0);
	assert_int_equal(kvs_put_error(&b, 0, 0, KVS_E_BAD_MAGIC, "bad"), 0);
	assert_memory_equal(kvs_buf_head(&b), vec_error, sizeof(vec_error));
	assert_int_equal(kvs_hdr_decode(vec_error, 1024, &m), KVS_E_OK);
	assert_int_equal(m.status, KVS_E_BAD_MAGIC);
	kvs_buf_free(&b);
}

static void cancel_vector(void **state)
{
	struct kvs_msg m = {
		.type = KVS_T_CANCEL,
		.req_id = 0x0102030405060708ull,
		.gw_backend = 3,
		.gw_conn = 42,
	};
	uint8_t h[KVS_HDR_LEN];
	struct kvs_buf b;

	(void)state;
	kvs_buf_init(&b, 0);
	assert_int_equal(kvs_put_frame(&b, &m, NULL, 0), 0);
	assert_int_equal(b.len, sizeof(vec_cancel));
	assert_memory_equal(kvs_buf_head(&b), vec_cancel, sizeof(vec_cancel));
	memset(&m, 0, sizeof(m));
	assert_int_equal(kvs_hdr_decode(vec_cancel, 1024, &m), KVS_E_OK);
	assert_int_equal(m.type, KVS_T_CANCEL);
	assert_int_equal(m.payload_len, 0);
	assert_true(m.req_id == 0x0102030405060708ull);
	assert_int_equal(m.gw_backend, 3);
	assert_true(m.gw_conn == 42);
	/* Empty, no status: a CANCEL with a payload or a status is refused. */
	memcpy(h, vec_cancel, sizeof(h));
	h[15] = 1;
	assert_int_equal(kvs_hdr_decode(h, 1024, &m), KVS_E_BAD_FIELD);
	memcpy(h, vec_cancel, sizeof(h));
	h[11] = KVS_E_CANCELLED;
	assert_int_equal(kvs_hdr_decode(h, 1024, &m), KVS_E_BAD_FIELD);
	/* flags belong to REQUESTs only */
	memcpy(h, vec_cancel, sizeof(h));
	h[7] = KVS_F_JSON;
	assert_int_equal(kvs_hdr_decode(h, 1024, &m), KVS_E_BAD_FLAGS);
	kvs_buf_free(&b);
}

/* Each rule, by corrupting one field of the request vector. */
static int decode_with(size_t off, uint8_t val, uint32_t max_payload)
{
	uint8_t h[KVS_HDR_LEN];
	struct kvs_msg m;

	memcpy(h, vec_request, sizeof(h));
	h[off] = val;
	return kvs_hdr_decode(h, max_payload, &m);
}

static void validation_rules(void **state)
{
	(void)state;
	assert_int_equal(decode_with(0, 0x4c, 1024), KVS_E_BAD_MAGIC);
	assert_int_equal(decode_with(3, 0x32, 1024), KVS_E_BAD_MAGIC);
	assert_int_equal(decode_with(4, 2, 1024), KVS_E_BAD_VERSION);
	assert_int_equal(decode_with(4, 0, 1024), KVS_E_BAD_VERSION);
	assert_int_equal(decode_with(5, 0, 1024), KVS_E_BAD_TYPE);
	assert_int_equal(decode_with(5, KVS_T_MAX + 1, 1024), KVS_E_BAD_TYPE);
	/* a CANCEL is empty: this one has the request's payload */
	assert_int_equal(decode_with(5, KVS_T_CANCEL, 1024), KVS_E_BAD_FIELD);
	assert_int_equal(decode_with(5, 0xff, 1024), KVS_E_BAD_TYPE);
	/* flags: known bits on a REQUEST, CHAT and STREAM only with JSON */
	assert_int_equal(decode_with(7, KVS_F_JSON, 1024), KVS_E_OK);
	assert_int_equal(decode_with(7, KVS_F_KNOWN, 1024), KVS_E_OK);
	assert_int_equal(decode_with(7, 0x8, 1024), KVS_E_BAD_FLAGS);
	assert_int_equal(decode_with(7, KVS_F_CHAT, 1024), KVS_E_BAD_FLAGS);
	assert_int_equal(decode_with(7, KVS_F_STREAM, 1024), KVS_E_BAD_FLAGS);
	assert_int_equal(decode_with(6, 0x80, 1024), KVS_E_BAD_FLAGS);
	assert_int_equal(decode_with(9, 0x41, 1024), KVS_E_BAD_HDR_LEN);
	assert_int_equal(decode_with(8, 0x01, 1024), KVS_E_BAD_HDR_LEN);
	/* payload_len 5 > max 4 */
	assert_int_equal(decode_with(15, 5, 4), KVS_E_TOO_LARGE);
	assert_int_equal(decode_with(12, 0x80, 1u << 30), KVS_E_TOO_LARGE);
	/* prefix_len 6 > payload_len 5 */
	assert_int_equal(decode_with(47, 6, 1024), KVS_E_BAD_FIELD);
	/* a REQUEST may not carry an error status */
	assert_int_equal(decode_with(11, 1, 1024), KVS_E_BAD_FIELD);
	/* exact limits pass */
	assert_int_equal(decode_with(15, 5, 5), KVS_E_OK);
	assert_int_equal(decode_with(47, 5, 1024), KVS_E_OK);
}

static void type_rules(void **state)
{
	struct kvs_msg m = { .type = KVS_T_END, .payload_len = 31 };

	(void)state;
	assert_int_equal(kvs_msg_check(&m), KVS_E_BAD_FIELD);
	m.payload_len = 32;
	assert_int_equal(kvs_msg_check(&m), KVS_E_OK);
	m = (struct kvs_msg){ .type = KVS_T_PONG, .payload_len = 24 };
	assert_int_equal(kvs_msg_check(&m), KVS_E_OK);
	m.payload_len = 0;
	assert_int_equal(kvs_msg_check(&m), KVS_E_BAD_FIELD);
	m = (struct kvs_msg){ .type = KVS_T_PING, .payload_len = 1 };
	assert_int_equal(kvs_msg_check(&m), KVS_E_BAD_FIELD);
	m = (struct kvs_msg){ .type = KVS_T_ERROR, .status = 0 };
	assert_int_equal(kvs_msg_check(&m), KVS_E_BAD_FIELD);
	m.status = KVS_E_MAX + 1;
	assert_int_equal(kvs_msg_check(&m), KVS_E_BAD_FIELD);
	m.status = KVS_E_BUSY;
	assert_int_equal(kvs_msg_check(&m), KVS_E_OK);
	m.status = KVS_E_REJECTED; /* the last code */
	assert_int_equal(kvs_msg_check(&m), KVS_E_OK);
	m = (struct kvs_msg){ .type = KVS_T_CANCEL };
	assert_int_equal(kvs_msg_check(&m), KVS_E_OK);
	m.payload_len = 1;
	assert_int_equal(kvs_msg_check(&m), KVS_E_BAD_FIELD);
}

/* A PONG's instance is in max_tokens' place (bytes 48-51, big-endian),
 * which no rule checks on a PONG: any value passes, 0 (an old backend's)
 * included, and the payload stays 24 bytes. */
static void pong_instance(void **state)
{
	struct kvs_msg m = { .type = KVS_T_PONG,
			     .req_id = 7,
			     .instance = 0xdeadbeef,
			     .payload_len = sizeof(struct kvs_load) },
		       d;
	uint8_t h[KVS_HDR_LEN];

	(void)state;
	kvs_hdr_encode(&m, h);
	assert_int_equal(h[KVS_OFF_INSTANCE], 0xde);
	assert_int_equal(h[KVS_OFF_INSTANCE + 3], 0xef);
	assert_int_equal(kvs_hdr_decode(h, 1024, &d), KVS_E_OK);
	assert_int_equal(d.instance, 0xdeadbeef);
	assert_int_equal(d.max_tokens, 0xdeadbeef); /* the same field */
	m.instance = 0;
	kvs_hdr_encode(&m, h);
	assert_int_equal(kvs_hdr_decode(h, 1024, &d), KVS_E_OK);
	assert_int_equal(d.instance, 0);
}

/* Frames split at every byte boundary, and several per buffer. */
static void framing(void **state)
{
	struct kvs_buf b;
	const uint8_t *frame;
	struct kvs_msg m;
	size_t i;
	int frames = 0;

	(void)state;
	kvs_buf_init(&b, 0);
	for (i = 0; i < sizeof(vec_request); i++) {
		assert_int_equal(kvs_next_frame(&b, 1024, &m, &frame), 0);
		assert_int_equal(kvs_buf_append(&b, &vec_request[i], 1), 0);
	}
	assert_int_equal(kvs_next_frame(&b, 1024, &m, &frame), 1);
	assert_memory_equal(frame + KVS_HDR_LEN, "hello", 5);
	kvs_buf_consume(&b, KVS_HDR_LEN + m.payload_len);
	assert_int_equal(b.len, 0);

	assert_int_equal(kvs_buf_append(&b, vec_end, sizeof(vec_end)), 0);
	assert_int_equal(kvs_buf_append(&b, vec_request, sizeof(vec_request)), 0);
	assert_int_equal(kvs_buf_append(&b, vec_error, 10), 0); /* partial third */
	while (kvs_next_frame(&b, 1024, &m, &frame) == 1) {
		kvs_buf_consume(&b, KVS_HDR_LEN + m.payload_len);
		frames++;
	}
	assert_int_equal(frames, 2);
	assert_int_equal(b.len, 10);
	kvs_buf_free(&b);
}

static void framing_rejects_garbage(void **state)
{
	uint8_t junk[KVS_HDR_LEN];
	struct kvs_buf b;
	const uint8_t *frame;
	struct kvs_msg m;

	(void)state;
	memset(junk, 'A', sizeof(junk));
	kvs_buf_init(&b, 0);
	assert_int_equal(kvs_buf_append(&b, junk, sizeof(junk)), 0);
	assert_int_equal(kvs_next_frame(&b, 1024, &m, &frame), -KVS_E_BAD_MAGIC);
	kvs_buf_free(&b);
}

static void buf_limit(void **state)
{
	uint8_t x[100] = { 0 };
	struct kvs_buf b;

	(void)state;
	kvs_buf_init(&b, 150);
	assert_int_equal(kvs_buf_append(&b, x, 100), 0);
	assert_int_equal(kvs_buf_append(&b, x, 100), -ENOBUFS);
	kvs_buf_consume(&b, 60);
	assert_int_equal(kvs_buf_append(&b, x, 100), 0); /* slides, stays in cap */
	assert_int_equal(b.len, 140);
	kvs_buf_free(&b);
}

static void names(void **state)
{
	(void)state;
	assert_string_equal(kvs_status_name(KVS_E_BUSY), "busy");
	assert_string_equal(kvs_status_name(999), "unknown");
	assert_string_equal(kvs_type_name(KVS_T_PONG), "pong");
	assert_string_equal(kvs_type_name(0), "unknown");
	assert_string_equal(kvs_type_name(KVS_T_CANCEL), "cancel");
	assert_string_equal(kvs_status_name(KVS_E_CANCELLED), "cancelled");
	assert_string_equal(kvs_status_name(KVS_E_REJECTED), "rejected");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(encode_request_matches_vector),
		cmocka_unit_test(decode_request_vector),
		cmocka_unit_test(end_vector_roundtrip),
		cmocka_unit_test(error_vector),
		cmocka_unit_test(cancel_vector),
		cmocka_unit_test(validation_rules),
		cmocka_unit_test(type_rules),
		cmocka_unit_test(pong_instance),
		cmocka_unit_test(framing),
		cmocka_unit_test(framing_rejects_garbage),
		cmocka_unit_test(buf_limit),
		cmocka_unit_test(names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
