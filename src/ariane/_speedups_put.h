/* ariane._speedups: one message put into the CommitLog in two C calls (issue 18: `ariane bench
 * store`'s single writer), the compiled twins of CommitLog.prepare_one_py / write_one_py
 * (RocketMQ CommitLog.asyncPutMessage with MessageExtEncoder.encode, for the common shape).
 *
 *   configure_put(prepared_cls, request_cls, result_cls, put_ok, message_cls, host_cls,
 *                 header_v4, schedule_topic, v6_flags) -> None
 *   put_prepare(msg, topics, tag_codes, max_props, max_size) -> PreparedOne | None
 *   put_write(one, mm, pos, phys, store_ts, queue_table, staged) -> PutResult | None
 *   put_one(msg, topics, tag_codes, max_props, max_size, mm, pos, phys, room, store_ts,
 *           queue_table, staged) -> PutResult | None
 *
 * How it works. put_prepare does what prepare_one does for a message of the common shape: its
 * topic already in the CommitLog's topic cache `topics` (a legal one), IPv4 born and store
 * hosts, exact ints in range, exact str properties (the map, or `properties_string`) that are
 * valid UTF-8 and fit `max_props`, a bytes body, a size under `max_size`, a TAGS value whose
 * code is in the cache `tag_codes` (or none), a topic other than SCHEDULE_TOPIC_XXXX. It returns
 * the same PreparedOne tuple (the v4 header struct, magic, sysFlag without host bits, stored
 * size, BODYCRC = zlib CRC-32 & 0x7FFFFFFF by the slice-by-8 of _speedups_batchput.h, the bytes
 * after the body, the tags code), allocated with the class and filled. put_write does what
 * write_one does for such a PreparedOne (any PreparedOne with the v4 header outside the
 * schedule topic): the queue offset from `queue_table` (0 for PREPARED and ROLLBACK records,
 * which do not advance it), the record written at `pos` of the writable buffer `mm`, the
 * DispatchRequest appended to `staged` and the PutResult built in place (its __slots__ filled
 * through their offsets, no __init__ call). Anything else returns None before writing and the
 * pure methods, the reference, decide (and say why a message is refused). put_one is both in
 * one call for CommitLog.put_message under its lock: the same checks and the same writes
 * (put_write_parts), without the PreparedOne in between and without its `rest` bytes (the
 * record's tail is copied from the topic cache's bytes and the properties' UTF-8), and None
 * also when the record is longer than `room` (the file must roll first).
 *
 * Included by _speedups.c after _speedups_batchput.h (bp_crc32, bp_put32, bp_put64).
 */

#define PUT_V4_HEADER 88 /* the record up to and including BODYLENGTH with IPv4 hosts */
#define PUT_RESULT_SLOTS 10

static PyObject *PUT_PREPARED, *PUT_REQUEST, *PUT_RESULT, *PUT_OK, *PUT_MSG, *PUT_HOST;
static PyObject *PUT_HEADER, *PUT_SCHEDULE, *PUT_K_TAGS, *PUT_K_KEYS, *PUT_K_UNIQ, *PUT_ONE;
static PyObject *PUT_K_APPEND;
/* collections.deque and its `append` (the method descriptor, called without a lookup when
 * `staged` is an exact deque) */
static PyObject *PUT_DEQUE, *PUT_DEQUE_APPEND;
static long PUT_V6_FLAGS;
/* MessageInner's slots, in this order */
static const char *const PUT_MSG_NAMES[] = {
    "topic", "queue_id", "body", "flag", "properties", "sys_flag", "born_timestamp_ms",
    "born_host", "store_host", "reconsume_times", "prepared_transaction_offset",
    "properties_string",
};
enum { M_TOPIC, M_QID, M_BODY, M_FLAG, M_PROPS, M_SYSFLAG, M_BORN_TS, M_BORN, M_STORE,
       M_RECONSUME, M_PREPARED, M_PROPS_STR, M_COUNT };
/* PutResult's slots, in the order put_write fills them */
static const char *const PUT_RESULT_NAMES[PUT_RESULT_SLOTS] = {
    "status", "wrote_offset", "wrote_bytes", "store_timestamp_ms", "logics_offset", "msg_num",
    "store_host", "store_port", "offsets", "remark",
};
static Py_ssize_t PUT_MSG_AT[M_COUNT], PUT_RESULT_AT[PUT_RESULT_SLOTS];

/* the offset of each __slots__ member `names` of `cls` into `at`; 0 or -1 with an error */
static int put_slots(PyObject *cls, const char *const *names, Py_ssize_t n, Py_ssize_t *at) {
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttrString(cls, names[i]);
        int ok = d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        if (ok) {
            at[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        }
        Py_XDECREF(d);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "configure_put: %s is not a slot", names[i]);
            return -1;
        }
    }
    return 0;
}

