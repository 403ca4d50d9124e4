// SPDX-License-Identifier: MIT
/*
 * The server's state, read every --poll-ms: /health for liveness, /metrics
 * for its load (vLLM, SGLang and llama.cpp name theirs differently) and
 * which process answers (its start time, its counters: life.h), /slots
 * where llama.cpp serves no /metrics, /v1/models for the model name when
 * --model is not given. PINGs are answered from the last reading.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "adapter.h"
#include "instance.h"
#include "kvcap.h"
#include "kvsplice/hash.h"
#include "log.h"
#include "netutil.h"
#include "promtext.h"
#include "srvload.h"

#define POLL_BODY_MAX (8u << 20)

enum { X_HEALTH, X_METRICS, X_SLOTS, X_MODELS, X_N };

static const char *const paths[X_N] = { "/health", "/metrics", "/slots", "/v1/models" };

struct xfer {
	CURL *h;
	struct kvs_buf body;
	long status;
	CURLcode res;
	bool used;
};

struct state_poll {
	struct xfer x[X_N];
	int pending;
};

static size_t on_body(char *p, size_t size, size_t nmemb, void *ctx)
{
	struct xfer *x = ctx;
	size_t n = size * nmemb;

	return kvs_buf_append(&x->body, p, n) ? 0 : n;
}

static void poll_free(struct adapter *a, struct state_poll *sp)
{
	int i;

	for (i = 0; i < X_N; i++) {
		if (sp->x[i].h) {
			curl_multi_remove_handle(a->multi, sp->x[i].h);
			curl_easy_cleanup(sp->x[i].h);
		}
		kvs_buf_free(&sp->x[i].body);
	}
	free(sp);
}

static int start(struct adapter *a, struct state_poll *sp, int i)
{
	struct xfer *x = &sp->x[i];
	char url[600];

	snprintf(url, sizeof(url), "%s%s", a->cfg.server, paths[i]);
	kvs_buf_init(&x->body, POLL_BODY_MAX);
	x->h = curl_easy_init();
	if (!x->h)
		return -1;
	x->used = true;
	curl_easy_setopt(x->h, CURLOPT_URL, url);
	curl_easy_setopt(x->h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->h, CURLOPT_PRIVATE, NULL);
	curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x->h, CURLOPT_CONNECTTIMEOUT_MS, (long)a->cfg.connect_ms);
	/* A poll never outlives the next (a timeout says nothing: finish()). */
	curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS,
			 (long)(a->cfg.poll_ms > 2000 ? a->cfg.poll_ms : 2000));
	if (curl_multi_add_handle(a->multi, x->h) != CURLM_OK)
		return -1;
	sp->pending++;
	return 0;
}

int state_tick(struct adapter *a, uint64_t now_ns)
{
	struct state_poll *sp;
	enum oai_kind k = a->cfg.kind ? a->cfg.kind : a->st.kind;

	if (now_ns < a->next_poll_ns)
		return (int)((a->next_poll_ns - now_ns) / 1000000) + 1;
	a->next_poll_ns = now_ns + (uint64_t)a->cfg.poll_ms * 1000000;
	if (a->poll) /* the last one still runs: its timeout ends it */
		return (int)a->cfg.poll_ms;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return (int)a->cfg.poll_ms;
	a->poll = sp;
	if (start(a, sp, X_HEALTH) || start(a, sp, X_METRICS) ||
	    ((k == OAI_AUTO || k == OAI_LLAMA_CPP) && start(a, sp, X_SLOTS)) ||
	    (!a->cfg.model && !a->st.model[0] && start(a, sp, X_MODELS))) {
		pr_warn("event=poll_failed why=\"cannot start a transfer\"");
		a->poll = NULL;
		poll_free(a, sp);
	}
	return (int)a->cfg.poll_ms;
}

static void not_ready(struct adapter *a, const char *why)
{
	struct server_state *st = &a->st;

	uint64_t now = kvs_now_ns();

	/* Said when it happens, then every 10 s while it lasts: the polls
	 * and the failing requests of a server down under load would say it
	 * several times a second. */
	if (st->ready || !st->last_not_ready_log_ns ||
	    now - st->last_not_ready_log_ns > 10000000000ull) {
		pr_warn("event=server_not_ready server=%s why=\"%s\"", a->cfg.server, why);
		st->last_not_ready_log_ns = now;
	}
	st->ready = false;
}

