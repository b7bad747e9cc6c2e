/* assay.tracing._speedups: the compiled part of a traced call (optional).
 *
 * Making a RunTree is most of what tracing costs the traced caller: an id, a start time and
 * two dozen slots, which in Python take ~0.8 us (an id from uuid_utils via str() ~0.2, the
 * clock, one bytecode store per slot). Here the same takes ~0.2 us: the run is allocated by
 * its class and its slots are written at the offsets Python's own slot descriptors use (read
 * once, by bind()), so the object is an ordinary RunTree in every other respect.
 *
 * The id is a UUID version 7 (RFC 9562) written straight into a str: 48 bits of Unix
 * milliseconds, the sub-millisecond fraction in rand_a (method 3, so ids made in one process
 * sort by their microsecond), 62 random bits from xoshiro256** seeded by seed() with
 * os.urandom at import and again in a forked child (_run_tree.py registers it).
 *
 * close() ends a traced call the same way (outputs from its result, end time, closed: one step);
 * rows() and take() give the writer finished runs as journal rows, untangle() (_cuntangle.c)
 * takes its stored traces apart, and step_json() (_cstep.c) converts a LangGraph step's
 * values for it. The traced call around all this is _call.c's.
 *
 * Pure-Python equivalents live in _run_tree.py (RunTree._bare/_fast_child/_fast_root/_close)
 * and _writer.py (RunWriter._sort), used when this module is not built or ASSAY_PURE_PYTHON is
 * set; tests run both. */
#include "_speedups.h"
#include "../_cdotted.h"
#include <stdint.h>
#include <string.h>
#include <time.h>

/* The slots bind() resolves, in the order of the enum in _speedups.h. */
static const char *slot_names[N_SLOTS] = {
    "_id", "_trace", "_parent_id", "parent", "_parent_dotted", "_dotted", "name", "run_type",
    "inputs", "outputs", "error", "_start_us", "_end_us", "_meta", "_tags", "_events", "extra",
    "session_name", "session_id", "_ref", "_kids", "_writer", "_client", "_closed", "_sent",
};

Py_ssize_t offsets[N_SLOTS];
PyTypeObject *run_type = NULL; /* the bound class (a strong reference) */

/* -- ids -------------------------------------------------------------------------------- */
static uint64_t rng[4] = {0x9E3779B97F4A7C15ULL, 0xBF58476D1CE4E5B9ULL,
                          0x94D049BB133111EBULL, 0x2545F4914F6CDD1DULL};
static int seeded = 0;

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t next_random(void) { /* xoshiro256** */
    uint64_t result = rotl(rng[1] * 5, 7) * 9, t = rng[1] << 17;
    rng[2] ^= rng[0];
    rng[3] ^= rng[1];
    rng[1] ^= rng[2];
    rng[0] ^= rng[3];
    rng[2] ^= t;
    rng[3] = rotl(rng[3], 45);
    return result;
}

static const char HEX[] = "0123456789abcdef";

static inline void put_hex(Py_UCS1 *out, uint64_t value, int digits) {
    for (int i = digits - 1; i >= 0; i--) {
        out[i] = (Py_UCS1)HEX[value & 0xF];
        value >>= 4;
    }
}

/* The first 64 bits of a version 7 UUID for the instant `us` (epoch microseconds): 48 bits of
 * milliseconds, the version, the sub-millisecond fraction in 12 bits. */
static inline uint64_t uuid7_hi(int64_t us) {
    uint64_t ms = (uint64_t)(us / 1000);
    uint64_t frac = (uint64_t)(us % 1000) * 4096 / 1000;
    return (ms << 16) | 0x7000 | frac;
}

