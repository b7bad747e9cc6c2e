/* One segment of LangSmith's dotted order in C, as _ids.dotted_segment_us makes it:
 * %Y%m%dT%H%M%S%fZ of the start (epoch microseconds, UTC) and then the run's id, and an order
 * made of a parent's and it. One copy for store/_corders.c (the fold's orders) and
 * tracing/_speedups.c (the writer's). Its includers have included Python.h. */
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

/* The start in epoch microseconds when `start` and `rid` are what the writers make for a
 * segment (an int of the years 1970-9999, ASCII text), else -1 (no error set). */
static inline long long assay_segment_us(PyObject *start, PyObject *rid) {
    if (!PyLong_CheckExact(start) || !PyUnicode_CheckExact(rid) || !PyUnicode_IS_ASCII(rid))
        return -1;
    int overflow = 0;
    long long us = PyLong_AsLongLongAndOverflow(start, &overflow);
    return overflow || us < 0 || us >= ASSAY_MAX_US ? -1 : us;
}

/* `above` (an ASCII order; NULL: a root's), a dot, and the segment of `us` (from
 * assay_segment_us) and `rid`: a new str, or NULL (an error set, or none when the time
 * cannot be formatted). */
static inline PyObject *assay_order_after(PyObject *above, long long us, PyObject *rid) {
    char head[ASSAY_HEAD + 1];
    if (assay_segment_head(us, head) < 0)
        return NULL;
    Py_ssize_t ulen = above == NULL ? 0 : PyUnicode_GET_LENGTH(above) + 1;
    Py_ssize_t rlen = PyUnicode_GET_LENGTH(rid);
    PyObject *out = PyUnicode_New(ulen + ASSAY_HEAD + rlen, 127);
    if (out == NULL)
        return NULL;
    char *d = (char *)PyUnicode_DATA(out);
    if (above != NULL) {
        memcpy(d, PyUnicode_DATA(above), (size_t)(ulen - 1));
        d[ulen - 1] = '.';
    }
    memcpy(d + ulen, head, ASSAY_HEAD);
    memcpy(d + ulen + ASSAY_HEAD, PyUnicode_DATA(rid), (size_t)rlen);
    return out;
}

#endif