/* Per kind of server, its counters that only grow within one process
 * (life.h): tokens in, tokens out. */
static const char *const counters[][LIFE_COUNTERS] = {
	[OAI_LLAMA_CPP] = { "llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total" },
	[OAI_VLLM] = { "vllm:prompt_tokens_total", "vllm:generation_tokens_total" },
	[OAI_SGLANG] = { "sglang:prompt_tokens_total", "sglang:generation_tokens_total" },
	[OAI_OTHER] = { NULL, NULL },
};

/* Its i-th counter's name; NULL when the kind has none. */
static const char *counter_name(enum oai_kind k, int i)
{
	return (size_t)k < sizeof(counters) / sizeof(counters[0]) ? counters[k][i] : NULL;
}

static const char *name_or_dash(const char *name)
{
	return name ? name : "-";
}

static const char *why_restarted(const struct adapter *a, enum life_verdict v,
				 const struct server_life *was, const struct life_reading *r,
				 char *buf, size_t size)
{
	if (v == LIFE_NEW_START)
		return "its process_start_time_seconds changed";
	if (v == LIFE_DOWN_UP)
		return "it was down (refused, or failed its health check) and is back";
	for (int i = 0; i < LIFE_COUNTERS; i++)
		if (r->count[i] >= 0 && r->count[i] < was->count[i]) {
			snprintf(buf, size, "its counter %s went back from %.0f to %.0f",
				 name_or_dash(counter_name(a->st.kind, i)), was->count[i],
				 r->count[i]);
			return buf;
		}
	return "its counters went back";
}

/* What a reading says of the server's lives (life.h): a restart gives
 * PONGs a new instance, and the gateway withdraws the routes to the cache
 * that went with the old one. */
static void seen(struct adapter *a, const struct life_reading *r)
{
	struct server_life *l = &a->st.life, was = *l;
	enum life_verdict v = life_seen(l, r);
	char why[200];

	if (!was.started && l->started > 0) /* from then on, the process says */
		pr_info("event=server_start_time server=%s started=%.3f", a->cfg.server,
			l->started);
	if (!life_said(&was) && life_said(l) && !l->started)
		pr_info("event=server_counters server=%s %s=%.0f %s=%.0f", a->cfg.server,
			name_or_dash(counter_name(a->st.kind, 0)), l->count[0],
			name_or_dash(counter_name(a->st.kind, 1)), l->count[1]);
	if (v == LIFE_SAME)
		return;
	l->instance = kvs_new_instance(was.instance);
	pr_info("event=server_restarted server=%s instance=%u previous=%u why=\"%s\"",
		a->cfg.server, l->instance, was.instance,
		why_restarted(a, v, &was, r, why, sizeof(why)));
}

static void seen_down(struct adapter *a, enum life_seen how)
{
	struct life_reading r = { .seen = how };

	seen(a, &r);
}

void state_unreachable(struct adapter *a, const char *why)
{
	seen_down(a, LIFE_DOWN);
	not_ready(a, why);
}

static const char *text_of(const struct xfer *x, size_t *len)
{
	*len = x->body.len;
	return (const char *)kvs_buf_head(&x->body);
}

static bool ok(const struct xfer *x)
{
	return x->used && x->res == CURLE_OK && x->status == 200;
}

/* A transfer that got no answer at all (timed out, reset): it says
 * nothing of the server. */
static bool unanswered(const struct xfer *x)
{
	return x->used && x->res != CURLE_OK;
}

/* A transfer that got an answer other than a server's error (a 5xx but
 * 501, not implemented: a proxy's 502, a busy server's 503), which says
 * nothing of what the server is either. */
static bool said(const struct xfer *x)
{
	return !unanswered(x) && !(x->used && x->status >= 500 && x->status != 501);
}

/*
 * Which server, from what its /metrics and /slots look like; OAI_AUTO when
 * they did not answer or answered with a server's error (said()), and the
 * kind found before stays. Those of a busy
 * or stuck server time out (llama.cpp serves both from its task loop),
 * and taking that for "another server" would drop what the kind brings:
 * vLLM's cache_salt, which keeps tenants' prefixes apart, and the load
 * read from /metrics.
 */
