/* The MessageExt of a CommitLog record, and a whole PULL body of them (issue 18, consume path).
 * Twins: ariane.common.record._decode_py (one record) and _decode_records_py (a body), the
 * references.
 *
 * How it works: rec_v4() reads one well-formed record with IPv4 hosts (the plain case; anything
 * else, and records whose sysFlag has a bit of `skip_flags`, is "unusual": the caller hands the
 * bytes to the pure decoder, which owns every error). The MessageExt is built as the twin's
 * MessageExt(...) would, but without running the dataclass __init__: once
 * configure_records(field_names) has found a writable object slot (member descriptor) for each
 * of the 16 fields, the object is allocated and each value goes straight into its slot (as
 * header_parse does for headers). A born or store host equal to the previous record's reuses
 * its HostPort (an immutable named tuple, equal either way). decode_records_v4(buf, skip_flags)
 * decodes a whole concatenation (RocketMQ MessageDecoder.decodesBatch) into a list, or None
 * when any record is unusual. */

#include "structmember.h" /* PyMemberDescrObject, T_OBJECT_EX */

#define REC_FIXED4 88 /* up to BODYLENGTH with two IPv4 hosts */
#define REC_FIELDS 16

static Py_ssize_t MSG_SLOT[REC_FIELDS];
static int MSG_SLOTS_OK; /* 1: MessageExt built by writing its slots */

typedef struct {
    unsigned char addr[4];
    int32_t port;
    PyObject *obj; /* the last HostPort built (a new reference), or NULL */
} HostMemo;

/* configure_records(names): names of MessageExt's fields in its constructor's order; True
 * when each is a writable object slot (then used), False otherwise (the constructor is). */
static PyObject *configure_records(PyObject *module, PyObject *names) {
    Py_ssize_t offsets[REC_FIELDS];
    int i;
    (void)module;
    MSG_SLOTS_OK = 0;
    if (MSG_CLS == NULL || !PyTuple_Check(names) || PyTuple_GET_SIZE(names) != REC_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "configure_records(16 field names) after configure()");
        return NULL;
    }
    if (!PyType_Check(MSG_CLS) || ((PyTypeObject *)MSG_CLS)->tp_alloc == NULL) {
        Py_RETURN_FALSE;
    }
    for (i = 0; i < REC_FIELDS; i++) {
        PyObject *d = PyObject_GetAttr(MSG_CLS, PyTuple_GET_ITEM(names, i));
        PyMemberDef *m;
        if (d == NULL) {
            return NULL;
        }
        if (!PyObject_TypeCheck(d, &PyMemberDescr_Type) ||
            !PyType_IsSubtype((PyTypeObject *)MSG_CLS, PyDescr_TYPE(d))) {
            Py_DECREF(d);
            Py_RETURN_FALSE;
        }
        m = ((PyMemberDescrObject *)d)->d_member;
        offsets[i] = m->offset;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY)) {
            Py_DECREF(d);
            Py_RETURN_FALSE;
        }
        Py_DECREF(d);
    }
    memcpy(MSG_SLOT, offsets, sizeof(offsets));
    MSG_SLOTS_OK = 1;
    Py_RETURN_TRUE;
}

/* A MessageExt of the 16 values (references stolen, on failure too). */
static PyObject *rec_message(PyObject **items) {
    PyObject *msg;
    int i;
    if (MSG_SLOTS_OK) {
        PyTypeObject *tp = (PyTypeObject *)MSG_CLS;
        msg = tp->tp_alloc(tp, 0);
        if (msg != NULL) {
            for (i = 0; i < REC_FIELDS; i++) {
                *(PyObject **)((char *)msg + MSG_SLOT[i]) = items[i];
                items[i] = NULL;
            }
        }
    } else {
        msg = PyObject_Vectorcall(MSG_CLS, items, REC_FIELDS, NULL);
    }
    for (i = 0; i < REC_FIELDS; i++) {
        Py_XDECREF(items[i]);
    }
    return msg;
}

static PyObject *memo_host(HostMemo *memo, const unsigned char *addr, int32_t port) {
    PyObject *hp;
    if (memo->obj != NULL && memo->port == port && memcmp(memo->addr, addr, 4) == 0) {
        Py_INCREF(memo->obj);
        return memo->obj;
    }
    hp = host_port(addr, port);
    if (hp != NULL) {
        Py_XDECREF(memo->obj);
        Py_INCREF(hp);
        memo->obj = hp;
        memcpy(memo->addr, addr, 4);
        memo->port = port;
    }
    return hp;
}

/* The record at b (len bytes from b to the end of the buffer): 1 with *out and *total set;
 * 0 when unusual (nothing set, no error); -1 with an error set. */
