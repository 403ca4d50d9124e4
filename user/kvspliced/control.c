// SPDX-License-Identifier: MIT
/*
 * The controller's control socket: what kvsplicectl asks of a running
 * controller (status, backend add|remove|drain|undrain, reload). What the
 * maps already say (backends, routes, conns, stats) kvsplicectl reads from
 * the maps itself, so it works while the controller is down.
 *
 * One command per connection: a line of words, "--json" anywhere among
 * them for JSON; the reply's first line is "ok" or "error: MESSAGE", the
 * body follows, and the controller closes the connection.
 */
#include "control.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend.h"
#include "conn.h"
#include "log.h"
#include "loop.h"
#include "pins.h"
#include "reload.h"
#include "route_shares.h"
#include "upath.h"
#include "upgrade.h"

#define MAX_WORDS 8

static int control_listen(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	err = kvs_mkdir_parent(path);
	if (err)
		return err;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A socket file someone answers on is another controller's; one that
	 * refuses is a dead one's, and goes. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		return -EADDRINUSE;
	}
	close(fd);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || chmod(path, 0600) || listen(fd, 16)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* The reply's first line, when the command failed. */
__attribute__((format(printf, 2, 3))) static void reply_error(FILE *out, const char *fmt, ...)
{
	va_list ap;

	fprintf(out, "error: ");
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fprintf(out, "\n");
}

/* s as a JSON string, quotes included (paths and messages may hold any
 * byte an operator typed). */
