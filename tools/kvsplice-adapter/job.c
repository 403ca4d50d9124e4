// SPDX-License-Identifier: MIT
/*
 * One REQUEST as one HTTP request to the inference server: the body built
 * (or, for a client's own OpenAI body, passed on), the stream split into
 * events, each piece of text sent on as a CHUNK (or each event as the
 * server wrote it; or a whole JSON response, for a request that asked for
 * no stream), the usage turned into the END, every failure into one ERROR.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "adapter.h"
#include "log.h"
#include "netutil.h"

/* An HTTP error body kept for its message; the rest is dropped. */
#define ERRBODY_MAX (64u << 10)
/* A whole JSON response (a request that asked for no stream), at most. */
#define JSONBODY_MAX (64u << 20)
/* After [DONE], how long the body has to end (job_check_stalls). */
#define DONE_GRACE_NS 1000000000ull

struct job {
	struct adapter *a;
	struct link *l;
	struct job *link_next, *link_prev; /* in l->jobs */
	struct job *hnext;		   /* in a->buckets */
	struct job *qnext, *qprev;	   /* in a->queue while waiting for a connection */
	uint64_t peer, key;		   /* who asked (see key_of) */
	struct kvs_msg req;		   /* the REQUEST header: what replies echo */
	CURL *h;
	char *body;
	struct kvs_sse sse;
	uint64_t t_start, t_sent, t_first, t_last;
	uint64_t t_event; /* the last event (or byte of a body that is not a stream) */
	uint32_t chunks;
	struct oai_event usage;	     /* the figures seen so far (root unused) */
	struct oai_event usage_base; /* of them, the ended prompts' (an array's) */

	bool active;	 /* in the multi handle; else queued */
	bool answered;	 /* the END went at [DONE] (t_event then); the transfer may run on */
	bool not_stream; /* a 2xx that is not text/event-stream */
	bool body_began; /* on_body ran: curl had the whole header block */
	long http_status;
	struct kvs_buf errbody;
	struct kvs_buf ev; /* relay_event's, reused from event to event */
	int fail_code;	   /* set by a callback: the ERROR to send */
	char fail_msg[320];
	bool paused;
	bool retried;
	bool json;	 /* KVS1 flag JSON: the client's body, the server's answer verbatim */
	bool stream;	 /* with json: the client asked for a stream */
	bool hide_usage; /* with stream: include_usage was the adapter's, not the client's */
	char errbuf[CURL_ERROR_SIZE];
};

/* A request that asked for no stream: the server's answer comes whole, at
 * the end of its generation, and nothing before it. */
static bool whole(const struct job *j)
{
	return j->json && !j->stream;
}

/* Its client has gone (CANCEL, or its link closed) but its transfer is
 * kept until the server ends it (park_or_free()): l is NULL, and link_next and
 * link_prev are its place in a->parked. */
static bool parked(const struct job *j)
{
	return !j->l;
}

/*
 * Requests are found by who asked and the client's req_id, whichever link
 * carries the frame: a gateway's pooled connections are shared, and a
 * CANCEL may come on another than its REQUEST did. Who asked: the
 * gateway's client connection (gw_conn, a socket cookie, unique on its
 * host) on the gateway's host (the link's peer address: two gateways in
 * front of one adapter have the same cookies); a client without a gateway
 * (gw_conn 0) is its link.
 */
static void key_of(const struct link *l, const struct kvs_msg *m, uint64_t *peer, uint64_t *key)
{
	*peer = m->gw_conn ? l->peer : 0;
	*key = m->gw_conn ? m->gw_conn : l->id;
}

static struct job **bucket(struct adapter *a, uint64_t peer, uint64_t key, uint64_t req_id)
{
	uint64_t h = (key * 0x9e3779b97f4a7c15ULL) ^ (req_id * 0xc2b2ae3d27d4eb4fULL) ^ peer;

	return &a->buckets[(h >> 40) % ADAPTER_JOB_BUCKETS];
}

static struct job *find(struct adapter *a, const struct link *l, const struct kvs_msg *m)
{
	uint64_t peer, key;
	struct job *j;

	key_of(l, m, &peer, &key);
	for (j = *bucket(a, peer, key, m->req_id); j; j = j->hnext)
		if (j->peer == peer && j->key == key && j->req.req_id == m->req_id)
			return j;
	return NULL;
}

