/* assay.store._cencode: the store's JSON columns as text, in C (optional).
 *
 * encoded_rows: every run the tracing writer or evaluate() journals goes through
 * _fold_columns.encoded_rows: the row copied into a list, its inputs and outputs written by
 * orjson and checked for what the store keeps escaped (an escaped NUL, the escape character
 * U+FDD0), then decoded to str. orjson itself is ~0.15 us a value; the Python around it was
 * three times that, the largest part of journaling a traced run. Here the same steps run in
 * C, calling the same orjson.dumps, default and slow path the caller passes, so the text is
 * the same byte for byte; _fold_columns.encoded_rows stays the reference (a test compares).
 *
 * admitted_post: a run the server's ingest received, checked and made ready for the journal
 * in one pass (see its comment below).
 *
 * admitted_row: such a run's row, built by the fold ahead of its transaction (see below).
 *
 * copy_text: rows as PostgreSQL's COPY text (_ccopy.c, compiled into this module).
 *
 * fill_orders: the tracing writer's dotted orders (_corders.c, compiled into this module).
 *
 * plain_copy: a journal batch copied for this process's fold (_cplain.c, compiled in too). */
#define PY_SSIZE_T_CLEAN
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <Python.h>
#include <string.h>

#include "../_cuuid.h"
#include "../_ctime.h"

