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

static PyMethodDef methods[] = {
    {"split", (PyCFunction)(void (*)(void))split, METH_FASTCALL,
     "split(data, boundary, max_parts) -> list of parts, or None when the body is not in the "
     "usual layout (then parse it in Python)."},
    {"bind", bind, METH_O, "bind(Part): the class split() makes, and its slots' offsets."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_csplit", NULL, -1, methods};

PyMODINIT_FUNC PyInit__csplit(void) {
    key_ctype = PyUnicode_InternFromString("content-type");
    key_clength = PyUnicode_InternFromString("content-length");
    if (key_ctype == NULL || key_clength == NULL)
        return NULL;
    return PyModule_Create(&module);
}