static int rec_v4(const unsigned char *b, Py_ssize_t len, int32_t skip_flags, HostMemo *born,
                  HostMemo *store, PyObject **out, int32_t *total_out) {
    int32_t total, magic, body_len, sys_flag;
    Py_ssize_t end, p;
    int topic_len, props_len, i;
    PyObject *items[REC_FIELDS] = {NULL};
    if (len < REC_FIXED4) {
        return 0;
    }
    total = be32(b);
    magic = be32(b + 4);
    sys_flag = be32(b + 36);
    body_len = be32(b + 84);
    if ((sys_flag & (V6_FLAGS | skip_flags)) || (magic != MAGIC_V1 && magic != MAGIC_V2) ||
        total < 91 || (Py_ssize_t)total > len) {
        return 0;
    }
    end = total; /* offsets below are relative to the record */
    p = REC_FIXED4;
    if (body_len < 0 || p + body_len > end) {
        return 0;
    }
    p += body_len;
    if (magic == MAGIC_V2) {
        if (p + 2 > end) {
            return 0;
        }
        topic_len = be16(b + p);
        p += 2;
    } else {
        if (p + 1 > end) {
            return 0;
        }
        topic_len = (signed char)b[p];
        p += 1;
    }
    if (topic_len < 0 || p + topic_len + 2 > end) {
        return 0;
    }
    props_len = be16(b + p + topic_len);
    if (props_len < 0 || p + topic_len + 2 + props_len != end) {
        return 0;
    }
    items[0] = PyUnicode_DecodeUTF8((const char *)b + p, topic_len, "strict"); /* topic */
    if (items[0] == NULL) {
        goto undecodable;
    }
    p += topic_len + 2;
    if (props_len) {
        PyObject *text = PyUnicode_DecodeUTF8((const char *)b + p, props_len, "strict");
        if (text == NULL) {
            goto undecodable;
        }
        items[3] = decode_properties(NULL, text);
        Py_DECREF(text);
    } else {
        items[3] = PyDict_New();
    }
    /* MessageExt(topic, body, flag, properties, queue_id, store_size, queue_offset, sys_flag,
     *            born_ts, born_host, store_ts, store_host, body_crc, reconsume, prepared, phys) */
    items[1] = PyBytes_FromStringAndSize((const char *)b + REC_FIXED4, body_len);
    items[2] = PyLong_FromLong(be32(b + 16));
    items[4] = PyLong_FromLong(be32(b + 12));
    items[5] = PyLong_FromLong(total);
    items[6] = PyLong_FromLongLong(be64(b + 20));
    items[7] = PyLong_FromLong(sys_flag);
    items[8] = PyLong_FromLongLong(be64(b + 40));
    items[9] = memo_host(born, b + 48, be32(b + 52));
    items[10] = PyLong_FromLongLong(be64(b + 56));
    items[11] = memo_host(store, b + 64, be32(b + 68));
    items[12] = PyLong_FromLong(be32(b + 8));
    items[13] = PyLong_FromLong(be32(b + 72));
    items[14] = PyLong_FromLongLong(be64(b + 76));
    items[15] = PyLong_FromLongLong(be64(b + 28));
    for (i = 0; i < REC_FIELDS; i++) {
        if (items[i] == NULL) {
            goto fail;
        }
    }
    *out = rec_message(items); /* steals items */
    if (*out == NULL) {
        return -1;
    }
    *total_out = total;
    return 1;
undecodable:
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        for (i = 0; i < REC_FIELDS; i++) {
            Py_XDECREF(items[i]);
        }
        return 0;
    }
fail:
    for (i = 0; i < REC_FIELDS; i++) {
        Py_XDECREF(items[i]);
    }
    return -1;
}

/* decode_record_v4(buf, pos): (MessageExt, end) of the record at pos, or None (unusual). */
static PyObject *decode_record_v4(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    Py_ssize_t pos;
    HostMemo born = {{0}, 0, NULL}, store = {{0}, 0, NULL};
    PyObject *msg = NULL, *result = NULL;
    int32_t total = 0;
    int rc = 0;
    (void)module;
    if (nargs != 2 || MSG_CLS == NULL) {
        PyErr_SetString(PyExc_TypeError, "decode_record_v4(buf, pos) after configure()");
        return NULL;
    }
    pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (pos >= 0 && pos < view.len) {
        rc = rec_v4((const unsigned char *)view.buf + pos, view.len - pos, 0, &born, &store, &msg,
                    &total);
    }
    if (rc > 0) {
        result = Py_BuildValue("(Nn)", msg, pos + (Py_ssize_t)total);
    } else if (rc == 0) {
        result = Py_None;
        Py_INCREF(result);
    }
    Py_XDECREF(born.obj);
    Py_XDECREF(store.obj);
    PyBuffer_Release(&view);
    return result;
}

