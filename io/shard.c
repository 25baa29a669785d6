/* shard.c — llm.c token shards: validated read-only mmap, atomic write.
 * See shard.h for the format. */
#include "shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "shard.c maps tokens in place and needs a little-endian host"
#endif

#define HEADER_BYTES (HPT_SHARD_HEADER_INTS * 4)

/* Little-endian int32 at byte offset 4*i of a header. */
static int32_t header_int(const unsigned char *h, int i)
{
    const unsigned char *p = h + 4 * i;
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* Token width for (magic, version), or an HPT_ERR_DATA naming the rule. */
static hpt_status header_token_bytes(const char *path, int32_t magic, int32_t version,
                                     int *token_bytes)
{
    if (magic == HPT_SHARD_MAGIC_U16 || magic == HPT_SHARD_MAGIC_U32) {
        int u16 = magic == HPT_SHARD_MAGIC_U16;
        int want = u16 ? HPT_SHARD_VERSION_U16 : HPT_SHARD_VERSION_U32;
        if (version != want)
            return hpt_error_set(HPT_ERR_DATA, "%s: unsupported version %d for magic %d (expected %d)",
                                 path, version, magic, want);
        *token_bytes = u16 ? 2 : 4;
        return HPT_OK;
    }
    return hpt_error_set(HPT_ERR_DATA,
                         "%s: bad magic %d (expected %d for uint16 llm.c shards or %d for uint32)",
                         path, magic, HPT_SHARD_MAGIC_U16, HPT_SHARD_MAGIC_U32);
}

/* Check header fields of a mapped file of `bytes` bytes and fill s. */
static hpt_status shard_parse(const char *path, const unsigned char *map, size_t bytes,
                              hpt_shard *s)
{
    int tb = 0;
    hpt_status st = header_token_bytes(path, header_int(map, 0), header_int(map, 1), &tb);
    if (st != HPT_OK)
        return st;
    int32_t n = header_int(map, 2);
    if (n < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: negative token count %d in header", path, n);
    long long want = HEADER_BYTES + (long long)n * tb;
    if ((long long)bytes != want)
        return hpt_error_set(HPT_ERR_DATA,
                             "%s: %s: header says %d tokens = %lld bytes, file has %lld bytes", path,
                             (long long)bytes < want ? "truncated" : "trailing bytes", n, want,
                             (long long)bytes);
    s->ntok = n;
    s->token_bytes = tb;
    s->tokens = map + HEADER_BYTES;
    return HPT_OK;
}

/* Open and fstat a regular file of at least the header size. O_NONBLOCK:
 * a FIFO's open would otherwise wait for a writer for ever (on every rank);
 * non-blocking, it returns at once and fstat refuses it. On a regular file
 * the flag changes nothing. */
static hpt_status shard_open_fd(const char *path, int *fd, size_t *bytes)
{
    struct stat sb;
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (*fd < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot open token shard: %s", path, strerror(errno));
    int known = fstat(*fd, &sb) == 0;
    if (!known || !S_ISREG(sb.st_mode)) {
        int fifo = known && S_ISFIFO(sb.st_mode);
        close(*fd);
        return hpt_error_set(HPT_ERR_DATA, "%s: not a regular file%s: a token shard must be one",
                             path, fifo ? " (a FIFO)" : "");
    }
    if (sb.st_size < HEADER_BYTES) {
        close(*fd);
        return hpt_error_set(HPT_ERR_DATA,
                             "%s: truncated: file has %lld bytes, less than the %d-byte header",
                             path, (long long)sb.st_size, HEADER_BYTES);
    }
    *bytes = (size_t)sb.st_size;
    return HPT_OK;
}

hpt_status hpt_shard_open(const char *path, hpt_shard *s)
{
    int fd = -1;
    size_t bytes = 0;
    memset(s, 0, sizeof *s);
    if (strlen(path) >= sizeof s->path)
        return hpt_error_set(HPT_ERR_DATA, "%.64s...: path longer than %zu bytes", path,
                             sizeof s->path - 1);
    hpt_status st = shard_open_fd(path, &fd, &bytes);
    if (st != HPT_OK)
        return st;
    void *map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED)
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot mmap token shard: %s", path,
                             strerror(map_errno));
    st = shard_parse(path, map, bytes, s);
    if (st != HPT_OK) {
        munmap(map, bytes);
        memset(s, 0, sizeof *s);
        return st;
    }
    strcpy(s->path, path);
    s->map = map;
    s->map_bytes = bytes;
    return HPT_OK;
}

void hpt_shard_close(hpt_shard *s)
{
    if (s->map)
        munmap(s->map, s->map_bytes);
    memset(s, 0, sizeof *s);
}

hpt_status hpt_shard_check_vocab(const hpt_shard *s, int vocab_size)
{
    uint32_t v = vocab_size > 0 ? (uint32_t)vocab_size : 0;
    for (int64_t i = 0; i < s->ntok; i++) {
        uint32_t t = hpt_shard_token(s, i);
        if (t >= v)
            return hpt_error_set(HPT_ERR_DATA, "%s: token id %u at position %lld >= vocab_size %d",
                                 s->path, t, (long long)i, vocab_size);
    }
    return HPT_OK;
}

/* ---------------------------------------------------------------- writing */

/* write(2) all of buf, retrying short writes. 0 or -1 with errno. */
static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Write the tokens of a shard body, narrowing to uint16 when tb == 2. */
static int write_tokens(int fd, const uint32_t *tokens, int64_t n, int tb)
{
    if (tb == 4)
        return write_all(fd, tokens, (size_t)n * 4);
    enum { CHUNK = 1 << 16 };
    static _Thread_local uint16_t buf[CHUNK];
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t m = n - i < CHUNK ? n - i : CHUNK;
        for (int64_t j = 0; j < m; j++)
            buf[j] = (uint16_t)tokens[i + j];
        if (write_all(fd, buf, (size_t)m * 2) != 0)
            return -1;
    }
    return 0;
}

