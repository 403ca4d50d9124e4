// SPDX-License-Identifier: MIT
/* systemd's notification protocol, without libsystemd. */
#include "sdnotify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int kvs_sd_notify(const char *fmt, ...)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t salen;
	char msg[256];
	va_list ap;
	int fd, err = 0;
	size_t n;

	if (!path || !*path)
		return 0;
	n = strlen(path);
	if (n >= sizeof(sa.sun_path) || (path[0] != '/' && path[0] != '@'))
		return -EINVAL;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@') /* an abstract socket */
		sa.sun_path[0] = '\0';
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen) < 0)
		err = -errno;
	close(fd);
	return err;
}