static PyObject *configure_put(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject **slots[8] = {&PUT_PREPARED, &PUT_REQUEST, &PUT_RESULT, &PUT_OK,
                           &PUT_MSG, &PUT_HOST, &PUT_HEADER, &PUT_SCHEDULE};
    int i;
    (void)module;
    if (nargs != 9 || !PyType_Check(args[0]) || !PyType_Check(args[1]) ||
        !PyType_Check(args[2]) || !PyType_Check(args[4]) || !PyType_Check(args[5]) ||
        !PyUnicode_CheckExact(args[7])) {
        PyErr_SetString(PyExc_TypeError, "configure_put(prepared_cls, request_cls, result_cls, "
                                         "put_ok, message_cls, host_cls, header_v4, "
                                         "schedule_topic, v6_flags)");
        return NULL;
    }
    for (i = 0; i < 2; i++) {
        PyTypeObject *t = (PyTypeObject *)args[i];
        if (!PyType_IsSubtype(t, &PyTuple_Type) || t->tp_dictoffset != 0) {
            PyErr_SetString(PyExc_TypeError, "configure_put: NamedTuple classes expected");
            return NULL;
        }
    }
    PUT_V6_FLAGS = PyLong_AsLong(args[8]);
    if ((PUT_V6_FLAGS == -1 && PyErr_Occurred()) ||
        put_slots(args[2], PUT_RESULT_NAMES, PUT_RESULT_SLOTS, PUT_RESULT_AT) < 0 ||
        put_slots(args[4], PUT_MSG_NAMES, M_COUNT, PUT_MSG_AT) < 0) {
        return NULL;
    }
    if (PUT_K_TAGS == NULL) {
        PUT_K_TAGS = PyUnicode_InternFromString("TAGS");
        PUT_K_KEYS = PyUnicode_InternFromString("KEYS");
        PUT_K_UNIQ = PyUnicode_InternFromString("UNIQ_KEY");
        PUT_K_APPEND = PyUnicode_InternFromString("append");
        PUT_ONE = PyLong_FromLong(1);
        if (PUT_K_TAGS == NULL || PUT_K_KEYS == NULL || PUT_K_UNIQ == NULL || PUT_ONE == NULL ||
            PUT_K_APPEND == NULL) {
            return NULL;
        }
    }
    if (PUT_DEQUE == NULL) {
        PyObject *mod = PyImport_ImportModule("collections");
        PUT_DEQUE = mod != NULL ? PyObject_GetAttrString(mod, "deque") : NULL;
        Py_XDECREF(mod);
        PUT_DEQUE_APPEND = PUT_DEQUE != NULL ? PyObject_GetAttr(PUT_DEQUE, PUT_K_APPEND) : NULL;
        if (PUT_DEQUE_APPEND == NULL) {
            Py_CLEAR(PUT_DEQUE);
            return NULL;
        }
    }
    for (i = 0; i < 8; i++) {
        Py_INCREF(args[i]);
        Py_XSETREF(*slots[i], args[i]);
    }
    Py_RETURN_NONE;
}

/* slot i of msg (borrowed; NULL when unset) */
#define PUT_FIELD(msg, i) (*(PyObject **)((char *)(msg) + PUT_MSG_AT[i]))

/* an exact int in [lo, hi] into *v: 1 when it is one, 0 when not (no error left set) */
static int put_int(PyObject *o, int64_t lo, int64_t hi, int64_t *v) {
    int overflow = 0;
    long long x;
    if (o == NULL || !PyLong_CheckExact(o)) {
        return 0;
    }
#if PY_VERSION_HEX >= 0x030C0000
    if (PyUnstable_Long_IsCompact((PyLongObject *)o)) { /* one digit: read it in place */
        x = (long long)PyUnstable_Long_CompactValue((PyLongObject *)o);
        *v = (int64_t)x;
        return x >= lo && x <= hi;
    }
#else
    if (Py_SIZE(o) >= -1 && Py_SIZE(o) <= 1) { /* one digit (or zero): read it in place */
        x = Py_SIZE(o) ? (long long)Py_SIZE(o) * (long long)((PyLongObject *)o)->ob_digit[0] : 0;
        *v = (int64_t)x;
        return x >= lo && x <= hi;
    }
    if ((Py_SIZE(o) == 2 || Py_SIZE(o) == -2) && PyLong_SHIFT <= 31) {
        /* two digits (a millisecond timestamp, an offset past 1 GiB): read them in place */
        const digit *d = ((PyLongObject *)o)->ob_digit;
        x = (long long)(((unsigned long long)d[1] << PyLong_SHIFT) | d[0]);
        if (Py_SIZE(o) < 0) {
            x = -x;
        }
        *v = (int64_t)x;
        return x >= lo && x <= hi;
    }
#endif
    x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *v = (int64_t)x;
    return x >= lo && x <= hi;
}

