// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench live (or run): the load generator. Sends requests over K
 * connections (each with up to --depth in flight, or open loop at Poisson
 * arrivals, or a trace's), has live_verify.c check every frame that comes
 * back (--verify), and hands the results to live_report.c. Exit status 1
 * if any request failed, was answered wrongly or never finished, or any
 * frame broke the framing. Its options, prompts, connections and run loop.
 */
#include "live.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "codec.h"
#include "fileio.h"
#include "kvsplice/hash.h"
#include "live_int.h"
#include "opts.h"
#include "prompt.h"

static size_t prefix_bytes(const struct run *r)
{
	if (r->o->trace)
		return 0;
	if (r->prefix_file)
		return r->prefix_file_len;
	return r->o->prefixes ? (size_t)r->o->prefix_tokens * KVS_BYTES_PER_TOKEN : 0;
}

/* Conversation workload: request id is turn t of conversation c, and its
 * prompt is the first (t + 1) x turn_tokens of c's own text, so each turn's
 * prompt extends the previous turn's exactly (the conversation so far). */
static uint32_t conv_of(const struct run_opts *o, uint64_t id)
{
	return (uint32_t)((id - 1) % o->conversations);
}

static uint32_t turn_of(const struct run_opts *o, uint64_t id)
{
	return (uint32_t)((id - 1) / o->conversations);
}

static uint32_t group_of(const struct run *r, uint64_t id)
{
	return r->o->conversations ? conv_of(r->o, id) : (uint32_t)((id - 1) % r->o->prefixes);
}

/* Prompt of request id: its group's shared prefix, then its own suffix. */
static size_t build_prompt(const struct run *r, uint64_t id, uint32_t group)
{
	if (r->o->trace)
		return kvs_trace_prompt(&r->trace.reqs[id - 1], (uint32_t)(id - 1), r->prompt);
	if (r->o->conversations) {
		size_t len =
			(size_t)(turn_of(r->o, id) + 1) * r->o->turn_tokens * KVS_BYTES_PER_TOKEN;

		kvs_text_fill(0xc0117000ull + group, r->prompt, len);
		return len;
	}
	size_t pb = prefix_bytes(r), sb = (size_t)r->o->suffix_tokens * KVS_BYTES_PER_TOKEN;

	/* Varied frame sizes, deterministic per request: pipelined frames then
	 * end and start inside shared skbs. */
	if (r->o->suffix_jitter)
		sb += (size_t)((id * 7919) % (r->o->suffix_jitter + 1u)) * KVS_BYTES_PER_TOKEN;

	if (r->prefix_file)
		memcpy(r->prompt, r->prefix_file, pb);
	else if (pb)
		kvs_text_fill(0x5eed0000ull + group, r->prompt, pb);
	kvs_text_fill(0xabcdef0000000000ull ^ id, r->prompt + pb, sb);
	return pb + sb;
}

static int send_one(struct run *r, uint32_t ci)
{
	struct bconn *c = &r->conns[ci];
	uint64_t id = ++r->next;
	struct req *q = &r->reqs[id - 1];
	uint32_t group = live_groups(r) ? group_of(r, id) : 0;
	size_t len = build_prompt(r, id, group);
	uint32_t out = r->o->max_tokens, declared = r->o->declared_max_tokens;
	struct kvs_msg m;

	/* A trace gives each request's output length; --max-tokens caps it. */
	if (r->o->trace && (!r->o->max_tokens_set || r->trace.reqs[id - 1].output_tokens < out))
		out = r->trace.reqs[id - 1].output_tokens;
	/* The true length reaches only the model, in the prompt's last bytes
	 * (prompt.h); the header says what a client would declare. A real
	 * server knows no marker: it is told the length in the header. */
	if (r->o->true_length)
		declared = out;
	else
		len += kvs_eos_marker(out, (char *)r->prompt + len);
	m = (struct kvs_msg){
		.type = KVS_T_REQUEST,
		.req_id = id,
		.cache_salt = r->o->salt,
		.model_id = r->o->model,
		.max_tokens = declared,
		.prefix_len = r->o->hint ? (uint32_t)prefix_bytes(r) : 0,
	};
	q->conn = ci;
	q->group = group;
	q->max_tokens = declared && declared < out ? declared : out;
	/* Open loop: TTFT counts from when the request was due, so a client
	 * that falls behind its schedule cannot hide the delay. */
	q->send_ns = r->o->rate > 0 ? r->next_arrival_ns : kvs_now_ns();
	if (kvs_put_frame(&c->tx, &m, r->prompt, (uint32_t)len))
		return -ENOBUFS;
	q->sent = true;
	c->inflight++;
	return 0;
}

static void flush(struct bconn *c)
{
	while (c->tx.len && !c->dead) {
		ssize_t w = send(c->fd, kvs_buf_head(&c->tx), c->tx.len, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN) /* EAGAIN: the rest goes on EPOLLOUT */
				c->dead = true;
			return;
		}
		kvs_buf_consume(&c->tx, (size_t)w);
	}
}