/* Check the arguments of hpt_shard_write. */
static hpt_status write_check(const char *path, const uint32_t *tokens, int64_t n, int tb)
{
    if (tb != 2 && tb != 4)
        return hpt_error_set(HPT_ERR_INTERNAL, "%s: token_bytes %d (expected 2 or 4)", path, tb);
    if (n < 0 || n > INT32_MAX)
        return hpt_error_set(HPT_ERR_DATA, "%s: %lld tokens do not fit the int32 header count",
                             path, (long long)n);
    for (int64_t i = 0; tb == 2 && i < n; i++)
        if (tokens[i] > UINT16_MAX)
            return hpt_error_set(HPT_ERR_DATA,
                                 "%s: token id %u at position %lld does not fit uint16 (use 4-byte tokens)",
                                 path, tokens[i], (long long)i);
    return HPT_OK;
}

hpt_status hpt_shard_write(const char *path, const uint32_t *tokens, int64_t n, int token_bytes)
{
    hpt_status st = write_check(path, tokens, n, token_bytes);
    if (st != HPT_OK)
        return st;
    char tmp[4096 + 8];
    int fd;
    if ((st = hpt_tmp_create(path, tmp, sizeof tmp, &fd)))
        return st;
    unsigned char header[HEADER_BYTES] = {0};
    int32_t h[3] = {token_bytes == 2 ? HPT_SHARD_MAGIC_U16 : HPT_SHARD_MAGIC_U32,
                    token_bytes == 2 ? HPT_SHARD_VERSION_U16 : HPT_SHARD_VERSION_U32, (int32_t)n};
    memcpy(header, h, sizeof h);
    if (write_all(fd, header, sizeof header) != 0 || write_tokens(fd, tokens, n, token_bytes) != 0)
        st = hpt_error_set(HPT_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    return hpt_tmp_commit(fd, tmp, path, st);
}
