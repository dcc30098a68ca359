/* ariane._speedups: a read's single sends prepared and answered in one C call each (issue 18:
 * no Python frame per message in broker/processors/send_run.py; RocketMQ
 * SendMessageProcessor.sendMessage per request).
 *
 *   send_prepare_run(ctx, requests, start, out) -> int
 *   send_answer_run(ctx, requests, ready, results, start, frames, sizes) -> int
 *
 * Twins: send_run.prepare_run_py / answer_run_py (the reference: the pass's per-request
 * prepare(request) and frame(opaque, result, queue_id, uniq) in a loop).
 *
 * How it works. send_prepare_run appends to `out` the (MessageInner, topic, queue id,
 * UNIQ_KEY, WAIT is not "false") of requests[start], requests[start + 1]... and returns the
 * index of the first request the pass declines (or len(requests)). Each request is read here
 * only in the plain case: JSON, flag 0, an exact dict of extFields whose header fields all
 * read as header_parse reads them (the same hdr_value, with the header class's plan), a str
 * topic already checked in this run's `topics` cache, str properties. Anything else (an
 * unchecked topic, an odd field, an error) is handed to ctx's `fallback(request)`, the
 * reference prepare, whose answer (a ready tuple or None) counts as this request's: so the
 * run is exactly what the reference loop gives. The MessageInner is allocated without
 * __init__ and its slots set through their member descriptors (as header_parse does).
 *
 * send_answer_run appends, for results[start], results[start + 1]... that stored one message
 * with PUT_OK, the SUCCESS answer's frame bytes to `frames` (the template's parts from ctx,
 * the same bytes as frame(); an id or number the template cannot write plainly goes through
 * ctx's `frame` callable) and the written size to sizes[topic] (a list per topic, in order);
 * it returns the index of the first other result (or len(results)).
 *
 * Included by _speedups.c after _speedups_header.h (hdr_value) and decode_properties.
 */

enum {
    SR_TOPICS, SR_FALLBACK, SR_INNER, SR_SLOTS, SR_V1_PLAN, SR_V1_REST, SR_V2_PLAN,
    SR_V2_REST, SR_V2_CODE, SR_JSON, SR_UNIQ, SR_SLOW, SR_CLUSTER_KEY, SR_CLUSTER,
    SR_CLUSTER_TEXT, SR_REGION_KEY, SR_REGION, SR_TRACE_KEY, SR_TRACE, SR_TRACE_TEXT,
    SR_WAIT_KEY, SR_BORN, SR_STORE_HOST, SR_MULTI_FLAG, SR_TXN_MASK, SR_CTX_COUNT
};
/* the plan's fields, in this order: topic, queue_id, sys_flag, born_timestamp, flag,
 * properties, reconsume_times, batch */
enum { SF_TOPIC, SF_QUEUE, SF_SYSFLAG, SF_BORN_TS, SF_FLAG, SF_PROPS, SF_RECONSUME, SF_BATCH,
       SF_COUNT };
/* MessageInner's slots, in its field order */
enum { SI_COUNT = 12 };

static PyObject *SR_A_FLAG, *SR_A_SERIAL, *SR_A_CODE, *SR_A_EXT, *SR_A_BODY, *SR_A_OPAQUE,
    *SR_A_STATUS, *SR_A_MSG_NUM, *SR_A_WROTE_BYTES, *SR_A_OFFSETS, *SR_A_LOGICS, *SR_EMPTY_B,
    *SR_FALSE_S, *SR_ONE;

