/* ariane._speedups, client family: the head of a producer's single SEND_MESSAGE_V2 frame and the
 * SendResult of its answer, each in one call (issue 18: the client's CPU per async send),
 * #included by _speedups.c.
 *
 *   send_head(prefix, topic, queue_id, sys_flag, born, flag, properties, middle, opaque, suffix,
 *             body_length, max_frame_bytes) -> bytes | None
 *   send_result(cls, ok_status, code, ext, mq, queue_id, msg_id) -> SendResult | None
 *
 * How it works. A single send's JSON header differs from one message to the next only in a few
 * fields, so the producer keeps the rest as bytes (ariane.client._send_head: `prefix` is
 * `{"code":310,"extFields":{` and the producer's fixed fields with a trailing comma, `middle`
 * `},"flag":0,"language":"PYTHON","opaque":`, `suffix` the serialisation type and version and
 * the closing brace) and this writes the length field, the header word and the header in one
 * buffer: prefix, "b" topic, "e" queue id, "f" sysFlag, "g" born timestamp, "h" flag,
 * "i" properties, middle, the opaque, suffix. Strings are escaped as orjson writes them (`"`
 * and `\` with a backslash; \b \t \n \f \r short; other controls below 0x20 as \u00xx;
 * everything else as its UTF-8 bytes), ints as decimal text. The twin and reference is
 * ariane.client._send_head.send_head_py, itself pinned to build_request + encode_parts by
 * tests/unit/client/test_send_wire.py. Anything else (a str that is not UTF-8, a non-int or an
 * int outside 64 bits, a header over 16 MiB, a frame over max_frame_bytes) returns None and the
 * caller takes the generic path, which encodes or raises its error.
 *
 * send_result is ariane.client._api.parse_send_response (the twin and reference) for the common
 * answer only: code SUCCESS (an exact int 0), queueId and queueOffset plain decimal text ("-"
 * and 1 to 18 ASCII digits), queueId equal to the queue's id (so the queue object is reused),
 * msgId present, msgId/transactionId/MSG_REGION/TRACE_ON absent or str. The instance of `cls`
 * (SendResult, a slots dataclass) is allocated and its eight fields set without running its
 * __init__, with the values the parse gives them, and taken out of the cyclic collector
 * (PyObject_GC_UnTrack, as CPython does with a tuple of atoms) when neither it nor its queue
 * has an instance dict: a caller that keeps its futures (20,000 in the peer harness's latency
 * phase) then leaves one tracked object per send (the future) for every full collection to
 * walk instead of two. Anything else returns None and the parse
 * decides (other statuses, errors, another queue); tests/unit/client/test_send_result.py
 * compares both on generated answers.
 */

/* the JSON text of s (quotes included) appended at out; the bytes written */
static Py_ssize_t sh_json_str(char *out, const char *s, Py_ssize_t n) {
    static const char hex[] = "0123456789abcdef";
    char *p = out;
    Py_ssize_t i;
    *p++ = '"';
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *p++ = (char)c;
            continue;
        }
        *p++ = '\\';
        switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\b': *p++ = 'b'; break;
        case '\t': *p++ = 't'; break;
        case '\n': *p++ = 'n'; break;
        case '\f': *p++ = 'f'; break;
        case '\r': *p++ = 'r'; break;
        default:
            *p++ = 'u';
            *p++ = '0';
            *p++ = '0';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
    }
    *p++ = '"';
    return p - out;
}

