/* assay.server._csplit: the usual multipart/form-data body split in one C pass (optional).
 *
 * Ingest sends five parts a run (post.<id> and its .inputs/.outputs/.events/.extra), and in
 * Python each part costs a regex match, three decodes, a dict and a Part: ~1.6 us a part, the
 * worker's largest cost after admitting the batch (bench/README, "The server's CPU"). Here
 * the body is walked once: each delimiter found with memmem, each header block compared with
 * the one layout both SDKs write, and each Part allocated with its slots written in place.
 *
 * split() takes only that layout: a body opening with its first boundary, every part headed
 * exactly as _body._USUAL_HEAD matches it (Content-Disposition with a name and an optional
 * filename, then optional Content-Type and Content-Length, in that order and spelling).
 * Anything else (a preamble, another header, a malformed or truncated body, too many parts)
 * returns None and _body.parse_multipart parses the body in Python, which stays the
 * reference: it words every error, and a test holds the two to the same parts. */
#define PY_SSIZE_T_CLEAN
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <Python.h>
#include <string.h>
#include <structmember.h>

#include "../_cuuid.h"

static const char DISPOSITION[] = "\r\nContent-Disposition: form-data; name=\"";
static const char FILENAME[] = "; filename=\"";
static const char CTYPE[] = "Content-Type: ";
static const char CLENGTH[] = "Content-Length: ";
#define LIT(s) (sizeof(s) - 1)

static PyObject *key_ctype = NULL, *key_clength = NULL;

/* A quoted value [^"\\\r\n]* up to its closing quote: its end, or NULL. */
static const char *quoted(const char *p, const char *end) {
    while (p < end && *p != '"') {
        if (*p == '\\' || *p == '\r' || *p == '\n')
            return NULL;
        p++;
    }
    return p < end ? p : NULL;
}

/* A header value [^\r\n]* up to its CRLF: the value's end (at the CR), or NULL. */
static const char *line_end(const char *p, const char *end) {
    while (p < end && *p != '\r' && *p != '\n')
        p++;
    return (p + 1 < end && p[0] == '\r' && p[1] == '\n') ? p : NULL;
}

static int starts(const char *p, const char *end, const char *lit, size_t n) {
    return (size_t)(end - p) >= n && memcmp(p, lit, n) == 0;
}

/* Whether the body can be read by orjson as json.loads reads it (see Part.plain): no
 * escaped NUL and no run of 19 digits (an integer orjson would read as a float). Any run of
 * 19 bytes holds one of every 19th byte, so only those are looked at, and the run around a
 * digit found there measured: ~0.1 ns a byte, where a test of every byte took 1.7. */
static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int plain_body(const char *data, Py_ssize_t n) {
    const unsigned char *p = (const unsigned char *)data;
    for (Py_ssize_t i = 18; i < n; i += 19) {
        if (!is_digit(p[i]))
            continue;
        Py_ssize_t lo = i, hi = i;
        while (lo > 0 && is_digit(p[lo - 1]))
            lo--;
        while (hi + 1 < n && is_digit(p[hi + 1]))
            hi++;
        if (hi - lo + 1 >= 19)
            return 0;
        i = hi; /* the next run starts past hi: every 19th byte from there */
    }
    return memmem(data, n, "\\u0000", 6) == NULL;
}

/* The Part class and where its slots live (bind()): a Part is allocated and its slots
 * written here, as Python's own slot descriptors would (its generated __init__ cost ~0.3 us
 * a part). */
enum { P_NAME, P_DATA, P_HEADERS, P_FILENAME, P_PLAIN, N_FIELDS };
static const char *field_names[N_FIELDS] = {"name", "data", "headers", "filename", "plain"};
static PyTypeObject *part_cls = NULL;
static Py_ssize_t field_at[N_FIELDS];

