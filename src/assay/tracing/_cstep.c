/* assay.tracing._speedups.step_json: _langchain._step_json's walk over containers, in C.
 *
 * A LangGraph state (a dict of message lists) is the inputs and outputs of every node, chain
 * and model call under it, and the tracing writer converts each of those values to plain data
 * when it stores the run (_lc_capture: a Deferred per value). The messages themselves come
 * from a memo (_langchain._message_json); what is left is the walk over the dicts and lists
 * around them, a Python call per value, which was most of the writer's conversion: ~0.9 of
 * ~1.6 us for a state of one message. Here the walk is C: exact dicts, lists, tuples and
 * scalars are done here (the same depth limit, keys made str as there), a value of a class
 * `message_classes` says is a message is taken from the memo `converted` (its hit test is
 * done here too) or given to `message_json`, and anything else to
 * `other(value, depth)`, the Python code for the rest (mappings, Sends, models...), so the
 * result is the Python's exactly (a test compares). */
#include "_speedups.h"

#define MAX_DEPTH 24 /* _langchain._convert's: deeper values become their repr */

typedef struct {
    PyObject *message_classes, *message_json, *other, *converted;
    PyObject *encode; /* step_fragments only (else NULL): see fragment_of */
} Step;

/* _langchain._message_json's memo hit, here: the entry kept for message `m` (borrowed), when
 * it (m, content, tool_calls, tool_call_id, name, status, dict, fragment) still holds `m`
 * itself and the very objects its fields hold now; else NULL with no error set (the Python
 * converts it and keeps the entry), or NULL with an error. `key`: id(m), a new reference
 * (NULL with an error when it could not be made). */
static PyObject *field_names[5]; /* content, tool_calls, tool_call_id, name, status */

#define ENTRY_SIZE 8
#define ENTRY_DICT 6
#define ENTRY_FRAGMENT 7

static PyObject *memo_hit(PyObject *m, PyObject *converted, PyObject **key) {
    *key = NULL;
    if (field_names[4] == NULL) { /* (the last one set: all of them are) */
        static const char *names[5] = {"content", "tool_calls", "tool_call_id", "name",
                                       "status"};
        for (int i = 0; i < 5; i++)
            if (field_names[i] == NULL
                && (field_names[i] = PyUnicode_InternFromString(names[i])) == NULL)
                return NULL;
    }
    if ((*key = PyLong_FromVoidPtr(m)) == NULL) /* the memo's key: id(m) */
        return NULL;
    PyObject *hit = PyDict_GetItemWithError(converted, *key); /* borrowed */
    if (hit == NULL || !PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != ENTRY_SIZE
        || PyTuple_GET_ITEM(hit, 0) != m)
        return NULL;
    PyObject *fields = PyObject_GenericGetDict(m, NULL); /* m.__dict__ */
    if (fields == NULL) {
        PyErr_Clear();
        return NULL;
    }
    int same = PyDict_CheckExact(fields);
    for (int i = 0; i < 5 && same; i++) {
        PyObject *now = PyDict_GetItemWithError(fields, field_names[i]);
        if (now == NULL && PyErr_Occurred()) {
            Py_DECREF(fields);
            return NULL;
        }
        same = (now == NULL ? Py_None : now) == PyTuple_GET_ITEM(hit, i + 1);
    }
    Py_DECREF(fields);
    return same ? hit : NULL;
}

static PyObject *convert(PyObject *v, int depth, const Step *s);

/* step_fragments: the memo entry `entry`'s message dict as its JSON text, an orjson.Fragment
 * that orjson writes in place of the dict (a new reference). A message's dict is shared by every
 * run whose state holds the message, and nothing changes it once made, so its fragment is made
 * once, by `encode` (the writer's orjson.dumps, as an orjson.Fragment: the bytes the dict gives
 * inside the run's value), and kept in the entry's last slot (the entry replaced by one holding
 * it, under `key`). A dict `encode` refuses is given back as it is: the run's own encoding then
 * fails as it did, and takes its slow path. */
static PyObject *fragment_of(PyObject *entry, PyObject *key, const Step *s) {
    PyObject *kept = PyTuple_GET_ITEM(entry, ENTRY_FRAGMENT);
    PyObject *d = PyTuple_GET_ITEM(entry, ENTRY_DICT);
    if (kept != Py_None)
        return Py_NewRef(kept);
    PyObject *fragment = PyObject_CallOneArg(s->encode, d);
    if (fragment == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) /* orjson.JSONEncodeError is one */
            return NULL;
        PyErr_Clear();
        return Py_NewRef(d);
    }
    PyObject *with = PyTuple_New(ENTRY_SIZE);
    if (with == NULL) {
        Py_DECREF(fragment);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < ENTRY_FRAGMENT; i++)
        PyTuple_SET_ITEM(with, i, Py_NewRef(PyTuple_GET_ITEM(entry, i)));
    PyTuple_SET_ITEM(with, ENTRY_FRAGMENT, Py_NewRef(fragment));
    int failed = PyDict_SetItem(s->converted, key, with);
    Py_DECREF(with);
    if (failed) {
        Py_DECREF(fragment);
        return NULL;
    }
    return fragment;
}