/* A UUID's canonical text (36 characters) at `p`; `lo` carries the variant bits already. */
static inline void uuid_write(Py_UCS1 *p, uint64_t hi, uint64_t lo) {
    put_hex(p, hi >> 32, 8);
    p[8] = '-';
    put_hex(p + 9, (hi >> 16) & 0xFFFF, 4);
    p[13] = '-';
    put_hex(p + 14, hi & 0xFFFF, 4);
    p[18] = '-';
    put_hex(p + 19, lo >> 48, 4);
    p[23] = '-';
    put_hex(p + 24, lo & 0xFFFFFFFFFFFFULL, 12);
}

/* Canonical text of a version 7 UUID for the instant `us` (epoch microseconds). */
static PyObject *uuid7_text(int64_t us) {
    PyObject *text = PyUnicode_New(36, 127);
    if (text == NULL)
        return NULL;
    uint64_t lo = (next_random() >> 2) | 0x8000000000000000ULL; /* variant 10, 62 random bits */
    uuid_write(PyUnicode_1BYTE_DATA(text), uuid7_hi(us), lo);
    return text;
}

static inline int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static PyObject *seed(PyObject *self, PyObject *arg) {
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    if (buf.len < (Py_ssize_t)sizeof(rng)) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "seed needs 32 random bytes");
        return NULL;
    }
    memcpy(rng, buf.buf, sizeof(rng));
    PyBuffer_Release(&buf);
    if (!(rng[0] | rng[1] | rng[2] | rng[3]))
        rng[0] = 1; /* xoshiro's one bad state */
    seeded = 1;
    Py_RETURN_NONE;
}

static PyObject *new_id(PyObject *self, PyObject *unused) {
    if (!seeded) {
        PyErr_SetString(PyExc_RuntimeError, "assay.tracing._speedups: seed() was not called");
        return NULL;
    }
    return uuid7_text(now_us());
}

/* new_ids(n): n ids of one instant that sort in the order made, as uuid_utils' uuid7() makes
 * them (the store's fold names a batch of scores with them: ~1.5k instructions an id through
 * uuid_utils and str(), ~0.2k here). The instant's prefix is shared; the 62 bits after the
 * variant count up from a random start below 2**61, so a batch never wraps and two processes'
 * batches of one microsecond still collide only with a 61-bit random start's chance. */
static PyObject *new_ids(PyObject *self, PyObject *arg) {
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "new_ids() needs a count of at least 0");
        return NULL;
    }
    if (!seeded) {
        PyErr_SetString(PyExc_RuntimeError, "assay.tracing._speedups: seed() was not called");
        return NULL;
    }
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    uint64_t hi = uuid7_hi(now_us());
    uint64_t start = next_random() >> 3; /* below 2**61 */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *text = PyUnicode_New(36, 127);
        if (text == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        /* variant 10 */
        uuid_write(PyUnicode_1BYTE_DATA(text), hi, (start + (uint64_t)i) | 0x8000000000000000ULL);
        PyList_SET_ITEM(out, i, text);
    }
    return out;
}

/* -- runs ------------------------------------------------------------------------------- */
/* The offset of slot `name` of `cls`, or -1 with TypeError set. */
Py_ssize_t slot_offset(PyObject *cls, const char *name) {
    PyObject *descr = PyObject_GetAttrString(cls, name);
    if (descr == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        descr = Py_NewRef(Py_None);
    }
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)
            && ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX)
        offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    Py_DECREF(descr);
    if (offset < 0)
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", ((PyTypeObject *)cls)->tp_name,
                     name);
    return offset;
}

static Py_ssize_t *row_offsets = NULL; /* the slots rows() takes, in order */
static Py_ssize_t row_len = 0;