static PyObject *bind(PyObject *self, PyObject *cls) {
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "bind(Part): a class with __slots__");
        return NULL;
    }
    Py_ssize_t found[N_FIELDS];
    for (int i = 0; i < N_FIELDS; i++) {
        PyObject *descr = PyObject_GetAttrString(cls, field_names[i]);
        if (descr == NULL)
            return NULL;
        found[i] = -1;
        if (Py_IS_TYPE(descr, &PyMemberDescr_Type)
                && ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX)
            found[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
        Py_DECREF(descr);
        if (found[i] < 0)
            return PyErr_Format(PyExc_TypeError, "%s.%s is not a slot",
                                ((PyTypeObject *)cls)->tp_name, field_names[i]);
    }
    memcpy(field_at, found, sizeof(field_at));
    Py_XSETREF(part_cls, (PyTypeObject *)Py_NewRef(cls));
    Py_RETURN_NONE;
}

/* headers[key] = value, the new reference ``value`` taken over; -1 with an exception set
 * when value is NULL (its decode failed) or the dict refuses it. */
static int put(PyObject *headers, PyObject *key, PyObject *value) {
    int failed = value == NULL || PyDict_SetItem(headers, key, value) < 0;
    Py_XDECREF(value);
    return failed ? -1 : 0;
}

/* One part's head at ``p`` (the CRLF after its delimiter): the Part, or Py_None (not the
 * usual layout; a new reference to None), or NULL with an exception set. */
static PyObject *part(const char *p, const char *end, PyObject *plain) {
    if (!starts(p, end, DISPOSITION, LIT(DISPOSITION)))
        Py_RETURN_NONE;
    const char *name = p + LIT(DISPOSITION), *name_end = quoted(name, end);
    if (name_end == NULL)
        Py_RETURN_NONE;
    p = name_end + 1;
    const char *file = NULL, *file_end = NULL;
    if (starts(p, end, FILENAME, LIT(FILENAME))) {
        file = p + LIT(FILENAME);
        file_end = quoted(file, end);
        if (file_end == NULL)
            Py_RETURN_NONE;
        p = file_end + 1;
    }
    if (!starts(p, end, "\r\n", 2))
        Py_RETURN_NONE;
    p += 2;
    const char *ctype = NULL, *ctype_end = NULL, *clen = NULL, *clen_end = NULL;
    if (starts(p, end, CTYPE, LIT(CTYPE))) {
        ctype = p + LIT(CTYPE);
        ctype_end = line_end(ctype, end);
        if (ctype_end == NULL)
            Py_RETURN_NONE;
        p = ctype_end + 2;
    }
    if (starts(p, end, CLENGTH, LIT(CLENGTH))) {
        clen = p + LIT(CLENGTH);
        clen_end = clen;
        while (clen_end < end && *clen_end >= '0' && *clen_end <= '9')
            clen_end++;
        if (clen_end == clen || !starts(clen_end, end, "\r\n", 2))
            Py_RETURN_NONE;
        p = clen_end + 2;
    }
    if (!starts(p, end, "\r\n", 2))
        Py_RETURN_NONE;
    p += 2;

    PyObject *fields[N_FIELDS] = {NULL, NULL, NULL, NULL, Py_NewRef(plain)};
    /* header parameters are UTF-8 from the SDKs (_body._text); header values latin-1 */
    fields[P_NAME] = PyUnicode_DecodeUTF8(name, name_end - name, "replace");
    fields[P_DATA] = PyBytes_FromStringAndSize(p, end - p);
    fields[P_HEADERS] = PyDict_New();
    fields[P_FILENAME] = file != NULL && file_end > file
        ? PyUnicode_DecodeUTF8(file, file_end - file, "replace") : Py_NewRef(Py_None);
    if (fields[P_NAME] == NULL || fields[P_DATA] == NULL || fields[P_HEADERS] == NULL
            || fields[P_FILENAME] == NULL)
        goto fail;
    if (ctype != NULL && put(fields[P_HEADERS], key_ctype,
                             PyUnicode_DecodeLatin1(ctype, ctype_end - ctype, NULL)) < 0)
        goto fail;
    if (clen != NULL && put(fields[P_HEADERS], key_clength,
                            PyUnicode_DecodeASCII(clen, clen_end - clen, NULL)) < 0)
        goto fail;
    PyObject *made = part_cls->tp_alloc(part_cls, 0);
    if (made == NULL)
        goto fail;
    for (int i = 0; i < N_FIELDS; i++) /* the references move into the slots */
        *(PyObject **)((char *)made + field_at[i]) = fields[i];
    return made;
fail:
    for (int i = 0; i < N_FIELDS; i++)
        Py_XDECREF(fields[i]);
    return NULL;
}