static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(out, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(out, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

/* What one client may make the controller do, and what those over it got. */
static void budget_line(struct gw *g, FILE *out, const struct kvs_stats *k)
{
	const struct gw_config *cfg = g->cfg;

	if (!cfg->ctl_rate) {
		fprintf(out, "budget      none (--ctl-rate 0)\n");
		return;
	}
	fprintf(out,
		"budget      %u controller frames/s a client (burst %u; none for fronts); over: "
		"%llu dropped, %llu answered busy, %llu clients closed\n",
		cfg->ctl_rate, cfg->ctl_burst,
		(unsigned long long)(k->drop_budget + g->ctl.budget_dropped),
		(unsigned long long)g->ctl.busy_budget, (unsigned long long)g->ctl.budget_closed);
}

static void cmd_status(struct gw *g, FILE *out, bool json)
{
	uint32_t n[KVS_BE_STATES] = { 0 }, b, total = 0;
	uint64_t now = kvs_now_ns(), routes_at = now;
	double uptime = (double)(now - g->started_ns) / 1e9, routes_age;
	struct kvs_stats k;
	/* The metrics' count: the kernel's, or one at most
	 * GW_ROUTES_COUNT_AGE_NS old (a walk of a full map holds this loop
	 * for tens of ms: a script polling status must not make it walk each
	 * time). */
	long routes = g->dp.in_memory ? 0 : gw_routes_count(g, now, &routes_at);
	uint32_t kclients, uclients;
	char listen[96];

	routes_age = (double)(now - routes_at) / 1e9;
	gw_up_count(g, &kclients, &uclients);
	for (b = 0; b < g->nslots; b++) {
		if (!g->be[b].present)
			continue;
		n[gw_backend_state(g, b)]++;
		total++;
	}
	if (kvs_read_kstats(g->dp.stats_fd, &k))
		memset(&k, 0, sizeof(k));
	snprintf(listen, sizeof(listen), "%s", "?");
	if (g->listen_fd >= 0) {
		struct kvs_endpoint l, r;

		kvs_sock_endpoints(g->listen_fd, &l, &r);
		kvs_endpoint_str(&l, listen, sizeof(listen));
	}
	fprintf(out, "ok\n");
	if (json) {
		fprintf(out, "{\"controller\":\"running\",\"pid\":%d,\"uptime_s\":%.1f,\"config\":",
			(int)getpid(), uptime);
		if (g->cfg->config_path)
			json_str(out, g->cfg->config_path);
		else
			fprintf(out, "null");
		fprintf(out,
			",\"listen\":\"%s\",\"datapath\":\"%s\",\"bpf\":%s,\"pin_dir\":", listen,
			g->user_path ? "user" : "kernel", g->dp.in_memory ? "false" : "true");
		json_str(out, g->cfg->pin_dir);
		fprintf(out,
			",\"backends\":{\"total\":%u,\"up\":%u,\"draining\":%u,\"removing\":%u,"
			"\"down\":%u,\"probation\":%u,\"not_ready\":%u},\"clients\":%u,"
			"\"clients_by_path\":{\"kernel\":%u,\"user\":%u},"
			"\"requests\":{\"kernel\":%llu,\"controller\":%llu,\"user\":%llu},"
			"\"routes\":%ld,\"routes_age_s\":%.1f,\"fd_store\":{\"on\":%s,\"failing\":%s,\"fds\":%llu},"
			"\"ctl_budget\":{\"rate\":%u,\"burst\":%u,\"close_after\":%u,"
			"\"dropped\":%llu,\"busy\":%llu,\"closed\":%llu},"
			"\"upgrade\":",
			total, n[KVS_BE_UP], n[KVS_BE_DRAINING], n[KVS_BE_REMOVING], n[KVS_BE_DOWN],
			n[KVS_BE_PROBATION], n[KVS_BE_NOT_READY], g->clients.count, kclients,
			uclients, (unsigned long long)k.fast_path_frames,
			(unsigned long long)g->ctl.slow_frames,
			(unsigned long long)g->ctl.user_path_frames, routes, routes_age,
			g->fdstore.on ? "true" : "false", g->fdstore.failing ? "true" : "false",
			(unsigned long long)g->fdstore.fds, g->cfg->ctl_rate, g->cfg->ctl_burst,
			g->cfg->ctl_close_after,
			(unsigned long long)(k.drop_budget + g->ctl.budget_dropped),
			(unsigned long long)g->ctl.busy_budget,
			(unsigned long long)g->ctl.budget_closed);
		if (g->upgrade_pid > 0)
			fprintf(out, "{\"pid\":%d,\"state\":\"%s\",\"status\":%d}}\n",
				(int)g->upgrade_pid, g->upgrade_status < 0 ? "running" : "failed",
				g->upgrade_status);
		else
			fprintf(out, "null}\n");
		return;
	}
	fprintf(out, "controller  running, pid %d, up %.1f s\n", (int)getpid(), uptime);
	fprintf(out, "config      %s\n",
		g->cfg->config_path ? g->cfg->config_path : "(flags only)");
	fprintf(out, "listen      %s\n", listen);
	fprintf(out, "datapath    %s for new clients (connected: %u kernel, %u user)%s\n",
		g->user_path ? "user" : "kernel", kclients, uclients,
		g->dp.in_memory ? "; no BPF: the kernel path is not available" : "");
	fprintf(out, "pin dir     %s\n", g->cfg->pin_dir);
	fprintf(out,
		"backends    %u: %u up, %u draining, %u removing, %u down, %u on probation, %u "
		"not ready\n",
		total, n[KVS_BE_UP], n[KVS_BE_DRAINING], n[KVS_BE_REMOVING], n[KVS_BE_DOWN],
		n[KVS_BE_PROBATION], n[KVS_BE_NOT_READY]);
	fprintf(out, "clients     %u\n", g->clients.count);
	fprintf(out,
		"requests    %llu routed by the kernel, %llu by the controller, %llu on the "
		"userspace path\n",
		(unsigned long long)k.fast_path_frames, (unsigned long long)g->ctl.slow_frames,
		(unsigned long long)g->ctl.user_path_frames);
	if (routes_at == now)
		fprintf(out, "routes      %ld (counted now, capacity %u)\n", routes,
			(unsigned)KVS_ROUTES_MAX);
	else
		fprintf(out,
			"routes      %ld (counted %.1f s ago: this kernel keeps no count of "
			"the map, walked at most every %llu s)\n",
			routes, routes_age,
			(unsigned long long)(GW_ROUTES_COUNT_AGE_NS / 1000000000ull));
	if (g->fdstore.on && g->fdstore.failing)
		/* The sockets it could not hand in would close with it: the
		 * store is on, but it does not cover a crash. */
		fprintf(out,
			"crash       drops the connections not handed in: handing sockets to "
			"systemd's descriptor store fails (%llu handed in before; the log's "
			"fd_store_failed says why)\n",
			(unsigned long long)g->fdstore.fds);
	else if (g->fdstore.on)
		fprintf(out,
			"crash       connections survive it: sockets in systemd's descriptor "
			"store (%llu handed in)\n",
			(unsigned long long)g->fdstore.fds);
	else
		fprintf(out, "crash       drops every connection (no descriptor store: %s)\n",
			g->cfg->fd_store ? "not under systemd" : "--fd-store no");
	budget_line(g, out, &k);
	if (g->upgrade_pid > 0 && g->upgrade_status < 0)
		fprintf(out, "upgrade     under way: new controller pid %d\n", (int)g->upgrade_pid);
	else if (g->upgrade_pid > 0)
		fprintf(out, "upgrade     failed: new controller pid %d exited with %d\n",
			(int)g->upgrade_pid, g->upgrade_status);
}

/* One backend's line after a change. */
static void backend_reply(struct gw *g, FILE *out, bool json, uint32_t b, const char *done)
{
	const char *st = kvs_backend_state_name(gw_backend_state(g, b));
	unsigned long long outstanding = (unsigned long long)kvs_dp_outstanding(&g->dp, b);
	/* Why it is not up (it refused, did not answer its probe, is not
	 * KVS1), or up but not ready (its server says so, draining or not):
	 * what an operator adding or undraining it needs to know. Empty while
	 * it serves. */
	const char *why = g->dp.backends[b].reason;

	fprintf(out, "ok\n");
	if (json) {
		fprintf(out,
			"{\"backend\":\"%s\",\"index\":%u,\"state\":\"%s\",\"outstanding\":%llu,"
			"\"reason\":",
			g->be[b].name, b, st, outstanding);
		json_str(out, why);
		fprintf(out, "}\n");
	} else {
		fprintf(out, "backend %s (index %u) %s: now %s%s%s, %llu requests in flight\n",
			g->be[b].name, b, done, st, *why ? ": " : "", why, outstanding);
	}
}

/* An operator who adds a backend expects it to take work, and a script
 * expects exit 0 to mean it does: one that cannot be reached is taken out
 * again, and the answer (exit 1) says why. The configuration file is for
 * a backend that should wait for its server: listed, it is kept and
 * retried. */
static void add_refused(struct gw *g, FILE *out, uint32_t b)
{
	char name[64], why[sizeof(g->dp.backends[b].reason)], q[2 * sizeof(why)];
	const char *what = g->be[b].said_not_kvs1 ? "does not speak KVS1" : "cannot be reached";

	snprintf(name, sizeof(name), "%s", g->be[b].name);
	snprintf(why, sizeof(why), "%s", g->dp.backends[b].reason);
	gw_backend_withdraw(g, b);
	pr_warn("event=backend_add_refused backend=%s reason=\"%s\"", name,
		kvs_log_quote(why, q, sizeof(q)));
	reply_error(out,
		    "%s %s (%s): not added. Start it and add it again, or list it in the "
		    "configuration file and reload (a listed backend is kept and retried "
		    "until it answers)",
		    name, what, why);
}

static void cmd_add(struct gw *g, FILE *out, bool json, const struct kvs_addr *a, const char *name)
{
	int b = gw_backend_try(g, a);

	if (b == -EEXIST) {
		reply_error(out, "%s is a backend already", name);
	} else if (b == -ENOSPC) {
		reply_error(out, "no room: all %d backend slots are in use", KVS_MAX_BACKENDS);
	} else if (b < 0) {
		reply_error(out, "add failed: %s", strerror(-b));
	} else if (gw_backend_unreachable(g, (uint32_t)b)) {
		add_refused(g, out, (uint32_t)b);
	} else {
		gw_backend_admit(g, (uint32_t)b);
		backend_reply(g, out, json, (uint32_t)b,
			      g->be[b].probing ? "added (its probe not answered yet)" : "added");
	}
}

static void cmd_backend(struct gw *g, FILE *out, bool json, const char *verb, const char *arg)
{
	struct kvs_addr a;
	char name[64];
	int b;

	if (!arg || kvs_parse_addr(arg, &a)) {
		reply_error(out, "backend %s: give the backend as ADDR:PORT", verb);
		return;
	}
	kvs_addr_str(&a, name, sizeof(name));
	if (!strcmp(verb, "add")) {
		cmd_add(g, out, json, &a, name);
		return;
	}
	b = gw_backend_find(g, name);
	if (b < 0) {
		reply_error(out, "%s is not a backend (see kvsplicectl backends)", name);
		return;
	}
	if (!strcmp(verb, "remove")) {
		gw_backend_remove(g, (uint32_t)b);
		backend_reply(g, out, json, (uint32_t)b,
			      "being removed (drained first; gone once nothing is in flight)");
	} else if (!strcmp(verb, "drain")) {
		gw_backend_drain(g, (uint32_t)b, true);
		backend_reply(g, out, json, (uint32_t)b, "draining (takes no new requests)");
	} else if (!strcmp(verb, "undrain")) {
		gw_backend_drain(g, (uint32_t)b, false);
		backend_reply(g, out, json, (uint32_t)b, "back in service");
	} else {
		reply_error(out, "unknown backend command '%s' (add, remove, drain, undrain)",
			    verb);
	}
}

static void cmd_reload(struct gw *g, FILE *out, bool json)
{
	char msg[512];
	int err = gw_reload(g, msg, sizeof(msg));

	if (err && !strstr(msg, "not all added")) {
		reply_error(out, "%s", msg);
		return;
	}
	fprintf(out, "ok\n");
	if (json) {
		fprintf(out, "{\"message\":");
		json_str(out, msg);
		fprintf(out, "}\n");
	} else {
		fprintf(out, "%s\n", msg);
	}
}

static void cmd_upgrade(struct gw *g, FILE *out, bool json)
{
	char msg[512];
	int pid = gw_upgrade(g, msg, sizeof(msg));

	if (pid < 0) {
		reply_error(out, "upgrade: %s", msg);
		return;
	}
	fprintf(out, "ok\n");
	if (json) {
		fprintf(out, "{\"pid\":%d,\"old_pid\":%d,\"exe\":", pid, (int)getpid());
		json_str(out, g->exe);
		fprintf(out, "}\n");
	} else
		fprintf(out, "%s\n", msg);
}

/* datapath [kernel|user]: which path new clients take (or, without an
 * argument, which they take now). */
static void cmd_datapath(struct gw *g, FILE *out, bool json, const char *want)
{
	uint32_t kernel, user;

	if (want && strcmp(want, "kernel") && strcmp(want, "user")) {
		reply_error(out, "datapath: '%s' is not kernel or user", want);
		return;
	}
	if (want && gw_set_datapath(g, !strcmp(want, "user")) == -EOPNOTSUPP) {
		reply_error(out, "datapath kernel: BPF could not be loaded when this controller "
				 "started (see its log, event=bpf_unavailable)");
		return;
	}
	gw_up_count(g, &kernel, &user);
	fprintf(out, "ok\n");
	if (json)
		fprintf(out, "{\"datapath\":\"%s\",\"clients\":{\"kernel\":%u,\"user\":%u}}\n",
			g->user_path ? "user" : "kernel", kernel, user);
	else
		fprintf(out,
			"new clients take the %s data path; connected: %u on the kernel's, %u on "
			"the userspace one (each stays on its path until it closes)\n",
			g->user_path ? "userspace" : "kernel", kernel, user);
}

/* Runs one command line from kvsplicectl and writes the reply to out:
 * "ok" or "error: MESSAGE" on the first line, then the body (JSON when the
 * line has --json). */
static void control_run(struct gw *g, char *line, FILE *out)
{
	char *w[MAX_WORDS], *save = NULL, *tok;
	int n = 0;
	bool json = false;

	for (tok = strtok_r(line, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
		if (!strcmp(tok, "--json") || !strcmp(tok, "-j"))
			json = true;
		else if (n < MAX_WORDS)
			w[n++] = tok;
	}
	if (n == 0) {
		reply_error(out, "%s", "empty command");
		return;
	}
	/* status changes nothing, and kvsplicectl upgrade asks for it ten
	 * times a second while it waits: at debug, or it floods the log */
	if (!strcmp(w[0], "status"))
		pr_debug("event=control_command command=\"status\"");
	else
		pr_info("event=control_command command=\"%s%s%s\"", w[0], n > 1 ? " " : "",
			n > 1 ? w[1] : "");
	if (!strcmp(w[0], "status") && n == 1)
		cmd_status(g, out, json);
	else if (!strcmp(w[0], "backend") && n >= 2 && n <= 3)
		cmd_backend(g, out, json, w[1], n == 3 ? w[2] : NULL);
	else if (!strcmp(w[0], "reload") && n == 1)
		cmd_reload(g, out, json);
	else if (!strcmp(w[0], "upgrade") && n == 1)
		cmd_upgrade(g, out, json);
	else if (!strcmp(w[0], "datapath") && n <= 2)
		cmd_datapath(g, out, json, n == 2 ? w[1] : NULL);
	else
		reply_error(out,
			    "unknown command '%s' (status, backend, reload, upgrade, datapath)",
			    w[0]);
}

/* Only root, or the user the controller runs as, may change it. */
static bool peer_may_control(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) &&
	       (cr.uid == 0 || cr.uid == geteuid());
}

/* One command, answered once its line is in, then closed. */
static void on_control(struct gw *g, struct gw_conn *c)
{
	const char *nl = memchr(kvs_buf_head(&c->rx), '\n', c->rx.len);
	struct timeval tv = { .tv_sec = 1 };
	char line[1024], *reply = NULL;
	size_t rlen = 0, off = 0;
	FILE *out;

	if (!nl) {
		if (c->rx.len >= sizeof(line) || gw_arm_recv(g, c))
			gw_conn_close(g, c);
		return;
	}
	memcpy(line, kvs_buf_head(&c->rx), (size_t)(nl - (const char *)kvs_buf_head(&c->rx)));
	line[nl - (const char *)kvs_buf_head(&c->rx)] = '\0';
	out = open_memstream(&reply, &rlen);
	if (!out) {
		gw_conn_close(g, c);
		return;
	}
	if (peer_may_control(c->fd))
		control_run(g, line, out);
	else
		fprintf(out, "error: only root or the controller's user may use this socket\n");
	fclose(out);
	/* A reply is small; a reader that stalls gets a second, then is cut. */
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (off < rlen) {
		ssize_t w = send(c->fd, reply + off, rlen - off, MSG_NOSIGNAL);

		if (w <= 0)
			break;
		off += (size_t)w;
	}
	free(reply);
	gw_conn_close(g, c);
}

static const struct gw_conn_ops control_ops = { .on_bytes = on_control, .on_hangup = gw_conn_drop };

void gw_control_on_accept(struct gw *g, struct io_uring_cqe *cqe)
{
	if (!(cqe->flags & IORING_CQE_F_MORE) && !g->quiescing && cqe->res != -ECANCELED &&
	    g->control_fd >= 0)
		gw_rearm_accept(g, g->control_fd, OP_CONTROL_ACCEPT, cqe->res);
	if (cqe->res >= 0)
		gw_service_conn(g, cqe->res, ROLE_CONTROL, &control_ops);
}

/* Listens for kvsplicectl at --control-socket (default: by --pin-dir). */
int gw_control_open(struct gw *g)
{
	if (g->cfg->control_path)
		snprintf(g->control_path, sizeof(g->control_path), "%s", g->cfg->control_path);
	else
		kvs_run_path(g->cfg->pin_dir, KVS_CONTROL_SUFFIX, g->control_path,
			     sizeof(g->control_path));
	g->control_fd = control_listen(g->control_path);
	if (g->control_fd < 0) {
		int err = g->control_fd;

		pr_warn("event=control_socket_failed path=%s err=\"%s\"%s", g->control_path,
			strerror(-err),
			err == -EADDRINUSE ? " hint=\"another kvspliced answers there: give each "
					     "its own --pin-dir or --control-socket\"" :
					     "");
		return err;
	}
	return gw_arm_accept(g, g->control_fd, OP_CONTROL_ACCEPT);
}

void gw_control_close(struct gw *g)
{
	struct io_uring_sqe *sqe;

	if (g->control_fd < 0)
		return;
	sqe = gw_get_sqe(g);
	if (sqe) {
		io_uring_prep_cancel64(sqe, ud(OP_CONTROL_ACCEPT, NULL), 0);
		io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, NULL));
	}
	close(g->control_fd);
	g->control_fd = -1;
	unlink(g->control_path);
}