/* a HostPort with a 4-byte address and an int32 port: 1 with its parts, else 0 */
static int put_host(PyObject *h, const char **addr, int64_t *port) {
    PyObject *a;
    if (h == NULL || !Py_IS_TYPE(h, (PyTypeObject *)PUT_HOST) || PyTuple_GET_SIZE(h) != 2) {
        return 0;
    }
    a = PyTuple_GET_ITEM(h, 0);
    if (!PyBytes_CheckExact(a) || PyBytes_GET_SIZE(a) != 4) {
        return 0;
    }
    *addr = PyBytes_AS_STRING(a);
    return put_int(PyTuple_GET_ITEM(h, 1), INT32_MIN, INT32_MAX, port);
}

/* the parts of a record put_write_parts writes (from a PreparedOne, or from the message for
 * put_one) */
typedef struct {
    PyObject *msg, *topic, *body, *rest, *props, *tags_code, *store_addr_obj, *store_port_obj;
    PyObject *sys_flag_obj, *total_obj; /* the DispatchRequest's sysFlag and size */
    const char *born_addr, *store_addr;
    const char *tail, *props_data; /* without `rest`: topic bytes and properties (put_one) */
    Py_ssize_t tail_len, props_len;
    PyObject *props_owned; /* the encoded map's bytes when props_data points into them */
    int64_t magic, sys_flag, total, crc, qid, flag, born_ts, born_port, store_port, reconsume,
        prepared;
} PutOne;

/* the UTF-8 of the properties into p->props_data / props_len: the text's own UTF-8 when
 * `text` is given (no copy), else k\x01v\x02 per entry of the exact-str map into a new bytes
 * object kept in p->props_owned; 1, or 0 when they are not of the shape (the pure path
 * decides), or -1 with an error */
static int put_props(PyObject *props, PyObject *text, PutOne *p) {
    Py_ssize_t pos = 0, n = 0, len;
    PyObject *k, *v, *out;
    const char *s;
    char *w;
    p->props_owned = NULL;
    if (text != Py_None) {
        if (!PyUnicode_CheckExact(text) || (s = PyUnicode_AsUTF8AndSize(text, &len)) == NULL) {
            PyErr_Clear();
            return 0;
        }
        p->props_data = s; /* lives as long as the message's text */
        p->props_len = len;
        return 1;
    }
    while (PyDict_Next(props, &pos, &k, &v)) {
        Py_ssize_t kl, vl;
        if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v) ||
            PyUnicode_AsUTF8AndSize(k, &kl) == NULL || PyUnicode_AsUTF8AndSize(v, &vl) == NULL) {
            PyErr_Clear();
            return 0;
        }
        n += kl + vl + 2;
    }
    if ((out = PyBytes_FromStringAndSize(NULL, n)) == NULL) {
        return -1;
    }
    w = PyBytes_AS_STRING(out);
    pos = 0;
    while (PyDict_Next(props, &pos, &k, &v)) {
        Py_ssize_t kl, vl;
        const char *ks = PyUnicode_AsUTF8AndSize(k, &kl), *vs = PyUnicode_AsUTF8AndSize(v, &vl);
        if (n < kl + vl + 2) { /* the map changed under us: cannot happen with the GIL held */
            Py_DECREF(out);
            return 0;
        }
        memcpy(w, ks, (size_t)kl);
        w[kl] = '\x01';
        memcpy(w + kl + 1, vs, (size_t)vl);
        w[kl + 1 + vl] = '\x02';
        w += kl + vl + 2;
        n -= kl + vl + 2;
    }
    p->props_owned = out;
    p->props_data = PyBytes_AS_STRING(out);
    p->props_len = PyBytes_GET_SIZE(out);
    return 1;
}

/* the tags code of props' TAGS: 0 without one, the cached code, or -1 (not cached: the pure
 * path computes and caches it); *code is a new reference */
static int put_tags(PyObject *props, PyObject *tag_codes, PyObject **code) {
    PyObject *tags = PyDict_GetItemWithError(props, PUT_K_TAGS);
    if (tags == NULL || (PyUnicode_CheckExact(tags) && PyUnicode_GET_LENGTH(tags) == 0)) {
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return -1;
        }
        *code = PyLong_FromLong(0);
        return *code ? 0 : -1;
    }
    if (!PyUnicode_CheckExact(tags) ||
        (*code = PyDict_GetItemWithError(tag_codes, tags)) == NULL ||
        !PyLong_CheckExact(*code)) {
        PyErr_Clear();
        return -1;
    }
    Py_INCREF(*code);
    return 0;
}


/* the shape checks of put_prepare / put_one; 1 when msg is of the common shape, with its ints,
 * hosts and magic in p (read once: put_one writes from them) */