static PyObject *split(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    Py_buffer body, boundary;
    if (argc != 3) {
        PyErr_SetString(PyExc_TypeError, "split(data, boundary, max_parts)");
        return NULL;
    }
    if (part_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_csplit.bind(Part) was not called");
        return NULL;
    }
    Py_ssize_t max_parts = PyLong_AsSsize_t(argv[2]);
    if (max_parts == -1 && PyErr_Occurred())
        return NULL;
    if (PyObject_GetBuffer(argv[0], &body, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(argv[1], &boundary, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&body);
        return NULL;
    }
    PyObject *parts = NULL, *plain;
    const char *data = body.buf, *end = data + body.len, *bnd = boundary.buf;
    Py_ssize_t blen = boundary.len;
    /* the delimiter is CRLF "--" boundary; the body opens with it, without the CRLF */
    char *delim = PyMem_Malloc(blen + 4);
    if (delim == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    memcpy(delim, "\r\n--", 4);
    memcpy(delim + 4, bnd, blen);
    size_t dlen = (size_t)blen + 4;
    if (blen == 0 || body.len < blen + 2 || memcmp(data, delim + 2, dlen - 2) != 0) {
        parts = Py_NewRef(Py_None);
        goto out;
    }
    plain = plain_body(data, body.len) ? Py_True : Py_False;
    parts = PyList_New(0);
    if (parts == NULL)
        goto out;
    const char *seg = data + dlen - 2; /* the first part's segment, after its delimiter */
    for (;;) {
        if (starts(seg, end, "--", 2))
            break; /* the close delimiter: what follows is an epilogue */
        const char *next = memmem(seg, end - seg, delim, dlen);
        if (next == NULL || PyList_GET_SIZE(parts) >= max_parts) {
            Py_SETREF(parts, Py_NewRef(Py_None)); /* unclosed, or too many: Python words it */
            goto out;
        }
        PyObject *one = part(seg, next, plain);
        if (one == NULL) {
            Py_CLEAR(parts);
            goto out;
        }
        if (one == Py_None) {
            Py_SETREF(parts, one);
            goto out;
        }
        int failed = PyList_Append(parts, one);
        Py_DECREF(one);
        if (failed) {
            Py_CLEAR(parts);
            goto out;
        }
        seg = next + dlen;
    }
out:
    PyMem_Free(delim);
    PyBuffer_Release(&boundary);
    PyBuffer_Release(&body);
    return parts;
}



/* -- canonical JSON text: a run's field part stored as it came ----------------------------- */
/* The store keeps a run's JSON columns as orjson's text of their value (_fold_columns.
 * column_text); ingest decoded each field part and admission wrote it again. A part whose
 * text already is that text needs neither: canonical_object() says so, conservatively, for an
 * object with no whitespace outside strings, no escape but \" \\ \b \f \n \r \t (no \u, no
 * \/), valid UTF-8 without U+FDD0 (the store's escape character), no key twice in an object
 * (orjson keeps the last), keys without escapes, integers other than -0, and decimals without
 * exponent, with at most 15 significant digits, no trailing zero after the first fraction
 * digit and not below 1e-3 (those print as written). The body is ``plain`` (no run of 19
 * digits, no escaped NUL) before this is asked. Anything else is decoded as before. */

#define MAX_DEPTH 64
#define MAX_KEYS 64

typedef struct {
    const unsigned char *p, *end;
    int depth;
} cursor_t;

static int c_value(cursor_t *c);

/* A string at c->p ('"'): 1 when canonical (its span, without quotes, in s and n; escaped when
 * it holds an escape), else 0. */
static int c_string(cursor_t *c, const unsigned char **s, Py_ssize_t *n, int *escaped) {
    const unsigned char *p = c->p + 1, *end = c->end;
    *escaped = 0;
    *s = p;
    while (p < end) {
        unsigned char ch = *p;
        if (ch == '"') {
            *n = p - *s;
            c->p = p + 1;
            return 1;
        }
        if (ch < 0x20)
            return 0;
        if (ch == '\\') {
            if (p + 1 >= end || !strchr("\"\\bfnrt", p[1]) || p[1] == 0)
                return 0;
            *escaped = 1;
            p += 2;
            continue;
        }
        if (ch < 0x80) {
            p++;
            continue;
        }
        /* UTF-8: no overlong form, no surrogate, at most U+10FFFF, not U+FDD0 */
        int len = ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : ch >= 0xC2 ? 2 : 0;
        if (len == 0 || ch > 0xF4 || p + len > end)
            return 0;
        for (int k = 1; k < len; k++)
            if ((p[k] & 0xC0) != 0x80)
                return 0;
        if ((ch == 0xE0 && p[1] < 0xA0) || (ch == 0xED && p[1] >= 0xA0)
            || (ch == 0xF0 && p[1] < 0x90) || (ch == 0xF4 && p[1] >= 0x90)
            || (ch == 0xEF && p[1] == 0xB7 && p[2] == 0x90))
            return 0;
        p += len;
    }
    return 0;
}

static int c_number(cursor_t *c) {
    const unsigned char *p = c->p, *end = c->end;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    const unsigned char *ip = p;
    if (p < end && *p == '0')
        p++;
    else if (p < end && *p >= '1' && *p <= '9')
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    else
        return 0;
    Py_ssize_t idigits = p - ip;
    int izero = idigits == 1 && *ip == '0';
    if (p < end && (*p == 'e' || *p == 'E'))
        return 0;
    if (p >= end || *p != '.') {
        if (neg && izero)
            return 0; /* -0: orjson writes 0 */
        c->p = p;
        return 1;
    }
    p++;
    const unsigned char *fp = p;
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    Py_ssize_t fdigits = p - fp;
    if (fdigits == 0 || (p < end && (*p == 'e' || *p == 'E')))
        return 0;
    if (fdigits > 1 && p[-1] == '0')
        return 0; /* 1.50: orjson writes 1.5 */
    Py_ssize_t lead = 0;
    while (lead < fdigits && fp[lead] == '0')
        lead++;
    if (izero && lead == fdigits) { /* 0.0 */
        c->p = p;
        return fdigits == 1;
    }
    if (izero && lead >= 3)
        return 0; /* below 1e-3: printed in another form by some */
    Py_ssize_t sig = izero ? fdigits - lead : idigits + fdigits;
    if (sig > 15)
        return 0;
    c->p = p;
    return 1;
}

static int c_literal(cursor_t *c, const char *lit, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
        return 0;
    c->p += n;
    return 1;
}

/* A container's opening at c->p: 0 too deep, 1 empty (closed by ``close``), -1 items follow. */
static int c_open(cursor_t *c, unsigned char close) {
    if (++c->depth > MAX_DEPTH)
        return 0;
    c->p++;
    if (c->p < c->end && *c->p == close) {
        c->p++;
        c->depth--;
        return 1;
    }
    return -1;
}

/* After a container's item: 1 closed by ``close``, -1 a comma (another item), 0 anything else. */
static int c_next(cursor_t *c, unsigned char close) {
    if (c->p >= c->end)
        return 0;
    if (*c->p == close) {
        c->p++;
        c->depth--;
        return 1;
    }
    if (*c->p != ',')
        return 0;
    c->p++;
    return -1;
}

static int c_object(cursor_t *c) {
    const unsigned char *keys[MAX_KEYS];
    Py_ssize_t lens[MAX_KEYS];
    int nkeys = 0;
    int r = c_open(c, '}');
    if (r >= 0)
        return r;
    for (;;) {
        const unsigned char *s;
        Py_ssize_t n;
        int escaped;
        if (c->p >= c->end || *c->p != '"' || !c_string(c, &s, &n, &escaped) || escaped
            || nkeys == MAX_KEYS)
            return 0;
        for (int k = 0; k < nkeys; k++)
            if (lens[k] == n && memcmp(keys[k], s, n) == 0)
                return 0; /* a key twice */
        keys[nkeys] = s;
        lens[nkeys++] = n;
        if (c->p >= c->end || *c->p != ':')
            return 0;
        c->p++;
        if (!c_value(c) || (r = c_next(c, '}')) >= 0)
            return r > 0;
    }
}

static int c_array(cursor_t *c) {
    int r = c_open(c, ']');
    if (r >= 0)
        return r;
    for (;;)
        if (!c_value(c) || (r = c_next(c, ']')) >= 0)
            return r > 0;
}

static int c_value(cursor_t *c) {
    if (c->p >= c->end)
        return 0;
    const unsigned char *s;
    Py_ssize_t n;
    int escaped;
    switch (*c->p) {
    case '{':
        return c_object(c);
    case '[':
        return c_array(c);
    case '"':
        return c_string(c, &s, &n, &escaped);
    case 't':
        return c_literal(c, "true", 4);
    case 'f':
        return c_literal(c, "false", 5);
    case 'n':
        return c_literal(c, "null", 4);
    default:
        return c_number(c);
    }
}

/* Whether ``p[:n]`` is one JSON object written exactly as orjson writes its value. */
static int canonical_text(const char *p, Py_ssize_t n) {
    cursor_t c = {(const unsigned char *)p, (const unsigned char *)p + n, 0};
    return n > 0 && *p == '{' && c_object(&c) && c.p == c.end;
}

static PyObject *canonical_object(PyObject *self, PyObject *data) {
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "canonical_object(data: bytes)");
        return NULL;
    }
    return PyBool_FromLong(canonical_text(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data)));
}