/* _ccopy.c */
PyObject *copy_text(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
void copy_text_init(void);
/* _corders.c */
PyObject *fill_orders(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
/* _cusage.c */
PyObject *usage_columns(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
PyObject *plain_copy(PyObject *self, PyObject *value);
PyObject *usage_setup(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
int usage_init(void);
int usage_named(PyObject *text, int outputs);

static PyObject *kw_default = NULL; /* ("default",) */

/* Whether orjson's text holds an escaped NUL ("\u0000"), which takes the slow path
 * (column_text: the store keeps NUL escaped its own way): a memchr for each backslash, rare in
 * JSON text, where memmem read every byte (~4 instructions a byte, with the loop that looked
 * for non-ASCII bytes a sixth of the tracing writer's work on a LangGraph answer). */
static int has_escaped_nul(const char *p, Py_ssize_t n) {
    const char *end = p + n;
    while (end - p >= 6) {
        const char *b = memchr(p, '\\', (size_t)(end - p - 5)); /* where six bytes fit */
        if (b == NULL)
            return 0;
        if (memcmp(b + 1, "u0000", 5) == 0)
            return 1;
        p = b + 1;
    }
    return 0;
}

/* a Deferred's slots: "value", "convert", "encode" */
static PyObject *s_value = NULL, *s_convert = NULL, *s_encode = NULL;

/* A _json.Deferred's value as it is written, convert(value) (a new reference): what orjson
 * gets from `default` (jsonable, then Deferred.resolved: two Python calls) for a value the
 * LangChain capture defers to the writer, most of a graph's steps' inputs and outputs. */
static PyObject *resolved(PyObject *deferred) {
    PyObject *value = PyObject_GetAttr(deferred, s_value);
    if (value == NULL)
        return NULL;
    /* its `encode` where it has one (the same data, parts of it as JSON text already) */
    PyObject *convert = PyObject_GetAttr(deferred, s_encode);
    if (convert == Py_None)
        Py_SETREF(convert, PyObject_GetAttr(deferred, s_convert));
    if (convert == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    PyObject *out = PyObject_CallOneArg(convert, value);
    Py_DECREF(convert);
    Py_DECREF(value);
    return out;
}

/* One JSON column's value as its text (a new reference), or NULL with an exception set.
 * `deferred`: the Deferred class (NULL: none is): such a value is resolved here, and orjson
 * writes what `default` would have given it in place of the value (the same text). */
static PyObject *column(PyObject *value, PyObject *dumps, PyObject *def, PyObject *slow,
                        const char *esc, Py_ssize_t esc_len, PyObject *deferred) {
    PyObject *plain = NULL;
    if (deferred != NULL && (PyObject *)Py_TYPE(value) == deferred) {
        plain = resolved(value);
        if (plain == NULL)
            return NULL;
    }
    PyObject *args[2] = {plain != NULL ? plain : value, def};
    PyObject *data = PyObject_Vectorcall(dumps, args, 1, kw_default);
    Py_XDECREF(plain);
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
    PyObject *text;
    if (has_escaped_nul(p, n)) {
        text = PyObject_CallOneArg(slow, value);
    } else {
        /* the escape character U+FDD0 (UTF-8 EF B7 90) also takes the slow path; it can only
         * be in text that is not ASCII, which the decoded str says without a scan */
        text = PyUnicode_DecodeUTF8(p, n, NULL);
        if (text != NULL && !PyUnicode_IS_ASCII(text) && memmem(p, n, esc, esc_len) != NULL)
            Py_SETREF(text, PyObject_CallOneArg(slow, value));
    }
    Py_DECREF(data);
    return text;
}

static PyObject *encoded_rows(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 8 || !PyType_Check(argv[7])) {
        PyErr_SetString(PyExc_TypeError, "encoded_rows(posts, width, positions, dumps, default, "
                                         "slow, esc, deferred: type)");
        return NULL;
    }
    PyObject *posts = argv[0], *positions = argv[2], *dumps = argv[3], *def = argv[4],
             *slow = argv[5], *esc_obj = argv[6], *deferred = argv[7];
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
            PyObject *text = column(value, dumps, def, slow, esc, esc_len, deferred);
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


/* -- admitted_post ------------------------------------------------------------------------ */
/* What the server's ingest does to each posted run before it is journaled, in one pass:
 * server._wire.plain_run (the wire form checked: ids canonical text, times ISO or epoch ms,
 * strings, objects, lists of strings and of event objects), store._runs._clean (the fields the
 * store keeps; a name or error with NUL or non-ASCII text escaped; a dotted order ASCII) and
 * store._journal_admit._as_text (the JSON columns as the text the fold stores). In Python those are
 * three walks over the run's fields, ~30 us a run on a slow machine, the largest part of a
 * worker's CPU per ingested run. Anything this does not take as it is (a field of another
 * type, an id to canonicalise, an event time in epoch ms, a dotted order that is not ASCII, a
 * time that is not a plain UTC ISO string, ...) gives None and the caller runs the Python,
 * which stays the reference and words every error (tests/server/test_admitted_post.py
 * compares both on thousands of mutated runs). */

enum { F_ID, F_NAME, F_RUN_TYPE, F_START, F_END, F_INPUTS, F_OUTPUTS, F_ERROR, F_EXTRA, F_EVENTS,
       F_TAGS, F_SERIALIZED, F_TRACE, F_PARENT, F_DOTTED, F_REF, F_STATUS, F_KEPT,
       F_SESSION_ID = F_KEPT, F_SESSION_NAME, F_ALL };
/* _clean's order: "id", then store._runs.RUN_FIELDS[1:]; then what plain_run also checks */
static const char *field_names[F_ALL] = {
    "id", "name", "run_type", "start_time", "end_time", "inputs", "outputs", "error", "extra",
    "events", "tags", "serialized", "trace_id", "parent_run_id", "dotted_order",
    "reference_example_id", "status", "session_id", "session_name"};
static PyObject *fields[F_ALL];
static PyObject *k_time = NULL, *k_raw = NULL;

static int canonical_uuid(PyObject *s) {
    return PyUnicode_CheckExact(s) && PyUnicode_IS_ASCII(s)
        && PyUnicode_GET_LENGTH(s) == ASSAY_UUID_LEN
        && assay_canonical_uuid((const char *)PyUnicode_1BYTE_DATA(s));
}

/* One of schemas.RUN_TYPES (_runs._clean refuses the rest, in words). */
static int known_run_type(PyObject *s) {
    static const char *types[] = {"chain", "llm", "tool", "retriever", "embedding", "prompt",
                                  "parser"};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        if (PyUnicode_CompareWithASCIIString(s, types[k]) == 0)
            return 1;
    return 0;
}

static int hex_digit(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A dotted order as _runs._dotted_order_of takes it: segments '<8 digits>T<6-12 digits>Z<uuid>'
 * joined by '.', the last one's uuid the run's id as it is (canonical text: checked before);
 * 0 for anything else, which the Python then judges. */
static int dotted_shape(PyObject *s, PyObject *id) {
    if (!PyUnicode_IS_ASCII(s) || !PyUnicode_IS_ASCII(id)
        || PyUnicode_GET_LENGTH(id) != ASSAY_UUID_LEN)
        return 0;
    const char *p = (const char *)PyUnicode_1BYTE_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), at = 0;
    while (1) {
        Py_ssize_t end = at;
        while (end < n && p[end] != '.')
            end++;
        Py_ssize_t len = end - at, digits = len - 8 - 1 - 1 - 36;
        if (digits < 6 || digits > 12)
            return 0;
        const char *g = p + at;
        for (Py_ssize_t i = 0; i < len; i++) {
            char c = g[i];
            Py_ssize_t u = i - (len - 36); /* place in the uuid, when >= 0 */
            int ok = i == 8 ? c == 'T'
                   : i == len - 37 ? c == 'Z'
                   : u < 0 ? (c >= '0' && c <= '9')
                   : (u == 8 || u == 13 || u == 18 || u == 23) ? c == '-' : hex_digit(c);
            if (!ok)
                return 0;
        }
        if (end == n)
            return memcmp(g + len - 36, PyUnicode_1BYTE_DATA(id), 36) == 0;
        at = end + 1;
    }
}

/* A sender's time: 1 with *out set, 0 when it is not plain (the caller gives None), -1 on an
 * error. ``micros`` is server._wire._micros (``not_plain`` its refusal) for other forms. */
static int sender_time(PyObject *v, PyObject *micros, PyObject *not_plain, long long *out) {
    if (PyUnicode_CheckExact(v) && PyUnicode_IS_ASCII(v)
        && iso_micros((const char *)PyUnicode_1BYTE_DATA(v), PyUnicode_GET_LENGTH(v), out))
        return 1;
    if (!(PyUnicode_CheckExact(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v)))
        return 0;
    PyObject *r = PyObject_CallOneArg(micros, v);
    if (r == NULL)
        return -1;
    int ok = 0;
    if (r != not_plain && PyLong_CheckExact(r)) {
        int overflow = 0;
        *out = PyLong_AsLongLongAndOverflow(r, &overflow);
        if (*out == -1 && PyErr_Occurred()) {
            Py_DECREF(r);
            return -1;
        }
        ok = !overflow && *out >= MIN_US && *out <= MAX_US;
    }
    Py_DECREF(r);
    return ok;
}

static PyObject *admitted_post(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 10) {
        PyErr_SetString(PyExc_TypeError, "admitted_post(cls, micros, not_plain, escape, dumps, "
                                         "default, slow, esc, raw, run_id)");
        return NULL;
    }
    PyObject *cls = argv[0], *micros = argv[1], *not_plain = argv[2], *escape = argv[3],
             *dumps = argv[4], *def = argv[5], *slow = argv[6], *esc_obj = argv[7],
             *raw = argv[8], *run_id = argv[9];
    if (!PyBytes_Check(esc_obj)) {
        PyErr_SetString(PyExc_TypeError, "esc: bytes");
        return NULL;
    }
    if (!PyDict_CheckExact(raw))
        Py_RETURN_NONE;
    PyObject *v[F_ALL];
    for (int f = 0; f < F_ALL; f++) {
        PyObject *item = PyDict_GetItemWithError(raw, fields[f]);
        if (item == NULL && PyErr_Occurred())
            return NULL;
        v[f] = item == Py_None ? NULL : item; /* borrowed; None is no value */
    }
    /* plain_run's judgement, and _clean's checks beyond it */
    if (v[F_ID] == NULL)
        Py_RETURN_NONE;
    static const int ids[] = {F_ID, F_TRACE, F_PARENT, F_REF, F_SESSION_ID};
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++)
        if (v[ids[k]] != NULL && !canonical_uuid(v[ids[k]]))
            Py_RETURN_NONE;
    if (run_id != Py_None) { /* the part's run: a body id that differs is worded in Python */
        int same = PyObject_RichCompareBool(v[F_ID], run_id, Py_EQ);
        if (same <= 0)
            return same < 0 ? NULL : Py_NewRef(Py_None);
    }
    static const int texts[] = {F_NAME, F_RUN_TYPE, F_ERROR, F_DOTTED, F_SESSION_NAME, F_STATUS};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++)
        if (v[texts[k]] != NULL && !PyUnicode_CheckExact(v[texts[k]]))
            Py_RETURN_NONE;
    if (v[F_DOTTED] != NULL && !dotted_shape(v[F_DOTTED], v[F_ID]))
        Py_RETURN_NONE;
    if (v[F_RUN_TYPE] != NULL && !known_run_type(v[F_RUN_TYPE]))
        Py_RETURN_NONE;
    /* an object, or (from _csplit.runs) the bytes of its text as the store keeps it */
    static const int objects[] = {F_INPUTS, F_OUTPUTS, F_EXTRA, F_SERIALIZED};
    for (size_t k = 0; k < sizeof objects / sizeof objects[0]; k++)
        if (v[objects[k]] != NULL && !PyDict_CheckExact(v[objects[k]])
            && !PyBytes_CheckExact(v[objects[k]]))
            Py_RETURN_NONE;
    if (v[F_TAGS] != NULL) {
        if (!PyList_CheckExact(v[F_TAGS]))
            Py_RETURN_NONE;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v[F_TAGS]); i++)
            if (!PyUnicode_CheckExact(PyList_GET_ITEM(v[F_TAGS], i)))
                Py_RETURN_NONE;
    }
    if (v[F_EVENTS] != NULL) {
        if (!PyList_CheckExact(v[F_EVENTS]))
            Py_RETURN_NONE;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v[F_EVENTS]); i++) {
            PyObject *ev = PyList_GET_ITEM(v[F_EVENTS], i);
            if (!PyDict_CheckExact(ev))
                Py_RETURN_NONE;
            PyObject *t = PyDict_GetItemWithError(ev, k_time);
            if (t == NULL && PyErr_Occurred())
                return NULL;
            if (t != NULL && (PyLong_Check(t) || PyFloat_Check(t)) && !PyBool_Check(t))
                Py_RETURN_NONE; /* epoch ms: events_in makes it ISO text */
        }
    }
    long long start = 0, end = 0;
    int r;
    if (v[F_START] != NULL && (r = sender_time(v[F_START], micros, not_plain, &start)) <= 0)
        return r < 0 ? NULL : Py_NewRef(Py_None);
    if (v[F_END] != NULL && (r = sender_time(v[F_END], micros, not_plain, &end)) <= 0)
        return r < 0 ? NULL : Py_NewRef(Py_None);
    if (v[F_START] != NULL && v[F_END] != NULL && end < start && start - end < 1000)
        end = start; /* as RunIn._precision */
    if (v[F_START] != NULL && v[F_END] != NULL && end < start)
        Py_RETURN_NONE; /* an end before the start: RunIn refuses it, in words */

    /* the admitted run, in _clean's key order */
    PyObject *out = PyObject_CallNoArgs(cls);
    if (out == NULL)
        return NULL;
    const char *esc = PyBytes_AS_STRING(esc_obj);
    Py_ssize_t esc_len = PyBytes_GET_SIZE(esc_obj);
    for (int f = 0; f < F_KEPT; f++) {
        if (v[f] == NULL)
            continue;
        PyObject *value;
        switch (f) {
        case F_START:
        case F_END:
            value = PyLong_FromLongLong(f == F_START ? start : end);
            break;
        case F_INPUTS:
        case F_OUTPUTS:
        case F_EXTRA:
        case F_EVENTS:
        case F_TAGS:
        case F_SERIALIZED:
            if (!PyBytes_CheckExact(v[f])) {
                value = column(v[f], dumps, def, slow, esc, esc_len, NULL);
                break;
            }
            value = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(v[f]), PyBytes_GET_SIZE(v[f]), NULL);
            if (value == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear(); /* checked as UTF-8 before (_csplit): Python's reading, then */
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
            break;
        case F_NAME:
        case F_ERROR:
            if (!PyUnicode_IS_ASCII(v[f])
                || memchr(PyUnicode_1BYTE_DATA(v[f]), 0, PyUnicode_GET_LENGTH(v[f])) != NULL)
                value = PyObject_CallOneArg(escape, v[f]);
            else
                value = Py_NewRef(v[f]);
            break;
        default:
            value = Py_NewRef(v[f]);
        }
        if (value == NULL || PyDict_SetItem(out, fields[f], value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(value);
    }
    if (PyObject_SetAttr(out, k_raw, raw) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* admitted_row: the fold's row of a post Journal.admit journaled (cleaned, its JSON columns
 * the text to store), as _fold_rows._admitted_row builds it before the usage columns: the
 * server's runs' rows are built ahead of each fold transaction (prebuilt_rows), ~4.7 us a
 * chain run in Python, most of it getting and setting twenty-odd values. Returns (row, usage)
 * with usage 0 (none to derive), 1 (derive: an llm run, or events) or 2 (the outputs or extra
 * name usage: Python decodes them to decide), or None for any post it does not take, which
 * Python then builds or refuses as before. row_layout() gives it the row's blank and column
 * positions once (_fold_rows._ORDER). */
enum { L_INPUTS, L_OUTPUTS, L_EXTRA, L_EVENTS, L_TAGS, L_SERIALIZED, L_ID, L_TENANT, L_SESSION,
       L_TRACE, L_PARENT, L_REF, L_DOTTED, L_NAME, L_RUN_TYPE, L_START, L_END, L_ERROR,
       L_IS_ROOT, L_LATENCY, L_STATUS, L_ALL };
static Py_ssize_t at[L_ALL];
static PyObject *row_blank = NULL, *row_dotted = NULL;
static PyObject *s_error = NULL, *s_success = NULL, *s_pending = NULL, *s_empty = NULL;
/* _fold_rows.TEXT_COLUMNS: the post's field, its slot, the character its text opens with */
static const struct { int field, slot; Py_UCS4 open; } text_columns[6] = {
    {F_INPUTS, L_INPUTS, '{'}, {F_OUTPUTS, L_OUTPUTS, '{'}, {F_EXTRA, L_EXTRA, '{'},
    {F_EVENTS, L_EVENTS, '['}, {F_TAGS, L_TAGS, '['}, {F_SERIALIZED, L_SERIALIZED, '{'}};

static PyObject *row_layout(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 3 || !PyList_CheckExact(argv[0]) || !PyTuple_CheckExact(argv[1])
        || PyTuple_GET_SIZE(argv[1]) != L_ALL || !PyCallable_Check(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "row_layout(blank, positions, dotted_segment_us)");
        return NULL;
    }
    for (int i = 0; i < L_ALL; i++) {
        Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(argv[1], i));
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (v < 0 || v >= PyList_GET_SIZE(argv[0])) {
            PyErr_SetString(PyExc_ValueError, "row_layout: a position outside the row");
            return NULL;
        }
        at[i] = v;
    }
    Py_XSETREF(row_blank, Py_NewRef(argv[0]));
    Py_XSETREF(row_dotted, Py_NewRef(argv[2]));
    Py_RETURN_NONE;
}