static enum oai_kind kind_of(const struct state_poll *sp)
{
	size_t n;
	const char *t = text_of(&sp->x[X_METRICS], &n);

	if (ok(&sp->x[X_METRICS])) {
		if (kvs_prom_has_prefix(t, n, "vllm:"))
			return OAI_VLLM;
		if (kvs_prom_has_prefix(t, n, "sglang:"))
			return OAI_SGLANG;
		if (kvs_prom_has_prefix(t, n, "llamacpp:"))
			return OAI_LLAMA_CPP;
	}
	if (ok(&sp->x[X_SLOTS]) && sp->x[X_SLOTS].body.len &&
	    kvs_buf_head(&sp->x[X_SLOTS].body)[0] == '[')
		return OAI_LLAMA_CPP;
	if (!said(&sp->x[X_METRICS]) || !said(&sp->x[X_SLOTS]))
		return OAI_AUTO;
	return OAI_OTHER;
}

/* Running and waiting requests, KV use in per mille, from /metrics. */
static void load_from_metrics(struct server_state *st, enum oai_kind k, const char *t, size_t n)
{
	struct srvload l;

	srvload_read(k, t, n, &l);
	if (l.has_running)
		st->running = l.running;
	if (l.has_waiting)
		st->waiting = l.waiting;
	if (l.has_kv) {
		st->kv_used = l.kv_permille;
		st->kv_total = 1000;
	}
}

static void capacity_seen(struct server_state *st, uint64_t tokens)
{
	if (tokens == st->kv_tokens)
		return;
	st->kv_tokens = tokens;
	pr_info("event=server_capacity kv_tokens=%llu", (unsigned long long)tokens);
}

/*
 * Requests in flight at the server, at most: --max-connections, and for
 * llama.cpp its slots. llama-server answers HTTP on a few threads (6 for
 * -np 1 here); connections past them wait unanswered, the health poll's
 * among them, and a busy server was read as not ready and ejected with
 * its requests. It runs one request a slot and queues the rest, so the
 * rest wait here instead, counted as waiting in the PONG.
 */
uint32_t state_conn_cap(const struct adapter *a)
{
	const struct server_state *st = &a->st;

	if (st->kind == OAI_LLAMA_CPP && st->slots && st->slots < a->cfg.max_conns)
		return st->slots;
	return a->cfg.max_conns;
}

/* llama.cpp: how many slots it has (job.c sends it no more requests at
 * once), and without --metrics, those that are processing. */
static void load_from_slots(struct adapter *a, const struct xfer *x, bool count_running)
{
	struct server_state *st = &a->st;
	json_t *root = json_loadb((const char *)kvs_buf_head(&x->body), x->body.len, 0, NULL);
	uint32_t slots = json_is_array(root) ? (uint32_t)json_array_size(root) : 0;
	size_t i;
	json_t *s;

	if (slots && slots != st->slots) {
		st->slots = slots;
		pr_info("event=server_slots slots=%u max_connections=%u", slots, state_conn_cap(a));
	}
	if (json_is_array(root) && count_running) {
		st->running = 0;
		json_array_foreach(root, i,
				   s) if (json_is_true(json_object_get(s, "is_processing")))
			st->running++;
		st->waiting = 0;
	}
	json_decref(root);
}

static void model_from(struct server_state *st, const struct xfer *x)
{
	json_t *root = json_loadb((const char *)kvs_buf_head(&x->body), x->body.len, 0, NULL);
	const char *id = json_string_value(
		json_object_get(json_array_get(json_object_get(root, "data"), 0), "id"));

	if (id && strlen(id) < sizeof(st->model)) {
		snprintf(st->model, sizeof(st->model), "%s", id);
		pr_info("event=model name=\"%s\" from=/v1/models", st->model);
	}
	json_decref(root);
}

/* /metrics said what it has: 200, or that it has none (404; 501:
 * llama-server without --metrics). No answer, or a 5xx of a busy server
 * or of a proxy, says nothing of which process answers (life.h). */
