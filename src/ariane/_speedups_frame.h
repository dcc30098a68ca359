/* ariane._speedups, frame family: the common case of decoding one remoting frame whose header
 * is JSON (issue 18 item 2), #included by _speedups.c.
 *
 *   configure_frame(cmd_cls, loads, dumps, languages, names, json)   set once by
 *       ariane.remoting.protocol.codec: the RemotingCommand class, orjson.loads and dumps, the
 *       LanguageCode-by-name and name-by-value tables and SerializeType.JSON
 *   decode_json_frame(source, start, end) -> RemotingCommand | None
 *       the frame in source[start:end] (header word, header, body; no length field)
 *   decode_json_frames(source, pos, max_frame_bytes, commands) -> pos
 *       the same for each complete frame from pos on (length field included), in one call
 *   encode_json_parts(cmd, max_frame_bytes) -> (length + header word + header, body) | None
 *       codec.encode_parts of a command with a JSON header (twin: the pure encode_parts)
 *
 * The twin and reference is codec._decode_frame_at (pure Python). This one answers only the
 * plain case: a bytes source, serialisation type 0, a header that orjson parses into an object
 * with a known language name, a str or absent remark, extFields absent or an object of str
 * values, and code/version/opaque/flag absent or exact ints in the int range. For anything else
 * (including a header orjson refuses) it returns None and the pure decoder decides, so the
 * lenient readings and every error message stay the pure ones. The command is built with the
 * same positional call as the pure decoder's (body set by the same call, not afterwards).
 * The encoder likewise answers only commands whose ext_fields is a dict of str values, whose
 * serialize_type is SerializeType.JSON and whose body is None or bytes; it fills the same
 * header dict in the same key order and serialises it with the same orjson.dumps, and returns
 * None (the pure encoder then raises its error) when orjson refuses a value or a size limit is
 * passed. tests/unit/remoting/test_frame_native.py compares both on generated and damaged
 * frames and on generated commands.
 */

static PyObject *FRAME_CMD_CLS, *FRAME_LOADS, *FRAME_LANGS, *FRAME_JSON, *FRAME_ZERO;
static PyObject *FRAME_DUMPS, *FRAME_NAMES;
static PyObject *K_CODE, *K_LANGUAGE, *K_VERSION, *K_OPAQUE, *K_FLAG, *K_REMARK, *K_EXT;
static PyObject *K_SERIALIZE, *V_JSON, *V_OTHER;
static PyObject *A_CODE, *A_LANGUAGE, *A_VERSION, *A_OPAQUE, *A_FLAG, *A_REMARK, *A_EXT, *A_BODY,
    *A_SERIALIZE;

static int frame_names(void) {
    K_CODE = PyUnicode_InternFromString("code");
    K_LANGUAGE = PyUnicode_InternFromString("language");
    K_VERSION = PyUnicode_InternFromString("version");
    K_OPAQUE = PyUnicode_InternFromString("opaque");
    K_FLAG = PyUnicode_InternFromString("flag");
    K_REMARK = PyUnicode_InternFromString("remark");
    K_EXT = PyUnicode_InternFromString("extFields");
    K_SERIALIZE = PyUnicode_InternFromString("serializeTypeCurrentRPC");
    V_JSON = PyUnicode_InternFromString("JSON");
    V_OTHER = PyUnicode_InternFromString("OTHER");
    A_EXT = PyUnicode_InternFromString("ext_fields");
    A_BODY = PyUnicode_InternFromString("body");
    A_SERIALIZE = PyUnicode_InternFromString("serialize_type");
    FRAME_ZERO = PyLong_FromLong(0);
    /* the attribute names that are also header keys */
    A_CODE = K_CODE;
    A_LANGUAGE = K_LANGUAGE;
    A_VERSION = K_VERSION;
    A_OPAQUE = K_OPAQUE;
    A_FLAG = K_FLAG;
    A_REMARK = K_REMARK;
    return K_CODE && K_LANGUAGE && K_VERSION && K_OPAQUE && K_FLAG && K_REMARK && K_EXT &&
                   K_SERIALIZE && V_JSON && V_OTHER && A_EXT && A_BODY && A_SERIALIZE &&
                   FRAME_ZERO
               ? 0
               : -1;
}

static PyObject *configure_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6 || !PyDict_Check(args[3]) || !PyDict_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_frame(cmd_cls, loads, dumps, languages, names, json)");
        return NULL;
    }
    if (K_CODE == NULL && frame_names() < 0) {
        return NULL;
    }
    for (int i = 0; i < 6; i++) {
        Py_INCREF(args[i]);
    }
    Py_XSETREF(FRAME_CMD_CLS, args[0]);
    Py_XSETREF(FRAME_LOADS, args[1]);
    Py_XSETREF(FRAME_DUMPS, args[2]);
    Py_XSETREF(FRAME_LANGS, args[3]);
    Py_XSETREF(FRAME_NAMES, args[4]);
    Py_XSETREF(FRAME_JSON, args[5]);
    Py_RETURN_NONE;
}

