// SPDX-License-Identifier: MIT
/* A backend's queued answers, each client's together (frameorder.h). */
#include "frameorder.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvsplice/proto.h"

struct frame_at {
	uint64_t gw_conn;
	size_t off, len;
};

static int by_client(const void *a, const void *b)
{
	const struct frame_at *x = a, *y = b;

	if (x->gw_conn != y->gw_conn)
		return x->gw_conn < y->gw_conn ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off; /* qsort is not stable */
}

/* The payload length of the frame at p (its header's bytes 12-15). */
static uint32_t payload_at(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p + 12, sizeof(v));
	return be32toh(v);
}

/* Whether a frame starts at p: its magic (bytes 0-3). Lengths alone can
 * tile a queue read from the wrong offset by chance. */
static int magic_at(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v) == KVS_MAGIC;
}

static uint64_t be64_at(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

int kvs_frames_by_client(uint8_t *p, size_t len)
{
	struct frame_at *f = NULL;
	uint8_t *tmp = NULL;
	size_t off, n = 0, i, at;
	int ret = -ENOMEM;

	for (off = 0; off < len; n++) {
		if (len - off < KVS_HDR_LEN || !magic_at(p + off) ||
		    payload_at(p + off) > len - off - KVS_HDR_LEN)
			return -EINVAL;
		off += KVS_HDR_LEN + payload_at(p + off);
	}
	if (n < 2)
		return (int)n;
	f = malloc(n * sizeof(*f));
	tmp = malloc(len);
	if (!f || !tmp)
		goto out;
	for (off = 0, i = 0; i < n; i++) {
		f[i].gw_conn = be64_at(p + off + KVS_OFF_GW_CONN);
		f[i].off = off;
		f[i].len = KVS_HDR_LEN + payload_at(p + off);
		off += f[i].len;
	}
	qsort(f, n, sizeof(*f), by_client);
	for (at = 0, i = 0; i < n; i++) {
		memcpy(tmp + at, p + f[i].off, f[i].len);
		at += f[i].len;
	}
	memcpy(p, tmp, len);
	ret = n > INT32_MAX ? INT32_MAX : (int)n;
out:
	free(tmp);
	free(f);
	return ret;
}