static PyObject *bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyType_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "bind(RunTree, row_slot_names: tuple)");
        return NULL;
    }
    PyObject *cls = args[0], *names = args[1];
    Py_ssize_t found[N_SLOTS];
    for (int i = 0; i < N_SLOTS; i++)
        if ((found[i] = slot_offset(cls, slot_names[i])) < 0)
            return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    Py_ssize_t *row = PyMem_Malloc(sizeof(Py_ssize_t) * (n ? n : 1));
    if (row == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *name = PyUnicode_Check(PyTuple_GET_ITEM(names, i))
                           ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, i)) : NULL;
        if (name == NULL || (row[i] = slot_offset(cls, name)) < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "row slot names must be strings");
            PyMem_Free(row);
            return NULL;
        }
    }
    memcpy(offsets, found, sizeof(offsets));
    PyMem_Free(row_offsets);
    row_offsets = row;
    row_len = n;
    Py_INCREF(cls);
    Py_XSETREF(run_type, (PyTypeObject *)cls);
    Py_RETURN_NONE;
}

/* A run's journal row: the tuple of its row slots (NULL on error). */
static PyObject *row_of(PyObject *run) {
    PyObject *row = PyTuple_New(row_len);
    if (row == NULL)
        return NULL;
    for (Py_ssize_t j = 0; j < row_len; j++) {
        PyObject *v = *(PyObject **)((char *)run + row_offsets[j]);
        PyTuple_SET_ITEM(row, j, Py_NewRef(v != NULL ? v : Py_None));
    }
    return row;
}

/* Each run of a list as the tuple of its row slots (what operator.attrgetter would give). */
static PyObject *rows(PyObject *self, PyObject *runs) {
    if (!PyList_Check(runs) || run_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "rows() needs a list of RunTree");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(runs);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *run = PyList_GET_ITEM(runs, i);
        if (!PyObject_TypeCheck(run, run_type)) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "rows() needs a list of RunTree");
            return NULL;
        }
        PyObject *row = row_of(run);
        if (row == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, row);
    }
    return out;
}

#define MAX_CHAIN 256 /* runs without an order walked up at most (deeper: the Python way) */

/* RunTree.dotted_order for the writer: 1 when the run's order is set (made from its parent's,
 * its _parent_dotted or alone, kept in _dotted with every order made on the way up, as the
 * property keeps them), 0 when a run on the way is not what RunTree makes (nothing changed:
 * the caller goes the Python way), -1 on error. */
static int settle_order(PyObject *run) {
    PyObject *chain[MAX_CHAIN], *r = run, *above = NULL;
    int n = 0;
    for (;;) {
        PyObject *d = get(r, S_DOTTED);
        if (d != Py_None) {
            above = d;
            break;
        }
        if (n == MAX_CHAIN)
            return 0;
        chain[n++] = r;
        PyObject *p = get(r, S_PARENT);
        if (p == Py_None) {
            PyObject *pd = get(r, S_PARENT_DOTTED);
            if (pd != Py_None && (!PyUnicode_CheckExact(pd) || PyUnicode_GET_LENGTH(pd) > 0))
                above = pd; /* (an empty one is no order: the property's truth test) */
            break;
        }
        if (!PyObject_TypeCheck(p, run_type))
            return 0;
        r = p;
    }
    if (above != NULL && (!PyUnicode_CheckExact(above) || !PyUnicode_IS_ASCII(above)))
        return 0;
    long long starts[MAX_CHAIN];
    for (int i = 0; i < n; i++) /* every run checked before any order is set */
        if ((starts[i] = assay_segment_us(get(chain[i], S_START_US), get(chain[i], S_ID)))
            < 0)
            return 0;
    while (n > 0) {
        n--;
        PyObject *made = assay_order_after(above, starts[n], get(chain[n], S_ID));
        if (made == NULL) /* (the orders made above it are kept: they are right) */
            return PyErr_Occurred() ? -1 : 0;
        Py_XSETREF(SLOT(chain[n], S_DOTTED), made);
        above = made;
    }
    return 1;
}

/* Whether `value` is the int `want` (a larger int is not: no OverflowError left set). */
static int is_int(PyObject *value, long want) {
    int overflow = 0;
    return PyLong_CheckExact(value) && PyLong_AsLongAndOverflow(value, &overflow) == want
           && !overflow;
}

