/* ariane._speedups: a RawSend's ready send (issue 18: a read's plain single sends from the
 * frame bytes to the MessageInner with no extFields dict and no RemotingCommand).
 *
 * How it works. send_prepare_run (_speedups_sendrun.h) hands each RawSend (a frame
 * decode_json_frames left raw, _speedups_sendscan.h) to sr_prepare_raw: its extFields pairs
 * are the decoder's scan's (the RawSend's `spans`, rs_spans_read; scanned again with
 * rs_ext_scan only when a RawSend has none) and every field of the header class's plan
 * read as hdr_value reads it from the dict the eager decoder would have made (a str as it is;
 * an int of ASCII digits with an optional '-', at most 18, in the Java type's range; a bool
 * "true", "1", "false" or "0"; a missing optional field its default). A value that would need
 * more (an escape in a number, a missing required field) returns NULL with no error: the
 * reference prepare decides, on the command the RawSend decodes into. With every field read,
 * sr_ready (the same code as for a command) does the rest. Twin: the reference prepare of
 * send_run.py on the decoded command (RawSend.command()).
 */

/* the pairs of one-byte keys (SEND_MESSAGE_V2's "a".."n") by that byte: an index into the
 * pairs, or -1 */
typedef struct {
    int8_t at[128];
} sr_by1;

static void sr_by1_fill(const rs_ext *ext, sr_by1 *by1) {
    memset(by1->at, -1, sizeof(by1->at));
    for (int i = 0; i < ext->n; i++) {
        if (ext->p[i].kn == 1 && ext->p[i].k[0] < 128 && by1->at[ext->p[i].k[0]] < 0) {
            by1->at[ext->p[i].k[0]] = (int8_t)i; /* the first, as the loop below finds */
        }
    }
}

/* the pair of `key` (an ASCII str), or NULL */
static const rs_pair *sr_raw_find(const rs_ext *ext, const sr_by1 *by1, PyObject *key) {
    Py_ssize_t n;
    const char *k;
    if (!PyUnicode_CheckExact(key) || !PyUnicode_IS_ASCII(key)) {
        return NULL;
    }
    n = PyUnicode_GET_LENGTH(key);
    k = (const char *)PyUnicode_1BYTE_DATA(key);
    if (n == 0) {
        return NULL; /* rs_scan takes no empty key */
    }
    if (n == 1) { /* an ASCII key: k[0] < 128 */
        int at = by1->at[(unsigned char)k[0] & 0x7F];
        return at < 0 ? NULL : &ext->p[at];
    }
    for (int i = 0; i < ext->n; i++) {
        const rs_pair *pr = &ext->p[i];
        if (pr->kn == n && pr->k[0] == (unsigned char)k[0] &&
            (n == 1 || memcmp(pr->k + 1, k + 1, (size_t)n - 1) == 0)) {
            return &ext->p[i];
        }
    }
    return NULL;
}

/* the last topic made (a read's sends mostly share one): reused when the bytes are equal */
static PyObject *SR_RAW_TOPIC;

/* one field's value as hdr_value gives it: 1 and *out (a new reference; not made when out is
 * NULL), 0 not plain, -1 error */