static int put_shape(PyObject *msg, PyObject *topics, PyObject **tail, PutOne *p) {
    static const int ints[5] = {M_QID, M_FLAG, M_SYSFLAG, M_RECONSUME, M_BORN_TS};
    int64_t *const into[5] = {&p->qid, &p->flag, &p->sys_flag, &p->reconsume, &p->born_ts};
    PyObject *topic = PUT_FIELD(msg, M_TOPIC), *props = PUT_FIELD(msg, M_PROPS);
    PyObject *body = PUT_FIELD(msg, M_BODY), *text = PUT_FIELD(msg, M_PROPS_STR);
    int i;
    if (topic == NULL || !PyUnicode_CheckExact(topic) || body == NULL ||
        !PyBytes_CheckExact(body) || props == NULL || !PyDict_CheckExact(props) ||
        text == NULL || PyUnicode_Compare(topic, PUT_SCHEDULE) == 0) {
        PyErr_Clear();
        return 0;
    }
    *tail = PyDict_GetItemWithError(topics, topic);
    if (*tail == NULL || !PyTuple_CheckExact(*tail) || PyTuple_GET_SIZE(*tail) != 2 ||
        !PyBytes_CheckExact(PyTuple_GET_ITEM(*tail, 0)) ||
        !put_int(PyTuple_GET_ITEM(*tail, 1), INT32_MIN, INT32_MAX, &p->magic)) {
        PyErr_Clear();
        return 0;
    }
    if (!put_host(PUT_FIELD(msg, M_BORN), &p->born_addr, &p->born_port) ||
        !put_host(PUT_FIELD(msg, M_STORE), &p->store_addr, &p->store_port) ||
        !put_int(PUT_FIELD(msg, M_PREPARED), INT64_MIN, INT64_MAX, &p->prepared)) {
        return 0;
    }
    for (i = 0; i < 5; i++) {
        int64_t lo = i == 0 ? 0 : (i == 4 ? INT64_MIN : INT32_MIN);
        int64_t hi = i == 4 ? INT64_MAX : INT32_MAX;
        if (!put_int(PUT_FIELD(msg, ints[i]), lo, hi, into[i])) {
            return 0;
        }
    }
    return 1;
}

/* a new tuple of `cls` owning the n items (each a new reference or NULL); NULL on error */
static PyObject *put_tuple(PyObject *cls, PyObject **items, Py_ssize_t n);

/* max_props and max_size from args[3] and args[4] (put_prepare's and put_one's); 0, or -1 with
 * an error */
static int put_limits(PyObject *const *args, Py_ssize_t *max_props, Py_ssize_t *max_size) {
    *max_props = PyLong_AsSsize_t(args[3]);
    *max_size = *max_props == -1 && PyErr_Occurred() ? -1 : PyLong_AsSsize_t(args[4]);
    return PyErr_Occurred() ? -1 : 0;
}

/* what put_prepare and put_one share: the shape checks, the properties' UTF-8, the stored size
 * (at most `room` as well), the tags code (p->tags_code, a new reference), the sysFlag without
 * host bits and the BODYCRC, all into p; 1, or 0 (None: the pure path decides; nothing left to
 * free), or -1 with an error. On 1 the caller frees p->props_owned and p->tags_code. */
static int put_encode(PyObject *msg, PyObject *topics, PyObject *tag_codes, Py_ssize_t max_props,
                      Py_ssize_t max_size, int64_t room, PutOne *p) {
    PyObject *tail, *body;
    Py_ssize_t total;
    int ok;
    if (!Py_IS_TYPE(msg, (PyTypeObject *)PUT_MSG) || !put_shape(msg, topics, &tail, p)) {
        return 0;
    }
    body = PUT_FIELD(msg, M_BODY);
    if ((ok = put_props(PUT_FIELD(msg, M_PROPS), PUT_FIELD(msg, M_PROPS_STR), p)) <= 0) {
        return ok;
    }
    p->tail_len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(tail, 0));
    total = PUT_V4_HEADER + p->tail_len + 2 + PyBytes_GET_SIZE(body) + p->props_len;
    if (p->props_len > max_props || p->props_len > 0x7FFF || total > max_size ||
        total > INT32_MAX || total > room ||
        put_tags(PUT_FIELD(msg, M_PROPS), tag_codes, &p->tags_code) < 0) {
        Py_CLEAR(p->props_owned);
        return 0;
    }
    if (!BP_CRC_READY) {
        bp_crc_init();
    }
    p->msg = msg;
    p->topic = PUT_FIELD(msg, M_TOPIC);
    p->body = body;
    p->props = PUT_FIELD(msg, M_PROPS);
    p->rest = NULL;
    p->tail = PyBytes_AS_STRING(PyTuple_GET_ITEM(tail, 0));
    p->sys_flag &= ~PUT_V6_FLAGS;
    p->total = total;
    p->crc = (int64_t)(bp_crc32((const unsigned char *)PyBytes_AS_STRING(body),
                                PyBytes_GET_SIZE(body)) & 0x7FFFFFFFu);
    return 1;
}

