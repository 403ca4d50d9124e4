// SPDX-License-Identifier: MIT
/*
 * The HTTP side: the OpenAI endpoints, each POST one KVS1 REQUEST in
 * flight ("call"), and the replies written as frames come back: a
 * streamed call's CHUNKs (the server's SSE bytes) straight to the client,
 * a non-streamed call's assembled and sent at its END. A client that
 * leaves cancels its call; a KVS1 ERROR becomes an OpenAI error (an error
 * event once a stream has begun).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "canon.h"
#include "chash.h"
#include "front.h"
#include "netutil.h"
#include "oaierr.h"

/* A refusal later than this after the request went is not retried (it came
 * from past the gateway, a server's): bodies are kept no longer for it. */
#define RETRY_WINDOW_NS 1000000000ull
#define SWEEP_MS 250

struct call {
	struct calls *cs;
	struct evhttp_request *req; /* the client's; NULL once it has left */
	struct link *l;		    /* the link it went on; NULL while waiting */
	uint64_t id;		    /* its req_id */
	/* Until it is sent; with several gateways, until its first answer or
	 * RETRY_WINDOW_NS (to send it again: retry()) */
	struct canon_req body;
	uint64_t sent_ns; /* when it went on l */
	uint64_t salt;
	bool stream, started;
	bool answered; /* a CHUNK or END came */
	/* Refused at once by a gateway and sent again, to another (retry()):
	 * that gateway's link, and its refusal, the answer if no other can
	 * take it after all. */
	bool retried;
	const struct link *avoid;
	int refused_status;
	char refused_msg[200];
	struct evbuffer *acc;	    /* not streamed: the response so far */
	struct event *watch;	    /* the client's socket, for its leaving early */
	struct call *qnext, *qprev; /* waiting for a link */
};

struct calls {
	struct event_base *base;
	const struct front_config *cfg;
	struct links *ls;
	struct clients *cl;
	struct front_stats *st;
	struct kvs_idmap byid; /* every call, by req_id */
	struct call *qhead, *qtail;
	uint64_t next_id;
	struct evbuffer *chunk; /* a CHUNK on its way out: one, reused */
	struct event *sweep;	/* lets go of bodies kept RETRY_WINDOW_NS */
};

/* Bodies kept for a retry that can no longer come: a walk of every call
 * each SWEEP_MS (a few thousand slots at most). */
static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	struct calls *cs = arg;
	uint64_t now = kvs_now_ns();
	uint32_t i;

	(void)fd;
	(void)what;
	for (i = 0; i <= cs->byid.mask && cs->byid.slots; i++) {
		struct call *c = cs->byid.slots[i].val;

		if (cs->byid.slots[i].id && c->l && c->body.body &&
		    now - c->sent_ns > RETRY_WINDOW_NS)
			canon_free(&c->body);
	}
}

struct calls *calls_new(struct event_base *base, const struct front_config *cfg, struct links *ls,
			struct clients *cl, struct front_stats *st)
{
	struct calls *cs = calloc(1, sizeof(*cs));

	if (!cs)
		return NULL;
	cs->base = base;
	cs->cfg = cfg;
	cs->ls = ls;
	cs->cl = cl;
	cs->st = st;
	cs->chunk = evbuffer_new();
	/* With one gateway there is nowhere to retry: bodies go once sent. */
	if (cfg->ngateways > 1) {
		struct timeval tv = { 0, SWEEP_MS * 1000 };

		cs->sweep = event_new(base, -1, EV_PERSIST, on_sweep, cs);
		if (cs->sweep)
			evtimer_add(cs->sweep, &tv);
	}
	if (!cs->chunk || (cfg->ngateways > 1 && !cs->sweep) || kvs_idmap_init(&cs->byid, 1024)) {
		if (cs->chunk)
			evbuffer_free(cs->chunk);
		if (cs->sweep)
			event_free(cs->sweep);
		free(cs);
		return NULL;
	}
	return cs;
}

/* ---- replies ---- */

static void add_header(struct evhttp_request *req, const char *k, const char *v)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), k, v);
}

