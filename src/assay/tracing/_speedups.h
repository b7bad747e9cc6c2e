/* What the two parts of assay.tracing._speedups share: the run core (_speedups.c: runs, ids,
 * rows) and the traced call (_call.c: the sync @traceable wrapper's body). */
#ifndef ASSAY_SPEEDUPS_H
#define ASSAY_SPEEDUPS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* RunTree's slots the C code reads or writes, resolved by name by bind(). */
enum {
    S_ID, S_TRACE, S_PARENT_ID, S_PARENT, S_PARENT_DOTTED, S_DOTTED, S_NAME, S_RUN_TYPE,
    S_INPUTS, S_OUTPUTS, S_ERROR, S_START_US, S_END_US, S_META, S_TAGS, S_EVENTS, S_EXTRA,
    S_SESSION_NAME, S_SESSION_ID, S_REF, S_KIDS, S_WRITER, S_CLIENT, S_CLOSED, S_SENT, N_SLOTS
};
extern Py_ssize_t offsets[N_SLOTS];
extern PyTypeObject *run_type; /* the bound RunTree class, NULL until bind() */

#define SLOT(obj, i) (*(PyObject **)((char *)(obj) + offsets[i]))

/* A slot of a run, or None where it was never set (a borrowed reference). */
static inline PyObject *get(PyObject *run, int i) {
    PyObject *v = SLOT(run, i);
    return v != NULL ? v : Py_None;
}

/* The offset of slot `name` of class `cls`, or -1 with TypeError set. */
Py_ssize_t slot_offset(PyObject *cls, const char *name);
/* RunTree._fast_child / _fast_root / _close (new references, NULL on error); make_root's
 * args: name, run_type, inputs, client, session_id, session_name, metadata, reference id. */
PyObject *make_child(PyObject *parent, PyObject *name, PyObject *kind, PyObject *inputs);
PyObject *make_root(PyObject *const *args);
PyObject *end_run(PyObject *run, PyObject *result);

/* _cuntangle.c: _untangle.untangle (METH_O). */
PyObject *untangle(PyObject *self, PyObject *items);

/* _cstep.c: _langchain._step_json's walk (METH_FASTCALL). */
PyObject *step_json(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* _cstep.c: step_json with each message's dict as its JSON text (orjson.Fragment). */
PyObject *step_fragments(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* _call.c: the Call type and configure(), added to the module by PyInit__speedups. */
int add_call(PyObject *module);
PyObject *configure(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
