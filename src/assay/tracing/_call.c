/* assay.tracing._speedups.Call: the body of a sync @traceable wrapper, in C.
 *
 * With the run core in C (_speedups.c), what a traced call still cost its caller was the
 * Python around it: the on/off check, the inputs dict, _Options.start, the context variable
 * set and reset, the end; five Python-level calls (~1.4 us). A Call does those steps in one C
 * call, reading the context variables and _Config's slots directly, and calls back into
 * Python only where Python decides: the environment switch, options with per-run settings or
 * hooks (_Options.start / .outputs), the writer's queue (RunWriter._put / .patch), and the
 * run's failure (_traceable._fail).
 *
 * The Python wrapper it mirrors is _traceable._wrap_sync's (used when this module is not built
 * or ASSAY_PURE_PYTHON is set); tests run both and compare the runs they store. */
#include "_speedups.h"

/* _Config's slots, in this order (see configure). */
enum { C_ENABLED, C_CLIENT, C_PROJECT, C_META, C_TAGS, C_AT_RUN, C_WRITER, N_CFG };
static const char *cfg_names[N_CFG] = {
    "enabled", "client", "project_name", "metadata", "tags", "at_run", "writer",
};
static Py_ssize_t cfg_offsets[N_CFG];
static PyTypeObject *cfg_type = NULL;
static PyObject *run_var, *cfg_var, *env_enabled, *env_project, *fail_fn, *queued;
static PyObject *open_default_fn; /* _traceable._open_default */
static int default_opened;        /* it ran: the process's default client exists */
static PyObject *step_runs, *innermost; /* _context.STEP_RUNS and innermost */
static PyObject *str_start, *str_outputs, *str_put, *str_patch, *str_get_writer;

#define CFG_SLOT(cfg, i) (*(PyObject **)((char *)(cfg) + cfg_offsets[i]))

static inline PyObject *cfg_get(PyObject *cfg, int i) {
    PyObject *v = CFG_SLOT(cfg, i);
    return v != NULL ? v : Py_None;
}

PyObject *configure(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10 || !PyType_Check(args[0]) || !PyList_Check(args[7])) {
        PyErr_SetString(PyExc_TypeError, "configure(_Config, run_var, cfg_var, env_enabled, "
                                         "env_project, fail, QUEUED, STEP_RUNS, innermost, "
                                         "open_default)");
        return NULL;
    }
    Py_ssize_t found[N_CFG];
    for (int i = 0; i < N_CFG; i++)
        if ((found[i] = slot_offset(args[0], cfg_names[i])) < 0)
            return NULL;
    memcpy(cfg_offsets, found, sizeof(found));
    Py_XSETREF(cfg_type, (PyTypeObject *)Py_NewRef(args[0]));
    Py_XSETREF(run_var, Py_NewRef(args[1]));
    Py_XSETREF(cfg_var, Py_NewRef(args[2]));
    Py_XSETREF(env_enabled, Py_NewRef(args[3]));
    Py_XSETREF(env_project, Py_NewRef(args[4]));
    Py_XSETREF(fail_fn, Py_NewRef(args[5]));
    Py_XSETREF(queued, Py_NewRef(args[6]));
    Py_XSETREF(step_runs, Py_NewRef(args[7]));
    Py_XSETREF(innermost, Py_NewRef(args[8]));
    Py_XSETREF(open_default_fn, Py_NewRef(args[9]));
    Py_RETURN_NONE;
}

typedef struct {
    PyObject_HEAD
    PyObject *fn;      /* the traced function */
    PyObject *opts;    /* its _Options */
    PyObject *build;   /* _input_builder(fn): the inputs of any call */
    PyObject *names;   /* the positional parameters' names, or NULL: inputs made here */
    Py_ssize_t drop;   /* leading arguments left out of the inputs (self / cls) */
    PyObject *name, *kind;
    int forced;        /* the options' enabled: -1 None, 0 False, 1 True */
    int plain;         /* no per-run settings, no process_inputs: runs made here */
    int hook;          /* process_outputs set: outputs made by _Options.outputs */
    vectorcallfunc vectorcall;
} Call;

/* Whether a call here is traced (_traceable._is_on); -1 on error. */
static int is_on(Call *c, PyObject *parent, PyObject *cfg) {
    if (c->forced >= 0)
        return c->forced;
    if (cfg != Py_None) {
        PyObject *enabled = cfg_get(cfg, C_ENABLED);
        if (enabled != Py_None && cfg_get(cfg, C_AT_RUN) == parent)
            return PyObject_IsTrue(enabled);
    }
    if (parent != Py_None)
        return 1;
    PyObject *r = PyObject_CallNoArgs(env_enabled);
    if (r == NULL)
        return -1;
    int on = PyObject_IsTrue(r);
    Py_DECREF(r);
    return on;
}

