// SPDX-License-Identifier: MIT
/*
 * kvsplice-sim's KVS1 server: connections, frames in and out, the engine
 * stepped on a timer (each step's modeled duration, times --time-scale),
 * one CHUNK per token and an END with the figures after a request's last.
 */
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "codec.h"
#include "frameorder.h"
#include "kvsplice/hash.h"
#include "log.h"
#include "oai.h"
#include "prompt.h"

#define TX_LIMIT (64u << 20)

struct sim_conn {
	struct sim_conn *prev, *next; /* all live connections, for shutdown */
	int fd;
	struct kvs_buf rx, tx;
	bool dead;     /* closed by the peer; freed when no request needs it */
	uint32_t refs; /* queued or running requests answering on it */
	bool want_out;
	bool tx_cut;   /* a send may have left tx's first frame in part */
	uint64_t peer; /* the peer's host (kvs_peer_host) */
};

struct sim_req {
	struct kvs_eng_req eng; /* first: engine events point here */
	struct sim_conn *conn;
	uint64_t req_id, gw_conn;
	uint32_t gw_backend;
	uint32_t declared; /* the REQUEST's max_tokens (eng.max_tokens: what it generates) */
	uint16_t flags;	   /* KVS_F_*: JSON asks for OpenAI-shaped answers (oai.c) */
	uint64_t *hashes;
	struct sim_req *next_live; /* all requests not yet answered */
};

static void conn_put(struct sim_conn *c)
{
	if (--c->refs == 0 && c->dead) {
		/* unlinked from sim.conns when it was closed */
		close(c->fd);
		kvs_buf_free(&c->rx);
		kvs_buf_free(&c->tx);
		free(c);
	}
}

/* What is queued goes out, each client's frames together
 * (kvs_frames_by_client): a step's answers are queued whole (in_step) and
 * so go in one write, a client's CHUNKs and ENDs back to back, which the
 * gateway's kernel path redirects at once (bpf/datapath/response.bpf.h,
 * response_run), as an engine hands a step's outputs over together. Not
 * while a frame is part sent: its rest must go first. */
