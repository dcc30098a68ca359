/* ariane._speedups, frame family: the common case of decoding one remoting frame whose header
 * is JSON (issue 18 item 2), #included by _speedups.c.
 *
 *   configure_frame(cmd_cls, loads, languages, json)   set once by ariane.remoting.protocol.codec:
 *       the RemotingCommand class, orjson.loads, the LanguageCode-by-name table and
 *       SerializeType.JSON
 *   decode_json_frame(source, start, end) -> RemotingCommand | None
 *       the frame in source[start:end] (header word, header, body; no length field)
 *
 * The twin and reference is codec._decode_frame_at (pure Python). This one answers only the
 * plain case: a bytes source, serialisation type 0, a header that orjson parses into an object
 * with a known language name, a str or absent remark, extFields absent or an object of str
 * values, and code/version/opaque/flag absent or exact ints in the int range. For anything else
 * (including a header orjson refuses) it returns None and the pure decoder decides, so the
 * lenient readings and every error message stay the pure ones. The command is built with the
 * same positional call as the pure decoder's (body set by the same call, not afterwards).
 * tests/unit/remoting/test_frame_native.py compares both on generated and damaged frames.
 */

static PyObject *FRAME_CMD_CLS, *FRAME_LOADS, *FRAME_LANGS, *FRAME_JSON, *FRAME_ZERO;
static PyObject *K_CODE, *K_LANGUAGE, *K_VERSION, *K_OPAQUE, *K_FLAG, *K_REMARK, *K_EXT;

static PyObject *configure_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4 || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "configure_frame(cmd_cls, loads, languages, json)");
        return NULL;
    }
    if (K_CODE == NULL) {
        K_CODE = PyUnicode_InternFromString("code");
        K_LANGUAGE = PyUnicode_InternFromString("language");
        K_VERSION = PyUnicode_InternFromString("version");
        K_OPAQUE = PyUnicode_InternFromString("opaque");
        K_FLAG = PyUnicode_InternFromString("flag");
        K_REMARK = PyUnicode_InternFromString("remark");
        K_EXT = PyUnicode_InternFromString("extFields");
        FRAME_ZERO = PyLong_FromLong(0);
        if (K_CODE == NULL || K_LANGUAGE == NULL || K_VERSION == NULL || K_OPAQUE == NULL ||
            K_FLAG == NULL || K_REMARK == NULL || K_EXT == NULL || FRAME_ZERO == NULL) {
            return NULL;
        }
    }
    for (int i = 0; i < 4; i++) {
        Py_INCREF(args[i]);
    }
    Py_XSETREF(FRAME_CMD_CLS, args[0]);
    Py_XSETREF(FRAME_LOADS, args[1]);
    Py_XSETREF(FRAME_LANGS, args[2]);
    Py_XSETREF(FRAME_JSON, args[3]);
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

static PyObject *decode_json_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *header, *obj, *cmd;
    const unsigned char *b;
    Py_ssize_t start, end, he;
    uint32_t word;
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
    b = (const unsigned char *)PyBytes_AS_STRING(args[0]);
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

#define SPEEDUPS_FRAME_METHODS                                                                  \
    {"configure_frame", (PyCFunction)(void (*)(void))configure_frame, METH_FASTCALL,            \
     "configure_frame(cmd_cls, loads, languages, json) for decode_json_frame."},                \
        {"decode_json_frame", (PyCFunction)(void (*)(void))decode_json_frame, METH_FASTCALL,    \
         "Decode the plain case of a JSON-header frame source[start:end]: a command, or None."},
