/* The consume service's trace hooks as one compiled call each, and their entry buffer
 * (#included by _speedups.c after _speedups_trace.h, whose record writer, sub_before reading and
 * sub_after they use); twins of ariane.client._trace_records.hook_before_py, hook_after_py,
 * hook_capture_py, hook_end_py and EntryBufferPy.
 *
 *   trace_hook_before(owner, trace_topic, now_ns, counter, default_region, dispatcher, queue,
 *                     entries, attrs, stats, msgs)
 *       -> the call's entry handle (an int), None, or what owner.before(msgs) answers
 *   trace_hook_after(owner, now_ns, usual, stats, entries, before, count) -> None
 *   trace_hook_capture(owner, trace_topic, counter, default_region, entries, chunks)
 *       -> per chunk a captured entry's handle, None or NotImplemented (hook_capture_py)
 *   trace_hook_end(owner, now_ns, stats, entries, dispatcher, queue, attrs, handle, count,
 *                  began_ns) -> None (hook_end_py)
 *   trace_entries() -> a new TraceEntries buffer (see below)
 *
 * How it works: ConsumeTracer binds the first arguments (functools.partial), so the consume
 * service makes one call per hook and no Python frame runs per delivery. hook_before reads what
 * sub_before reads and adds one compact C entry to the tracer's buffer (no pair list, no
 * 7-tuple, nothing in the dispatcher's queue per delivery); the dispatcher's accounting is
 * _enqueue's: the queued items plus the buffer's pending entries against dispatcher._room (full
 * or closed: dispatcher._drop(None), None), stats.appended += 1, and the wake-up when they reach
 * dispatcher._wake_at (which becomes _NEVER before dispatcher._notify() runs). The partial binds
 * the dispatcher's queue, stats and attributes' dict (attrs: vars(dispatcher); _room and
 * _wake_at are plain instance attributes), so these are dict lookups, not attribute lookups
 * through the type (~150 instructions each). What these hooks do not handle goes to the Python
 * methods: a call of several messages or values that are not exact str/dict/int, or a str
 * without a UTF-8 form (owner.before: the open pairs of the queue, as before), an end the worker
 * took first (owner.entry_late / owner.after_late), and any Exception (owner.hook_failed logs
 * it: nothing reaches the business path, as in ConsumeTracer.before/after).
 */

#include "structmember.h" /* T_OBJECT_EX, READONLY: the stats' slot */

static PyObject *TH_TIME_NS;
static int te_ll(PyObject *x, long long *out, int allow_negative);
static PyObject *TH_ROOM, *TH_WAKE_AT, *TH_APPENDED, *TH_DROP, *TH_NOTIFY,
    *TH_BEFORE, *TH_LATE, *TH_FAILED, *TH_NEVER, *TH_ONE, *TH_TWO, *TH_SUBBEFORE, *TH_SUBAFTER;

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
    TH_TWO = PyLong_FromLong(2);
    TH_SUBBEFORE = PyUnicode_InternFromString("SubBefore");
    if (TH_ROOM == NULL || TH_WAKE_AT == NULL || TH_APPENDED == NULL ||
        TH_DROP == NULL || TH_NOTIFY == NULL || TH_BEFORE == NULL ||
        TH_LATE == NULL || TH_FAILED == NULL || TH_NEVER == NULL || TH_ONE == NULL || TH_TWO == NULL ||
        TH_SUBBEFORE == NULL) {
        return -1;
    }
    {
        PyObject *time = PyImport_ImportModule("time");
        if (time == NULL) {
            return -1;
        }
        TH_TIME_NS = PyObject_GetAttrString(time, "time_ns");
        Py_DECREF(time);
        if (TH_TIME_NS == NULL) {
            return -1;
        }
    }
    TH_SUBAFTER = PyUnicode_InternFromString("SubAfter");
    return TH_SUBAFTER == NULL ? -1 : 0;
}

/* now_ns() as a non-negative int; time.time_ns itself (the system clock's, what ConsumeTracer
 * binds) read here with clock_gettime(CLOCK_REALTIME) as it reads it, without the call and the
 * int object (~200 instructions a call). */