static int sr_names(void) {
    if (SR_A_FLAG != NULL) {
        return 0;
    }
    SR_A_FLAG = PyUnicode_InternFromString("flag");
    SR_A_SERIAL = PyUnicode_InternFromString("serialize_type");
    SR_A_CODE = PyUnicode_InternFromString("code");
    SR_A_EXT = PyUnicode_InternFromString("ext_fields");
    SR_A_BODY = PyUnicode_InternFromString("body");
    SR_A_OPAQUE = PyUnicode_InternFromString("opaque");
    SR_A_STATUS = PyUnicode_InternFromString("status");
    SR_A_MSG_NUM = PyUnicode_InternFromString("msg_num");
    SR_A_WROTE_BYTES = PyUnicode_InternFromString("wrote_bytes");
    SR_A_OFFSETS = PyUnicode_InternFromString("offsets");
    SR_A_LOGICS = PyUnicode_InternFromString("logics_offset");
    SR_EMPTY_B = PyBytes_FromStringAndSize("", 0);
    SR_FALSE_S = PyUnicode_InternFromString("false");
    SR_ONE = PyLong_FromLong(1);
    if (SR_A_FLAG == NULL || SR_A_SERIAL == NULL || SR_A_CODE == NULL || SR_A_EXT == NULL ||
        SR_A_BODY == NULL || SR_A_OPAQUE == NULL || SR_A_STATUS == NULL ||
        SR_A_MSG_NUM == NULL || SR_A_WROTE_BYTES == NULL || SR_A_OFFSETS == NULL ||
        SR_A_LOGICS == NULL || SR_EMPTY_B == NULL || SR_FALSE_S == NULL || SR_ONE == NULL) {
        SR_A_FLAG = NULL;
        return -1;
    }
    return 0;
}

/* 1: every field of `fields` reads plainly (values into vals[] when vals is not NULL, new
 * references); 0: one does not (vals cleared); -1: error */
static int sr_fields(PyObject *ext, PyObject *fields, PyObject **vals) {
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = NULL;
        int got = hdr_value(ext, PyTuple_GET_ITEM(fields, i), &v);
        if (got <= 0) {
            if (vals != NULL) {
                for (Py_ssize_t j = 0; j < i; j++) {
                    Py_CLEAR(vals[j]);
                }
            }
            return got;
        }
        if (vals != NULL) {
            vals[i] = v;
        } else {
            Py_DECREF(v);
        }
    }
    return 1;
}

/* the ready tuple of a request whose header fields vals[] (the plan's order) read plainly,
 * its body from request.body; the same answers as sr_prepare_one */
