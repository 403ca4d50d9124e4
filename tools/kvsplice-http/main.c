// SPDX-License-Identifier: MIT
/*
 * kvsplice-http: an OpenAI-compatible HTTP front for the kvsplice gateway.
 * Clients (the openai libraries, curl, LangChain) POST to
 * /v1/chat/completions and /v1/completions as they would to the server;
 * each request goes through the gateway as one KVS1 REQUEST, routed and
 * spliced in the kernel, to a kvsplice-adapter and its server, and the
 * server's answer comes back unchanged (docs/ARCHITECTURE.md, "The OpenAI
 * front").
 *
 * This file: the options, startup, the loop (libevent), shutdown.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "front.h"
#include "netutil.h"
#include "opts.h"

#define PROG "kvsplice-http"

static const struct front_config defaults = {
	.listen = "127.0.0.1:8080",
	.links_per_gateway = 2,
	.link_inflight = 256,
	.max_inflight = 4096,
	.max_body = KVS_DEFAULT_MAX_PAYLOAD,
	.max_frame = KVS_DEFAULT_MAX_PAYLOAD,
	.max_buffered = 4u << 20,
	.idle_s = 300,
	.request_s = 30,
	.max_connections = 8192,
	.max_source_conns = 1024,
	.tenant = FRONT_TENANT_NONE,
	.level = KVS_LOG_INFO,
};

static int parse_gateway(FILE *err, const char *who, const struct kvs_opt *o, const char *v,
			 void *dst)
{
	struct kvs_addr a;

	return kvs_opt_keep_checked(err, !kvs_parse_addr(v, &a), who, o, v, dst, "ADDR:PORT");
}

static int parse_str(FILE *err, const char *who, const struct kvs_opt *o, const char *v, void *dst)
{
	if (!*v) {
		fprintf(err, "%s: --%s: empty\n", who, o->name);
		return -1;
	}
	*(const char **)dst = v;
	return 0;
}

#define S struct front_config
static const struct kvs_opt rows[] = {
	{ "listen", 'l', KVS_OPT_STR(S, listen), .arg = "ADDR:PORT",
	  .help = "where OpenAI clients connect, HTTP/1.1\n"
		  "(default {default}; port 0: a free one, see\n"
		  "--port-file)" },
	{ "gateway", 'g', KVS_OPT_LIST(S, gateways, ngateways, FRONT_MAX_GATEWAYS, parse_gateway),
	  .arg = "ADDR:PORT",
	  .help = "a kvspliced listener, KVS1 (required;\n"
		  "repeat for several gateways: one that\n"
		  "refuses requests at once is shunned, and\n"
		  "what it refused sent to another)" },
	{ "links", 0, KVS_OPT_U32(S, links_per_gateway, 1, 64), .arg = "N",
	  .help = "KVS1 connections to each gateway (default\n"
		  "{default}); requests are multiplexed on them" },
	{ "link-inflight", 0, KVS_OPT_U32(S, link_inflight, 1, 1u << 24), .arg = "N",
	  .help = "requests in flight on one connection, at\n"
		  "most (default {default}: the gateway's\n"
		  "--max-client-inflight; raise both together,\n"
		  "or give the front the gateway's front\n"
		  "limits, see --help's end)" },
	{ "max-inflight", 0, KVS_OPT_U32(S, max_inflight, 1, 1u << 24), .arg = "N",
	  .help = "requests in the front, sent or waiting for\n"
		  "room on a connection; more get HTTP 429\n"
		  "(default {default})" },
	{ "model", 'm', KVS_OPT_LIST(S, models, nmodels, FRONT_MAX_MODELS, parse_str),
	  .arg = "NAME",
	  .help = "a model GET /v1/models lists (repeat; the\n"
		  "request's model goes to the server as sent)" },
	{ "tenant", 0, KVS_OPT_ENUM(S, tenant, "none", "authorization", "header"), .arg = "FROM",
	  .help = "what separates tenants' caches (cache_salt):\n"
		  "none (default), authorization (the API key)\n"
		  "or header (--tenant-header's value)" },
	{ "tenant-header", 0, KVS_OPT_STR(S, tenant_header), .arg = "NAME",
	  .help = "the header naming the tenant, with --tenant\n"
		  "header (X-Tenant, ...)" },
	{ "max-body", 0, KVS_OPT_U32(S, max_body, 1, KVS_MAX_PAYLOAD_LIMIT), .arg = "BYTES",
	  .help = "largest request body; larger ones get 413\n"
		  "(default {default})" },
	{ "max-frame", 0, KVS_OPT_U32(S, max_frame, 1, KVS_MAX_PAYLOAD_LIMIT), .arg = "BYTES",
	  .help = "the gateway's --max-frame: largest KVS1\n"
		  "payload sent or taken (default {default})" },
	{ "max-buffered", 0, KVS_OPT_U32(S, max_buffered, 4096, 1u << 30), .arg = "BYTES",
	  .help = "response bytes a client may leave unread;\n"
		  "beyond, its request is cancelled (default\n"
		  "{default})" },
	{ "idle-timeout", 0, KVS_OPT_U32(S, idle_s, 1, 86400), .arg = "S",
	  .help = "an HTTP connection idle this long is closed\n"
		  "(default {default}): the time between two\n"
		  "bytes, not a deadline" },
	{ "request-timeout", 0, KVS_OPT_U32(S, request_s, 0, 86400), .arg = "S",
	  .help = "a request's headers and body must arrive\n"
		  "whole within S of its first byte (of the\n"
		  "accept, for a connection's first); else\n"
		  "408 and close. Not the response's, however\n"
		  "long it streams (default {default}; 0: none)" },
	{ "max-connections", 0, KVS_OPT_U32(S, max_connections, 1, 1u << 24), .arg = "N",
	  .help = "client connections open at once; more are\n"
		  "answered 503 and closed (default {default}).\n"
		  "Each holds a descriptor: keep N below\n"
		  "ulimit -n less ~100 (the front raises its\n"
		  "soft limit to the hard one if it is lower)" },
	{ "max-source-conns", 0, KVS_OPT_U32(S, max_source_conns, 0, 1u << 24), .arg = "N",
	  .help = "client connections one source (an IPv4\n"
		  "address, an IPv6 /64) may hold; more are\n"
		  "answered 429 and closed (default {default};\n"
		  "0: no limit). Behind a proxy or load\n"
		  "balancer, name it with --trusted-source" },
	{ "trusted-source", 0, KVS_OPT_LIST(S, trusted, ntrusted, FRONT_MAX_TRUSTED, kvs_opt_cidr),
	  .arg = "CIDR",
	  .help = "clients from here (a proxy or load balancer\n"
		  "in front, carrying many users) are not\n"
		  "counted against --max-source-conns (repeat)" },
	KVS_OPT_ROW_PORT_FILE(S, port_file),
	KVS_OPT_ROW_LOG_LEVEL(S, level),
	KVS_OPT_ROW_HELP,
};
#undef S

static const struct kvs_optset optset = {
	.prog = PROG,
	KVS_OPT_ROWS(rows),
	.defaults = &defaults,
	.usage = "Usage: " PROG " --gateway ADDR:PORT [--gateway ...] [--listen ADDR:PORT]\n"
		 "       [options]\n"
		 "\n"
		 "An OpenAI-compatible HTTP front for kvsplice: POST /v1/chat/completions\n"
		 "and /v1/completions (streamed or not), GET /v1/models[/NAME] and /health.\n"
		 "Each request goes to the gateway as one KVS1 REQUEST, its body\n"
		 "rearranged so that the messages (or the prompt) come first, always\n"
		 "serialized alike: requests that share a system prompt or a conversation\n"
		 "share a byte prefix, which the gateway's kernel program routes to the\n"
		 "server holding it. The server's answer (its stream events, or its JSON\n"
		 "response) comes back unchanged. Behind the gateway, kvsplice-adapter in\n"
		 "front of each server (vLLM, SGLang, llama.cpp).\n"
		 "\n"
		 "Options:\n",
	.footer = "\n"
		  "The front carries many users on a few connections: give its address to\n"
		  "the gateway's --front-source (its own in-flight limit, --max-front-inflight)\n"
		  "and set --link-inflight to match. Errors are OpenAI's: 400 bad body, 404,\n"
		  "405, 413 too large, 429 busy (or --max-source-conns), 502 backend gone,\n"
		  "503 no backend (or --max-connections), 504.\n",
	.help_col = 27,
	.help_on_error = true,
};

/*
 * An accept that fails for want of a descriptor (EMFILE: every one held by
 * a client; ENFILE, ENOBUFS, ENOMEM) leaves the client in the backlog, and
 * the listener readable: libevent would try again at once, for ever, at
 * 100% CPU and a warning line each time. The listener rests for a second
 * instead (clients wait in the backlog; those connected are served), with
 * one line per rest.
 */
