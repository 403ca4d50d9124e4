// SPDX-License-Identifier: MIT
/* KVS1 encoding, validation of every field, and framing of a stream. */
#include "codec.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

static void put16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, sizeof(v));
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

#define OFF(field) __builtin_offsetof(struct kvs_hdr, field)

void kvs_hdr_encode(const struct kvs_msg *m, void *out)
{
	uint8_t *p = out;

	put32(p + OFF(magic), KVS_MAGIC);
	p[OFF(version)] = KVS_VERSION;
	p[OFF(type)] = m->type;
	put16(p + OFF(flags), m->flags);
	put16(p + OFF(hdr_len), KVS_HDR_LEN);
	put16(p + OFF(status), m->status);
	put32(p + OFF(payload_len), m->payload_len);
	put64(p + OFF(req_id), m->req_id);
	put64(p + OFF(cache_key), m->cache_key);
	put64(p + OFF(cache_salt), m->cache_salt);
	put32(p + OFF(model_id), m->model_id);
	put32(p + OFF(prefix_len), m->prefix_len);
	put32(p + OFF(max_tokens), m->max_tokens);
	put32(p + OFF(gw_backend), m->gw_backend);
	put64(p + OFF(gw_conn), m->gw_conn);
}

void kvs_hdr_peek(const void *buf, struct kvs_hdr_raw *raw)
{
	const uint8_t *p = buf;

	raw->magic_ok = get32(p + OFF(magic)) == KVS_MAGIC;
	raw->type = p[OFF(type)];
	raw->payload_len = get32(p + OFF(payload_len));
	raw->req_id = get64(p + OFF(req_id));
	raw->gw_conn = get64(p + OFF(gw_conn));
}

int kvs_msg_check(const struct kvs_msg *m)
{
	return kvs_type_rules(m->type, m->flags, m->status, m->payload_len, m->prefix_len);
}

int kvs_hdr_decode(const void *buf, uint32_t max_payload, struct kvs_msg *m)
{
	const uint8_t *p = buf;

	memset(m, 0, sizeof(*m));
	if (get32(p + OFF(magic)) != KVS_MAGIC)
		return KVS_E_BAD_MAGIC;
	if (p[OFF(version)] != KVS_VERSION)
		return KVS_E_BAD_VERSION;
	m->type = p[OFF(type)];
	m->flags = get16(p + OFF(flags));
	m->status = get16(p + OFF(status));
	m->payload_len = get32(p + OFF(payload_len));
	m->req_id = get64(p + OFF(req_id));
	m->cache_key = get64(p + OFF(cache_key));
	m->cache_salt = get64(p + OFF(cache_salt));
	m->model_id = get32(p + OFF(model_id));
	m->prefix_len = get32(p + OFF(prefix_len));
	m->max_tokens = get32(p + OFF(max_tokens));
	m->gw_backend = get32(p + OFF(gw_backend));
	m->gw_conn = get64(p + OFF(gw_conn));
	if (m->type < KVS_T_REQUEST || m->type > KVS_T_MAX)
		return KVS_E_BAD_TYPE;
	if (get16(p + OFF(hdr_len)) != KVS_HDR_LEN)
		return KVS_E_BAD_HDR_LEN;
	if (m->flags & ~KVS_F_KNOWN)
		return KVS_E_BAD_FLAGS;
	if (m->payload_len > max_payload)
		return KVS_E_TOO_LARGE;
	return kvs_msg_check(m);
}

void kvs_end_encode(const struct kvs_end_info *e, void *out)
{
	uint8_t *p = out;

	memset(p, 0, sizeof(struct kvs_end));
	put32(p + 0, e->prompt_tokens);
	put32(p + 4, e->cached_tokens);
	put32(p + 8, e->output_tokens);
	put32(p + 12, e->queue_us);
	put32(p + 16, e->prefill_us);
	put32(p + 20, e->decode_us);
	put32(p + 24, e->backend_id);
}

