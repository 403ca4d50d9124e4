/* SPDX-License-Identifier: MIT */
/*
 * The service manager's side channel (sd_notify(3), sd_listen_fds(3)),
 * through libsystemd's sd-daemon functions. Each call is a no-op without
 * $NOTIFY_SOCKET (not started by systemd, or by a test harness playing it).
 *
 * The controller says READY=1 once it listens; on an upgrade the one
 * handing over names its successor MAINPID=, so that systemd follows the
 * gateway from one process to the next. With a file-descriptor store
 * (FileDescriptorStoreMax= in the unit) it also hands its sockets in
 * (fdstore.c), and gets them back after a crash as LISTEN_FDS.
 */
#ifndef KVS_SDNOTIFY_H
#define KVS_SDNOTIFY_H

#include <stdbool.h>

/* Sends the formatted message if $NOTIFY_SOCKET is set. 0 (also when it
 * is not) or -errno. */
__attribute__((format(printf, 1, 2))) int kvs_sd_notify(const char *fmt, ...);
/* Whether a service manager listens ($NOTIFY_SOCKET is set). */
bool kvs_sd_notifying(void);
/* FDSTORE=1 with FDNAME=name: n descriptors into the store, one datagram
 * (n at most KVS_SD_FDS_MAX). 1 if sent, 0 if no one listens, or -errno. */
#define KVS_SD_FDS_MAX 200 /* SCM_RIGHTS carries at most 253 */
int kvs_sd_store_fds(const char *name, const int *fds, unsigned n);
/* FDSTOREREMOVE=1 with FDNAME=name: every stored descriptor of that name
 * closed by the service manager. 0 or -errno. */
int kvs_sd_store_remove(const char *name);
/* The descriptors the service manager passed (LISTEN_FDS, at 3.., names
 * from LISTEN_FDNAMES into *names, a NULL-terminated list to free with
 * kvs_sd_names_free); the variables are unset, so a successor started by
 * an upgrade does not take them for its own. How many (0: none), or
 * -errno. */
int kvs_sd_listen_fds(char ***names);
void kvs_sd_names_free(char **names);

#endif
