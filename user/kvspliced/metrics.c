// SPDX-License-Identifier: MIT
/* The Prometheus text exposition of a snapshot of the gateway. */
#include "metrics.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

const double kvs_decide_bounds[KVS_DECIDE_BUCKETS] = {
	1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 1e-2,
};

void kvs_decide_observe(struct kvs_decide_hist *h, double seconds)
{
	int i = 0;

	while (i < KVS_DECIDE_BUCKETS && seconds > kvs_decide_bounds[i])
		i++;
	h->count[i]++;
	h->sum_s += seconds;
}

struct out {
	char *buf;
	size_t cap, len;
};

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->len < o->cap ? o->buf + o->len : NULL,
		      o->len < o->cap ? o->cap - o->len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

static void head(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The per-backend series read straight from the backends map. */
/* A tenant's share of the routes map, labelled by its index (in
 * --tenant-source order; 0: clients of no tenant). */
static const struct {
	const char *name, *type, *help;
	size_t off;
} share_fields[] = {
	{ "kvsplice_tenant_routes", "gauge",
	  "Routes of a tenant's clients in the routes map, as counted against its share.",
	  offsetof(struct kvs_route_share, routes) },
	{ "kvsplice_tenant_route_share", "gauge",
	  "Routes a tenant may have in the routes map (--tenant-routes).",
	  offsetof(struct kvs_route_share, share) },
	{ "kvsplice_tenant_routes_refused_total", "counter",
	  "Requests of a tenant's clients that taught the kernel no route: its share was full.",
	  offsetof(struct kvs_route_share, refused) },
	{ "kvsplice_tenant_routes_trimmed_total", "counter",
	  "Its least used routes the controller removed as it neared its share.",
	  offsetof(struct kvs_route_share, trimmed) },
};

static const struct {
	const char *name, *type, *help;
	size_t off;
} be_fields[] = {
	{ "kvsplice_backend_outstanding_requests", "gauge",
	  "Requests sent to the backend and not yet ended.",
	  offsetof(struct kvs_backend, outstanding) },
	{ "kvsplice_backend_outstanding_work_tokens", "gauge",
	  "Work charged to the backend and not yet done, in tokens.",
	  offsetof(struct kvs_backend, outstanding_work) },
	{ "kvsplice_backend_requests_total", "counter", "Requests sent to the backend.",
	  offsetof(struct kvs_backend, req_frames) },
	{ "kvsplice_backend_request_bytes_total", "counter", "Request bytes sent to the backend.",
	  offsetof(struct kvs_backend, req_bytes) },
	{ "kvsplice_backend_response_bytes_total", "counter",
	  "Response bytes from the backend to clients.", offsetof(struct kvs_backend, resp_bytes) },
	{ "kvsplice_backend_prompt_tokens_total", "counter",
	  "Prompt tokens the backend reported in its END frames.",
	  offsetof(struct kvs_backend, prompt_tokens) },
	{ "kvsplice_backend_cached_tokens_total", "counter",
	  "Of which served from its prefix cache (hit rate: cached / prompt).",
	  offsetof(struct kvs_backend, cached_tokens) },
	{ "kvsplice_backend_index_blocks", "gauge",
	  "The size of the controller's index of its cache, in 16-token blocks: what it said of "
	  "itself, or --backend-kv-blocks, as its reports corrected it.",
	  offsetof(struct kvs_backend, index_blocks) },
};

/* One part of the backends' first-token times, a counter in seconds (off:
 * its sum in struct kvs_ttft, in us). */
static void ttft_part(struct out *o, const struct kvs_metrics_in *in, const char *name,
		      const char *help, size_t off)
{
	__u64 us;

	head(o, name, "counter", help);
	for (uint32_t bi = 0; bi < in->nbackends; bi++) {
		if (!in->names[bi])
			continue;
		memcpy(&us, (const char *)&in->ttft[bi] + off, sizeof(us));
		put(o, "%s{backend=\"%s\"} %.6f\n", name, in->names[bi], (double)us / 1e6);
	}
}

/*
 * The backends' own first-token times (struct kvs_ttft): a histogram, and
 * its two parts. The kernel adds while this reads, so the count is the
 * buckets' sum (as Prometheus needs +Inf to be) and the sums may be a
 * request ahead or behind it.
 */
static void render_ttft(struct out *o, const struct kvs_metrics_in *in)
{
	uint32_t bi;
	int i;

	head(o, "kvsplice_backend_ttft_seconds", "histogram",
	     "Time to first token as the backend reported it in its END frames: from the "
	     "request's arrival at the server to its first token (queue + prefill).");
	for (bi = 0; bi < in->nbackends; bi++) {
		const struct kvs_ttft *t = &in->ttft[bi];
		uint64_t cum = 0;

		if (!in->names[bi])
			continue;
		for (i = 0; i < KVS_TTFT_BUCKETS; i++) {
			cum += t->bucket[i];
			if (i < KVS_TTFT_BUCKETS - 1)
				put(o,
				    "kvsplice_backend_ttft_seconds_bucket{backend=\"%s\",le=\"%g\"} %llu\n",
				    in->names[bi], (double)kvs_ttft_bounds_us[i] / 1e6,
				    (unsigned long long)cum);
			else
				put(o,
				    "kvsplice_backend_ttft_seconds_bucket{backend=\"%s\",le=\"+Inf\"} %llu\n",
				    in->names[bi], (unsigned long long)cum);
		}
		put(o, "kvsplice_backend_ttft_seconds_sum{backend=\"%s\"} %.6f\n", in->names[bi],
		    (double)(t->queue_us + t->prefill_us) / 1e6);
		put(o, "kvsplice_backend_ttft_seconds_count{backend=\"%s\"} %llu\n", in->names[bi],
		    (unsigned long long)cum);
	}
	ttft_part(o, in, "kvsplice_backend_queue_seconds_total",
		  "Of kvsplice_backend_ttft_seconds, the time requests waited at the server "
		  "before their prefill began (its load).",
		  offsetof(struct kvs_ttft, queue_us));
	ttft_part(o, in, "kvsplice_backend_prefill_seconds_total",
		  "Of kvsplice_backend_ttft_seconds, the time their prefill took (the prompt "
		  "tokens its cache did not hold).",
		  offsetof(struct kvs_ttft, prefill_us));
}

size_t kvs_metrics_render(char *buf, size_t cap, const struct kvs_metrics_in *in)
{
	struct out o = { buf, cap, 0 };
	const struct kvs_stats *k = in->k;
	const struct kvs_ctl_stats *c = in->c;
	uint64_t cum = 0;
	uint32_t bi;
	size_t f;
	int i;

	if (cap)
		buf[0] = 0;
	head(&o, "kvsplice_requests_total", "counter",
	     "Requests routed, by path: the kernel's fast path, the controller's slow path, "
	     "or the userspace data path.");
	put(&o, "kvsplice_requests_total{path=\"kernel\"} %llu\n",
	    (unsigned long long)k->fast_path_frames);
	put(&o, "kvsplice_requests_total{path=\"controller\"} %llu\n",
	    (unsigned long long)c->slow_frames);
	put(&o, "kvsplice_requests_total{path=\"user\"} %llu\n",
	    (unsigned long long)c->user_path_frames);
	head(&o, "kvsplice_controller_bytes_total", "counter",
	     "Bytes of requests the controller copied, by path (the kernel's copies none).");
	put(&o, "kvsplice_controller_bytes_total{path=\"controller\"} %llu\n",
	    (unsigned long long)c->slow_bytes);
	put(&o, "kvsplice_controller_bytes_total{path=\"user\"} %llu\n",
	    (unsigned long long)c->user_path_bytes);
	head(&o, "kvsplice_response_frames_total", "counter",
	     "Response frames spliced back to clients by the kernel.");
	put(&o, "kvsplice_response_frames_total %llu\n", (unsigned long long)k->resp_frames);
	head(&o, "kvsplice_decisions_total", "counter",
	     "The controller's routing decisions by reason.");
/* One labelled sample of a counter. */
#define C(metric, labels, v) put(&o, metric "{" labels "} %llu\n", (unsigned long long)(v))
	C("kvsplice_decisions_total", "reason=\"prefix\"", c->decided_prefix);
	C("kvsplice_decisions_total", "reason=\"spill\"", c->decided_spill);
	C("kvsplice_decisions_total", "reason=\"shared\"", c->decided_shared);
	C("kvsplice_decisions_total", "reason=\"cold\"", c->decided_cold);
	C("kvsplice_decisions_total", "reason=\"hot\"", c->decided_hot);
	head(&o, "kvsplice_kernel_placed_total", "counter",
	     "Requests the kernel placed itself (include/kvsplice/place.h), by why no route "
	     "was followed.");
	C("kvsplice_kernel_placed_total", "why=\"cold\"", k->placed_cold);
	C("kvsplice_kernel_placed_total", "why=\"shallow\"", k->placed_shallow);
	C("kvsplice_kernel_placed_total", "why=\"spill\"", k->placed_spill);
	C("kvsplice_kernel_placed_total", "why=\"stale\"", k->placed_stale);
	head(&o, "kvsplice_reports_total", "counter",
	     "The kernel's decision reports: written, lost to a full ring (the request was "
	     "served; the controller's index missed it), read by the controller.");
	C("kvsplice_reports_total", "state=\"written\"", k->reports);
	C("kvsplice_reports_total", "state=\"lost\"", k->reports_lost);
	C("kvsplice_reports_total", "state=\"read\"", c->reports_read);
	head(&o, "kvsplice_errors_total", "counter", "Errors and refusals by kind.");
#define E(kind, v) C("kvsplice_errors_total", "kind=\"" kind "\"", v)
	E("bad_frame", c->bad_frames);
	E("no_backend", c->no_backend);
	E("busy_client", c->busy_client);
	E("frame_timeout", c->frame_timeouts);
	E("backend_gone", c->failed_inflight);
	E("health_failure", c->health_failures);
	E("upstream_failure", c->upstream_failures);
	E("drop_no_client", k->drop_no_client);
	E("drop_bad_upstream", k->drop_bad_upstream);
	E("drop_punt", k->drop_punt);
	E("cancel_unknown", k->drop_cancel + c->user_cancels_dropped);
	E("accept_failed", c->accept_failed);
	E("client_shed", c->clients_shed);
	E("client_over_source", c->clients_over_source);
	E("client_idle", c->clients_idle_closed);
#undef E
	head(&o, "kvsplice_ctl_budget_frames_total", "counter",
	     "Frames of clients over their budget of controller work (--ctl-rate), by what "
	     "they got: PINGs and CANCELs dropped, requests answered busy.");
	C("kvsplice_ctl_budget_frames_total", "action=\"dropped\"",
	  k->drop_budget + c->budget_dropped);
	C("kvsplice_ctl_budget_frames_total", "action=\"busy\"", c->busy_budget);
	head(&o, "kvsplice_ctl_budget_closed_total", "counter",
	     "Client connections closed for staying over their budget of controller work "
	     "(--ctl-close-after).");
	put(&o, "kvsplice_ctl_budget_closed_total %llu\n", (unsigned long long)c->budget_closed);
	head(&o, "kvsplice_kernel_verdicts_nested_total", "counter",
	     "Verdicts that began while another ran on their CPU (the strparser's worker "
	     "interrupted from softirq), each in a scratch slot of its own; with no slot "
	     "left, their request went to the controller and their run was dropped.");
	C("kvsplice_kernel_verdicts_nested_total", "slot=\"own\"",
	  k->verdict_nested > k->verdict_nest_full ? k->verdict_nested - k->verdict_nest_full : 0);
	C("kvsplice_kernel_verdicts_nested_total", "slot=\"none\"", k->verdict_nest_full);
#undef C
	head(&o, "kvsplice_cancels_total", "counter",
	     "CANCELs sent to backends by path: the kernel's (clients' and the controller's own "
	     "for clients gone), the userspace path's (clients').");
	put(&o, "kvsplice_cancels_total{path=\"kernel\"} %llu\n",
	    (unsigned long long)k->cancel_frames);
	put(&o, "kvsplice_cancels_total{path=\"user\"} %llu\n",
	    (unsigned long long)c->user_path_cancels);
	head(&o, "kvsplice_gateway_cancels_total", "counter",
	     "CANCELs the gateway sent of its own: for requests of clients that went away, and "
	     "for those it ended itself when their backend went.");
	put(&o, "kvsplice_gateway_cancels_total %llu\n", (unsigned long long)c->cancels_sent);
	head(&o, "kvsplice_clients", "gauge", "Client connections open.");
	put(&o, "kvsplice_clients %u\n", in->clients);
	head(&o, "kvsplice_clients_accepted_total", "counter", "Client connections accepted.");
	put(&o, "kvsplice_clients_accepted_total %llu\n", (unsigned long long)c->clients_accepted);
	if (in->open_fds >= 0 && in->max_fds > 0) {
		head(&o, "process_open_fds", "gauge",
		     "The controller's open descriptors (one per client connection among them).");
		put(&o, "process_open_fds %ld\n", in->open_fds);
		head(&o, "process_max_fds", "gauge",
		     "Its descriptor limit (RLIMIT_NOFILE): at it, new clients are answered busy.");
		put(&o, "process_max_fds %ld\n", in->max_fds);
	}
	if (in->routes >= 0) {
		head(&o, "kvsplice_routes", "gauge",
		     "Entries in the kernel's routes map (capacity 262144): the kernel's count, "
		     "or on a kernel without one a walk's at most 10 s old "
		     "(kvsplice_routes_count_age_seconds).");
		put(&o, "kvsplice_routes %ld\n", in->routes);
		head(&o, "kvsplice_routes_count_age_seconds", "gauge",
		     "How long ago kvsplice_routes was counted: 0 with the kernel's count; "
		     "without it a walk of the whole map, which a scrape reuses up to 10 s.");
		put(&o, "kvsplice_routes_count_age_seconds %.3f\n", in->routes_age_s);
	}
	for (f = 0; in->nshares && f < sizeof(share_fields) / sizeof(share_fields[0]); f++) {
		head(&o, share_fields[f].name, share_fields[f].type, share_fields[f].help);
		for (uint32_t t = 0; t < in->nshares; t++) {
			__u64 v;

			memcpy(&v, (const char *)&in->shares[t] + share_fields[f].off, sizeof(v));
			put(&o, "%s{tenant=\"%u\"} %llu\n", share_fields[f].name, t,
			    (unsigned long long)v);
		}
	}
	head(&o, "kvsplice_backend_up", "gauge",
	     "1 if the backend takes new work (0: down, draining, removing, on probation, "
	     "not ready).");
	for (bi = 0; bi < in->nbackends; bi++)
		if (in->names[bi])
			put(&o, "kvsplice_backend_up{backend=\"%s\"} %d\n", in->names[bi],
			    in->be[bi].state == KVS_BE_UP);
	if (in->restarts) {
		head(&o, "kvsplice_backend_restarts_total", "counter",
		     "Times the backend came back as a new instance (restarted, its cache empty: "
		     "its routes withdrawn), as this controller saw them since it started.");
		for (bi = 0; bi < in->nbackends; bi++)
			if (in->names[bi])
				put(&o, "kvsplice_backend_restarts_total{backend=\"%s\"} %llu\n",
				    in->names[bi], (unsigned long long)in->restarts[bi]);
	}
	for (f = 0; f < sizeof(be_fields) / sizeof(be_fields[0]); f++) {
		head(&o, be_fields[f].name, be_fields[f].type, be_fields[f].help);
		for (bi = 0; bi < in->nbackends; bi++) {
			__u64 v;

			if (!in->names[bi]) /* a slot with no backend (removed) */
				continue;
			memcpy(&v, (const char *)&in->be[bi] + be_fields[f].off, sizeof(v));
			put(&o, "%s{backend=\"%s\"} %llu\n", be_fields[f].name, in->names[bi],
			    (unsigned long long)v);
		}
	}
	if (in->ttft)
		render_ttft(&o, in);
	if (in->x) {
		head(&o, "kvsplice_xdp_dropped_total", "counter",
		     "Packets to the gateway port dropped by XDP admission, by reason.");
		put(&o, "kvsplice_xdp_dropped_total{reason=\"denied\"} %llu\n",
		    (unsigned long long)in->x->drop_denied);
		put(&o, "kvsplice_xdp_dropped_total{reason=\"not_allowed\"} %llu\n",
		    (unsigned long long)in->x->drop_not_allowed);
		put(&o, "kvsplice_xdp_dropped_total{reason=\"syn_rate\"} %llu\n",
		    (unsigned long long)in->x->drop_syn_rate);
	}
	head(&o, "kvsplice_decision_seconds", "histogram",
	     "Time the controller takes to route a request (slow path).");
	for (i = 0; i <= KVS_DECIDE_BUCKETS; i++) {
		cum += in->decide->count[i];
		if (i < KVS_DECIDE_BUCKETS)
			put(&o, "kvsplice_decision_seconds_bucket{le=\"%g\"} %llu\n",
			    kvs_decide_bounds[i], (unsigned long long)cum);
		else
			put(&o, "kvsplice_decision_seconds_bucket{le=\"+Inf\"} %llu\n",
			    (unsigned long long)cum);
	}
	put(&o, "kvsplice_decision_seconds_sum %.9f\n", in->decide->sum_s);
	put(&o, "kvsplice_decision_seconds_count %llu\n", (unsigned long long)cum);
	return o.len;
}