/* -- runs: the parts of a body of runs, grouped (ingest's from_parts) --------------------- */
/* _ingest.from_parts walks the parts in Python: each name split twice, its content type
 * looked up, its run id checked, its JSON decoded, the run's field parts collected and merged
 * into its main part: ~1.5 us a part, five parts a run, after the split. runs() does the same
 * walk for a body of post.<id>[.<field>] and patch.<id>[.<field>] parts (the SDKs' usual
 * ingest body), each run then handed to ``admit`` (store._admitted: a post checked and made
 * ready in one pass). A post's object field whose text is orjson's own (canonical_object) is
 * handed on as its bytes, not decoded: the admission keeps them as the column text. Anything else (a feedback or attachment part, a run id that is not
 * canonical text, a content type other than application/json, a part orjson cannot read or a
 * body not ``plain``, a field part without its run, a part twice, an unknown field) returns
 * None, and from_parts walks the parts in Python, which words every error. */

enum { R_INPUTS, R_OUTPUTS, R_EVENTS, R_EXTRA, R_ERROR, R_SERIALIZED, N_RUN_FIELDS };
static const char *run_field_names[N_RUN_FIELDS] = {
    "inputs", "outputs", "events", "extra", "error", "serialized"}; /* _ingest._RUN_FIELDS */