/* A reply whose body is b. To a HEAD, its headers alone: libevent
 * 2.1 writes the body after them (with no Content-Length), which a client
 * reads as the start of its next response on the connection. */
static void send_reply(struct evhttp_request *req, int status, struct evbuffer *b)
{
	if (b && evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
		char n[24];

		snprintf(n, sizeof(n), "%zu", evbuffer_get_length(b));
		add_header(req, "Content-Length", n);
		evbuffer_drain(b, evbuffer_get_length(b));
	}
	evhttp_send_reply(req, status, NULL, b);
}

static void reply_json(struct evhttp_request *req, int status, const char *body)
{
	struct evbuffer *b = evbuffer_new();

	add_header(req, "Content-Type", "application/json");
	if (b)
		evbuffer_add(b, body, strlen(body));
	send_reply(req, status, b);
	if (b)
		evbuffer_free(b);
}

/* An OpenAI error; the connection stays usable (keep-alive). */
static void reply_error(struct evhttp_request *req, int status, const char *message,
			const char *type, const char *param, const char *code)
{
	char *body = oai_err_body(message, type, param, code);

	reply_json(req, status,
		   body ? body :
			  "{\"error\":{\"message\":\"kvsplice-http: the error message is not "
			  "UTF-8\",\"type\":\"server_error\",\"param\":null,\"code\":null}}");
	free(body);
}

/* ---- calls ---- */

static void on_client_gone(struct evhttp_connection *evcon, void *arg);

static void queue_remove(struct calls *cs, struct call *c)
{
	if (c->qprev)
		c->qprev->qnext = c->qnext;
	else
		cs->qhead = c->qnext;
	if (c->qnext)
		c->qnext->qprev = c->qprev;
	else
		cs->qtail = c->qprev;
	c->qnext = c->qprev = NULL;
}

static bool queued(const struct calls *cs, const struct call *c)
{
	return c->qprev || cs->qhead == c;
}

/* Forgets the call (its reply, if any, has been sent). */
static void call_free(struct call *c)
{
	struct calls *cs = c->cs;

	if (queued(cs, c))
		queue_remove(cs, c);
	kvs_idmap_del(&cs->byid, c->id);
	if (c->req) {
		struct evhttp_connection *evcon = evhttp_request_get_connection(c->req);

		if (evcon)
			clients_on_close(cs->cl, evcon, NULL, NULL);
	}
	canon_free(&c->body);
	if (c->acc)
		evbuffer_free(c->acc);
	if (c->watch)
		event_free(c->watch);
	free(c);
}

/* Stops the call's request at the server. The call leaves its link first:
 * a send that fails loses the link, and on_lost must not answer the call
 * a second time. */
static void send_cancel(struct call *c)
{
	struct kvs_msg m = { .type = KVS_T_CANCEL, .req_id = c->id };
	struct link *l = c->l;

	c->l = NULL;
	if (l)
		link_send(l, &m, NULL, 0);
}

/* The call ends with an error: an HTTP error, or an error event and the
 * end of a stream already begun. */
static void call_fail(struct call *c, int status, const char *message, const char *type,
		      const char *code)
{
	struct evhttp_request *req = c->req;

	c->cs->st->errors++;
	if (!req) {
		call_free(c);
		return;
	}
	if (c->started) {
		char *body = oai_err_body(message, type, NULL, code);
		struct evbuffer *b = evbuffer_new();

		if (b && body) {
			evbuffer_add_printf(b, "data: %s\n\n", body);
			evhttp_send_reply_chunk(req, b);
		}
		if (b)
			evbuffer_free(b);
		free(body);
		call_free(c);
		evhttp_send_reply_end(req);
		return;
	}
	call_free(c);
	reply_error(req, status, message, type, NULL, code);
}

static void fail_kvs(struct call *c, int kvs_status, const char *message)
{
	struct oai_err e = oai_err_of_kvs(kvs_status, message);

	call_fail(c, e.status, message, e.type, e.code);
}

/* Sends waiting calls while a link has room. With no link up at all they
 * fail at once (503: clients retry), rather than wait without bound. */
