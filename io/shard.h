/* shard.h — token shards in llm.c's format.
 *
 * Layout (all little-endian): a header of 256 int32; header[0] = magic,
 * header[1] = version, header[2] = number of tokens N; then N tokens.
 *   uint16 tokens: magic 20240520, version 1 (llm.c's format; V <= 65,536)
 *   uint32 tokens: magic 20240801, version 7 (llm.c's uint32 variant)
 * File size must be exactly 1024 + N * token_bytes.
 */
#ifndef HPT_SHARD_H
#define HPT_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define HPT_SHARD_HEADER_INTS 256
#define HPT_SHARD_MAGIC_U16 20240520
#define HPT_SHARD_VERSION_U16 1
#define HPT_SHARD_MAGIC_U32 20240801
#define HPT_SHARD_VERSION_U32 7

typedef struct {
    char path[4096];
    void *map;           /* whole file, read-only mmap                   */
    size_t map_bytes;    /* file size in bytes                           */
    int64_t ntok;        /* number of tokens N                           */
    int token_bytes;     /* 2 (uint16) or 4 (uint32)                     */
    const void *tokens;  /* map + 1024                                   */
} hpt_shard;

/* Memory-map `path` and validate magic, version and size. On error *s is
 * left closed. Errors: HPT_ERR_DATA naming the file and what is wrong
 * (missing file, wrong magic with the expected values, wrong version,
 * truncated: expected vs actual bytes). */
hpt_status hpt_shard_open(const char *path, hpt_shard *s);

/* Unmap; accepts a zeroed or already-closed shard. */
void hpt_shard_close(hpt_shard *s);

/* Token i (0 <= i < ntok). */
static inline uint32_t hpt_shard_token(const hpt_shard *s, int64_t i)
{
    return s->token_bytes == 2 ? ((const uint16_t *)s->tokens)[i] : ((const uint32_t *)s->tokens)[i];
}

/* Scan all tokens; error HPT_ERR_DATA naming the file, the position and
 * the id when a token id >= vocab_size. */
hpt_status hpt_shard_check_vocab(const hpt_shard *s, int vocab_size);

/* Write n tokens as a shard at `path` (uint16 when token_bytes == 2, which
 * requires every id < 65536; else uint32). Written to path.tmp, fsynced,
 * then renamed. Errors: HPT_ERR_IO naming the file; HPT_ERR_DATA if an id
 * does not fit. */
hpt_status hpt_shard_write(const char *path, const uint32_t *tokens, int64_t n, int token_bytes);

#endif