static void conn_flush(struct sim *s, struct sim_conn *c)
{
	struct epoll_event ev = { .data.ptr = c };

	if (!c->tx_cut && c->tx.len > KVS_HDR_LEN)
		kvs_frames_by_client(kvs_buf_head(&c->tx), c->tx.len);
	while (c->tx.len && !c->dead) {
		ssize_t w = send(c->fd, kvs_buf_head(&c->tx), c->tx.len, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				kvs_buf_consume(&c->tx, c->tx.len); /* peer gone */
			break;
		}
		kvs_buf_consume(&c->tx, (size_t)w);
	}
	c->tx_cut = c->tx.len > 0;
	if (c->dead || c->want_out == (c->tx.len > 0))
		return;
	c->want_out = c->tx.len > 0;
	ev.events = EPOLLIN | EPOLLRDHUP | (c->want_out ? EPOLLOUT : 0);
	epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void reply(struct sim *s, struct sim_req *r, struct kvs_msg *m, const void *p, uint32_t len)
{
	if (r->conn->dead)
		return;
	m->req_id = r->req_id;
	m->gw_conn = r->gw_conn;
	m->gw_backend = r->gw_backend;
	if (kvs_put_frame(&r->conn->tx, m, p, len))
		pr_warn("event=tx_overflow req=%llu", (unsigned long long)r->req_id);
	if (!s->in_step)
		conn_flush(s, r->conn);
}

/* Model time now: real time since start, divided by the time scale. */
static double model_now(const struct sim *s)
{
	double real_ms = (double)(kvs_now_ns() - s->t0_ns) / 1e6;

	return s->time_scale > 0 ? real_ms / s->time_scale : real_ms;
}

static void arm_timer(struct sim *s, double model_ms)
{
	double ns = model_ms * s->time_scale * 1e6;
	struct itimerspec it = { 0 };

	if (ns < 1000)
		ns = 1000; /* 0 would disarm the timer */
	it.it_value.tv_sec = (time_t)(ns / 1e9);
	it.it_value.tv_nsec = (long)(ns - (double)it.it_value.tv_sec * 1e9);
	timerfd_settime(s->tfd, 0, &it, NULL);
}

static void req_free(struct sim *s, struct sim_req *r)
{
	struct sim_req **pp;

	for (pp = &s->live; *pp && *pp != r; pp = &(*pp)->next_live)
		;
	if (*pp)
		*pp = r->next_live;
	conn_put(r->conn);
	free(r->hashes);
	free(r);
}

static uint32_t real_us(const struct sim *s, double model_ms)
{
	double us = model_ms * (s->time_scale > 0 ? s->time_scale : 1) * 1000;

	return us > 0 ? (uint32_t)us : 0;
}

/* OpenAI-shaped output (a JSON request), built in s->oai: as CHUNKs, each
 * at most the largest frame; s->oai is emptied for the next. */
static void reply_oai(struct sim *s, struct sim_req *r)
{
	struct kvs_msg m = { .type = KVS_T_CHUNK };
	const uint8_t *p = kvs_buf_head(&s->oai);
	size_t n = s->oai.len;

	while (n) {
		uint32_t k = n > s->max_payload ? s->max_payload : (uint32_t)n;

		reply(s, r, &m, p, k);
		p += k;
		n -= k;
	}
	kvs_buf_consume(&s->oai, s->oai.len);
}

static void finish_json(struct sim *s, struct sim_req *r)
{
	struct sim_oai_usage u = {
		.prompt_tokens = r->eng.prompt_tokens,
		.cached_tokens = r->eng.cached_tokens,
		.completion_tokens = r->eng.emitted,
		.length = r->declared && r->eng.emitted >= r->declared,
	};
	bool chat = r->flags & KVS_F_CHAT;

	if (r->flags & KVS_F_STREAM ? sim_oai_last(&s->oai, r->req_id, chat, &u) :
				      sim_oai_whole(&s->oai, r->req_id, chat, r->eng.emitted, &u))
		kvs_buf_consume(&s->oai, s->oai.len); /* no memory: the END still ends it */
	reply_oai(s, r);
}

static void finish(struct sim *s, struct sim_req *r)
{
	struct kvs_end_info e = {
		.prompt_tokens = r->eng.prompt_tokens,
		.cached_tokens = r->eng.cached_tokens,
		.output_tokens = r->eng.emitted,
		.queue_us = real_us(s, r->eng.start_ms - r->eng.arrival_ms),
		.prefill_us = real_us(s, r->eng.first_ms - r->eng.start_ms),
		.decode_us = real_us(s, r->eng.end_ms - r->eng.first_ms),
		.backend_id = s->id,
	};
	uint8_t payload[sizeof(struct kvs_end)];
	struct kvs_msg m = { .type = KVS_T_END };

	if (r->flags & KVS_F_JSON)
		finish_json(s, r);
	kvs_end_encode(&e, payload);
	reply(s, r, &m, payload, sizeof(payload));
	s->served++;
	s->cached_tokens_total += r->eng.cached_tokens;
	s->prompt_tokens_total += r->eng.prompt_tokens;
	pr_debug("event=served req=%llu prompt_tokens=%u cached_tokens=%u max_tokens=%u "
		 "output_tokens=%u",
		 (unsigned long long)r->req_id, r->eng.prompt_tokens, r->eng.cached_tokens,
		 r->declared, r->eng.emitted);
	req_free(s, r);
}

/* Plan the next step if there is work and none is running. */
static void kick(struct sim *s)
{
	struct kvs_eng_event *ev;
	uint32_t n;
	double dur;

	if (s->stepping || kvs_engine_idle(&s->eng))
		return;
	s->step_start = model_now(s);
	dur = kvs_engine_step(&s->eng, s->step_start, &ev, &n);
	if (dur <= 0 && n == 0)
		return; /* waiting requests that do not fit yet */
	s->stepping = true;
	arm_timer(s, dur);
}

/* The running step is over: send what it produced, then plan the next. */
static void on_timer(struct sim *s)
{
	struct kvs_msg m = { .type = KVS_T_CHUNK };
	uint8_t tok[KVS_TOKEN_TEXT_LEN];
	struct sim_conn *c;
	uint64_t exp;
	uint32_t i;

	if (read(s->tfd, &exp, sizeof(exp)) < 0 || !s->stepping)
		return;
	s->stepping = false;
	s->in_step = true;
	for (i = 0; i < s->eng.nevents_last; i++) {
		struct kvs_eng_event *ev = &s->eng.events[i];
		struct sim_req *r = (struct sim_req *)ev->req;

		if (r->eng.emitted > 0 && (r->flags & KVS_F_JSON)) {
			kvs_token_text(r->req_id, r->eng.emitted - 1, tok);
			if ((r->flags & KVS_F_STREAM) &&
			    sim_oai_token(&s->oai, r->req_id, r->flags & KVS_F_CHAT, tok,
					  sizeof(tok)))
				kvs_buf_consume(&s->oai, s->oai.len);
			reply_oai(s, r);
		} else if (r->eng.emitted > 0) {
			/* one token per request per step: this one's index */
			kvs_token_text(r->req_id, r->eng.emitted - 1, tok);
			reply(s, r, &m, tok, sizeof(tok));
		}
		if (ev->done)
			finish(s, r);
	}
	s->in_step = false;
	for (c = s->conns; c; c = c->next)
		if (c->tx.len)
			conn_flush(s, c);
	kick(s);
}

/*
 * Tokens a request generates: its max_tokens (0: none, as ever), unless
 * its prompt ends with an end-of-sequence marker (prompt.h) that says the
 * answer stops sooner, as a real model stops at its end of sequence. With
 * no max_tokens declared, the marker alone decides.
 */
static uint32_t output_len(const struct kvs_msg *m, const uint8_t *prompt)
{
	uint32_t eos;

	if (!kvs_eos_parse(prompt, m->payload_len, &eos))
		return m->max_tokens;
	return m->max_tokens && m->max_tokens < eos ? m->max_tokens : eos;
}

static int enqueue(struct sim *s, struct sim_conn *c, const struct kvs_msg *m,
		   const uint8_t *prompt)
{
	struct sim_req *r = calloc(1, sizeof(*r));
	uint32_t nblocks = m->payload_len / KVS_BLOCK_BYTES;

	if (!r)
		return -ENOMEM;
	r->hashes = malloc(sizeof(*r->hashes) * (nblocks ? nblocks : 1));
	if (!r->hashes) {
		free(r);
		return -ENOMEM;
	}
	r->eng.nblocks = (uint32_t)kvs_prefix_hashes(kvs_seed(m->model_id, m->cache_salt), prompt,
						     m->payload_len, r->hashes, nblocks);
	r->eng.hashes = r->hashes;
	r->eng.prompt_tokens = kvs_prompt_tokens(m->payload_len);
	r->declared = m->max_tokens;
	r->flags = m->flags;
	r->eng.max_tokens = output_len(m, prompt);
	r->eng.arrival_ms = model_now(s);
	r->conn = c;
	c->refs++;
	r->req_id = m->req_id;
	r->gw_conn = m->gw_conn;
	r->gw_backend = m->gw_backend;
	if (!kvs_engine_fits(&s->eng, &r->eng)) {
		/* One request's error, on a connection that stays open (it
		 * may be a gateway's, shared by many clients). */
		struct kvs_msg e = { .type = KVS_T_ERROR,
				     .status = KVS_E_TOO_LONG,
				     .req_id = m->req_id,
				     .gw_conn = m->gw_conn,
				     .gw_backend = m->gw_backend };
		static const char msg[] =
			"kvsplice-sim: prompt + max_tokens exceed the KV capacity";

		kvs_put_frame(&c->tx, &e, msg, sizeof(msg) - 1);
		conn_flush(s, c);
		c->refs--;
		free(r->hashes);
		free(r);
		return 0;
	}
	r->next_live = s->live;
	s->live = r;
	kvs_engine_submit(&s->eng, &r->eng);
	kick(s);
	return 0;
}

static void conn_close(struct sim *s, struct sim_conn *c)
{
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->dead = true;
	c->refs++;
	conn_put(c); /* frees it now unless requests still hold it */
}

static void send_error_close(struct sim *s, struct sim_conn *c, uint64_t req_id, int code)
{
	char msg[64];

	snprintf(msg, sizeof(msg), "kvsplice-sim: %s", kvs_status_name(code));
	kvs_put_error(&c->tx, req_id, 0, (uint16_t)code, msg);
	conn_flush(s, c);
	conn_close(s, c);
}

/*
 * A CANCEL: the request it names stops at once (out of the engine's queue or
 * batch, its KV returned) and ends with one ERROR cancelled, sent where the
 * rest of its answer would have gone. It is found by (gw_conn, req_id) among
 * the requests of every connection from the same host: a gateway's pooled
 * connections are shared, and it may send a CANCEL on another one than the
 * request's (a fresh one, once the request's is gone), but another
 * gateway's cookies may be the same numbers. Without a gateway (gw_conn 0)
 * only this connection's requests are candidates. An unknown or answered
 * request is ignored.
 */
static void cancel(struct sim *s, struct sim_conn *c, const struct kvs_msg *m)
{
	static const char msg[] = "kvsplice-sim: cancelled";
	struct kvs_msg e = { .type = KVS_T_ERROR, .status = KVS_E_CANCELLED };
	struct sim_req *r;

	for (r = s->live; r; r = r->next_live)
		if (r->req_id == m->req_id && r->gw_conn == m->gw_conn &&
		    (m->gw_conn ? r->conn->peer == c->peer : r->conn == c))
			break;
	if (!r) {
		s->cancels_ignored++;
		pr_debug("event=cancel_ignored req=%llu gw_conn=%llu",
			 (unsigned long long)m->req_id, (unsigned long long)m->gw_conn);
		return;
	}
	kvs_engine_cancel(&s->eng, &r->eng);
	s->cancelled++;
	pr_debug("event=cancelled req=%llu gw_conn=%llu output_tokens=%u",
		 (unsigned long long)r->req_id, (unsigned long long)r->gw_conn, r->eng.emitted);
	reply(s, r, &e, msg, sizeof(msg) - 1);
	req_free(s, r);
}

/* Serves every whole frame buffered on c. Returns -1 when it closed c
 * (which may have freed it). */
static int on_frames(struct sim *s, struct sim_conn *c)
{
	const uint8_t *frame;
	struct kvs_msg m;
	int r;

	while ((r = kvs_next_frame(&c->rx, s->max_payload, &m, &frame)) != 0) {
		if (r < 0) {
			send_error_close(s, c, m.req_id, -r);
			return -1;
		}
		if (m.type == KVS_T_REQUEST) {
			if (enqueue(s, c, &m, frame + KVS_HDR_LEN)) {
				send_error_close(s, c, m.req_id, KVS_E_INTERNAL);
				return -1;
			}
		} else if (m.type == KVS_T_PING) {
			struct kvs_load_info li = {
				.running = s->eng.nrunning,
				.waiting = s->eng.nwaiting,
				.kv_used_blocks = s->eng.cache.used + s->eng.reserved_blocks,
				.kv_total_blocks = s->eng.cache.max_capacity,
				.backend_id = s->id,
				/* A stand-in for an inference server that is
				 * down or still loading: up, but not ready. */
				.flags = KVS_LOAD_F_KV_BLOCKS |
					 (s->not_ready_file && !access(s->not_ready_file, F_OK) ?
						  KVS_LOAD_F_NOT_READY :
						  0),
			};
			uint8_t payload[sizeof(struct kvs_load)];
			struct kvs_msg pong = { .type = KVS_T_PONG,
						.req_id = m.req_id,
						.instance = s->instance,
						.gw_conn = m.gw_conn };

			kvs_load_encode(&li, payload);
			kvs_put_frame(&c->tx, &pong, payload, sizeof(payload));
			conn_flush(s, c);
		} else if (m.type == KVS_T_CANCEL) {
			cancel(s, c, &m);
		} else {
			send_error_close(s, c, m.req_id, KVS_E_BAD_TYPE);
			return -1;
		}
		kvs_buf_consume(&c->rx, KVS_HDR_LEN + (size_t)m.payload_len);
	}
	return 0;
}

static void on_readable(struct sim *s, struct sim_conn *c)
{
	for (;;) {
		long n = kvs_buf_recv(&c->rx, c->fd, 65536);

		if (n == -EAGAIN)
			return;
		if (n == -ENOBUFS) { /* cannot happen: the cap fits a max frame */
			send_error_close(s, c, 0, KVS_E_TOO_LARGE);
			return;
		}
		if (n <= 0) {
			conn_close(s, c);
			return;
		}
		if (on_frames(s, c))
			return;
	}
}

static void on_accept(struct sim *s)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	struct sim_conn *c;
	int fd;

	while ((fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->peer = kvs_peer_host(fd);
		kvs_buf_init(&c->rx, KVS_HDR_LEN + (size_t)s->max_payload + 65536);
		kvs_buf_init(&c->tx, TX_LIMIT);
		kvs_set_nodelay(fd);
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		ev.data.ptr = c;
		epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
	}
}

int sim_start(struct sim *s, const struct kvs_addr *addr, const char *listen)
{
	struct epoll_event ev;
	int err;

	kvs_buf_init(&s->oai, 0);
	err = kvs_engine_init(&s->eng, &s->model, s->max_seqs);
	if (err) {
		fprintf(stderr, PROG ": cannot allocate the engine: %s\n", strerror(-err));
		return 1;
	}
	s->t0_ns = kvs_now_ns();
	s->lfd = kvs_listen(addr, 256);
	if (s->lfd < 0) {
		fprintf(stderr, PROG ": cannot listen on %s: %s\n", listen, strerror(-s->lfd));
		return 1;
	}
	kvs_set_nonblock(s->lfd, 1);
	if (s->id == UINT32_MAX)
		s->id = (uint32_t)kvs_local_port(s->lfd);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	ev = (struct epoll_event){ .events = EPOLLIN, .data.ptr = &s->lfd };
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev);
	ev = (struct epoll_event){ .events = EPOLLIN, .data.ptr = &s->tfd };
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->tfd, &ev);
	return 0;
}