void kvs_end_decode(const void *in, struct kvs_end_info *e)
{
	const uint8_t *p = in;

	e->prompt_tokens = get32(p + 0);
	e->cached_tokens = get32(p + 4);
	e->output_tokens = get32(p + 8);
	e->queue_us = get32(p + 12);
	e->prefill_us = get32(p + 16);
	e->decode_us = get32(p + 20);
	e->backend_id = get32(p + 24);
}

void kvs_load_encode(const struct kvs_load_info *l, void *out)
{
	uint8_t *p = out;

	memset(p, 0, sizeof(struct kvs_load));
	put32(p + 0, l->running);
	put32(p + 4, l->waiting);
	put32(p + 8, l->kv_used_blocks);
	put32(p + 12, l->kv_total_blocks);
	put32(p + 16, l->backend_id);
	put32(p + 20, l->flags);
}

void kvs_load_decode(const void *in, struct kvs_load_info *l)
{
	const uint8_t *p = in;

	l->running = get32(p + 0);
	l->waiting = get32(p + 4);
	l->kv_used_blocks = get32(p + 8);
	l->kv_total_blocks = get32(p + 12);
	l->backend_id = get32(p + 16);
	l->flags = get32(p + 20);
}

const char *kvs_status_name(int status)
{
	static const char *const names[] = {
		[KVS_E_OK] = "ok",
		[KVS_E_BAD_MAGIC] = "bad_magic",
		[KVS_E_BAD_VERSION] = "bad_version",
		[KVS_E_BAD_TYPE] = "bad_type",
		[KVS_E_BAD_HDR_LEN] = "bad_hdr_len",
		[KVS_E_TOO_LARGE] = "too_large",
		[KVS_E_BAD_FLAGS] = "bad_flags",
		[KVS_E_BAD_FIELD] = "bad_field",
		[KVS_E_NO_BACKEND] = "no_backend",
		[KVS_E_BACKEND_GONE] = "backend_gone",
		[KVS_E_BUSY] = "busy",
		[KVS_E_TIMEOUT] = "timeout",
		[KVS_E_INTERNAL] = "internal",
		[KVS_E_TOO_LONG] = "too_long",
		[KVS_E_CANCELLED] = "cancelled",
		[KVS_E_REJECTED] = "rejected",
	};

	if (status < 0 || status > KVS_E_MAX)
		return "unknown";
	return names[status];
}

const char *kvs_type_name(int type)
{
	static const char *const names[] = {
		[KVS_T_REQUEST] = "request", [KVS_T_CHUNK] = "chunk", [KVS_T_END] = "end",
		[KVS_T_ERROR] = "error",     [KVS_T_PING] = "ping",   [KVS_T_PONG] = "pong",
		[KVS_T_CANCEL] = "cancel",
	};

	if (type < KVS_T_REQUEST || type > KVS_T_MAX)
		return "unknown";
	return names[type];
}

int kvs_next_frame(const struct kvs_buf *b, uint32_t max_payload, struct kvs_msg *m,
		   const uint8_t **frame)
{
	int st;

	if (b->len < KVS_HDR_LEN)
		return 0;
	st = kvs_hdr_decode(kvs_buf_head(b), max_payload, m);
	if (st != KVS_E_OK)
		return -st;
	if (b->len - KVS_HDR_LEN < m->payload_len)
		return 0;
	*frame = kvs_buf_head(b);
	return 1;
}

int kvs_put_frame(struct kvs_buf *b, struct kvs_msg *m, const void *payload, uint32_t len)
{
	int err;

	m->payload_len = len;
	err = kvs_buf_reserve(b, KVS_HDR_LEN + (size_t)len);
	if (err)
		return err;
	kvs_hdr_encode(m, kvs_buf_tail(b));
	if (len)
		memcpy(kvs_buf_tail(b) + KVS_HDR_LEN, payload, len);
	kvs_buf_commit(b, KVS_HDR_LEN + (size_t)len);
	return 0;
}

int kvs_put_error(struct kvs_buf *b, uint64_t req_id, uint64_t gw_conn, uint16_t code,
		  const char *message)
{
	struct kvs_msg m = {
		.type = KVS_T_ERROR,
		.status = code,
		.req_id = req_id,
		.gw_conn = gw_conn,
	};

	return kvs_put_frame(b, &m, message, (uint32_t)strlen(message));
}
