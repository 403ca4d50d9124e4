// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench datapath: what each way of moving the bytes costs, on this
 * machine, in one run. An echo backend (each REQUEST answered by a CHUNK
 * carrying its payload back, then an END) and a client of K connections live
 * in this process; between them, in turn:
 *
 *   direct    nothing (the ceiling, and the baseline latency and kernel time)
 *   kernel    kvspliced, the BPF sockmap path
 *   user      kvspliced --datapath user (the controller copies every frame)
 *   haproxy         HAProxy in TCP mode, option splice-auto, one thread
 *   haproxy-splice  the same with splice-request and splice-response forced
 *                   (splice-auto does not splice on loopback: its best case)
 *
 * for each frame size, request/response (one request in flight per
 * connection) and pipelined (--depth in flight); and LLM-shaped traffic
 * (stream): a --stream-request byte request answered by --stream-chunks small
 * CHUNKs, each its own write, as a server streams tokens. Per run:
 * requests/s, GB/s (request and response bytes), latency added over direct
 * (P50, P99), and the gateway's CPU per GB and per request: its own CPU
 * time (/proc/PID/stat) plus the softirq and kworker time the system spent
 * beyond what the direct run spent per byte (/proc/stat, /proc/PID/stat of
 * the kworkers): on loopback the sockmap verdict and TCP both run in
 * softirq, and the psock backlog in a kworker, so the gateway's kernel work
 * is not in its own process's time.
 *
 * This file: the options, the runs in turn, and the report; the parts are
 * in datapath_echo.c, datapath_load.c and datapath_gateway.c.
 */
#include "datapath.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "args.h"
#include "datapath_int.h"
#include "netutil.h"
#include "opts.h"
#include "plot.h"

/* by C_* and M_*, then NULL (the words of --configs and --modes) */
static const char *const cfg_names[NCFG + 1] = { "direct",  "kernel",	      "user",
						 "haproxy", "haproxy-splice", NULL };
static const char *const mode_names[NMODES + 1] = { "rr", "pipelined", "stream", NULL };

/* Why a configuration asked for did not run (NULL: it ran, or was not
 * asked for), by C_*: said where its rows would be, as a line on stderr
 * before the run is easy to miss. */
typedef const char *left_out_t[NCFG];

static void print_left_out(const left_out_t left_out)
{
	for (int c = 0; c < NCFG; c++)
		if (left_out[c])
			printf("%-14s (left out: %s)\n", cfg_names[c], left_out[c]);
}

static void print_table(const struct result *rs, int n, const left_out_t left_out)
{
	printf("%-14s %-9s %8s %10s %8s %10s %9s %9s %9s %10s\n", "config", "mode", "frame",
	       "req/s", "GB/s", "p50_us", "+p50_us", "+p99_us", "cpu_s/GB", "cpu_us/req");
	for (int i = 0; i < n; i++) {
		const struct result *r = &rs[i];

		if (!r->ok) {
			printf("%-14s %-9s %8u   (failed: see the log)\n", cfg_names[r->cfg],
			       mode_names[r->mode], r->size);
			continue;
		}
		printf("%-14s %-9s %8u %10.0f %8.3f %10.1f %9.1f %9.1f %9.3f %10.1f\n",
		       cfg_names[r->cfg], mode_names[r->mode], r->size, r->rps, r->gbps, r->p50_us,
		       r->p50_added_us, r->p99_added_us, r->cpu_s_per_gb, r->cpu_us_per_req);
	}
	print_left_out(left_out);
}