static PyObject *sr_ready(PyObject *const *ctx, PyObject *const *vals, PyObject *request) {
    PyObject *body = NULL, *props = NULL, *props_text = NULL, *checked, *uniq, *out = NULL;
    PyObject *inner = NULL, *sys_flag = NULL, *reconsume = NULL, *wait_v;
    long long queue_id, bound, sys_bits;
    int t, multi_tag, add_cluster, add_region;
    Py_ssize_t text_len;

    /* the topic: checked once per run by the reference (a topic not seen yet: unsure) */
    if (!PyUnicode_CheckExact(vals[SF_TOPIC])) {
        goto unsure;
    }
    checked = PyDict_GetItemWithError(ctx[SR_TOPICS], vals[SF_TOPIC]);
    if (checked == NULL) {
        if (PyErr_Occurred()) {
            goto error;
        }
        goto unsure;
    }
    if (checked == Py_None) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    t = PyObject_IsTrue(vals[SF_BATCH]);
    if (t != 0) {
        if (t < 0) {
            goto error;
        }
        out = Py_NewRef(Py_None);
        goto done;
    }
    if (!PyTuple_CheckExact(checked) || PyTuple_GET_SIZE(checked) != 2 ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(checked, 0))) {
        goto unsure;
    }
    bound = PyLong_AsLongLong(PyTuple_GET_ITEM(checked, 0));
    if (bound == -1 && PyErr_Occurred()) {
        goto error;
    }
    multi_tag = PyObject_IsTrue(PyTuple_GET_ITEM(checked, 1));
    if (multi_tag < 0) {
        goto error;
    }
    queue_id = PyLong_AsLongLong(vals[SF_QUEUE]); /* hdr_value: an int within I32 */
    if (queue_id == -1 && PyErr_Occurred()) {
        goto error;
    }
    if (queue_id < 0 || queue_id >= bound) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    sys_bits = PyLong_AsLongLong(vals[SF_SYSFLAG]);
    if (sys_bits == -1 && PyErr_Occurred()) {
        goto error;
    }
    props_text = vals[SF_PROPS];
    if (props_text == Py_None) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if (!PyUnicode_CheckExact(props_text)) {
        goto unsure;
    }
    text_len = PyUnicode_GET_LENGTH(props_text);
    if (text_len == 0 || (sys_bits & PyLong_AsLongLong(ctx[SR_TXN_MASK]))) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    props = decode_properties(NULL, props_text);
    if (props == NULL) {
        goto error;
    }
    uniq = PyDict_GetItemWithError(props, ctx[SR_UNIQ]);
    if (uniq == NULL) {
        if (PyErr_Occurred()) {
            goto error;
        }
        out = Py_NewRef(Py_None);
        goto done;
    }
    {
        /* is any of the message's names (a few, their hashes cached) a slow key: the same
         * answer as a look-up of each slow key in props, with fewer look-ups */
        PyObject *slow = ctx[SR_SLOW], *key, *value;
        Py_ssize_t pos = 0;
        if (!PyAnySet_Check(slow)) {
            goto unsure;
        }
        while (PyDict_Next(props, &pos, &key, &value)) {
            t = PySet_Contains(slow, key);
            if (t != 0) {
                if (t < 0) {
                    goto error;
                }
                out = Py_NewRef(Py_None);
                goto done;
            }
        }
    }
    if (multi_tag) {
        sys_bits |= PyLong_AsLongLong(ctx[SR_MULTI_FLAG]);
    }
    sys_flag = PyLong_FromLongLong(sys_bits);
    if (sys_flag == NULL) {
        goto error;
    }
    add_cluster = PyDict_Contains(props, ctx[SR_CLUSTER_KEY]);
    if (add_cluster < 0) {
        goto error;
    }
    add_cluster = !add_cluster;
    if (add_cluster && PyDict_SetItem(props, ctx[SR_CLUSTER_KEY], ctx[SR_CLUSTER]) < 0) {
        goto error;
    }
    add_region = PyDict_Contains(props, ctx[SR_REGION_KEY]);
    if (add_region < 0) {
        goto error;
    }
    add_region = !add_region;
    if (add_region && (PyDict_SetItem(props, ctx[SR_REGION_KEY], ctx[SR_REGION]) < 0 ||
                       PyDict_SetItem(props, ctx[SR_TRACE_KEY], ctx[SR_TRACE]) < 0)) {
        goto error;
    }
    if (add_cluster || add_region) {
        PyObject *parts[4], *joined;
        int n = 0;
        parts[n++] = props_text;
        if (PyUnicode_READ_CHAR(props_text, text_len - 1) != 0x02) {
            parts[n++] = SEP_PROP;
        }
        if (add_cluster) {
            parts[n++] = ctx[SR_CLUSTER_TEXT];
        }
        if (add_region) {
            parts[n++] = ctx[SR_TRACE_TEXT];
        }
        {
            PyObject *list = PyList_New(n);
            if (list == NULL) {
                goto error;
            }
            for (int k = 0; k < n; k++) {
                PyList_SET_ITEM(list, k, Py_NewRef(parts[k]));
            }
            joined = PyUnicode_Join(EMPTY, list);
            Py_DECREF(list);
        }
        if (joined == NULL) {
            goto error;
        }
        props_text = joined; /* owned from here */
    } else {
        Py_INCREF(props_text);
    }
    {
        static sr_cache body_at;
        body = sr_get(request, SR_A_BODY, &body_at);
    }
    if (body == NULL) {
        Py_DECREF(props_text);
        goto error;
    }
    t = PyObject_IsTrue(body);
    if (t <= 0) {
        if (t < 0) {
            Py_DECREF(props_text);
            goto error;
        }
        Py_SETREF(body, Py_NewRef(SR_EMPTY_B));
    }
    t = PyObject_IsTrue(vals[SF_RECONSUME]); /* reconsume_times or 0 */
    if (t < 0) {
        Py_DECREF(props_text);
        goto error;
    }
    reconsume = t ? Py_NewRef(vals[SF_RECONSUME]) : PyLong_FromLong(0);
    if (reconsume == NULL) {
        Py_DECREF(props_text);
        goto error;
    }
    {
        PyTypeObject *type = (PyTypeObject *)ctx[SR_INNER];
        PyObject *zero = PyLong_FromLong(0);
        PyObject *values[SI_COUNT];
        if (zero == NULL) {
            Py_DECREF(props_text);
            goto error;
        }
        values[0] = vals[SF_TOPIC];
        values[1] = vals[SF_QUEUE];
        values[2] = body;
        values[3] = vals[SF_FLAG];
        values[4] = props;
        values[5] = sys_flag;
        values[6] = vals[SF_BORN_TS];
        values[7] = ctx[SR_BORN];
        values[8] = ctx[SR_STORE_HOST];
        values[9] = reconsume;
        values[10] = zero;
        values[11] = props_text;
        inner = type->tp_alloc(type, 0);
        for (int k = 0; inner != NULL && k < SI_COUNT; k++) {
            PyObject *slot = PyTuple_GET_ITEM(ctx[SR_SLOTS], k);
            if (PyMember_SetOne((char *)inner, ((PyMemberDescrObject *)slot)->d_member,
                                values[k]) < 0) {
                Py_CLEAR(inner);
            }
        }
        Py_DECREF(zero);
        Py_DECREF(props_text);
        if (inner == NULL) {
            goto error;
        }
    }
    wait_v = PyDict_GetItemWithError(props, ctx[SR_WAIT_KEY]);
    if (wait_v == NULL && PyErr_Occurred()) {
        goto error;
    }
    if (wait_v != NULL) {
        t = PyObject_RichCompareBool(wait_v, SR_FALSE_S, Py_NE);
        if (t < 0) {
            goto error;
        }
    } else {
        t = 1;
    }
    out = PyTuple_Pack(5, inner, vals[SF_TOPIC], vals[SF_QUEUE], uniq, t ? Py_True : Py_False);
    if (out == NULL) {
        goto error;
    }
    goto done;