/* Queue every request this connection may have in flight, then write them
 * together, as a pipelining client does: frames then share TCP segments, and
 * most start in the middle of one. */
static void fill(struct run *r, uint32_t ci)
{
	struct bconn *c = &r->conns[ci];

	while (r->o->rate == 0 && !r->o->trace && !c->dead && !c->going &&
	       c->inflight < r->o->depth && r->next < r->n)
		if (send_one(r, ci))
			c->dead = true;
	flush(c);
}

static void on_readable(struct run *r, uint32_t ci)
{
	struct bconn *c = &r->conns[ci];
	const uint8_t *frame;
	struct kvs_msg m;
	long n;
	int st;

	for (;;) {
		n = kvs_buf_recv(&c->rx, c->fd, 65536);
		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			if (c->inflight)
				fprintf(stderr,
					PROG ": connection %u: closed by the server with %u "
					     "requests unanswered\n",
					ci, c->inflight);
			c->dead = true;
			epoll_ctl(r->epfd, EPOLL_CTL_DEL, c->fd, NULL);
			return;
		}
		while ((st = kvs_next_frame(&c->rx, KVS_MAX_PAYLOAD_LIMIT, &m, &frame)) > 0) {
			if (live_on_frame(r, ci, &m, frame + KVS_HDR_LEN)) {
				r->done++;
				c->inflight--;
			}
			kvs_buf_consume(&c->rx, KVS_HDR_LEN + (size_t)m.payload_len);
		}
		if (st < 0) {
			live_bad_header(r, ci, -st);
			c->dead = true;
			return;
		}
	}
	if (c->going && !c->inflight && !c->fin) { /* the gateway's cue to close */
		shutdown(c->fd, SHUT_WR);
		c->fin = true;
	}
	fill(r, ci);
}

static void on_writable(struct run *r, uint32_t ci)
{
	flush(&r->conns[ci]);
}