static bool metrics_said(const struct xfer *x)
{
	return x->used && x->res == CURLE_OK &&
	       (x->status == 200 || x->status == 404 || x->status == 501);
}

/* Said when what it says changes, not at every poll: a metric typed as
 * a gauge (not read as a counter: an old SGLang's prompt_tokens_total),
 * one that does not read (a NaN, an Inf, no number, in one of its label
 * sets: unknown at that poll). */
static void note(struct adapter *a, bool *was, bool now, const char *name, const char *what)
{
	if (now && !*was)
		pr_warn("event=server_metric_unused server=%s name=%s why=\"%s\"", a->cfg.server,
			name, what);
	*was = now;
}

/* A ready reading: the server's start time (the standard process metric,
 * which a Prometheus client serves outside its multiprocess mode) and its
 * counters, when /metrics said them; what did not read is unknown at this
 * poll and says nothing (life.h). */
static struct life_reading reading(struct adapter *a, const struct state_poll *sp, enum oai_kind k)
{
	struct server_state *st = &a->st;
	const struct xfer *x = &sp->x[X_METRICS];
	struct life_reading r = { .seen = LIFE_READY, .metrics = metrics_said(x) };
	size_t n;
	const char *t = text_of(x, &n);
	const char *name;
	enum kvs_prom_got got;
	double v;

	for (int i = 0; i < LIFE_COUNTERS; i++) {
		r.count[i] = LIFE_NO_COUNT;
		name = counter_name(k, i);
		if (!ok(x) || !name)
			continue;
		got = kvs_prom_counter(t, n, name, &v);
		if (got == KVS_PROM_OK)
			r.count[i] = v;
		r.unread |= got == KVS_PROM_UNREADABLE;
		note(a, &st->gauge[i], got == KVS_PROM_NOT_COUNTER, name,
		     "typed as a gauge (or other than a counter): restarts are not told by it");
		note(a, &st->unread[i], got == KVS_PROM_UNREADABLE, name,
		     "a sample that is no number (NaN, Inf) or below 0: says nothing "
		     "while it lasts");
	}
	if (!ok(x))
		return r;
	got = kvs_prom_read(t, n, "process_start_time_seconds", &v);
	if (got == KVS_PROM_OK && v > 0)
		r.started = v;
	r.unread |= got == KVS_PROM_UNREADABLE;
	note(a, &st->unread[LIFE_COUNTERS], got == KVS_PROM_UNREADABLE,
	     "process_start_time_seconds",
	     "a sample that is no number (NaN, Inf): says nothing "
	     "while it lasts");
	return r;
}

/*
 * GET /health got no answer in time. That says nothing: a busy server
 * answers late (llama-server's few HTTP threads all serving, a machine
 * loaded), and one read as not ready was ejected by the gateway with its
 * requests, cut while the server went on generating for nobody. The last
 * state stays, until silence has lasted --stall-timeout: a server silent
 * that long is stuck, as a stream silent that long is (job.c).
 */
static void silent(struct adapter *a, const char *why)
{
	struct server_state *st = &a->st;
	uint64_t now = kvs_now_ns();
	char msg[200];

	if (!st->silent_since_ns) {
		st->silent_since_ns = now;
		pr_info("event=server_poll_silent server=%s why=\"%s\" hint=\"no answer in time: "
			"the last state kept (ready=%d)\"",
			a->cfg.server, why, st->ready);
	}
	if (now - st->silent_since_ns < (uint64_t)a->cfg.stall_s * 1000000000ull)
		return;
	snprintf(msg, sizeof(msg), "%s, for %u s (--stall-timeout)", why, a->cfg.stall_s);
	not_ready(a, msg);
}