static int sr_raw_value(const rs_ext *ext, const sr_by1 *by1, PyObject *field, int is_topic,
                        PyObject **out) {
    const rs_pair *pr = sr_raw_find(ext, by1, PyTuple_GET_ITEM(field, 0));
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(field, 1));
    const unsigned char *s;
    Py_ssize_t n, i = 0;
    long long x = 0;
    if (kind == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (pr == NULL) {
        int required = PyObject_IsTrue(PyTuple_GET_ITEM(field, 2));
        if (required != 0) {
            return required < 0 ? -1 : 0;
        }
        if (out != NULL) {
            *out = Py_NewRef(PyTuple_GET_ITEM(field, 3));
        }
        return 1;
    }
    if (kind == HDR_STR) {
        PyObject *last = SR_RAW_TOPIC;
        if (out == NULL) {
            return 1; /* a str field: taken as it is */
        }
        if (is_topic && last != NULL && !pr->esc && !pr->high &&
            PyUnicode_GET_LENGTH(last) == pr->vn && PyUnicode_IS_ASCII(last) &&
            memcmp(PyUnicode_1BYTE_DATA(last), pr->v, (size_t)pr->vn) == 0) {
            *out = Py_NewRef(last);
            return 1;
        }
        *out = rs_value(pr);
        if (*out == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        if (is_topic) {
            Py_XSETREF(SR_RAW_TOPIC, Py_NewRef(*out));
        }
        return 1;
    }
    if (pr->esc || pr->high) {
        return 0; /* "\u0031" and the like: the reference reads them */
    }
    s = pr->v;
    n = pr->vn;
    if (kind == HDR_BOOL) {
        PyObject *b;
        if ((n == 4 && memcmp(s, "true", 4) == 0) || (n == 1 && s[0] == '1')) {
            b = Py_True;
        } else if ((n == 5 && memcmp(s, "false", 5) == 0) || (n == 1 && s[0] == '0')) {
            b = Py_False;
        } else {
            return 0;
        }
        if (out != NULL) {
            *out = Py_NewRef(b);
        }
        return 1;
    }
    if (n > 0 && s[0] == '-') { /* hdr_int's reading */
        i = 1;
    }
    if (n - i < 1 || n - i > 18) {
        return 0;
    }
    for (Py_ssize_t j = i; j < n; j++) {
        if (s[j] < '0' || s[j] > '9') {
            return 0;
        }
        x = x * 10 + (s[j] - '0');
    }
    if (i) {
        x = -x;
    }
    if (kind == HDR_I32 && (x < INT32_MIN || x > INT32_MAX)) {
        return 0;
    }
    if (out != NULL) {
        *out = PyLong_FromLongLong(x);
        if (*out == NULL) {
            return -1;
        }
    }
    return 1;
}

/* as sr_prepare_one, for a RawSend (checked by the caller: Py_IS_TYPE(request, RS_CLS)) */
static PyObject *sr_prepare_raw(PyObject *const *ctx, PyObject *request) {
    PyObject *vals[SF_COUNT] = {NULL};
    PyObject *source = rs_slot(request, RS_SOURCE), *code = rs_slot(request, RS_CODE);
    PyObject *at = rs_slot(request, RS_EXT_AT), *end = rs_slot(request, RS_EXT_END);
    PyObject *plan, *rest, *out = NULL;
    const unsigned char *b, *after;
    Py_ssize_t ext_at, ext_end;
    long code_v;
    rs_ext ext;
    sr_by1 by1;
    int t = 1;
    if (source == NULL || code == NULL || at == NULL || end == NULL ||
        !PyBytes_CheckExact(source) || !PyLong_CheckExact(code) || !PyLong_CheckExact(at) ||
        !PyLong_CheckExact(end)) {
        return NULL;
    }
    code_v = PyLong_AsLong(code);
    ext_at = PyLong_AsSsize_t(at);
    ext_end = PyLong_AsSsize_t(end);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return NULL;
    }
    if ((code_v != 10 && code_v != 310) || ext_at < 0 || ext_end < ext_at ||
        ext_end > PyBytes_GET_SIZE(source)) {
        return NULL;
    }
    b = (const unsigned char *)PyBytes_AS_STRING(source);
    /* the decoder's scan's pairs; a RawSend without them (not expected) is scanned again */
    if (!rs_spans_read(rs_slot(request, RS_SPANS), b, ext_at, ext_end, &ext) &&
        (!rs_ext_scan(b + ext_at, b + ext_end, &ext, &after) || after != b + ext_end)) {
        return NULL;
    }
    plan = ctx[code_v == 310 ? SR_V2_PLAN : SR_V1_PLAN];
    rest = ctx[code_v == 310 ? SR_V2_REST : SR_V1_REST];
    sr_by1_fill(&ext, &by1);
    for (int k = 0; t == 1 && k < SF_COUNT; k++) {
        t = sr_raw_value(&ext, &by1, PyTuple_GET_ITEM(plan, k), k == SF_TOPIC, &vals[k]);
    }
    for (Py_ssize_t k = 0; t == 1 && k < PyTuple_GET_SIZE(rest); k++) {
        t = sr_raw_value(&ext, &by1, PyTuple_GET_ITEM(rest, k), 0, NULL);
    }
    if (t == 1) {
        out = sr_ready(ctx, vals, request);
    } else if (t < 0) {
        PyErr_Clear(); /* the reference decides */
    }
    for (int k = 0; k < SF_COUNT; k++) {
        Py_XDECREF(vals[k]);
    }
    return out;
}