static void put(PyObject *row, int slot, PyObject *v) { /* v borrowed */
    PyObject *old = PyList_GET_ITEM(row, at[slot]);
    PyList_SET_ITEM(row, at[slot], Py_NewRef(v));
    Py_XDECREF(old);
}

static PyObject *admitted_row(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 3 || !PyDict_Check(argv[0])) {
        PyErr_SetString(PyExc_TypeError, "admitted_row(post: dict, tenant, session)");
        return NULL;
    }
    if (row_blank == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "admitted_row before row_layout");
        return NULL;
    }
    PyObject *post = argv[0], *v[F_ALL];
    for (int f = 0; f < F_ALL; f++) {
        v[f] = PyDict_GetItemWithError(post, fields[f]);
        if (v[f] == NULL) {
            if (PyErr_Occurred())
                return NULL;
            v[f] = Py_None;
        }
    }
    PyObject *rid = v[F_ID], *run_type = v[F_RUN_TYPE], *start = v[F_START], *end = v[F_END];
    PyObject *trace = v[F_TRACE], *parent = v[F_PARENT];
    if (!PyUnicode_CheckExact(rid) || !PyUnicode_CheckExact(run_type)
        || !PyLong_CheckExact(start) || (end != Py_None && !PyLong_CheckExact(end))
        || v[F_STATUS] != Py_None || (trace == Py_None && parent != Py_None))
        Py_RETURN_NONE;
    if (trace == Py_None)
        trace = rid;
    for (int i = 0; i < 6; i++) {
        PyObject *t = v[text_columns[i].field];
        if (t != Py_None && (!PyUnicode_CheckExact(t) || PyUnicode_GET_LENGTH(t) == 0
                             || PyUnicode_READ_CHAR(t, 0) != text_columns[i].open))
            Py_RETURN_NONE;
    }
    PyObject *row = PyList_GetSlice(row_blank, 0, PyList_GET_SIZE(row_blank));
    if (row == NULL)
        return NULL;
    for (int i = 0; i < 6; i++)
        if (v[text_columns[i].field] != Py_None)
            put(row, text_columns[i].slot, v[text_columns[i].field]);
    int usage = PyUnicode_CompareWithASCIIString(run_type, "llm") == 0;
    PyObject *events = v[F_EVENTS];
    if (!usage && events != Py_None && PyUnicode_CompareWithASCIIString(events, "[]") != 0)
        usage = 1;
    if (!usage) {
        int named = 0;
        if (v[F_OUTPUTS] != Py_None)
            named = usage_named(v[F_OUTPUTS], 1);
        if (named == 0 && v[F_EXTRA] != Py_None)
            named = usage_named(v[F_EXTRA], 0);
        if (named < 0)
            goto fail;
        usage = named ? 2 : 0;
    }
    PyObject *dotted = v[F_DOTTED];
    PyObject *made = NULL, *latency = NULL;
    if (parent == Py_None) {
        int truth = dotted == Py_None ? 0 : PyObject_IsTrue(dotted);
        if (truth < 0)
            goto fail;
        if (!truth) {
            PyObject *args[2] = {start, rid};
            if ((made = PyObject_Vectorcall(row_dotted, args, 2, NULL)) == NULL)
                goto fail;
            dotted = made;
        }
    }
    int failed = PyObject_IsTrue(v[F_ERROR]);
    if (failed < 0 || (end != Py_None && (latency = PyNumber_Subtract(end, start)) == NULL)) {
        Py_XDECREF(made);
        goto fail;
    }
    put(row, L_ID, rid);
    put(row, L_TENANT, argv[1]);
    put(row, L_SESSION, argv[2]);
    put(row, L_TRACE, trace);
    put(row, L_PARENT, parent);
    put(row, L_REF, v[F_REF]);
    put(row, L_DOTTED, dotted);
    put(row, L_NAME, v[F_NAME] == Py_None ? s_empty : v[F_NAME]);
    put(row, L_RUN_TYPE, run_type);
    put(row, L_START, start);
    put(row, L_END, end);
    put(row, L_ERROR, v[F_ERROR]);
    put(row, L_IS_ROOT, parent == Py_None ? Py_True : Py_False);
    put(row, L_LATENCY, latency == NULL ? Py_None : latency);
    put(row, L_STATUS, failed ? s_error : (end != Py_None ? s_success : s_pending));
    Py_XDECREF(made);
    Py_XDECREF(latency);
    PyObject *out = Py_BuildValue("(Ni)", row, usage);
    return out;