static int th_now(PyObject *now_ns, long long *out) {
    PyObject *ns;
    int rc;
#if defined(CLOCK_REALTIME)
    struct timespec ts;
    if (now_ns == TH_TIME_NS && clock_gettime(CLOCK_REALTIME, &ts) == 0) {
        *out = (long long)ts.tv_sec * 1000000000LL + (long long)ts.tv_nsec;
        return 0;
    }
#endif
    if ((ns = PyObject_CallNoArgs(now_ns)) == NULL) {
        return -1;
    }
    rc = te_ll(ns, out, 0);
    Py_DECREF(ns);
    return rc;
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

/* attrs["_room"] and attrs["_wake_at"] (vars(dispatcher)) as Py_ssize_t, kept between calls while
 * the dict's version tag (PEP 509: a new one at every change of the dict, attribute stores of
 * the specialized bytecode included; globally unique, so a new dict at the same address has
 * another) is the one they were read at: two dict lookups (~170 instructions each) per delivery
 * become a compare. Python 3.12 deprecates the tag: there the items are looked up each time. */
#if PY_VERSION_HEX < 0x030C0000
#define TH_LIMITS_CACHE 1
static PyObject *TH_LIMITS_OF; /* borrowed: only compared */
static uint64_t TH_LIMITS_VERSION;
static Py_ssize_t TH_LIMITS_ROOM, TH_LIMITS_WAKE_AT;
#endif

static int th_limits(PyObject *attrs, Py_ssize_t *room, Py_ssize_t *wake_at) {
#ifdef TH_LIMITS_CACHE
    uint64_t version = ((PyDictObject *)attrs)->ma_version_tag;
    if (attrs == TH_LIMITS_OF && version == TH_LIMITS_VERSION) {
        *room = TH_LIMITS_ROOM;
        *wake_at = TH_LIMITS_WAKE_AT;
        return 0;
    }
    TH_LIMITS_OF = NULL;
#endif
    if (th_size_item(attrs, TH_ROOM, room) < 0 || th_size_item(attrs, TH_WAKE_AT, wake_at) < 0) {
        return -1;
    }
#ifdef TH_LIMITS_CACHE
    /* the version read before the lookups: a change made while they ran is seen next time */
    TH_LIMITS_OF = attrs;
    TH_LIMITS_VERSION = version;
    TH_LIMITS_ROOM = *room;
    TH_LIMITS_WAKE_AT = *wake_at;
#endif
    return 0;
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

/* 1 when the slot held an exact int whose successor was made here (no Python code ran: the
 * caller's reads of the dispatcher stay valid), 0 when the count went through Python (the number
 * protocol, getattr / setattr), -1 with an error. */
static int th_count_by(PyObject *stats, int k) {
    PyObject *was, *now, **slot, *step = k == 1 ? TH_ONE : TH_TWO;
    Py_ssize_t at = th_appended_at(Py_TYPE(stats));
    int rc = -1;
    if (at > 0 && *(slot = (PyObject **)((char *)stats + at)) != NULL) {
        long long v = LLONG_MAX;
        int overflow = 0, exact = PyLong_CheckExact(*slot);
        /* an exact int below 2**63 - 1: its successor made directly (no number protocol; the
         * conversion of an exact int sets no error); one of a single digit read in place */
        if (exact) {
#if PY_VERSION_HEX < 0x030C0000
            if (Py_SIZE(*slot) == 1) {
                v = (long long)((PyLongObject *)*slot)->ob_digit[0];
            } else
#endif
            {
                v = PyLong_AsLongLongAndOverflow(*slot, &overflow);
            }
        }
        exact = exact && !overflow && v < LLONG_MAX - k;
        now = exact ? PyLong_FromLongLong(v + k) : PyNumber_Add(*slot, step);
        if (now == NULL) {
            return -1;
        }
        was = *slot;
        *slot = now;
        Py_DECREF(was); /* an int (exact) runs no code as it goes */
        return exact;
    }
    if ((was = PyObject_GetAttr(stats, TH_APPENDED)) != NULL) {
        if ((now = PyNumber_Add(was, step)) != NULL) {
            rc = PyObject_SetAttr(stats, TH_APPENDED, now);
            Py_DECREF(now);
        }
        Py_DECREF(was);
    }
    return rc < 0 ? -1 : 0;
}

static int th_count(PyObject *stats) { return th_count_by(stats, 1); }

/* ---- The entry buffer: one compact C entry per traced delivery ------------------------------
 *
 * TraceEntries (twin: ariane.client._trace_records.EntryBufferPy): the listener calls of one
 * message that ConsumeTracer's hooks recorded, in the order their SubBefore was taken, each as
 * (start ns, region, request number, topic, msgId, retry times, KEYS or NULL) and, once the call
 * ended, (end ns, messages, success, result code). No Python object per delivery but the handle
 * (an int, the entry's sequence number, which the consume service passes to the end hook): the
 * queue of open pairs held a list and a 7-tuple per delivery, and the worker popped, grouped and
 * claimed each. The dispatcher's worker writes the records of every pending entry in one call
 * (take: SubBefore and, when the call ended, SubAfter, as sub_records writes them); an entry
 * whose call is still running stays (its SubBefore written), and its SubAfter goes in a later
 * round. The GIL is the lock: no Python code runs between reading and changing the entries
 * (take moves what it writes out of the buffer before it allocates anything).
 *
 *   add(began_ns, region, number, topic, msg_id, retries, keys) -> handle   (tests, pure paths)
 *   end(handle, now_ns, count, success, code) -> 0 (completed), 1 (its SubBefore was already
 *       written: pending again), -1 (unknown or already ended)
 *   take(group, request_prefix, item_chars, item_key_chars) -> [(topic, records, count, keys)]
 *   pack(group, request_prefix, item_chars, item_key_chars, max_chars, max_key_chars)
 *       -> [(UTF-8 body, records, KEYS)]: whole trace messages, or None (_speedups_tracepack.h)
 *   clear() -> the pending entries dropped;  len() -> the pending entries
 *   capture(region, number, topic, msg_id, retries, keys) -> handle: an entry read before its
 *       delivery (TE_CAPTURED: no start time, not pending, skipped by take and pack);
 *       end(handle, ..., began_ns) gives it its start and end at once (answer 2)
 *   cancel(handle) -> whether a captured entry was dropped;  captured() -> how many there are
 */

typedef struct {
    PyObject *region, *topic, *msg_id, *keys; /* keys NULL: None */
    unsigned long long seq, number;
    long long began_ns, retries, end_ns, count, code;
    int state; /* TE_CAPTURED (read, not delivered yet: no start time, not pending), TE_OPEN,
                * TE_SENT (SubBefore written), TE_ENDED, TE_ENDED_SENT */
    int success;
} te_entry;

enum { TE_CAPTURED = -1, TE_OPEN = 0, TE_SENT = 1, TE_ENDED = 2, TE_ENDED_SENT = 3 };

typedef struct {
    PyObject_HEAD
    te_entry *e;
    Py_ssize_t n, cap, pending, captured;
    unsigned long long next_seq;
} te_buf;

static PyTypeObject *TE_TYPE;

static void te_release(te_entry *x) {
    Py_CLEAR(x->region);
    Py_CLEAR(x->topic);
    Py_CLEAR(x->msg_id);
    Py_CLEAR(x->keys);
}

static void te_dealloc(PyObject *self) {
    te_buf *b = (te_buf *)self;
    PyTypeObject *tp = Py_TYPE(self);
    for (Py_ssize_t i = 0; i < b->n; i++) {
        te_release(&b->e[i]);
    }
    PyMem_Free(b->e);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static Py_ssize_t te_len(PyObject *self) { return ((te_buf *)self)->pending; }

/* An exact str with a UTF-8 form (compact ASCII: always). */
static int te_text_ok(PyObject *s) {
    if (!PyUnicode_CheckExact(s)) {
        return 0;
    }
    if (PyUnicode_IS_ASCII(s)) {
        return 1;
    }
    if (PyUnicode_AsUTF8AndSize(s, NULL) == NULL) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* Append an entry (the values checked by the caller); its handle, or -1 with no memory. */
static int te_push(te_buf *b, long long began_ns, PyObject *region, unsigned long long number,
                   PyObject *topic, PyObject *msg_id, long long retries, PyObject *keys,
                   unsigned long long *seq, int state) {
    te_entry *x;
    if (b->n == b->cap) {
        Py_ssize_t cap = b->cap ? b->cap * 2 : 1024;
        te_entry *e = PyMem_Realloc(b->e, (size_t)cap * sizeof(te_entry));
        if (e == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->e = e;
        b->cap = cap;
    }
    x = &b->e[b->n++];
    x->region = Py_NewRef(region);
    x->topic = Py_NewRef(topic);
    x->msg_id = Py_NewRef(msg_id);
    x->keys = keys == Py_None ? NULL : Py_NewRef(keys);
    x->seq = *seq = b->next_seq++;
    x->number = number;
    x->began_ns = began_ns;
    x->retries = retries;
    x->end_ns = x->count = x->code = 0;
    x->state = state;
    x->success = 0;
    if (state == TE_CAPTURED) {
        b->captured++;
    } else {
        b->pending++;
    }
    return 0;
}

/* A non-negative int below 2**63 (ns, retries), or below 2**64 (numbers); -1 with TypeError. */
static int te_ll(PyObject *x, long long *out, int allow_negative) {
    if (tr_ll(x, out) < 0) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "not a 64-bit int");
        }
        return -1;
    }
    if (*out < 0 && !allow_negative) {
        PyErr_SetString(PyExc_TypeError, "a negative value");
        return -1;
    }
    return 0;
}

static int te_ull(PyObject *x, unsigned long long *out) {
    if (!PyLong_CheckExact(x) || _PyLong_Sign(x) < 0) {
        PyErr_SetString(PyExc_TypeError, "not an int in [0, 2**64)");
        return -1;
    }
    *out = PyLong_AsUnsignedLongLong(x);
    if (*out == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "not an int in [0, 2**64)");
        return -1;
    }
    return 0;
}

static PyObject *te_add(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long long began, retries;
    unsigned long long number, seq;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "add() takes 7 arguments");
        return NULL;
    }
    if (te_ll(args[0], &began, 0) < 0 || te_ull(args[2], &number) < 0 ||
        te_ll(args[5], &retries, 1) < 0) {
        return NULL;
    }
    if (!te_text_ok(args[1]) || !te_text_ok(args[3]) || !te_text_ok(args[4]) ||
        (args[6] != Py_None && !te_text_ok(args[6]))) {
        PyErr_SetString(PyExc_TypeError, "not a str with a UTF-8 form");
        return NULL;
    }
    if (te_push((te_buf *)self, began, args[1], number, args[3], args[4], retries, args[6], &seq,
                TE_OPEN) < 0) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(seq);
}