unsure:
    out = NULL;
    goto done;
error:
    out = NULL;
    PyErr_Clear(); /* the fallback (the reference, which declines on an error) decides */
done:
    Py_XDECREF(body);
    Py_XDECREF(props);
    Py_XDECREF(sys_flag);
    Py_XDECREF(reconsume);
    Py_XDECREF(inner);
    return out;
}

/* the ready tuple of one request: a new reference, Py_None (declined), NULL with no error
 * set (not the plain case: the fallback decides) or NULL with an error set */
static PyObject *sr_prepare_one(PyObject *const *ctx, PyObject *request) {
    PyObject *vals[SF_COUNT] = {NULL};
    PyObject *flag = NULL, *serial = NULL, *code = NULL, *ext = NULL, *out = NULL;
    PyObject *plan, *rest;
    int is_v2, t;

    flag = PyObject_GetAttr(request, SR_A_FLAG);
    if (flag == NULL) {
        goto error;
    }
    t = PyObject_IsTrue(flag);
    if (t != 0) {
        if (t < 0) {
            goto error;
        }
        out = Py_NewRef(Py_None);
        goto done;
    }
    serial = PyObject_GetAttr(request, SR_A_SERIAL);
    if (serial == NULL) {
        goto error;
    }
    if (serial != ctx[SR_JSON]) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    code = PyObject_GetAttr(request, SR_A_CODE);
    if (code == NULL) {
        goto error;
    }
    is_v2 = PyObject_RichCompareBool(code, ctx[SR_V2_CODE], Py_EQ);
    if (is_v2 < 0) {
        goto error;
    }
    plan = ctx[is_v2 ? SR_V2_PLAN : SR_V1_PLAN];
    rest = ctx[is_v2 ? SR_V2_REST : SR_V1_REST];
    ext = PyObject_GetAttr(request, SR_A_EXT);
    if (ext == NULL) {
        goto error;
    }
    if (!PyDict_CheckExact(ext)) {
        goto unsure;
    }
    t = sr_fields(ext, plan, vals);
    if (t <= 0) {
        if (t < 0) {
            goto error;
        }
        goto unsure;
    }
    t = sr_fields(ext, rest, NULL);
    if (t <= 0) {
        if (t < 0) {
            goto error;
        }
        goto unsure;
    }
    out = sr_ready(ctx, vals, request);
    goto done;

unsure:
    out = NULL;
    goto done;
error:
    out = NULL;
    PyErr_Clear(); /* the fallback (the reference, which declines on an error) decides */
done:
    for (int k = 0; k < SF_COUNT; k++) {
        Py_XDECREF(vals[k]);
    }
    Py_XDECREF(flag);
    Py_XDECREF(serial);
    Py_XDECREF(code);
    Py_XDECREF(ext);
    return out;
}

