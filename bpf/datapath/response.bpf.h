/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A backend's frames: CHUNK, END and ERROR spliced back to the client named
 * by gw_conn, the backend's load released as they come, its END reports
 * counted; PONGs to the controller.
 */
#ifndef KVS_DP_RESPONSE_BPF_H
#define KVS_DP_RESPONSE_BPF_H

#include "send.bpf.h"

/* A client's requests in flight less ends of them (their END or ERROR,
 * or the controller's ERROR for a backend that died); its entry. */
static __always_inline struct kvs_conn *client_ends(__u64 client, __u32 ends)
{
	struct kvs_conn *c = bpf_map_lookup_elem(&conns, &client);

	if (ends && c && c->role == KVS_ROLE_CLIENT && c->inflight > 0) {
		__u32 n = c->inflight < ends ? c->inflight : ends;

		__sync_fetch_and_add(&c->inflight, -n); /* 32-bit: no atomic sub in BPF v2 */
	}
	return c;
}

/* Frames for the client named by gw_conn (a run of `frames` of them, one
 * message: response_run), redirected together. ends: how many of them end
 * a request the kernel sent to a backend, so the client has that many
 * requests fewer in flight. */
static __always_inline int to_client(struct __sk_buff *skb, struct kvs_stats *st, __be64 gw_conn,
				     __u32 ends, __u32 frames)
{
	__u64 client = bpf_be64_to_cpu(gw_conn);
	struct kvs_conn *c = client_ends(client, ends);

	/* Only ever into a client socket: a backend echoing a forged gw_conn
	 * must not be able to write into another backend's stream. */
	if (!c || c->role != KVS_ROLE_CLIENT ||
	    bpf_sk_redirect_hash(skb, &socks, &client, 0) != SK_PASS) {
		st->drop_no_client += frames;
		return SK_DROP;
	}
	st->resp_frames += frames;
	return SK_PASS;
}

static __always_inline int is_response(__u8 type)
{
	return type == KVS_T_CHUNK || type == KVS_T_END || type == KVS_T_ERROR;
}

/* The END's first-token time into the backend's histogram (struct
 * kvs_ttft). */
static __always_inline void count_ttft(__u32 b, __u32 queue_us, __u32 prefill_us)
{
	struct kvs_ttft *t = bpf_map_lookup_elem(&backend_ttft, &b);
	__u64 us = (__u64)queue_us + prefill_us;

	if (!t || !us)
		return;
	__sync_fetch_and_add(&t->count, 1);
	__sync_fetch_and_add(&t->queue_us, queue_us);
	__sync_fetch_and_add(&t->prefill_us, prefill_us);
	__sync_fetch_and_add(&t->bucket[kvs_ttft_bucket(us)], 1);
}

/*
 * Learn from an END: the backend's own count of cached prompt tokens, and how
 * far the gateway's expectation was off. What was expected cached is
 * recovered from the echoed charge (charge x 16 = uncached + output charged,
 * rounded up, so the estimate errs low); the one block a fully cached prompt
 * still recomputes is not counted as a miss. What was cached beyond the
 * expectation counts too (unexpected_cached): the index that forgot it
 * grows back (kvs_policy_feedback).
 */
static __always_inline void account_end(struct __sk_buff *skb, struct kvs_backend *be, __u32 b,
					const struct kvs_hdr *h, __u32 off, struct end_wire *e)
{
	struct kvs_req_key rk = { .conn = bpf_be64_to_cpu(h->gw_conn),
				  .req_id = bpf_be64_to_cpu(h->req_id) };
	__u64 prompt, cached, output, charged_out, pred_uncached, pred, surprise;
	struct kvs_inflight *rec;

	if (bpf_skb_load_bytes(skb, off + KVS_HDR_LEN, e, sizeof(*e)))
		return;
	prompt = bpf_ntohl(e->prompt_tokens);
	cached = bpf_ntohl(e->cached_tokens);
	output = bpf_ntohl(e->output_tokens);
	count_ttft(b, bpf_ntohl(e->queue_us), bpf_ntohl(e->prefill_us));
	__sync_fetch_and_add(&be->output_tokens, output);
	/* The charge was the uncached prompt plus the output charged then
	 * (its record says; the output itself when the record is gone). */
	rec = bpf_map_lookup_elem(&inflight, &rk);
	charged_out = rec ? rec->out_tokens : output;
	pred_uncached = (__u64)kvs_gw_charge(bpf_ntohl(h->gw_backend)) * KVS_BLOCK_TOKENS;
	pred_uncached = pred_uncached > charged_out ? pred_uncached - charged_out : 0;
	pred = prompt > pred_uncached ? prompt - pred_uncached : 0;
	__sync_fetch_and_add(&be->prompt_tokens, prompt);
	__sync_fetch_and_add(&be->cached_tokens, cached);
	__sync_fetch_and_add(&be->predicted_cached, pred);
	if (pred > cached + KVS_BLOCK_TOKENS)
		__sync_fetch_and_add(&be->mispredicted, pred - cached - KVS_BLOCK_TOKENS);
	surprise = kvs_unexpected_cached(pred, cached, (__u64)cfg_window_blocks * KVS_BLOCK_TOKENS);
	if (surprise)
		__sync_fetch_and_add(&be->unexpected_cached, surprise);
}