static void dispatch(struct calls *cs)
{
	uint64_t now = kvs_now_ns();

	while (cs->qhead) {
		struct call *c = cs->qhead;
		struct link *l = links_pick(cs->ls, c->avoid, now);
		struct kvs_msg m = {
			.type = KVS_T_REQUEST,
			.flags = c->body.flags,
			.req_id = c->id,
			.cache_salt = c->salt,
			.model_id = c->body.model_id,
			.prefix_len = c->body.prefix_len,
			.max_tokens = c->body.max_tokens,
		};

		if (!l) {
			if (c->avoid && !links_other_live(cs->ls, c->avoid)) {
				queue_remove(cs, c);
				fail_kvs(c, c->refused_status, c->refused_msg);
				continue;
			}
			if (links_up(cs->ls) || links_connecting(cs->ls))
				return; /* all full, or coming up: an END or on_ready */
			queue_remove(cs, c);
			if (links_going(cs->ls)) /* what the gateway would have said */
				fail_kvs(c, KVS_E_BUSY, "kvsplice-http: the gateway is stopping");
			else
				fail_kvs(c, KVS_E_NO_BACKEND,
					 "kvsplice-http: no connection to the gateway");
			continue;
		}
		queue_remove(cs, c);
		if (link_send(l, &m, c->body.body, (uint32_t)c->body.len)) {
			fail_kvs(c, KVS_E_BACKEND_GONE,
				 "kvsplice-http: the gateway connection failed");
			continue;
		}
		c->l = l;
		c->sent_ns = now;
		if (!cs->sweep)
			canon_free(&c->body);
	}
}

static void queue_front(struct calls *cs, struct call *c)
{
	c->qprev = NULL;
	c->qnext = cs->qhead;
	if (cs->qhead)
		cs->qhead->qprev = c;
	else
		cs->qtail = c;
	cs->qhead = c;
}

/* An ERROR the gateway sent for a reason of its own (no backend up there,
 * or it is stopping or full), before any answer and within the retry
 * window (the body is still kept): the request reached no server. */
static bool refused_at_once(const struct call *c, int status)
{
	return c->body.body && (status == KVS_E_NO_BACKEND || status == KVS_E_BUSY);
}

/*
 * A request the gateway on l refused at once goes once more, to another
 * gateway, if one has a link up or coming up (the front has not answered
 * the client yet). False: it fails as it is.
 */
static bool retry(struct call *c, struct link *l, int status, const char *msg)
{
	struct calls *cs = c->cs;

	if (c->retried || !refused_at_once(c, status) || !links_other_live(cs->ls, l))
		return false;
	c->retried = true;
	c->avoid = l;
	c->l = NULL;
	c->refused_status = status;
	snprintf(c->refused_msg, sizeof(c->refused_msg), "%.199s", msg);
	cs->st->retried++;
	pr_info("event=request_retried req=%llu status=%s", (unsigned long long)c->id,
		kvs_status_name(status));
	queue_front(cs, c);
	return true;
}

void calls_on_ready(void *ctx)
{
	dispatch(ctx);
}

/* The client left: its call is cancelled (the server stops generating). */
static void on_client_gone(struct evhttp_connection *evcon, void *arg)
{
	struct call *c = arg;
	struct evhttp_request *req = c->req;

	(void)evcon;
	c->cs->st->cancelled++;
	send_cancel(c);
	c->req = NULL;
	call_free(c);
	/* libevent detaches a request its client left before it was
	 * answered, and leaves it to its owner; one still attached (the
	 * front shutting down) it frees itself. */
	if (req && !evhttp_request_get_connection(req))
		evhttp_request_free(req);
}

/*
 * libevent reads nothing from a connection while its request waits for an
 * answer, so a client that leaves before the first byte of it (a whole
 * response, a stream not begun) would be noticed only when the answer is
 * written, and its server would generate all of it for nobody. The call
 * watches the socket itself: end of file, or an error, closes the
 * connection, and the close cancels the call (on_client_gone). Bytes
 * waiting to be read (a pipelined request) end the watch: they are
 * libevent's.
 */