/* The inputs of a call: here for positional arguments matching the parameters, else build(). */
static PyObject *inputs_of(Call *c, PyObject *args, PyObject *kwargs) {
    Py_ssize_t n = c->names != NULL ? PyTuple_GET_SIZE(c->names) : -1;
    if (n < 0 || PyDict_GET_SIZE(kwargs) != 0 || PyTuple_GET_SIZE(args) != n + c->drop)
        return PyObject_CallFunctionObjArgs(c->build, args, kwargs, NULL);
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyDict_SetItem(d, PyTuple_GET_ITEM(c->names, i),
                           PyTuple_GET_ITEM(args, i + c->drop)) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    return d;
}

/* The run a plain traced call starts (_Options.start's fast paths), queued to its writer. */
static PyObject *start_plain(Call *c, PyObject *parent, PyObject *cfg, PyObject *inputs) {
    PyObject *run, *writer;
    if (parent != Py_None) {
        run = make_child(parent, c->name, c->kind, inputs);
        if (run == NULL)
            return NULL;
        writer = Py_NewRef(get(run, S_WRITER));
    } else {
        PyObject *client = Py_None, *project = cfg != Py_None ? cfg_get(cfg, C_PROJECT) : Py_None;
        int named = PyObject_IsTrue(project);
        if (named < 0)
            return NULL;
        project = named ? Py_NewRef(project) : PyObject_CallNoArgs(env_project);
        if (project == NULL)
            return NULL;
        if (cfg != Py_None)
            client = cfg_get(cfg, C_CLIENT);
        if (client == Py_None && !default_opened) {
            /* the default client opened (its store created) before the run starts */
            PyObject *r = PyObject_CallNoArgs(open_default_fn);
            if (r == NULL) {
                Py_DECREF(project);
                return NULL;
            }
            Py_DECREF(r);
            default_opened = 1;
        }
        PyObject *argv[8] = {c->name, c->kind, inputs, client, Py_None, project, Py_None, Py_None};
        run = make_root(argv);
        Py_DECREF(project);
        if (run == NULL)
            return NULL;
        writer = Py_NewRef(cfg != Py_None ? cfg_get(cfg, C_WRITER) : Py_None);
        if (writer == Py_None && cfg != Py_None) { /* the context's client's, looked up once */
            Py_DECREF(writer);
            writer = PyObject_CallMethodNoArgs(run, str_get_writer);
            if (writer == NULL) {
                Py_DECREF(run);
                return NULL;
            }
            if (client != Py_None) /* (the default client may change) */
                Py_XSETREF(CFG_SLOT(cfg, C_WRITER), Py_NewRef(writer));
        }
        Py_XSETREF(SLOT(run, S_WRITER), Py_NewRef(writer));
    }
    if (writer == Py_None) {
        Py_DECREF(writer);
        writer = PyObject_CallMethodNoArgs(run, str_get_writer);
        if (writer == NULL) {
            Py_DECREF(run);
            return NULL;
        }
    }
    Py_XSETREF(SLOT(run, S_SENT), Py_NewRef(queued)); /* writer.post(run), inlined */
    PyObject *r = PyObject_CallMethodOneArg(writer, str_put, run);
    Py_DECREF(writer);
    if (r == NULL) {
        Py_DECREF(run);
        return NULL;
    }
    Py_DECREF(r);
    return run;
}

/* The run a traced call starts: here when plain, else by _Options.start. */
static PyObject *start(Call *c, PyObject *parent, PyObject *cfg, PyObject *inputs) {
    int plain = c->plain && (parent == Py_None || PyObject_TypeCheck(parent, run_type));
    if (plain && cfg != Py_None) {
        int t = PyObject_IsTrue(cfg_get(cfg, C_META));
        if (t == 0)
            t = PyObject_IsTrue(cfg_get(cfg, C_TAGS));
        if (t < 0)
            return NULL;
        plain = !t;
    }
    if (plain)
        return start_plain(c, parent, cfg, inputs);
    return PyObject_CallMethodObjArgs(c->opts, str_start, parent, cfg, inputs, NULL);
}

