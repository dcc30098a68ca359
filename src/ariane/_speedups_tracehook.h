/* The consume service's trace hooks as one compiled call each (#included by _speedups.c after
 * _speedups_trace.h, whose sub_before and sub_after they call); twins of
 * ariane.client._trace_records.hook_before_py and hook_after_py.
 *
 *   trace_hook_before(owner, trace_topic, now_ns, counter, default_region, dispatcher, queue,
 *                     append, attrs, stats, msgs)
 *       -> the open pair (queued), None, or what owner.before(msgs) answers
 *   trace_hook_after(owner, now_ns, usual, stats, pair, count) -> None
 *
 * How it works: ConsumeTracer binds the first arguments (functools.partial), so the consume
 * service makes one call per hook and no Python frame runs per delivery: before took three
 * (ConsumeTracer.before, AsyncTraceDispatcher._enqueue, ConsumeTracer.after). The queueing is
 * _enqueue's, step for step: the queue length against dispatcher._room (full or closed:
 * dispatcher._drop(pair)), the append, stats.appended += 1, and the wake-up when the length
 * reaches dispatcher._wake_at (which becomes _NEVER before dispatcher._notify() runs). The
 * partial binds the queue's append, the dispatcher's stats and its attributes' dict (attrs:
 * vars(dispatcher); _room and _wake_at are plain instance attributes), so these are dict
 * lookups and calls, not attribute lookups through the type (~150 instructions each). What
 * these hooks do not handle goes to the Python methods: a call of several messages or values
 * that are not exact str/dict (owner.before), an end the worker took first
 * (owner.after_late), and any Exception (owner.hook_failed logs it: nothing reaches the
 * business path, as in ConsumeTracer.before/after).
 */

#include "structmember.h" /* T_OBJECT_EX, READONLY: the stats' slot */

static PyObject *TH_ROOM, *TH_WAKE_AT, *TH_APPENDED, *TH_DROP, *TH_NOTIFY,
    *TH_BEFORE, *TH_LATE, *TH_FAILED, *TH_NEVER, *TH_ONE, *TH_SUBBEFORE, *TH_SUBAFTER;

static int th_init(void) {
    if (TH_SUBAFTER != NULL) {
        return 0;
    }
    TH_ROOM = PyUnicode_InternFromString("_room");
    TH_WAKE_AT = PyUnicode_InternFromString("_wake_at");
    TH_APPENDED = PyUnicode_InternFromString("appended");
    TH_DROP = PyUnicode_InternFromString("_drop");
    TH_NOTIFY = PyUnicode_InternFromString("_notify");
        TH_BEFORE = PyUnicode_InternFromString("before");
    TH_LATE = PyUnicode_InternFromString("after_late");
    TH_FAILED = PyUnicode_InternFromString("hook_failed");
    TH_NEVER = PyLong_FromLongLong(1LL << 62); /* _trace_dispatch._NEVER */
    TH_ONE = PyLong_FromLong(1);
    TH_SUBBEFORE = PyUnicode_InternFromString("SubBefore");
    if (TH_ROOM == NULL || TH_WAKE_AT == NULL || TH_APPENDED == NULL ||
        TH_DROP == NULL || TH_NOTIFY == NULL || TH_BEFORE == NULL ||
        TH_LATE == NULL || TH_FAILED == NULL || TH_NEVER == NULL || TH_ONE == NULL ||
        TH_SUBBEFORE == NULL) {
        return -1;
    }
    TH_SUBAFTER = PyUnicode_InternFromString("SubAfter");
    return TH_SUBAFTER == NULL ? -1 : 0;
}

/* An Exception raised in a hook: owner.hook_failed(what, exc) logs it, None. Anything else
 * (KeyboardInterrupt...) propagates, as past the Python hooks' `except Exception`. */
static PyObject *th_failed(PyObject *owner, PyObject *what) {
    PyObject *type, *value, *tb, *out;
    if (!PyErr_ExceptionMatches(PyExc_Exception)) {
        return NULL;
    }
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) {
        PyException_SetTraceback(value, tb);
    }
    out = PyObject_CallMethodObjArgs(owner, TH_FAILED, what, value != NULL ? value : Py_None,
                                     NULL);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (out == NULL) { /* the logging failed: nothing more to do, never into the business path */
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            return NULL;
        }
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return out;
}

/* attrs[name] as a Py_ssize_t (-1 with an error set when absent or not an int that fits). */
static int th_size_item(PyObject *attrs, PyObject *name, Py_ssize_t *out) {
    PyObject *v = PyDict_GetItemWithError(attrs, name); /* borrowed */
    if (v == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetObject(PyExc_AttributeError, name);
        }
        return -1;
    }
    *out = PyLong_AsSsize_t(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* stats.appended += 1. TraceStats is a slots dataclass: its `appended` slot is read and written
 * where its member descriptor says (the offset found once per type version; ~100 instructions
 * instead of ~570 for the generic getattr, add, setattr). Any other shape (no such slot, a
 * read-only or other kind of member, an unset slot, a type whose attributes changed since) takes
 * the generic path. */
static PyTypeObject *TH_STATS_TYPE;
static unsigned int TH_STATS_VERSION;
static Py_ssize_t TH_APPENDED_AT = -1;

static Py_ssize_t th_appended_at(PyTypeObject *tp) {
    PyObject *descr;
    PyMemberDef *m;
    if (tp == TH_STATS_TYPE && (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) &&
        tp->tp_version_tag == TH_STATS_VERSION) {
        return TH_APPENDED_AT;
    }
    descr = PyObject_GetAttr((PyObject *)tp, TH_APPENDED);
    if (descr == NULL) {
        PyErr_Clear();
        return -1;
    }
    TH_APPENDED_AT = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY) && m->offset > 0) {
            TH_APPENDED_AT = m->offset;
        }
    }
    Py_DECREF(descr);
    if (!(tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) { /* nothing to key a cache on */
        Py_CLEAR(TH_STATS_TYPE);
        return -1;
    }
    Py_XSETREF(TH_STATS_TYPE, (PyTypeObject *)Py_NewRef(tp));
    TH_STATS_VERSION = tp->tp_version_tag;
    return TH_APPENDED_AT;
}