static void on_client_readable(evutil_socket_t fd, short what, void *arg)
{
	struct call *c = arg;
	char byte;
	ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);

	(void)what;
	if (n > 0)
		return;
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		event_add(c->watch, NULL);
		return;
	}
	evhttp_connection_free(evhttp_request_get_connection(c->req));
}

/* The client connection's bufferevent; NULL once the connection is gone. */
static struct bufferevent *client_bev(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);

	return evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
}

static void watch_client(struct call *c)
{
	struct bufferevent *bev = client_bev(c->req);
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;

	if (fd < 0)
		return;
	c->watch = event_new(c->cs->base, fd, EV_READ, on_client_readable, c);
	if (c->watch)
		event_add(c->watch, NULL);
}

/* Bytes the client has not read yet: above --max-buffered it is too slow
 * to follow its own stream. */
static size_t unread(struct evhttp_request *req)
{
	struct bufferevent *bev = client_bev(req);

	return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

static void start_stream(struct call *c)
{
	add_header(c->req, "Content-Type", "text/event-stream");
	add_header(c->req, "Cache-Control", "no-cache");
	evhttp_send_reply_start(c->req, 200, "OK");
	c->started = true;
	c->cs->st->streamed++;
}

static void on_chunk(struct call *c, const uint8_t *p, uint32_t len)
{
	struct evbuffer *b = c->cs->chunk;

	c->cs->st->chunks++;
	c->cs->st->chunk_bytes += len;
	canon_free(&c->body); /* served: it will not be sent again */
	if (!c->stream) {
		if (evbuffer_add(c->acc, p, len) ||
		    evbuffer_get_length(c->acc) > c->cs->cfg->max_buffered * 4ull) {
			send_cancel(c);
			call_fail(c, 502, "kvsplice-http: the response is larger than it keeps",
				  "server_error", NULL);
		}
		return;
	}
	if (!c->started)
		start_stream(c);
	if (unread(c->req) > c->cs->cfg->max_buffered) {
		send_cancel(c);
		pr_info("event=slow_client req=%llu unread=%zu", (unsigned long long)c->id,
			unread(c->req));
		call_fail(c, 500, "kvsplice-http: the client reads too slowly (--max-buffered)",
			  "server_error", NULL);
		return;
	}
	/* Sending moves the bytes out; the drain is for a connection that
	 * went, which leaves them. */
	if (!evbuffer_add(b, p, len))
		evhttp_send_reply_chunk(c->req, b);
	evbuffer_drain(b, evbuffer_get_length(b));
}

/* A whole response's headers say which backend served it and what its
 * cache gave (the END's figures): for operators following routing. */
static void on_end(struct call *c, const uint8_t *payload, uint32_t len)
{
	struct evhttp_request *req = c->req;
	struct evbuffer *acc = c->acc;
	struct kvs_end_info e;
	char v[16];

	c->cs->st->completed++;
	if (c->stream) {
		if (!c->started)
			start_stream(c);
		call_free(c);
		evhttp_send_reply_end(req);
		return;
	}
	c->acc = NULL;
	call_free(c);
	add_header(req, "Content-Type", "application/json");
	if (len == sizeof(struct kvs_end)) {
		kvs_end_decode(payload, &e);
		snprintf(v, sizeof(v), "%u", e.backend_id);
		add_header(req, "X-Kvsplice-Backend", v);
		snprintf(v, sizeof(v), "%u", e.cached_tokens);
		add_header(req, "X-Kvsplice-Cached-Tokens", v);
	}
	evhttp_send_reply(req, 200, "OK", acc);
	evbuffer_free(acc);
}

void calls_on_frame(void *ctx, struct link *l, const struct kvs_msg *m, const uint8_t *payload)
{
	struct calls *cs = ctx;
	struct call *c = kvs_idmap_get(&cs->byid, m->req_id);
	char msg[512];

	if (!c || c->l != l) /* ended, or cancelled: late frames are dropped */
		return;
	switch (m->type) {
	case KVS_T_CHUNK:
		if (!c->answered) /* its first answer */
			links_served(cs->ls, l, c->sent_ns);
		c->answered = true;
		on_chunk(c, payload, m->payload_len);
		break;
	case KVS_T_END:
		if (!c->answered)
			links_served(cs->ls, l, c->sent_ns);
		on_end(c, payload, m->payload_len);
		break;
	case KVS_T_ERROR:
		snprintf(msg, sizeof(msg), "%.*s",
			 (int)(m->payload_len < sizeof(msg) - 1 ? m->payload_len : sizeof(msg) - 1),
			 (const char *)payload);
		if (m->status == KVS_E_BUSY)
			cs->st->rejected_busy++;
		if (refused_at_once(c, m->status))
			links_refused(cs->ls, l, kvs_now_ns());
		if (!retry(c, l, m->status, msg))
			fail_kvs(c, m->status, msg);
		break;
	default:
		break;
	}
	dispatch(cs); /* an END or ERROR made room on the link */
}

void calls_on_lost(void *ctx, struct link *l)
{
	struct calls *cs = ctx;
	uint32_t i;

	cs->st->link_failures++;
	/* Calls are found by id; a lost link is rare enough to walk them. A
	 * deletion moves only later slots back into the hole (or, wrapping,
	 * slot 0's to the end, already seen): look at slot i again rather
	 * than walk from the start, which made the walk quadratic. */
	for (i = 0; i <= cs->byid.mask && cs->byid.slots; i++) {
		struct call *c = cs->byid.slots[i].val;

		if (cs->byid.slots[i].id && c->l == l) {
			fail_kvs(c, KVS_E_BACKEND_GONE,
				 "kvsplice-http: the connection to the gateway was lost");
			i--; /* wraps to -1 at slot 0; i++ brings it back */
		}
	}
	dispatch(cs); /* with no link left, the waiting ones get 503 now */
}

/* ---- endpoints ---- */

static uint64_t tenant_salt(const struct calls *cs, struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	const char *v = NULL;

	if (cs->cfg->tenant == FRONT_TENANT_AUTHORIZATION)
		v = evhttp_find_header(h, "Authorization");
	else if (cs->cfg->tenant == FRONT_TENANT_HEADER)
		v = evhttp_find_header(h, cs->cfg->tenant_header);
	return v && *v ? kvs_str_hash(v) : 0;
}

static void post_completion(struct calls *cs, struct evhttp_request *req, enum canon_endpoint ep)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	char err[320], param[64];
	const char *enc;
	struct call *c;
	int r;

	cs->st->requests++;
	if (len > cs->cfg->max_body) {
		snprintf(err, sizeof(err),
			 "kvsplice-http: the request body is %zu bytes; at most %u are taken "
			 "(--max-body)",
			 len, cs->cfg->max_body);
		cs->st->bad_requests++;
		reply_error(req, 413, err, "invalid_request_error", NULL, "request_too_large");
		return;
	}
	if (cs->byid.count >= cs->cfg->max_inflight) {
		snprintf(err, sizeof(err),
			 "kvsplice-http: %u requests are in flight, the most it takes "
			 "(--max-inflight)",
			 cs->cfg->max_inflight);
		cs->st->rejected_busy++;
		reply_error(req, 429, err, "rate_limit_error", NULL, "server_busy");
		return;
	}
	enc = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Encoding");
	if (enc && *enc && strcasecmp(enc, "identity")) {
		/* read as JSON, a gzip'ed body was "not valid JSON" near its
		 * first byte, and any other label passed unread; llama-server
		 * and vLLM answer 415 too */
		snprintf(err, sizeof(err),
			 "kvsplice-http: a body with Content-Encoding '%.64s' is not taken; send "
			 "it uncompressed",
			 enc);
		cs->st->bad_requests++;
		reply_error(req, 415, err, "invalid_request_error", NULL, "unsupported_media_type");
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		reply_error(req, 500, "kvsplice-http: out of memory", "server_error", NULL, NULL);
		return;
	}
	r = canon_request(ep, (const char *)evbuffer_pullup(in, -1), len, &c->body, err,
			  sizeof(err), param, sizeof(param));
	/* The body is read (into its canonical copy, itself freed at the
	 * first answer, kept until then for a retry): libevent would keep it
	 * until the response ends, minutes for a stream, --max-inflight
	 * bodies of up to --max-body each. */
	evbuffer_drain(in, len);
	if (r) {
		free(c);
		cs->st->bad_requests++;
		reply_error(req, r == -ENOMEM ? 500 : 400, err,
			    r == -ENOMEM ? "server_error" : "invalid_request_error",
			    param[0] ? param : NULL, NULL);
		return;
	}
	if (c->body.len > cs->cfg->max_frame) {
		snprintf(err, sizeof(err),
			 "kvsplice-http: the request is %zu bytes as KVS1 sends it; the gateway "
			 "takes at most %u (--max-frame)",
			 c->body.len, cs->cfg->max_frame);
		canon_free(&c->body);
		free(c);
		cs->st->bad_requests++;
		reply_error(req, 413, err, "invalid_request_error", NULL, "request_too_large");
		return;
	}
	c->cs = cs;
	c->req = req;
	c->id = ++cs->next_id;
	c->salt = tenant_salt(cs, req);
	c->stream = c->body.flags & KVS_F_STREAM;
	if ((!c->stream && !(c->acc = evbuffer_new())) || kvs_idmap_put(&cs->byid, c->id, c)) {
		if (c->acc)
			evbuffer_free(c->acc);
		canon_free(&c->body);
		free(c);
		reply_error(req, 500, "kvsplice-http: out of memory", "server_error", NULL, NULL);
		return;
	}
	clients_on_close(cs->cl, evhttp_request_get_connection(req), on_client_gone, c);
	watch_client(c);
	if (cs->qtail) {
		cs->qtail->qnext = c;
		c->qprev = cs->qtail;
	} else {
		cs->qhead = c;
	}
	cs->qtail = c;
	dispatch(cs);
}