fail:
    Py_DECREF(row);
    return NULL;
}

/* types_of(column): the set of the exact types of a sequence's values. The fold's batch lane
 * asks it of every column of a batch (_fold_batch._types); set(map(type, column)) calls type()
 * per value, ~140 instructions each, 5% of the first read after an experiment (stop 51). */
static PyObject *types_of(PyObject *self, PyObject *column) {
    PyObject *fast = PySequence_Fast(column, "types_of() takes a sequence");
    if (fast == NULL)
        return NULL;
    PyObject *out = PySet_New(NULL);
    if (out == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    PyTypeObject *last = NULL; /* runs of one type add it once */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTypeObject *type = Py_TYPE(items[i]);
        if (type == last)
            continue;
        if (PySet_Add(out, (PyObject *)type) < 0) {
            Py_DECREF(out);
            Py_DECREF(fast);
            return NULL;
        }
        last = type;
    }
    Py_DECREF(fast);
    return out;
}

/* all_canonical(ids): whether every item is canonical UUID text (_ids.all_canonical_uuids,
 * which the fold asks of each batch's ids: ~570 instructions an id in Python, ~60 here). A str
 * of 36 ASCII characters that assay_canonical_uuid takes; anything else (not text, another
 * length, upper case) makes it False, as the Python does. */