static PyObject *run_fields[N_RUN_FIELDS];
static PyObject *key_id = NULL, *json_type = NULL, *kind_post = NULL, *kind_patch = NULL;

#define SLOT(obj, i) (*(PyObject **)((char *)(obj) + field_at[i]))

/* runs[key] for the part named "<kind>.<id>[.<field>]": its [main, fields] entry (borrowed),
 * made when new; NULL with an exception set. */
static PyObject *entry_for(PyObject *runs, PyObject *key) {
    PyObject *entry = PyDict_GetItemWithError(runs, key);
    if (entry != NULL || PyErr_Occurred())
        return entry;
    entry = PyList_New(2);
    if (entry == NULL)
        return NULL;
    PyList_SET_ITEM(entry, 0, Py_NewRef(Py_None));
    PyList_SET_ITEM(entry, 1, Py_NewRef(Py_None));
    int failed = PyDict_SetItem(runs, key, entry);
    Py_DECREF(entry);
    return failed ? NULL : entry;
}

/* The walk; 1 done, 0 not the usual body (the caller gives None), -1 an error. */
static int group(PyObject *parts, PyObject *loads, PyObject *runs, PyObject *order) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts); i++) {
        PyObject *one = PyList_GET_ITEM(parts, i);
        if (!Py_IS_TYPE(one, part_cls) || SLOT(one, P_PLAIN) != Py_True)
            return 0;
        PyObject *name = SLOT(one, P_NAME), *data = SLOT(one, P_DATA),
                 *headers = SLOT(one, P_HEADERS);
        if (name == NULL || data == NULL || headers == NULL || !PyUnicode_CheckExact(name)
            || !PyUnicode_IS_ASCII(name) || !PyDict_CheckExact(headers))
            return 0;
        const char *n = (const char *)PyUnicode_1BYTE_DATA(name);
        Py_ssize_t len = PyUnicode_GET_LENGTH(name), head;
        if (len >= 5 && memcmp(n, "post.", 5) == 0)
            head = 5;
        else if (len >= 6 && memcmp(n, "patch.", 6) == 0)
            head = 6;
        else
            return 0;
        if (len < head + ASSAY_UUID_LEN || !assay_canonical_uuid(n + head))
            return 0;
        Py_ssize_t key_len = head + ASSAY_UUID_LEN; /* "<kind>.<id>" */
        PyObject *field = NULL;
        if (len > key_len) {
            if (n[key_len] != '.')
                return 0;
            for (int f = 0; f < N_RUN_FIELDS && field == NULL; f++) {
                Py_ssize_t flen = PyUnicode_GET_LENGTH(run_fields[f]);
                if (len - key_len - 1 == flen
                    && memcmp(n + key_len + 1, PyUnicode_1BYTE_DATA(run_fields[f]), flen) == 0)
                    field = run_fields[f];
            }
            if (field == NULL)
                return 0;
        }
        PyObject *ctype = PyDict_GetItemWithError(headers, key_ctype);
        if (ctype == NULL && PyErr_Occurred())
            return -1;
        if (ctype != NULL) {
            int same = PyUnicode_CheckExact(ctype) ? PyUnicode_Compare(ctype, json_type) : 1;
            if (same == -1 && PyErr_Occurred())
                return -1;
            if (same != 0)
                return 0;
        }
        PyObject *value;
        if (head == 5 && field != NULL && field != run_fields[R_EVENTS]
            && field != run_fields[R_ERROR] && PyBytes_CheckExact(data)
            && canonical_text(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data)))
            value = Py_NewRef(data); /* a post's object field: its text, as the store keeps it */
        else
            value = PyObject_CallOneArg(loads, data);
        if (value == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError)) /* orjson.JSONDecodeError is one */
                return -1;
            PyErr_Clear();
            return 0;
        }
        PyObject *key = PyUnicode_Substring(name, 0, key_len);
        PyObject *entry = key == NULL ? NULL : entry_for(runs, key);
        int done = -1;
        if (entry == NULL)
            goto next;
        if (field == NULL) { /* the run's own part */
            done = PyList_GET_ITEM(entry, 0) == Py_None && PyDict_CheckExact(value);
            if (done) {
                PyList_SetItem(entry, 0, Py_NewRef(value));
                if (PyList_Append(order, key) < 0)
                    done = -1;
            }
            goto next;
        }
        PyObject *fields = PyList_GET_ITEM(entry, 1);
        if (fields == Py_None) {
            fields = PyDict_New();
            if (fields == NULL)
                goto next;
            PyList_SetItem(entry, 1, fields);
        }
        done = PyDict_Contains(fields, field);
        if (done == 0)
            done = PyDict_SetItem(fields, field, value) < 0 ? -1 : 1;
        else if (done == 1)
            done = 0; /* the field twice: Python words it */
    next:
        Py_XDECREF(key);
        Py_DECREF(value);
        if (done != 1)
            return done;
    }
    return 1;
}

