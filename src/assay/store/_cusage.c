/* assay.store._cencode.usage_columns: an llm run's usage columns, derived in C.
 *
 * The fold stores beside each llm run its tokens, costs and first token, derived by
 * _usage.derive_usage_us from the fields a sender gave. For the runs the server ingests (a root
 * and an llm child each, in the bench) that derivation was the largest part of the fold
 * process's Python: ~8 us an llm run (decoding its extra and events, then a few dozen dict
 * reads and calls), against ~2 us for the rest of its row, which C builds already. This does
 * the same reads in C and calls Python only for what it cannot do as well: decoding the JSON
 * text (_json.from_json_column), the price (_usage.price, genai-prices) and a time that is not
 * the usual text (_time.checked_micros).
 *
 * It takes only what it knows: a value of a type JSON does not make, a count or a cost that is
 * not a plain number, explicit top-level counts or costs, or any error along the way, and it
 * declines (None) with nothing changed; _fold_usage.usage_columns then derives the run in
 * Python as before. What it returns is what that appends to the row: (first token us, first
 * token latency, prompt, completion and total tokens, prompt, completion and total cost), the
 * same values as usage_columns_py (tests/store/test_fold_usage.py compares both paths on
 * generated runs). */
#include <Python.h>
#include <math.h>
#include <string.h>

#include "../_ctime.h"

static PyObject *from_column = NULL, *price_fn = NULL, *micros_fn = NULL;

enum {
    K_RUN_TYPE, K_EVENTS, K_OUTPUTS, K_EXTRA, K_METADATA, K_USAGE, K_LLM_OUTPUT, K_TOKEN_USAGE,
    K_INPUT_TOKENS, K_PROMPT_TOKENS, K_OUTPUT_TOKENS, K_COMPLETION_TOKENS, K_TOTAL_TOKENS,
    K_INPUT_COST, K_OUTPUT_COST, K_TOTAL_COST, K_PROMPT_COST, K_COMPLETION_COST,
    K_INVOCATION, K_LS_MODEL, K_MODEL, K_MODEL_NAME, K_LS_PROVIDER, K_DETAILS, K_CACHE_READ,
    K_CACHE_CREATION, K_EPHEMERAL_5M, K_EPHEMERAL_1H, K_NAME, K_TIME, K_ALL
};
static const char *key_names[K_ALL] = {
    "run_type", "events", "outputs", "extra", "metadata", "usage_metadata", "llm_output",
    "token_usage", "input_tokens", "prompt_tokens", "output_tokens", "completion_tokens",
    "total_tokens", "input_cost", "output_cost", "total_cost", "prompt_cost", "completion_cost",
    "invocation_params", "ls_model_name", "model", "model_name", "ls_provider",
    "input_token_details", "cache_read", "cache_creation", "ephemeral_5m_input_tokens",
    "ephemeral_1h_input_tokens", "name", "time"};
static PyObject *keys[K_ALL];
static PyObject *q_usage = NULL, *q_llm_output = NULL; /* the keys as JSON text names them */

#define MAX_COUNT 1000000000000LL /* _usage._MAX_COUNT */
#define MAX_COST 1e12             /* _usage._MAX_COST */
#define DECLINE (-2)

/* Whether x is a mapping to _usage._is_map: 1, 0, or DECLINE for a type JSON does not make
 * (it might be a Mapping: the Python path asks). */
static int is_map(PyObject *x) {
    if (x == NULL || x == Py_None)
        return 0;
    if (PyDict_Check(x))
        return 1;
    if (PyList_CheckExact(x) || PyUnicode_CheckExact(x) || PyLong_CheckExact(x)
        || PyFloat_CheckExact(x) || PyBool_Check(x))
        return 0;
    return DECLINE;
}

/* d.get(key) for a dict d (NULL: absent or d is NULL); an error is left set. */
static PyObject *get(PyObject *d, int key) {
    return d == NULL ? NULL : PyDict_GetItemWithError(d, keys[key]);
}