/* Jobs go to the server at most --max-connections at once, in arrival
 * order; the rest wait here, where the PONG counts them as waiting. curl's
 * own queue would hold them too, but the health polls would then wait
 * behind them and time out on a server that is only busy. */
static void queue_remove(struct adapter *a, struct job *j)
{
	if (j->qprev)
		j->qprev->qnext = j->qnext;
	else
		a->queue_head = j->qnext;
	if (j->qnext)
		j->qnext->qprev = j->qprev;
	else
		a->queue_tail = j->qprev;
	j->qnext = j->qprev = NULL;
	a->queued--;
}

static void send_error(struct job *j, int code, const char *msg);
static void job_free(struct job *j);

/* Starts queued jobs while connections are free. */
static void dispatch(struct adapter *a)
{
	while (a->queue_head && a->active < state_conn_cap(a)) {
		struct job *j = a->queue_head;

		queue_remove(a, j);
		j->t_sent = j->t_event = kvs_now_ns();
		if (curl_multi_add_handle(a->multi, j->h) != CURLM_OK) {
			send_error(j, KVS_E_INTERNAL,
				   "kvsplice-adapter: cannot start the HTTP request");
			job_free(j);
			continue;
		}
		j->active = true;
		a->active++;
	}
}

/* Out of a->buckets (no frame finds it) and out of its link's jobs, or
 * of a->parked. */
static void unlink_job(struct job *j)
{
	struct adapter *a = j->a;
	struct job **pp;

	for (pp = bucket(a, j->peer, j->key, j->req.req_id); *pp; pp = &(*pp)->hnext)
		if (*pp == j) {
			*pp = j->hnext;
			break;
		}
	j->hnext = NULL;
	if (j->link_prev)
		j->link_prev->link_next = j->link_next;
	else if (parked(j))
		a->parked = j->link_next;
	else
		j->l->jobs = j->link_next;
	if (j->link_next)
		j->link_next->link_prev = j->link_prev;
	j->link_next = j->link_prev = NULL;
	if (parked(j))
		a->nparked--;
	else
		j->l->njobs--;
}

static void job_free(struct job *j)
{
	struct adapter *a = j->a;

	unlink_job(j);
	if (j->active) {
		curl_multi_remove_handle(a->multi, j->h);
		a->active--;
	} else if (a->queue_head == j || j->qprev) {
		queue_remove(a, j);
	}
	if (j->h)
		curl_easy_cleanup(j->h);
	free(j->body);
	kvs_sse_free(&j->sse);
	kvs_buf_free(&j->errbody);
	kvs_buf_free(&j->ev);
	free(j);
}

static void send_error(struct job *j, int code, const char *msg)
{
	j->a->stats.errors[code]++;
	tx_frame(j->l, &j->req, KVS_T_ERROR, (uint16_t)code, msg, (uint32_t)strlen(msg));
	pr_debug("event=request_error req=%llu status=%s msg=\"%s\"",
		 (unsigned long long)j->req.req_id, kvs_status_name(code), msg);
}

/* An ERROR for a request that never became a job. */
static void refuse_request(struct adapter *a, struct link *l, const struct kvs_msg *m, int code,
			   const char *msg)
{
	a->stats.errors[code]++;
	tx_frame(l, m, KVS_T_ERROR, (uint16_t)code, msg, (uint32_t)strlen(msg));
}

static void fail(struct job *j, int code, const char *fmt, const char *detail)
{
	if (j->fail_code)
		return;
	j->fail_code = code;
	snprintf(j->fail_msg, sizeof(j->fail_msg), fmt, detail);
}

/* Bytes as CHUNKs, each at most the largest frame. */
static void send_bytes(struct job *j, const char *t, size_t n)
{
	uint32_t max = j->a->cfg.max_payload;

	while (n) {
		uint32_t k = n > max ? max : (uint32_t)n;

		tx_frame(j->l, &j->req, KVS_T_CHUNK, 0, t, k);
		j->a->stats.chunks++;
		j->a->stats.chunk_bytes += k;
		t += k;
		n -= k;
	}
}

/* A piece of output: its time noted for the END's figures. */
static void count_output(struct job *j)
{
	j->chunks++;
	j->t_last = kvs_now_ns();
	if (!j->t_first)
		j->t_first = j->t_last;
}

/* Generated text, for a plain-prompt request. */
static void send_text(struct job *j, const char *t, size_t n)
{
	send_bytes(j, t, n);
	count_output(j);
}

