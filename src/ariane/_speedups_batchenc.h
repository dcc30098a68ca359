/* ariane._speedups: encode_entries, the compiled twin of ariane.common.batch.encode_batch_py for
 * the producer's batches (issue 18: `ariane bench producer --batch 64`, RocketMQ
 * MessageDecoder.encodeMessages).
 *
 *   encode_entries(entries) -> bytes | None
 *
 * How it works. `entries` is a list of (body, flag, properties) tuples as prepare_batches makes
 * them: a bytes body, an int flag, the encoded properties str. Two passes: the sizes (each
 * properties string's UTF-8 length, at most 32767 bytes), then one bytes object filled with each
 * entry (TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG, BODYLENGTH, BODY, PROPERTIESLENGTH, PROPERTIES).
 * Anything else (another container, a properties map, a str that is not UTF-8 or too long, a
 * flag outside int32) returns None and the pure twin, the reference, encodes or says why not.
 *
 * Included by _speedups.c after _speedups_batchput.h (bp_put32).
 */

/* entry i's parts; 1 when it is of the shape */
static int be_entry(PyObject *entry, PyObject **body, int64_t *flag, const char **text,
                    Py_ssize_t *text_len) {
    PyObject *f;
    int overflow = 0;
    long long v;
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3) {
        return 0;
    }
    *body = PyTuple_GET_ITEM(entry, 0);
    f = PyTuple_GET_ITEM(entry, 1);
    if (!PyBytes_CheckExact(*body) || !PyLong_CheckExact(f) ||
        !PyUnicode_CheckExact(PyTuple_GET_ITEM(entry, 2))) {
        return 0;
    }
    v = PyLong_AsLongLongAndOverflow(f, &overflow);
    *text = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(entry, 2), text_len);
    if (*text == NULL || overflow || v < INT32_MIN || v > INT32_MAX || *text_len > 0x7FFF ||
        PyBytes_GET_SIZE(*body) > INT32_MAX - 22 - *text_len) {
        PyErr_Clear();
        return 0;
    }
    *flag = (int64_t)v;
    return 1;
}

static PyObject *encode_entries(PyObject *module, PyObject *entries) {
    Py_ssize_t n, i, total = 0, text_len;
    PyObject *out, *body;
    const char *text;
    int64_t flag;
    unsigned char *w;
    (void)module;
    if (!PyList_CheckExact(entries)) {
        Py_RETURN_NONE;
    }
    n = PyList_GET_SIZE(entries);
    for (i = 0; i < n; i++) {
        if (!be_entry(PyList_GET_ITEM(entries, i), &body, &flag, &text, &text_len)) {
            Py_RETURN_NONE;
        }
        total += 22 + PyBytes_GET_SIZE(body) + text_len;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        return NULL;
    }
    w = (unsigned char *)PyBytes_AS_STRING(out);
    for (i = 0; i < n; i++) {
        Py_ssize_t body_len;
        if (PyList_GET_SIZE(entries) != n ||
            !be_entry(PyList_GET_ITEM(entries, i), &body, &flag, &text, &text_len)) {
            Py_DECREF(out); /* cannot happen: nothing runs Python code between the passes */
            Py_RETURN_NONE;
        }
        body_len = PyBytes_GET_SIZE(body);
        bp_put32(w, 22 + body_len + text_len);
        memset(w + 4, 0, 8);
        bp_put32(w + 12, flag);
        bp_put32(w + 16, body_len);
        memcpy(w + 20, PyBytes_AS_STRING(body), (size_t)body_len);
        w += 20 + body_len;
        w[0] = (unsigned char)(text_len >> 8);
        w[1] = (unsigned char)text_len;
        memcpy(w + 2, text, (size_t)text_len);
        w += 2 + text_len;
    }
    return out;
}

#define BATCHENC_METHODS                                                                         \
    {"encode_entries", (PyCFunction)encode_entries, METH_O,                                      \
     "A batch body of (bytes, int, str) entries (batch.encode_batch_py), or None."},