static PyObject *all_canonical(PyObject *self, PyObject *ids) {
    PyObject *fast = PySequence_Fast(ids, "all_canonical() takes a sequence");
    if (fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    int ok = 1;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        PyObject *id = items[i];
        ok = PyUnicode_Check(id) && PyUnicode_IS_READY(id) && PyUnicode_IS_ASCII(id) &&
             PyUnicode_GET_LENGTH(id) == ASSAY_UUID_LEN &&
             assay_canonical_uuid((const char *)PyUnicode_DATA(id));
    }
    Py_DECREF(fast);
    return PyBool_FromLong(ok);
}

static PyMethodDef methods[] = {
    {"types_of", (PyCFunction)types_of, METH_O,
     "types_of(column): the set of its values' exact types (set(map(type, column)))."},
    {"all_canonical", (PyCFunction)all_canonical, METH_O,
     "all_canonical(ids): every one canonical UUID text (_ids.all_canonical_uuids in C)."},
    {"plain_copy", (PyCFunction)plain_copy, METH_O,
     "plain_copy(value): a copy made of what JSON keeps as it is, or None (see _cplain.c)."},
    {"encoded_rows", (PyCFunction)(void (*)(void))encoded_rows, METH_FASTCALL,
     "encoded_rows(posts, width, positions, dumps, default, slow, esc, deferred): "
     "_fold_columns."
     "encoded_rows in C (see there)."},
    {"admitted_post", (PyCFunction)(void (*)(void))admitted_post, METH_FASTCALL,
     "admitted_post(cls, micros, not_plain, escape, dumps, default, slow, esc, raw, run_id): "
     "a posted run checked and made ready for the journal, or None (see _cencode.c)."},
    {"row_layout", (PyCFunction)(void (*)(void))row_layout, METH_FASTCALL,
     "row_layout(blank, positions, dotted_segment_us): the rows admitted_row builds."},
    {"admitted_row", (PyCFunction)(void (*)(void))admitted_row, METH_FASTCALL,
     "admitted_row(post, tenant, session): (row, usage) of an admitted post, or None (see "
     "_cencode.c)."},
    {"copy_text", (PyCFunction)(void (*)(void))copy_text, METH_FASTCALL,
     "copy_text(rows): the rows as COPY text (bytes), or None (see _ccopy.c)."},
    {"fill_orders", (PyCFunction)(void (*)(void))fill_orders, METH_FASTCALL,
     "fill_orders(items, known, at, width, id, parent, dotted, start): the usual items' "
     "dotted orders from at on; the index of the first it did not take (see _corders.c)."},
    {"usage_columns", (PyCFunction)(void (*)(void))usage_columns, METH_FASTCALL,
     "usage_columns(run, texts, start): the usage columns of an llm run's row, or None (see "
     "_cusage.c)."},
    {"usage_setup", (PyCFunction)(void (*)(void))usage_setup, METH_FASTCALL,
     "usage_setup(from_column, price, checked_micros): the Python usage_columns calls."},
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
    for (int f = 0; f < F_ALL; f++)
        if ((fields[f] = PyUnicode_InternFromString(field_names[f])) == NULL)
            return NULL;
    if ((k_time = PyUnicode_InternFromString("time")) == NULL
        || (k_raw = PyUnicode_InternFromString("raw")) == NULL
        || (s_error = PyUnicode_InternFromString("error")) == NULL
        || (s_success = PyUnicode_InternFromString("success")) == NULL
        || (s_pending = PyUnicode_InternFromString("pending")) == NULL
        || (s_empty = PyUnicode_InternFromString("")) == NULL
        || (s_value = PyUnicode_InternFromString("value")) == NULL
        || (s_convert = PyUnicode_InternFromString("convert")) == NULL
        || (s_encode = PyUnicode_InternFromString("encode")) == NULL || usage_init() < 0)
        return NULL;
    copy_text_init();
    return PyModule_Create(&module);
}