/* the decimal text of v appended at out (as "%lld" writes it); the bytes written */
static Py_ssize_t sh_decimal(char *out, long long v) {
    char digits[24];
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    Py_ssize_t n = 0, i;
    do {
        digits[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u != 0);
    i = 0;
    if (v < 0) {
        out[i++] = '-';
    }
    while (n > 0) {
        out[i++] = digits[--n];
    }
    return i;
}

/* a str argument's UTF-8 text; 0 (no error set) when it is not an exact, encodable str */
static int sh_text(PyObject *obj, const char **text, Py_ssize_t *n) {
    if (!PyUnicode_CheckExact(obj)) {
        return 0;
    }
    *text = PyUnicode_AsUTF8AndSize(obj, n);
    if (*text == NULL) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* an int argument as long long; 0 (no error set) when it is not an exact int of 64 bits */
static int sh_int(PyObject *obj, long long *v) {
    int overflow = 0;
    if (!PyLong_CheckExact(obj)) {
        return 0;
    }
    *v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow || (*v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

static PyObject *send_head(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    /* args: prefix, topic, queue_id, sys_flag, born, flag, properties, middle, opaque, suffix,
     * body_length, max_frame_bytes */
    static const int str_at[3] = {1, 4, 6};
    static const int int_at[4] = {2, 3, 5, 8};
    static const char *const keys[6] = {"\"b\":", ",\"e\":\"", "\",\"f\":\"", "\",\"g\":",
                                        ",\"h\":\"", "\",\"i\":"};
    const char *text[3];
    Py_ssize_t text_len[3], cap, hl, length, body_length, max_frame;
    long long ints[4];
    PyObject *head;
    char *out, *p;
    int i;
    (void)module;
    if (nargs != 12 || !PyBytes_CheckExact(args[0]) || !PyBytes_CheckExact(args[7]) ||
        !PyBytes_CheckExact(args[9])) {
        PyErr_SetString(PyExc_TypeError,
                        "send_head(prefix, topic, queue_id, sys_flag, born, flag, properties, "
                        "middle, opaque, suffix, body_length, max_frame_bytes)");
        return NULL;
    }
    body_length = PyLong_AsSsize_t(args[10]);
    if (body_length == -1 && PyErr_Occurred()) {
        return NULL;
    }
    max_frame = PyLong_AsSsize_t(args[11]);
    if (max_frame == -1 && PyErr_Occurred()) {
        return NULL;
    }
    for (i = 0; i < 3; i++) {
        if (!sh_text(args[str_at[i]], &text[i], &text_len[i]) || text_len[i] > 0xFFFFFF) {
            Py_RETURN_NONE;
        }
    }
    for (i = 0; i < 4; i++) {
        if (!sh_int(args[int_at[i]], &ints[i])) {
            Py_RETURN_NONE;
        }
    }
    /* 6 bytes per escaped byte at most, 20 characters per int, the fixed keys */
    cap = 8 + PyBytes_GET_SIZE(args[0]) + PyBytes_GET_SIZE(args[7]) + PyBytes_GET_SIZE(args[9]) +
          6 * (text_len[0] + text_len[1] + text_len[2]) + 6 + 4 * 21 + 64;
    head = PyBytes_FromStringAndSize(NULL, cap);
    if (head == NULL) {
        return NULL;
    }
    out = PyBytes_AS_STRING(head);
    p = out + 8;
    memcpy(p, PyBytes_AS_STRING(args[0]), (size_t)PyBytes_GET_SIZE(args[0]));
    p += PyBytes_GET_SIZE(args[0]);
    for (i = 0; i < 6; i++) {
        size_t kl = strlen(keys[i]);
        memcpy(p, keys[i], kl);
        p += kl;
        switch (i) {
        case 0: p += sh_json_str(p, text[0], text_len[0]); break;  /* b: topic */
        case 1: p += sh_decimal(p, ints[0]); break;               /* e: queue id */
        case 2: p += sh_decimal(p, ints[1]); break;               /* f: sysFlag */
        case 3: p += sh_json_str(p, text[1], text_len[1]); break;  /* g: born timestamp */
        case 4: p += sh_decimal(p, ints[2]); break;               /* h: flag */
        default: p += sh_json_str(p, text[2], text_len[2]); break; /* i: properties */
        }
    }
    memcpy(p, PyBytes_AS_STRING(args[7]), (size_t)PyBytes_GET_SIZE(args[7]));
    p += PyBytes_GET_SIZE(args[7]);
    p += sh_decimal(p, ints[3]); /* the opaque */
    memcpy(p, PyBytes_AS_STRING(args[9]), (size_t)PyBytes_GET_SIZE(args[9]));
    p += PyBytes_GET_SIZE(args[9]);
    hl = (p - out) - 8;
    length = body_length < 0 || body_length > INT32_MAX ? INT32_MAX : 4 + hl + body_length;
    if (hl > 0xFFFFFF || length > INT32_MAX - 4 || length + 4 > max_frame) {
        Py_DECREF(head);
        Py_RETURN_NONE;
    }
    out[0] = (char)(length >> 24);
    out[1] = (char)(length >> 16);
    out[2] = (char)(length >> 8);
    out[3] = (char)length;
    out[4] = 0;
    out[5] = (char)(hl >> 16);
    out[6] = (char)(hl >> 8);
    out[7] = (char)hl;
    if (_PyBytes_Resize(&head, p - out) < 0) {
        return NULL;
    }
    return head;
}

/* ext[key] as an exact str (a borrowed reference), Py_None when absent, NULL when another type
 * (no error set) */
static PyObject *sr_text(PyObject *ext, PyObject *key) {
    PyObject *value = PyDict_GetItemWithError(ext, key);
    if (value == NULL) {
        return PyErr_Occurred() ? NULL : Py_None;
    }
    return PyUnicode_CheckExact(value) ? value : NULL;
}

/* ext[key] as an int when it is plain decimal text ("-" and 1 to 18 ASCII digits): a new
 * reference, or NULL with no error set (int() of the pure twin decides) */
static PyObject *sr_int(PyObject *ext, PyObject *key) {
    PyObject *value = sr_text(ext, key);
    const char *s;
    Py_ssize_t n, i = 0;
    long long v = 0;
    if (value == NULL || value == Py_None || !PyUnicode_IS_ASCII(value)) {
        return NULL;
    }
    s = (const char *)PyUnicode_DATA(value);
    n = PyUnicode_GET_LENGTH(value);
    if (n > 0 && s[0] == '-') {
        i = 1;
    }
    if (n - i < 1 || n - i > 18) {
        return NULL;
    }
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return NULL;
        }
        v = v * 10 + (s[i] - '0');
    }
    return PyLong_FromLongLong(s[0] == '-' ? -v : v);
}

static PyObject *SR_NAMES[8], *SR_KEYS[6], *SR_DEFAULT_REGION, *SR_FALSE;

static int sr_init(void) {
    static const char *names[8] = {"status",        "msg_id",       "offset_msg_id",
                                   "message_queue", "queue_offset", "transaction_id",
                                   "region_id",     "trace_on"};
    static const char *keys[6] = {"queueId",       "queueOffset", "msgId",
                                  "transactionId", "MSG_REGION",  "TRACE_ON"};
    int i;
    for (i = 0; i < 8; i++) {
        if ((SR_NAMES[i] = PyUnicode_InternFromString(names[i])) == NULL) {
            return -1;
        }
    }
    for (i = 0; i < 6; i++) {
        if ((SR_KEYS[i] = PyUnicode_InternFromString(keys[i])) == NULL) {
            return -1;
        }
    }
    if ((SR_DEFAULT_REGION = PyUnicode_InternFromString("DefaultRegion")) == NULL) {
        return -1;
    }
    SR_FALSE = PyUnicode_InternFromString("false");
    return SR_FALSE == NULL ? -1 : 0;
}

/* a new instance of cls with its eight fields set, or NULL with an error set */
static PyObject *sr_build(PyObject *cls, PyObject *const *values) {
    PyTypeObject *tp = (PyTypeObject *)cls;
    PyObject *obj = tp->tp_alloc(tp, 0);
    int i;
    if (obj == NULL) {
        return NULL;
    }
    for (i = 0; i < 8; i++) {
        if (PyObject_SetAttr(obj, SR_NAMES[i], values[i]) < 0) {
            Py_DECREF(obj);
            return NULL;
        }
    }
    /* out of the cyclic collector, as CPython does with a tuple of atoms: without an instance
     * dict (slots) and with a queue without one either, the result holds strs, ints, None, a
     * bool, the status member and the queue (strs and an int): it is part of no cycle. (A
     * caller that later stores into one of its fields an object referring back to it makes a
     * cycle the collector cannot see, freed only if broken by hand; nothing in the SDK does.) */
    if (tp->tp_dictoffset == 0 && Py_TYPE(values[3])->tp_dictoffset == 0 &&
        PyObject_GC_IsTracked(obj)) {
        PyObject_GC_UnTrack(obj);
    }
    return obj;
}

static PyObject *send_result(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    /* args: cls, ok_status, code, ext, mq, queue_id, msg_id */
    PyObject *ext, *queue_id, *values[8], *result;
    PyObject *msg_id, *txn, *region, *trace;
    long long expect;
    int same;
    (void)module;
    if (nargs != 7 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "send_result(cls, ok_status, code, ext, mq, queue_id, msg_id)");
        return NULL;
    }
    if (SR_FALSE == NULL && sr_init() < 0) {
        return NULL;
    }
    ext = args[3];
    if (!PyLong_CheckExact(args[2]) || PyLong_AsLong(args[2]) != 0 || !PyDict_CheckExact(ext) ||
        !sh_int(args[5], &expect)) {
        PyErr_Clear(); /* another code, a code past a long: the pure parse decides */
        Py_RETURN_NONE;
    }
    queue_id = sr_int(ext, SR_KEYS[0]);
    if (queue_id == NULL) {
        goto pure;
    }
    same = PyLong_AsLongLong(queue_id) == expect;
    Py_DECREF(queue_id);
    if (!same) {
        goto pure; /* the broker chose another queue: a new MessageQueue */
    }
    msg_id = sr_text(ext, SR_KEYS[2]);
    txn = sr_text(ext, SR_KEYS[3]);
    region = sr_text(ext, SR_KEYS[4]);
    trace = sr_text(ext, SR_KEYS[5]);
    if (msg_id == NULL || msg_id == Py_None || txn == NULL || region == NULL || trace == NULL) {
        goto pure; /* a missing msgId (ext.get("msgId", "")): rare, left to the pure parse */
    }
    values[4] = sr_int(ext, SR_KEYS[1]);
    if (values[4] == NULL) {
        goto pure;
    }
    values[0] = args[1];
    values[1] = args[6];
    values[2] = msg_id;
    values[3] = args[4];
    values[5] = txn;
    values[6] = region == Py_None || PyUnicode_GET_LENGTH(region) == 0 ? SR_DEFAULT_REGION : region;
    if (trace == Py_None) {
        values[7] = Py_True;
    } else {
        same = PyUnicode_Compare(trace, SR_FALSE);
        if (same == -1 && PyErr_Occurred()) {
            Py_DECREF(values[4]);
            return NULL;
        }
        values[7] = same == 0 ? Py_False : Py_True;
    }
    result = sr_build(args[0], values);
    Py_DECREF(values[4]);
    return result;
pure:
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_RETURN_NONE;
}

#define CLIENT_METHODS                                                                           \
    {"send_head", (PyCFunction)(void (*)(void))send_head, METH_FASTCALL,                         \
     "The length field, header word and JSON header of a single SEND_MESSAGE_V2, or None."},    \
        {"send_result", (PyCFunction)(void (*)(void))send_result, METH_FASTCALL,                \
         "The SendResult of a send's SUCCESS answer, or None for the pure parse."},