#define ACCEPT_REST_MS 1000

/* One listener; file-wide, as its error callback gets libevent's own
 * argument (the evhttp), not one of ours. */
static struct accept_rest {
	struct evconnlistener *lev;
	struct event *timer;
	uint64_t failures;
} rest;

static void on_accept_rested(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	evconnlistener_enable(rest.lev);
}

static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct accept_rest *ar = &rest;
	struct timeval tv = { ACCEPT_REST_MS / 1000, (ACCEPT_REST_MS % 1000) * 1000 };
	int err = EVUTIL_SOCKET_ERROR();

	(void)arg;
	ar->failures++;
	pr_warn("event=accept_paused err=\"%s\" failures=%llu rest_ms=%d", strerror(err),
		(unsigned long long)ar->failures, ACCEPT_REST_MS);
	evconnlistener_disable(lev);
	evtimer_add(ar->timer, &tv);
}

/*
 * Descriptors the front keeps for itself beside its clients': the
 * listener, its gateway links, epoll, the log, libevent's own, with room.
 * Below --max-connections plus these, connections would fail at accept
 * (EMFILE, the listener resting) rather than be refused at the limit.
 * Raising the soft limit to the hard one is safe for a program that uses
 * epoll, not select (systemd leaves the soft limit at 1024 for select's
 * sake and says so).
 */
