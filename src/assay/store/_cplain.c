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
 * while it is copied.
 *
 * A dict is cloned whole (PyDict_Copy copies a compact dict's entries in one block) and only
 * its container values are replaced by their copies: a run's dict is mostly str, None and
 * numbers. Every container copied is untracked by the garbage collector: a copy is a tree of
 * atoms (no cycle can run through it), and kept until the fold takes it, so each full
 * collection walked every kept copy (a tenth of a traced span's instructions, stop 55). A
 * dict the fold later gives a container is tracked again by CPython itself. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#define MAX_DEPTH 64

/* an int within 64 bits (signed): one or no digit without a call */
static inline int fits_64(PyObject *v) {
#if PY_VERSION_HEX < 0x030C0000
    Py_ssize_t size = Py_SIZE(v);
    if (size >= -1 && size <= 1)
        return 1;
#else
    if (PyUnstable_Long_IsCompact((PyLongObject *)v))
        return 1;
#endif
    int overflow = 0;
    PyLong_AsLongLongAndOverflow(v, &overflow);
    return !overflow;
}

/* 1: v is an atom JSON keeps as it is (its own copy); -1: not plain; 0: a container to copy */
static inline int atomic(PyObject *v) {
    PyTypeObject *type = Py_TYPE(v);
    if (type == &PyUnicode_Type || v == Py_None || type == &PyBool_Type)
        return 1;
    if (type == &PyLong_Type)
        return fits_64(v) ? 1 : -1;
    if (type == &PyFloat_Type)
        return isfinite(PyFloat_AS_DOUBLE(v)) ? 1 : -1;
    return 0;
}

/* v's copy (a new reference); NULL with no error set: not plain; NULL with an error: failed */
static PyObject *copied(PyObject *v, int depth) {
    PyTypeObject *type = Py_TYPE(v);
    int atom = atomic(v);
    if (atom) {
        if (atom < 0)
            return NULL;
        Py_INCREF(v);
        return v;
    }
    if (depth >= MAX_DEPTH)
        return NULL;
    if (type == &PyList_Type) {
        /* cloned whole (one block), then each container replaced by its copy */
        Py_ssize_t n = PyList_GET_SIZE(v);
        PyObject *out = PyList_GetSlice(v, 0, n);
        if (out == NULL)
            return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PyList_GET_ITEM(out, i);
            int atom = atomic(item);
            if (atom == 1)
                continue;
            PyObject *copy = atom < 0 ? NULL : copied(item, depth + 1);
            if (copy == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            PyList_SET_ITEM(out, i, copy);
            Py_DECREF(item);
        }
        PyObject_GC_UnTrack(out);
        return out;
    }
    if (type == &PyDict_Type) {
        PyObject *out = PyDict_Copy(v);
        if (out == NULL)
            return NULL;
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(v, &pos, &key, &value)) {
            if (Py_TYPE(key) != &PyUnicode_Type) {
                Py_DECREF(out);
                return NULL;
            }
            int atom = atomic(value);
            if (atom == 1)
                continue;
            PyObject *item = atom < 0 ? NULL : copied(value, depth + 1);
            if (item == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            /* a container's copy replaces it (the same key: no resize) */
            int failed = PyDict_SetItem(out, key, item);
            Py_DECREF(item);
            if (failed) {
                Py_DECREF(out);
                return NULL;
            }
        }
        PyObject_GC_UnTrack(out);
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