/* Take work off a backend's count, never below zero: a stray or forged
 * response must not wrap it and wedge the backend as saturated forever. */
static __always_inline void release_work(struct kvs_backend *be, __u64 work)
{
	if (be->outstanding_work >= work)
		__sync_fetch_and_sub(&be->outstanding_work, work);
	else
		be->outstanding_work = 0;
}

/*
 * A request's first CHUNK: its backend has computed the prompt, so the
 * prefill part of the charge could stop counting as load. Holding it until
 * the END makes a backend that has just finished a long prefill look as busy
 * as one about to start it, for the whole decode; releasing it early makes
 * the load signal mostly decode work, which the bounded-load slack then
 * hardly ever catches. Which is better depends on the prompt/output mix
 * (docs/ARCHITECTURE.md, "Load in tokens, exactly"), hence
 * --release-prefill. Only the backend the request went to can release it.
 */
static __always_inline void release_prefill(struct kvs_backend *be, const struct kvs_hdr *h,
					    __u32 b)
{
	struct kvs_req_key rk = { .conn = bpf_be64_to_cpu(h->gw_conn),
				  .req_id = bpf_be64_to_cpu(h->req_id) };
	struct kvs_inflight *rec;
	__u64 p;

	if (!cfg_release_prefill_early)
		return;
	/* One lookup per CHUNK: the record must live until the END, and
	 * nothing in a later CHUNK says the prefill was already released. */
	rec = bpf_map_lookup_elem(&inflight, &rk);
	if (!rec || rec->backend != b || rec->prefill_tokens == 0)
		return;
	/* CHUNK and END of one request come from one upstream socket, in
	 * order, under its lock: nothing races on the record. */
	p = rec->prefill_tokens;
	rec->prefill_tokens = 0;
	rec->held_tokens = rec->held_tokens > p ? rec->held_tokens - p : 0;
	release_work(be, p);
}

/* An END or ERROR: what the request still holds, from its record, or the
 * echoed charge when the record is gone (more in flight than the map). */
static __always_inline __u64 end_release(struct kvs_stats *st, const struct kvs_hdr *h, __u32 b)
{
	struct kvs_req_key rk = { .conn = bpf_be64_to_cpu(h->gw_conn),
				  .req_id = bpf_be64_to_cpu(h->req_id) };
	__u64 echoed = (__u64)kvs_gw_charge(bpf_ntohl(h->gw_backend)) * KVS_BLOCK_TOKENS;
	struct kvs_inflight *rec;
	__u64 held;

	rec = bpf_map_lookup_elem(&inflight, &rk);
	if (!rec || rec->backend != b) {
		st->inflight_lost++;
		return echoed;
	}
	held = rec->held_tokens;
	bpf_map_delete_elem(&inflight, &rk);
	return held;
}

/* A backend's END or ERROR: the request it ends settled, its load
 * released, its END's report learnt (read into e). */
static __always_inline void settle_end(struct __sk_buff *skb, struct kvs_stats *st,
				       struct kvs_backend *be, __u32 b, const struct kvs_hdr *h,
				       __u32 off, __u32 len, struct end_wire *e)
{
	__sync_fetch_and_add(&be->ends, 1);
	if (h->type == KVS_T_END && len >= KVS_HDR_LEN + sizeof(struct kvs_end))
		account_end(skb, be, b, h, off, e);
	/* A stray END must not wrap a count and wedge the backend as
	 * saturated forever. */
	if (be->outstanding > 0)
		__sync_fetch_and_sub(&be->outstanding, 1);
	release_work(be, end_release(st, h, b));
}

/* A backend's CHUNK, END or ERROR counted against it: its load released
 * as the request goes on, its END's report learnt. Returns whether the
 * frame ends its request. */