void sim_serve(struct sim *s, volatile sig_atomic_t *stop)
{
	struct epoll_event evs[64];
	int n, i;

	while (!*stop) {
		n = epoll_wait(s->epfd, evs, 64, 1000);
		for (i = 0; i < n; i++) {
			if (evs[i].data.ptr == &s->lfd) {
				on_accept(s);
			} else if (evs[i].data.ptr == &s->tfd) {
				on_timer(s);
			} else {
				struct sim_conn *c = evs[i].data.ptr;

				if (evs[i].events & EPOLLOUT)
					conn_flush(s, c);
				if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
					on_readable(s, c);
			}
		}
	}
}

void sim_stop(struct sim *s)
{
	pr_info("event=stopping served=%llu cancelled=%llu cancels_ignored=%llu prompt_tokens=%llu "
		"cached_tokens=%llu",
		(unsigned long long)s->served, (unsigned long long)s->cancelled,
		(unsigned long long)s->cancels_ignored, (unsigned long long)s->prompt_tokens_total,
		(unsigned long long)s->cached_tokens_total);
	/* Free what is queued and open, so leak checkers see a clean exit. */
	while (s->live)
		req_free(s, s->live);
	while (s->conns)
		conn_close(s, s->conns);
	kvs_buf_free(&s->oai);
	close(s->tfd);
	close(s->epfd);
	close(s->lfd);
	kvs_engine_free(&s->eng);
}