static void print_json(const struct dp_opts *o, const struct result *rs, int n,
		       const left_out_t left_out)
{
	struct utsname u;

	uname(&u);
	printf("{\"kernel\":\"%s\",\"conns\":%u,\"depth\":%u,\"seconds\":%.1f,"
	       "\"stream_request\":%u,\"stream_chunks\":%u,\"stream_chunk_bytes\":%u,"
	       "\"stream_gap_us\":%u,\"stream_depth\":%u,\"stream_step_write\":%s,"
	       "\"configs\":[",
	       u.release, o->conns, o->depth, o->seconds, o->stream_request, o->stream_chunks,
	       o->stream_chunk_bytes, o->stream_gap_us, o->stream_depth,
	       o->stream_step_write ? "true" : "false");
	for (int i = 0; i < n; i++) {
		const struct result *r = &rs[i];

		printf("%s{\"name\":\"%s\",\"mode\":\"%s\",\"frame_bytes\":%u,\"ok\":%s,"
		       "\"rps\":%.1f,\"gbps\":%.6f,\"p50_us\":%.1f,\"p99_us\":%.1f,",
		       i ? "," : "", cfg_names[r->cfg], mode_names[r->mode], r->size,
		       r->ok ? "true" : "false", r->rps, r->gbps, r->p50_us, r->p99_us);
		/* Without a direct run there is nothing to add to: null, not nan
		 * (which is not JSON). */
		if (isnan(r->p50_added_us))
			printf("\"p50_added_us\":null,\"p99_added_us\":null,");
		else
			printf("\"p50_added_us\":%.1f,\"p99_added_us\":%.1f,", r->p50_added_us,
			       r->p99_added_us);
		printf("\"cpu_s_per_gb\":%.4f,\"proc_cpu_s_per_gb\":%.4f,\"cpu_us_per_req\":%.2f}",
		       r->cpu_s_per_gb, r->proc_s_per_gb, r->cpu_us_per_req);
	}
	printf("],\"left_out\":{");
	for (int c = 0, k = 0; c < NCFG; c++)
		if (left_out[c]) /* the reasons hold no quote or backslash */
			printf("%s\"%s\":\"%s\"", k++ ? "," : "", cfg_names[c], left_out[c]);
	printf("}}\n");
}

/* --plot DIR: GB/s and gateway CPU per GB by frame size, one bar per
 * configuration, request/response on the left, pipelined on the right (the
 * stream runs are in the table, not here: one size). */
static int plot(const struct dp_opts *o, const struct result *rs, int n)
{
	char path[4200];
	FILE *f;

	if (mkdir(o->plot, 0755) && errno != EEXIST) {
		fprintf(stderr, PROG ": --plot: cannot create %s: %s\n", o->plot, strerror(errno));
		return -errno;
	}
	snprintf(path, sizeof(path), "%s/datapath.dat", o->plot);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	/* one block per mode; a row per frame size; columns per config */
	for (int mode = M_RR; mode <= M_PIPE; mode++) {
		fprintf(f,
			"# %s: frame_bytes, then GB/s and cpu_s/GB of direct kernel user haproxy "
			"haproxy-splice\n",
			mode_names[mode]);
		for (uint32_t s = 0; s < o->nsizes; s++) {
			double g[NCFG] = { 0 }, c[NCFG] = { 0 };

			for (int i = 0; i < n; i++) {
				if (rs[i].mode != mode || rs[i].size != o->sizes[s] || !rs[i].ok)
					continue;
				g[rs[i].cfg] = rs[i].gbps;
				c[rs[i].cfg] = rs[i].cpu_s_per_gb;
			}
			fprintf(f, "%u", o->sizes[s]);
			for (int k = 0; k < NCFG; k++)
				fprintf(f, " %.4f", g[k]);
			for (int k = 0; k < NCFG; k++)
				fprintf(f, " %.4f", c[k]);
			fprintf(f, "\n");
		}
		fprintf(f, "\n\n");
	}
	fclose(f);
	snprintf(path, sizeof(path), "%s/datapath.gp", o->plot);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "# gnuplot datapath.gp (in this directory) redraws the pictures.\n"
		   "set style data histograms\nset style histogram clustered gap 1\n"
		   "set style fill solid 0.8 border -1\nset grid ytics\n"
		   "set xlabel 'frame payload (bytes)'\n"
		   "do for [t in 'svg png'] {\n"
		   "  if (t eq 'svg') { set terminal svg size 1100,800 } "
		   "else { set terminal pngcairo size 1100,800 }\n"
		   "  set output 'datapath.'.t\n  set multiplot layout 2,2\n"
		   "  do for [m=0:1] {\n"
		   "    set title (m == 0 ? 'request/response' : 'pipelined').': GB/s'\n"
		   "    unset logscale y\n    set key top left opaque\n"
		   "    plot for [k=2:6] 'datapath.dat' index m using k:xtic(1) lc (k-1) "
		   "title word('direct kernel user haproxy haproxy-splice', k-1)\n"
		   "    set title (m == 0 ? 'request/response' : 'pipelined')."
		   "': gateway CPU s per GB (log)'\n    set logscale y\n"
		   "    set key top right\n"
		   "    plot for [k=8:11] 'datapath.dat' index m using k:xtic(1) lc (k-6) "
		   "title word('kernel user haproxy haproxy-splice', k-7)\n"
		   "  }\n  unset multiplot\n}\n");
	fclose(f);
	return bench_gnuplot(PROG, o->plot, "datapath.gp");
}