static __always_inline int response_account(struct __sk_buff *skb, struct kvs_stats *st,
					    struct kvs_backend *be, __u32 b,
					    const struct kvs_hdr *h, __u32 off, __u32 len)
{
	struct end_wire e;

	if (!be)
		return h->type != KVS_T_CHUNK;
	__sync_fetch_and_add(&be->resp_frames, 1);
	__sync_fetch_and_add(&be->resp_bytes, len);
	if (h->type == KVS_T_CHUNK) {
		release_prefill(be, h, b);
		return 0;
	}
	settle_end(skb, st, be, b, h, off, len, &e);
	return 1;
}

/*
 * A run: the frames after the first in one message that may go with it in
 * one redirect (kvs_parser makes the message that long): whole,
 * well-formed CHUNKs, ENDs and ERRORs for the same client, back to back,
 * as a backend writes a decode step's tokens and the ENDs of the requests
 * it finished. Each redirect goes through the client psock's backlog
 * worker and becomes a TCP send of its own: one per frame made the kernel
 * path cost a dozen microseconds of CPU per streamed token where a
 * userspace proxy reads and writes many at once (docs/EVALUATION.md, "Data
 * path"), and with CHUNKs in runs an END alone was a redirect of its own
 * per request. Returns the run's bytes after the first frame (first bytes
 * long), which ends at pos; a run is at most KVS_RUN_FRAMES frames,
 * KVS_RUN_BYTES bytes after the first, and never longer than the largest
 * frame (KVS_HDR_LEN + cfg_max_payload): the strparser aborts the socket
 * on a message larger than its receive buffer (EMSGSIZE), and that buffer
 * is sized and checked for the largest frame only (kvs_size_rcvbuf;
 * without SO_RCVBUFFORCE it may be only a little more).
 */
#define KVS_RUN_FRAMES 64
#define KVS_RUN_BYTES (32 * 1024)

/* Whether h, at pos in skb, is a whole response (CHUNK, END or ERROR) for
 * gw_conn. */
static __always_inline int run_member(struct __sk_buff *skb, const struct kvs_hdr *h, __u32 pos,
				      __be64 gw_conn)
{
	__u32 plen = bpf_ntohl(h->payload_len);

	return is_response(h->type) && h->gw_conn == gw_conn &&
	       !hdr_status(h, KVS_HDR_LEN + plen) &&
	       !kvs_type_rules(h->type, bpf_ntohs(h->flags), bpf_ntohs(h->status), plen,
			       bpf_ntohl(h->prefix_len)) &&
	       skb->len - pos >= KVS_HDR_LEN + plen;
}

static __always_inline __u32 response_run(struct __sk_buff *skb, __u32 first, __u32 pos,
					  __be64 gw_conn)
{
	__u32 start = pos, i, flen;
	struct kvs_hdr h;

	for (i = 1; i < KVS_RUN_FRAMES; i++) {
		if (pos > skb->len || skb->len - pos < KVS_HDR_LEN ||
		    bpf_skb_load_bytes(skb, pos, &h, sizeof(h)) ||
		    !run_member(skb, &h, pos, gw_conn))
			break;
		/* no wrap: each length is at most the largest frame */
		flen = KVS_HDR_LEN + bpf_ntohl(h.payload_len);
		if (pos - start + flen > KVS_RUN_BYTES ||
		    first + (pos - start) + flen > KVS_HDR_LEN + cfg_max_payload)
			break;
		pos += flen;
	}
	return pos - start;
}

/* What the parser adds to a whole frame at off: the rest of its run, if
 * it came from a backend's socket and may lead one. */
static __always_inline __u32 upstream_run_len(struct __sk_buff *skb, __u32 off)
{
	__u32 first;
	__u64 cookie;
	struct kvs_conn *c;
	struct kvs_hdr h;

	if (bpf_skb_load_bytes(skb, off, &h, sizeof(h)) || !run_member(skb, &h, off, h.gw_conn))
		return 0;
	cookie = bpf_get_socket_cookie(skb);
	c = bpf_map_lookup_elem(&conns, &cookie);
	if (!c || c->role != KVS_ROLE_UPSTREAM)
		return 0;
	first = KVS_HDR_LEN + bpf_ntohl(h.payload_len);
	return response_run(skb, first, off + first, h.gw_conn);
}