static PyObject *runs(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 3) {
        PyErr_SetString(PyExc_TypeError, "runs(parts, loads, admit)");
        return NULL;
    }
    PyObject *parts = argv[0], *loads = argv[1], *admit = argv[2];
    if (part_cls == NULL || !PyList_CheckExact(parts)) {
        PyErr_SetString(PyExc_TypeError, "runs(parts: list, ...) after bind(Part)");
        return NULL;
    }
    PyObject *by_key = PyDict_New(), *order = PyList_New(0), *out = NULL;
    if (by_key == NULL || order == NULL)
        goto done;
    int r = group(parts, loads, by_key, order);
    if (r <= 0) {
        out = r < 0 ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *entry;
    while (PyDict_Next(by_key, &pos, &key, &entry)) {
        if (PyList_GET_ITEM(entry, 0) == Py_None) { /* fields without their run */
            out = Py_NewRef(Py_None);
            goto done;
        }
    }
    out = PyList_New(0);
    if (out == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(order); i++) {
        key = PyList_GET_ITEM(order, i);
        entry = PyDict_GetItem(by_key, key);
        PyObject *raw = PyList_GET_ITEM(entry, 0), *fields = PyList_GET_ITEM(entry, 1);
        int post = PyUnicode_READ_CHAR(key, 1) == 'o'; /* "post." or "patch." */
        Py_ssize_t head = post ? 5 : 6;
        PyObject *rid = PyUnicode_Substring(key, head, head + ASSAY_UUID_LEN), *item = NULL;
        if (rid == NULL || (fields != Py_None && PyDict_Update(raw, fields) < 0)
            || PyDict_SetDefault(raw, key_id, rid) == NULL)
            goto item_done;
        if (post) {
            PyObject *args[2] = {raw, rid};
            item = PyObject_Vectorcall(admit, args, 2, NULL);
            if (item == NULL)
                goto item_done;
            if (item != Py_None)
                goto item_done;
            Py_CLEAR(item); /* not taken as it is: Python checks it, by kind, id and dict */
            for (int f = 0; f < N_RUN_FIELDS; f++) { /* ...from the decoded parts: all again */
                PyObject *v = PyDict_GetItemWithError(raw, run_fields[f]);
                if (v != NULL && PyBytes_CheckExact(v)) {
                    Py_XDECREF(rid);
                    Py_CLEAR(out);
                    out = Py_NewRef(Py_None);
                    goto done;
                }
            }
            if (PyErr_Occurred())
                goto item_done;
        }
        item = PyTuple_Pack(3, post ? kind_post : kind_patch, rid, raw);
    item_done:
        Py_XDECREF(rid);
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            Py_CLEAR(out);
            goto done;
        }
        Py_DECREF(item);
    }
