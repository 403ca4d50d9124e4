/* SPDX-License-Identifier: MIT */
/*
 * KVS1 codec: header and payload encoding, validation of every field, and
 * framing of a byte stream. Pure: no I/O. docs/PROTOCOL.md is the spec.
 */
#ifndef KVS_CODEC_H
#define KVS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "kvsplice/proto.h"
#include "buf.h"

/* A header in host byte order. */
struct kvs_msg {
	uint8_t type;
	uint16_t flags;
	uint16_t status;
	uint32_t payload_len;
	uint64_t req_id;
	uint64_t cache_key;
	uint64_t cache_salt;
	uint32_t model_id;
	uint32_t prefix_len;
	union {
		uint32_t max_tokens; /* REQUEST */
		uint32_t instance;   /* PONG (KVS_OFF_INSTANCE): 0, does not say */
	};
	uint32_t gw_backend;
	uint64_t gw_conn;
};

struct kvs_end_info {
	uint32_t prompt_tokens;
	uint32_t cached_tokens;
	uint32_t output_tokens;
	uint32_t queue_us;
	uint32_t prefill_us;
	uint32_t decode_us;
	uint32_t backend_id;
};

struct kvs_load_info {
	uint32_t running;
	uint32_t waiting;
	uint32_t kv_used_blocks;
	uint32_t kv_total_blocks;
	uint32_t backend_id;
	uint32_t flags; /* KVS_LOAD_F_* */
};

/* Writes KVS_HDR_LEN bytes (magic, version and hdr_len are filled in). */
void kvs_hdr_encode(const struct kvs_msg *m, void *out);

/*
 * Decodes the KVS_HDR_LEN bytes at buf and validates magic, version, type,
 * flags, header length, payload length (<= max_payload) and the type's own
 * rules (see kvs_msg_check). Returns KVS_E_OK or the enum kvs_status that
 * names the first problem; *m is filled as far as it could be read.
 */
int kvs_hdr_decode(const void *buf, uint32_t max_payload, struct kvs_msg *m);

/* The fields that frame and address a message, read without validation:
 * enough to skip a frame that fails it and to tell its sender. buf holds
 * KVS_HDR_LEN bytes. */
struct kvs_hdr_raw {
	int magic_ok;
	uint8_t type;
	uint32_t payload_len;
	uint64_t req_id, gw_conn;
};
void kvs_hdr_peek(const void *buf, struct kvs_hdr_raw *raw);

/* Type-specific rules of an otherwise well-formed header. */
int kvs_msg_check(const struct kvs_msg *m);

void kvs_end_encode(const struct kvs_end_info *e, void *out);
void kvs_end_decode(const void *in, struct kvs_end_info *e);
void kvs_load_encode(const struct kvs_load_info *l, void *out);
void kvs_load_decode(const void *in, struct kvs_load_info *l);

const char *kvs_status_name(int status);
const char *kvs_type_name(int type);

/*
 * Framing: the next whole frame buffered in b. Returns 1 and sets *m and
 * *frame (header start; payload follows) when one is there, 0 when more
 * bytes are needed, or -status for a header that fails validation (the
 * stream cannot be resynchronised after that). The frame stays in b until
 * the caller consumes KVS_HDR_LEN + m->payload_len bytes.
 */
int kvs_next_frame(const struct kvs_buf *b, uint32_t max_payload, struct kvs_msg *m,
		   const uint8_t **frame);

/* Appends a frame: header from m (payload_len set to len) and the payload. */
int kvs_put_frame(struct kvs_buf *b, struct kvs_msg *m, const void *payload, uint32_t len);

/* Appends an ERROR frame for req_id (status = code, message as payload). */
int kvs_put_error(struct kvs_buf *b, uint64_t req_id, uint64_t gw_conn, uint16_t code,
		  const char *message);

#endif
