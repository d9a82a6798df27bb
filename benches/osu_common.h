/* What benches/osu_bw.c and benches/osu_mbw_mr.c share: OSU's tags, acknowledgement and
 * iteration counts, and their argument and buffer helpers. Included by both; the compile
 * lines stay `mpicc -O2 -o /tmp/X benches/X.c` (the header is found beside the source). */
#ifndef COMMBENCH_OSU_COMMON_H
#define COMMBENCH_OSU_COMMON_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG_DATA 100
#define TAG_ACK 101
#define ACK_BYTES 4
#define LARGE_MESSAGE_SIZE 8192 /* OSU: above this, 20 iterations and 2 skipped */
#define MAX_WINDOW 65536

/* Parse a decimal integer in [min, max]; -1 when the text is not one. */
static long parse_count(const char *s, long min, long max) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < min || v > max) {
        return -1;
    }
    return v;
}

/* A page-aligned buffer of `bytes` (at least the acknowledgement's), filled with `fill`. */
static char *page_buffer(size_t bytes, char fill) {
    void *p = NULL;
    size_t n = bytes < ACK_BYTES ? ACK_BYTES : bytes;
    if (posix_memalign(&p, (size_t)getpagesize(), n) != 0) {
        return NULL;
    }
    memset(p, fill, n);
    return p;
}

/* OSU's counts where the options left them unset (-1): 100 timed and 10 untimed iterations
 * up to LARGE_MESSAGE_SIZE bytes, 20 and 2 above. */
static void default_counts(long size, long *iterations, long *skip) {
    if (*iterations < 0) {
        *iterations = size > LARGE_MESSAGE_SIZE ? 20 : 100;
    }
    if (*skip < 0) {
        *skip = size > LARGE_MESSAGE_SIZE ? 2 : 10;
    }
}

#endif