/* The end of a call that raised: the run records the exception, which propagates as it was. */
static void failed(PyObject *run, PyObject *token) {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (tb != NULL)
        PyException_SetTraceback(exc, tb);
#endif
    if (PyContextVar_Reset(run_var, token) < 0)
        PyErr_WriteUnraisable(run_var);
    PyObject *r = PyObject_CallFunctionObjArgs(fail_fn, run, exc, NULL);
    if (r == NULL) /* _fail catches Exception; a KeyboardInterrupt there loses to the call's */
        PyErr_WriteUnraisable(fail_fn);
    Py_XDECREF(r);
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(type, exc, tb);
#endif
}

/* Whether _context.innermost must be asked for the parent: 1 when a lookup of STEP_RUNS has
 * no gate or its gate (a framework's context variable) holds something here, 0 when none does
 * (no framework step running: the usual case, no Python call), -1 on error. */
static int steps_running(void) {
    /* (the list's size read at each turn and the pair held: a gate's value may run Python
     * code in its truth test, during which another thread may change the list) */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(step_runs); i++) {
        PyObject *item = PyList_GET_ITEM(step_runs, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2)
            return 1; /* (not a (gate, lookup) pair: innermost says what is wrong) */
        PyObject *gate = PyTuple_GET_ITEM(item, 0), *value;
        if (gate == Py_None || !PyContextVar_CheckExact(gate))
            return 1;
        Py_INCREF(item);
        int got = PyContextVar_Get(gate, Py_None, &value);
        Py_DECREF(item);
        if (got < 0)
            return -1;
        int held = value == Py_None ? 0 : PyObject_IsTrue(value);
        Py_DECREF(value);
        if (held != 0)
            return held;
    }
    return 0;
}

/* call(args, kwargs): fn(*args, **kwargs), traced as _wrap_sync's wrapper traces it. */
static PyObject *call_vectorcall(PyObject *self, PyObject *const *argv, size_t nargsf,
                                 PyObject *kwnames) {
    Call *c = (Call *)self;
    if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL || !PyTuple_Check(argv[0])
            || !PyDict_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "Call(args: tuple, kwargs: dict)");
        return NULL;
    }
    if (run_var == NULL || run_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "assay.tracing._speedups is not configured");
        return NULL;
    }
    PyObject *args = argv[0], *kwargs = argv[1], *parent, *cfg, *run = NULL, *result = NULL;
    if (PyContextVar_Get(run_var, Py_None, &parent) < 0)
        return NULL;
    int ask = steps_running();
    if (ask != 0) { /* a framework's step may be running here: its run may be the parent */
        PyObject *inner = ask > 0 ? PyObject_CallOneArg(innermost, parent) : NULL;
        Py_DECREF(parent);
        if (inner == NULL)
            return NULL;
        parent = inner;
    }
    if (PyContextVar_Get(cfg_var, Py_None, &cfg) < 0) {
        Py_DECREF(parent);
        return NULL;
    }
    if (cfg != Py_None && !PyObject_TypeCheck(cfg, cfg_type)) {
        PyErr_SetString(PyExc_TypeError, "the tracing context holds something not a _Config");
        goto done;
    }
    int on = is_on(c, parent, cfg);
    if (on <= 0) {
        if (on == 0)
            result = PyObject_Call(c->fn, args, kwargs);
        goto done;
    }
    PyObject *inputs = inputs_of(c, args, kwargs);
    if (inputs == NULL)
        goto done;
    run = start(c, parent, cfg, inputs);
    Py_DECREF(inputs);
    if (run == NULL)
        goto done;
    PyObject *token = PyContextVar_Set(run_var, run);
    if (token == NULL)
        goto done;
    result = PyObject_Call(c->fn, args, kwargs);
    if (result == NULL) {
        failed(run, token);
        Py_DECREF(token);
        goto done;
    }
    int reset = PyContextVar_Reset(run_var, token);
    Py_DECREF(token);
    PyObject *outputs = reset < 0 ? NULL
                        : c->hook ? PyObject_CallMethodOneArg(c->opts, str_outputs, result)
                        : Py_NewRef(result);
    PyObject *sent = outputs != NULL ? end_run(run, outputs) : NULL;
    Py_XDECREF(outputs);
    int same = sent != NULL ? PyObject_RichCompareBool(sent, queued, Py_EQ) : -1;
    Py_XDECREF(sent);
    if (same == 0) { /* the writer took the post before the end: queue the end (run.patch) */
        PyObject *r = PyObject_CallMethodOneArg(get(run, S_WRITER), str_patch, run);
        same = r != NULL ? 1 : -1;
        Py_XDECREF(r);
    }
    if (same < 0)
        Py_CLEAR(result);
done:
    Py_XDECREF(run);
    Py_DECREF(parent);
    Py_DECREF(cfg);
    return result;
}

