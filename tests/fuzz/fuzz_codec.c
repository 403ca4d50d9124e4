// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the KVS1 codec: the input is a byte stream as a
 * client or backend could send it, fed to the framer in pieces whose sizes
 * come from the input itself (frames split anywhere, as TCP splits them).
 * Beyond "no crash, no sanitizer report", it checks properties:
 *  - a frame the framer accepts re-encodes to the same 64 header bytes,
 *    and decodes again to the same fields;
 *  - a rejected header yields a status in 1..KVS_E_MAX, and the framer never
 *    returns a frame longer than the bytes buffered or max_payload;
 *  - END and PONG payloads round-trip; every payload hashes without fault.
 *
 *   make fuzz                       (60 s; FUZZ_TIME=S to change)
 *   build/fuzz/fuzz_codec -runs=N tests/fuzz/corpus
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "kvsplice/hash.h"

#define MAX_PAYLOAD 4096

static void check_frame(const struct kvs_msg *m, const uint8_t *frame)
{
	uint8_t again[KVS_HDR_LEN];
	struct kvs_msg m2;
	uint64_t h[MAX_PAYLOAD / KVS_BLOCK_BYTES + 1];

	kvs_hdr_encode(m, again);
	if (memcmp(again, frame, KVS_HDR_LEN))
		abort(); /* accepted header does not survive re-encoding */
	if (kvs_hdr_decode(again, MAX_PAYLOAD, &m2) != KVS_E_OK || memcmp(m, &m2, sizeof(*m)))
		abort();
	if (m->type == KVS_T_END && m->payload_len >= sizeof(struct kvs_end)) {
		struct kvs_end_info e, e2;
		uint8_t out[sizeof(struct kvs_end)];

		kvs_end_decode(frame + KVS_HDR_LEN, &e);
		kvs_end_encode(&e, out);
		kvs_end_decode(out, &e2);
		if (memcmp(&e, &e2, sizeof(e)))
			abort();
	}
	if (m->type == KVS_T_PONG && m->payload_len >= sizeof(struct kvs_load)) {
		struct kvs_load_info l, l2;
		uint8_t out[sizeof(struct kvs_load)];

		kvs_load_decode(frame + KVS_HDR_LEN, &l);
		kvs_load_encode(&l, out);
		kvs_load_decode(out, &l2);
		if (memcmp(&l, &l2, sizeof(l)))
			abort();
	}
	kvs_prefix_hashes(m->cache_salt, frame + KVS_HDR_LEN, m->payload_len, h,
			  sizeof(h) / sizeof(h[0]));
	(void)kvs_type_name(m->type);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvs_buf b;
	size_t pos = 0;
	/* The first byte picks the piece size: 1 byte at a time up to 256. */
	size_t piece = size ? (size_t)data[0] + 1 : 1;

	kvs_buf_init(&b, 0);
	if (size)
		pos = 1;
	while (pos < size) {
		size_t n = size - pos < piece ? size - pos : piece;
		const uint8_t *frame;
		struct kvs_msg m;
		int st;

		if (kvs_buf_reserve(&b, n))
			break;
		memcpy(kvs_buf_tail(&b), data + pos, n);
		kvs_buf_commit(&b, n);
		pos += n;
		while ((st = kvs_next_frame(&b, MAX_PAYLOAD, &m, &frame)) > 0) {
			if (m.payload_len > MAX_PAYLOAD ||
			    KVS_HDR_LEN + (size_t)m.payload_len > b.len ||
			    frame != kvs_buf_head(&b))
				abort();
			check_frame(&m, frame);
			kvs_buf_consume(&b, KVS_HDR_LEN + (size_t)m.payload_len);
		}
		if (st < 0) {
			if (-st < 1 || -st > KVS_E_MAX)
				abort();
			(void)kvs_status_name(-st);
			break; /* as the gateway: no resynchronising after a bad header */
		}
	}
	kvs_buf_free(&b);
	return 0;
}