static PyObject *sr_prepare_raw(PyObject *const *ctx, PyObject *request);

static int sr_check_ctx(PyObject *ctx, Py_ssize_t count, const char *name) {
    if (!PyTuple_CheckExact(ctx) || PyTuple_GET_SIZE(ctx) != count) {
        PyErr_Format(PyExc_TypeError, "%s: ctx must be a tuple of %zd", name, count);
        return -1;
    }
    return 0;
}

static PyObject *send_prepare_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *ctx, *requests, *out;
    PyObject *const *c;
    Py_ssize_t i, count;
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "send_prepare_run(ctx, requests, start, out)");
        return NULL;
    }
    ctx = args[0];
    requests = args[1];
    out = args[3];
    if (sr_check_ctx(ctx, SR_CTX_COUNT, "send_prepare_run") < 0 || sr_names() < 0) {
        return NULL;
    }
    c = &PyTuple_GET_ITEM(ctx, 0);
    if (!PyList_CheckExact(requests) || !PyList_CheckExact(out) || !PyDict_CheckExact(c[SR_TOPICS]) ||
        !PyType_Check(c[SR_INNER]) || !PyTuple_CheckExact(c[SR_SLOTS]) ||
        PyTuple_GET_SIZE(c[SR_SLOTS]) != SI_COUNT || !PyTuple_CheckExact(c[SR_V1_PLAN]) ||
        PyTuple_GET_SIZE(c[SR_V1_PLAN]) != SF_COUNT || !PyTuple_CheckExact(c[SR_V2_PLAN]) ||
        PyTuple_GET_SIZE(c[SR_V2_PLAN]) != SF_COUNT || !PyTuple_CheckExact(c[SR_V1_REST]) ||
        !PyTuple_CheckExact(c[SR_V2_REST]) || !PyAnySet_CheckExact(c[SR_SLOW]) ||
        !PyLong_CheckExact(c[SR_MULTI_FLAG]) || !PyLong_CheckExact(c[SR_TXN_MASK]) ||
        !PyUnicode_CheckExact(c[SR_CLUSTER_TEXT]) || !PyUnicode_CheckExact(c[SR_TRACE_TEXT])) {
        PyErr_SetString(PyExc_TypeError, "send_prepare_run: a ctx field of the wrong type");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < SI_COUNT; k++) {
        PyObject *slot = PyTuple_GET_ITEM(c[SR_SLOTS], k);
        if (!Py_IS_TYPE(slot, &PyMemberDescr_Type) ||
            !PyType_IsSubtype((PyTypeObject *)c[SR_INNER], ((PyDescrObject *)slot)->d_type)) {
            PyErr_SetString(PyExc_TypeError, "send_prepare_run: not a slot of the message class");
            return NULL;
        }
    }
    for (int p = SR_V1_PLAN; p <= SR_V2_REST; p++) {
        PyObject *fields = c[p];
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(fields); k++) {
            PyObject *f = PyTuple_GET_ITEM(fields, k);
            if (!PyTuple_CheckExact(f) || PyTuple_GET_SIZE(f) < 4) {
                PyErr_SetString(PyExc_TypeError, "send_prepare_run: a plan field is not "
                                                 "(key, kind, required, default, ...)");
                return NULL;
            }
        }
    }
    i = PyLong_AsSsize_t(args[2]);
    if (i == -1 && PyErr_Occurred()) {
        return NULL;
    }
    count = PyList_GET_SIZE(requests);
    for (; i < count; i++) {
        PyObject *request = PyList_GET_ITEM(requests, i), *one;
        int appended;
        Py_INCREF(request);
        one = RS_CLS != NULL && Py_IS_TYPE(request, (PyTypeObject *)RS_CLS)
                  ? sr_prepare_raw(c, request) /* a frame left raw: _speedups_sendraw.h */
                  : sr_prepare_one(c, request);
        if (one == NULL) { /* not the plain case: the reference decides */
            one = PyObject_CallOneArg(c[SR_FALLBACK], request);
        }
        Py_DECREF(request);
        if (one == NULL) {
            return NULL;
        }
        if (one == Py_None) {
            Py_DECREF(one);
            break;
        }
        appended = PyList_Append(out, one);
        Py_DECREF(one);
        if (appended < 0) {
            return NULL;
        }
        count = PyList_GET_SIZE(requests); /* the fallback is Python: the list may change */
    }
    return PyLong_FromSsize_t(i);
}

