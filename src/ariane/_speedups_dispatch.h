/* ariane._speedups: dispatch_record, the compiled twin of
 * ariane.store.format.record_dispatch_py (issue 14: a DLedger follower decodes every record it
 * copies from the leader, to queue it for ConsumeQueue and index building).
 *
 *   configure_dispatch(request_cls, tags_code, schedule_topic) -> None
 *   dispatch_record(buf, pos, limit) -> DispatchRequest | None
 *
 * How it works: the checks of check_record(check_crc=False, want_dispatch=True) on the record
 * at `pos` (never reading at or past `limit`), then the DispatchRequest built in place (a
 * NamedTuple: the tuple is allocated with the class and filled, no __new__ call). The tags code
 * comes from the `tags_code` callable (the pure build's own, cached). Only a well-formed record
 * with IPv4 hosts outside SCHEDULE_TOPIC_XXXX is decoded here; anything else (a BLANK, bad
 * sizes, bytes that are not UTF-8, IPv6 hosts, a delayed message, whose tags code is its due
 * time) returns None and the Python wrapper asks the pure twin, which says why.
 *
 * Included by _speedups.c after be16/be32/be64 and decode_properties.
 */

#define DSP_MAGIC_V1 ((int32_t)0xDAA320A7)
#define DSP_MAGIC_V2 ((int32_t)0xDAA320AB)
#define DSP_MIN_TOTAL 91
#define DSP_FIXED 88 /* up to BODYLENGTH with two IPv4 hosts */
#define DSP_V6_FLAGS 0x30

static PyObject *DSP_CLS, *DSP_TAGS_CODE, *DSP_SCHEDULE;
static PyObject *DSP_K_TAGS, *DSP_K_KEYS, *DSP_K_UNIQ;

static PyObject *configure_dispatch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyTypeObject *cls;
    (void)module;
    if (nargs != 3 || !PyType_Check(args[0]) || !PyBytes_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_dispatch(request_cls, tags_code, schedule_topic_utf8)");
        return NULL;
    }
    cls = (PyTypeObject *)args[0];
    if (!PyType_IsSubtype(cls, &PyTuple_Type) || cls->tp_dictoffset != 0) {
        PyErr_SetString(PyExc_TypeError, "request_cls must be a NamedTuple class");
        return NULL;
    }
    if (DSP_K_TAGS == NULL) {
        DSP_K_TAGS = PyUnicode_InternFromString("TAGS");
        DSP_K_KEYS = PyUnicode_InternFromString("KEYS");
        DSP_K_UNIQ = PyUnicode_InternFromString("UNIQ_KEY");
        if (DSP_K_TAGS == NULL || DSP_K_KEYS == NULL || DSP_K_UNIQ == NULL) {
            return NULL;
        }
    }
    Py_INCREF(args[0]);
    Py_XSETREF(DSP_CLS, args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(DSP_TAGS_CODE, args[1]);
    Py_INCREF(args[2]);
    Py_XSETREF(DSP_SCHEDULE, args[2]);
    Py_RETURN_NONE;
}

/* props.get(key) as a new reference (None when absent) */
static PyObject *dsp_get(PyObject *props, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(props, key);
    if (v == NULL && PyErr_Occurred()) {
        return NULL;
    }
    v = v ? v : Py_None;
    Py_INCREF(v);
    return v;
}

/* the 11 fields of DispatchRequest from the record at b (total bytes, checked by the caller
 * up to the properties' bounds); 0, or 1 to leave it to the pure twin, or -1 on error */