#define OWN_FDS 64

static void check_nofile(const struct front_config *cfg)
{
	rlim_t want = (rlim_t)cfg->max_connections + OWN_FDS + FRONT_LINGER_MAX +
		      (rlim_t)cfg->ngateways * cfg->links_per_gateway;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		if (!setrlimit(RLIMIT_NOFILE, &rl))
			pr_info("event=nofile_raised from=%llu to=%llu", (unsigned long long)was,
				(unsigned long long)rl.rlim_cur);
		else
			rl.rlim_cur = was;
	}
	if (rl.rlim_cur < want)
		pr_warn("event=nofile_low nofile=%llu max_connections=%u "
			"hint=\"past ~%llu clients accepts fail (EMFILE) instead of a 503: raise "
			"ulimit -n (LimitNOFILE=) or lower --max-connections\"",
			(unsigned long long)rl.rlim_cur, cfg->max_connections,
			(unsigned long long)(rl.rlim_cur > want - cfg->max_connections ?
						     rl.rlim_cur - (want - cfg->max_connections) :
						     0));
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	event_base_loopexit(arg, NULL);
}

int main(int argc, char **argv)
{
	struct front_config cfg;
	struct front_stats st = { 0 };
	struct links ls = { 0 };
	struct event_base *base = NULL;
	struct evhttp *http = NULL;
	struct event *sigint = NULL, *sigterm = NULL;
	struct evhttp_bound_socket *bound;
	struct calls *cs = NULL;
	struct clients *cl = NULL;
	struct kvs_addr addr;
	int r, fd = -1, rc = 1;

	cfg = defaults;
	r = kvs_opts_argv(&optset, stderr, argc, argv, &cfg);
	if (r)
		return r > 0 ? 0 : 2;
	if (!cfg.ngateways) {
		fprintf(stderr, PROG ": --gateway ADDR:PORT is required (see --help)\n");
		return 2;
	}
	if (cfg.tenant == FRONT_TENANT_HEADER && !cfg.tenant_header) {
		fprintf(stderr, PROG ": --tenant header needs --tenant-header NAME\n");
		return 2;
	}
	if (kvs_parse_addr(cfg.listen, &addr)) {
		fprintf(stderr, PROG ": --listen: '%s' is not ADDR:PORT\n", cfg.listen);
		return 2;
	}
	kvs_log_init(PROG, cfg.level);
	signal(SIGPIPE, SIG_IGN);
	check_nofile(&cfg);

	base = event_base_new();
	http = base ? evhttp_new(base) : NULL;
	if (!http) {
		pr_warn("cannot start libevent");
		goto cleanup;
	}
	fd = kvs_listen(&addr, 1024);
	if (fd < 0) {
		pr_warn("--listen %s: %s", cfg.listen, strerror(-fd));
		goto cleanup;
	}
	kvs_set_nonblock(fd, 1);
	/* A stream is many small writes: Nagle would hold each behind the ACK
	 * of the last, which the client delays (40 ms an event). Accepted
	 * sockets inherit TCP_NODELAY from the listener (Linux): set once. */
	kvs_set_nodelay(fd);
	bound = evhttp_accept_socket_with_handle(http, fd);
	rest.timer = evtimer_new(base, on_accept_rested, NULL);
	if (!bound || !rest.timer) {
		pr_warn("--listen %s: libevent does not take the socket", cfg.listen);
		if (!bound)
			close(fd);
		goto cleanup;
	}
	rest.lev = evhttp_bound_socket_get_listener(bound);
	evconnlistener_set_error_cb(rest.lev, on_accept_error);
	/* Bodies up to 4x the limit are read and answered with an OpenAI
	 * 413, the connection kept; beyond, libevent answers its own 413
	 * and closes, without reading them. */
	evhttp_set_max_body_size(http, (ev_ssize_t)cfg.max_body * 4);
	evhttp_set_max_headers_size(http, 64 << 10);
	evhttp_set_timeout(http, (int)cfg.idle_s);
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						 EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
						 EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);

	cl = clients_new(base, http, &cfg, &st);
	cs = cl ? calls_new(base, &cfg, &ls, cl, &st) : NULL;
	if (!cs) {
		pr_warn("out of memory");
		goto cleanup;
	}
	ls.on_frame = calls_on_frame;
	ls.on_lost = calls_on_lost;
	ls.on_ready = calls_on_ready;
	ls.ctx = cs;
	r = links_open(&ls, base, &cfg);
	if (r) {
		pr_warn("cannot set up the gateway connections: %s", strerror(-r));
		goto cleanup;
	}
	evhttp_set_gencb(http, calls_on_http, cs);

	sigint = evsignal_new(base, SIGINT, on_signal, base);
	sigterm = evsignal_new(base, SIGTERM, on_signal, base);
	if (!sigint || !sigterm || event_add(sigint, NULL) || event_add(sigterm, NULL)) {
		pr_warn("cannot handle signals");
		goto cleanup;
	}
	if (cfg.port_file && kvs_write_port_file(cfg.port_file, kvs_local_port(fd))) {
		pr_warn("--port-file %s: cannot write it", cfg.port_file);
		goto cleanup;
	}
	pr_info("event=listening listen=%s port=%d gateways=%u links=%u up=%u "
		"max_connections=%u max_source_conns=%u trusted_sources=%u request_timeout_s=%u",
		cfg.listen, kvs_local_port(fd), cfg.ngateways, ls.n, links_up(&ls),
		cfg.max_connections, cfg.max_source_conns, cfg.ntrusted, cfg.request_s);
	event_base_dispatch(base);
	rc = 0;
	pr_info("event=exit requests=%llu streamed=%llu completed=%llu errors=%llu "
		"cancelled=%llu busy=%llu bad_requests=%llu link_failures=%llu chunks=%llu "
		"chunk_bytes=%llu connections_refused=%llu connections_refused_source=%llu "
		"request_timeouts=%llu retried=%llu closes_lingered=%llu",
		(unsigned long long)st.requests, (unsigned long long)st.streamed,
		(unsigned long long)st.completed, (unsigned long long)st.errors,
		(unsigned long long)st.cancelled, (unsigned long long)st.rejected_busy,
		(unsigned long long)st.bad_requests, (unsigned long long)st.link_failures,
		(unsigned long long)st.chunks, (unsigned long long)st.chunk_bytes,
		(unsigned long long)st.connections_refused,
		(unsigned long long)st.connections_refused_source,
		(unsigned long long)st.request_timeouts, (unsigned long long)st.retried,
		(unsigned long long)st.closes_lingered);
cleanup:
	if (rest.timer)
		event_free(rest.timer);
	if (sigint)
		event_free(sigint);
	if (sigterm)
		event_free(sigterm);
	/* HTTP first: each client's close cancels its request at the server
	 * (on_client_gone) while the gateway links are still up. */
	if (http)
		evhttp_free(http);
	if (base)
		event_base_loop(base, EVLOOP_NONBLOCK); /* writes those CANCELs */
	calls_free(cs);
	clients_free(cl);
	links_close(&ls);
	if (base)
		event_base_free(base);
	return rc;
}
