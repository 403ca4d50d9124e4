// SPDX-License-Identifier: MIT
/* Upgrades (kvsplicectl upgrade, SIGUSR2): a successor started from the
 * program file, with --takeover; the hand-over itself is handover.c's. */
#include "upgrade.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

/* How long a successor may take to begin taking over (to connect to the
 * hand-over socket, which it does first, before loading anything) before
 * it is killed: shorter than kvsplicectl upgrade's 30 s wait, so that
 * kvsplicectl sees the failure and says so. */
#define UPGRADE_TIMEOUT_MS 25000u
#define UPGRADE_TIMEOUT_ENV "KVSPLICED_UPGRADE_TIMEOUT_MS"

/* The deadline in ms: UPGRADE_TIMEOUT_ENV if it is 1..3600000, else the
 * default (a bad value said in the log). */
static uint64_t upgrade_timeout_ms(void)
{
	const char *v = getenv(UPGRADE_TIMEOUT_ENV);
	unsigned long ms;
	char *end;

	if (!v || !*v)
		return UPGRADE_TIMEOUT_MS;
	errno = 0;
	ms = strtoul(v, &end, 10);
	if (errno || *end || ms < 1 || ms > 3600000) {
		pr_warn("event=upgrade_timeout_ignored %s=\"%s\" hint=\"1..3600000 ms\" "
			"timeout_ms=%u",
			UPGRADE_TIMEOUT_ENV, v, UPGRADE_TIMEOUT_MS);
		return UPGRADE_TIMEOUT_MS;
	}
	return ms;
}

/* The refusal while a successor runs: which, and when it will be killed. */
static void say_under_way(const struct gw *g, char *msg, size_t len)
{
	uint64_t now = kvs_now_ns(), left;

	if (!g->upgrade_deadline_ns) {
		snprintf(msg, len, "an upgrade is under way (new controller pid %d)",
			 (int)g->upgrade_pid);
		return;
	}
	left = g->upgrade_deadline_ns > now ? (g->upgrade_deadline_ns - now) / 1000000000ull : 0;
	snprintf(msg, len,
		 "an upgrade is under way (new controller pid %d; killed in %llu s unless it "
		 "begins taking over)",
		 (int)g->upgrade_pid, (unsigned long long)left + 1);
}

int gw_upgrade(struct gw *g, char *msg, size_t len)
{
	const struct gw_hooks *h = g->hooks;
	char **argv;
	pid_t pid;
	int i, k = 0;

	if (!g->exe[0] || !h || !h->argv) {
		snprintf(msg, len, "this controller does not know its program file");
		return -ENOENT;
	}
	if (g->dp.in_memory) {
		snprintf(msg, len,
			 "running without BPF: a successor takes over through the "
			 "pinned maps, there are none; restart instead");
		return -EOPNOTSUPP;
	}
	if (g->upgrade_pid > 0 && g->upgrade_status < 0) {
		say_under_way(g, msg, len);
		return -EALREADY;
	}
	if (access(g->exe, X_OK)) {
		snprintf(msg, len, "%s: %s", g->exe, strerror(errno));
		return -errno;
	}
	argv = calloc((size_t)h->argc + 4, sizeof(*argv));
	if (!argv) {
		snprintf(msg, len, "out of memory");
		return -ENOMEM;
	}
	argv[k++] = g->exe;
	/* What the last upgrade added goes, or each one would add it again
	 * (the operator's own --handover-socket is g->ho_path, added back). */
	for (i = 1; i < h->argc; i++) {
		if (!strcmp(h->argv[i], "--takeover") ||
		    !strncmp(h->argv[i], "--handover-socket=", 18))
			continue;
		if (!strcmp(h->argv[i], "--handover-socket")) {
			i++; /* and its value */
			continue;
		}
		argv[k++] = h->argv[i];
	}
	argv[k++] = (char *)"--takeover";
	argv[k++] = (char *)"--handover-socket";
	argv[k++] = g->ho_path;
	pid = fork();
	if (pid == 0) {
		/* Nothing of ours but stdio: it gets its sockets by hand-over. */
		close_range(3, ~0u, 0);
		execv(g->exe, argv);
		_exit(127);
	}
	free(argv);
	if (pid < 0) {
		snprintf(msg, len, "fork: %s", strerror(errno));
		return -errno;
	}
	g->upgrade_pid = pid;
	g->upgrade_status = -1;
	g->upgrade_started_ns = kvs_now_ns();
	g->upgrade_deadline_ns = g->upgrade_started_ns + upgrade_timeout_ms() * 1000000ull;
	pr_info("event=upgrade_started pid=%d exe=%s timeout_ms=%llu", (int)pid, g->exe,
		(unsigned long long)((g->upgrade_deadline_ns - g->upgrade_started_ns) /
				     1000000ull));
	snprintf(msg, len,
		 "new controller pid %d started from %s; this one (pid %d) hands over and exits",
		 (int)pid, g->exe, (int)getpid());
	return pid;
}