/* Against the direct run of the same size and mode: latency added, and the
 * kernel time beyond what moving the bytes directly costs per byte. */
static void derive(struct result *rs, int n)
{
	for (int i = 0; i < n; i++) {
		const struct result *d = NULL;
		struct result *r = &rs[i];
		double base = 0, gb = r->bytes / 1e9;

		for (int j = 0; j < n; j++)
			if (rs[j].cfg == C_DIRECT && rs[j].size == r->size &&
			    rs[j].mode == r->mode && rs[j].ok)
				d = &rs[j];
		if (!r->ok || gb <= 0)
			continue;
		if (d && d->bytes > 0)
			base = d->kernel_s / d->bytes * r->bytes;
		r->p50_added_us = d ? r->p50_us - d->p50_us : NAN;
		r->p99_added_us = d ? r->p99_us - d->p99_us : NAN;
		r->proc_s_per_gb = r->proc_s / gb;
		r->cpu_s_per_gb = r->cfg == C_DIRECT ? 0 : (r->proc_s + r->kernel_s - base) / gb;
		r->cpu_us_per_req = r->cfg == C_DIRECT || r->requests <= 0 ?
					    0 :
					    (r->proc_s + r->kernel_s - base) / r->requests * 1e6;
	}
}

/* --sizes. */
static int parse_sizes(FILE *err, const char *who, const struct kvs_opt *row, const char *s,
		       void *dst)
{
	struct dp_opts *o = KVS_OPT_TARGET(struct dp_opts, sizes, dst);
	char *copy = strdup(s), *save = NULL, *t;
	int bad = copy ? 0 : -1;

	o->nsizes = 0;
	for (t = copy ? strtok_r(copy, ",", &save) : NULL; t && !bad;
	     t = strtok_r(NULL, ",", &save))
		bad = o->nsizes == MAX_SIZES ||
		      kvs_arg_u32(err, who, "--sizes", t, 1, 4u << 20, &o->sizes[o->nsizes++]);
	free(copy);
	return bad || !o->nsizes ? -1 : 0;
}

/* --configs, --modes: a comma-separated list of the row's words into the
 * bool array at dst, one a word. */
static int parse_names(FILE *err, const char *who, const struct kvs_opt *row, const char *s,
		       void *dst)
{
	const char *const *names = row->words;
	char *copy = strdup(s), *save = NULL, *t;
	int bad = copy ? 0 : -1, n = 0;
	bool *on = dst;

	while (names[n])
		n++;
	memset(on, 0, sizeof(*on) * (size_t)n);
	for (t = copy ? strtok_r(copy, ",", &save) : NULL; t && !bad;
	     t = strtok_r(NULL, ",", &save)) {
		int c;

		for (c = 0; c < n && strcmp(t, names[c]); c++)
			;
		if (c == n) {
			fprintf(err, "%s: --%s: '%s' is not one of", who, row->name, t);
			for (c = 0; c < n; c++)
				fprintf(err, "%s %s", c ? "," : "", names[c]);
			fprintf(err, "\n");
			bad = -1;
		} else {
			on[c] = true;
		}
	}
	free(copy);
	return bad;
}