static PyObject *put_prepare(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *rest, *items[8];
    PutOne p;
    Py_ssize_t max_props, max_size;
    char *w;
    int ok;
    (void)module;
    if (nargs != 5 || PUT_MSG == NULL || !PyDict_CheckExact(args[1]) ||
        !PyDict_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "put_prepare(msg, topics, tag_codes, max_props, "
                                         "max_size) after configure_put");
        return NULL;
    }
    if (put_limits(args, &max_props, &max_size) < 0) {
        return NULL;
    }
    ok = put_encode(args[0], args[1], args[2], max_props, max_size, INT64_MAX, &p);
    if (ok <= 0) {
        if (ok < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    rest = PyBytes_FromStringAndSize(NULL, p.tail_len + 2 + p.props_len);
    if (rest != NULL) {
        w = PyBytes_AS_STRING(rest);
        memcpy(w, p.tail, (size_t)p.tail_len);
        w[p.tail_len] = (char)(p.props_len >> 8);
        w[p.tail_len + 1] = (char)p.props_len;
        memcpy(w + p.tail_len + 2, p.props_data, (size_t)p.props_len);
    }
    Py_XDECREF(p.props_owned);
    items[0] = p.msg;
    Py_INCREF(p.msg);
    items[1] = PUT_HEADER;
    Py_INCREF(PUT_HEADER);
    items[2] = PyLong_FromLongLong((long long)p.magic);
    items[3] = PyLong_FromLongLong((long long)p.sys_flag);
    items[4] = PyLong_FromLongLong((long long)p.total);
    items[5] = PyLong_FromLongLong((long long)p.crc);
    items[6] = rest;
    items[7] = p.tags_code; /* owned */
    return put_tuple(PUT_PREPARED, items, 8);
}

static int put_one_parts(PyObject *one, PutOne *p) {
    PyObject *msg, *store;
    Py_ssize_t body_len;
    if (!Py_IS_TYPE(one, (PyTypeObject *)PUT_PREPARED) || PyTuple_GET_SIZE(one) != 8 ||
        PyTuple_GET_ITEM(one, 1) != PUT_HEADER) {
        return 0;
    }
    msg = p->msg = PyTuple_GET_ITEM(one, 0);
    if (!Py_IS_TYPE(msg, (PyTypeObject *)PUT_MSG)) {
        return 0;
    }
    p->topic = PUT_FIELD(msg, M_TOPIC);
    p->body = PUT_FIELD(msg, M_BODY);
    p->props = PUT_FIELD(msg, M_PROPS);
    p->rest = PyTuple_GET_ITEM(one, 6);
    p->tags_code = PyTuple_GET_ITEM(one, 7);
    store = PUT_FIELD(msg, M_STORE);
    if (p->topic == NULL || !PyUnicode_CheckExact(p->topic) || p->body == NULL ||
        !PyBytes_CheckExact(p->body) || p->props == NULL || !PyDict_CheckExact(p->props) ||
        !PyBytes_CheckExact(p->rest) || PyUnicode_Compare(p->topic, PUT_SCHEDULE) == 0) {
        PyErr_Clear();
        return 0;
    }
    body_len = PyBytes_GET_SIZE(p->body);
    if (!put_int(PyTuple_GET_ITEM(one, 2), INT32_MIN, INT32_MAX, &p->magic) ||
        !put_int(PyTuple_GET_ITEM(one, 3), INT32_MIN, INT32_MAX, &p->sys_flag) ||
        !put_int(PyTuple_GET_ITEM(one, 4), INT32_MIN, INT32_MAX, &p->total) ||
        !put_int(PyTuple_GET_ITEM(one, 5), INT32_MIN, INT32_MAX, &p->crc) ||
        p->total != PUT_V4_HEADER + body_len + PyBytes_GET_SIZE(p->rest) ||
        !put_int(PUT_FIELD(msg, M_QID), INT32_MIN, INT32_MAX, &p->qid) ||
        !put_int(PUT_FIELD(msg, M_FLAG), INT32_MIN, INT32_MAX, &p->flag) ||
        !put_int(PUT_FIELD(msg, M_BORN_TS), INT64_MIN, INT64_MAX, &p->born_ts) ||
        !put_int(PUT_FIELD(msg, M_RECONSUME), INT32_MIN, INT32_MAX, &p->reconsume) ||
        !put_int(PUT_FIELD(msg, M_PREPARED), INT64_MIN, INT64_MAX, &p->prepared) ||
        !put_host(PUT_FIELD(msg, M_BORN), &p->born_addr, &p->born_port) ||
        !put_host(store, &p->store_addr, &p->store_port)) {
        return 0;
    }
    p->store_addr_obj = PyTuple_GET_ITEM(store, 0);
    p->store_port_obj = PyTuple_GET_ITEM(store, 1);
    p->sys_flag_obj = PyTuple_GET_ITEM(one, 3);
    p->total_obj = PyTuple_GET_ITEM(one, 4);
    return 1;
}

/* the record of p at w */
static void put_record(unsigned char *w, const PutOne *p, int64_t queue_offset, int64_t phys,
                       int64_t store_ts) {
    Py_ssize_t body_len = PyBytes_GET_SIZE(p->body);
    bp_put32(w, p->total);
    bp_put32(w + 4, p->magic);
    bp_put32(w + 8, p->crc);
    bp_put32(w + 12, p->qid);
    bp_put32(w + 16, p->flag);
    bp_put64(w + 20, queue_offset);
    bp_put64(w + 28, phys);
    bp_put32(w + 36, p->sys_flag);
    bp_put64(w + 40, p->born_ts);
    memcpy(w + 48, p->born_addr, 4);
    bp_put32(w + 52, p->born_port);
    bp_put64(w + 56, store_ts);
    memcpy(w + 64, p->store_addr, 4);
    bp_put32(w + 68, p->store_port);
    bp_put32(w + 72, p->reconsume);
    bp_put64(w + 76, p->prepared);
    bp_put32(w + 84, (int64_t)body_len);
    memcpy(w + PUT_V4_HEADER, PyBytes_AS_STRING(p->body), (size_t)body_len);
    w += PUT_V4_HEADER + body_len;
    if (p->rest != NULL) {
        memcpy(w, PyBytes_AS_STRING(p->rest), (size_t)PyBytes_GET_SIZE(p->rest));
        return;
    }
    memcpy(w, p->tail, (size_t)p->tail_len);
    w[p->tail_len] = (unsigned char)(p->props_len >> 8);
    w[p->tail_len + 1] = (unsigned char)p->props_len;
    memcpy(w + p->tail_len + 2, p->props_data, (size_t)p->props_len);
}

/* a new tuple of `cls` owning the n items (each a new reference or NULL); NULL on error */
static PyObject *put_tuple(PyObject *cls, PyObject **items, Py_ssize_t n) {
    PyObject *out = ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, n);
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        if (items[i] == NULL || out == NULL) {
            Py_XDECREF(items[i]);
            Py_CLEAR(out);
            continue;
        }
        PyTuple_SET_ITEM(out, i, items[i]);
    }
    return out;
}