/* the answer ctx: put_ok, head_a, head_b, head_c, head_d, frame */
enum { SA_PUT_OK, SA_HEAD_A, SA_HEAD_B, SA_HEAD_C, SA_HEAD_D, SA_FRAME, SA_CTX_COUNT };

/* an exact int as decimal text into buf (at least 21 bytes); the length, or -1 (not an exact
 * int that fits in 64 bits) */
static int sr_decimal(PyObject *v, char *buf) {
    long long x;
    unsigned long long u;
    char tmp[24];
    int n = 0, len = 0;
    int64_t x64;
    if (!put_int(v, INT64_MIN, INT64_MAX, &x64)) { /* not an exact int, or past 64 bits */
        return -1;
    }
    x = (long long)x64;
    if (x < 0) {
        buf[len++] = '-';
        u = 0ULL - (unsigned long long)x;
    } else {
        u = (unsigned long long)x;
    }
    do {
        tmp[n++] = (char)('0' + (u % 10));
        u /= 10;
    } while (u != 0);
    while (n > 0) {
        buf[len++] = tmp[--n];
    }
    return len;
}

/* the frame of one SUCCESS answer, or NULL with no error set (the template's frame decides) */
/* where the answers read a PutResult's and a request's slots (sr_get's caches) */
static sr_cache SA_LOGICS_AT, SA_OFFSETS_AT, SA_STATUS_AT, SA_MSG_NUM_AT, SA_WROTE_AT,
    SA_OPAQUE_AT;

