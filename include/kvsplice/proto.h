/* SPDX-License-Identifier: MIT */
/*
 * KVS1 wire format, shared by the BPF programs and userspace.
 *
 * Every frame is a fixed 64-byte header followed by payload_len bytes of
 * payload. All integers are big-endian (network byte order). The header is
 * fixed-size so that the kernel can find the prompt at a constant offset and
 * frame the stream from the first 16 bytes alone. docs/PROTOCOL.md is the
 * specification; this file must stay in step with it.
 */
#ifndef KVSPLICE_PROTO_H
#define KVSPLICE_PROTO_H

#include <linux/types.h>

#define KVS_MAGIC 0x4b565331u /* "KVS1" */
#define KVS_VERSION 1
#define KVS_HDR_LEN 64

/* Largest payload the gateway accepts unless configured otherwise. The
 * strparser aborts a frame larger than the socket's receive buffer, so every
 * spliced socket's SO_RCVBUF is sized from this (docs/ARCHITECTURE.md,
 * "Hazards of sockmap splicing"). */
#define KVS_DEFAULT_MAX_PAYLOAD (1u << 20)
/* Hard upper bound for --max-frame: keeps receive buffers sane. */
#define KVS_MAX_PAYLOAD_LIMIT (16u << 20)

enum kvs_type {
	KVS_T_REQUEST = 1, /* client -> backend: prompt in payload */
	KVS_T_CHUNK = 2,   /* backend -> client: streamed tokens */
	KVS_T_END = 3,	   /* backend -> client: struct kvs_end payload */
	KVS_T_ERROR = 4,   /* either way: status = code, payload = message */
	KVS_T_PING = 5,	   /* health probe */
	KVS_T_PONG = 6,	   /* reply to PING: struct kvs_load payload */
	KVS_T_CANCEL = 7,  /* client -> backend: stop request req_id; empty */
	KVS_T_MAX = KVS_T_CANCEL,
};

/* Header flags, REQUEST only (docs/PROTOCOL.md, "Flags"). An unknown bit,
 * or any bit on another type, is refused, so that a bit can be given
 * meaning later without an old gateway silently ignoring it.
 *   JSON:   the payload is an OpenAI API request body, its prompt or
 *           messages first (the front's canonical form); the backend
 *           answers with the server's own response: CHUNK payloads are its
 *           stream events (or its JSON response, in pieces) verbatim.
 *   CHAT:   the body is for /v1/chat/completions, else /v1/completions.
 *   STREAM: the client asked for a stream ("stream": true).
 * CHAT and STREAM only with JSON. */
#define KVS_F_JSON 0x1u
#define KVS_F_CHAT 0x2u
#define KVS_F_STREAM 0x4u
#define KVS_F_KNOWN (KVS_F_JSON | KVS_F_CHAT | KVS_F_STREAM)

/* Error codes carried in the header's status field of an ERROR frame. */
enum kvs_status {
	KVS_E_OK = 0,
	KVS_E_BAD_MAGIC = 1,
	KVS_E_BAD_VERSION = 2,
	KVS_E_BAD_TYPE = 3,
	KVS_E_BAD_HDR_LEN = 4,
	KVS_E_TOO_LARGE = 5,
	KVS_E_BAD_FLAGS = 6,
	KVS_E_BAD_FIELD = 7,
	KVS_E_NO_BACKEND = 8,	/* no backend could take the request */
	KVS_E_BACKEND_GONE = 9, /* backend failed while serving it */
	KVS_E_BUSY = 10,	/* in-flight limit reached */
	KVS_E_TIMEOUT = 11,
	KVS_E_INTERNAL = 12,
	KVS_E_TOO_LONG = 13,  /* prompt + max_tokens exceed the backend's capacity */
	KVS_E_CANCELLED = 14, /* ended by a CANCEL */
	KVS_E_REJECTED = 15,  /* the inference server refused this request (HTTP 4xx) */
	KVS_E_MAX = KVS_E_REJECTED,
};

struct kvs_hdr {
	__be32 magic;	    /*  0: KVS_MAGIC */
	__u8 version;	    /*  4: KVS_VERSION */
	__u8 type;	    /*  5: enum kvs_type */
	__be16 flags;	    /*  6: KVS_F_*, REQUEST only; else 0 */
	__be16 hdr_len;	    /*  8: KVS_HDR_LEN in version 1 */
	__be16 status;	    /* 10: ERROR: enum kvs_status; else 0 */
	__be32 payload_len; /* 12: bytes after the header */
	__be64 req_id;	    /* 16: chosen by the client, echoed in replies */
	__be64 cache_key;   /* 24: REQUEST: explicit cache key, 0 = none */
	__be64 cache_salt;  /* 32: REQUEST: tenant isolation salt */
	__be32 model_id;    /* 40: REQUEST: model the prompt is for */
	__be32 prefix_len;  /* 44: REQUEST: bytes of reusable prefix, 0 = none */
	__be32 max_tokens;  /* 48: REQUEST: tokens to generate; PONG from a
			     * backend: its instance (KVS_OFF_INSTANCE) */
	__be32 gw_backend;  /* 52: gateway-owned: backend index chosen */
	__be64 gw_conn;	    /* 56: gateway-owned: client connection id */
};

#define KVS_OFF_GW_BACKEND 52
#define KVS_OFF_GW_CONN 56