static void finish(struct adapter *a, struct state_poll *sp)
{
	struct server_state *st = &a->st;
	const struct xfer *hx = &sp->x[X_HEALTH];
	struct life_reading r;
	enum oai_kind k;
	size_t n;
	const char *t;
	char why[160];

	st->polls++;
	if (!ok(hx)) {
		st->poll_failures++;
		if (hx->res != CURLE_OK)
			snprintf(why, sizeof(why), "GET /health: %s", curl_easy_strerror(hx->res));
		else
			snprintf(why, sizeof(why), "GET /health: HTTP %ld (loading, or failing)",
				 hx->status);
		/* refused or answered: down; no answer says nothing (life.h) */
		seen_down(a, hx->res == CURLE_OK || hx->res == CURLE_COULDNT_CONNECT ? LIFE_DOWN :
										       LIFE_SILENT);
		if (hx->res == CURLE_OPERATION_TIMEDOUT)
			silent(a, why);
		else /* it said so, or refused, reset, closed the connection */
			not_ready(a, why);
		return;
	}
	st->silent_since_ns = 0;
	k = a->cfg.kind ? a->cfg.kind : kind_of(sp);
	if (k == OAI_AUTO)
		k = st->kind;
	if (k != st->kind)
		pr_info("event=server_kind kind=%s detected=%d", oai_kind_name(k), !a->cfg.kind);
	st->kind = k;
	t = text_of(&sp->x[X_METRICS], &n);
	if (ok(&sp->x[X_METRICS])) {
		load_from_metrics(st, k, t, n);
		capacity_seen(st, kvcap_tokens(k, t, n));
	}
	if (k == OAI_LLAMA_CPP && ok(&sp->x[X_SLOTS]))
		load_from_slots(a, &sp->x[X_SLOTS],
				!(ok(&sp->x[X_METRICS]) && kvs_prom_has_prefix(t, n, "llamacpp:")));
	if (ok(&sp->x[X_MODELS]))
		model_from(st, &sp->x[X_MODELS]);
	r = reading(a, sp, k);
	seen(a, &r);
	if (!st->ready)
		pr_info("event=server_ready server=%s kind=%s running=%u waiting=%u", a->cfg.server,
			oai_kind_name(k), st->running, st->waiting);
	st->ready = true;
	st->last_not_ready_log_ns = 0;
}

bool state_done(struct adapter *a, CURL *h, CURLcode res)
{
	struct state_poll *sp = a->poll;
	int i;

	if (!sp)
		return false;
	for (i = 0; i < X_N; i++) {
		struct xfer *x = &sp->x[i];

		if (x->h != h)
			continue;
		x->res = res;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &x->status);
		curl_multi_remove_handle(a->multi, h);
		curl_easy_cleanup(h);
		x->h = NULL;
		if (--sp->pending == 0) {
			finish(a, sp);
			a->poll = NULL;
			poll_free(a, sp);
		}
		return true;
	}
	return false;
}

void state_free(struct adapter *a)
{
	if (a->poll)
		poll_free(a, a->poll);
	a->poll = NULL;
}

uint32_t state_instance(const struct adapter *a)
{
	return a->st.life.instance;
}

void state_load(const struct adapter *a, struct kvs_load_info *li)
{
	const struct server_state *st = &a->st;
	uint32_t own = a->active;
	uint64_t tokens;

	memset(li, 0, sizeof(*li));
	li->running = st->running;
	li->waiting = st->waiting;
	li->kv_used_blocks = st->kv_used;
	li->kv_total_blocks = st->kv_total;
	li->backend_id = a->cfg.id;
	/* A capacity known in tokens goes in the gateway's blocks, which size
	 * its index of this server (KVS_LOAD_F_KV_BLOCKS); the use with it. */
	tokens = a->cfg.kv_tokens ? a->cfg.kv_tokens : st->kv_tokens;
	if (tokens / KVS_BLOCK_TOKENS) {
		uint64_t blocks = tokens / KVS_BLOCK_TOKENS;

		li->kv_total_blocks = blocks < UINT32_MAX ? (uint32_t)blocks : UINT32_MAX;
		li->kv_used_blocks = st->kv_total ? (uint32_t)((uint64_t)li->kv_total_blocks *
							       st->kv_used / st->kv_total) :
						    0;
		li->flags |= KVS_LOAD_F_KV_BLOCKS;
	}
	/* The server's figures lag by up to a poll; the adapter's own count of
	 * what it has sent is current. */
	if (st->kind == OAI_OTHER || st->kind == OAI_AUTO)
		li->running = own;
	else if (own > li->running + li->waiting)
		li->waiting += own - (li->running + li->waiting);
	li->waiting += a->queued; /* not yet sent: the server cannot count them */
	if (!st->ready)
		li->flags |= KVS_LOAD_F_NOT_READY;
}