/* _usage._int: a token count, *out set and 1; 0 for None (not a count); DECLINE otherwise. */
static int count(PyObject *v, long long *out) {
    if (v == NULL || v == Py_None || PyBool_Check(v))
        return 0;
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (n == -1 && PyErr_Occurred())
            return DECLINE;
        if (overflow || n < 0 || n >= MAX_COUNT)
            return 0;
        *out = n;
        return 1;
    }
    if (PyFloat_CheckExact(v)) {
        double t = trunc(PyFloat_AS_DOUBLE(v)); /* int(n) */
        if (!isfinite(t) || t < 0 || t >= (double)MAX_COUNT)
            return 0;
        *out = (long long)t;
        return 1;
    }
    return DECLINE; /* a string or another number type: float() decides, in Python */
}

/* _usage._text: a non-empty str, else NULL */
static PyObject *text(PyObject *v) {
    return v != NULL && PyUnicode_CheckExact(v) && PyUnicode_GET_LENGTH(v) > 0 ? v : NULL;
}

/* Whether a JSON text may hold usage where derive_usage reads it: "usage_metadata" as a key,
 * or (``outputs``) "llm_output" too (_fold_usage.names_usage); 1, 0, or -1 on an error. One
 * test for this file's views and _cencode.c's admitted_row, which marks such a run's row. */
int usage_named(PyObject *text, int outputs) {
    int named = PyUnicode_Contains(text, q_usage);
    if (named == 0 && outputs)
        named = PyUnicode_Contains(text, q_llm_output);
    return named;
}

/* the view _fold_usage.usage_view makes of an admitted post's JSON text: *out owned (NULL for
 * None); 0, or DECLINE */
static int decoded(PyObject *value, int outputs, PyObject **out) {
    *out = NULL;
    if (value == NULL || value == Py_None)
        return 0;
    if (!PyUnicode_CheckExact(value))
        return DECLINE;
    if (outputs) { /* decoded only where its text names usage */
        int named = usage_named(value, 1);
        if (named < 0)
            return DECLINE;
        if (!named)
            return 0; /* what derive_usage finds in it: nothing */
    }
    *out = PyObject_CallOneArg(from_column, value);
    return *out == NULL ? DECLINE : 0;
}

/* _usage._first_token's microseconds: 1 with *out set, 0 when there is none (or a time of a
 * new_token event is refused: the Python returns none then too), DECLINE. */
static int first_token(PyObject *events, long long *out) {
    if (events == NULL || !PyList_Check(events))
        return 0;
    int found = 0;
    long long first = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *e = PyList_GET_ITEM(events, i);
        int m = is_map(e);
        if (m == DECLINE)
            return DECLINE;
        if (!m)
            continue;
        PyObject *name = get(e, K_NAME);
        if (name == NULL) {
            if (PyErr_Occurred())
                return DECLINE;
            continue;
        }
        if (!PyUnicode_CheckExact(name)) {
            if (is_map(name) == DECLINE)
                return DECLINE; /* its == might say yes */
            continue;
        }
        if (PyUnicode_CompareWithASCIIString(name, "new_token") != 0)
            continue;
        PyObject *t = get(e, K_TIME);
        if (t == NULL || t == Py_None) {
            if (PyErr_Occurred())
                return DECLINE;
            continue;
        }
        long long us;
        if (!(PyUnicode_CheckExact(t) && PyUnicode_IS_ASCII(t)
              && iso_micros((const char *)PyUnicode_1BYTE_DATA(t), PyUnicode_GET_LENGTH(t), &us))) {
            PyObject *r = PyObject_CallOneArg(micros_fn, t);
            if (r == NULL) {
                if (PyErr_ExceptionMatches(PyExc_TypeError)
                    || PyErr_ExceptionMatches(PyExc_ValueError)) {
                    PyErr_Clear();
                    return 0;
                }
                return DECLINE;
            }
            int overflow = 0;
            us = 0;
            if (r != Py_None) { /* checked_micros(t) or 0 */
                if (!PyLong_CheckExact(r)) {
                    Py_DECREF(r);
                    return DECLINE;
                }
                us = PyLong_AsLongLongAndOverflow(r, &overflow);
            }
            Py_DECREF(r);
            if (overflow || (us == -1 && PyErr_Occurred()))
                return DECLINE;
        }
        if (!found || us < first) {
            found = 1;
            first = us;
        }
    }
    *out = first;
    return found;
}

