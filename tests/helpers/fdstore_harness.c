// SPDX-License-Identifier: MIT
/*
 * fdstore_harness: systemd's side of the notification and descriptor-store
 * protocols (sd_notify(3), sd_listen_fds(3), systemd.io/FILE_DESCRIPTOR_STORE),
 * for tests run where systemd is not PID 1. It runs a program as a
 * Type=notify service with Restart=on-failure and FileDescriptorStoreMax=
 * would:
 *
 *   - NOTIFY_SOCKET: a datagram socket it binds (NotifyAccess=all);
 *     READY=1 noted; MAINPID= makes that process the service's (an
 *     upgrade's successor: the harness is a subreaper, as PID 1 is); FDSTORE=1 keeps the descriptors that come with the
 *     message (SCM_RIGHTS) under FDNAME= (a descriptor it holds already,
 *     the same open socket, is not kept twice; past --max the rest are
 *     closed); FDSTOREREMOVE=1 closes every one named FDNAME=;
 *   - a kept descriptor that reports POLLHUP or POLLERR is closed (systemd
 *     polls what it holds, unless FDPOLL=0);
 *   - the program dying of a signal or exiting non-zero: started again,
 *     with the kept descriptors at 3.., LISTEN_FDS=n, LISTEN_FDNAMES=
 *     (names joined by ':') and LISTEN_PID= its own pid (set in the child,
 *     after fork, as systemd does);
 *   - exit 0: the store is emptied and the harness exits 0; SIGTERM or
 *     SIGINT to the harness: passed on, then the same.
 *
 * What it holds is written to --state FILE after each change (replaced
 * whole, so a reader never sees half of it), one key=value a line:
 * starts, pid (the main process), ready (READY=1 of the current run),
 * held, fds, msgs (FDSTORE datagrams), removes, hups, dups, refused,
 * mainpids (MAINPID= changes), and fds.NAME per name.
 * While the file --hold names exists, a dead program is not restarted
 * (held=1; the store is kept): a test looks at the gateway without its
 * controller, then removes the file.
 *
 *   fdstore_harness --state FILE [--max N] [--restarts N] [--hold FILE]
 *                   -- PROGRAM ARGS...
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_FDS_MSG 253
#define NAME_MAX_LEN 256

struct kept {
	int fd;
	char name[NAME_MAX_LEN];
	dev_t dev;
	ino_t ino;
};

static struct kept *store;
static size_t nstore, capstore;
static unsigned long maxfds = 65536, starts, msgs, removes, hups, dups, refused, mainpids;
static int ready, held;
static const char *hold;
static pid_t child = -1;
static const char *state_path;
static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
	got_term = sig;
}

static void write_state(void)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", state_path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f,
		"starts=%lu\npid=%d\nready=%d\nheld=%d\nfds=%zu\nmsgs=%lu\nremoves=%lu\n"
		"hups=%lu\ndups=%lu\nrefused=%lu\nmainpids=%lu\n",
		starts, (int)child, ready, held, nstore, msgs, removes, hups, dups, refused,
		mainpids);
	/* per name: counted in one pass over the names seen so far */
	for (size_t i = 0; i < nstore; i++) {
		size_t n = 0, j;

		for (j = 0; j < i && strcmp(store[j].name, store[i].name); j++)
			;
		if (j < i)
			continue; /* counted at its first */
		for (j = i; j < nstore; j++)
			n += !strcmp(store[j].name, store[i].name);
		fprintf(f, "fds.%s=%zu\n", store[i].name, n);
	}
	fclose(f);
	rename(tmp, state_path);
}

static void drop(size_t i)
{
	close(store[i].fd);
	store[i] = store[--nstore];
}