/* take(items, QUEUED, slow): the writer's queued items as journal rows, in order (the local
 * store's RunWriter._sort and rows() in one pass). A run that goes whole goes here (its _sent
 * set to 2): one finished before its post was taken, or an end queued for a run never posted
 * (an integration's, made when its step ended: (1, run)); a child whose parent has not been
 * taken gets its dotted order here, as _sort gives it. Any other item (an end of a run already
 * posted, a flush marker, a run still open) is given to slow(item), which sorts it as
 * RunWriter._sort does and returns the run if it goes whole. */
static PyObject *take(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_Check(args[0]) || run_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "take(items: list, QUEUED, slow)");
        return NULL;
    }
    PyObject *items = args[0], *queued = args[1], *slow = args[2];
    /* RunTree._sent (see _writer.py): 0 nothing sent, QUEUED its post queued, 1 its post
     * sent without the end, 2 sent whole */
    PyObject *out = PyList_New(0), *sent_whole = PyLong_FromLong(2);
    if (out == NULL || sent_whole == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i), *run = NULL, *fast_run = item;
        int fast;
        if (PyTuple_CheckExact(item)) { /* (op, run): an end; fast when never posted */
            fast = PyTuple_GET_SIZE(item) == 2 && is_int(PyTuple_GET_ITEM(item, 0), 1);
            fast_run = fast ? PyTuple_GET_ITEM(item, 1) : NULL;
            fast = fast && PyObject_TypeCheck(fast_run, run_type)
                   && get(fast_run, S_CLOSED) == Py_True && is_int(get(fast_run, S_SENT), 0);
        } else {
            fast = PyObject_TypeCheck(item, run_type) && get(item, S_CLOSED) == Py_True;
            if (fast) {
                PyObject *sent = get(item, S_SENT);
                fast = sent == queued || PyObject_RichCompareBool(sent, queued, Py_EQ) == 1;
            }
        }
        if (fast && get(fast_run, S_DOTTED) == Py_None && get(fast_run, S_PARENT_ID) != Py_None) {
            /* its dotted order: the fold's to derive when its parent is stored before it,
             * else made now */
            PyObject *parent = get(fast_run, S_PARENT), *psent;
            if (parent == Py_None || !PyObject_TypeCheck(parent, run_type)
                || (!is_int(psent = get(parent, S_SENT), 1) && !is_int(psent, 2))) {
                int settled = settle_order(fast_run);
                if (settled < 0)
                    goto error;
                fast = settled;
            }
        }
        if (PyErr_Occurred())
            goto error;
        if (fast) {
            Py_XSETREF(SLOT(fast_run, S_SENT), Py_NewRef(sent_whole));
            run = Py_NewRef(fast_run);
        } else if ((run = PyObject_CallOneArg(slow, item)) == NULL) {
            goto error;
        } else if (run == Py_None) {
            Py_CLEAR(run);
        } else if (!PyObject_TypeCheck(run, run_type)) {
            Py_DECREF(run);
            PyErr_SetString(PyExc_TypeError, "take(): slow() must return a RunTree or None");
            goto error;
        }
        if (run != NULL) {
            PyObject *row = row_of(run);
            Py_DECREF(run);
            if (row == NULL || PyList_Append(out, row) < 0) {
                Py_XDECREF(row);
                goto error;
            }
            Py_DECREF(row);
        }
    }
    Py_DECREF(sent_whole);
    return out;
error:
    Py_XDECREF(out);
    Py_XDECREF(sent_whole);
    return NULL;
}

