// SPDX-License-Identifier: MIT
/*
 * Commands only a running controller can answer, over its control socket
 * (user/kvspliced/control.c has the other end): a line out, the reply back, the
 * first line of which is "ok" or "error: MESSAGE".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "kvsplice/maps.h"
#include "pins.h"

/* The socket the controller of o->pin_dir listens on. */
static const char *socket_path(const struct ctl_opts *o, char *buf, size_t len)
{
	if (o->socket)
		return o->socket;
	return kvs_run_path(o->pin_dir, KVS_CONTROL_SUFFIX, buf, len);
}

/* Sends line; *reply (malloc'd, NUL-terminated) is the whole answer.
 * 0 or -errno (-ENOENT, -ECONNREFUSED: no controller there). */
static int ask(const char *path, uint32_t timeout_ms, const char *line, char **reply)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = timeout_ms % 1000 * 1000 };
	size_t len = 0, cap = 4096;
	char *buf;
	int fd, err = 0;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    send(fd, line, strlen(line), MSG_NOSIGNAL) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (!err) {
		ssize_t n;

		if (len + 1 == cap) {
			char *bigger = realloc(buf, cap * 2);

			if (!bigger) {
				err = -ENOMEM;
				break;
			}
			buf = bigger;
			cap *= 2;
		}
		n = recv(fd, buf + len, cap - len - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = -errno;
		else if (n == 0)
			break;
		else
			len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	if (err || len == 0) {
		free(buf);
		return err ? err : -ECONNRESET;
	}
	*reply = buf;
	return 0;
}

/* Prints the reply's body (or its error); the exit status. */
static int show(const struct ctl_opts *o, const char *reply)
{
	const char *nl = strchr(reply, '\n');

	if (!strncmp(reply, "ok\n", 3)) {
		fputs(nl + 1, o->out);
		return 0;
	}
	if (!strncmp(reply, "error: ", 7))
		fprintf(o->err, PROG ": %.*s\n",
			nl ? (int)(nl - reply - 7) : (int)strlen(reply + 7), reply + 7);
	else
		fprintf(o->err, PROG ": unexpected answer from the controller\n");
	return 1;
}

/* "10 s", "1500 ms": a --timeout as given. */
static const char *span(uint32_t ms, char *buf, size_t len)
{
	if (ms % 1000)
		snprintf(buf, len, "%u ms", ms);
	else
		snprintf(buf, len, "%u s", ms / 1000);
	return buf;
}

static void not_running(const struct ctl_opts *o, const char *path, int err)
{
	char t[32];

	if (err == -EACCES || err == -EPERM)
		fprintf(o->err, PROG ": %s: %s (the control socket is root's: run as root)\n", path,
			strerror(-err));
	else if (err == -EAGAIN || err == -EWOULDBLOCK)
		fprintf(o->err,
			PROG ": the controller at %s took the command but sent no answer within "
			     "%s (stopped, or busy: its log says which)\n",
			path, span(o->timeout_ms, t, sizeof(t)));
	else
		fprintf(o->err,
			PROG ": no controller answers at %s (%s): is kvspliced running with this "
			     "--pin-dir (or --control-socket)?\n",
			path, strerror(-err));
}

/*
 * The pid of the process holding the pin directory's lock (the controller
 * flocks it for as long as it runs: user/core/pins.c), 0 for none, from
 * /proc/locks: taking the lock to find out would refuse a controller
 * starting at that moment.
 */
static pid_t pin_dir_holder(const char *dir)
{
	char line[256], kind[16];
	unsigned int maj, min;
	unsigned long long ino;
	struct stat st;
	pid_t pid = 0;
	FILE *f;
	int p;

	if (stat(dir, &st) || !(f = fopen("/proc/locks", "re")))
		return 0;
	while (!pid && fgets(line, sizeof(line), f))
		/* "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF" */
		if (sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%llu", kind, &p, &maj, &min, &ino) ==
			    5 &&
		    !strcmp(kind, "FLOCK") && ino == (unsigned long long)st.st_ino &&
		    makedev(maj, min) == st.st_dev)
			pid = p;
	fclose(f);
	return pid;
}

/* Why ask() failed, for a person: a socket that took no answer timed out. */
static const char *ask_error(int err, uint32_t timeout_ms, char *buf, size_t len)
{
	char t[32];

	if (err != -EAGAIN && err != -EWOULDBLOCK)
		return strerror(-err);
	snprintf(buf, len, "no answer within %s", span(timeout_ms, t, sizeof(t)));
	return buf;
}

/* A command that needs the controller: sent as is, its reply shown. */
static int run(const struct ctl_opts *o, const char *line)
{
	char path[256], *reply = NULL, req[512];
	const char *p = socket_path(o, path, sizeof(path));
	int err, rc;

	snprintf(req, sizeof(req), "%s%s\n", line, o->json ? " --json" : "");
	err = ask(p, o->timeout_ms, req, &reply);
	if (err) {
		not_running(o, p, err);
		return 3;
	}
	rc = show(o, reply);
	free(reply);
	return rc;
}

int ctl_status(const struct ctl_opts *o, int argc, char **argv)
{
	char path[256], why[64], *reply = NULL;
	const char *p = socket_path(o, path, sizeof(path));
	uint32_t n[KVS_BE_STATES] = { 0 };
	struct ctl_spliced sp;
	int err = ask(p, o->timeout_ms, o->json ? "status --json\n" : "status\n", &reply), rc;
	pid_t holder;

	if (!err) {
		rc = show(o, reply);
		free(reply);
		return rc;
	}
	/* No answer: what the maps still hold. The kernel splices the sockets
	 * still in its SOCKHASH, and only those: a controller that died
	 * without a descriptor store took them all with it; one that holds
	 * the pin directory's lock is alive, only not answering (stopped, or
	 * stuck), and its connections are all still there. */
	holder = pin_dir_holder(o->pin_dir);
	if (ctl_count_backends(o, n, KVS_BE_STATES) < 0 || ctl_count_spliced(o, &sp) < 0) {
		not_running(o, p, err);
		return 3;
	}
	if (o->json) {
		fprintf(o->out,
			"{\"controller\":\"%s\",\"pid\":%d,\"error\":\"%s\",\"pin_dir\":\"%s\","
			"\"spliced\":{\"clients\":%u,\"upstreams\":%u,\"punt\":%u},"
			"\"backends\":{\"up\":%u,\"draining\":%u,\"removing\":%u,\"down\":%u,"
			"\"probation\":%u,\"not_ready\":%u}}\n",
			holder ? "not answering" : "not running", (int)holder,
			ask_error(err, o->timeout_ms, why, sizeof(why)), o->pin_dir, sp.clients,
			sp.upstreams, sp.punt, n[KVS_BE_UP], n[KVS_BE_DRAINING], n[KVS_BE_REMOVING],
			n[KVS_BE_DOWN], n[KVS_BE_PROBATION], n[KVS_BE_NOT_READY]);
		return 3;
	}
	if (holder)
		fprintf(o->out,
			"controller  running (pid %d holds the pin dir) but not answering (%s: %s)\n",
			(int)holder, p, ask_error(err, o->timeout_ms, why, sizeof(why)));
	else
		fprintf(o->out, "controller  not running (%s: %s)\n", p,
			ask_error(err, o->timeout_ms, why, sizeof(why)));
	fprintf(o->out, "pin dir     %s (maps still pinned)\n", o->pin_dir);
	if (sp.clients && sp.upstreams)
		fprintf(o->out,
			"spliced     %u client and %u backend connections still in the socket map: the "
			"kernel goes on splicing their requests%s\n",
			sp.clients, sp.upstreams,
			sp.punt ? "; what needs the controller waits for it" :
				  "; what needs the controller is dropped");
	else if (sp.clients || sp.upstreams || holder)
		fprintf(o->out,
			"spliced     nothing: %u client and %u backend connections in the socket "
			"map\n",
			sp.clients, sp.upstreams);
	else
		fprintf(o->out,
			"spliced     nothing: no connections in the socket map (they closed with the "
			"controller)\n");
	fprintf(o->out,
		"backends    as last set: %u up, %u draining, %u removing, %u down, %u on "
		"probation, %u not ready\n",
		n[KVS_BE_UP], n[KVS_BE_DRAINING], n[KVS_BE_REMOVING], n[KVS_BE_DOWN],
		n[KVS_BE_PROBATION], n[KVS_BE_NOT_READY]);
	return 3;
}

int ctl_backend(const struct ctl_opts *o, int argc, char **argv)
{
	const char *verb = argc > 0 ? argv[0] : NULL, *addr = argc > 1 ? argv[1] : NULL;
	char line[256];

	if (argc != 2) {
		fprintf(o->err, PROG ": usage: backend add|remove|drain|undrain ADDR:PORT\n");
		return 2;
	}
	if (strcmp(verb, "add") && strcmp(verb, "remove") && strcmp(verb, "drain") &&
	    strcmp(verb, "undrain")) {
		fprintf(o->err, PROG ": backend %s: not a command (add, remove, drain, undrain)\n",
			verb);
		return 2;
	}
	if (!addr || strchr(addr, ' ') || strlen(addr) > 200) {
		fprintf(o->err, PROG ": backend %s ADDR:PORT: which backend?\n", verb);
		return 2;
	}
	snprintf(line, sizeof(line), "backend %s %s", verb, addr);
	return run(o, line);
}

int ctl_reload(const struct ctl_opts *o, int argc, char **argv)
{
	return run(o, "reload");
}

int ctl_datapath(const struct ctl_opts *o, int argc, char **argv)
{
	const char *which = argc > 0 ? argv[0] : NULL;
	char line[64];

	if (which && strcmp(which, "kernel") && strcmp(which, "user")) {
		fprintf(o->err, PROG ": datapath: '%s' is not kernel or user\n", which);
		return 2;
	}
	snprintf(line, sizeof(line), "datapath%s%s", which ? " " : "", which ? which : "");
	return run(o, line);
}

/* An integer field of the controller's JSON ("pid":123), or -1. */
static int json_int(const char *json, const char *field)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "\"%s\":", field);
	p = strstr(json, key);
	return p ? atoi(p + strlen(key)) : -1;
}