void gw_upgrade_began(struct gw *g, int s)
{
	struct ucred cr;
	socklen_t crlen = sizeof(cr);

	/* Only our successor's connection: another controller's (one started
	 * by hand) says nothing of whether ours hangs. */
	if (g->upgrade_pid > 0 && g->upgrade_status < 0 &&
	    !getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) && cr.pid == g->upgrade_pid)
		g->upgrade_deadline_ns = 0;
}

/* A connection accepted or queued on the hand-over socket, not yet run:
 * perhaps the successor's, which must not be killed as it begins. */
static bool handover_waiting(const struct gw *g)
{
	struct pollfd p = { .fd = g->ho_fd, .events = POLLIN };

	return g->ho_pending >= 0 || (g->ho_fd >= 0 && poll(&p, 1, 0) > 0);
}

/* Has pid exited? Not reaped: gw_upgrade_reap does that, and says so. */
static bool exited(pid_t pid)
{
	siginfo_t si = { 0 };

	return !waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) && si.si_pid == pid;
}

/* A successor past its deadline that has not begun taking over (it hangs
 * before connecting: a broken binary, a wrapper that never execs) would
 * hold off every later upgrade while it lives. Killed and reaped here
 * (briefly waited for: SIGKILL is not instant); if it outlives that, the
 * next tick's waitpid reaps it. */
static void time_out(struct gw *g)
{
	uint64_t now = kvs_now_ns();

	if (!g->upgrade_deadline_ns || now < g->upgrade_deadline_ns || handover_waiting(g))
		return;
	g->upgrade_deadline_ns = 0;
	pr_warn("event=upgrade_timed_out pid=%d waited_ms=%llu action=\"killed (SIGKILL); "
		"carrying on\" hint=\"the new controller never connected to the hand-over "
		"socket: run it by hand to see why (docs/RUNBOOK.md, Upgrade)\"",
		(int)g->upgrade_pid,
		(unsigned long long)((now - g->upgrade_started_ns) / 1000000ull));
	if (kill(g->upgrade_pid, SIGKILL) && errno != ESRCH) {
		pr_warn("event=upgrade_kill_failed pid=%d err=\"%s\"", (int)g->upgrade_pid,
			strerror(errno));
		return;
	}
	for (int i = 0; i < 20 && !exited(g->upgrade_pid); i++)
		usleep(10000);
}

/* A successor that exited: the upgrade failed, this controller carries on. */
void gw_upgrade_reap(struct gw *g)
{
	int st;

	if (g->upgrade_pid > 0 && g->upgrade_status < 0)
		time_out(g);
	if (g->upgrade_pid <= 0 || g->upgrade_status >= 0 ||
	    waitpid(g->upgrade_pid, &st, WNOHANG) != g->upgrade_pid)
		return;
	g->upgrade_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	pr_warn("event=upgrade_failed pid=%d status=%d action=\"carrying on\"", (int)g->upgrade_pid,
		g->upgrade_status);
	/* A successor that failed after the hand-over began held the pin
	 * lock until it exited: taking it back then failed. Without it, a
	 * controller started on this --pin-dir would clear the maps this one
	 * serves from. */
	if (g->dp.lock_fd < 0 && !g->dp.in_memory && !g->handed_over) {
		if (kvs_dp_relock(&g->dp))
			pr_warn("event=relock_failed hint=\"another controller may run on this "
				"--pin-dir\"");
		else
			pr_info("event=relocked pin_dir=%s", g->dp.pin_dir);
	}
}
