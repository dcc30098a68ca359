/* ariane._speedups: CommitLog.put_message's fast path in one C call, its bookkeeping included
 * (issue 18: one Python frame per single put; RocketMQ CommitLog.asyncPutMessage's locked part).
 *
 *   configure_put_log(state_cls, mapped_file_cls) -> None
 *   put_log(state, msg, lock, queue_table, staged) -> PutResult | None
 *   put_log_run(state, msgs, start, queue_table, staged, out) -> int
 *
 * How it works. `state` is the CommitLog's PutState (store/commit_log_state.py, __slots__ read
 * and written here through their offsets): the topic and tags caches, the limits, the clock
 * (None: the system clock, read here as time.time_ns() // 1_000_000 is), the current
 * MappedFile, the last store time and the put counters. put_log takes `lock` (the put lock;
 * None: the caller holds it, as store/put_run.py does for a run of puts; a free
 * threading.Lock without its methods, see pl_try_lock),
 * stamps the store time (kept monotonic), and makes put_one's call (_speedups_put.h) on the
 * current file with the room left before END_FILE_MIN_BLANK_LENGTH; when it wrote the record
 * it advances what CommitLog._put_two_steps advances (the file's wrote position and store
 * time, the last store time, put_times_total, put_size_total), all under the lock and the GIL,
 * then releases the lock. It returns None before any effect (and with the lock released) when
 * there is no current file, a field is not an exact int, the clock's answer is not one, the
 * record does not fit the file (it must roll first) or the message is not of put_one's shape:
 * the pure path (CommitLog._put_two_steps, the reference) then decides.
 *
 * put_log_run is put_log(state, m, None, queue_table, staged) for msgs[start], msgs[start + 1]...
 * with the caller holding the put lock (store/put_run.py's put_many: a read's single sends),
 * each result appended to `out`; it stops before the first message put_log declines and
 * returns its index (len(msgs) when none is declined). Twin: put_many's Python loop over
 * put_log (the reference, and the path of any other put call).
 *
 * Included by _speedups.c after _speedups_put.h (put_one_at, put_int, PUT_RESULT_AT).
 */

#include <time.h>

enum { PL_TOPICS, PL_TAG_CODES, PL_MAX_PROPS, PL_MAX_SIZE, PL_ROOM_LIMIT, PL_CLOCK, PL_CURRENT,
       PL_LAST_TS, PL_TIMES, PL_SIZE, PL_COUNT };
static const char *const PL_STATE_NAMES[PL_COUNT] = {
    "topics", "tag_codes", "max_props", "max_size", "room_limit", "clock", "current",
    "last_store_ts", "put_times_total", "put_size_total",
};
enum { PL_MM, PL_WROTE, PL_FROM, PL_MF_TS, PL_MF_COUNT };
static const char *const PL_MF_NAMES[PL_MF_COUNT] = {
    "mm", "wrote_position", "file_from_offset", "store_timestamp",
};
static Py_ssize_t PL_STATE_AT[PL_COUNT], PL_MF_AT[PL_MF_COUNT];
static PyObject *PL_STATE_CLS, *PL_MF_CLS, *PL_K_ACQUIRE, *PL_K_RELEASE, *PL_K_NOW_MS;

/* The put lock taken and released without its methods (issue 18: `acquire` parses its
 * arguments as keywords, ~700 instructions of the put for the two method calls). Through 3.12
 * a threading.Lock is Modules/_threadmodule.c's lockobject, laid out as below: a free lock is
 * taken here the way its `acquire` first tries, without waiting and with the GIL held
 * (PyThread_acquire_lock_timed(lock, 0, 0), then `locked` = 1), and released the way `release`
 * does; a held lock (another thread's put) and any other lock (another type, another layout,
 * Python 3.13+) go through the methods, which wait with the GIL released. PL_LOCK_TYPE is
 * _thread.LockType when its size is this layout's, else NULL (methods always). */