static int upgrade(const struct ctl_opts *o, int timeout_s)
{
	char path[256], *reply = NULL;
	const char *p = socket_path(o, path, sizeof(path));
	int err = ask(p, o->timeout_ms, "upgrade --json\n", &reply), pid, old, i;

	if (err) {
		not_running(o, p, err);
		return 3;
	}
	if (strncmp(reply, "ok\n", 3)) {
		int rc = show(o, reply);

		free(reply);
		return rc;
	}
	pid = json_int(reply, "pid");
	old = json_int(reply, "old_pid");
	free(reply);
	/* Done when the successor answers on the control socket. */
	for (i = 0; i < timeout_s * 10; i++) {
		usleep(100000);
		if (ask(p, o->timeout_ms, "status --json\n", &reply))
			continue; /* between the two: the socket changes hands */
		if (json_int(reply, "pid") == pid) {
			free(reply);
			if (o->json)
				fprintf(o->out, "{\"upgraded\":true,\"pid\":%d,\"old_pid\":%d}\n",
					pid, old);
			else
				fprintf(o->out,
					"upgraded: controller pid %d took over from pid %d\n", pid,
					old);
			return 0;
		}
		if (strstr(reply, "\"state\":\"failed\"")) {
			int st = json_int(reply, "status");

			/* 137: the running controller's SIGKILL at its deadline
			 * (user/kvspliced/upgrade.c) */
			fprintf(o->err,
				PROG
				": upgrade failed: the new controller (pid %d) exited with %d%s; "
				"pid %d carries on (see its log)\n",
				pid, st,
				st == 137 ? " (killed: it had not begun taking over within the "
					    "running controller's deadline)" :
					    "",
				old);
			free(reply);
			return 1;
		}
		free(reply);
	}
	fprintf(o->err, PROG ": upgrade: pid %d has not taken over within %d s (see the log)\n",
		pid, timeout_s);
	return 1;
}

int ctl_upgrade(const struct ctl_opts *o, int argc, char **argv)
{
	return upgrade(o, 30);
}
