/* ariane._speedups: MessageStore.put_message's common case without a Python frame (issue 18:
 * a single ASYNC_FLUSH put in one C call from the caller; RocketMQ
 * DefaultMessageStore.asyncPutMessage's checks, then CommitLog.asyncPutMessage).
 *
 *   store_put_method(fallback) -> a method for MessageStore.put_message
 *   message_inner(topic, queue_id, ..., properties_string) -> MessageInner
 *
 * How it works. The object returned is a method descriptor of the type below
 * (Py_TPFLAGS_METHOD_DESCRIPTOR, like a Python function): `store.put_message(msg)` calls it with
 * (store, msg) and no bound method, `store.put_message` binds it as a function binds. It reads
 * the store's `_direct`: None, or the tuple (state, lock, queue_table, staged, reput) that
 * store/put_direct.py's direct_put makes only while the store is running, ASYNC_FLUSH,
 * writeable and not a replica, with a plain CommitLog and its compiled put. With the tuple it
 * makes put_log's call (_speedups_putlog.h: the put lock, the store time, the record, the
 * bookkeeping) and, when a record was stored, wakes the reput as put_message does (`wakeup()`
 * when its `idle` is true and its `claimed` false). Everything else goes to `fallback(store, msg)`, the Python
 * put_message (the reference, and the only path of the pure build), which makes the whole put
 * again from its start: no tuple; put_log declining (None: before any effect); a refusal
 * (msg_num 0: nothing written; the fallback refuses it again and counts it in
 * put_failed_times); an OSError (the fallback's own put raises it again and reports it as
 * put_message does). Other errors propagate, as from put_message.
 *
 * message_inner is MessageInner(*args) with its twelve fields given positionally (the send
 * processor's and the store bench's call), without the dataclass's Python __init__: the
 * object allocated and its slots set in field order (put_slots' offsets, configure_put), as
 * send_prepare_run allocates its messages; any other call (fewer arguments, keywords) is the
 * class's own. The pure twin is the class itself
 * (store/put_native.py's new_inner).
 *
 * Included by _speedups.c after _speedups_putlog.h (put_log, PUT_RESULT_AT).
 */

typedef struct {
    PyObject_HEAD
    PyObject *fallback; /* the Python put_message */
    vectorcallfunc vectorcall;
} StorePut;

static PyObject *SP_K_DIRECT, *SP_K_IDLE, *SP_K_CLAIMED, *SP_K_WAKEUP;

/* the truth of reput.<name>: 1, 0, or -1 with an error */
static int sp_flag(PyObject *reput, PyObject *name) {
    PyObject *v = PyObject_GetAttr(reput, name);
    int on;
    if (v == NULL) {
        return -1;
    }
    on = v == Py_True ? 1 : v == Py_False ? 0 : PyObject_IsTrue(v);
    Py_DECREF(v);
    return on;
}

/* wake the reput when its `idle` is true and its `claimed` false (the event loop claimed the
 * next round: it dispatches this put itself): 0, or -1 with an error */