/* An event as the server wrote it, for a request with the client's own
 * body: the front writes CHUNK payloads to its client unchanged. Data of
 * several lines goes back as several data: lines. */
static int relay_event(struct job *j, const char *event, const char *data, size_t len)
{
	struct kvs_buf *b = &j->ev;
	size_t i, from = 0;
	int r = 0;

	kvs_buf_consume(b, b->len);
	if (strcmp(event, "message"))
		r = kvs_buf_append(b, "event: ", 7) || kvs_buf_append(b, event, strlen(event)) ||
		    kvs_buf_append(b, "\n", 1);
	for (i = 0; !r && i <= len; i++) {
		if (i < len && data[i] != '\n')
			continue;
		r = kvs_buf_append(b, "data: ", 6) || kvs_buf_append(b, data + from, i - from) ||
		    kvs_buf_append(b, "\n", 1);
		from = i + 1;
	}
	if (!r)
		r = kvs_buf_append(b, "\n", 1);
	if (!r)
		send_bytes(j, (const char *)kvs_buf_head(b), b->len);
	return r ? -ENOMEM : 0;
}

/* The END: the server's usage, and its own timings where it reports them
 * (llama.cpp), else the adapter's view: sent to first token to last. Time
 * in the adapter's queue is queue time. */
static uint32_t us_between(uint64_t from_ns, uint64_t to_ns)
{
	uint64_t us = to_ns > from_ns ? (to_ns - from_ns) / 1000 : 0;

	return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static uint32_t ms_to_us(double ms)
{
	return ms > 0 && ms < 4e6 ? (uint32_t)(ms * 1000.0) : 0;
}

static void send_end(struct job *j)
{
	struct oai_event *u = &j->usage;
	uint64_t last = j->t_last ? j->t_last : kvs_now_ns();
	uint64_t first = j->t_first ? j->t_first : last;
	struct kvs_end_info e = {
		.prompt_tokens = u->prompt_tokens,
		.cached_tokens = u->has_cached ? u->cached_tokens : u->cache_n,
		.output_tokens = u->has_usage ? u->completion_tokens : j->chunks,
		.queue_us = us_between(j->t_start, j->t_sent),
		.prefill_us = us_between(j->t_sent, first),
		.decode_us = us_between(first, last),
		.backend_id = j->a->cfg.id,
	};
	uint8_t payload[sizeof(struct kvs_end)];

	if (e.cached_tokens > e.prompt_tokens)
		e.cached_tokens = e.prompt_tokens;
	if (u->has_timings) {
		uint32_t ttft = e.prefill_us;

		e.prefill_us = ms_to_us(u->prompt_ms);
		e.decode_us = ms_to_us(u->predicted_ms);
		/* What the server does not report as prompt time, of the
		 * time to first token, it spent queued (or in transit). */
		e.queue_us += ttft > e.prefill_us ? ttft - e.prefill_us : 0;
	}
	kvs_end_encode(&e, payload);
	tx_frame(j->l, &j->req, KVS_T_END, 0, payload, sizeof(payload));
	j->a->stats.ends++;
	j->answered = true;
}

/* An event's usage and timings: the current prompt's so far, on top of
 * those of the prompts before it (a server may repeat them as they grow:
 * the last one stands). */
static void add_usage(struct job *j, const struct oai_event *ev)
{
	const struct oai_event *b = &j->usage_base;
	struct oai_event *u = &j->usage;

	if (ev->separator) {
		j->usage_base = *u;
		return;
	}
	if (ev->has_usage) {
		u->has_usage = true;
		u->prompt_tokens = b->prompt_tokens + ev->prompt_tokens;
		u->completion_tokens = b->completion_tokens + ev->completion_tokens;
		if (ev->has_cached) {
			u->has_cached = true;
			u->cached_tokens = b->cached_tokens + ev->cached_tokens;
		}
	}
	if (ev->has_timings) {
		u->has_timings = true;
		u->prompt_ms = b->prompt_ms + ev->prompt_ms;
		u->predicted_ms = b->predicted_ms + ev->predicted_ms;
		u->cache_n = b->cache_n + ev->cache_n;
	}
}

static int on_event(void *ctx, const char *event, const char *data, size_t len)
{
	struct job *j = ctx;
	struct oai_event ev;
	char shown[72];

	if (j->answered) /* after [DONE]: nothing more is owed */
		return 0;
	j->t_event = kvs_now_ns();
	if (oai_parse_event(data, len, &ev)) {
		oai_event_free(&ev);
		snprintf(shown, sizeof(shown), "%.64s", data);
		fail(j, KVS_E_INTERNAL, "kvsplice-adapter: malformed event from the server: %s",
		     shown);
		return 1;
	}
	if (ev.is_error || !strcmp(event, "error")) {
		if (!ev.is_error)
			snprintf(ev.error, sizeof(ev.error), "%.200s", data);
		fail(j, oai_error_code(ev.error_status, ev.error), "inference server: %s",
		     ev.error);
		oai_event_free(&ev);
		return 1;
	}
	if (j->json) {
		if (!(j->hide_usage && oai_usage_only(&ev)) && relay_event(j, event, data, len)) {
			oai_event_free(&ev);
			fail(j, KVS_E_INTERNAL, "kvsplice-adapter: %s", "out of memory");
			return 1;
		}
		if (ev.text_len)
			count_output(j);
	} else if (ev.text_len) {
		send_text(j, ev.text, ev.text_len);
	}
	add_usage(j, &ev);
	/* [DONE] is the end of the answer: the END goes now, whatever the
	 * server then does with the connection. */
	if (ev.done)
		send_end(j);
	oai_event_free(&ev);
	return 0;
}

/* A whole JSON response (the client asked for no stream): as CHUNKs, the
 * front joins them; its usage (and llama.cpp's timings) for the END. */
static void send_response(struct job *j)
{
	struct oai_event ev;

	if (oai_parse_event((const char *)kvs_buf_head(&j->errbody), j->errbody.len, &ev) ||
	    ev.is_error) {
		char msg[320];

		snprintf(msg, sizeof(msg), "kvsplice-adapter: the server answered HTTP %ld with %s",
			 j->http_status,
			 ev.is_error ? ev.error : "a body that is not a JSON object");
		send_error(j,
			   ev.is_error ? oai_error_code(ev.error_status, ev.error) : KVS_E_INTERNAL,
			   msg);
		oai_event_free(&ev);
		return;
	}
	count_output(j);
	send_bytes(j, (const char *)kvs_buf_head(&j->errbody), j->errbody.len);
	j->usage.has_usage = ev.has_usage;
	j->usage.prompt_tokens = ev.prompt_tokens;
	j->usage.completion_tokens = ev.completion_tokens;
	j->usage.has_cached = ev.has_cached;
	j->usage.cached_tokens = ev.cached_tokens;
	j->usage.has_timings = ev.has_timings;
	j->usage.prompt_ms = ev.prompt_ms;
	j->usage.predicted_ms = ev.predicted_ms;
	j->usage.cache_n = ev.cache_n;
	oai_event_free(&ev);
	send_end(j);
}

/* The response's status, and whether a 2xx is a stream at all. */
static void read_status(struct job *j)
{
	const char *ct = NULL;

	if (j->http_status)
		return;
	curl_easy_getinfo(j->h, CURLINFO_RESPONSE_CODE, &j->http_status);
	curl_easy_getinfo(j->h, CURLINFO_CONTENT_TYPE, &ct);
	if (j->http_status >= 200 && j->http_status < 300 &&
	    (!ct || strncasecmp(ct, "text/event-stream", 17)))
		j->not_stream = true;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ctx)
{
	struct job *j = ctx;
	size_t n = size * nmemb;
	int r;

	j->body_began = true;
	/* A parked job's answer is nobody's: its first byte says the server
	 * is done with it (a whole answer comes at the end), and ending the
	 * transfer there frees its connection for the next request. */
	if (parked(j))
		return 0;
	if (j->l->tx.len > ADAPTER_TX_HIGH) {
		/* The gateway is behind: leave the bytes with curl (and the
		 * server's socket) until the link drains. */
		j->paused = j->l->paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	/* Bytes after [DONE]: nothing more is owed, and a server that goes
	 * on would hold the connection, one of --max-connections, for ever. */
	if (j->answered)
		return 0;
	read_status(j);
	if (whole(j) || j->http_status >= 300 || j->not_stream)
		j->t_event = kvs_now_ns(); /* not a stream: every byte is news */
	if (whole(j) && j->http_status < 300) {
		/* The response, whole, for the END: sent at the transfer's end. */
		if (kvs_buf_append(&j->errbody, p, n)) {
			fail(j, KVS_E_INTERNAL,
			     "kvsplice-adapter: the server's response is larger "
			     "than %s",
			     "64 MiB");
			return 0;
		}
		return n;
	}
	if (j->http_status >= 300 || j->not_stream) {
		/* Its start is kept for the message; once that is full the
		 * transfer ends (0): a body that never ends must not hold the
		 * request. job_done sends the error either way. */
		if (j->errbody.len >= ERRBODY_MAX)
			return 0;
		kvs_buf_append(&j->errbody, p,
			       n < ERRBODY_MAX - j->errbody.len ? n : ERRBODY_MAX - j->errbody.len);
		return n;
	}
	r = kvs_sse_feed(&j->sse, p, n, on_event, j);
	if (r == -E2BIG) {
		char max[16];

		snprintf(max, sizeof(max), "%u", j->a->cfg.max_payload);
		fail(j, KVS_E_INTERNAL,
		     "kvsplice-adapter: the server sent an event larger than %s bytes (--max-frame)",
		     max);
	} else if (r < 0) {
		fail(j, KVS_E_INTERNAL, "kvsplice-adapter: %s", "out of memory");
	}
	return r ? 0 : n; /* 0 aborts the transfer: job_done sends fail_msg */
}

void job_start(struct adapter *a, struct link *l, const struct kvs_msg *m, const uint8_t *p)
{
	const char *model = a->cfg.model ? a->cfg.model : a->st.model[0] ? a->st.model : NULL;
	struct job *j, **b;

	a->stats.requests++;
	if (find(a, l, m)) {
		/* Answering it would end the request in flight under the same
		 * id too (the gateway's record, the client's view): dropped. */
		a->stats.duplicates++;
		if (a->stats.duplicates == 1 || !(a->stats.duplicates % 1000))
			pr_warn("event=duplicate_req_id req=%llu link=%llu count=%llu",
				(unsigned long long)m->req_id, (unsigned long long)l->id,
				(unsigned long long)a->stats.duplicates);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		refuse_request(a, l, m, KVS_E_INTERNAL, "kvsplice-adapter: out of memory");
		return;
	}
	j->a = a;
	j->l = l;
	key_of(l, m, &j->peer, &j->key);
	j->req = *m;
	kvs_sse_init(&j->sse, a->cfg.max_payload);
	kvs_buf_init(&j->errbody, m->flags & KVS_F_JSON ? JSONBODY_MAX : ERRBODY_MAX);
	kvs_buf_init(&j->ev, 0);
	j->json = m->flags & KVS_F_JSON;
	j->stream = !j->json || (m->flags & KVS_F_STREAM);
	if (j->json) {
		char err[128];

		j->body = oai_client_body(p, m->payload_len, j->stream, a->st.kind, m->cache_salt,
					  a->extra, &j->hide_usage, err, sizeof(err));
		if (!j->body) {
			refuse_request(a, l, m, KVS_E_REJECTED, err);
			goto refused;
		}
	} else {
		j->body = oai_completion_body(model, p, m->payload_len, m->max_tokens, a->st.kind,
					      m->cache_salt, a->extra);
		if (!j->body) {
			refuse_request(a, l, m, KVS_E_REJECTED,
				       "kvsplice-adapter: the prompt is not UTF-8 text (JSON "
				       "cannot carry it)");
			goto refused;
		}
	}
	b = bucket(a, j->peer, j->key, m->req_id);
	j->hnext = *b;
	*b = j;
	j->link_next = l->jobs;
	if (l->jobs)
		l->jobs->link_prev = j;
	l->jobs = j;
	l->njobs++;

	j->h = curl_easy_init();
	if (!j->h) {
		send_error(j, KVS_E_INTERNAL, "kvsplice-adapter: out of memory");
		job_free(j);
		return;
	}
	curl_easy_setopt(j->h, CURLOPT_URL,
			 j->json && (m->flags & KVS_F_CHAT) ? a->chat_url : a->completions_url);
	curl_easy_setopt(j->h, CURLOPT_HTTPHEADER, j->stream ? a->hdrs_stream : a->hdrs_json);
	curl_easy_setopt(j->h, CURLOPT_POSTFIELDS, j->body);
	curl_easy_setopt(j->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(j->body));
	curl_easy_setopt(j->h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(j->h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(j->h, CURLOPT_WRITEDATA, j);
	curl_easy_setopt(j->h, CURLOPT_PRIVATE, j);
	curl_easy_setopt(j->h, CURLOPT_ERRORBUFFER, j->errbuf);
	curl_easy_setopt(j->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(j->h, CURLOPT_CONNECTTIMEOUT_MS, (long)a->cfg.connect_ms);
	/* A stream silent for about stall_s fails (curl averages the rate
	 * over the window, so it may take a few seconds more): a server that
	 * stalls must not hold a request, and the gateway's load count, for
	 * ever. Not a whole answer: the server sends nothing until its
	 * generation is over, however long that takes (job_check_stalls). */
	if (!whole(j)) {
		curl_easy_setopt(j->h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(j->h, CURLOPT_LOW_SPEED_TIME, (long)a->cfg.stall_s);
	}
	j->t_start = kvs_now_ns();
	if (a->queue_tail) {
		a->queue_tail->qnext = j;
		j->qprev = a->queue_tail;
	} else {
		a->queue_head = j;
	}
	a->queue_tail = j;
	a->queued++;
	dispatch(a);
	return;
refused:
	kvs_buf_free(&j->errbody);
	kvs_buf_free(&j->ev);
	kvs_sse_free(&j->sse);
	free(j);
}

/*
 * A kept-alive connection the server closed as it was reused: llama.cpp's
 * server closes every connection after a streamed response although it
 * says keep-alive, and curl does not always see it first (1 to 4 of 40
 * requests in a row here). Nothing came back, not even a status line, so
 * the server did no work for this request: once, on a new connection, it
 * is sent again.
 */
static bool retry(struct adapter *a, struct job *j, CURLcode res)
{
	long status = 0;

	curl_easy_getinfo(j->h, CURLINFO_RESPONSE_CODE, &status);
	if (j->retried || j->fail_code || status || j->chunks ||
	    (res != CURLE_SEND_ERROR && res != CURLE_GOT_NOTHING && res != CURLE_RECV_ERROR))
		return false;
	j->retried = true;
	a->stats.retries++;
	pr_debug("event=retry req=%llu why=\"%s\"", (unsigned long long)j->req.req_id,
		 j->errbuf[0] ? j->errbuf : curl_easy_strerror(res));
	curl_multi_remove_handle(a->multi, j->h);
	kvs_sse_free(&j->sse);
	kvs_sse_init(&j->sse, a->cfg.max_payload);
	j->errbuf[0] = '\0';
	curl_easy_setopt(j->h, CURLOPT_FRESH_CONNECT, 1L);
	return curl_multi_add_handle(a->multi, j->h) == CURLM_OK;
}

/*
 * libcurl refuses response headers it will not hold: a header line over
 * 100 KB (CURL_MAX_HTTP_HEADER), 300 KB in all. Before 8.6 it says so as
 * CURLE_OUT_OF_MEMORY, "Out of memory", for the line, and
 * CURLE_RECV_ERROR, "Too large response headers: N > 307200", for the
 * total; since, CURLE_TOO_LARGE for both. After the status line (the
 * job has a status) and before the body began (on_body never ran), that
 * is the server's headers, not the adapter's memory.
 */
static bool headers_too_large(const struct job *j, CURLcode res)
{
	if (!j->http_status || j->body_began)
		return false;
#if LIBCURL_VERSION_NUM >= 0x080600
	if (res == CURLE_TOO_LARGE)
		return true;
#endif
	return res == CURLE_OUT_OF_MEMORY ||
	       (res == CURLE_RECV_ERROR && strstr(j->errbuf, "Too large response headers"));
}

void job_done(struct adapter *a, CURL *h, CURLcode res)
{
	struct job *j = NULL;
	char msg[400];

	curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&j);
	if (j && parked(j)) {
		/* The server ended it: its connection, one of the cap, is free.
		 * Nothing is owed (cancelled already), nor sent again. */
		job_free(j);
		dispatch(a);
		return;
	}
	if (!j || (!j->answered && retry(a, j, res)))
		return;
	read_status(j);
	if (j->answered) {
		/* The END went at [DONE]; how the transfer ended after it
		 * (a server holding the connection open, then the stall
		 * timeout) is no longer the client's business. */
	} else if (j->fail_code) {
		send_error(j, j->fail_code, j->fail_msg);
	} else if (headers_too_large(j, res)) {
		/* internal, as for an event over --max-frame: the server
		 * answered, with more than the adapter takes; not
		 * backend_gone, it did not fail, and would answer the same
		 * again. (Before the not-stream case: a Content-Type after
		 * the big header was never read.) */
		snprintf(msg, sizeof(msg),
			 "kvsplice-adapter: the inference server's response headers are too large "
			 "for the adapter (libcurl's limit: a header line of 100 KB, 300 KB in "
			 "all; libcurl said: %.200s)",
			 j->errbuf[0] ? j->errbuf : curl_easy_strerror(res));
		send_error(j, KVS_E_INTERNAL, msg);
	} else if (res == CURLE_OK && whole(j) && j->http_status >= 200 && j->http_status < 300) {
		send_response(j);
	} else if (res != CURLE_OK && res != CURLE_WRITE_ERROR && !j->http_status) {
		const char *why = j->errbuf[0] ? j->errbuf : curl_easy_strerror(res);

		snprintf(msg, sizeof(msg), "kvsplice-adapter: inference server %s: %s",
			 a->cfg.server, why);
		if (res == CURLE_COULDNT_CONNECT)
			state_unreachable(a, msg);
		send_error(j, res == CURLE_OPERATION_TIMEDOUT ? KVS_E_TIMEOUT : KVS_E_BACKEND_GONE,
			   msg);
	} else if (j->http_status >= 300) {
		char m[256];

		oai_error_message((const char *)kvs_buf_head(&j->errbody), j->errbody.len, m,
				  sizeof(m));
		snprintf(msg, sizeof(msg), "inference server: HTTP %ld: %s", j->http_status, m);
		send_error(j, oai_error_code(j->http_status, m), msg);
	} else if (j->not_stream) {
		const char *ct = NULL;

		curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
		snprintf(msg, sizeof(msg),
			 "kvsplice-adapter: the server answered HTTP %ld with %s, not a stream "
			 "(is --server an OpenAI-compatible API?)",
			 j->http_status, ct ? ct : "no Content-Type");
		send_error(j, KVS_E_INTERNAL, msg);
	} else if (res == CURLE_OPERATION_TIMEDOUT) {
		snprintf(msg, sizeof(msg),
			 "kvsplice-adapter: the inference server sent nothing for %u s (%s)",
			 a->cfg.stall_s, j->errbuf[0] ? j->errbuf : curl_easy_strerror(res));
		send_error(j, KVS_E_TIMEOUT, msg);
	} else if (res != CURLE_OK) {
		snprintf(msg, sizeof(msg), "kvsplice-adapter: inference server %s: %s",
			 a->cfg.server, j->errbuf[0] ? j->errbuf : curl_easy_strerror(res));
		send_error(j, KVS_E_BACKEND_GONE, msg);
	} else if (!j->usage.has_usage) {
		send_error(j, KVS_E_BACKEND_GONE,
			   kvs_sse_pending(&j->sse) ?
				   "kvsplice-adapter: the server's stream ended "
				   "before the response was complete (mid-event)" :
				   "kvsplice-adapter: the server's stream ended "
				   "before the response was complete");
	} else {
		send_end(j); /* the usage came, [DONE] did not */
	}
	job_free(j);
	dispatch(a);
}

/*
 * A transfer still open a moment after its [DONE] ends here. The END went
 * at [DONE]; what a server owes after it is the end of its body (the last
 * chunk, or its close), which comes at once. One that keeps the
 * connection open, silent, held it, one of --max-connections, until
 * --stall-timeout (curl's speed check), and the requests queued behind it
 * waited as long.
 * Not ended at [DONE] itself: that would close every connection before
 * its last chunk was read, a new connection per request (a handshake, a
 * socket in TIME_WAIT here for each). Removing the handle closes the
 * connection: a server that held it cannot use it for another request.
 */
static bool held_after_done(struct job *j, uint64_t now_ns)
{
	struct adapter *a = j->a;

	if (!j->answered || now_ns - j->t_event < DONE_GRACE_NS)
		return false;
	a->stats.held_after_done++;
	if (a->stats.held_after_done == 1 || !(a->stats.held_after_done % 1000))
		pr_info("event=server_held_after_done server=%s count=%llu hint=\"the server "
			"kept the connection open after [DONE]: ended by the adapter\"",
			a->cfg.server, (unsigned long long)a->stats.held_after_done);
	job_free(j);
	return true;
}

/*
 * A stream that brings no event for --stall-timeout fails with timeout.
 * curl's own check (CURLOPT_LOW_SPEED_*) counts bytes, and a server that
 * sends only keep-alive comments (": ping"), or a line a byte at a time,
 * sends bytes: its request was held for ever, its client's and the
 * gateway's count with it. (The loop wakes at least once a second while a
 * transfer runs: curl's own speed check.)
 * Not a whole answer (a request that asked for no stream): the server
 * sends nothing until it has generated all of it, and silence is not a
 * stall; a long answer failed with timeout (504 at the front) while the
 * server was working, and the openai clients asked for it twice more.
 * The client's own timeout bounds it (its CANCEL: job_cancel).
 */
void job_check_stalls(struct adapter *a, uint64_t now_ns)
{
	uint64_t max = (uint64_t)a->cfg.stall_s * 1000000000ull;
	struct job *j, *next;
	char msg[160];
	uint32_t i;

	if (now_ns < a->next_stall_check_ns) /* a walk of every job: 10 a second */
		return;
	a->next_stall_check_ns = now_ns + 100000000ull;
	for (i = 0; i < a->nlinks; i++)
		for (j = a->links[i]->jobs; j; j = next) {
			next = j->link_next;
			if (!j->active || held_after_done(j, now_ns) || j->answered || j->paused ||
			    whole(j) || now_ns - j->t_event < max)
				continue;
			snprintf(msg, sizeof(msg),
				 "kvsplice-adapter: the inference server sent nothing for %u s "
				 "(no event: keep-alive comments at most)",
				 a->cfg.stall_s);
			send_error(j, KVS_E_TIMEOUT, msg);
			job_free(j);
		}
	dispatch(a);
}

/*
 * Whether closing a request's connection stops its generation. vLLM and
 * SGLang abort any request whose client disconnects. llama.cpp's server
 * stops a stream (its next write fails) but not a whole answer: it
 * generates it to the end for nobody (seen with curl alone), and a
 * request sent in its place waited for it, beyond the slots the adapter
 * counts (state_conn_cap). Another server is not known to stop either.
 */
static bool close_stops(const struct job *j)
{
	return !whole(j) || j->a->st.kind == OAI_VLLM || j->a->st.kind == OAI_SGLANG;
}

/*
 * Its client is gone. A job at the server whose generation a close would
 * not stop is parked, not freed: its transfer (its connection, counted in
 * a->active) stays until the server answers or closes (job_done), so the
 * server never has more requests from the adapter than its cap. Its
 * answer is dropped (on_body). Anything else is freed (the connection
 * closed). Only the job's client side is undone here: the caller has sent
 * whatever was owed.
 */
static void park_or_free(struct job *j)
{
	struct adapter *a = j->a;

	/* Its body begun (or paused, the link behind), the server has
	 * answered already: nothing goes on at the server to wait for. */
	if (!j->active || j->body_began || close_stops(j)) {
		job_free(j);
		return;
	}
	unlink_job(j);
	j->l = NULL;
	j->link_next = a->parked;
	if (a->parked)
		a->parked->link_prev = j;
	a->parked = j;
	a->nparked++;
	a->stats.parked++;
	if (a->stats.parked == 1 || !(a->stats.parked % 1000))
		pr_info("event=cancel_kept server=%s count=%llu hint=\"a request that asked for no "
			"stream was cancelled; the server does not stop one when its connection "
			"closes: kept, and counted, until it answers\"",
			a->cfg.server, (unsigned long long)a->stats.parked);
}

void job_cancel(struct adapter *a, struct link *l, const struct kvs_msg *m)
{
	struct job *j = find(a, l, m);

	if (!j) /* finished already, or never ours: nothing to stop */
		return;
	a->stats.cancels++;
	/* Removing the handle closes its connection: vLLM and SGLang stop
	 * generating when the client goes, llama.cpp a stream (close_stops). */
	if (!j->answered)
		send_error(j, KVS_E_CANCELLED, "kvsplice-adapter: cancelled");
	park_or_free(j);
	dispatch(a);
}

void job_drop_link(struct adapter *a, struct link *l)
{
	while (l->jobs)
		park_or_free(l->jobs);
	dispatch(a);
}

void job_stop_all(struct adapter *a)
{
	while (a->parked)
		job_free(a->parked);
}

void job_resume_link(struct adapter *a, struct link *l)
{
	struct job *j, *next;

	l->paused = false;
	for (j = l->jobs; j; j = next) {
		next = j->link_next;
		if (j->paused) {
			j->paused = false;
			j->t_event = kvs_now_ns(); /* a pause is the gateway's, not a stall */
			curl_easy_pause(j->h, CURLPAUSE_CONT);
		}
	}
}