static int parse_gateway(FILE *err, const char *who, const struct kvs_opt *row, const char *s,
			 void *dst)
{
	snprintf(dst, sizeof(((struct dp_opts *)0)->gw_bin), "%s", s);
	return 0;
}

static const struct dp_opts defaults = { .conns = 8,
					 .depth = 16,
					 .seconds = 3,
					 .warmup = 0.5,
					 .sizes = { 1024, 32768, 262144 },
					 .nsizes = 3,
					 .stream_request = 32768,
					 .stream_chunks = 256,
					 .stream_chunk_bytes = 32,
					 .stream_gap_us = 100,
					 .stream_depth = 1,
					 .on = { true, true, true, true, true },
					 .mode_on = { true, true, true },
					 .haproxy = "haproxy" };

#define O struct dp_opts
static const struct kvs_opt rows[] = {
	{ "conns", 'k', KVS_OPT_U32(O, conns, 1, MAX_CONNS), .arg = "K",
	  .help = "client connections (default {default})" },
	{ "depth", 'd', KVS_OPT_U32(O, depth, 1, 256), .arg = "D",
	  .help = "requests in flight per connection when pipelined\n"
		  "(default {default})" },
	{ "sizes", 0, KVS_OPT_FUNC(O, sizes, parse_sizes), .arg = "LIST",
	  .help = "frame payload sizes in bytes (default\n"
		  "1024,32768,262144)" },
	{ "seconds", 0, KVS_OPT_DOUBLE(O, seconds, 0.2, 600), .arg = "S",
	  .help = "measured seconds per run (default {default}; 0.5 s warm-up)" },
	{ "modes", 0, KVS_OPT_FUNC(O, mode_on, parse_names), .words = mode_names, .arg = "LIST",
	  .help = "of rr,pipelined,stream (default: all three)" },
	{ "stream-request", 0, KVS_OPT_U32(O, stream_request, 1, 4u << 20), .arg = "B",
	  .help = "request bytes of a stream run (default {default})" },
	/* 2 at least: one CHUNK is the echo answer of rr */
	{ "stream-chunks", 0, KVS_OPT_U32(O, stream_chunks, 2, 100000), .arg = "N",
	  .help = "CHUNKs answering it (default {default})" },
	{ "stream-chunk-bytes", 0, KVS_OPT_U32(O, stream_chunk_bytes, 1, 60000), .arg = "B",
	  .help = "payload of each (default {default})" },
	{ "stream-gap-us", 0, KVS_OPT_U32(O, stream_gap_us, 0, 1000000), .arg = "G",
	  .help = "between two CHUNKs of a stream (default {default}: one\n"
		  "per decode step of a fast model; 0: back to back,\n"
		  "which lets a userspace proxy read many at once)" },
	{ "stream-depth", 0, KVS_OPT_U32(O, stream_depth, 1, 1024), .arg = "D",
	  .help = "streams in flight per client connection (default\n"
		  "{default}; more: many requests multiplexed on few\n"
		  "connections, as kvsplice-http's links to the gateway)" },
	{ "stream-step-write", 0, KVS_OPT_FLAG(O, stream_step_write),
	  .help = "the backend writes each decode step's CHUNKs of a\n"
		  "connection in one write, grouped by client, as an\n"
		  "engine sends a step's outputs together (default: each\n"
		  "CHUNK its own write)" },
	{ "configs", 0, KVS_OPT_FUNC(O, on, parse_names), .words = cfg_names, .arg = "LIST",
	  .help = "of direct,kernel,user,haproxy,haproxy-splice\n"
		  "(default: all; a config whose program is missing\n"
		  "is left out, with a row in the table that says why:\n"
		  "make bench-datapath installs HAProxy, this does not)" },
	{ "kvspliced", 0, KVS_OPT_FUNC(O, gw_bin, parse_gateway), .arg = "PATH",
	  .help = "the gateway (default: kvspliced beside this program)" },
	{ "haproxy", 0, KVS_OPT_STR(O, haproxy), .arg = "PATH",
	  .help = "(default: haproxy on PATH)" },
	{ "json", 0, KVS_OPT_FLAG(O, json),
	  .help = "the results as JSON: {\"kernel\", \"configs\": [{name,\n"
		  "mode, frame_bytes, rps, gbps, p50_added_us,\n"
		  "p99_added_us, cpu_s_per_gb, ...}], \"left_out\":\n"
		  "{config: why}}" },
	{ "plot", 0, KVS_OPT_STR(O, plot), .arg = "DIR",
	  .help = "GB/s and CPU per GB by frame size, per config\n"
		  "(gnuplot: DIR/datapath.{svg,png}, data and script)" },
	KVS_OPT_ROW_HELP,
};
#undef O