static int dsp_fields(const unsigned char *b, int32_t total, int32_t magic, PyObject **items) {
    Py_ssize_t p = DSP_FIXED, end = total;
    int32_t body_len = be32(b + 84);
    int topic_len, props_len;
    PyObject *props, *tags;
    if (body_len < 0 || p + body_len > end) {
        return 1;
    }
    p += body_len;
    if (magic == DSP_MAGIC_V2) {
        if (p + 2 > end) {
            return 1;
        }
        topic_len = be16(b + p);
        p += 2;
    } else {
        if (p + 1 > end) {
            return 1;
        }
        topic_len = (signed char)b[p];
        p += 1;
    }
    if (topic_len < 0 || p + topic_len + 2 > end) {
        return 1;
    }
    if (topic_len == PyBytes_GET_SIZE(DSP_SCHEDULE) &&
        memcmp(b + p, PyBytes_AS_STRING(DSP_SCHEDULE), (size_t)topic_len) == 0) {
        return 1; /* tagsCode is the delivery time: the pure twin knows the delay levels */
    }
    props_len = be16(b + p + topic_len);
    if (props_len < 0 || p + topic_len + 2 + props_len != end || be64(b + 28) < 0 ||
        be64(b + 20) < 0) {
        return 1;
    }
    items[0] = PyUnicode_DecodeUTF8((const char *)b + p, topic_len, "strict");
    if (items[0] == NULL) {
        return -1;
    }
    p += topic_len + 2;
    if (props_len) {
        PyObject *text = PyUnicode_DecodeUTF8((const char *)b + p, props_len, "strict");
        if (text == NULL) {
            return -1;
        }
        props = decode_properties(NULL, text);
        Py_DECREF(text);
    } else {
        props = PyDict_New();
    }
    if (props == NULL) {
        return -1;
    }
    items[10] = props;
    tags = dsp_get(props, DSP_K_TAGS);
    if (tags == NULL) {
        return -1;
    }
    items[4] = PyObject_CallOneArg(DSP_TAGS_CODE, tags);
    Py_DECREF(tags);
    items[1] = PyLong_FromLong(be32(b + 12));
    items[2] = PyLong_FromLongLong(be64(b + 28));
    items[3] = PyLong_FromLong(total);
    items[5] = PyLong_FromLongLong(be64(b + 56));
    items[6] = PyLong_FromLongLong(be64(b + 20));
    items[7] = dsp_get(props, DSP_K_KEYS);
    items[8] = dsp_get(props, DSP_K_UNIQ);
    items[9] = PyLong_FromLong(be32(b + 36));
    for (int i = 0; i < 11; i++) {
        if (items[i] == NULL) {
            return -1;
        }
    }
    return 0;
}

static PyObject *dispatch_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    const unsigned char *b;
    Py_ssize_t pos, limit;
    int32_t total, magic;
    PyObject *items[11] = {NULL}, *result = NULL;
    int rc, i;
    (void)module;
    if (nargs != 3 || DSP_CLS == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "dispatch_record(buf, pos, limit) after configure_dispatch()");
        return NULL;
    }
    pos = PyLong_AsSsize_t(args[1]);
    limit = pos == -1 && PyErr_Occurred() ? -1 : PyLong_AsSsize_t(args[2]);
    if (limit == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return NULL;
        }
        PyErr_Clear(); /* a huge pos or limit: the pure twin's answer */
        Py_RETURN_NONE;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    limit = limit < view.len ? limit : view.len;
    if (pos < 0 || limit - pos < DSP_FIXED) {
        goto other;
    }
    b = (const unsigned char *)view.buf + pos;
    total = be32(b);
    magic = be32(b + 4);
    if ((magic != DSP_MAGIC_V1 && magic != DSP_MAGIC_V2) || total < DSP_MIN_TOTAL ||
        total > limit - pos || (be32(b + 36) & DSP_V6_FLAGS)) {
        goto other;
    }
    rc = dsp_fields(b, total, magic, items);
    if (rc < 0) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            goto done;
        }
        PyErr_Clear();
        goto other;
    }
    if (rc > 0) {
        goto other;
    }
    result = ((PyTypeObject *)DSP_CLS)->tp_alloc((PyTypeObject *)DSP_CLS, 11);
    if (result != NULL) {
        for (i = 0; i < 11; i++) {
            PyTuple_SET_ITEM(result, i, items[i]); /* steals */
            items[i] = NULL;
        }
    }
    goto done;
other:
    result = Py_None;
    Py_INCREF(result);
done:
    for (i = 0; i < 11; i++) {
        Py_XDECREF(items[i]);
    }
    PyBuffer_Release(&view);
    return result;
}

#define DISPATCH_METHODS                                                                         \
    {"configure_dispatch", (PyCFunction)(void (*)(void))configure_dispatch, METH_FASTCALL,     \
     "configure_dispatch(request_cls, tags_code, schedule_topic_utf8) for dispatch_record."},   \
    {"dispatch_record", (PyCFunction)(void (*)(void))dispatch_record, METH_FASTCALL,           \
     "The DispatchRequest of a well-formed IPv4 record at pos, or None (ask the pure twin)."},