#if PY_VERSION_HEX < 0x030D0000 /* exported through 3.12 */
#define PUT_DICT_GET(d, k, h) _PyDict_GetItem_KnownHash((d), (k), (h))
#define PUT_DICT_SET(d, k, v, h) _PyDict_SetItem_KnownHash((d), (k), (v), (h))
#else
#define PUT_DICT_GET(d, k, h) ((void)(h), PyDict_GetItemWithError((d), (k)))
#define PUT_DICT_SET(d, k, v, h) ((void)(h), PyDict_SetItem((d), (k), (v)))
#endif

/* The queue table's key (topic, queue id) of a put, one object per pair kept here (topic ->
 * list of keys by queue id, queue ids 0-1023, at most PUT_KEYS_MAX topics before it starts
 * over): the table finds its own key by identity (no tuple made, compared and freed per put)
 * when it was stored from here, and by equality as before otherwise (a table loaded from
 * disk). A new reference, or NULL with an error. */
#define PUT_KEYS_MAX 4096
static PyObject *PUT_KEYS;

static PyObject *put_key(PyObject *topic, PyObject *qid_obj, int64_t qid) {
    PyObject *row, *key;
    Py_ssize_t n;
    if (qid < 0 || qid >= 1024) {
        return PyTuple_Pack(2, topic, qid_obj);
    }
    if (PUT_KEYS == NULL && (PUT_KEYS = PyDict_New()) == NULL) {
        return NULL;
    }
    row = PyDict_GetItemWithError(PUT_KEYS, topic);
    if (row == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        if (PyDict_GET_SIZE(PUT_KEYS) >= PUT_KEYS_MAX) {
            PyDict_Clear(PUT_KEYS);
        }
        if ((row = PyList_New(0)) == NULL || PyDict_SetItem(PUT_KEYS, topic, row) < 0) {
            Py_XDECREF(row);
            return NULL;
        }
        Py_DECREF(row); /* the cache's */
    }
    n = PyList_GET_SIZE(row);
    if (qid < n && (key = PyList_GET_ITEM(row, qid)) != Py_None) {
        Py_INCREF(key);
        return key;
    }
    for (; n <= qid; n++) {
        if (PyList_Append(row, Py_None) < 0) {
            return NULL;
        }
    }
    if ((key = PyTuple_Pack(2, topic, qid_obj)) == NULL) {
        return NULL;
    }
    Py_INCREF(key);
    PyList_SetItem(row, qid, key); /* steals one; replaces None */
    return key;
}

/* the PutResult of one record stored at phys; its ints are the DispatchRequest's (the same
 * values: one object each, borrowed here) */