/* The header's int field `key` (borrowed; FRAME_ZERO when absent): 1, or 0 when it is not an
 * exact int in the int range (the pure decoder then reads it), -1 on an error. */
static int frame_int(PyObject *obj, PyObject *key, PyObject **out) {
    PyObject *v = PyDict_GetItemWithError(obj, key);
    int overflow;
    long x;
    if (v == NULL) {
        if (PyErr_Occurred()) {
            return -1;
        }
        *out = FRAME_ZERO;
        return 1;
    }
    if (!PyLong_CheckExact(v)) {
        return 0;
    }
    x = PyLong_AsLongAndOverflow(v, &overflow);
    if (overflow || x < INT32_MIN || x > INT32_MAX) {
        return 0;
    }
    *out = v;
    return 1;
}

/* extFields as the command keeps it (new reference), Py_None for "let the pure decoder read
 * it" (also a new reference), NULL on an error. */
static PyObject *frame_ext(PyObject *obj) {
    PyObject *ext = PyDict_GetItemWithError(obj, K_EXT);
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    if (ext == NULL) {
        return PyErr_Occurred() ? NULL : PyDict_New();
    }
    if (ext == Py_None) {
        return PyDict_New();
    }
    if (!PyDict_CheckExact(ext)) {
        Py_RETURN_NONE;
    }
    while (PyDict_Next(ext, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(value) || !PyUnicode_CheckExact(key)) {
            Py_RETURN_NONE;
        }
    }
    Py_INCREF(ext);
    return ext;
}

/* The command of a parsed header `obj` and the body b[he:end], or None / NULL as above. */
static PyObject *frame_command(PyObject *obj, const unsigned char *b, Py_ssize_t he,
                               Py_ssize_t end) {
    PyObject *name, *lang, *remark, *ext, *body, *cmd;
    PyObject *argv[9];
    int ok;
    if (!PyDict_CheckExact(obj)) {
        Py_RETURN_NONE;
    }
    name = PyDict_GetItemWithError(obj, K_LANGUAGE);
    if (name == NULL || !PyUnicode_CheckExact(name)) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    lang = PyDict_GetItemWithError(FRAME_LANGS, name);
    remark = lang == NULL ? NULL : PyDict_GetItemWithError(obj, K_REMARK);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (lang == NULL || (remark != NULL && remark != Py_None && !PyUnicode_CheckExact(remark))) {
        Py_RETURN_NONE;
    }
    ok = frame_int(obj, K_CODE, &argv[0]);
    if (ok == 1) {
        ok = frame_int(obj, K_VERSION, &argv[2]);
    }
    if (ok == 1) {
        ok = frame_int(obj, K_OPAQUE, &argv[3]);
    }
    if (ok == 1) {
        ok = frame_int(obj, K_FLAG, &argv[4]);
    }
    if (ok != 1) {
        if (ok < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    ext = frame_ext(obj);
    if (ext == NULL || ext == Py_None) {
        return ext;
    }
    if (he < end) {
        body = PyBytes_FromStringAndSize((const char *)b + he, end - he);
        if (body == NULL) {
            Py_DECREF(ext);
            return NULL;
        }
    } else {
        body = Py_None;
        Py_INCREF(body);
    }
    argv[1] = lang;
    argv[5] = remark == NULL ? Py_None : remark;
    argv[6] = ext;
    argv[7] = body;
    argv[8] = FRAME_JSON;
    cmd = PyObject_Vectorcall(FRAME_CMD_CLS, argv, 9, NULL);
    Py_DECREF(ext);
    Py_DECREF(body);
    return cmd;
}

/* 1 when every value of the dict `ext` is an exact str. */
static int frame_str_values(PyObject *ext) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(ext, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(value)) {
            return 0;
        }
    }
    return 1;
}

/* The header dict of the pure _encode_json_header, same keys in the same order (new
 * reference), or NULL on an error. */