static void keep(int fd, const char *name)
{
	struct stat st;

	if (fstat(fd, &st)) {
		close(fd);
		return;
	}
	for (size_t i = 0; i < nstore; i++) {
		if (store[i].dev == st.st_dev && store[i].ino == st.st_ino) {
			dups++; /* the same open socket: kept once */
			close(fd);
			return;
		}
	}
	if (nstore >= maxfds) {
		refused++;
		close(fd);
		return;
	}
	if (nstore == capstore) {
		size_t ncap = capstore ? capstore * 2 : 256;
		struct kept *n = realloc(store, ncap * sizeof(*n));

		if (!n) {
			refused++;
			close(fd);
			return;
		}
		store = n;
		capstore = ncap;
	}
	store[nstore].fd = fd;
	snprintf(store[nstore].name, sizeof(store[nstore].name), "%s", name);
	store[nstore].dev = st.st_dev;
	store[nstore].ino = st.st_ino;
	nstore++;
}

/* The value of KEY= in a notification (lines), or NULL. */
static const char *field(const char *msg, const char *key, char *out, size_t cap)
{
	size_t klen = strlen(key);

	for (const char *p = msg; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (!strncmp(p, key, klen)) {
			size_t n = strcspn(p + klen, "\n");

			if (n >= cap)
				n = cap - 1;
			memcpy(out, p + klen, n);
			out[n] = '\0';
			return out;
		}
	}
	return NULL;
}

static void on_notify(int sock)
{
	char buf[4097], ctl[CMSG_SPACE(sizeof(int) * MAX_FDS_MSG)], val[NAME_MAX_LEN];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) - 1 };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)
	};
	int fds[MAX_FDS_MSG], nfds = 0;
	ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	if (n < 0)
		return;
	buf[n] = '\0';
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0; k < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++)
			if (nfds < MAX_FDS_MSG)
				memcpy(&fds[nfds++], CMSG_DATA(cm) + k * sizeof(int), sizeof(int));
	}
	if (field(buf, "READY=", val, sizeof(val)) && !strcmp(val, "1"))
		ready = 1;
	if (field(buf, "MAINPID=", val, sizeof(val)) && atoi(val) > 0) {
		child = atoi(val); /* an upgrade's successor: the service's now */
		mainpids++;
	}
	if (field(buf, "FDSTORE=", val, sizeof(val)) && !strcmp(val, "1")) {
		const char *name = field(buf, "FDNAME=", val, sizeof(val)) ? val : "stored";

		msgs++;
		for (int i = 0; i < nfds; i++)
			keep(fds[i], name);
		nfds = 0;
	}
	if (field(buf, "FDSTOREREMOVE=", val, sizeof(val)) && !strcmp(val, "1") &&
	    field(buf, "FDNAME=", val, sizeof(val))) {
		for (size_t i = nstore; i-- > 0;)
			if (!strcmp(store[i].name, val)) {
				drop(i);
				removes++;
			}
	}
	for (int i = 0; i < nfds; i++) /* not FDSTORE: systemd closes them */
		close(fds[i]);
	write_state();
}