static PyObject *sr_frame(PyObject *const *c, PyObject *opaque, PyObject *result,
                          PyObject *queue_id, PyObject *uniq) {
    char qid[24], lo[24], op[24], hex[17];
    int n_qid, n_lo, n_op;
    PyObject *offsets, *first, *logics, *frame;
    unsigned long long phys;
    Py_ssize_t n_uniq, head, pos = 0;
    const char *u;
    char *w;
    if (!PyUnicode_CheckExact(uniq) || !PyUnicode_IS_ASCII(uniq)) {
        return NULL;
    }
    n_uniq = PyUnicode_GET_LENGTH(uniq);
    u = (const char *)PyUnicode_1BYTE_DATA(uniq);
    if (n_uniq == 0) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n_uniq; k++) {
        char ch = u[k];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z'))) {
            return NULL;
        }
    }
    n_qid = sr_decimal(queue_id, qid);
    n_op = sr_decimal(opaque, op);
    if (n_qid < 0 || n_op < 0) {
        return NULL;
    }
    logics = sr_get(result, SR_A_LOGICS, &SA_LOGICS_AT);
    if (logics == NULL) {
        PyErr_Clear();
        return NULL;
    }
    n_lo = sr_decimal(logics, lo);
    Py_DECREF(logics);
    if (n_lo < 0) {
        return NULL;
    }
    offsets = sr_get(result, SR_A_OFFSETS, &SA_OFFSETS_AT);
    if (offsets == NULL) {
        PyErr_Clear();
        return NULL;
    }
    first = PySequence_GetItem(offsets, 0);
    Py_DECREF(offsets);
    if (first == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyLong_CheckExact(first)) {
        Py_DECREF(first);
        return NULL;
    }
    phys = PyLong_AsUnsignedLongLong(first); /* negative or too big: an error */
    Py_DECREF(first);
    if (phys == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return NULL;
    }
    for (int k = 15; k >= 0; k--) {
        hex[k] = "0123456789ABCDEF"[phys & 15];
        phys >>= 4;
    }
    head = PyBytes_GET_SIZE(c[SA_HEAD_A]) + 16 + 13 + n_qid + 17 + n_lo + 2 +
           PyBytes_GET_SIZE(c[SA_HEAD_B]) + n_uniq + 2 + PyBytes_GET_SIZE(c[SA_HEAD_C]) + n_op +
           PyBytes_GET_SIZE(c[SA_HEAD_D]);
    if (head > INT32_MAX - 8) {
        return NULL;
    }
    frame = PyBytes_FromStringAndSize(NULL, 8 + head);
    if (frame == NULL) {
        return NULL; /* MemoryError set: the caller stops */
    }
    w = PyBytes_AS_STRING(frame);
#define SR_PUT(src, len)                                                                        \
    do {                                                                                        \
        memcpy(w + pos, (src), (size_t)(len));                                                  \
        pos += (len);                                                                           \
    } while (0)
#define SR_PUT_B(obj) SR_PUT(PyBytes_AS_STRING(obj), PyBytes_GET_SIZE(obj))
    {
        uint32_t total = (uint32_t)(4 + head), len = (uint32_t)head;
        unsigned char be[8] = {(unsigned char)(total >> 24), (unsigned char)(total >> 16),
                               (unsigned char)(total >> 8),  (unsigned char)total,
                               (unsigned char)(len >> 24),   (unsigned char)(len >> 16),
                               (unsigned char)(len >> 8),    (unsigned char)len};
        SR_PUT(be, 8);
    }
    SR_PUT_B(c[SA_HEAD_A]);
    SR_PUT(hex, 16);
    SR_PUT("\",\"queueId\":\"", 13);
    SR_PUT(qid, n_qid);
    SR_PUT("\",\"queueOffset\":\"", 17);
    SR_PUT(lo, n_lo);
    SR_PUT("\",", 2);
    SR_PUT_B(c[SA_HEAD_B]);
    SR_PUT("\"", 1);
    SR_PUT(u, n_uniq);
    SR_PUT("\"", 1);
    SR_PUT_B(c[SA_HEAD_C]);
    SR_PUT(op, n_op);
    SR_PUT_B(c[SA_HEAD_D]);
#undef SR_PUT_B
#undef SR_PUT
    assert(pos == 8 + head);
    return frame;
}

