// SPDX-License-Identifier: MIT
/* The service manager's protocols, through libsystemd (sd-daemon). */
#include "sdnotify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>

int kvs_sd_notify(const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r = sd_notify(0, msg);
	return r < 0 ? r : 0;
}

bool kvs_sd_notifying(void)
{
	const char *p = getenv("NOTIFY_SOCKET");

	return p && *p;
}

int kvs_sd_store_fds(const char *name, const int *fds, unsigned n)
{
	char msg[300];

	if (n > KVS_SD_FDS_MAX)
		return -EINVAL;
	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s", name);
	return sd_pid_notify_with_fds(0, 0, msg, fds, n);
}

int kvs_sd_store_remove(const char *name)
{
	int r = sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s", name);

	return r < 0 ? r : 0;
}

int kvs_sd_listen_fds(char ***names)
{
	*names = NULL;
	return sd_listen_fds_with_names(1, names);
}

void kvs_sd_names_free(char **names)
{
	for (char **p = names; p && *p; p++)
		free(*p);
	free(names);
}