static pid_t start(char **argv, const char *notify_path)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	{
		size_t n = nstore, len = 1;
		char *names, num[32];
		int *tmp = calloc(n + 1, sizeof(int));

		for (size_t i = 0; i < n; i++)
			len += strlen(store[i].name) + 1;
		names = calloc(len, 1);
		if (!tmp || !names)
			_exit(126);
		/* Out of the way of 3..3+n first, then into place (dup2 clears
		 * close-on-exec). */
		for (size_t i = 0; i < n; i++)
			tmp[i] = fcntl(store[i].fd, F_DUPFD_CLOEXEC, (int)(3 + n));
		for (size_t i = 0; i < n; i++) {
			dup2(tmp[i], (int)(3 + i));
			close(tmp[i]);
			if (i)
				strcat(names, ":");
			strcat(names, store[i].name);
		}
		setenv("NOTIFY_SOCKET", notify_path, 1);
		if (n) {
			snprintf(num, sizeof(num), "%zu", n);
			setenv("LISTEN_FDS", num, 1);
			setenv("LISTEN_FDNAMES", names, 1);
			snprintf(num, sizeof(num), "%d", (int)getpid());
			setenv("LISTEN_PID", num, 1);
		} else {
			unsetenv("LISTEN_FDS");
			unsetenv("LISTEN_FDNAMES");
			unsetenv("LISTEN_PID");
		}
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		execvp(argv[0], argv);
		_exit(127);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sigaction act = { .sa_handler = on_term };
	unsigned long max_restarts = 10, restarts = 0;
	char notify_path[sizeof(sa.sun_path)];
	int i, sock, rc = 0;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--state") && i + 1 < argc)
			state_path = argv[++i];
		else if (!strcmp(argv[i], "--max") && i + 1 < argc)
			maxfds = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--restarts") && i + 1 < argc)
			max_restarts = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--hold") && i + 1 < argc)
			hold = argv[++i];
		else
			break;
	}
	if (!state_path || i >= argc - 1 || strcmp(argv[i], "--")) {
		fprintf(stderr, "usage: fdstore_harness --state FILE [--max N] [--restarts N] "
				"[--hold FILE] -- PROGRAM ARGS...\n");
		return 2;
	}
	argv += i + 1;
	snprintf(notify_path, sizeof(notify_path), "%s.notify", state_path);
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	strcpy(sa.sun_path, notify_path);
	unlink(notify_path);
	if (sock < 0 || bind(sock, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("fdstore_harness: notify socket");
		return 1;
	}
	{
		int big = 8 << 20;

		setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	}
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGINT, &act, NULL);
	/* As PID 1 is for everything: an upgrade's successor, orphaned when
	 * its predecessor exits, is reaped here. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	child = start(argv, notify_path);
	starts = 1;
	write_state();
	for (;;) {
		struct pollfd *p = calloc(nstore + 1, sizeof(*p));

		if (!p)
			break;
		p[0].fd = sock;
		p[0].events = POLLIN;
		for (size_t k = 0; k < nstore; k++)
			p[k + 1].fd = store[k].fd; /* events 0: POLLHUP and POLLERR only */
		if (poll(p, nstore + 1, 50) > 0) {
			bool changed = false;

			if (p[0].revents & POLLIN)
				on_notify(sock);
			/* from the end: drop() moves the last entry into the hole */
			for (size_t k = nstore; k-- > 0;) {
				if (k < nstore && p[k + 1].fd == store[k].fd &&
				    (p[k + 1].revents & (POLLHUP | POLLERR))) {
					drop(k);
					hups++;
					changed = true;
				}
			}
			if (changed)
				write_state();
		}
		free(p);
		if (got_term) {
			if (child <= 0)
				break; /* held: nothing to stop */
			kill(child, SIGTERM);
			got_term = 0;
			max_restarts = 0;
		}
		if (child > 0) {
			int st = 0;
			pid_t w;
			bool died = false;

			/* Any child or orphan (a subreaper): a predecessor that
			 * handed over and named its successor exits too. What
			 * was sent before a death counts: read it all first, as
			 * systemd handles notifications ahead of SIGCHLD. */
			while (!died && (w = waitpid(-1, &st, WNOHANG)) > 0) {
				struct pollfd q = { .fd = sock, .events = POLLIN };

				while (poll(&q, 1, 0) > 0 && (q.revents & POLLIN))
					on_notify(sock);
				died = w == child;
			}
			if (!died)
				continue;
			if ((WIFEXITED(st) && WEXITSTATUS(st) == 0) || restarts >= max_restarts) {
				rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
				fprintf(stderr, "fdstore_harness: pid %d ended (status %d); done\n",
					(int)child, rc);
				break;
			}
			fprintf(stderr,
				"fdstore_harness: pid %d %s %d; restarting with %zu stored "
				"descriptors\n",
				(int)child, WIFSIGNALED(st) ? "killed by signal" : "exited",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), nstore);
			child = -1;
			ready = 0;
			write_state();
		}
		/* Dead: restarted, unless a test holds it down to look at the
		 * gateway without a controller (the store kept meanwhile). */
		if (hold && access(hold, F_OK) == 0) {
			if (!held) {
				held = 1;
				write_state();
			}
			continue;
		}
		held = 0;
		restarts++;
		child = start(argv, notify_path);
		starts++;
		write_state();
	}
	while (nstore)
		drop(nstore - 1);
	child = -1;
	write_state();
	close(sock);
	unlink(notify_path);
	return rc;
}