static PyObject *frame_header_dict(PyObject *const *f, PyObject *ext) {
    /* f: code, language, version, opaque, flag, remark */
    PyObject *header = PyDict_New();
    PyObject *name;
    if (header == NULL) {
        return NULL;
    }
    name = PyDict_GetItemWithError(FRAME_NAMES, f[1]);
    if (name == NULL && PyErr_Occurred()) {
        Py_DECREF(header);
        return NULL;
    }
    if (PyDict_SetItem(header, K_CODE, f[0]) < 0 || PyDict_SetItem(header, K_EXT, ext) < 0 ||
        PyDict_SetItem(header, K_FLAG, f[4]) < 0 ||
        PyDict_SetItem(header, K_LANGUAGE, name == NULL ? V_OTHER : name) < 0 ||
        PyDict_SetItem(header, K_OPAQUE, f[3]) < 0 ||
        PyDict_SetItem(header, K_SERIALIZE, V_JSON) < 0 ||
        PyDict_SetItem(header, K_VERSION, f[2]) < 0 ||
        (f[5] != Py_None && PyDict_SetItem(header, K_REMARK, f[5]) < 0)) {
        Py_DECREF(header);
        return NULL;
    }
    return header;
}

/* (head, body) of a JSON-header command with the body `body` (None or non-empty bytes), or
 * None when orjson refuses the header or a limit is passed. */
static PyObject *frame_parts(PyObject *const *f, PyObject *ext, PyObject *body, Py_ssize_t max) {
    PyObject *header = frame_header_dict(f, ext);
    PyObject *json, *head;
    Py_ssize_t hl, length;
    char *out;
    if (header == NULL) {
        return NULL;
    }
    json = PyObject_CallOneArg(FRAME_DUMPS, header);
    Py_DECREF(header);
    if (json == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) { /* orjson.JSONEncodeError is one */
            return NULL;
        }
        PyErr_Clear(); /* the pure encoder raises its LocalProtocolError */
        Py_RETURN_NONE;
    }
    hl = PyBytes_GET_SIZE(json);
    length = 4 + hl + (body == Py_None ? 0 : PyBytes_GET_SIZE(body));
    if (hl > 0xFFFFFF || length > INT32_MAX - 4 || length + 4 > max) {
        Py_DECREF(json);
        Py_RETURN_NONE;
    }
    head = PyBytes_FromStringAndSize(NULL, 8 + hl);
    if (head == NULL) {
        Py_DECREF(json);
        return NULL;
    }
    out = PyBytes_AS_STRING(head);
    out[0] = (char)(length >> 24);
    out[1] = (char)(length >> 16);
    out[2] = (char)(length >> 8);
    out[3] = (char)length;
    out[4] = 0;
    out[5] = (char)(hl >> 16);
    out[6] = (char)(hl >> 8);
    out[7] = (char)hl;
    memcpy(out + 8, PyBytes_AS_STRING(json), (size_t)hl);
    Py_DECREF(json);
    json = PyTuple_Pack(2, head, body);
    Py_DECREF(head);
    return json;
}

static PyObject *encode_json_parts(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    static PyObject **names[9] = {&A_CODE, &A_LANGUAGE, &A_VERSION, &A_OPAQUE, &A_FLAG,
                                  &A_REMARK, &A_EXT, &A_BODY, &A_SERIALIZE};
    PyObject *f[9] = {NULL};
    PyObject *result = NULL, *body;
    Py_ssize_t max;
    int i;
    (void)module;
    if (nargs != 2 || FRAME_DUMPS == NULL) {
        PyErr_SetString(PyExc_TypeError, "encode_json_parts(cmd, max_frame_bytes) after configure");
        return NULL;
    }
    max = PyLong_AsSsize_t(args[1]);
    if (max == -1 && PyErr_Occurred()) {
        return NULL;
    }
    for (i = 0; i < 9; i++) {
        f[i] = PyObject_GetAttr(args[0], *names[i]);
        if (f[i] == NULL) {
            goto done;
        }
    }
    body = f[7];
    if (f[8] != FRAME_JSON || !PyDict_CheckExact(f[6]) || !frame_str_values(f[6])) {
        result = Py_None; /* another serialisation, a non-str value: the pure encoder's */
        Py_INCREF(result);
        goto done;
    }
    if (body != Py_None && !(PyBytes_CheckExact(body) && PyBytes_GET_SIZE(body) > 0)) {
        if (!PyBytes_CheckExact(body)) {
            result = Py_None; /* another bytes-like body: the pure encoder's */
            Py_INCREF(result);
            goto done;
        }
        body = Py_None; /* b"": no body, as `body or None` */
    }
    result = frame_parts(f, f[6], body, max);
done:
    for (i = 0; i < 9; i++) {
        Py_XDECREF(f[i]);
    }
    return result;
}

/* the frame in source[start:end] of a bytes source, bounds checked by the caller: a command,
 * None (a new reference: the pure decoder decides) or NULL with an error set */