/* A run started now with every slot at its default (None, except below); NULL on error. */
static PyObject *bare(PyObject *name, PyObject *kind, PyObject *inputs) {
    if (run_type == NULL || !seeded) {
        PyErr_SetString(PyExc_RuntimeError, "assay.tracing._speedups is not bound");
        return NULL;
    }
    int64_t us = now_us();
    PyObject *id = uuid7_text(us);
    if (id == NULL)
        return NULL;
    PyObject *start = PyLong_FromLongLong(us);
    if (start == NULL) {
        Py_DECREF(id);
        return NULL;
    }
    PyObject *run = run_type->tp_alloc(run_type, 0);
    if (run == NULL) {
        Py_DECREF(id);
        Py_DECREF(start);
        return NULL;
    }
    for (int i = 0; i < N_SLOTS; i++)
        SLOT(run, i) = Py_NewRef(Py_None);
    Py_SETREF(SLOT(run, S_ID), id);
    Py_SETREF(SLOT(run, S_START_US), start);
    Py_SETREF(SLOT(run, S_NAME), Py_NewRef(name));
    Py_SETREF(SLOT(run, S_RUN_TYPE), Py_NewRef(kind));
    Py_SETREF(SLOT(run, S_INPUTS), Py_NewRef(inputs));
    Py_SETREF(SLOT(run, S_CLOSED), Py_NewRef(Py_False));
    Py_SETREF(SLOT(run, S_SENT), PyLong_FromLong(0)); /* a cached small int: cannot fail */
    return run;
}

PyObject *make_child(PyObject *parent, PyObject *name, PyObject *kind, PyObject *inputs) {
    PyObject *run = bare(name, kind, inputs);
    if (run == NULL)
        return NULL;
    Py_SETREF(SLOT(run, S_PARENT), Py_NewRef(parent));
    Py_SETREF(SLOT(run, S_TRACE), Py_NewRef(get(parent, S_TRACE)));
    Py_SETREF(SLOT(run, S_PARENT_ID), Py_NewRef(get(parent, S_ID)));
    Py_SETREF(SLOT(run, S_SESSION_NAME), Py_NewRef(get(parent, S_SESSION_NAME)));
    Py_SETREF(SLOT(run, S_SESSION_ID), Py_NewRef(get(parent, S_SESSION_ID)));
    Py_SETREF(SLOT(run, S_CLIENT), Py_NewRef(get(parent, S_CLIENT)));
    Py_SETREF(SLOT(run, S_WRITER), Py_NewRef(get(parent, S_WRITER)));
    PyObject *kids = get(parent, S_KIDS); /* parent._adopt(run) */
    int err;
    if (kids == Py_None) {
        PyObject *list = PyList_New(1);
        err = list == NULL;
        if (!err) {
            PyList_SET_ITEM(list, 0, Py_NewRef(run));
            Py_XSETREF(SLOT(parent, S_KIDS), list);
        }
    } else if (PyList_CheckExact(kids)) {
        err = PyList_Append(kids, run) < 0;
    } else {
        PyObject *r = PyObject_CallMethod(kids, "append", "O", run);
        err = r == NULL;
        Py_XDECREF(r);
    }
    if (err) {
        Py_DECREF(run);
        return NULL;
    }
    return run;
}

static PyObject *child(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "child(parent, name, run_type, inputs)");
        return NULL;
    }
    if (run_type == NULL || !PyObject_TypeCheck(args[0], run_type)) {
        PyErr_SetString(PyExc_TypeError, "child() needs a RunTree parent");
        return NULL;
    }
    return make_child(args[0], args[1], args[2], args[3]);
}

/* args: name, run_type, inputs, client, session_id, session_name, metadata, reference id */
PyObject *make_root(PyObject *const *args) {
    PyObject *run = bare(args[0], args[1], args[2]);
    if (run == NULL)
        return NULL;
    Py_SETREF(SLOT(run, S_TRACE), Py_NewRef(SLOT(run, S_ID)));
    Py_SETREF(SLOT(run, S_CLIENT), Py_NewRef(args[3]));
    Py_SETREF(SLOT(run, S_SESSION_ID), Py_NewRef(args[4]));
    Py_SETREF(SLOT(run, S_SESSION_NAME), Py_NewRef(args[5]));
    Py_SETREF(SLOT(run, S_META), Py_NewRef(args[6]));
    Py_SETREF(SLOT(run, S_REF), Py_NewRef(args[7]));
    return run;
}