static int load_prompt_file(struct run *r, const char *path)
{
	r->prefix_file = (uint8_t *)kvs_read_file(path, 0, &r->prefix_file_len);
	if (!r->prefix_file) {
		fprintf(stderr, PROG ": --prompt-file: %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Exponential inter-arrival gap for --rate, in ns (xorshift64*). */
static uint64_t next_gap_ns(struct run *r)
{
	double u;

	r->rng ^= r->rng >> 12;
	r->rng ^= r->rng << 25;
	r->rng ^= r->rng >> 27;
	u = (double)((r->rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
	return (uint64_t)(-log(1.0 - u) / r->o->rate * 1e9);
}

/* Open loop: send every request that is due, each on the next connection
 * in turn, whatever is still in flight. Returns ms until the next is due. */
static int send_due(struct run *r, uint64_t start)
{
	uint64_t now = kvs_now_ns();

	while (r->next < r->n && now >= r->next_arrival_ns) {
		uint32_t ci = r->next % r->o->connections, k;

		/* the next connection in turn that takes requests */
		for (k = 0; k < r->o->connections && (r->conns[ci].dead || r->conns[ci].going); k++)
			ci = (ci + 1) % r->o->connections;
		if (k == r->o->connections)
			r->next++; /* never sent: reported as lost */
		else if (send_one(r, ci))
			r->conns[ci].dead = true;
		else
			flush(&r->conns[ci]);
		if (r->o->trace && r->next < r->n) /* the trace's clock, from its first request */
			r->next_arrival_ns = start + (uint64_t)((r->trace.reqs[r->next].arrival_ms -
								 r->trace.reqs[0].arrival_ms) *
								1e6);
		else
			r->next_arrival_ns += next_gap_ns(r);
	}
	if (r->next >= r->n)
		return 100;
	return (int)((r->next_arrival_ns - now) / 1000000);
}

static int run_live(const struct run_opts *o, volatile sig_atomic_t *stop)
{
	struct run r = { .o = o, .stop = stop };
	struct epoll_event ev, evs[64];
	uint64_t start, deadline, last_progress;
	struct summary s;
	double wall_s, timeout_s;
	uint32_t i;
	int n, rc = 1;

	size_t prompt_cap;

	if (o->prompt_file && load_prompt_file(&r, o->prompt_file))
		return 2;
	r.n = o->requests;
	if (o->trace) {
		char err[512];
		int nt = kvs_trace_load(o->trace, o->requests_set ? o->requests : 0, o->speed,
					&r.trace, err, sizeof(err));

		if (nt < 0) {
			fprintf(stderr, PROG ": --trace: %s\n", err);
			return 2;
		}
		r.n = (uint32_t)nt;
	}
	prompt_cap = prefix_bytes(&r) +
		     (size_t)(o->suffix_tokens + o->suffix_jitter) * KVS_BYTES_PER_TOKEN +
		     (o->conversations ? (size_t)(o->requests / o->conversations + 1) *
						 o->turn_tokens * KVS_BYTES_PER_TOKEN :
					 0);
	if (o->trace)
		prompt_cap = (size_t)r.trace.max_input_tokens * KVS_BYTES_PER_TOKEN;
	r.reqs = calloc(r.n, sizeof(*r.reqs));
	r.conns = calloc(o->connections, sizeof(*r.conns));
	r.prompt = malloc(prompt_cap + KVS_EOS_MARKER_MAX);
	r.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!r.reqs || !r.conns || !r.prompt || r.epfd < 0) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out;
	}
	for (i = 0; i < o->connections; i++) {
		const struct kvs_addr *addr = &o->addrs[i % o->naddrs];
		int fd = kvs_connect(addr, 2000);
		char a[96];

		if (fd < 0) {
			fprintf(stderr, PROG ": cannot connect to %s: %s\n",
				kvs_addr_str(addr, a, sizeof(a)), strerror(-fd));
			goto out;
		}
		kvs_set_nonblock(fd, 1);
		kvs_set_nodelay(fd);
		r.conns[i].fd = fd;
		kvs_buf_init(&r.conns[i].rx, KVS_HDR_LEN + KVS_MAX_PAYLOAD_LIMIT + 65536);
		kvs_buf_init(&r.conns[i].tx, 0);
		ev = (struct epoll_event){ .events = EPOLLIN | EPOLLOUT | EPOLLET, .data.u32 = i };
		epoll_ctl(r.epfd, EPOLL_CTL_ADD, fd, &ev);
	}

	live_fleet_ask(o, &r.fleet, false);
	start = last_progress = kvs_now_ns();
	timeout_s = o->timeout_s;
	/* A trace lasts what it lasts (17 minutes for Mooncake's at 1x): the
	 * default gives the last arrival a minute, not the whole run. */
	if (o->trace && !o->timeout_set && r.n)
		timeout_s += r.trace.reqs[r.n - 1].arrival_ms / 1000;
	/* --until: no timeout while the caller has not said stop */
	deadline = o->until ? UINT64_MAX : start + (uint64_t)(timeout_s * 1e9);
	r.next_arrival_ns = start;
	r.rng = o->seed * 0x9e3779b97f4a7c15ull + 1;
	for (i = 0; i < o->connections; i++)
		fill(&r, i);
	while (r.done < r.n && !*r.stop) {
		bool alive = false, open = false, sendable = false;
		int wait_ms = 100;

		if (deadline == UINT64_MAX && !access(o->until, F_OK)) {
			r.n = r.next; /* what was sent is the run */
			deadline = kvs_now_ns() + (uint64_t)(timeout_s * 1e9);
			if (r.done >= r.n)
				break;
		}

		if (o->rate > 0 || o->trace) {
			wait_ms = send_due(&r, start);
			if (wait_ms > 100)
				wait_ms = 100;
		}
		for (i = 0; i < o->connections; i++) {
			alive |= !r.conns[i].dead && r.conns[i].inflight > 0;
			open |= !r.conns[i].dead;
			sendable |= !r.conns[i].dead && !r.conns[i].going;
		}
		/* Everything left is on dead connections, or can no longer be
		 * sent (a server that broke the framing, hung up or said it
		 * closes every connection): what never came is lost, not
		 * waited for. */
		if ((!alive && (r.next >= r.n || !sendable)) || !open)
			break;
		if (kvs_now_ns() > deadline) {
			fprintf(stderr,
				PROG ": timed out after %.0f s with %u of %u requests done "
				     "(--timeout-s)\n",
				timeout_s, r.done, r.n);
			break;
		}
		n = epoll_wait(r.epfd, evs, 64, wait_ms);
		for (int k = 0; k < n; k++) {
			if (evs[k].events & EPOLLOUT)
				on_writable(&r, evs[k].data.u32);
			if (evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				on_readable(&r, evs[k].data.u32);
		}
		live_errors_say(&r, false);
		if (!o->quiet && kvs_now_ns() - last_progress > 2000000000ull) {
			last_progress = kvs_now_ns();
			fprintf(stderr, PROG ": %u/%u requests done\n", r.done, r.n);
		}
	}
	live_errors_say(&r, true);
	wall_s = (double)(kvs_now_ns() - start) / 1e9;
	live_fleet_ask(o, &r.fleet, true); /* a backend added meanwhile counts */
	live_summarize(&r, wall_s, &s);
	if (o->per_request)
		live_print_per_request(&r);
	live_print_summary(&r, &s);
	rc = (s.ok == r.n && !s.framing_errors) ? 0 : 1;
	if (o->plot_dir && live_plot(&r, &s))
		rc = 1;
	free(s.ttft);
out:
	for (i = 0; r.conns && i < o->connections; i++) {
		if (r.conns[i].fd > 0)
			close(r.conns[i].fd);
		kvs_buf_free(&r.conns[i].rx);
		kvs_buf_free(&r.conns[i].tx);
	}
	if (r.epfd >= 0)
		close(r.epfd);
	free(r.conns);
	free(r.reqs);
	free(r.prompt);
	free(r.prefix_file);
	kvs_trace_free(&r.trace);
	return rc;
}

#define MAX_CONNECTIONS 10000

/* --connect: at most MAX_TARGETS, the count checked first. */
static int parse_connect(FILE *err, const char *who, const struct kvs_opt *row, const char *v,
			 void *dst)
{
	struct run_opts *o = KVS_OPT_TARGET(struct run_opts, addrs, dst);

	if (o->naddrs == MAX_TARGETS) {
		fprintf(err, "%s: at most %d --connect addresses\n", who, MAX_TARGETS);
		return -1;
	}
	if (kvs_parse_addr(v, &o->addrs[o->naddrs])) {
		fprintf(err, "%s: --connect: '%s' is not ADDR:PORT\n", who, v);
		return -1;
	}
	o->naddrs++;
	return 0;
}

/* --concurrency: --connections' other name. */
static int parse_concurrency(FILE *err, const char *who, const struct kvs_opt *row, const char *v,
			     void *dst)
{
	return kvs_arg_u32(err, who, "--connections", v, 1, MAX_CONNECTIONS, dst);
}

static int parse_label(FILE *err, const char *who, const struct kvs_opt *row, const char *v,
		       void *dst)
{
	if (!*v || strpbrk(v, "'\"\\ ")) {
		fprintf(err, "%s: --label: one word without quotes\n", who);
		return -1;
	}
	*(const char **)dst = v;
	return 0;
}

static const struct run_opts defaults = {
	.requests = 100,
	.connections = 4,
	.depth = 1,
	.max_tokens = 8,
	.declared_max_tokens = 4096,
	.prefixes = 4,
	.prefix_tokens = 1024,
	.suffix_tokens = 64,
	.timeout_s = 60,
	.turn_tokens = 512,
	.seed = 1,
	.speed = 1,
	.label = "live",
};

#define O struct run_opts
static const struct kvs_opt rows[] = {
	{ "connect", 'c', KVS_OPT_FUNC(O, addrs, parse_connect), .arg = "ADDR:PORT",
	  .help = "gateway (or backend) address (required); repeat it\n"
		  "to spread connections round robin over several\n"
		  "backends: the no-gateway baseline" },
	{ "requests", 'n', KVS_OPT_U32(O, requests, 1, 10000000), KVS_OPT_GIVEN(O, requests_set),
	  .arg = "N", .help = "requests to send (default {default})" },
	{ "connections", 'k', KVS_OPT_U32(O, connections, 1, MAX_CONNECTIONS), .arg = "K",
	  .help = "client connections (default {default}); --concurrency is\n"
		  "the same" },
	{ "concurrency", 0, KVS_OPT_FUNC(O, connections, parse_concurrency), .arg = "K" },
	{ "depth", 'd', KVS_OPT_U32(O, depth, 1, 100000), .arg = "D",
	  .help = "closed loop: requests in flight per connection\n"
		  "(default {default})" },
	{ "rate", 0, KVS_OPT_DOUBLE(O, rate, 0.001, 1e6), .arg = "R",
	  .help = "open loop: R requests per second, Poisson" },
	{ "seed", 0, KVS_OPT_U64(O, seed, 0, UINT64_MAX), .arg = "S",
	  .help = "seed of the arrival times (default {default})" },
	{ "max-tokens", 'm', KVS_OPT_U32(O, max_tokens, 0, 1000000),
	  KVS_OPT_GIVEN(O, max_tokens_set), .arg = "M",
	  .help = "tokens to generate per request (default {default}):\n"
		  "the true output length, told only to the model, in\n"
		  "a marker \" <eos:M>\" at the end of each prompt\n"
		  "(kvsplice-sim --help)" },
	{ "declared-max-tokens", 0, KVS_OPT_U32(O, declared_max_tokens, 0, 1000000), .arg = "N",
	  .help = "the max_tokens every REQUEST declares, as a real\n"
		  "client's does (default {default}; 0 = none): the\n"
		  "gateway never learns the true length, the model\n"
		  "stops at the marker's, or at N if smaller" },
	{ "declare-true-length", 0, KVS_OPT_FLAG(O, true_length),
	  .help = "declare the true length in the header and send no\n"
		  "marker: for real servers behind kvsplice-adapter,\n"
		  "which stop where their model stops (overrides\n"
		  "--declared-max-tokens)" },
	{ "prefixes", 0, KVS_OPT_U32(O, prefixes, 0, 10000000), .arg = "P",
	  .help = "shared prefix groups; request i uses group i mod P\n"
		  "(default {default}; 0 = nothing shared)" },
	{ "prefix-tokens", 0, KVS_OPT_U32(O, prefix_tokens, 0, 1u << 20), .arg = "T",
	  .help = "tokens of each shared prefix (default {default})" },
	{ "suffix-tokens", 0, KVS_OPT_U32(O, suffix_tokens, 0, 1u << 20), .arg = "S",
	  .help = "tokens of each request's own suffix (default {default})" },
	{ "suffix-jitter", 0, KVS_OPT_U32(O, suffix_jitter, 0, 1u << 20), .arg = "J",
	  .help = "add 0..J tokens to each suffix (varied frame sizes)" },
	{ "prompt-file", 0, KVS_OPT_STR(O, prompt_file), .arg = "FILE",
	  .help = "use FILE's bytes as the one shared prefix" },
	{ "conversations", 0, KVS_OPT_U32(O, conversations, 1, 1000000), .arg = "C",
	  .help = "conversation workload: request i is turn i / C of\n"
		  "conversation i mod C, its prompt the conversation\n"
		  "so far (replaces the prefix options)" },
	{ "turn-tokens", 0, KVS_OPT_U32(O, turn_tokens, 1, 1u << 20), .arg = "T",
	  .help = "tokens each turn adds (default {default})" },
	{ "trace", 0, KVS_OPT_STR(O, trace), .arg = "FILE",
	  .help = "replay a JSONL request trace (the format of\n"
		  "traces/README.md): arrival times, prompt and output\n"
		  "lengths from the trace, open loop; the same hash\n"
		  "id is always the same 512 tokens of text, so the\n"
		  "backends see exactly the trace's sharing; -n\n"
		  "replays the first N requests (default all),\n"
		  "--max-tokens caps each request's output (the\n"
		  "true length, in the marker)" },
	{ "speed", 0, KVS_OPT_DOUBLE(O, speed, 0.001, 1e6), .arg = "X",
	  .help = "multiply the trace's arrival rate by X (default {default})" },
	{ "hint", 0, KVS_OPT_FLAG(O, hint), .help = "send the prefix length as the routing hint" },
	{ "salt", 0, KVS_OPT_U64(O, salt, 0, UINT64_MAX), .arg = "X",
	  .help = "cache salt (tenant) for every request (default {default})" },
	{ "model", 0, KVS_OPT_U32(O, model, 0, UINT32_MAX), .arg = "ID",
	  .help = "model id (default {default})" },
	{ "timeout-s", 0, KVS_OPT_U32(O, timeout_s, 1, 86400), KVS_OPT_GIVEN(O, timeout_set),
	  .arg = "S",
	  .help = "give up after S seconds (default {default}; with --trace,\n"
		  "{default} after the last request is due)" },
	{ "per-request", 0, KVS_OPT_FLAG(O, per_request), .help = "print one line per request" },
	{ "until", 0, KVS_OPT_STR(O, until), .arg = "FILE",
	  .help = "send until FILE exists (at most -n), then wait for\n"
		  "the answers (--timeout-s from then): the run is the\n"
		  "requests sent. For a test that needs clients busy\n"
		  "until it is done with them" },
	{ "fleet", 0, KVS_OPT_U32(O, fleet, 1, MAX_BACKEND_IDS), .arg = "N",
	  .help = "N backends are behind the target. By default the\n"
		  "targets are asked (a PING before and after the run):\n"
		  "a gateway says how many backends it has, and load\n"
		  "max/mean counts every one, those that served nothing\n"
		  "as 0; targets that are backends count themselves.\n"
		  "Only if none can say (a gateway older than the\n"
		  "fleet's PONG), the backends that answered. Those\n"
		  "PINGs add a connection and a PONG per backend to\n"
		  "the gateway's counters; with N given, none is sent" },
	{ "verify", 0, KVS_OPT_ENUM(O, verify, "sim", "framing"), .arg = "MODE",
	  .help = "what every answer must be (default {default}):\n"
		  "sim: kvsplice-sim's exact output (the smaller of\n"
		  "--max-tokens and a non-zero --declared-max-tokens\n"
		  "CHUNKs of its token text); framing: any KVS1\n"
		  "server's, as behind kvsplice-adapter (CHUNKs of\n"
		  "any text and number, an early stop). Both check\n"
		  "the framing: valid frames, each for an open\n"
		  "request of its connection, one END or ERROR per\n"
		  "request, END figures that can be true" },
	{ "json", 0, KVS_OPT_FLAG(O, json), .help = "print the summary as JSON" },
	{ "plot", 0, KVS_OPT_STR(O, plot_dir), .arg = "DIR",
	  .help = "write this run's TTFT CDF and requests per backend\n"
		  "as SVG and PNG (gnuplot), with their data, in DIR" },
	{ "label", 0, KVS_OPT_FUNC(O, label, parse_label), .arg = "NAME",
	  .help = "name of the run in the plots (default live)" },
	{ "quiet", 'q', KVS_OPT_FLAG(O, quiet), .help = "no progress lines on stderr" },
	KVS_OPT_ROW_HELP,
};
#undef O

static const struct kvs_optset optset = {
	.prog = PROG,
	KVS_OPT_ROWS(rows),
	.defaults = &defaults,
	.usage = "Sends requests through a kvsplice gateway (or straight to a backend), checks\n"
		 "every response (--verify), and reports TTFT, end-to-end latency, cache hit\n"
		 "rate, throughput, load per backend and errors by code. Exit status: 0 if\n"
		 "every request succeeded, 1 if any failed, was answered wrongly or never\n"
		 "finished, or a frame broke the framing, 2 for bad usage. A request's ERROR\n"
		 "is printed on stderr, the first 20 of each code; past that they are counted\n"
		 "(a line a second: \"N more busy errors\") and the summary has them all.\n"
		 "\n"
		 "Closed loop by default: each connection keeps --depth requests in flight.\n"
		 "With --rate, open loop: requests are sent at Poisson arrival times over the\n"
		 "connections in turn, however many are still in flight, and TTFT counts from\n"
		 "when each was due.\n"
		 "\n"
		 "Options of live:\n",
	.footer = "",
	.help_col = 28,
	.help_on_error = true,
};

void live_usage(FILE *f)
{
	kvs_opts_usage(&optset, f);
}

/* -1 to carry on, or the exit status (--help: 0, bad usage: 2). usage
 * prints the whole --help. */
static int parse_live(int argc, char **argv, void (*usage)(FILE *f), struct run_opts *o)
{
	struct kvs_optset set = optset;
	int r;

	set.print_help = usage;
	*o = defaults;
	r = kvs_opts_argv(&set, stderr, argc, argv, o);
	if (r)
		return r > 0 ? 0 : 2;
	if (!o->naddrs) {
		fprintf(stderr, PROG ": live: --connect ADDR:PORT is required (see --help)\n");
		return 2;
	}
	if (o->trace && (o->conversations || o->prompt_file || o->hint || o->rate > 0)) {
		fprintf(stderr,
			PROG ": --trace sets the prompts and arrival times: it does not "
			     "combine with --conversations, --prompt-file, --hint or --rate\n");
		return 2;
	}
	if (o->prompt_file)
		o->prefixes = 1;
	if (o->conversations && o->prompt_file) {
		fprintf(stderr, PROG ": --conversations and --prompt-file do not combine\n");
		return 2;
	}
	if (o->conversations &&
	    (uint64_t)(o->requests / o->conversations + 1) * o->turn_tokens * 4 >
		    KVS_MAX_PAYLOAD_LIMIT) {
		fprintf(stderr,
			PROG ": the last turns would exceed %u bytes: fewer turns or "
			     "--turn-tokens\n",
			KVS_MAX_PAYLOAD_LIMIT);
		return 2;
	}
	return -1;
}

int bench_live(int argc, char **argv, void (*usage)(FILE *f), volatile sig_atomic_t *stop)
{
	static struct run_opts o;
	int rc = parse_live(argc, argv, usage, &o);

	return rc >= 0 ? rc : run_live(&o, stop);
}
