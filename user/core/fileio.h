/* SPDX-License-Identifier: MIT */
/* Whole files into memory: prompts and request bodies for the tools. */
#ifndef KVS_FILEIO_H
#define KVS_FILEIO_H

#include <stddef.h>

/*
 * The file at path, NUL-terminated (the NUL not counted in *len), with
 * room for spare more bytes after it; free() it. NULL with errno set when
 * it cannot be read.
 */
char *kvs_read_file(const char *path, size_t spare, size_t *len);

#endif
