// SPDX-License-Identifier: MIT
/* The hand-over's messages over a Unix socket, with the descriptors they carry. */
#include "handover_msg.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int unix_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

int kvs_ho_listen(const char *path)
{
	struct sockaddr_un sa;
	int fd, err = unix_addr(path, &sa);
	mode_t old;

	if (err)
		return err;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	unlink(path);	  /* a stale one: the pin lock says we are the only controller */
	old = umask(077); /* root's alone: whoever connects gets every socket */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 1)) {
		err = -errno;
		umask(old);
		close(fd);
		return err;
	}
	umask(old);
	return fd;
}

int kvs_ho_connect(const char *path)
{
	struct sockaddr_un sa;
	int fd, err = unix_addr(path, &sa);

	if (err)
		return err;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int kvs_ho_send(int sock, const void *msg, size_t len, const int *fds, int nfds)
{
	char ctl[CMSG_SPACE(sizeof(int) * KVS_HO_BATCH)];
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds > KVS_HO_BATCH || len > KVS_HO_MSG_MAX)
		return -EINVAL;
	if (nfds > 0) {
		struct cmsghdr *cm;

		memset(ctl, 0, sizeof(ctl));
		mh.msg_control = ctl;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	for (;;) {
		if (sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)len)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			struct pollfd p = { .fd = sock, .events = POLLOUT };

			if (poll(&p, 1, 5000) > 0)
				continue;
			return -ETIMEDOUT;
		}
		return -errno;
	}
}

ssize_t kvs_ho_recv(int sock, void *buf, size_t cap, int *fds, int *nfds, int maxfds,
		    int timeout_ms)
{
	char ctl[CMSG_SPACE(sizeof(int) * KVS_HO_BATCH)];
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)
	};
	struct pollfd p = { .fd = sock, .events = POLLIN };
	struct cmsghdr *cm;
	ssize_t n;
	int r;

	*nfds = 0;
	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return -ETIMEDOUT;
	if (r < 0)
		return -errno;
	n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ECONNRESET;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		int k, cnt;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (k = 0; k < cnt; k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + sizeof(int) * (size_t)k, sizeof(int));
			if (*nfds < maxfds)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return -EMSGSIZE;
	return n;
}
