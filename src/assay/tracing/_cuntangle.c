/* assay.tracing._speedups.untangle: _untangle.py's untangle in C.
 *
 * The writer takes apart each stored trace that nothing else holds (every _kids list dropped),
 * so reference counting frees it at once instead of the cyclic collector (see _untangle.py for
 * why and for the rules). In Python the walk over a trace, its checks and its reference counts
 * cost ~0.5 us a run of the writer's thread on traces of many runs (bench/tracing_overhead.py's
 * nested shape: 1.8 -> 1.2 us a span with it left out), about what the rest of the writer's
 * work on such a run costs. Here the same walk is a few pointer reads a run.
 *
 * The same decisions as the Python: a trace is taken apart only when every run in it is closed
 * and stored whole (_sent 2), none has a weak reference, each child's parent is the run whose
 * _kids holds it, and each run's reference count is exactly what the trace and the batch hold
 * (here no reference of this function's own is counted: the pointers it keeps are borrowed).
 * Where a value is not what the writer makes (a _closed that is not True, a _kids that is not
 * a list), the trace is left whole, for the collector, as ever. */
#include "_speedups.h"
#include <stdint.h>

/* Runs of the batch -> how many references the batch holds to each (the list, or the
 * (op, run) tuples in it): open addressing over borrowed pointers. */
typedef struct {
    PyObject **keys;
    Py_ssize_t *counts;
    size_t mask;
} Held;

static size_t slot_of(const Held *h, PyObject *key) {
    uint64_t x = (uint64_t)(uintptr_t)key >> 4;
    x *= 0x9E3779B97F4A7C15ULL;
    size_t i = (size_t)(x >> 32) & h->mask;
    while (h->keys[i] != NULL && h->keys[i] != key)
        i = (i + 1) & h->mask;
    return i;
}

static Py_ssize_t held_by_batch(const Held *h, PyObject *run) {
    size_t i = slot_of(h, run);
    return h->keys[i] == run ? h->counts[i] : 0;
}

static int is_two(PyObject *value) {
    return value != NULL && PyLong_CheckExact(value) && PyLong_AsLong(value) == 2;
}

/* Whether a weak reference to ``run`` exists (weakref.getweakrefcount(run) > 0). */
static int has_weakrefs(PyObject *run) {
    Py_ssize_t offset = Py_TYPE(run)->tp_weaklistoffset;
    return offset > 0 && *(PyObject **)((char *)run + offset) != NULL;
}

/* _untangle._free: 1 when the trace was taken apart, 0 when it was left whole, -1 on error. */
static int free_trace(PyObject *root, const Held *held) {
    Py_ssize_t len = 1, cap = 64;
    PyObject **trace = PyMem_Malloc(sizeof(PyObject *) * cap);
    if (trace == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    trace[0] = root;
    int whole = 0; /* 1: left whole */
    for (Py_ssize_t i = 0; i < len && !whole; i++) {
        PyObject *run = trace[i], *kids = get(run, S_KIDS);
        if (kids == Py_None)
            continue;
        if (!PyList_CheckExact(kids)) {
            whole = 1;
            break;
        }
        Py_ssize_t n = PyList_GET_SIZE(kids);
        if (len + n > cap) {
            while (len + n > cap)
                cap *= 2;
            PyObject **more = PyMem_Realloc(trace, sizeof(PyObject *) * cap);
            if (more == NULL) {
                PyMem_Free(trace);
                PyErr_NoMemory();
                return -1;
            }
            trace = more;
        }
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *kid = PyList_GET_ITEM(kids, k);
            /* checked before the walk goes on: a tree, so the walk ends */
            if (!PyObject_TypeCheck(kid, run_type) || get(kid, S_PARENT) != run) {
                whole = 1;
                break;
            }
            trace[len++] = kid;
        }
    }
    for (Py_ssize_t i = 0; i < len && !whole; i++) {
        PyObject *run = trace[i], *kids = get(run, S_KIDS);
        if (get(run, S_CLOSED) != Py_True || !is_two(SLOT(run, S_SENT)) || has_weakrefs(run)) {
            whole = 1;
            break;
        }
        /* the root: the batch and its children's parent slots; any other run: its parent's
         * list of children too */
        Py_ssize_t expected = (run == root ? 0 : 1) + held_by_batch(held, run)
                              + (kids == Py_None ? 0 : PyList_GET_SIZE(kids));
        if (Py_REFCNT(run) != expected)
            whole = 1;
    }
    if (!whole) {
        /* held while their lists go: dropping a parent's list may free its children */
        for (Py_ssize_t i = 0; i < len; i++)
            Py_INCREF(trace[i]);
        for (Py_ssize_t i = 0; i < len; i++)
            Py_XSETREF(SLOT(trace[i], S_KIDS), Py_NewRef(Py_None));
        for (Py_ssize_t i = 0; i < len; i++)
            Py_DECREF(trace[i]);
    }
    PyMem_Free(trace);
    return !whole;
}

PyObject *untangle(PyObject *self, PyObject *items) {
    if (!PyList_Check(items) || run_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "untangle(items: list) needs the bound RunTree");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(items);
    size_t cap = 16;
    while (cap < (size_t)n * 2)
        cap *= 2;
    Held held = {PyMem_Calloc(cap, sizeof(PyObject *)), PyMem_Calloc(cap, sizeof(Py_ssize_t)),
                 cap - 1};
    PyObject **roots = PyMem_Malloc(sizeof(PyObject *) * (n ? n : 1));
    if (held.keys == NULL || held.counts == NULL || roots == NULL) {
        PyMem_Free(held.keys);
        PyMem_Free(held.counts);
        PyMem_Free(roots);
        return PyErr_NoMemory();
    }
    Py_ssize_t nroots = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *run = PyList_GET_ITEM(items, i);
        if (PyTuple_CheckExact(run)) /* (op, run) */
            run = PyTuple_GET_SIZE(run) == 2 ? PyTuple_GET_ITEM(run, 1) : NULL;
        if (run == NULL || !PyObject_TypeCheck(run, run_type))
            continue;
        size_t at = slot_of(&held, run);
        if (held.keys[at] == run) {
            held.counts[at]++;
            continue;
        }
        held.keys[at] = run;
        held.counts[at] = 1;
        PyObject *kids = get(run, S_KIDS);
        if (get(run, S_PARENT) == Py_None && PyList_CheckExact(kids) && PyList_GET_SIZE(kids)
            && is_two(SLOT(run, S_SENT)))
            roots[nroots++] = run;
    }
    int failed = 0;
    while (nroots > 0 && !failed)
        failed = free_trace(roots[--nroots], &held) < 0;
    PyMem_Free(held.keys);
    PyMem_Free(held.counts);
    PyMem_Free(roots);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}