/* One model as GET /v1/models lists it. */
static void add_model(struct evbuffer *b, const char *name)
{
	json_t *id = json_string(name);
	char *s = id ? json_dumps(id, JSON_ENCODE_ANY) : NULL;

	evbuffer_add_printf(
		b, "{\"id\":%s,\"object\":\"model\",\"created\":0,\"owned_by\":\"kvsplice\"}",
		s ? s : "\"?\"");
	free(s);
	json_decref(id);
}

static void get_models(struct calls *cs, struct evhttp_request *req)
{
	struct evbuffer *b = evbuffer_new();
	uint32_t i;

	if (!b) {
		reply_error(req, 500, "kvsplice-http: out of memory", "server_error", NULL, NULL);
		return;
	}
	evbuffer_add_printf(b, "{\"object\":\"list\",\"data\":[");
	for (i = 0; i < cs->cfg->nmodels; i++) {
		if (i)
			evbuffer_add_printf(b, ",");
		add_model(b, cs->cfg->models[i]);
	}
	evbuffer_add_printf(b, "]}");
	add_header(req, "Content-Type", "application/json");
	send_reply(req, 200, b);
	evbuffer_free(b);
}

/* GET /v1/models/NAME (the openai libraries' models.retrieve): the model
 * if --model names it, else OpenAI's 404 model_not_found. NAME is
 * percent-decoded: "org/name" comes as org%2Fname. */
