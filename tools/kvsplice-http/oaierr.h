/* SPDX-License-Identifier: MIT */
/*
 * Errors as OpenAI clients expect them: the HTTP status for a KVS1 ERROR
 * code, and the {"error": {...}} body (message, type, param, code) the
 * openai libraries turn into their exception classes. Pure.
 */
#ifndef KVS_HTTP_OAIERR_H
#define KVS_HTTP_OAIERR_H

#include <stddef.h>

struct oai_err {
	int status;	  /* HTTP */
	const char *type; /* "invalid_request_error", "server_error", ... */
	const char *code; /* OpenAI's code ("context_length_exceeded"), or NULL */
};

/* A KVS1 ERROR (status code and message) as HTTP: busy 429, no_backend
 * 503, backend_gone 502, timeout 504, too_long 400, rejected the server's
 * own 4xx when the message names it (the adapter's "HTTP NNN: "), else
 * 400; the rest 500. */
struct oai_err oai_err_of_kvs(int kvs_status, const char *message);

/* The error body, NUL-terminated, malloc'd (NULL on no memory). param and
 * code may be NULL (JSON null). */
char *oai_err_body(const char *message, const char *type, const char *param, const char *code);

/* A whole HTTP/1.1 response carrying that body (param null), with
 * "Connection: close", in buf: for a connection libevent is not answering
 * (refused at --max-connections, or cut at its --request-timeout), written
 * to its socket as it is closed. Its length, or -ENOMEM, or -ENOSPC when
 * it does not fit. */
int oai_err_response(char *buf, size_t size, int status, const char *reason, const char *message,
		     const char *type, const char *code);

#endif
