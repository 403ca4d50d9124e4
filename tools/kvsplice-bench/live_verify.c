// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench live's checks of what comes back. --verify framing holds
 * any KVS1 server to the protocol's framing (docs/PROTOCOL.md): every frame
 * valid, every frame about a request this connection sent and has not seen
 * end, exactly one END or ERROR per request, END figures that can be true.
 * --verify sim (the default) adds kvsplice-sim's exact output: as many
 * CHUNKs as the prompt's end-of-sequence marker says, or the declared
 * max_tokens if fewer (struct req's max_tokens), each the 4 bytes of token
 * text the simulator derives from the request id and position. A frame
 * that breaks a rule is counted by kind (enum live_fault) and never ends a
 * request that is not its own.
 */
#include <stdio.h>
#include <string.h>

#include "live_int.h"
#include "prompt.h"

/* The first few of each kind go to stderr; the counts say the rest. */
#define FAULTS_SHOWN 5
/* The same for the requests' ERRORs, by code: an overloaded fleet answers
 * thousands busy, which would bury everything else on stderr. More than
 * the requests a test fails at once (test_backend_fault counts its
 * backend_gone lines). */
#define ERRORS_SHOWN 20

const char *const live_fault_names[LF_MAX] = {
	[LF_BAD_FRAME] = "bad_frame",	  [LF_BAD_TYPE] = "bad_type",
	[LF_UNKNOWN_REQ] = "unknown_req", [LF_WRONG_CONN] = "wrong_conn",
	[LF_AFTER_END] = "after_end",	  [LF_DUP_END] = "dup_end",
	[LF_BAD_END] = "bad_end",
};

static void fault(struct run *r, enum live_fault f, uint32_t ci, const struct kvs_msg *m,
		  const char *why)
{
	if (r->faults[f]++ < FAULTS_SHOWN)
		fprintf(stderr, PROG ": connection %u: %s: %s frame for request %llu: %s\n", ci,
			live_fault_names[f], kvs_type_name(m->type), (unsigned long long)m->req_id,
			why);
}

void live_bad_header(struct run *r, uint32_t ci, int status)
{
	if (r->faults[LF_BAD_FRAME]++ < FAULTS_SHOWN)
		fprintf(stderr,
			PROG ": connection %u: bad_frame: a header the codec refuses (%s)\n", ci,
			kvs_status_name(status));
}

/* --verify sim: the i-th CHUNK of a request is kvsplice-sim's token text. */
static bool sim_chunk_ok(const struct kvs_msg *m, uint32_t i, const uint8_t *p)
{
	uint8_t want[KVS_TOKEN_TEXT_LEN];

	kvs_token_text(m->req_id, i, want);
	return m->payload_len == KVS_TOKEN_TEXT_LEN && !memcmp(p, want, sizeof(want));
}

/* The END of q: its figures, and whether the answer passes --verify. */
static void on_end(struct run *r, uint32_t ci, struct req *q, const struct kvs_msg *m,
		   const uint8_t *p)
{
	struct kvs_end_info e;
	bool ok = true;

	kvs_end_decode(p, &e); /* 32 bytes: the codec refuses any other END */
	q->got_end = true;
	q->end_ns = kvs_now_ns();
	/* No CHUNK (an answer with no output): the END is when it came. */
	if (!q->first_ns)
		q->first_ns = q->end_ns;
	q->backend_id = e.backend_id;
	q->prompt_tokens = e.prompt_tokens;
	q->cached_tokens = e.cached_tokens;
	q->output_tokens = e.output_tokens;
	/* A real server's tokens are not its CHUNKs (a CHUNK is whatever text
	 * a streamed event held), but text means at least one token. */
	if (q->chunks && !e.output_tokens) {
		fault(r, LF_BAD_END, ci, m, "output_tokens 0 after CHUNKs");
		ok = false;
	}
	if (e.cached_tokens > e.prompt_tokens) {
		fault(r, LF_BAD_END, ci, m, "cached_tokens above prompt_tokens");
		ok = false;
	}
	if (r->o->verify == LIVE_VERIFY_SIM && ok &&
	    (q->bad_bytes || q->chunks != q->max_tokens || e.output_tokens != q->chunks)) {
		/* Well framed but not the simulator's: most likely a real
		 * server measured in the wrong mode, so say which mode fits. */
		if (!r->sim_hinted)
			fprintf(stderr,
				PROG ": request %llu: not kvsplice-sim's answer (%u CHUNKs%s, "
				     "output_tokens %u, for an output of %u); any other server "
				     "needs --verify framing\n",
				(unsigned long long)m->req_id, q->chunks,
				q->bad_bytes ? ", other text" : "", e.output_tokens, q->max_tokens);
		r->sim_hinted = true;
		ok = false;
	}
	q->status = ok ? RS_OK : RS_MISMATCH;
}

bool live_on_frame(struct run *r, uint32_t ci, const struct kvs_msg *m, const uint8_t *p)
{
	struct req *q;
	uint32_t code;

	switch (m->type) {
	case KVS_T_CHUNK:
	case KVS_T_END:
	case KVS_T_ERROR:
		break;
	case KVS_T_PING: /* either side may probe; a client owes no answer */
		return false;
	default: /* REQUEST and CANCEL go to servers; PONG answers a PING we never sent */
		fault(r, LF_BAD_TYPE, ci, m, "not a type a server sends a client");
		return false;
	}
	/* ERROR with req_id 0: the gateway's word on the connection (a header
	 * it could not read, a frame that never completed); it closes it. */
	if (m->type == KVS_T_ERROR && m->req_id == 0) {
		r->conn_errors++;
		r->conns[ci].going = true;
		fprintf(stderr, PROG ": connection %u: error %s: %.*s\n", ci,
			kvs_status_name(m->status), (int)m->payload_len, (const char *)p);
		return false;
	}
	if (m->req_id == 0 || m->req_id > r->n || !r->reqs[m->req_id - 1].sent) {
		fault(r, LF_UNKNOWN_REQ, ci, m, "never sent");
		return false;
	}
	q = &r->reqs[m->req_id - 1];
	if (q->conn != ci) {
		fault(r, LF_WRONG_CONN, ci, m, "sent on another connection");
		return false;
	}
	if (q->status != RS_PENDING) {
		/* PROTOCOL.md: after the gateway's backend_gone, what the failed
		 * backend sent just before it died may still come. */
		if (q->gone) {
			r->late++;
			return false;
		}
		if (m->type == KVS_T_CHUNK)
			fault(r, LF_AFTER_END, ci, m, "the request had ended");
		else
			fault(r, LF_DUP_END, ci, m, "the request had ended");
		q->status = RS_MISMATCH;
		return false;
	}
	switch (m->type) {
	case KVS_T_CHUNK:
		if (!q->first_ns)
			q->first_ns = kvs_now_ns();
		if (r->o->verify == LIVE_VERIFY_SIM && !sim_chunk_ok(m, q->chunks, p))
			q->bad_bytes = true;
		q->chunks++;
		return false;
	case KVS_T_END:
		on_end(r, ci, q, m, p);
		return true;
	default: /* KVS_T_ERROR */
		q->end_ns = kvs_now_ns();
		q->error = m->status;
		q->status = RS_ERROR;
		q->gone = m->status == KVS_E_BACKEND_GONE;
		code = m->status <= KVS_E_MAX ? m->status : 0;
		if (r->err_seen[code]++ < ERRORS_SHOWN) {
			fprintf(stderr, PROG ": request %llu: error %s: %.*s\n",
				(unsigned long long)m->req_id, kvs_status_name(m->status),
				(int)m->payload_len, (const char *)p);
			if (r->err_seen[code] == ERRORS_SHOWN)
				fprintf(stderr,
					PROG ": more %s errors are counted, not shown (a line a "
					     "second, and the summary's errors line)\n",
					kvs_status_name(m->status));
		} else {
			r->err_unshown[code]++;
		}
		return true;
	}
}

void live_errors_say(struct run *r, bool final)
{
	uint64_t now = kvs_now_ns();

	if (!final && now - r->err_said_ns < 1000000000ull)
		return;
	r->err_said_ns = now;
	for (uint32_t c = 0; c <= KVS_E_MAX; c++) {
		if (!r->err_unshown[c])
			continue;
		fprintf(stderr, PROG ": %u more %s errors (%u in all)\n", r->err_unshown[c],
			kvs_status_name(c), r->err_seen[c]);
		r->err_unshown[c] = 0;
	}
}