/* decode_records_v4(buf, skip_flags): every record of buf as a list of MessageExt, or None
 * when any record is unusual (or has a bit of skip_flags in its sysFlag). */
static PyObject *decode_records_v4(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    Py_ssize_t pos = 0;
    HostMemo born = {{0}, 0, NULL}, store = {{0}, 0, NULL};
    PyObject *list, *msg;
    long skip;
    int32_t total;
    int rc;
    (void)module;
    if (nargs != 2 || MSG_CLS == NULL) {
        PyErr_SetString(PyExc_TypeError, "decode_records_v4(buf, skip_flags) after configure()");
        return NULL;
    }
    skip = PyLong_AsLong(args[1]);
    if (skip == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    list = PyList_New(0);
    while (list != NULL && pos < view.len) {
        rc = rec_v4((const unsigned char *)view.buf + pos, view.len - pos, (int32_t)skip, &born,
                    &store, &msg, &total);
        if (rc <= 0) {
            Py_SETREF(list, rc == 0 ? Py_NewRef(Py_None) : NULL);
            break;
        }
        if (PyList_Append(list, msg) < 0) {
            Py_CLEAR(list);
        }
        Py_DECREF(msg);
        pos += total;
    }
    Py_XDECREF(born.obj);
    Py_XDECREF(store.obj);
    PyBuffer_Release(&view);
    return list;
}

/* join_spans(buf, starts, stops): buf[starts[i]:stops[i]] for every i, concatenated into one
 * bytes copied straight from buf (the broker's run of a pull answer out of a mapped CommitLog
 * file: one copy instead of a copy per run and their join). The GIL is held throughout, so the
 * buffer's export cannot race a concurrent close of the map (it cannot close while exported).
 * Twin: ariane.store.reads._join_spans_py. TypeError unless starts and stops are lists of int
 * of one length, ValueError for a span outside 0 <= start <= stop <= len(buf) (or a closed
 * map, raised by its buffer export as by its len()). */
static int span_at(PyObject *starts, PyObject *stops, Py_ssize_t i, Py_ssize_t *a,
                   Py_ssize_t *b) {
    PyObject *x = PyList_GET_ITEM(starts, i), *y = PyList_GET_ITEM(stops, i);
    if (!PyLong_CheckExact(x) || !PyLong_CheckExact(y)) {
        PyErr_SetString(PyExc_TypeError, "join_spans: starts and stops hold ints");
        return -1;
    }
    *a = PyLong_AsSsize_t(x);
    *b = PyLong_AsSsize_t(y);
    if ((*a == -1 || *b == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        *a = -1; /* out of the range of Py_ssize_t: out of the buffer */
    }
    return 0;
}

static PyObject *join_spans(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    PyObject *starts, *stops, *out = NULL;
    Py_ssize_t n, i, a, b, total = 0;
    char *dst;
    (void)module;
    if (nargs != 3 || !PyList_CheckExact(args[1]) || !PyList_CheckExact(args[2]) ||
        PyList_GET_SIZE(args[1]) != PyList_GET_SIZE(args[2])) {
        PyErr_SetString(PyExc_TypeError, "join_spans(buf, starts, stops): two lists of one length");
        return NULL;
    }
    starts = args[1];
    stops = args[2];
    n = PyList_GET_SIZE(starts);
    for (i = 0; i < n; i++) { /* types first: the twin's zip fails on them before any copy */
        if (span_at(starts, stops, i, &a, &b) < 0) {
            return NULL;
        }
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        span_at(starts, stops, i, &a, &b);
        if (a < 0 || b < a || b > view.len) {
            PyErr_SetString(PyExc_ValueError, "join_spans: a span outside the buffer");
            goto done;
        }
        total += b - a;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        goto done;
    }
    dst = PyBytes_AS_STRING(out);
    for (i = 0; i < n; i++) {
        span_at(starts, stops, i, &a, &b);
        memcpy(dst, (const char *)view.buf + a, (size_t)(b - a));
        dst += b - a;
    }
done:
    PyBuffer_Release(&view);
    return out;
}

#define RECORDS_METHODS                                                                         \
    {"configure_records", (PyCFunction)configure_records, METH_O,                              \
     "configure_records(names): build MessageExt through its slots (True) or not (False)."},   \
        {"decode_record_v4", (PyCFunction)(void (*)(void))decode_record_v4, METH_FASTCALL,     \
         "Decode one well-formed IPv4 record at pos: (MessageExt, end), or None."},            \
        {"decode_records_v4", (PyCFunction)(void (*)(void))decode_records_v4, METH_FASTCALL,   \
         "Every record of a PULL body as MessageExt objects, or None if any is unusual."},     \
        {"join_spans", (PyCFunction)(void (*)(void))join_spans, METH_FASTCALL,                 \
         "buf[starts[i]:stops[i]] for every i joined into one bytes, in one copy."},