/* The entry of handle seq (entries are in handle order: the usual place first, then a binary
 * search), or NULL. */
static te_entry *te_find(te_buf *b, unsigned long long seq) {
    Py_ssize_t lo = 0, hi = b->n;
    if (b->n == 0 || seq < b->e[0].seq) {
        return NULL;
    }
    if (seq - b->e[0].seq < (unsigned long long)b->n && b->e[seq - b->e[0].seq].seq == seq) {
        return &b->e[seq - b->e[0].seq];
    }
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (b->e[mid].seq < seq) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < b->n && b->e[lo].seq == seq ? &b->e[lo] : NULL;
}

/* The end of the call of handle seq; 0, 1, 2 or -1 as end() answers (began_ns: the start of a
 * captured entry's call, which only a captured entry takes; -1 when not given). */
static int te_end(te_buf *b, unsigned long long seq, long long now_ns, long long count,
                  int success, long long code, long long began_ns) {
    te_entry *x = te_find(b, seq);
    if (x == NULL || x->state >= TE_ENDED || (x->state == TE_CAPTURED) != (began_ns >= 0)) {
        return -1;
    }
    x->end_ns = now_ns;
    x->count = count;
    x->success = success;
    x->code = code;
    if (x->state == TE_CAPTURED) { /* delivered and ended: both records pending */
        x->began_ns = began_ns;
        x->state = TE_ENDED;
        b->captured--;
        b->pending++;
        return 2;
    }
    if (x->state == TE_SENT) {
        x->state = TE_ENDED_SENT;
        b->pending++;
        return 1;
    }
    x->state = TE_ENDED;
    return 0;
}

