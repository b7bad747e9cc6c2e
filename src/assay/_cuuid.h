/* The canonical UUID text test of assay's C modules: what _ids.is_canonical_uuid matches
 * (lower-case hex, hyphens at 8, 13, 18 and 23), on 36 bytes the caller has. One copy for
 * server/_csplit.c (a part's run id) and store/_cencode.c (a posted run's ids). */
#ifndef ASSAY_CUUID_H
#define ASSAY_CUUID_H

#define ASSAY_UUID_LEN 36

static inline int assay_canonical_uuid(const char *p) {
    for (int i = 0; i < ASSAY_UUID_LEN; i++) {
        char c = p[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return 0;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

#endif