static __always_inline int upstream_frame(struct __sk_buff *skb, struct kvs_stats *st,
					  const struct kvs_hdr *h, __u32 b, __u32 off, __u32 len)
{
	struct kvs_backend *be = bpf_map_lookup_elem(&backends, &b);
	int ends;

	/* The answer to the controller's health check (ping_backend()),
	 * noted as passed up: until the controller reads it, it waits in the
	 * punt socket behind what clients had punted before it (health.c).
	 * Only as the controller takes it (gw_conn 0): a PONG it would not
	 * take as an answer must not hold the check either. */
	if (h->type == KVS_T_PONG) {
		int v = punt(skb, st);

		if (v == SK_PASS && be && h->gw_conn == 0)
			be->pong_seen = bpf_be64_to_cpu(h->req_id);
		return v;
	}
	if (!is_response(h->type)) {
		st->drop_bad_upstream++;
		return SK_DROP;
	}
	ends = response_account(skb, st, be, b, h, off, len);
	return to_client(skb, st, h->gw_conn, ends, 1);
}

/* upstream_run's walk, a frame a bpf_loop step: as a loop in the verdict
 * its states multiplied past the verifier's limit. Its context holds only
 * what cannot go in a map (the skb) and the pointers looked up once; the
 * rest is the walk's run_state, this verdict's slot of runs. */
struct run_walk {
	struct __sk_buff *skb;
	struct kvs_stats *st;
	struct kvs_backend *be;
	struct run_state *r;
};

static long run_step(__u64 i, void *data)
{
	struct run_walk *w = data;
	struct run_state *r = w->r;
	__u32 flen;

	if (r->pos >= r->end)
		return 1;
	if (r->end - r->pos < KVS_HDR_LEN ||
	    bpf_skb_load_bytes(w->skb, r->pos, &r->h, sizeof(r->h)))
		goto bad;
	if (!i)
		r->gw_conn = r->h.gw_conn;
	flen = KVS_HDR_LEN + bpf_ntohl(r->h.payload_len);
	if (!run_member(w->skb, &r->h, r->pos, r->gw_conn) || flen > r->end - r->pos)
		goto bad;
	if (r->h.type != KVS_T_CHUNK)
		r->ends++;
	if (w->be && r->h.type == KVS_T_CHUNK)
		release_prefill(w->be, &r->h, r->b);
	else if (w->be)
		settle_end(w->skb, w->st, w->be, r->b, &r->h, r->pos, flen, &r->e);
	r->frames++;
	r->pos += flen;
	return 0;
bad:
	r->bad = 1;
	return 1;
}

/* The walk's verdict, once it has walked the run in r. */
static __always_inline int run_verdict(struct run_walk *w, struct kvs_conn *conn, __u32 len)
{
	struct run_state *r = w->r;

	if (r->bad || r->pos != r->end || !r->frames) {
		/* the requests whose ENDs it settled are no longer the client's */
		client_ends(bpf_be64_to_cpu(r->gw_conn), r->ends);
		w->st->drop_bad_upstream++;
		return SK_DROP;
	}
	/* the backend's counts once for the run, not an atomic add a frame */
	if (w->be) {
		__sync_fetch_and_add(&w->be->resp_frames, r->frames);
		__sync_fetch_and_add(&w->be->resp_bytes, len);
	}
	conn->frames += r->frames - 1; /* the verdict counted the message as one */
	return to_client(w->skb, w->st, r->gw_conn, r->ends, r->frames);
}

/*
 * A run of frames for one client (response_run) in one message of len
 * bytes from off: each counted as upstream_frame counts it (a CHUNK's
 * prefill released, an END's request settled and its report learnt),
 * then all redirected at once. The parser checked every frame; a frame
 * that no longer passes (it cannot, the bytes are the same) drops the
 * run, what it counted of the frames before it kept (the requests their
 * ENDs settled leave the client's count too).
 * Not inlined: its walk's state would add to the verdict's own stack,
 * which with the placement's calls below it has no 100 bytes to spare.
 */
static __noinline int upstream_run(struct __sk_buff *skb, struct kvs_stats *st,
				   struct kvs_conn *conn, __u32 off, __u32 len)
{
	struct run_walk w = { .skb = skb, .st = st };
	struct run_state *r = run_slot(); /* this verdict's (nest) */

	if (!r) { /* every slot taken: counted by the verdict */
		st->drop_bad_upstream++;
		return SK_DROP;
	}
	r->b = conn->by_role.backend;
	r->pos = off;
	r->end = off + len;
	r->frames = r->ends = 0;
	r->bad = 0;
	r->gw_conn = 0;
	w.be = bpf_map_lookup_elem(&backends, &r->b);
	w.r = r;
	bpf_loop(KVS_RUN_FRAMES, run_step, &w, 0);
	return run_verdict(&w, conn, len);
}

#endif /* KVS_DP_RESPONSE_BPF_H */