static const struct kvs_optset optset = {
	.prog = PROG,
	KVS_OPT_ROWS(rows),
	.defaults = &defaults,
	.usage = "Usage: kvsplice-bench datapath [options]\n"
		 "\n"
		 "The data-path benchmark: an echo backend and a client of K connections in\n"
		 "this process, with nothing (direct), kvspliced's kernel path, its userspace\n"
		 "path, HAProxy (TCP mode, splice-auto, one thread) and HAProxy with splicing\n"
		 "forced (haproxy-splice) between them, for each frame size, request/response\n"
		 "(rr) and pipelined; and LLM-shaped traffic (stream): a 32 KiB request answered\n"
		 "by a stream of small CHUNKs, each its own write. Prints requests/s, GB/s,\n"
		 "latency added over direct (P50, P99), and the gateway's CPU seconds per GB\n"
		 "and microseconds per request (its own CPU plus the softirq and kworker time\n"
		 "beyond the direct run's). Needs root.\n"
		 "\n"
		 "Options:\n",
	.footer = "",
	.help_col = 25,
	.help_on_error = true,
	.operands = true, /* and ignored */
};

/* Is prog runnable (a path, or on PATH)? */
static bool runnable(const char *prog)
{
	char cmd[4200];

	if (strchr(prog, '/'))
		return access(prog, X_OK) == 0;
	snprintf(cmd, sizeof(cmd), "command -v '%s' >/dev/null 2>&1", prog);
	return system(cmd) == 0;
}