#if PY_VERSION_HEX < 0x030D0000
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock_lock;
    PyObject *in_weakreflist;
    char locked;
} PlLock;
#define PL_LOCK_LAYOUT 1
#else
#define PL_LOCK_LAYOUT 0
#endif
static PyTypeObject *PL_LOCK_TYPE;

/* 1 when `lock` was taken without waiting, 0 when not (take it by its method) */
static int pl_try_lock(PyObject *lock) {
#if PL_LOCK_LAYOUT
    if (PL_LOCK_TYPE != NULL && Py_IS_TYPE(lock, PL_LOCK_TYPE)) {
        PlLock *l = (PlLock *)lock;
        if (PyThread_acquire_lock_timed(l->lock_lock, 0, 0) == PY_LOCK_ACQUIRED) {
            l->locked = 1;
            return 1;
        }
    }
#else
    (void)lock;
#endif
    return 0;
}

/* release a lock pl_try_lock took (as its `release` does) */
static void pl_unlock(PyObject *lock) {
#if PL_LOCK_LAYOUT
    PlLock *l = (PlLock *)lock;
    PyThread_release_lock(l->lock_lock);
    l->locked = 0;
#else
    (void)lock;
#endif
}

static PyObject *configure_put_log(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "configure_put_log(state_cls, mapped_file_cls)");
        return NULL;
    }
    if (put_slots(args[0], PL_STATE_NAMES, PL_COUNT, PL_STATE_AT) < 0 ||
        put_slots(args[1], PL_MF_NAMES, PL_MF_COUNT, PL_MF_AT) < 0) {
        return NULL;
    }
    if (PL_K_ACQUIRE == NULL) {
        PL_K_ACQUIRE = PyUnicode_InternFromString("acquire");
        PL_K_RELEASE = PyUnicode_InternFromString("release");
        PL_K_NOW_MS = PyUnicode_InternFromString("now_ms");
        if (PL_K_ACQUIRE == NULL || PL_K_RELEASE == NULL || PL_K_NOW_MS == NULL) {
            return NULL;
        }
    }
#if PL_LOCK_LAYOUT
    if (PL_LOCK_TYPE == NULL) {
        PyObject *thread = PyImport_ImportModule("_thread"), *type;
        if (thread == NULL) {
            return NULL;
        }
        type = PyObject_GetAttrString(thread, "LockType");
        Py_DECREF(thread);
        if (type == NULL) {
            return NULL;
        }
        if (PyType_Check(type) && ((PyTypeObject *)type)->tp_basicsize == sizeof(PlLock)) {
            PL_LOCK_TYPE = (PyTypeObject *)type; /* kept */
        } else {
            Py_DECREF(type);
        }
    }
#endif
    Py_INCREF(args[0]);
    Py_XSETREF(PL_STATE_CLS, args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(PL_MF_CLS, args[1]);
    Py_RETURN_NONE;
}

/* the slot at offset `at` of obj (borrowed; NULL when unset) */
#define PL_SLOT(obj, at) (*(PyObject **)((char *)(obj) + (at)))

/* the slot at offset `at` of obj becomes v (stolen; not NULL) */
static void pl_set(PyObject *obj, Py_ssize_t at, PyObject *v) {
    PyObject *old = PL_SLOT(obj, at);
    PL_SLOT(obj, at) = v;
    Py_XDECREF(old);
}

/* now in ms from the state's clock: 1, or 0 when its answer is not an exact int64 (None), or
 * -1 with the clock's error */
static int pl_now(PyObject *clock, int64_t *now) {
    PyObject *r;
    int ok;
    if (clock == Py_None) { /* = time.time_ns() // 1_000_000 (CLOCK_REALTIME, as time_ns) */
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        *now = (int64_t)ts.tv_sec * 1000 + (int64_t)(ts.tv_nsec / 1000000);
        return 1;
    }
    if ((r = PyObject_CallMethodNoArgs(clock, PL_K_NOW_MS)) == NULL) {
        return -1;
    }
    ok = put_int(r, INT64_MIN, INT64_MAX, now);
    Py_DECREF(r);
    return ok;
}