static PyObject *put_result(const PutOne *p, PyObject *phys, PyObject *store_ts, PyObject *qoff) {
    PyObject *vals[PUT_RESULT_SLOTS], *offsets = PyTuple_New(1), *out = NULL;
    int i;
    vals[0] = PUT_OK;
    Py_INCREF(PUT_OK);
    vals[1] = phys;
    vals[2] = p->total_obj;
    vals[3] = store_ts;
    vals[4] = qoff;
    for (i = 1; i < 5; i++) {
        Py_XINCREF(vals[i]);
    }
    vals[5] = PUT_ONE;
    Py_INCREF(PUT_ONE);
    vals[6] = p->store_addr_obj;
    Py_INCREF(vals[6]);
    vals[7] = p->store_port_obj;
    Py_INCREF(vals[7]);
    vals[8] = offsets;
    vals[9] = Py_None;
    Py_INCREF(Py_None);
    if (offsets != NULL && vals[1] != NULL) {
        Py_INCREF(vals[1]);
        PyTuple_SET_ITEM(offsets, 0, vals[1]);
        out = ((PyTypeObject *)PUT_RESULT)->tp_alloc((PyTypeObject *)PUT_RESULT, 0);
    }
    for (i = 0; i < PUT_RESULT_SLOTS; i++) {
        if (out != NULL && vals[i] != NULL) {
            *(PyObject **)((char *)out + PUT_RESULT_AT[i]) = vals[i]; /* steals */
        } else {
            Py_XDECREF(vals[i]);
        }
    }
    for (i = 0; out != NULL && i < PUT_RESULT_SLOTS; i++) {
        if (vals[i] == NULL) {
            Py_CLEAR(out);
        }
    }
    return out;
}

/* the write of put_write / put_one for the parts p: the PutResult, or None before any effect,
 * or NULL with an error */