static PyObject *root(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "root(name, run_type, inputs, client, session_id, "
                                         "session_name, metadata, reference_example_id)");
        return NULL;
    }
    return make_root(args);
}

static PyObject *Mapping = NULL; /* collections.abc.Mapping */

/* A call's result as a run's outputs (_run_tree._as_outputs): a dict as it is, another mapping
 * copied, anything else as {"output": value}. */
static PyObject *as_outputs(PyObject *value) {
    if (PyDict_CheckExact(value))
        return Py_NewRef(value);
    PyTypeObject *t = Py_TYPE(value);
    if (!(value == Py_None || t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type
          || t == &PyBool_Type || t == &PyList_Type || t == &PyTuple_Type
          || t == &PyBytes_Type)) {
        int is_mapping = PyObject_IsInstance(value, Mapping);
        if (is_mapping < 0)
            return NULL;
        if (is_mapping)
            return PyObject_CallOneArg((PyObject *)&PyDict_Type, value);
    }
    PyObject *out = PyDict_New();
    if (out != NULL && PyDict_SetItemString(out, "output", value) < 0)
        Py_CLEAR(out);
    return out;
}

/* The end of a traced call: outputs (from the result, as as_outputs makes them), end time,
 * closed, in one step; returns the run's _sent (the caller queues its end unless the post is
 * still queued: see RunWriter.patch). */
PyObject *end_run(PyObject *run, PyObject *result) {
    PyObject *outputs = as_outputs(result);
    if (outputs == NULL)
        return NULL;
    PyObject *end = PyLong_FromLongLong(now_us());
    if (end == NULL) {
        Py_DECREF(outputs);
        return NULL;
    }
    Py_XSETREF(SLOT(run, S_OUTPUTS), outputs);
    Py_XSETREF(SLOT(run, S_END_US), end);
    Py_XSETREF(SLOT(run, S_CLOSED), Py_NewRef(Py_True));
    return Py_NewRef(get(run, S_SENT));
}

static PyObject *close_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || run_type == NULL || !PyObject_TypeCheck(args[0], run_type)) {
        PyErr_SetString(PyExc_TypeError, "close(run, result) needs a RunTree");
        return NULL;
    }
    return end_run(args[0], args[1]);
}

/* A framework step's value as it is now (integrations/_lc_capture.py's _snapshot, whose
 * callbacks copy a LangGraph state at every step): a dict copied with its list and dict values
 * copied too, a list copied; anything else returned as it is (the caller sees it is the same
 * object and handles it). Nothing here runs Python code for dicts with str keys. */
static PyObject *snapshot(PyObject *self, PyObject *value) {
    if (PyList_CheckExact(value))
        return PyList_GetSlice(value, 0, PyList_GET_SIZE(value));
    if (!PyDict_CheckExact(value))
        return Py_NewRef(value);
    PyObject *out = PyDict_Copy(value);
    if (out == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    PyObject *key, *item;
    while (PyDict_Next(out, &pos, &key, &item)) {
        PyObject *copy;
        if (PyList_CheckExact(item))
            copy = PyList_GetSlice(item, 0, PyList_GET_SIZE(item));
        else if (PyDict_CheckExact(item))
            copy = PyDict_Copy(item);
        else
            continue;
        /* replacing the value of a key it has does not resize ``out``: PyDict_Next goes on */
        if (copy == NULL || PyDict_SetItem(out, key, copy) < 0) {
            Py_XDECREF(copy);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(copy);
    }
    return out;
}

/* pick(mapping, keys): the items of an exact dict whose key is one of `keys` (a tuple) and
 * whose value is not None, as a new dict, or None when there are none (_lc_capture: what a
 * run keeps of a step's LangChain metadata, once per step on the tracing writer's thread). */
static PyObject *pick(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyDict_CheckExact(args[0]) || !PyTuple_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "pick(mapping: dict, keys: tuple)");
        return NULL;
    }
    PyObject *mapping = args[0], *keys = args[1], *out = NULL;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(keys); k++) {
        PyObject *key = PyTuple_GET_ITEM(keys, k);
        PyObject *value = PyDict_GetItemWithError(mapping, key); /* borrowed */
        if (value == NULL) {
            if (PyErr_Occurred())
                goto fail;
            continue;
        }
        if (value == Py_None)
            continue;
        if (out == NULL && (out = PyDict_New()) == NULL)
            return NULL;
        if (PyDict_SetItem(out, key, value) < 0)
            goto fail;
    }
    return out != NULL ? out : Py_NewRef(Py_None);