static PyObject *convert_dict(PyObject *d, int depth, const Step *s) {
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    Py_ssize_t pos = 0, size = PyDict_GET_SIZE(d);
    PyObject *key, *value;
    while (PyDict_Next(d, &pos, &key, &value)) {
        Py_INCREF(key); /* held: converting a value may run Python code */
        Py_INCREF(value);
        PyObject *k = PyUnicode_CheckExact(key) ? Py_NewRef(key) : PyObject_Str(key);
        PyObject *c = k == NULL ? NULL : convert(value, depth, s);
        int failed = c == NULL || PyDict_SetItem(out, k, c) < 0;
        Py_XDECREF(c);
        Py_XDECREF(k);
        Py_DECREF(key);
        Py_DECREF(value);
        if (failed) {
            Py_DECREF(out);
            return NULL;
        }
        if (PyDict_GET_SIZE(d) != size) { /* as iterating over dict.items() says it */
            Py_DECREF(out);
            PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
            return NULL;
        }
    }
    return out;
}

static PyObject *convert_items(PyObject *seq, int depth, const Step *s) {
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    /* to the list's length as it is at each step, as a list comprehension goes */
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        PyObject *c = convert(item, depth, s);
        Py_DECREF(item);
        if (c == NULL || PyList_Append(out, c) < 0) {
            Py_XDECREF(c);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(c);
    }
    return out;
}

static PyObject *convert(PyObject *v, int depth, const Step *s) {
    PyTypeObject *t = Py_TYPE(v);
    if (v == Py_None || t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type
        || t == &PyBool_Type)
        return Py_NewRef(v);
    if (depth > MAX_DEPTH)
        return PyObject_Repr(v);
    depth++;
    if (t == &PyDict_Type) {
        if (Py_EnterRecursiveCall(" converting a step's value"))
            return NULL;
        PyObject *out = convert_dict(v, depth, s);
        Py_LeaveRecursiveCall();
        return out;
    }
    if (t == &PyList_Type || t == &PyTuple_Type) {
        if (Py_EnterRecursiveCall(" converting a step's value"))
            return NULL;
        PyObject *out = convert_items(v, depth, s);
        Py_LeaveRecursiveCall();
        return out;
    }
    PyObject *known = PyDict_GetItemWithError(s->message_classes, (PyObject *)t);
    if (known == NULL && PyErr_Occurred())
        return NULL;
    if (known == Py_True) {
        PyObject *key, *out = NULL;
        PyObject *entry = memo_hit(v, s->converted, &key); /* borrowed */
        if (entry == NULL) {
            if (PyErr_Occurred() || (out = PyObject_CallOneArg(s->message_json, v)) == NULL
                || s->encode == NULL) {
                Py_XDECREF(key);
                return PyErr_Occurred() ? NULL : out;
            }
            /* converted, and kept by message_json: its entry, for the fragment */
            entry = PyDict_GetItemWithError(s->converted, key);
            if (entry == NULL || !PyTuple_CheckExact(entry)
                || PyTuple_GET_SIZE(entry) != ENTRY_SIZE
                || PyTuple_GET_ITEM(entry, ENTRY_DICT) != out) {
                Py_DECREF(key);
                if (PyErr_Occurred())
                    Py_CLEAR(out);
                return out; /* not kept: its dict as it is */
            }
            Py_DECREF(out);
        }
        Py_INCREF(entry); /* held: encoding runs Python code, which may change the memo */
        out = s->encode != NULL ? fragment_of(entry, key, s)
                                : Py_NewRef(PyTuple_GET_ITEM(entry, ENTRY_DICT));
        Py_DECREF(entry);
        Py_DECREF(key);
        return out;
    }
    PyObject *d = PyLong_FromLong(depth);
    if (d == NULL)
        return NULL;
    PyObject *args[2] = {v, d};
    PyObject *out = PyObject_Vectorcall(s->other, args, 2, NULL);
    Py_DECREF(d);
    return out;
}

PyObject *step_json(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 5 || nargs > 6 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[3])
        || (nargs == 6 && !PyLong_CheckExact(args[5]))) {
        PyErr_SetString(PyExc_TypeError, "step_json(message_classes: dict, message_json, other, "
                                         "converted: dict, value, depth: int = 0)");
        return NULL;
    }
    /* depth: how deep `value` already sits, when `other` walks on into a value it took (a
     * Send's arg, a mapping of another class): the limit then counts from the step's top */
    long depth = 0;
    if (nargs == 6) {
        depth = PyLong_AsLong(args[5]);
        if (depth == -1 && PyErr_Occurred())
            return NULL;
        if (depth < 0 || depth > MAX_DEPTH + 1)
            depth = MAX_DEPTH + 1;
    }
    Step s = {args[0], args[1], args[2], args[3], NULL};
    return convert(args[4], (int)depth, &s); /* (the value 5th: bound by a partial of the rest) */
}

PyObject *step_fragments(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "step_fragments(message_classes: dict, message_json, "
                                         "other, converted: dict, encode, value)");
        return NULL;
    }
    Step s = {args[0], args[1], args[2], args[3], args[4]};
    return convert(args[5], 0, &s);
}
