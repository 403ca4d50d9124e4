// SPDX-License-Identifier: MIT
/* Upgrades (kvsplicectl upgrade, SIGUSR2): a successor started from the
 * program file, with --takeover; the hand-over itself is handover.c's. */
#include "upgrade.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

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
		snprintf(msg, len, "an upgrade is under way (new controller pid %d)",
			 (int)g->upgrade_pid);
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
	pr_info("event=upgrade_started pid=%d exe=%s", (int)pid, g->exe);
	snprintf(msg, len,
		 "new controller pid %d started from %s; this one (pid %d) hands over and exits",
		 (int)pid, g->exe, (int)getpid());
	return pid;
}

/* A successor that exited: the upgrade failed, this controller carries on. */
void gw_upgrade_reap(struct gw *g)
{
	int st;

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