int bench_datapath(int argc, char **argv)
{
	struct dp_opts o = defaults;
	struct result rs[NCFG * (MAX_SIZES * 2 + 1)];
	left_out_t left_out = { NULL };
	char tmp[512];
	struct kvs_addr la;
	struct echo el;
	pthread_t et;
	int n = 0, lfd, echo, rc;
	ssize_t len;

	len = readlink("/proc/self/exe", o.gw_bin, sizeof(o.gw_bin) - 32);
	if (len > 0) {
		char *slash;

		o.gw_bin[len] = '\0';
		slash = strrchr(o.gw_bin, '/');
		strcpy(slash ? slash + 1 : o.gw_bin, "kvspliced");
	}
	rc = kvs_opts_argv(&optset, stderr, argc, argv, &o);
	if (rc)
		return rc > 0 ? 0 : 2;
	if ((o.on[C_KERNEL] || o.on[C_USER]) && !runnable(o.gw_bin)) {
		fprintf(stderr,
			PROG ": %s not found (--kvspliced PATH): kernel and user left out\n",
			o.gw_bin);
		for (int c = C_KERNEL; c <= C_USER; c++)
			if (o.on[c])
				left_out[c] = "kvspliced not found beside kvsplice-bench; "
					      "--kvspliced PATH";
		o.on[C_KERNEL] = o.on[C_USER] = false;
	}
	if ((o.on[C_HAPROXY] || o.on[C_HAPROXY_SPLICE]) && !runnable(o.haproxy)) {
		fprintf(stderr,
			PROG ": %s not found (apt-get install haproxy, or --haproxy PATH): haproxy "
			     "left out\n",
			o.haproxy);
		for (int c = C_HAPROXY; c <= C_HAPROXY_SPLICE; c++)
			if (o.on[c])
				left_out[c] = "HAProxy is not installed; make bench-datapath "
					      "installs it, or apt-get install haproxy, or "
					      "--haproxy PATH";
		o.on[C_HAPROXY] = o.on[C_HAPROXY_SPLICE] = false;
	}
	/* the gateways' logs and port files: under $TMPDIR, as mktemp's */
	snprintf(tmp, sizeof(tmp), "%s/kvs-dpbench.XXXXXX",
		 getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmp)) {
		fprintf(stderr, PROG ": cannot create %s: %s\n", tmp, strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	kvs_parse_addr("127.0.0.1:0", &la);
	lfd = kvs_listen(&la, 256);
	echo = lfd >= 0 ? kvs_local_port(lfd) : -1;
	el = (struct echo){ .fd = lfd,
			    .chunk_bytes = o.stream_chunk_bytes,
			    .gap_us = o.stream_gap_us,
			    .step_write = o.stream_step_write };
	/* the stream's pace needs sleeps near gap_us, not the default 50 us
	 * timer slack on top */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	if (echo < 0 || pthread_create(&et, NULL, dp_echo_accept, &el)) {
		fprintf(stderr, PROG ": cannot start the echo backend\n");
		dp_remove_tmp(tmp, cfg_names);
		return 1;
	}
	for (int cfg = 0; cfg < NCFG; cfg++) {
		int port = echo;
		pid_t gw = 0;

		if (!o.on[cfg])
			continue;
		if (cfg != C_DIRECT) {
			gw = dp_start_gateway(&o, cfg, cfg_names[cfg], (uint16_t)echo, tmp, &port);
			if (gw < 0) {
				rc = 1;
				continue;
			}
		}
		/* every size rr and pipelined, then the one stream run */
		for (uint32_t s = 0; s <= o.nsizes; s++) {
			for (int mode = 0; mode < NMODES; mode++) {
				uint32_t size = s < o.nsizes ? o.sizes[s] : o.stream_request;
				struct result *r;

				if (!o.mode_on[mode] || (mode == M_STREAM) != (s == o.nsizes))
					continue;
				r = &rs[n++];
				memset(r, 0, sizeof(*r));
				r->cfg = cfg;
				r->mode = mode;
				r->size = size;
				if (!o.json)
					fprintf(stderr, "%s: %s, %u-byte frames, %s ...\n", PROG,
						cfg_names[cfg], size, mode_names[mode]);
				if (dp_run_load(&o, cfg_names[cfg], (uint16_t)port, size, mode, gw,
						r) ||
				    !r->ok) {
					fprintf(stderr, PROG ": %s %s %u: failed (logs in %s)\n",
						cfg_names[cfg], mode_names[mode], size, tmp);
					rc = 1;
				}
			}
		}
		dp_stop_gateway(gw);
	}
	derive(rs, n);
	if (o.plot && plot(&o, rs, n))
		rc = 1;
	if (o.json)
		print_json(&o, rs, n, left_out);
	else
		print_table(rs, n, left_out);
	close(lfd);
	/* The gateways' logs are kept only when something failed (the
	 * messages above name the directory): every run used to leave one. */
	if (rc)
		fprintf(stderr, PROG ": logs kept in %s\n", tmp);
	else
		dp_remove_tmp(tmp, cfg_names);
	return rc;
}