/* put_log under the lock: the PutResult, None before any effect, or NULL with an error */
static PyObject *pl_locked(PyObject *st, PyObject *msg, PyObject *table, PyObject *staged) {
    PyObject *mf = PL_SLOT(st, PL_STATE_AT[PL_CURRENT]), *topics, *tags, *res, *ts_obj;
    PyObject *wrote, *times_obj, *size_obj;
    int64_t room_limit, max_props, max_size, last, times, size, pos, from, now, total;
    int ok;
    topics = PL_SLOT(st, PL_STATE_AT[PL_TOPICS]);
    tags = PL_SLOT(st, PL_STATE_AT[PL_TAG_CODES]);
    if (mf == NULL || !Py_IS_TYPE(mf, (PyTypeObject *)PL_MF_CLS) || topics == NULL ||
        !PyDict_CheckExact(topics) || tags == NULL || !PyDict_CheckExact(tags) ||
        PL_SLOT(st, PL_STATE_AT[PL_CLOCK]) == NULL || PL_SLOT(mf, PL_MF_AT[PL_MM]) == NULL ||
        !put_int(PL_SLOT(st, PL_STATE_AT[PL_ROOM_LIMIT]), 0, INT64_MAX, &room_limit) ||
        !put_int(PL_SLOT(st, PL_STATE_AT[PL_MAX_PROPS]), 0, PY_SSIZE_T_MAX, &max_props) ||
        !put_int(PL_SLOT(st, PL_STATE_AT[PL_MAX_SIZE]), 0, PY_SSIZE_T_MAX, &max_size) ||
        !put_int(PL_SLOT(st, PL_STATE_AT[PL_LAST_TS]), INT64_MIN, INT64_MAX, &last) ||
        !put_int(PL_SLOT(st, PL_STATE_AT[PL_TIMES]), 0, INT64_MAX - 1, &times) ||
        !put_int(PL_SLOT(st, PL_STATE_AT[PL_SIZE]), 0, INT64_MAX / 2, &size) ||
        !put_int(PL_SLOT(mf, PL_MF_AT[PL_WROTE]), 0, INT64_MAX / 2, &pos) ||
        !put_int(PL_SLOT(mf, PL_MF_AT[PL_FROM]), 0, INT64_MAX / 2, &from)) {
        Py_RETURN_NONE;
    }
    if ((ok = pl_now(PL_SLOT(st, PL_STATE_AT[PL_CLOCK]), &now)) <= 0) {
        if (ok < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    res = put_one_at(msg, topics, tags, (Py_ssize_t)max_props, (Py_ssize_t)max_size,
                     PL_SLOT(mf, PL_MF_AT[PL_MM]), pos, from + pos, room_limit - pos,
                     now > last ? now : last, table, staged);
    if (res == NULL || res == Py_None) {
        return res;
    }
    /* the record is written and queued: advance the file, the store time and the counters */
    ts_obj = PL_SLOT(res, PUT_RESULT_AT[3]); /* store_timestamp_ms: the request's object */
    (void)put_int(PL_SLOT(res, PUT_RESULT_AT[2]), 0, INT32_MAX, &total); /* wrote_bytes */
    wrote = PyLong_FromLongLong((long long)(pos + total));
    times_obj = PyLong_FromLongLong((long long)(times + 1));
    size_obj = PyLong_FromLongLong((long long)(size + total));
    if (wrote == NULL || times_obj == NULL || size_obj == NULL) {
        Py_XDECREF(wrote);
        Py_XDECREF(times_obj);
        Py_XDECREF(size_obj);
        Py_DECREF(res);
        return NULL;
    }
    Py_INCREF(ts_obj);
    pl_set(st, PL_STATE_AT[PL_LAST_TS], ts_obj);
    Py_INCREF(ts_obj);
    pl_set(mf, PL_MF_AT[PL_MF_TS], ts_obj);
    pl_set(mf, PL_MF_AT[PL_WROTE], wrote);
    pl_set(st, PL_STATE_AT[PL_TIMES], times_obj);
    pl_set(st, PL_STATE_AT[PL_SIZE], size_obj);
    return res;
}

static PyObject *put_log(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *res, *r, *type, *value, *tb;
    (void)module;
    if (nargs != 5 || PL_STATE_CLS == NULL || PUT_MSG == NULL ||
        !Py_IS_TYPE(args[0], (PyTypeObject *)PL_STATE_CLS) || !PyDict_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "put_log(state, msg, lock, queue_table, staged) after "
                                         "configure_put and configure_put_log");
        return NULL;
    }
    if (args[2] == Py_None) { /* the caller holds the put lock (a run of puts) */
        return pl_locked(args[0], args[1], args[3], args[4]);
    }
    if (pl_try_lock(args[2])) { /* a free threading.Lock: taken and released here */
        res = pl_locked(args[0], args[1], args[3], args[4]);
        pl_unlock(args[2]);
        return res;
    }
    if ((r = PyObject_CallMethodNoArgs(args[2], PL_K_ACQUIRE)) == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    res = pl_locked(args[0], args[1], args[3], args[4]);
    PyErr_Fetch(&type, &value, &tb); /* the put's error, if any, survives the release */
    r = PyObject_CallMethodNoArgs(args[2], PL_K_RELEASE);
    if (r == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        Py_XDECREF(res);
        return NULL;
    }
    Py_DECREF(r);
    PyErr_Restore(type, value, tb);
    return res;
}

static PyObject *put_log_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *msgs, *out;
    Py_ssize_t i;
    (void)module;
    if (nargs != 6 || PL_STATE_CLS == NULL || PUT_MSG == NULL ||
        !Py_IS_TYPE(args[0], (PyTypeObject *)PL_STATE_CLS) || !PyList_CheckExact(args[1]) ||
        !PyDict_CheckExact(args[3]) || !PyList_CheckExact(args[5])) {
        PyErr_SetString(PyExc_TypeError, "put_log_run(state, msgs: list, start, queue_table, "
                                         "staged, out: list) after configure_put_log");
        return NULL;
    }
    msgs = args[1];
    out = args[5];
    i = PyLong_AsSsize_t(args[2]);
    if (i == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (i < 0) {
        i = 0;
    }
    for (; i < PyList_GET_SIZE(msgs); i++) { /* the size each time: a clock may run Python */
        PyObject *msg = Py_NewRef(PyList_GET_ITEM(msgs, i));
        PyObject *res = pl_locked(args[0], msg, args[3], args[4]);
        int appended;
        Py_DECREF(msg);
        if (res == NULL) {
            return NULL;
        }
        if (res == Py_None) {
            Py_DECREF(res);
            break;
        }
        appended = PyList_Append(out, res);
        Py_DECREF(res);
        if (appended < 0) {
            return NULL;
        }
    }
    return PyLong_FromSsize_t(i);
}

#define PUTLOG_METHODS                                                                          \
    {"configure_put_log", (PyCFunction)(void (*)(void))configure_put_log, METH_FASTCALL,        \
     "configure_put_log(state_cls, mapped_file_cls) for put_log."},                             \
        {"put_log", (PyCFunction)(void (*)(void))put_log, METH_FASTCALL,                        \
         "CommitLog.put_message's locked part (put_one + bookkeeping), or None before any "     \
         "effect."},                                                                            \
        {"put_log_run", (PyCFunction)(void (*)(void))put_log_run, METH_FASTCALL,                \
         "put_log of msgs[start:] with the lock held, into out, to the first declined; its "    \
         "index."},