static PyObject *frame_decode_at(PyObject *source, Py_ssize_t start, Py_ssize_t end) {
    PyObject *header, *obj, *cmd;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(source);
    Py_ssize_t he;
    uint32_t word;
    word = (uint32_t)be32(b + start);
    he = start + 4 + (Py_ssize_t)(word & 0xFFFFFF);
    if ((word >> 24) != 0 || he > end) {
        Py_RETURN_NONE;
    }
    header = PyBytes_FromStringAndSize((const char *)b + start + 4, he - start - 4);
    if (header == NULL) {
        return NULL;
    }
    obj = PyObject_CallOneArg(FRAME_LOADS, header);
    Py_DECREF(header);
    if (obj == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError)) { /* orjson.JSONDecodeError is one */
            return NULL;
        }
        PyErr_Clear(); /* maybe fastjson-isms: the pure decoder reads them or says why not */
        Py_RETURN_NONE;
    }
    cmd = frame_command(obj, b, he, end);
    Py_DECREF(obj);
    return cmd;
}

static PyObject *decode_json_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t start, end;
    (void)module;
    if (nargs != 3 || FRAME_CMD_CLS == NULL) {
        PyErr_SetString(PyExc_TypeError, "decode_json_frame(source, start, end) after configure");
        return NULL;
    }
    start = PyLong_AsSsize_t(args[1]);
    end = start == -1 && PyErr_Occurred() ? -1 : PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (!PyBytes_CheckExact(args[0]) || start < 0 || end > PyBytes_GET_SIZE(args[0]) ||
        end - start < 4) {
        Py_RETURN_NONE;
    }
    return frame_decode_at(args[0], start, end);
}

/* decode_json_frames(source, pos, max_frame_bytes, commands[, raw]) -> pos: decode_json_frame
 * of every complete frame of a bytes source from pos on, appended to commands, in one call (a
 * read carries ~100 single sends); stops where a frame is incomplete, its length is out of
 * bounds or decode_json_frame would return None, and returns where it stopped: the pure
 * FrameDecoder._run then takes that frame (and raises or reads it as it always did). With a
 * true `raw`, a plain single send's frame becomes a RawSend (rs_raw_frame,
 * _speedups_sendscan.h) instead of a command. */
static PyObject *decode_json_frames(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *source, *commands;
    const unsigned char *b;
    Py_ssize_t pos, limit, total;
    (void)module;
    int raw = 0;
    if ((nargs != 4 && nargs != 5) || FRAME_CMD_CLS == NULL || !PyBytes_CheckExact(args[0]) ||
        !PyList_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "decode_json_frames(source: bytes, pos, max_frame_bytes, commands: list"
                        "[, raw]) after configure");
        return NULL;
    }
    if (nargs == 5) {
        raw = PyObject_IsTrue(args[4]);
        if (raw < 0) {
            return NULL;
        }
    }
    source = args[0];
    commands = args[3];
    pos = PyLong_AsSsize_t(args[1]);
    limit = pos == -1 && PyErr_Occurred() ? -1 : PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    total = PyBytes_GET_SIZE(source);
    b = (const unsigned char *)PyBytes_AS_STRING(source);
    while (pos >= 0 && total - pos >= 4) {
        Py_ssize_t length = (Py_ssize_t)(uint32_t)be32(b + pos), end;
        PyObject *cmd;
        if (length < 4 || length + 4 > limit) {
            break;
        }
        end = pos + 4 + length;
        if (end > total) {
            break;
        }
        cmd = raw ? rs_raw_frame(source, pos + 4, end) : Py_NewRef(Py_None);
        if (cmd == Py_None) {
            Py_DECREF(cmd);
            cmd = frame_decode_at(source, pos + 4, end);
        }
        if (cmd == NULL) {
            return NULL;
        }
        if (cmd == Py_None) {
            Py_DECREF(cmd);
            break;
        }
        if (PyList_Append(commands, cmd) < 0) {
            Py_DECREF(cmd);
            return NULL;
        }
        Py_DECREF(cmd);
        pos = end;
    }
    return PyLong_FromSsize_t(pos);
}

#define SPEEDUPS_FRAME_METHODS                                                                  \
    {"configure_frame", (PyCFunction)(void (*)(void))configure_frame, METH_FASTCALL,            \
     "configure_frame(cmd_cls, loads, languages, json) for decode_json_frame."},                \
        {"decode_json_frame", (PyCFunction)(void (*)(void))decode_json_frame, METH_FASTCALL,    \
         "Decode the plain case of a JSON-header frame source[start:end]: a command, or None."}, \
        {"decode_json_frames", (PyCFunction)(void (*)(void))decode_json_frames, METH_FASTCALL, \
         "decode_json_frame of each complete frame from pos into commands; where it stopped."}, \
        {"encode_json_parts", (PyCFunction)(void (*)(void))encode_json_parts, METH_FASTCALL,    \
         "encode_parts of a JSON-header command: (head, body), or None for the pure encoder."},
