/* A sender's usual time text as epoch microseconds, exactly as _time.to_micros reads it. One
 * copy for store/_cencode.c (the runs ingest admits) and store/_cusage.c (the first token of
 * an llm run the fold stores). Its includers have included Python.h. */
#ifndef ASSAY_CTIME_H
#define ASSAY_CTIME_H

#include <string.h>

/* the instants a datetime holds (years 1 to 9999), as _time._MIN_US and _MAX_US */
#define MIN_US (-62135596800000000LL)
#define MAX_US (253402300799999999LL)

static inline int digits(const char *p, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}

static inline long long days_from_civil(long long y, int m, int d) {
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    long long yoe = y - era * 400;
    long long doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* The usual sender's time, "YYYY-MM-DDTHH:MM:SS[.f{1,6}][Z|+00:00]" (naive taken as UTC), as
 * epoch microseconds, exactly as _time.to_micros reads it; 0 for any other text (which the
 * caller's parser then reads or refuses). */
static inline int iso_micros(const char *p, Py_ssize_t n, long long *out) {
    int y, mo, d, h, mi, s, frac = 0;
    if (n < 19 || p[4] != '-' || p[7] != '-' || p[10] != 'T' || p[13] != ':' || p[16] != ':')
        return 0;
    if (!digits(p, 4, &y) || !digits(p + 5, 2, &mo) || !digits(p + 8, 2, &d)
        || !digits(p + 11, 2, &h) || !digits(p + 14, 2, &mi) || !digits(p + 17, 2, &s))
        return 0;
    Py_ssize_t i = 19;
    if (i < n && p[i] == '.') {
        int k = 0;
        i++;
        while (i < n && k < 7 && p[i] >= '0' && p[i] <= '9') {
            frac = frac * 10 + (p[i] - '0');
            i++;
            k++;
        }
        if (k == 0 || k > 6)
            return 0;
        for (; k < 6; k++)
            frac *= 10;
    }
    if (i < n) {
        if (n - i == 1 && p[i] == 'Z')
            i += 1;
        else if (n - i == 6 && memcmp(p + i, "+00:00", 6) == 0)
            i += 6;
        else
            return 0;
    }
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59)
        return 0;
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > dim[mo - 1] + (mo == 2 && leap))
        return 0;
    long long days = days_from_civil(y, mo, d);
    *out = ((days * 86400LL + h * 3600LL + mi * 60LL + s) * 1000000LL) + frac;
    return 1;
}

#endif
