/* assay.store._cencode: the writers' journal rows with their JSON columns as text, in C
 * (optional).
 *
 * Every run the tracing writer or evaluate() journals goes through
 * _fold_columns.encoded_rows: the row copied into a list, its inputs and outputs written by
 * orjson and checked for what the store keeps escaped (an escaped NUL, the escape character
 * U+FDD0), then decoded to str. orjson itself is ~0.15 us a value; the Python around it was
 * three times that, the largest part of journaling a traced run. Here the same steps run in
 * C, calling the same orjson.dumps, default and slow path the caller passes, so the text is
 * the same byte for byte; _fold_columns.encoded_rows stays the reference (a test compares). */
#define PY_SSIZE_T_CLEAN
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <Python.h>
#include <string.h>

static PyObject *kw_default = NULL; /* ("default",) */

/* Whether orjson's text must take the slow path (column_text): an escaped NUL, or the
 * escape character U+FDD0 (UTF-8 EF B7 90) in non-ASCII text. */
static int needs_slow(const char *p, Py_ssize_t n, const char *esc, Py_ssize_t esc_len) {
    if (memmem(p, n, "\\u0000", 6) != NULL)
        return 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((unsigned char)p[i] >= 0x80)
            return memmem(p, n, esc, esc_len) != NULL;
    }
    return 0;
}

/* One JSON column's value as its text (a new reference), or NULL with an exception set. */
static PyObject *column(PyObject *value, PyObject *dumps, PyObject *def, PyObject *slow,
                        const char *esc, Py_ssize_t esc_len) {
    PyObject *args[2] = {value, def};
    PyObject *data = PyObject_Vectorcall(dumps, args, 1, kw_default);
    if (data == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) /* orjson.JSONEncodeError is one */
            return NULL;
        PyErr_Clear();
        return PyObject_CallOneArg(slow, value);
    }
    if (!PyBytes_Check(data)) {
        Py_DECREF(data);
        PyErr_SetString(PyExc_TypeError, "dumps did not return bytes");
        return NULL;
    }
    const char *p = PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    PyObject *text = needs_slow(p, n, esc, esc_len) ? PyObject_CallOneArg(slow, value)
                                                    : PyUnicode_DecodeUTF8(p, n, NULL);
    Py_DECREF(data);
    return text;
}

static PyObject *encoded_rows(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "encoded_rows(posts, width, positions, dumps, default, slow, esc)");
        return NULL;
    }
    PyObject *posts = argv[0], *positions = argv[2], *dumps = argv[3], *def = argv[4],
             *slow = argv[5], *esc_obj = argv[6];
    Py_ssize_t width = PyLong_AsSsize_t(argv[1]);
    if (width == -1 && PyErr_Occurred())
        return NULL;
    if (!PyList_Check(posts) || !PyTuple_Check(positions) || !PyBytes_Check(esc_obj)) {
        PyErr_SetString(PyExc_TypeError, "posts: a list, positions: a tuple, esc: bytes");
        return NULL;
    }
    Py_ssize_t n_at = PyTuple_GET_SIZE(positions);
    Py_ssize_t at[8];
    if (n_at > 8) {
        PyErr_SetString(PyExc_ValueError, "at most 8 positions");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n_at; k++) {
        at[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, k));
        if ((at[k] == -1 && PyErr_Occurred()) || at[k] < 0 || at[k] >= width) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a position outside the row");
            return NULL;
        }
    }
    const char *esc = PyBytes_AS_STRING(esc_obj);
    Py_ssize_t esc_len = PyBytes_GET_SIZE(esc_obj);
    Py_ssize_t n = PyList_GET_SIZE(posts);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *post = PyList_GET_ITEM(posts, i);
        if (!((PyTuple_CheckExact(post) || PyList_CheckExact(post))
              && PySequence_Fast_GET_SIZE(post) == width)) {
            PyList_SET_ITEM(out, i, Py_NewRef(post)); /* a dict post: as it is */
            continue;
        }
        PyObject *row = PyList_New(width);
        if (row == NULL)
            goto fail;
        PyObject **items = PySequence_Fast_ITEMS(post);
        for (Py_ssize_t j = 0; j < width; j++)
            PyList_SET_ITEM(row, j, Py_NewRef(items[j]));
        PyList_SET_ITEM(out, i, row);
        for (Py_ssize_t k = 0; k < n_at; k++) {
            PyObject *value = PyList_GET_ITEM(row, at[k]);
            if (value == Py_None)
                continue;
            PyObject *text = column(value, dumps, def, slow, esc, esc_len);
            if (text == NULL)
                goto fail;
            PyList_SET_ITEM(row, at[k], text); /* the row's reference to value moves out */
            Py_DECREF(value);
        }
    }
    return out;
fail:
    Py_DECREF(out); /* items not yet set are NULL, which list dealloc skips */
    return NULL;
}

static PyMethodDef methods[] = {
    {"encoded_rows", (PyCFunction)(void (*)(void))encoded_rows, METH_FASTCALL,
     "encoded_rows(posts, width, positions, dumps, default, slow, esc): _fold_columns."
     "encoded_rows in C (see there)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cencode", NULL, -1, methods};

PyMODINIT_FUNC PyInit__cencode(void) {
    /* interned, as the keyword of a Python call is: orjson matches keywords by identity
     * first (a string of its own made each call ~0.8 us slower) */
    PyObject *name = PyUnicode_InternFromString("default");
    if (name == NULL)
        return NULL;
    kw_default = PyTuple_Pack(1, name);
    Py_DECREF(name);
    if (kw_default == NULL)
        return NULL;
    return PyModule_Create(&module);
}