static int th_count(PyObject *stats) {
    PyObject *was, *now, **slot;
    Py_ssize_t at = th_appended_at(Py_TYPE(stats));
    int rc = -1;
    if (at > 0 && *(slot = (PyObject **)((char *)stats + at)) != NULL) {
        if ((now = PyNumber_Add(*slot, TH_ONE)) == NULL) {
            return -1;
        }
        was = *slot;
        *slot = now;
        Py_DECREF(was);
        return 0;
    }
    if ((was = PyObject_GetAttr(stats, TH_APPENDED)) != NULL) {
        if ((now = PyNumber_Add(was, TH_ONE)) != NULL) {
            rc = PyObject_SetAttr(stats, TH_APPENDED, now);
            Py_DECREF(now);
        }
        Py_DECREF(was);
    }
    return rc;
}

/* AsyncTraceDispatcher._enqueue(item), step for step (see the top); args as bound. */
static int th_enqueue(PyObject *const *args, PyObject *item) {
    PyObject *dispatcher = args[5], *queue = args[6], *attrs = args[8], *r;
    Py_ssize_t n, room, wake_at;
    if ((n = PyObject_Size(queue)) < 0 || th_size_item(attrs, TH_ROOM, &room) < 0) {
        return -1;
    }
    if (n >= room) { /* full, or closed */
        r = PyObject_CallMethodOneArg(dispatcher, TH_DROP, item);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    if ((r = PyObject_CallOneArg(args[7], item)) == NULL) {
        return -1;
    }
    Py_DECREF(r);
    if (th_count(args[9]) < 0 || (n = PyObject_Size(queue)) < 0 ||
        th_size_item(attrs, TH_WAKE_AT, &wake_at) < 0) {
        return -1;
    }
    if (n >= wake_at) { /* the first of a round, or a round's worth lingering */
        if (PyDict_SetItem(attrs, TH_WAKE_AT, TH_NEVER) < 0 ||
            (r = PyObject_CallMethodNoArgs(dispatcher, TH_NOTIFY)) == NULL) {
            return -1;
        }
        Py_DECREF(r);
    }
    return 0;
}

static PyObject *trace_hook_before(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *sb[6], *pair;
    if (nargs != 11 || !PyDict_CheckExact(args[8])) {
        PyErr_SetString(PyExc_TypeError, "trace_hook_before() takes 11 arguments (attrs: a dict)");
        return NULL;
    }
    if (th_init() < 0) {
        return NULL;
    }
    /* sub_before(owner, msgs, trace_topic, now_ns, counter, default_region) */
    sb[0] = args[0];
    sb[1] = args[10];
    sb[2] = args[1];
    sb[3] = args[2];
    sb[4] = args[3];
    sb[5] = args[4];
    pair = sub_before(self, sb, 6);
    if (pair == NULL) {
        return th_failed(args[0], TH_SUBBEFORE);
    }
    if (pair == Py_NotImplemented) { /* the general path (it catches its own failures) */
        Py_DECREF(pair);
        return PyObject_CallMethodOneArg(args[0], TH_BEFORE, args[10]);
    }
    if (pair != Py_None && th_enqueue(args, pair) < 0) {
        Py_DECREF(pair);
        return th_failed(args[0], TH_SUBBEFORE);
    }
    return pair;
}

static PyObject *trace_hook_after(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *sa[6], *done, *r;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "trace_hook_after() takes 6 arguments");
        return NULL;
    }
    if (th_init() < 0) {
        return NULL;
    }
    /* sub_after(pair, count, True, usual, now_ns, usual) */
    sa[0] = args[4];
    sa[1] = args[5];
    sa[2] = Py_True;
    sa[3] = args[2];
    sa[4] = args[1];
    sa[5] = args[2];
    done = sub_after(self, sa, 6);
    if (done == NULL) {
        return th_failed(args[0], TH_SUBAFTER);
    }
    if (done == Py_None) { /* completed the queued pair: counted as a context */
        Py_DECREF(done);
        if (th_count(args[3]) < 0) {
            return th_failed(args[0], TH_SUBAFTER);
        }
        Py_RETURN_NONE;
    }
    /* the worker took the pair first, or it was dropped: the SubAfter goes alone */
    r = PyObject_CallMethodObjArgs(args[0], TH_LATE, args[4], done, NULL);
    Py_DECREF(done);
    if (r == NULL) {
        return th_failed(args[0], TH_SUBAFTER);
    }
    Py_DECREF(r);
    Py_RETURN_NONE;
}

#define SPEEDUPS_TRACEHOOK_METHODS                                                               \
    {"trace_hook_before", (PyCFunction)(void (*)(void))trace_hook_before, METH_FASTCALL,         \
     "ConsumeTracer's SubBefore hook, queueing included (_trace_records.hook_before_py)."},     \
        {"trace_hook_after", (PyCFunction)(void (*)(void))trace_hook_after, METH_FASTCALL,       \
         "ConsumeTracer's usual SubAfter hook (_trace_records.hook_after_py)."},