fail:
    Py_XDECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(RunTree, row_slot_names): resolve the slot offsets (once, after the class is made)."},
    {"rows", rows, METH_O, "rows(runs): each run as the tuple of its row slots (ROW)."},
    {"take", (PyCFunction)(void (*)(void))take, METH_FASTCALL,
     "take(items, QUEUED, slow): the writer's queued items as journal rows (RunWriter._sort "
     "and rows in one pass; slow(item) sorts the rest)."},
    {"seed", seed, METH_O, "Seed the id generator with 32 random bytes."},
    {"new_id", new_id, METH_NOARGS, "A new UUID v7 as canonical text."},
    {"new_ids", new_ids, METH_O, "new_ids(n): n new UUID v7 of one instant, in order, as text."},
    {"child", (PyCFunction)(void (*)(void))child, METH_FASTCALL,
     "child(parent, name, run_type, inputs): RunTree._fast_child"},
    {"root", (PyCFunction)(void (*)(void))root, METH_FASTCALL,
     "root(name, run_type, inputs, client, session_id, session_name, metadata, ref): "
     "RunTree._fast_root"},
    {"close", (PyCFunction)(void (*)(void))close_run, METH_FASTCALL,
     "close(run, result) -> run._sent: RunTree._close"},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(_Config, run_var, cfg_var, env_enabled, env_project, fail, QUEUED, STEP_RUNS, "
     "innermost): what a "
     "Call reads (see _call.c)."},
    {"pick", (PyCFunction)(void (*)(void))pick, METH_FASTCALL,
     "pick(mapping, keys): the dict's items of those keys whose value is not None, or None "
     "(see _lc_capture._kept_metadata_py)."},
    {"snapshot", snapshot, METH_O,
     "snapshot(value): a dict copied with its list and dict values, a list copied, anything "
     "else as it is (see _lc_capture._snapshot)."},
    {"step_json", (PyCFunction)(void (*)(void))step_json, METH_FASTCALL,
     "step_json(message_classes, message_json, other, converted, value, depth=0): "
     "_langchain._step_json's walk (see _cstep.c)."},
    {"step_fragments", (PyCFunction)(void (*)(void))step_fragments, METH_FASTCALL,
     "step_fragments(message_classes, message_json, other, converted, fragments, encode, "
     "value): step_json for the writer's JSON text, each message's dict as an "
     "orjson.Fragment of its text (see _cstep.c)."},
    {"untangle", untangle, METH_O,
     "untangle(items): _untangle.untangle (see _cuntangle.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "assay.tracing._speedups",
    "The compiled part of a traced call (see _speedups.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    if (Mapping == NULL) {
        PyObject *abc = PyImport_ImportModule("collections.abc");
        if (abc == NULL)
            return NULL;
        Mapping = PyObject_GetAttrString(abc, "Mapping");
        Py_DECREF(abc);
        if (Mapping == NULL)
            return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && add_call(m) < 0)
        Py_CLEAR(m);
    return m;
}
