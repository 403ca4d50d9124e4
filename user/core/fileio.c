// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fileio.h"

char *kvs_read_file(const char *path, size_t spare, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	char *p = NULL;
	int err = 0;

	if (!f)
		return NULL;
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
		err = errno ? errno : EINVAL;
		goto out;
	}
	p = malloc((size_t)st.st_size + spare + 1);
	if (!p) {
		err = ENOMEM;
		goto out;
	}
	if (fread(p, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		err = EIO;
		free(p);
		p = NULL;
		goto out;
	}
	p[st.st_size] = '\0';
	*len = (size_t)st.st_size;
out:
	fclose(f);
	if (err)
		errno = err;
	return p;
}
