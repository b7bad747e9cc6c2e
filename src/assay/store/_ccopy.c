/* assay.store._cencode.copy_text: rows as PostgreSQL's COPY text format, in C.
 *
 * The fold streams its new runs into PostgreSQL with COPY ... FROM STDIN. psycopg's
 * Copy.write_row formats a row in its own C, but dispatches a dumper per value from Python's
 * side of it: ~8 us a 29-column row on a slow machine, the largest part of the fold's own CPU
 * after deriving usage (bench/README, stop 44). The fold's rows hold only str, int, float,
 * bool and None, so a chunk of them is written here in one pass and handed to Copy.write.
 *
 * The text is what psycopg's TextFormatter writes for the same rows, byte for byte (a test
 * compares them): tab between values, a newline after each row, \N for None, t or f, the
 * int's decimal digits, the float's repr with ".0" added as psycopg's dumper does, and in
 * strings the escapes psycopg makes (backslash, \b \t \n \v \f \r). Anything else declines the
 * whole chunk (None is returned, and the caller writes its rows with write_row, which then
 * behaves, or fails, exactly as before): another type, an int past 64 bits, a float that is
 * not finite (psycopg spells those its own way), a str with NUL or a lone surrogate. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} out_t;

static int reserve(out_t *o, Py_ssize_t more) {
    if (o->len + more <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap ? o->cap : 8192;
    while (cap < o->len + more)
        cap *= 2;
    char *p = PyMem_Realloc(o->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

/* the escape letter of a byte psycopg escapes in a COPY text value, else 0 */
static char escapes[256];

static int put(out_t *o, const char *s, Py_ssize_t n) {
    if (reserve(o, n) < 0)
        return -1;
    memcpy(o->p + o->len, s, (size_t)n);
    o->len += n;
    return 0;
}

/* A str value: 1 written, 0 declined, -1 error. */
static int put_text(out_t *o, PyObject *v) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(v, &n);
    if (s == NULL) { /* a lone surrogate: write_row reports it as before */
        PyErr_Clear();
        return 0;
    }
    if (reserve(o, 2 * n) < 0)
        return -1;
    char *d = o->p + o->len;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e = escapes[c];
        if (e == 0) {
            if (c == 0) /* PostgreSQL's text holds no NUL */
                return 0;
            *d++ = (char)c;
        } else {
            *d++ = '\\';
            *d++ = e;
        }
    }
    o->len = d - o->p;
    return 1;
}

/* One value: 1 written, 0 declined, -1 error. */
static int put_value(out_t *o, PyObject *v) {
    if (v == Py_None)
        return put(o, "\\N", 2) < 0 ? -1 : 1;
    if (v == Py_True)
        return put(o, "t", 1) < 0 ? -1 : 1;
    if (v == Py_False)
        return put(o, "f", 1) < 0 ? -1 : 1;
    if (PyUnicode_CheckExact(v))
        return put_text(o, v);
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow)
            return 0;
        if (x == -1 && PyErr_Occurred())
            return -1;
        char digits[24], *end = digits + sizeof digits, *d = end;
        unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
        do { /* snprintf's "%lld" took ~3x this */
            *--d = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (x < 0)
            *--d = '-';
        return put(o, d, end - d) < 0 ? -1 : 1;
    }
    if (PyFloat_CheckExact(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        if (!isfinite(d))
            return 0;
        char *r = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (r == NULL)
            return -1;
        int rc = put(o, r, (Py_ssize_t)strlen(r));
        PyMem_Free(r);
        return rc < 0 ? -1 : 1;
    }
    return 0;
}

/* copy_text(rows): the rows (lists or tuples) as COPY text, bytes; None where a value is
 * not one this writes (see the top of this file). */
PyObject *copy_text(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 1) {
        PyErr_SetString(PyExc_TypeError, "copy_text(rows) takes one argument");
        return NULL;
    }
    PyObject *rows = PySequence_Fast(argv[0], "copy_text: rows must be a sequence");
    if (rows == NULL)
        return NULL;
    out_t o = {NULL, 0, 0};
    int rc = 1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(rows);
    for (Py_ssize_t r = 0; r < n && rc == 1; r++) {
        PyObject *row = PySequence_Fast_GET_ITEM(rows, r);
        if (!PyList_CheckExact(row) && !PyTuple_CheckExact(row)) {
            rc = 0;
            break;
        }
        Py_ssize_t width = PySequence_Fast_GET_SIZE(row);
        PyObject **items = PySequence_Fast_ITEMS(row);
        for (Py_ssize_t i = 0; i < width && rc == 1; i++) {
            if (i && put(&o, "\t", 1) < 0)
                rc = -1;
            else
                rc = put_value(&o, items[i]);
        }
        if (rc == 1 && put(&o, "\n", 1) < 0)
            rc = -1;
    }
    Py_DECREF(rows);
    PyObject *result = NULL;
    if (rc == 1)
        result = PyBytes_FromStringAndSize(o.p ? o.p : "", o.len);
    else if (rc == 0)
        result = Py_NewRef(Py_None);
    PyMem_Free(o.p);
    return result;
}

void copy_text_init(void) {
    escapes['\\'] = '\\';
    escapes['\b'] = 'b';
    escapes['\t'] = 't';
    escapes['\n'] = 'n';
    escapes['\v'] = 'v';
    escapes['\f'] = 'f';
    escapes['\r'] = 'r';
}