static PyObject *send_answer_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *ctx, *requests, *ready, *results, *frames, *sizes;
    PyObject *const *c;
    Py_ssize_t i, count;
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "send_answer_run(ctx, requests, ready, results, start, frames, sizes)");
        return NULL;
    }
    ctx = args[0];
    requests = args[1];
    ready = args[2];
    results = args[3];
    frames = args[5];
    sizes = args[6];
    if (sr_check_ctx(ctx, SA_CTX_COUNT, "send_answer_run") < 0 || sr_names() < 0) {
        return NULL;
    }
    c = &PyTuple_GET_ITEM(ctx, 0);
    if (!PyBytes_CheckExact(c[SA_HEAD_A]) || !PyBytes_CheckExact(c[SA_HEAD_B]) ||
        !PyBytes_CheckExact(c[SA_HEAD_C]) || !PyBytes_CheckExact(c[SA_HEAD_D]) ||
        !PyList_CheckExact(requests) || !PyList_CheckExact(ready) ||
        !PyList_CheckExact(results) || !PyList_CheckExact(frames) || !PyDict_CheckExact(sizes)) {
        PyErr_SetString(PyExc_TypeError, "send_answer_run: an argument of the wrong type");
        return NULL;
    }
    count = PyList_GET_SIZE(results);
    if (PyList_GET_SIZE(requests) != count || PyList_GET_SIZE(ready) != count) {
        PyErr_SetString(PyExc_ValueError, "send_answer_run: requests, ready and results differ "
                                          "in length");
        return NULL;
    }
    i = PyLong_AsSsize_t(args[4]);
    if (i == -1 && PyErr_Occurred()) {
        return NULL;
    }
    for (; i < count; i++) {
        PyObject *result = PyList_GET_ITEM(results, i), *one = PyList_GET_ITEM(ready, i);
        PyObject *status, *msg_num, *wrote, *topic, *queue_id, *uniq, *per_topic, *opaque, *frame;
        int ok, appended;
        status = sr_get(result, SR_A_STATUS, &SA_STATUS_AT);
        if (status == NULL) {
            return NULL;
        }
        Py_DECREF(status); /* identity only */
        if (status != c[SA_PUT_OK]) {
            break;
        }
        msg_num = sr_get(result, SR_A_MSG_NUM, &SA_MSG_NUM_AT);
        if (msg_num == NULL) {
            return NULL;
        }
        ok = PyObject_RichCompareBool(msg_num, SR_ONE, Py_EQ); /* result.msg_num != 1 */
        Py_DECREF(msg_num);
        if (ok < 0) {
            return NULL;
        }
        if (!ok) {
            break;
        }
        if (!PyTuple_CheckExact(one) || PyTuple_GET_SIZE(one) != 5) {
            PyErr_SetString(PyExc_TypeError, "send_answer_run: a ready entry is not a 5-tuple");
            return NULL;
        }
        topic = PyTuple_GET_ITEM(one, 1);
        queue_id = PyTuple_GET_ITEM(one, 2);
        uniq = PyTuple_GET_ITEM(one, 3);
        wrote = sr_get(result, SR_A_WROTE_BYTES, &SA_WROTE_AT);
        if (wrote == NULL) {
            return NULL;
        }
        per_topic = PyDict_GetItemWithError(sizes, topic);
        if (per_topic == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(wrote);
                return NULL;
            }
            per_topic = PyList_New(0);
            if (per_topic == NULL || PyDict_SetItem(sizes, topic, per_topic) < 0) {
                Py_XDECREF(per_topic);
                Py_DECREF(wrote);
                return NULL;
            }
            Py_DECREF(per_topic); /* the dict holds it */
        }
        appended = PyList_Append(per_topic, wrote);
        Py_DECREF(wrote);
        if (appended < 0) {
            return NULL;
        }
        opaque = sr_get(PyList_GET_ITEM(requests, i), SR_A_OPAQUE, &SA_OPAQUE_AT);
        if (opaque == NULL) {
            return NULL;
        }
        frame = sr_frame(c, opaque, result, queue_id, uniq);
        if (frame == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(opaque);
                return NULL;
            }
            {
                PyObject *call[4] = {opaque, result, queue_id, uniq};
                frame = PyObject_Vectorcall(c[SA_FRAME], call, 4, NULL);
            }
        }
        Py_DECREF(opaque);
        if (frame == NULL) {
            return NULL;
        }
        appended = PyList_Append(frames, frame);
        Py_DECREF(frame);
        if (appended < 0) {
            return NULL;
        }
    }
    return PyLong_FromSsize_t(i);
}

#define SENDRUN_METHODS                                                                         \
    {"send_prepare_run", (PyCFunction)(void (*)(void))send_prepare_run, METH_FASTCALL,         \
     "send_prepare_run(ctx, requests, start, out): a run's ready sends; the first declined."}, \
    {"send_answer_run", (PyCFunction)(void (*)(void))send_answer_run, METH_FASTCALL,           \
     "send_answer_run(ctx, requests, ready, results, start, frames, sizes): SUCCESS frames."},
