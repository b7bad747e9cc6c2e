/* assay.store._cencode.plain_copy: a journal batch as the fold will decode it, without JSON.
 *
 * A batch appended by this process is folded, nearly always, by this process too (the
 * background folder, or the first reader): decoding its JSON again was an eighth of the first
 * read after an experiment (pydantic-core and zstd, stop 52). The journal keeps such a batch's
 * copy beside its bytes (_journal._Recent) and the fold takes that instead. The copy must be
 * exactly what decoding the bytes gives, so it is made only of what JSON keeps as it is: dicts
 * with str keys and lists (copied: nothing the caller still holds is shared), str, bool, None,
 * int within 64 bits (signed) and finite float (shared: immutable). Anything else (a tuple, a
 * subclass, a datetime for the encoder's default, NaN, which orjson writes as null) or a nesting
 * past MAX_DEPTH makes the whole batch not plain: None, and the fold decodes its bytes as
 * before. The batch's JSON is then written from the copy, so the two cannot differ. No Python
 * code runs here (exact types only: str keys hash without it), so nothing changes the batch
 * while it is copied. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#define MAX_DEPTH 64

/* v's copy (a new reference); NULL with no error set: not plain; NULL with an error: failed */
static PyObject *copied(PyObject *v, int depth) {
    PyTypeObject *type = Py_TYPE(v);
    if (type == &PyUnicode_Type || v == Py_None || type == &PyBool_Type) {
        Py_INCREF(v);
        return v;
    }
    if (type == &PyLong_Type) {
        int overflow = 0;
        PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow)
            return NULL;
        Py_INCREF(v);
        return v;
    }
    if (type == &PyFloat_Type) {
        if (!isfinite(PyFloat_AS_DOUBLE(v)))
            return NULL;
        Py_INCREF(v);
        return v;
    }
    if (depth >= MAX_DEPTH)
        return NULL;
    if (type == &PyList_Type) {
        Py_ssize_t n = PyList_GET_SIZE(v);
        PyObject *out = PyList_New(n);
        if (out == NULL)
            return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = copied(PyList_GET_ITEM(v, i), depth + 1);
            if (item == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            PyList_SET_ITEM(out, i, item);
        }
        return out;
    }
    if (type == &PyDict_Type) {
        PyObject *out = PyDict_New();
        if (out == NULL)
            return NULL;
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(v, &pos, &key, &value)) {
            if (Py_TYPE(key) != &PyUnicode_Type) {
                Py_DECREF(out);
                return NULL;
            }
            PyObject *item = copied(value, depth + 1);
            if (item == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            int failed = PyDict_SetItem(out, key, item);
            Py_DECREF(item);
            if (failed) {
                Py_DECREF(out);
                return NULL;
            }
        }
        return out;
    }
    return NULL;
}

PyObject *plain_copy(PyObject *self, PyObject *value) {
    PyObject *out = copied(value, 0);
    if (out == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return out;
}