done:
    Py_XDECREF(by_key);
    Py_XDECREF(order);
    return out;
}

static PyMethodDef methods[] = {
    {"split", (PyCFunction)(void (*)(void))split, METH_FASTCALL,
     "split(data, boundary, max_parts) -> list of parts, or None when the body is not in the "
     "usual layout (then parse it in Python)."},
    {"bind", bind, METH_O, "bind(Part): the class split() makes, and its slots' offsets."},
    {"canonical_object", canonical_object, METH_O,
     "canonical_object(data) -> whether data is one JSON object as orjson writes it."},
    {"runs", (PyCFunction)(void (*)(void))runs, METH_FASTCALL,
     "runs(parts, loads, admit) -> each run of a body of post and patch parts (admitted, or "
     "(kind, id, dict)), or None when the body is not the usual one (see _csplit.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_csplit", NULL, -1, methods};

PyMODINIT_FUNC PyInit__csplit(void) {
    key_ctype = PyUnicode_InternFromString("content-type");
    key_clength = PyUnicode_InternFromString("content-length");
    if (key_ctype == NULL || key_clength == NULL)
        return NULL;
    for (int f = 0; f < N_RUN_FIELDS; f++)
        if ((run_fields[f] = PyUnicode_InternFromString(run_field_names[f])) == NULL)
            return NULL;
    if ((key_id = PyUnicode_InternFromString("id")) == NULL
        || (json_type = PyUnicode_InternFromString("application/json")) == NULL
        || (kind_post = PyUnicode_InternFromString("post")) == NULL
        || (kind_patch = PyUnicode_InternFromString("patch")) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