/* A backend's PONG carries its instance in max_tokens' place, which a PONG
 * has no use for (no rule checks it): a nonzero number the backend picks at
 * random when it starts, and kvsplice-adapter again when its server lost
 * its cache, so that a gateway tells a backend that comes back with its
 * cache from one that restarted without it (docs/PROTOCOL.md, "PONG").
 * 0: it does not say (backends before 2026-12-02). A gateway's own PONG
 * to a client sets 0. */
#define KVS_OFF_INSTANCE 48

/* Payload of an END frame: the backend's own figures for the request. */
struct kvs_end {
	__be32 prompt_tokens;
	__be32 cached_tokens; /* prompt tokens served from the prefix cache */
	__be32 output_tokens;
	__be32 queue_us;   /* arrival to start of prefill */
	__be32 prefill_us; /* start of prefill to first token */
	__be32 decode_us;  /* first token to last token */
	__be32 backend_id; /* the backend's --id, for load accounting */
	__be32 reserved;
};

/*
 * Payload of a PONG frame: the backend's load report. A gateway answers a
 * client's PING itself with the same 24 bytes, their meaning set by the
 * PING's cache_key (echoed in the PONG) and flagged KVS_LOAD_F_FLEET, so
 * that a client sees the whole fleet, the backends that served it nothing
 * included (docs/PROTOCOL.md, "PONG payload"):
 *   cache_key 0, the fleet: running = requests in flight over all
 *     backends, kv_used_blocks = backends in service, kv_total_blocks =
 *     backends the gateway has (any state), backend_id = KVS_GATEWAY_ID;
 *   cache_key s + 1, backend slot s (s < KVS_MAX_BACKENDS): running = its
 *     requests in flight, waiting = requests the gateway has sent it (low
 *     32 bits), kv_* = what it last reported, backend_id = s; NOT_READY
 *     when it is not in service, NO_BACKEND when the slot is empty.
 * Gateways before the fleet answer the first form without the flag and
 * with kv_total_blocks 0, whatever the cache_key.
 */
struct kvs_load {
	__be32 running; /* requests being prefilled or decoded */
	__be32 waiting; /* requests queued */
	__be32 kv_used_blocks;
	__be32 kv_total_blocks;
	__be32 backend_id;
	__be32 flags; /* KVS_LOAD_F_* */
};

/* The backend_id of a gateway's answer about the whole fleet. */
#define KVS_GATEWAY_ID 0xffffffffu

/* PONG flags. NOT_READY: the backend is up but cannot serve (its inference
 * server is down, loading, or failing its health check); the gateway treats
 * it as a backend that did not answer. FLEET: a gateway's answer to a
 * client's PING, with the meaning above. NO_BACKEND: in a FLEET answer about
 * one slot, the slot is empty. KV_BLOCKS: kv_used_blocks and kv_total_blocks
 * count 16-token blocks, the gateway's own unit, so kv_total_blocks is the
 * backend's KV capacity, which sizes the gateway's index of it; without it
 * they are in the backend's own unit (kvsplice-adapter: per mille), for
 * operators only. */
#define KVS_LOAD_F_NOT_READY 1u
#define KVS_LOAD_F_FLEET 2u
#define KVS_LOAD_F_NO_BACKEND 4u
#define KVS_LOAD_F_KV_BLOCKS 8u

/*
 * Each type's own rules for a header whose common fields are valid (host
 * byte order): KVS_E_OK, or KVS_E_BAD_FLAGS / KVS_E_BAD_FIELD /
 * KVS_E_BAD_TYPE. One definition for the codec and the kernel's verdict, so
 * that a frame the kernel passes on is never one the controller refuses.
 */
static inline int kvs_type_rules(__u8 type, __u16 flags, __u16 status, __u32 payload_len,
				 __u32 prefix_len)
{
	if (flags && (type != KVS_T_REQUEST || (flags & ~KVS_F_KNOWN) || !(flags & KVS_F_JSON)))
		return KVS_E_BAD_FLAGS;
	switch (type) {
	case KVS_T_REQUEST: /* the reusable prefix is part of the prompt */
		return prefix_len <= payload_len && !status ? KVS_E_OK : KVS_E_BAD_FIELD;
	case KVS_T_END:
		return payload_len == 32 ? KVS_E_OK : KVS_E_BAD_FIELD;
	case KVS_T_PONG:
		return payload_len == 24 ? KVS_E_OK : KVS_E_BAD_FIELD;
	case KVS_T_PING:
	case KVS_T_CANCEL:
		return payload_len == 0 && !status ? KVS_E_OK : KVS_E_BAD_FIELD;
	case KVS_T_ERROR:
		return status > 0 && status <= KVS_E_MAX ? KVS_E_OK : KVS_E_BAD_FIELD;
	case KVS_T_CHUNK:
		return KVS_E_OK;
	}
	return KVS_E_BAD_TYPE;
}

#ifndef __bpf__
_Static_assert(sizeof(struct kvs_hdr) == KVS_HDR_LEN, "KVS1 header is 64 bytes");
_Static_assert(__builtin_offsetof(struct kvs_hdr, gw_backend) == KVS_OFF_GW_BACKEND,
	       "gw_backend offset");
_Static_assert(__builtin_offsetof(struct kvs_hdr, gw_conn) == KVS_OFF_GW_CONN, "gw_conn offset");
_Static_assert(__builtin_offsetof(struct kvs_hdr, max_tokens) == KVS_OFF_INSTANCE,
	       "a PONG's instance is in max_tokens' place");
_Static_assert(sizeof(struct kvs_end) == 32, "END payload is 32 bytes");
_Static_assert(sizeof(struct kvs_load) == 24, "PONG payload is 24 bytes");
#endif

#endif /* KVSPLICE_PROTO_H */