static PyObject *te_end_method(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned long long seq;
    long long now, count, code, began = -1;
    int ok;
    if (nargs != 5 && nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "end() takes 5 or 6 arguments");
        return NULL;
    }
    if (te_ull(args[0], &seq) < 0 || te_ll(args[1], &now, 0) < 0 || te_ll(args[2], &count, 1) < 0 ||
        (ok = PyObject_IsTrue(args[3])) < 0 || te_ll(args[4], &code, 1) < 0 ||
        (nargs == 6 && args[5] != Py_None && te_ll(args[5], &began, 0) < 0)) {
        return NULL;
    }
    return PyLong_FromLong(te_end((te_buf *)self, seq, now, count, ok, code, began));
}

/* Drop the captured (not started) entry of handle seq: 1, or 0 when there is none. */
static int te_cancel(te_buf *b, unsigned long long seq) {
    te_entry *x = te_find(b, seq);
    Py_ssize_t at;
    te_entry gone;
    if (x == NULL || x->state != TE_CAPTURED) {
        return 0;
    }
    at = x - b->e;
    gone = *x;
    memmove(x, x + 1, (size_t)(b->n - at - 1) * sizeof(te_entry));
    b->n--;
    b->captured--;
    te_release(&gone); /* after the buffer is whole again: a release may run Python code */
    return 1;
}

static PyObject *te_cancel_method(PyObject *self, PyObject *handle) {
    unsigned long long seq;
    if (te_ull(handle, &seq) < 0) {
        return NULL;
    }
    return PyBool_FromLong(te_cancel((te_buf *)self, seq));
}

static PyObject *te_capture(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long long retries;
    unsigned long long number, seq;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "capture() takes 6 arguments");
        return NULL;
    }
    if (te_ull(args[1], &number) < 0 || te_ll(args[4], &retries, 1) < 0) {
        return NULL;
    }
    if (!te_text_ok(args[0]) || !te_text_ok(args[2]) || !te_text_ok(args[3]) ||
        (args[5] != Py_None && !te_text_ok(args[5]))) {
        PyErr_SetString(PyExc_TypeError, "not a str with a UTF-8 form");
        return NULL;
    }
    if (te_push((te_buf *)self, 0, args[0], number, args[2], args[3], retries, args[5], &seq,
                TE_CAPTURED) < 0) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(seq);
}

static PyObject *te_captured(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromSsize_t(((te_buf *)self)->captured);
}

static PyObject *te_clear(PyObject *self, PyObject *unused) {
    te_buf *b = (te_buf *)self;
    Py_ssize_t pending = b->pending, n = b->n;
    te_entry *e = b->e;
    (void)unused;
    b->e = NULL;
    b->n = b->cap = b->pending = b->captured = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        te_release(&e[i]);
    }
    PyMem_Free(e);
    return PyLong_FromSsize_t(pending);
}