/* A count or None, as a new reference */
static PyObject *count_obj(int have, long long n) {
    if (have)
        return PyLong_FromLongLong(n);
    Py_RETURN_NONE;
}

/* The usage columns of ``run``, from its views of outputs, extra and events; NULL on an error
 * (which declines), Py_None (new) to decline. */
static PyObject *derive(PyObject *run, PyObject *outputs, PyObject *extra, PyObject *events,
                        PyObject *start) {
    /* explicit top-level counts or costs (_usage._EXPLICIT): rare, converted by the Python */
    static const int explicit[6] = {K_PROMPT_TOKENS, K_COMPLETION_TOKENS, K_TOTAL_TOKENS,
                                    K_PROMPT_COST, K_COMPLETION_COST, K_TOTAL_COST};
    for (int i = 0; i < 6; i++) {
        PyObject *v = get(run, explicit[i]);
        if (v != NULL && v != Py_None)
            Py_RETURN_NONE;
        if (v == NULL && PyErr_Occurred())
            return NULL;
    }
    PyObject *run_type = get(run, K_RUN_TYPE);
    if (run_type == NULL && PyErr_Occurred())
        return NULL;
    int llm = run_type != NULL && PyUnicode_CheckExact(run_type)
              && PyUnicode_CompareWithASCIIString(run_type, "llm") == 0;
    if (run_type != NULL && !PyUnicode_CheckExact(run_type) && is_map(run_type) == DECLINE)
        Py_RETURN_NONE;
    int em = is_map(extra), om = is_map(outputs);
    if (em == DECLINE || om == DECLINE)
        Py_RETURN_NONE;
    PyObject *meta = em ? get(extra, K_METADATA) : NULL;
    int mm = is_map(meta);
    if (mm == DECLINE || PyErr_Occurred())
        return NULL;
    /* _usage_map: extra.metadata, outputs, the run itself; then outputs.llm_output */
    PyObject *usage = NULL, *holders[3] = {mm ? meta : NULL, om ? outputs : NULL, run};
    for (int h = 0; h < 3 && usage == NULL; h++) {
        PyObject *found = get(holders[h], K_USAGE);
        int fm = is_map(found);
        if (fm == DECLINE || PyErr_Occurred())
            return NULL;
        if (fm)
            usage = found;
    }
    PyObject *token_usage = NULL;
    if (usage == NULL && om) {
        PyObject *lo = get(outputs, K_LLM_OUTPUT);
        int lm = is_map(lo);
        if (lm == DECLINE || PyErr_Occurred())
            return NULL;
        if (lm) {
            PyObject *tu = get(lo, K_TOKEN_USAGE);
            int tm = is_map(tu);
            if (tm == DECLINE || PyErr_Occurred())
                return NULL;
            if (tm)
                token_usage = tu;
        }
    }
    int events_true = 0;
    if (events != NULL && events != Py_None) {
        events_true = PyObject_IsTrue(events);
        if (events_true < 0)
            return NULL;
    }
    int in_run = PyDict_Contains(run, keys[K_USAGE]);
    if (in_run < 0)
        return NULL;
    /* _has_no_usage */
    if (!llm && !events_true && !in_run && usage == NULL && token_usage == NULL) {
        int named = 0;
        if (om) {
            named = PyDict_Contains(outputs, keys[K_USAGE]);
            if (named == 0)
                named = PyDict_Contains(outputs, keys[K_LLM_OUTPUT]);
        }
        if (!named && mm)
            named = PyDict_Contains(meta, keys[K_USAGE]);
        if (named < 0)
            return NULL;
        if (!named)
            return PyTuple_Pack(8, Py_None, Py_None, Py_None, Py_None, Py_None, Py_None,
                                Py_None, Py_None);
    }
    long long p = 0, c = 0, total = 0;
    int hp = 0, hc = 0, ht = 0;
    if (token_usage != NULL) { /* {"input_tokens": tu.get("prompt_tokens"), ...} */
        if ((hp = count(get(token_usage, K_PROMPT_TOKENS), &p)) == DECLINE
            || (hc = count(get(token_usage, K_COMPLETION_TOKENS), &c)) == DECLINE
            || (ht = count(get(token_usage, K_TOTAL_TOKENS), &total)) == DECLINE
            || PyErr_Occurred())
            return NULL;
    } else if (usage != NULL && PyDict_GET_SIZE(usage) > 0) {
        for (int k = K_INPUT_COST; k <= K_TOTAL_COST; k++) { /* explicit costs: rare */
            PyObject *v = get(usage, k);
            if (v != NULL && v != Py_None)
                Py_RETURN_NONE;
        }
        PyObject *v = get(usage, K_INPUT_TOKENS);
        if (v == NULL && !PyErr_Occurred())
            v = get(usage, K_PROMPT_TOKENS);
        PyObject *w = PyErr_Occurred() ? NULL : get(usage, K_OUTPUT_TOKENS);
        if (w == NULL && !PyErr_Occurred())
            w = get(usage, K_COMPLETION_TOKENS);
        if (PyErr_Occurred() || (hp = count(v, &p)) == DECLINE || (hc = count(w, &c)) == DECLINE
            || (ht = count(get(usage, K_TOTAL_TOKENS), &total)) == DECLINE || PyErr_Occurred())
            return NULL;
    }
    if (!ht && (hp || hc)) {
        total = (hp ? p : 0) + (hc ? c : 0);
        ht = total < MAX_COUNT;
    }
    PyObject *pc = NULL, *cc = NULL, *priced = NULL;
    if (((hp && p) || (hc && c)) && llm) {
        PyObject *m2 = mm ? meta : NULL, *inv = em ? get(extra, K_INVOCATION) : NULL;
        int im = is_map(inv);
        if (im == DECLINE || PyErr_Occurred())
            return NULL;
        if (!im)
            inv = NULL;
        PyObject *model = text(get(m2, K_LS_MODEL));
        if (model == NULL && !PyErr_Occurred())
            model = text(get(inv, K_MODEL));
        if (model == NULL && !PyErr_Occurred())
            model = text(get(inv, K_MODEL_NAME));
        PyObject *provider = PyErr_Occurred() ? NULL : text(get(m2, K_LS_PROVIDER));
        if (PyErr_Occurred())
            return NULL;
        /* _usage.cache_counts: reads, writes (the larger of the total and the split by
         * lifetime), the hour-long writes */
        long long cache[4] = {0, 0, 0, 0}; /* read, creation, 5m, 1h */
        PyObject *details = usage != NULL ? get(usage, K_DETAILS) : NULL;
        if (details == NULL && PyErr_Occurred())
            return NULL;
        if (details != NULL) {
            int truth = PyObject_IsTrue(details);
            if (truth < 0)
                return NULL;
            int dm = truth ? is_map(details) : 0;
            if (dm == DECLINE)
                Py_RETURN_NONE;
            for (int i = 0; dm && i < 4; i++) {
                int got = count(get(details, K_CACHE_READ + i), &cache[i]);
                if (got == DECLINE || PyErr_Occurred())
                    return NULL;
                if (!got)
                    cache[i] = 0;
            }
        }
        long long split = cache[2] + cache[3];
        priced = PyObject_CallFunction(price_fn, "OOLLLLL", provider ? provider : Py_None,
                                       model ? model : Py_None, hp ? p : 0LL, hc ? c : 0LL,
                                       cache[0], cache[1] > split ? cache[1] : split, cache[3]);
        if (priced == NULL)
            return NULL;
        if (priced != Py_None) {
            if (!PyTuple_CheckExact(priced) || PyTuple_GET_SIZE(priced) != 2) {
                Py_DECREF(priced);
                Py_RETURN_NONE;
            }
            pc = PyTuple_GET_ITEM(priced, 0);
            cc = PyTuple_GET_ITEM(priced, 1);
        }
    }
    PyObject *tc = NULL;
    if ((pc != NULL && pc != Py_None) || (cc != NULL && cc != Py_None)) {
        double sum = 0.0;
        PyObject *parts[2] = {pc, cc};
        for (int i = 0; i < 2; i++) {
            PyObject *x = parts[i];
            if (x == NULL || x == Py_None)
                continue;
            if (!PyFloat_CheckExact(x)) { /* the prices are floats; anything else: Python */
                Py_DECREF(priced);
                Py_RETURN_NONE;
            }
            sum += PyFloat_AS_DOUBLE(x) != 0.0 ? PyFloat_AS_DOUBLE(x) : 0.0;
        }
        if (isfinite(sum) && fabs(sum) <= MAX_COST)
            tc = PyFloat_FromDouble(sum);
    }
    long long ft = 0;
    int hf = first_token(events, &ft);
    if (hf == DECLINE) {
        Py_XDECREF(priced);
        Py_XDECREF(tc);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *ft_obj = count_obj(hf, ft), *since = NULL;
    int start_true = start != Py_None ? PyObject_IsTrue(start) : 0;
    if (hf && start_true > 0)
        since = PyNumber_Subtract(ft_obj, start);
    else if (start_true >= 0)
        since = Py_NewRef(Py_None);
    PyObject *out = NULL;
    if (ft_obj != NULL && since != NULL)
        out = Py_BuildValue("(NNNNNOOO)", ft_obj, since, count_obj(hp, p), count_obj(hc, c),
                            count_obj(ht, total), pc ? pc : Py_None, cc ? cc : Py_None,
                            tc ? tc : Py_None);
    else {
        Py_XDECREF(ft_obj);
        Py_XDECREF(since);
    }
    Py_XDECREF(priced);
    Py_XDECREF(tc);
    return out;
}

/* usage_columns(run, texts, start) -> the 8 usage columns of the run's row, or None (see the
 * top). ``texts``: the run's outputs, extra and events are the JSON text the fold stores (an
 * admitted post), decoded as _fold_usage.usage_view does. */
PyObject *usage_columns(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 3 || !PyDict_Check(argv[0])) {
        PyErr_SetString(PyExc_TypeError, "usage_columns(run: dict, texts, start)");
        return NULL;
    }
    if (from_column == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "usage_columns before usage_setup");
        return NULL;
    }
    PyObject *run = argv[0], *start = argv[2];
    int texts = PyObject_IsTrue(argv[1]);
    if (texts < 0)
        return NULL;
    PyObject *raw[3] = {get(run, K_OUTPUTS), NULL, NULL};
    if (!PyErr_Occurred())
        raw[1] = get(run, K_EXTRA);
    if (!PyErr_Occurred())
        raw[2] = get(run, K_EVENTS);
    PyObject *own[3] = {NULL, NULL, NULL}, *out = NULL;
    if (PyErr_Occurred())
        goto decline;
    if (texts) {
        for (int i = 0; i < 3; i++)
            if (decoded(raw[i], i == 0, &own[i]) == DECLINE)
                goto decline;
        out = derive(run, own[0], own[1], own[2], start);
    } else {
        out = derive(run, raw[0], raw[1], raw[2], start);
    }
    if (out == NULL)
        goto decline;
    for (int i = 0; i < 3; i++)
        Py_XDECREF(own[i]);
    return out;
decline: /* the Python path derives it, and raises there what is to be raised */
    PyErr_Clear();
    for (int i = 0; i < 3; i++)
        Py_XDECREF(own[i]);
    Py_RETURN_NONE;
}

/* the keys and texts this file reads (at the module's import); -1 on an error */
int usage_init(void) {
    for (int k = 0; k < K_ALL; k++)
        if ((keys[k] = PyUnicode_InternFromString(key_names[k])) == NULL)
            return -1;
    if ((q_usage = PyUnicode_FromString("\"usage_metadata\"")) == NULL
        || (q_llm_output = PyUnicode_FromString("\"llm_output\"")) == NULL)
        return -1;
    return 0;
}

/* usage_setup(from_column, price, checked_micros): the Python this calls */
PyObject *usage_setup(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 3) {
        PyErr_SetString(PyExc_TypeError, "usage_setup(from_column, price, checked_micros)");
        return NULL;
    }
    Py_XSETREF(from_column, Py_NewRef(argv[0]));
    Py_XSETREF(price_fn, Py_NewRef(argv[1]));
    Py_XSETREF(micros_fn, Py_NewRef(argv[2]));
    Py_RETURN_NONE;
}
