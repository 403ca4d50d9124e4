// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kvsplice/proto.h"
#include "oaierr.h"

/* kvsplice-adapter says "inference server: HTTP 422: ..." for a refusal:
 * the client gets the server's own status back. */
static int server_status(const char *message)
{
	const char *p = message ? strstr(message, "HTTP ") : NULL;
	long s;

	if (!p)
		return 0;
	s = strtol(p + 5, NULL, 10);
	return s >= 400 && s < 500 ? (int)s : 0;
}

struct oai_err oai_err_of_kvs(int kvs_status, const char *message)
{
	struct oai_err e = { 500, "server_error", NULL };
	int s;

	switch (kvs_status) {
	case KVS_E_BUSY:
		e = (struct oai_err){ 429, "rate_limit_error", "server_busy" };
		break;
	case KVS_E_NO_BACKEND:
		e = (struct oai_err){ 503, "server_error", "no_backend" };
		break;
	case KVS_E_BACKEND_GONE:
		e = (struct oai_err){ 502, "server_error", "backend_gone" };
		break;
	case KVS_E_TIMEOUT:
		e = (struct oai_err){ 504, "server_error", "timeout" };
		break;
	case KVS_E_TOO_LONG:
		e = (struct oai_err){ 400, "invalid_request_error", "context_length_exceeded" };
		break;
	case KVS_E_TOO_LARGE:
		e = (struct oai_err){ 413, "invalid_request_error", "request_too_large" };
		break;
	case KVS_E_REJECTED:
		s = server_status(message);
		e = (struct oai_err){ s ? s : 400, "invalid_request_error", NULL };
		break;
	default:
		break;
	}
	return e;
}

char *oai_err_body(const char *message, const char *type, const char *param, const char *code)
{
	json_t *e = json_pack("{s:{s:s,s:s,s:s?,s:s?}}", "error", "message", message, "type", type,
			      "param", param, "code", code);
	char *s = e ? json_dumps(e, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(e);
	return s;
}

int oai_err_response(char *buf, size_t size, int status, const char *reason, const char *message,
		     const char *type, const char *code)
{
	char *body = oai_err_body(message, type, NULL, code);
	int n;

	if (!body)
		return -ENOMEM;
	n = snprintf(buf, size,
		     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
		     status, reason, strlen(body), body);
	free(body);
	return n < 0 || (size_t)n >= size ? -ENOSPC : n;
}
