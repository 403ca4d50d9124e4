// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench live's view of the fleet: how many backends are behind
 * the targets, so that load max/mean counts the ones that served nothing
 * (an idle backend is the worst imbalance, and the ENDs never name it).
 * Asked with PINGs before and after the run: a gateway answers with its
 * fleet and, slot by slot, the requests it has sent each backend
 * (include/kvsplice/proto.h, struct kvs_load); a backend answers with its
 * own id, so targets that are backends count themselves.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "live_int.h"

#define ASK_TIMEOUT_MS 2000

/* One PING (cache_key ask) on fd, its PONG into *li. 0, or -1 when the
 * target does not answer one in time (or answers something else). */
static int ask_one(int fd, struct kvs_buf *rx, uint64_t ask, struct kvs_load_info *li)
{
	struct kvs_msg m = { .type = KVS_T_PING, .req_id = ask + 1, .cache_key = ask };
	const uint8_t *frame;
	struct kvs_buf tx;
	int r;

	kvs_buf_init(&tx, 0);
	r = kvs_put_frame(&tx, &m, NULL, 0) ? -1 : kvs_write_all(fd, kvs_buf_head(&tx), tx.len);
	kvs_buf_free(&tx);
	if (r < 0)
		return -1;
	for (;;) {
		r = kvs_next_frame(rx, KVS_MAX_PAYLOAD_LIMIT, &m, &frame);
		if (r < 0)
			return -1;
		if (r > 0) {
			bool ours = m.type == KVS_T_PONG && m.req_id == ask + 1 &&
				    m.payload_len == sizeof(struct kvs_load);

			if (ours)
				kvs_load_decode(frame + KVS_HDR_LEN, li);
			kvs_buf_consume(rx, KVS_HDR_LEN + (size_t)m.payload_len);
			if (ours)
				return 0;
			continue;
		}
		if (kvs_buf_recv(rx, fd, 4096) <= 0) /* closed, or the timeout */
			return -1;
	}
}

/* A gateway's slots, one PING each, until every backend it said it has
 * is found: the requests it has sent each. */
static void ask_slots(int fd, struct kvs_buf *rx, uint32_t backends, struct live_fleet *f,
		      bool after)
{
	uint32_t *sent = after ? f->sent_after : f->sent_before;
	bool *seen = after ? f->in_after : f->in_before;
	struct kvs_load_info li;
	uint32_t s, found = 0;

	for (s = 0; s < MAX_FLEET_SLOTS && found < backends; s++) {
		if (ask_one(fd, rx, s + 1, &li) || !(li.flags & KVS_LOAD_F_FLEET) ||
		    li.backend_id != s)
			return; /* a gateway that answers only for the fleet */
		if (li.flags & KVS_LOAD_F_NO_BACKEND)
			continue;
		found++;
		seen[s] = true;
		sent[s] = li.waiting;
		f->per_slot = true;
	}
}

/* Target i's answer: a gateway's fleet, or a backend's id. */
static void ask_target(const struct kvs_addr *a, struct live_fleet *f, bool after, uint32_t *ids,
		       uint32_t *nids)
{
	struct timeval tv = { .tv_sec = ASK_TIMEOUT_MS / 1000 };
	struct kvs_load_info li;
	struct kvs_buf rx;
	uint32_t i;
	int fd = kvs_connect(a, ASK_TIMEOUT_MS);

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	kvs_buf_init(&rx, 0);
	if (ask_one(fd, &rx, 0, &li))
		goto out;
	if (li.flags & KVS_LOAD_F_FLEET) {
		f->gateways++;
		if (li.kv_total_blocks > f->from_gateway)
			f->from_gateway = li.kv_total_blocks;
		if (f->gateways == 1 || li.kv_used_blocks < f->in_service)
			f->in_service = li.kv_used_blocks;
		ask_slots(fd, &rx, li.kv_total_blocks, f, after);
	} else if (li.backend_id == KVS_GATEWAY_ID) {
		f->old_gateways++; /* says nothing of its fleet */
	} else {
		for (i = 0; i < *nids && ids[i] != li.backend_id; i++)
			;
		if (i == *nids && *nids < MAX_TARGETS)
			ids[(*nids)++] = li.backend_id;
	}
out:
	kvs_buf_free(&rx);
	close(fd);
}

void live_fleet_ask(const struct run_opts *o, struct live_fleet *f, bool after)
{
	uint32_t ids[MAX_TARGETS], nids = 0, i, j;

	if (o->fleet)
		return; /* the operator said */
	for (i = 0; i < o->naddrs; i++) {
		for (j = 0; j < i && memcmp(&o->addrs[j], &o->addrs[i], sizeof(o->addrs[i])); j++)
			;
		if (j == i) /* each address once */
			ask_target(&o->addrs[i], f, after, ids, &nids);
	}
	if (nids > f->from_backends)
		f->from_backends = nids;
}

uint32_t live_fleet_size(const struct run_opts *o, const struct live_fleet *f, const char **src)
{
	if (o->fleet) {
		*src = "option";
		return o->fleet;
	}
	if (f->gateways && !f->old_gateways) {
		*src = "gateway";
		return f->from_gateway;
	}
	if (!f->gateways && !f->old_gateways && f->from_backends) {
		*src = "backends";
		return f->from_backends;
	}
	*src = "seen";
	return 0;
}

int64_t live_fleet_sent(const struct live_fleet *f, uint32_t s)
{
	if (!f->in_after[s])
		return -1; /* gone before the end: unknown */
	/* modulo 2^32, as sent; a slot filled during the run counts from 0 */
	return (uint32_t)(f->sent_after[s] - (f->in_before[s] ? f->sent_before[s] : 0));
}
