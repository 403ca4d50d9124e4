/* SPDX-License-Identifier: MIT */
/*
 * The systemd notification protocol (sd_notify(3)), without libsystemd: a
 * datagram to $NOTIFY_SOCKET. The controller says READY=1 once it listens,
 * and on an upgrade the one handing over names its successor MAINPID=, so
 * that systemd follows the gateway from one process to the next.
 */
#ifndef KVS_SDNOTIFY_H
#define KVS_SDNOTIFY_H

/* Sends the formatted message if $NOTIFY_SOCKET is set. 0 (also when it
 * is not) or -errno. */
__attribute__((format(printf, 1, 2))) int kvs_sd_notify(const char *fmt, ...);

#endif
