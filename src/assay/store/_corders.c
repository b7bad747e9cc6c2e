/* assay.store._cencode.fill_orders: the dotted orders of the tracing writer's runs, in C.
 *
 * The tracing writer journals a run's dotted order as None and leaves it to the fold
 * (_fold_columns.fill_orders): a root's order is its start's %Y%m%dT%H%M%S%fZ and its id, a
 * child's its parent's order, a dot, and its own segment. In Python that loop was ~1 us a run,
 * about a tenth of the fold's own CPU for a traced run. This is the loop's usual case: from
 * index `at`, while an item is a value list of the writer's width whose order is None, whose
 * start is an int of this era (0 to year 9999 in epoch microseconds), whose id is ASCII str
 * text, and which is a root or a child of a run already in `known` (an ASCII order), its order
 * is set in the list and in `known`. An item of that width whose order is given already (the
 * runs of LangGraph and the other frameworks come with theirs: RunTree makes it) and whose id
 * is a str goes into `known` as it is, as the loop's settle() puts it. It returns the index of the first item it did not take
 * (len(items) when it took them all); the Python loop settles that one item exactly as it
 * always did, then calls again from the next. So the items are settled one by one in their
 * order either way, and the orders are those dotted_segment_us makes (a test compares). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../_cdotted.h"

/* item's order, or NULL with no error set when the item is not one this takes */
static PyObject *order_of(PyObject *item, PyObject *known, Py_ssize_t id, Py_ssize_t parent_at,
                          Py_ssize_t start_at) {
    PyObject *rid = PyList_GET_ITEM(item, id);
    PyObject *start = PyList_GET_ITEM(item, start_at);
    PyObject *parent = PyList_GET_ITEM(item, parent_at);
    long long us = assay_segment_us(start, rid);
    if (us < 0)
        return NULL;
    PyObject *up = NULL;
    if (parent != Py_None) {
        if (!PyUnicode_CheckExact(parent)) /* another key's hash could run Python code */
            return NULL;
        up = PyDict_GetItemWithError(known, parent); /* borrowed */
        if (up == NULL) {
            PyErr_Clear();
            return NULL;
        }
        if (!PyUnicode_CheckExact(up) || !PyUnicode_IS_ASCII(up) || PyUnicode_GET_LENGTH(up) == 0)
            return NULL;
    }
    return assay_order_after(up, us, rid); /* (NULL and no error: the time unformatted) */
}

PyObject *fill_orders(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    (void)self;
    if (argc != 8 || !PyList_CheckExact(argv[0]) || !PyDict_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "fill_orders(items, known, at, width, id, parent, dotted, start)");
        return NULL;
    }
    PyObject *items = argv[0], *known = argv[1];
    Py_ssize_t pos[6];
    for (int k = 0; k < 6; k++) {
        pos[k] = PyLong_AsSsize_t(argv[2 + k]);
        if (pos[k] == -1 && PyErr_Occurred())
            return NULL;
    }
    Py_ssize_t at = pos[0], width = pos[1], id = pos[2], parent = pos[3], dotted = pos[4],
               start = pos[5];
    if (id < 0 || parent < 0 || dotted < 0 || start < 0 || id >= width || parent >= width
        || dotted >= width || start >= width) {
        PyErr_SetString(PyExc_ValueError, "fill_orders: positions outside the width");
        return NULL;
    }
    Py_ssize_t i = at < 0 ? 0 : at;
    for (; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyList_CheckExact(item) || PyList_GET_SIZE(item) != width)
            break;
        PyObject *given = PyList_GET_ITEM(item, dotted);
        if (given != Py_None) { /* an order made with the run (a framework's): kept, known */
            PyObject *rid = PyList_GET_ITEM(item, id);
            if (!PyUnicode_CheckExact(rid)) /* another key's hash could run Python code */
                break;
            if (PyDict_SetItem(known, rid, given) < 0)
                return NULL;
            continue;
        }
        PyObject *order = order_of(item, known, id, parent, start);
        if (order == NULL) {
            if (PyErr_Occurred())
                return NULL;
            break;
        }
        if (PyDict_SetItem(known, PyList_GET_ITEM(item, id), order) < 0) {
            Py_DECREF(order);
            return NULL;
        }
        PyList_SetItem(item, dotted, order); /* steals order; releases the None */
    }
    return PyLong_FromSsize_t(i);
}