static void get_model(struct calls *cs, struct evhttp_request *req, const char *raw)
{
	char *name = evhttp_uridecode(raw, 0, NULL);
	struct evbuffer *b = NULL;
	char msg[320];
	uint32_t i;

	for (i = 0; name && i < cs->cfg->nmodels; i++)
		if (!strcmp(name, cs->cfg->models[i]))
			break;
	if (!name || i == cs->cfg->nmodels) {
		snprintf(msg, sizeof(msg),
			 "The model '%.200s' does not exist (kvsplice-http --model)",
			 name ? name : raw);
		reply_error(req, 404, msg, "invalid_request_error", "model", "model_not_found");
	} else if ((b = evbuffer_new())) {
		add_model(b, name);
		add_header(req, "Content-Type", "application/json");
		send_reply(req, 200, b);
		evbuffer_free(b);
	} else {
		reply_error(req, 500, "kvsplice-http: out of memory", "server_error", NULL, NULL);
	}
	free(name);
}

static void get_health(struct calls *cs, struct evhttp_request *req)
{
	uint32_t up = links_up(cs->ls);
	char body[384];

	snprintf(body, sizeof(body),
		 "{\"status\":\"%s\",\"gateway_links_up\":%u,\"gateway_links\":%u,"
		 "\"in_flight\":%u,\"connections\":%u,\"connections_refused\":%llu,"
		 "\"sources\":%u,\"connections_refused_source\":%llu,"
		 "\"request_timeouts\":%llu,\"retried\":%llu,\"closes_lingered\":%llu}",
		 up ? "ok" : "no_gateway", up, cs->ls->n, cs->byid.count, clients_open(cs->cl),
		 (unsigned long long)cs->st->connections_refused, clients_sources(cs->cl),
		 (unsigned long long)cs->st->connections_refused_source,
		 (unsigned long long)cs->st->request_timeouts, (unsigned long long)cs->st->retried,
		 (unsigned long long)cs->st->closes_lingered);
	reply_json(req, up ? 200 : 503, body);
}

