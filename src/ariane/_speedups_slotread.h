/* Reading an instance's __slots__ attribute where its member descriptor says (#included by
 * _speedups.c before _speedups_trace.h, whose hooks read a consumed message's properties, topic
 * and reconsume_times this way).
 *
 *   sr_get(obj, name, cache) -> a new reference, or NULL with the exception getattr raises
 *
 * How it works: PyObject_GetAttr on a slots dataclass looks the name up in the type's cache,
 * finds the member descriptor and calls it (~100 instructions). A cache (one per call site)
 * keeps the slot's offset for one type, keyed by the type's version tag, which changes whenever
 * an attribute of the type or of its bases is set or deleted; the slot is read when the type and
 * its version match, the type's getattro is the generic one (no __getattribute__ or __getattr__
 * of its own), the descriptor is a writable-or-not object member (T_OBJECT_EX: a data
 * descriptor, so the instance's __dict__, if any, cannot shadow it) and the slot is set.
 * Anything else is PyObject_GetAttr, which also raises AttributeError for an unset slot. */

#include "structmember.h" /* PyMemberDef, T_OBJECT_EX */

typedef struct {
    PyTypeObject *tp; /* borrowed: cleared when the tag moves (a type gets a new tag on any change,
                       * and a freed type's tag is never reused for another) */
    unsigned int version;
    Py_ssize_t at; /* the slot's offset; 0: none (the generic path) */
} sr_cache;

static Py_ssize_t sr_offset(PyTypeObject *tp, PyObject *name) {
    PyObject *descr = _PyType_Lookup(tp, name); /* borrowed; may assign the version tag */
    PyMemberDef *m;
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type) ||
        tp->tp_getattro != PyObject_GenericGetAttr) {
        return 0;
    }
    m = ((PyMemberDescrObject *)descr)->d_member;
    return m->type == T_OBJECT_EX && m->offset > 0 ? m->offset : 0;
}

static PyObject *sr_get(PyObject *obj, PyObject *name, sr_cache *c) {
    PyTypeObject *tp = Py_TYPE(obj);
    PyObject *v;
    if (tp != c->tp || !(tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ||
        tp->tp_version_tag != c->version) {
        Py_ssize_t at = sr_offset(tp, name);
        c->tp = NULL;
        if (!(tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) { /* nothing to key the cache on */
            return PyObject_GetAttr(obj, name);
        }
        c->tp = tp;
        c->version = tp->tp_version_tag;
        c->at = at;
    }
    if (c->at > 0 && (v = *(PyObject **)((char *)obj + c->at)) != NULL) {
        return Py_NewRef(v);
    }
    return PyObject_GetAttr(obj, name);
}