static PyObject *call_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *fn, *opts, *build, *names;
    Py_ssize_t drop;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Call() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOOOn:Call", &fn, &opts, &build, &names, &drop))
        return NULL;
    if (!PyCallable_Check(fn) || !PyCallable_Check(build)) {
        PyErr_SetString(PyExc_TypeError, "Call(fn, options, build, names, drop): fn and build "
                                         "must be callable");
        return NULL;
    }
    if (names != Py_None && !PyTuple_Check(names)) {
        PyErr_SetString(PyExc_TypeError, "Call(): names must be a tuple or None");
        return NULL;
    }
    if (drop < 0 || drop > 1) {
        PyErr_SetString(PyExc_ValueError, "Call(): drop must be 0 or 1");
        return NULL;
    }
    PyObject *name = PyObject_GetAttrString(opts, "name");
    PyObject *kind = PyObject_GetAttrString(opts, "run_type");
    PyObject *enabled = PyObject_GetAttrString(opts, "enabled");
    PyObject *plain = PyObject_GetAttrString(opts, "plain");
    PyObject *pin = PyObject_GetAttrString(opts, "process_inputs");
    PyObject *pout = PyObject_GetAttrString(opts, "process_outputs");
    Call *c = NULL;
    if (name && kind && enabled && plain && pin && pout) {
        int is_plain = PyObject_IsTrue(plain);
        int forced = enabled == Py_None ? -1 : PyObject_IsTrue(enabled);
        if (is_plain >= 0 && !(forced < 0 && enabled != Py_None)
                && (c = (Call *)type->tp_alloc(type, 0)) != NULL) {
            c->fn = Py_NewRef(fn);
            c->opts = Py_NewRef(opts);
            c->build = Py_NewRef(build);
            c->names = names == Py_None ? NULL : Py_NewRef(names);
            c->drop = drop;
            c->name = Py_NewRef(name);
            c->kind = Py_NewRef(kind);
            c->forced = forced;
            c->plain = is_plain && pin == Py_None;
            c->hook = pout != Py_None;
            c->vectorcall = call_vectorcall;
        }
    }
    Py_XDECREF(name);
    Py_XDECREF(kind);
    Py_XDECREF(enabled);
    Py_XDECREF(plain);
    Py_XDECREF(pin);
    Py_XDECREF(pout);
    return (PyObject *)c;
}

static int call_traverse(Call *c, visitproc visit, void *arg) {
    Py_VISIT(c->fn);
    Py_VISIT(c->opts);
    Py_VISIT(c->build);
    Py_VISIT(c->names);
    Py_VISIT(c->name);
    Py_VISIT(c->kind);
    return 0;
}

static int call_clear(Call *c) {
    Py_CLEAR(c->fn);
    Py_CLEAR(c->opts);
    Py_CLEAR(c->build);
    Py_CLEAR(c->names);
    Py_CLEAR(c->name);
    Py_CLEAR(c->kind);
    return 0;
}

static void call_dealloc(Call *c) {
    PyObject_GC_UnTrack(c);
    call_clear(c);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* Pickled as what made it (Ray sends traced targets to its workers by value). */
static PyObject *call_reduce(PyObject *self, PyObject *unused) {
    Call *c = (Call *)self;
    return Py_BuildValue("O(OOOOn)", Py_TYPE(self), c->fn, c->opts, c->build,
                         c->names != NULL ? c->names : Py_None, c->drop);
}

static PyMethodDef call_methods[] = {
    {"__reduce__", call_reduce, METH_NOARGS, "Pickled as Call(fn, options, build, names, drop)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "assay.tracing._speedups.Call",
    .tp_doc = "Call(fn, options, build, names, drop): call(args, kwargs) runs fn traced, as the "
              "sync @traceable wrapper does (see _call.c).",
    .tp_basicsize = sizeof(Call),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = call_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Call, vectorcall),
    .tp_traverse = (traverseproc)call_traverse,
    .tp_clear = (inquiry)call_clear,
    .tp_dealloc = (destructor)call_dealloc,
    .tp_methods = call_methods,
};

int add_call(PyObject *module) {
    if ((str_start = PyUnicode_InternFromString("start")) == NULL
            || (str_outputs = PyUnicode_InternFromString("outputs")) == NULL
            || (str_put = PyUnicode_InternFromString("_put")) == NULL
            || (str_patch = PyUnicode_InternFromString("patch")) == NULL
            || (str_get_writer = PyUnicode_InternFromString("_get_writer")) == NULL
            || PyType_Ready(&CallType) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "Call", (PyObject *)&CallType);
}