#include "_speedups_tracepack.h" /* take, pack: the pending entries' records */

static PyMethodDef te_methods[] = {
    {"add", (PyCFunction)(void (*)(void))te_add, METH_FASTCALL,
     "add(began_ns, region, number, topic, msg_id, retries, keys) -> handle"},
    {"end", (PyCFunction)(void (*)(void))te_end_method, METH_FASTCALL,
     "end(handle, now_ns, count, success, code[, began_ns]) -> 0, 1, 2 or -1"},
    {"capture", (PyCFunction)(void (*)(void))te_capture, METH_FASTCALL,
     "capture(region, number, topic, msg_id, retries, keys) -> handle"},
    {"cancel", te_cancel_method, METH_O, "cancel(handle) -> whether a captured entry was dropped"},
    {"captured", te_captured, METH_NOARGS, "captured() -> the captured entries not started"},
    {"take", (PyCFunction)(void (*)(void))te_take, METH_FASTCALL,
     "take(group, request_prefix, item_chars, item_key_chars) -> items"},
    {"pack", (PyCFunction)(void (*)(void))te_pack, METH_FASTCALL,
     "pack(group, request_prefix, item_chars, item_key_chars, max_chars, max_key_chars) -> "
     "[(body, records, KEYS)] or None"},
    {"clear", te_clear, METH_NOARGS, "clear() -> the pending entries dropped"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot te_slots[] = {
    {Py_tp_dealloc, te_dealloc},
    {Py_tp_methods, te_methods},
    {Py_sq_length, te_len},
    {Py_tp_doc, "The trace hooks' entry buffer (_trace_records.EntryBufferPy)."},
    {0, NULL},
};

static PyType_Spec te_spec = {
    "ariane._speedups.TraceEntries", sizeof(te_buf), 0, Py_TPFLAGS_DEFAULT, te_slots,
};

/* trace_entries(): a new empty buffer (its type made at the first call). */
static PyObject *trace_entries(PyObject *self, PyObject *unused) {
    te_buf *b;
    (void)self;
    (void)unused;
    if (TE_TYPE == NULL && (TE_TYPE = (PyTypeObject *)PyType_FromSpec(&te_spec)) == NULL) {
        return NULL;
    }
    b = PyObject_New(te_buf, TE_TYPE);
    if (b == NULL) {
        return NULL;
    }
    b->e = NULL;
    b->n = b->cap = b->pending = b->captured = 0;
    b->next_seq = 0;
    return (PyObject *)b;
}

/* The pending entries and queued items against attrs[name]. */
static int th_queued(PyObject *queue, PyObject *entries, Py_ssize_t *out) {
    Py_ssize_t n = PyObject_Size(queue);
    if (n < 0) {
        return -1;
    }
    *out = n + ((te_buf *)entries)->pending;
    return 0;
}

/* What a SubBefore entry holds of msg, read as trace_hook_before and trace_hook_capture read it
 * (tb_read_msg, the TRACE_ON and trace-topic tests, the region, msgId and retries): 0 usual (r;
 * *region borrowed; *msg_id and *retries_obj new references; *retries), 1 not traced, 2 unusual
 * (the general path), -1 an error set. The caller clears r, *msg_id and *retries_obj. */
static int th_read_usual(PyObject *msg, PyObject *trace_topic, PyObject *default_region,
                         tb_read *r, PyObject **region, PyObject **msg_id, PyObject **retries_obj,
                         long long *retries) {
    int rc = tb_read_msg(msg, r);
    if (rc == -2) {
        return -1;
    }
    if (rc == 1) {
        return 2;
    }
    if ((r->sw != NULL && PyUnicode_GET_LENGTH(r->sw) == 5 &&
         PyUnicode_CompareWithASCIIString(r->sw, "false") == 0) ||
        (PyUnicode_GET_LENGTH(r->topic) >= PyUnicode_GET_LENGTH(trace_topic) &&
         PyUnicode_Tailmatch(r->topic, trace_topic, 0, PY_SSIZE_T_MAX, -1) == 1)) {
        return 1;
    }
    *region = r->region != NULL && PyUnicode_GET_LENGTH(r->region) ? r->region : default_region;
    if (r->uniq != NULL && PyUnicode_GET_LENGTH(r->uniq)) {
        *msg_id = Py_NewRef(r->uniq);
    } else if ((*msg_id = PyObject_GetAttr(msg, TB_OFFSET_ID)) == NULL) {
        return -1;
    }
    if ((*retries_obj = sr_get(msg, TB_RETRIES, &TB_RETRIES_AT)) == NULL) {
        return -1;
    }
    if (!PyLong_CheckExact(*retries_obj) || !te_text_ok(*region) || !te_text_ok(r->topic) ||
        !te_text_ok(*msg_id) || (r->keys != NULL && !te_text_ok(r->keys))) {
        return 2;
    }
    *retries = PyLong_AsLongLongAndOverflow(*retries_obj, &rc);
    if (rc != 0 || (*retries == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 2;
    }
    return 0;
}

/* trace_hook_before(owner, trace_topic, now_ns, counter, default_region, dispatcher, queue,
 * entries, attrs, stats, msgs): sub_before's reading, the entry added (room: queued items and
 * pending entries against dispatcher._room, else dispatcher._drop(None) and None), counted, and
 * the worker woken as _enqueue wakes it; the entry's handle. */
static PyObject *trace_hook_before(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    tb_read r = {NULL, NULL, NULL, NULL, NULL, NULL};
    PyObject *msgs, *msg, *msg_id = NULL, *retries_obj = NULL;
    PyObject *region = NULL, *out = NULL, *attrs, *rv;
    te_buf *buf;
    long long began, retries = 0;
    unsigned long long number, seq;
    Py_ssize_t queued, room, wake_at;
    int rc;
    (void)self;
    if (nargs != 11 || !PyDict_CheckExact(args[8]) || !Py_IS_TYPE(args[7], TE_TYPE)) {
        PyErr_SetString(PyExc_TypeError,
                        "trace_hook_before() takes 11 arguments (entries: TraceEntries, attrs: a dict)");
        return NULL;
    }
    if (th_init() < 0 || tb_init() < 0) {
        return NULL;
    }
    buf = (te_buf *)args[7];
    attrs = args[8];
    msgs = args[10];
    if (!PyList_CheckExact(msgs) || PyList_GET_SIZE(msgs) != 1 || !PyUnicode_CheckExact(args[1]) ||
        !PyUnicode_CheckExact(args[4])) {
        goto general;
    }
    msg = PyList_GET_ITEM(msgs, 0);
    rc = th_read_usual(msg, args[1], args[4], &r, &region, &msg_id, &retries_obj, &retries);
    if (rc < 0) {
        goto failed;
    }
    if (rc == 2) {
        goto general;
    }
    if (rc == 1) { /* not traced */
        out = Py_NewRef(Py_None);
        goto done;
    }
    /* the values are usual: the clock and the counter, then the entry */
    if (th_now(args[2], &began) < 0) {
        goto failed;
    }
    if (tc_next(args[3], &number) < 0 || th_queued(args[6], args[7], &queued) < 0 ||
        th_limits(attrs, &room, &wake_at) < 0) {
        goto failed;
    }
    if (queued >= room) { /* full, or closed */
        if ((rv = PyObject_CallMethodOneArg(args[5], TH_DROP, Py_None)) == NULL) {
            goto failed;
        }
        Py_DECREF(rv);
        out = Py_NewRef(Py_None);
        goto done;
    }
    if (te_push(buf, began, region, number, r.topic, msg_id, retries,
                r.keys != NULL ? r.keys : Py_None, &seq, TE_OPEN) < 0 ||
        (out = PyLong_FromUnsignedLongLong(seq)) == NULL) {
        goto failed;
    }
    if ((rc = th_count(args[9])) < 0) {
        goto failed;
    }
    if (rc == 1) { /* no Python code ran: one more pending entry, the same limits */
        queued++;
    } else if (th_queued(args[6], args[7], &queued) < 0 ||
               th_limits(attrs, &room, &wake_at) < 0) { /* again: the count ran Python code */
        goto failed;
    }
    if (queued >= wake_at) { /* the first of a round, or a round's worth lingering */
        if (PyDict_SetItem(attrs, TH_WAKE_AT, TH_NEVER) < 0 ||
            (rv = PyObject_CallMethodNoArgs(args[5], TH_NOTIFY)) == NULL) {
            goto failed;
        }
        Py_DECREF(rv);
    }
    goto done;
general: /* the general path (it catches its own failures) */
    tb_clear(&r);
    Py_XDECREF(msg_id);
    Py_XDECREF(retries_obj);
    return PyObject_CallMethodOneArg(args[0], TH_BEFORE, msgs);
failed:
    Py_CLEAR(out);
    out = th_failed(args[0], TH_SUBBEFORE);
done:
    tb_clear(&r);
    Py_XDECREF(msg_id);
    Py_XDECREF(retries_obj);
    return out;
}

/* trace_hook_after(owner, now_ns, usual, stats, entries, before, count): the usual end (success,
 * `usual`). An entry's handle (an int): its end recorded in the buffer, counted; when its
 * SubBefore was already written owner.entry_late(1) (pending again: the worker is woken as for an
 * append), when unknown owner.entry_late(-1). An open pair (a list: the general path's): appended
 * as sub_after appends it, as before. */
static PyObject *trace_hook_after(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *sa[6], *done, *r;
    if (nargs != 7 || !Py_IS_TYPE(args[4], TE_TYPE)) {
        PyErr_SetString(PyExc_TypeError, "trace_hook_after() takes 7 arguments (entries: TraceEntries)");
        return NULL;
    }
    if (th_init() < 0) {
        return NULL;
    }
    if (PyLong_CheckExact(args[5])) {
        unsigned long long seq;
        long long now_ns, count;
        int rc;
        if (te_ull(args[5], &seq) < 0 || te_ll(args[6], &count, 1) < 0 ||
            th_now(args[1], &now_ns) < 0) {
            return th_failed(args[0], TH_SUBAFTER);
        }
        rc = te_end((te_buf *)args[4], seq, now_ns, count, 1, 0, -1);
        if (rc == 0) {
            if (th_count(args[3]) < 0) {
                return th_failed(args[0], TH_SUBAFTER);
            }
            Py_RETURN_NONE;
        }
        r = PyObject_CallMethod(args[0], "entry_late", "i", rc);
        if (r == NULL) {
            return th_failed(args[0], TH_SUBAFTER);
        }
        Py_DECREF(r);
        Py_RETURN_NONE;
    }
    /* sub_after(pair, count, True, usual, now_ns, usual) */
    sa[0] = args[5];
    sa[1] = args[6];
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
    r = PyObject_CallMethodObjArgs(args[0], TH_LATE, args[5], done, NULL);
    Py_DECREF(done);
    if (r == NULL) {
        return th_failed(args[0], TH_SUBAFTER);
    }
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* trace_hook_capture(owner, trace_topic, counter, default_region, entries, chunks): the
 * SubBefore reading of trace_hook_before for every chunk of a pulled list in one loop (the code
 * stays in the instruction cache: per delivery it was fetched again each time), when the pull
 * answer is handed to the consume service. Per chunk: the handle of a captured entry (an int:
 * read, numbered, not started, not pending, not counted; trace_hook_end gives its start and end,
 * or cancel() drops it), None (not traced: TRACE_ON=false, the trace topic) or NotImplemented
 * (trace_hook_before at the delivery: not one message, unusual values, or a failure, which
 * owner.hook_failed logs once). */
static PyObject *trace_hook_capture(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *chunks, *out;
    te_buf *buf;
    Py_ssize_t n, i;
    int failed = 0, usual;
    (void)self;
    if (nargs != 6 || !Py_IS_TYPE(args[4], TE_TYPE) || !PyList_CheckExact(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "trace_hook_capture() takes 6 arguments (entries: TraceEntries, chunks: a list)");
        return NULL;
    }
    if (th_init() < 0 || tb_init() < 0) {
        return NULL;
    }
    buf = (te_buf *)args[4];
    chunks = args[5];
    n = PyList_GET_SIZE(chunks);
    if ((out = PyList_New(n)) == NULL) {
        return NULL;
    }
    usual = PyUnicode_CheckExact(args[1]) && PyUnicode_CheckExact(args[3]);
    for (i = 0; i < n; i++) {
        tb_read r = {NULL, NULL, NULL, NULL, NULL, NULL};
        PyObject *chunk = PyList_GET_ITEM(chunks, i), *msg, *msg_id = NULL, *retries_obj = NULL;
        PyObject *region = NULL, *item = Py_NotImplemented;
        long long retries = 0;
        unsigned long long number, seq;
        int rc;
        if (failed || !usual || !PyList_CheckExact(chunk) || PyList_GET_SIZE(chunk) != 1) {
            goto next;
        }
        msg = PyList_GET_ITEM(chunk, 0);
        rc = th_read_usual(msg, args[1], args[3], &r, &region, &msg_id, &retries_obj, &retries);
        if (rc < 0) {
            goto fail;
        }
        if (rc == 2) {
            goto next;
        }
        if (rc == 1) { /* not traced */
            item = Py_None;
            goto next;
        }
        if (tc_next(args[2], &number) < 0 ||
            te_push(buf, 0, region, number, r.topic, msg_id, retries,
                    r.keys != NULL ? r.keys : Py_None, &seq, TE_CAPTURED) < 0) {
            goto fail;
        }
        if ((item = PyLong_FromUnsignedLongLong(seq)) == NULL) {
            te_cancel(buf, seq);
            goto fail;
        }
        PyList_SET_ITEM(out, i, item);
        tb_clear(&r);
        Py_XDECREF(msg_id);
        Py_XDECREF(retries_obj);
        continue;
    fail: { /* logged once; this chunk and the rest go the per-delivery way */
        PyObject *logged = th_failed(args[0], TH_SUBBEFORE);
        failed = 1;
        if (logged == NULL) { /* not an Exception: it propagates (the captured ones dropped) */
            tb_clear(&r);
            Py_XDECREF(msg_id);
            Py_XDECREF(retries_obj);
            for (Py_ssize_t k = 0; k < i; k++) {
                PyObject *h = PyList_GET_ITEM(out, k);
                if (PyLong_CheckExact(h)) {
                    te_cancel(buf, PyLong_AsUnsignedLongLong(h));
                }
            }
            for (; i < n; i++) {
                PyList_SET_ITEM(out, i, Py_NewRef(Py_None));
            }
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(logged);
        item = Py_NotImplemented;
    }
    next:
        PyList_SET_ITEM(out, i, Py_NewRef(item));
        tb_clear(&r);
        Py_XDECREF(msg_id);
        Py_XDECREF(retries_obj);
    }
    return out;
}

/* trace_hook_end(owner, now_ns, stats, entries, dispatcher, queue, attrs, handle, count, began_ns):
 * the usual end (success) of a captured entry's call that started at began_ns (the service's
 * stamp, read right before the listener): both its records become pending at once, with what
 * trace_hook_before and trace_hook_after did for them: the room test (queued items and pending
 * entries against dispatcher._room; full or closed: the entry dropped, dispatcher._drop(None)),
 * stats.appended += 2, and the wake-up as _enqueue wakes the worker. An unknown handle (the
 * buffer was cleared: the dispatcher closed) owner.entry_late(-1). */
static PyObject *trace_hook_end(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *attrs, *rv;
    te_buf *buf;
    unsigned long long seq = 0;
    long long count, began, now_ns;
    Py_ssize_t queued, room, wake_at;
    int rc, have_seq = 0;
    (void)self;
    if (nargs != 10 || !Py_IS_TYPE(args[3], TE_TYPE) || !PyDict_CheckExact(args[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "trace_hook_end() takes 10 arguments (entries: TraceEntries, attrs: a dict)");
        return NULL;
    }
    if (th_init() < 0) {
        return NULL;
    }
    buf = (te_buf *)args[3];
    attrs = args[6];
    if (te_ull(args[7], &seq) < 0) {
        goto failed;
    }
    have_seq = 1;
    if (te_ll(args[8], &count, 1) < 0 || te_ll(args[9], &began, 0) < 0 ||
        th_now(args[1], &now_ns) < 0) {
        goto failed;
    }
    if (th_queued(args[5], args[3], &queued) < 0 || th_limits(attrs, &room, &wake_at) < 0) {
        goto failed;
    }
    if (queued >= room) { /* full, or closed: dropped as a SubBefore was */
        rv = te_cancel(buf, seq) ? PyObject_CallMethodOneArg(args[4], TH_DROP, Py_None)
                                 : PyObject_CallMethod(args[0], "entry_late", "i", -1);
        have_seq = 0;
        if (rv == NULL) {
            goto failed;
        }
        Py_DECREF(rv);
        Py_RETURN_NONE;
    }
    have_seq = 0;
    if (te_end(buf, seq, now_ns, count, 1, 0, began) != 2) { /* unknown: the buffer was cleared */
        if ((rv = PyObject_CallMethod(args[0], "entry_late", "i", -1)) == NULL) {
            goto failed;
        }
        Py_DECREF(rv);
        Py_RETURN_NONE;
    }
    if ((rc = th_count_by(args[2], 2)) < 0) {
        goto failed;
    }
    if (rc == 1) { /* no Python code ran: one more pending entry, the same limits */
        queued++;
    } else if (th_queued(args[5], args[3], &queued) < 0 ||
               th_limits(attrs, &room, &wake_at) < 0) {
        goto failed;
    }
    if (queued >= wake_at) { /* the first of a round, or a round's worth lingering */
        if (PyDict_SetItem(attrs, TH_WAKE_AT, TH_NEVER) < 0 ||
            (rv = PyObject_CallMethodNoArgs(args[4], TH_NOTIFY)) == NULL) {
            goto failed;
        }
        Py_DECREF(rv);
    }
    Py_RETURN_NONE;
failed: /* logged; a captured entry is dropped (no record of a call whose end failed) */
    if (have_seq) {
        te_cancel(buf, seq);
    }
    return th_failed(args[0], TH_SUBAFTER);
}

#define SPEEDUPS_TRACEHOOK_METHODS                                                               \
    {"trace_hook_before", (PyCFunction)(void (*)(void))trace_hook_before, METH_FASTCALL,         \
     "ConsumeTracer's SubBefore hook, queueing included (_trace_records.hook_before_py)."},     \
        {"trace_hook_after", (PyCFunction)(void (*)(void))trace_hook_after, METH_FASTCALL,       \
         "ConsumeTracer's usual SubAfter hook (_trace_records.hook_after_py)."},                 \
        {"trace_hook_capture", (PyCFunction)(void (*)(void))trace_hook_capture, METH_FASTCALL,   \
         "ConsumeTracer's SubBefore reading of a pulled list (_trace_records.hook_capture_py)."}, \
        {"trace_hook_end", (PyCFunction)(void (*)(void))trace_hook_end, METH_FASTCALL,           \
         "ConsumeTracer's usual end of a captured entry (_trace_records.hook_end_py)."},         \
        {"trace_entries", trace_entries, METH_NOARGS,                                            \
         "A new TraceEntries buffer (_trace_records.EntryBufferPy)."},
