// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench datapath's gateways: kvspliced (kernel or userspace path)
 * or HAProxy (splice-auto, or splicing forced) started in front of the echo
 * backend, waited for until they accept, and stopped.
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "datapath_int.h"
#include "netutil.h"

static int wait_port(const char *file, pid_t pid)
{
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen(file, "r");
		int port = 0;

		if (f) {
			if (fscanf(f, "%d", &port) != 1)
				port = 0;
			fclose(f);
		}
		if (port > 0)
			return port;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -ECHILD;
		usleep(25000);
	}
	return -ETIMEDOUT;
}

/* A free loopback port (HAProxy takes a fixed one). */
static int free_port(void)
{
	struct kvs_addr a;
	int fd, port;

	kvs_parse_addr("127.0.0.1:0", &a);
	fd = kvs_listen(&a, 1);
	if (fd < 0)
		return fd;
	port = kvs_local_port(fd);
	close(fd);
	return port;
}

static pid_t spawn(char *const argv[], const char *log)
{
	pid_t pid = fork();

	if (pid == 0) {
		FILE *f = fopen(log, "w");

		if (f)
			dup2(fileno(f), 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Starts cfg's gateway in front of the echo backend; its pid and port. */
pid_t dp_start_gateway(const struct dp_opts *o, int cfg, const char *name, uint16_t echo,
		       const char *tmp, int *port)
{
	char be[64], pf[600], pin[96], log[600], conf[600];
	pid_t pid;

	snprintf(be, sizeof(be), "127.0.0.1:%u", echo);
	snprintf(log, sizeof(log), "%s/%s.log", tmp, name);
	if (cfg == C_HAPROXY || cfg == C_HAPROXY_SPLICE) {
		FILE *f;
		int p = free_port();

		snprintf(conf, sizeof(conf), "%s/haproxy.cfg", tmp);
		f = fopen(conf, "w");
		if (!f || p < 0) {
			if (f)
				fclose(f);
			return -EIO;
		}
		fprintf(f,
			"global\n    maxconn 1000\n    nbthread 1\n"
			"defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 60s\n"
			"    timeout server 60s\n    %s\n"
			"listen kvs\n    bind 127.0.0.1:%d\n    server echo %s\n",
			cfg == C_HAPROXY ? "option splice-auto" :
					   "option splice-request\n    option splice-response",
			p, be);
		fclose(f);
		pid = spawn((char *const[]){ (char *)o->haproxy, "-db", "-f", conf, NULL }, log);
		/* HAProxy writes no port file: wait until it accepts. */
		for (int i = 0; pid > 0 && i < 200; i++) {
			struct kvs_addr a;
			int fd;

			kvs_parse_addr("127.0.0.1:0", &a);
			((struct sockaddr_in *)&a.ss)->sin_port = htons((uint16_t)p);
			fd = kvs_connect(&a, 100);
			if (fd >= 0) {
				close(fd);
				*port = p;
				return pid;
			}
			usleep(25000);
		}
		if (pid > 0)
			kill(pid, SIGKILL);
		return -ETIMEDOUT;
	}
	snprintf(pf, sizeof(pf), "%s/%s.port", tmp, name);
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/kvs-dpbench-%d", (int)getpid());
	pid = spawn((char *const[]){ (char *)o->gw_bin, "--listen", "127.0.0.1:0", "--port-file",
				     pf, "--pin-dir", pin, "--backend", be, "--datapath",
				     cfg == C_USER ? "user" : "kernel", "--health-interval-ms", "0",
				     "--log-level", "warn", NULL },
		    log);
	*port = pid > 0 ? wait_port(pf, pid) : -ECHILD;
	if (*port < 0) {
		fprintf(stderr, PROG ": %s did not start (see %s)\n", o->gw_bin, log);
		if (pid > 0)
			kill(pid, SIGKILL);
		return *port;
	}
	return pid;
}

void dp_stop_gateway(pid_t pid)
{
	char pin[96];

	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	/* kvspliced leaves its (empty) pin directory: ours, remove it. */
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/kvs-dpbench-%d", (int)getpid());
	rmdir(pin);
}

void dp_remove_tmp(const char *tmp, const char *const *names)
{
	char path[600];

	for (; *names; names++) {
		snprintf(path, sizeof(path), "%s/%s.log", tmp, *names);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s.port", tmp, *names);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/haproxy.cfg", tmp);
	unlink(path);
	rmdir(tmp);
}