static PyObject *put_write_parts(const PutOne *pp, PyObject *mm, int64_t pos, int64_t phys,
                                 int64_t store_ts, PyObject *table, PyObject *staged) {
    PyObject *key = NULL, *qobj = NULL, *next = NULL, *req = NULL, *res = NULL;
    PyObject *items[11];
    PutOne p = *pp;
    Py_buffer view;
    int64_t qoff = 0;
    Py_hash_t hash = -1;
    int normal, tx;
    tx = (int)(p.sys_flag & 0xC);
    normal = tx != 0x4 && tx != 0xC;
    if (normal) {
        key = put_key(p.topic, PUT_FIELD(p.msg, M_QID), p.qid);
        if (key == NULL || (hash = PyObject_Hash(key)) == -1) {
            Py_XDECREF(key);
            return NULL;
        }
        qobj = PUT_DICT_GET(table, key, hash); /* the key hashed once for the get and the set */
        if ((qobj == NULL && PyErr_Occurred()) ||
            (qobj != NULL && !put_int(qobj, INT64_MIN, INT64_MAX - 1, &qoff))) {
            PyErr_Clear();
            Py_DECREF(key);
            Py_RETURN_NONE;
        }
    }
    if (PyObject_GetBuffer(mm, &view, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        Py_XDECREF(key);
        Py_RETURN_NONE;
    }
    if (pos > view.len || p.total > view.len - pos) {
        PyBuffer_Release(&view);
        Py_XDECREF(key);
        Py_RETURN_NONE;
    }
    items[0] = p.topic;
    items[1] = PUT_FIELD(p.msg, M_QID);
    items[4] = p.tags_code;
    items[9] = p.sys_flag_obj;
    items[10] = p.props;
    Py_INCREF(items[0]);
    Py_INCREF(items[1]);
    Py_INCREF(items[4]);
    Py_INCREF(items[9]);
    Py_INCREF(items[10]);
    items[2] = PyLong_FromLongLong((long long)phys);
    items[3] = p.total_obj;
    Py_INCREF(items[3]);
    items[5] = PyLong_FromLongLong((long long)store_ts);
    items[6] = PyLong_FromLongLong((long long)qoff);
    items[7] = dsp_get(p.props, PUT_K_KEYS);
    items[8] = dsp_get(p.props, PUT_K_UNIQ);
    res = items[2] && items[5] && items[6] ? put_result(&p, items[2], items[5], items[6]) : NULL;
    req = put_tuple(PUT_REQUEST, items, 11); /* steals the items */
    if (req == NULL) {
        Py_CLEAR(res);
    } else { /* no cycle goes through it (str, int, None and the message's str map): the
              * collector need not walk the requests waiting for dispatch */
        PyObject_GC_UnTrack(req);
    }
    next = normal && res ? PyLong_FromLongLong((long long)(qoff + 1)) : NULL;
    if (res == NULL || (normal && (next == NULL || PUT_DICT_SET(table, key, next, hash) < 0))) {
        Py_CLEAR(res);
        goto done;
    }
    put_record((unsigned char *)view.buf + pos, &p, qoff, phys, store_ts);
    {
        PyObject *call[2] = {staged, req};
        PyObject *r = Py_IS_TYPE(staged, (PyTypeObject *)PUT_DEQUE)
                          ? PyObject_Vectorcall(PUT_DEQUE_APPEND, call, 2, NULL)
                          : PyObject_CallMethodOneArg(staged, PUT_K_APPEND, req);
        if (r == NULL) {
            Py_CLEAR(res);
        }
        Py_XDECREF(r);
    }
done:
    PyBuffer_Release(&view);
    Py_XDECREF(key);
    Py_XDECREF(next);
    Py_XDECREF(req);
    return res;
}

static PyObject *put_write(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PutOne p;
    int64_t pos, phys, store_ts;
    (void)module;
    if (nargs != 7 || PUT_MSG == NULL || !PyDict_CheckExact(args[5])) {
        PyErr_SetString(PyExc_TypeError, "put_write(one, mm, pos, phys, store_ts, queue_table, "
                                         "staged) after configure_put");
        return NULL;
    }
    if (!put_one_parts(args[0], &p) || !put_int(args[2], 0, INT64_MAX, &pos) ||
        !put_int(args[3], INT64_MIN, INT64_MAX, &phys) ||
        !put_int(args[4], INT64_MIN, INT64_MAX, &store_ts)) {
        Py_RETURN_NONE;
    }
    return put_write_parts(&p, args[1], pos, phys, store_ts, args[5], args[6]);
}

/* put_one's work once its arguments are read (also put_log's): the PutResult, or None
 * before any effect, or NULL with an error */
static PyObject *put_one_at(PyObject *msg, PyObject *topics, PyObject *tag_codes,
                            Py_ssize_t max_props, Py_ssize_t max_size, PyObject *mm, int64_t pos,
                            int64_t phys, int64_t room, int64_t store_ts, PyObject *table,
                            PyObject *staged) {
    PyObject *store, *res = NULL;
    PutOne p;
    int ok = put_encode(msg, topics, tag_codes, max_props, max_size, room, &p);
    if (ok <= 0) {
        if (ok < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    store = PUT_FIELD(msg, M_STORE);
    p.sys_flag_obj = PyLong_FromLongLong((long long)p.sys_flag);
    p.total_obj = PyLong_FromLongLong((long long)p.total);
    if (p.sys_flag_obj != NULL && p.total_obj != NULL) { /* the ints: read by put_shape */
        p.store_addr_obj = PyTuple_GET_ITEM(store, 0);
        p.store_port_obj = PyTuple_GET_ITEM(store, 1);
        res = put_write_parts(&p, mm, pos, phys, store_ts, table, staged);
    }
    Py_XDECREF(p.sys_flag_obj);
    Py_XDECREF(p.total_obj);
    Py_XDECREF(p.props_owned);
    Py_DECREF(p.tags_code);
    return res;
}

/* put_one(msg, topics, tag_codes, max_props, max_size, mm, pos, phys, room, store_ts,
 * queue_table, staged): put_prepare and put_write in one call, without the PreparedOne and
 * its `rest` bytes (the record's tail is copied from the topic cache and the properties);
 * None before any effect when put_prepare would say None or the record is longer than `room` */
static PyObject *put_one(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    int64_t pos, phys, room, store_ts;
    Py_ssize_t max_props, max_size;
    (void)module;
    if (nargs != 12 || PUT_MSG == NULL || !PyDict_CheckExact(args[1]) ||
        !PyDict_CheckExact(args[2]) || !PyDict_CheckExact(args[10])) {
        PyErr_SetString(PyExc_TypeError, "put_one(msg, topics, tag_codes, max_props, max_size, "
                                         "mm, pos, phys, room, store_ts, queue_table, staged) "
                                         "after configure_put");
        return NULL;
    }
    if (put_limits(args, &max_props, &max_size) < 0) {
        return NULL;
    }
    if (!put_int(args[6], 0, INT64_MAX, &pos) || !put_int(args[7], INT64_MIN, INT64_MAX, &phys) ||
        !put_int(args[8], INT64_MIN, INT64_MAX, &room) ||
        !put_int(args[9], INT64_MIN, INT64_MAX, &store_ts)) {
        Py_RETURN_NONE;
    }
    return put_one_at(args[0], args[1], args[2], max_props, max_size, args[5], pos, phys, room,
                      store_ts, args[10], args[11]);
}

#define PUT_METHODS                                                                             \
    {"configure_put", (PyCFunction)(void (*)(void))configure_put, METH_FASTCALL,                \
     "configure_put(prepared_cls, request_cls, result_cls, put_ok, message_cls, host_cls, "     \
     "header_v4, schedule_topic, v6_flags) for put_prepare and put_write."},                    \
        {"put_prepare", (PyCFunction)(void (*)(void))put_prepare, METH_FASTCALL,                \
         "CommitLog.prepare_one_py for a message of the common shape, or None."},               \
        {"put_write", (PyCFunction)(void (*)(void))put_write, METH_FASTCALL,                    \
         "CommitLog.write_one_py for a PreparedOne of the common shape, or None."},             \
        {"put_one", (PyCFunction)(void (*)(void))put_one, METH_FASTCALL,                        \
         "put_prepare then put_write in one call (no PreparedOne), or None before any effect."},