/* Content-Length headers the request has. */
static int content_lengths(struct evhttp_request *req)
{
	struct evkeyval *h;
	int n = 0;

	TAILQ_FOREACH(h, evhttp_request_get_input_headers(req), next)
	n += !evutil_ascii_strcasecmp(h->key, "Content-Length");
	return n;
}

void calls_on_http(struct evhttp_request *req, void *arg)
{
	struct calls *cs = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	/* HEAD is GET without the body (libevent leaves it out): load
	 * balancers' checks use it. */
	bool post = cmd == EVHTTP_REQ_POST, get = cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD;
	char msg[320];

	clients_request_in(cs->cl, req);
	if (!path)
		path = "";
	if (content_lengths(req) > 1) {
		/* libevent framed the body by the first; a proxy in front may
		 * have framed it by another, and what follows on the
		 * connection is not known to be a request (RFC 9112, 6.3):
		 * answered, then closed. */
		add_header(req, "Connection", "close");
		reply_error(req, 400, "kvsplice-http: the request has more than one Content-Length",
			    "invalid_request_error", NULL, NULL);
	} else if (!strcmp(path, "/v1/chat/completions") && post) {
		post_completion(cs, req, CANON_CHAT);
	} else if (!strcmp(path, "/v1/completions") && post) {
		post_completion(cs, req, CANON_COMPLETIONS);
	} else if ((!strcmp(path, "/v1/models") || !strcmp(path, "/v1/models/")) && get) {
		get_models(cs, req);
	} else if (!strncmp(path, "/v1/models/", 11) && path[11] && get) {
		get_model(cs, req, path + 11);
	} else if (!strcmp(path, "/health") && get) {
		get_health(cs, req);
	} else if (!strcmp(path, "/v1/chat/completions") || !strcmp(path, "/v1/completions") ||
		   !strcmp(path, "/v1/models") || !strncmp(path, "/v1/models/", 11) ||
		   !strcmp(path, "/health")) {
		snprintf(msg, sizeof(msg), "kvsplice-http: %s takes %s", path,
			 strstr(path, "completions") ? "POST" : "GET");
		add_header(req, "Allow", strstr(path, "completions") ? "POST" : "GET");
		reply_error(req, 405, msg, "invalid_request_error", NULL, "method_not_allowed");
	} else {
		snprintf(msg, sizeof(msg),
			 "Invalid URL (%.200s): kvsplice-http serves "
			 "/v1/chat/completions, /v1/completions, /v1/models[/NAME] and /health",
			 path);
		reply_error(req, 404, msg, "invalid_request_error", NULL, "unknown_url");
	}
}

void calls_free(struct calls *cs)
{
	uint32_t i;

	if (!cs)
		return;
	for (i = 0; i <= cs->byid.mask && cs->byid.slots; i++)
		if (cs->byid.slots[i].id) {
			struct call *c = cs->byid.slots[i].val;

			call_free(c); /* evhttp_free then frees its request */
			i--;	      /* the slot again: see calls_on_lost */
		}
	kvs_idmap_free(&cs->byid);
	evbuffer_free(cs->chunk);
	if (cs->sweep)
		event_free(cs->sweep);
	free(cs);
}
