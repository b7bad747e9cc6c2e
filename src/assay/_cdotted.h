/* One segment of LangSmith's dotted order in C, as _ids.dotted_segment_us makes it:
 * %Y%m%dT%H%M%S%fZ of the start (epoch microseconds, UTC) and then the run's id. One copy for
 * store/_corders.c (the fold's orders) and tracing/_speedups.c (the writer's). */
#ifndef ASSAY_CDOTTED_H
#define ASSAY_CDOTTED_H

#include <stdio.h>
#include <string.h>
#include <time.h>

#define ASSAY_MAX_US 253402300800000000LL /* 10000-01-01T00:00:00Z: past it, 5-digit years */
#define ASSAY_PREFIX 15                   /* YYYYMMDDTHHMMSS */
#define ASSAY_HEAD (ASSAY_PREFIX + 7)     /* ... and ffffffZ */

/* runs arrive in bursts: each second is formatted once (the GIL guards the cache) */
static long long assay_cached_secs = -1;
static char assay_cached_prefix[ASSAY_PREFIX + 1];

/* The ASSAY_HEAD characters before the id, for 0 <= us < ASSAY_MAX_US (the caller checks),
 * into out (ASSAY_HEAD + 1 bytes); -1 when the time cannot be formatted. */
static inline int assay_segment_head(long long us, char *out) {
    long long secs = us / 1000000;
    if (secs != assay_cached_secs) {
        time_t t = (time_t)secs;
        struct tm tm;
        if (gmtime_r(&t, &tm) == NULL)
            return -1;
        snprintf(assay_cached_prefix, sizeof assay_cached_prefix, "%04d%02d%02dT%02d%02d%02d",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        assay_cached_secs = secs;
    }
    memcpy(out, assay_cached_prefix, ASSAY_PREFIX);
    long long frac = us % 1000000; /* %f: six digits, by hand (us >= 0) */
    for (int i = ASSAY_PREFIX + 5; i >= ASSAY_PREFIX; i--, frac /= 10)
        out[i] = (char)('0' + frac % 10);
    out[ASSAY_PREFIX + 6] = 'Z';
    out[ASSAY_HEAD] = '\0';
    return 0;
}

#endif