static int sp_wake(PyObject *reput) {
    PyObject *r;
    int on = sp_flag(reput, SP_K_IDLE);
    if (on <= 0) {
        return on;
    }
    if ((on = sp_flag(reput, SP_K_CLAIMED)) != 0) {
        return on < 0 ? -1 : 0;
    }
    if ((r = PyObject_CallMethodNoArgs(reput, SP_K_WAKEUP)) == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* the put by put_log with the store's `_direct` tuple: the PutResult, NULL with an error, or
 * Py_None (a new reference) when the fallback decides */
static PyObject *sp_direct(PyObject *store, PyObject *msg) {
    PyObject *direct = PyObject_GetAttr(store, SP_K_DIRECT), *args[5], *res, *num;
    Py_ssize_t i;
    if (direct == NULL) {
        return NULL;
    }
    if (!PyTuple_CheckExact(direct) || PyTuple_GET_SIZE(direct) != 5) {
        Py_DECREF(direct);
        Py_RETURN_NONE;
    }
    args[0] = PyTuple_GET_ITEM(direct, 0); /* state */
    args[1] = msg;
    for (i = 2; i < 5; i++) { /* lock, queue table, staged */
        args[i] = PyTuple_GET_ITEM(direct, i - 1);
    }
    res = put_log(NULL, args, 5);
    if (res == NULL) {
        Py_DECREF(direct);
        if (PyErr_ExceptionMatches(PyExc_OSError)) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        return NULL;
    }
    num = res == Py_None ? NULL : PL_SLOT(res, PUT_RESULT_AT[5]); /* msg_num */
    if (num == NULL || !PyLong_CheckExact(num) || Py_SIZE(num) == 0) { /* declined, refused */
        Py_DECREF(res);
        Py_DECREF(direct);
        Py_RETURN_NONE;
    }
    if (sp_wake(PyTuple_GET_ITEM(direct, 4)) < 0) {
        Py_DECREF(res);
        res = NULL;
    }
    Py_DECREF(direct);
    return res;
}

static PyObject *sp_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *res;
    if (nargs == 2 && kw == NULL) {
        if ((res = sp_direct(args[0], args[1])) != Py_None) {
            return res;
        }
        Py_DECREF(res);
    }
    return PyObject_Vectorcall(((StorePut *)self)->fallback, args, nargsf, kw);
}

static PyObject *sp_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static void sp_dealloc(PyObject *self) {
    Py_XDECREF(((StorePut *)self)->fallback);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject StorePutType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ariane._speedups.StorePut",
    .tp_basicsize = sizeof(StorePut),
    .tp_dealloc = sp_dealloc,
    .tp_vectorcall_offset = offsetof(StorePut, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "MessageStore.put_message: the common put in C, else the Python method.",
    .tp_descr_get = sp_get,
};

static PyObject *store_put_method(PyObject *module, PyObject *fallback) {
    StorePut *sp;
    (void)module;
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "store_put_method(fallback): a callable");
        return NULL;
    }
    if (SP_K_DIRECT == NULL) {
        SP_K_DIRECT = PyUnicode_InternFromString("_direct");
        SP_K_IDLE = PyUnicode_InternFromString("idle");
        SP_K_CLAIMED = PyUnicode_InternFromString("claimed");
        SP_K_WAKEUP = PyUnicode_InternFromString("wakeup");
        if (SP_K_DIRECT == NULL || SP_K_IDLE == NULL || SP_K_CLAIMED == NULL ||
            SP_K_WAKEUP == NULL) {
            return NULL;
        }
    }
    if (StorePutType.tp_dict == NULL && PyType_Ready(&StorePutType) < 0) {
        return NULL;
    }
    if ((sp = PyObject_New(StorePut, &StorePutType)) == NULL) {
        return NULL;
    }
    Py_INCREF(fallback);
    sp->fallback = fallback;
    sp->vectorcall = sp_call;
    return (PyObject *)sp;
}

static PyObject *message_inner(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    PyObject *inner;
    Py_ssize_t i;
    (void)module;
    if (PUT_MSG == NULL) {
        PyErr_SetString(PyExc_TypeError, "message_inner after configure_put");
        return NULL;
    }
    if (nargs != M_COUNT || kwnames != NULL) { /* another call: the class's own */
        return PyObject_Vectorcall(PUT_MSG, args, nargs, kwnames);
    }
    inner = ((PyTypeObject *)PUT_MSG)->tp_alloc((PyTypeObject *)PUT_MSG, 0);
    if (inner == NULL) {
        return NULL;
    }
    for (i = 0; i < M_COUNT; i++) {
        Py_INCREF(args[i]);
        *(PyObject **)((char *)inner + PUT_MSG_AT[i]) = args[i];
    }
    return inner;
}

#define STOREPUT_METHODS                                                                        \
    {"store_put_method", (PyCFunction)store_put_method, METH_O,                                 \
     "A method for MessageStore.put_message: the common put in C, else fallback(store, msg)."}, \
        {"message_inner", (PyCFunction)(void (*)(void))message_inner,                           \
         METH_FASTCALL | METH_KEYWORDS,                                                         \
         "MessageInner(*fields), its twelve fields positional, without its Python __init__."},
