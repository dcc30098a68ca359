/* ariane._speedups: the Spark sink's SEND_BATCH entries of a run of rows in one C call (issue 19
 * item 3), the compiled twin of ariane.spark._entries.sink_entries_py.
 *
 *   sink_entries(offsets, data, wide, start, n, heads, ids, uniq, dedup) -> list[bytes] | None
 *
 * How it works. The rows' bodies are read straight from an Arrow binary/string column's buffers
 * (`offsets`: little-endian int32, or int64 when `wide`, from index `start`; `data`: the values,
 * or None when empty), without a Python bytes object per body. Row i's properties are
 * heads[i] (its TAGS/KEYS pairs, encoded; `heads` may be None) + uniq + ids[i] (+ dedup + ids[i]
 * when dedup is not None) + "\x02"; its entry is TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG 0,
 * BODYLENGTH (big-endian int32s), the body, PROPERTIESLENGTH (big-endian int16), the
 * properties: the bytes ariane.common.batch.encode_batch writes for the row's message. Returns
 * None when a row's properties exceed 0x7FFF bytes (the caller takes the row-by-row path);
 * ValueError for offsets outside `data` or an id that is not ASCII, TypeError for wrong types.
 *
 * Included by _speedups.c.
 */

static int64_t sk_offset(const unsigned char *p, int wide) {
    uint64_t v = 0;
    int k, width = wide ? 8 : 4;
    for (k = width - 1; k >= 0; k--) {
        v = (v << 8) | p[k];
    }
    if (!wide) {
        return (int64_t)(int32_t)(uint32_t)v;
    }
    return (int64_t)v;
}

static void sk_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Row i's parts: head (may be empty) and id, both checked. */
static int sk_parts(PyObject *heads, PyObject *ids, Py_ssize_t i, const char **head,
                    Py_ssize_t *head_len, const char **id, Py_ssize_t *id_len) {
    PyObject *m = PyList_GET_ITEM(ids, i);
    *head = "";
    *head_len = 0;
    if (heads != Py_None) {
        PyObject *h = PyList_GET_ITEM(heads, i);
        if (!PyBytes_Check(h)) {
            PyErr_SetString(PyExc_TypeError, "sink_entries: heads must be bytes");
            return -1;
        }
        *head = PyBytes_AS_STRING(h);
        *head_len = PyBytes_GET_SIZE(h);
    }
    if (!PyUnicode_Check(m) || !PyUnicode_IS_ASCII(m)) {
        PyErr_SetString(PyExc_ValueError, "sink_entries: ids must be ASCII str");
        return -1;
    }
    *id = (const char *)PyUnicode_DATA(m);
    *id_len = PyUnicode_GET_LENGTH(m);
    return 0;
}

static PyObject *sk_entry(const unsigned char *body, Py_ssize_t body_len, const char *head,
                          Py_ssize_t head_len, const char *id, Py_ssize_t id_len,
                          const char *uniq, Py_ssize_t uniq_len, const char *dedup,
                          Py_ssize_t dedup_len, Py_ssize_t props_len) {
    Py_ssize_t total = 22 + body_len + props_len;
    PyObject *entry = PyBytes_FromStringAndSize(NULL, total);
    unsigned char *p;
    if (entry == NULL) {
        return NULL;
    }
    p = (unsigned char *)PyBytes_AS_STRING(entry);
    sk_be32(p, (uint32_t)total);
    memset(p + 4, 0, 12);
    sk_be32(p + 16, (uint32_t)body_len);
    p += 20;
    memcpy(p, body, (size_t)body_len);
    p += body_len;
    p[0] = (unsigned char)(props_len >> 8);
    p[1] = (unsigned char)props_len;
    p += 2;
    memcpy(p, head, (size_t)head_len);
    p += head_len;
    memcpy(p, uniq, (size_t)uniq_len);
    p += uniq_len;
    memcpy(p, id, (size_t)id_len);
    p += id_len;
    if (dedup != NULL) {
        memcpy(p, dedup, (size_t)dedup_len);
        p += dedup_len;
        memcpy(p, id, (size_t)id_len);
        p += id_len;
    }
    *p = 0x02;
    return entry;
}

static PyObject *sink_entries_build(const Py_buffer *offs, const Py_buffer *data, int wide,
                                    Py_ssize_t start, Py_ssize_t n, PyObject *heads,
                                    PyObject *ids, PyObject *uniq, PyObject *dedup) {
    const unsigned char *ob = (const unsigned char *)offs->buf;
    const unsigned char *db = (const unsigned char *)data->buf;
    Py_ssize_t width = wide ? 8 : 4, i, uniq_len = PyBytes_GET_SIZE(uniq);
    Py_ssize_t dedup_len = dedup == Py_None ? 0 : PyBytes_GET_SIZE(dedup);
    const char *dedup_s = dedup == Py_None ? NULL : PyBytes_AS_STRING(dedup);
    int64_t lo, hi;
    PyObject *out;
    if (start < 0 || n < 0 || offs->len / width < start + n + 1) {
        PyErr_SetString(PyExc_ValueError, "sink_entries: offsets out of range");
        return NULL;
    }
    if ((out = PyList_New(n)) == NULL) {
        return NULL;
    }
    lo = sk_offset(ob + start * width, wide);
    for (i = 0; i < n; i++) {
        const char *head, *id;
        Py_ssize_t head_len, id_len, props_len;
        PyObject *entry;
        hi = sk_offset(ob + (start + i + 1) * width, wide);
        if (lo < 0 || hi < lo || hi > (int64_t)data->len || hi - lo > 0x7FFFFFFF - 0x10000) {
            PyErr_SetString(PyExc_ValueError, "sink_entries: a body outside the data buffer");
            goto fail;
        }
        if (sk_parts(heads, ids, i, &head, &head_len, &id, &id_len) < 0) {
            goto fail;
        }
        props_len = head_len + uniq_len + id_len + (dedup_s ? dedup_len + id_len : 0) + 1;
        if (props_len > 0x7FFF) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        entry = sk_entry(db + lo, (Py_ssize_t)(hi - lo), head, head_len, id, id_len,
                         PyBytes_AS_STRING(uniq), uniq_len, dedup_s, dedup_len, props_len);
        if (entry == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(out, i, entry);
        lo = hi;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *sink_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer offs, data;
    Py_ssize_t start, n;
    int wide;
    PyObject *heads, *ids, *out = NULL;
    (void)module;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError,
                        "sink_entries(offsets, data, wide, start, n, heads, ids, uniq, dedup)");
        return NULL;
    }
    heads = args[5];
    ids = args[6];
    wide = PyObject_IsTrue(args[2]);
    start = PyLong_AsSsize_t(args[3]);
    n = start == -1 && PyErr_Occurred() ? -1 : PyLong_AsSsize_t(args[4]);
    if (wide < 0 || PyErr_Occurred()) {
        return NULL;
    }
    if (!PyList_Check(ids) || PyList_GET_SIZE(ids) != n ||
        (heads != Py_None && (!PyList_Check(heads) || PyList_GET_SIZE(heads) != n)) ||
        !PyBytes_Check(args[7]) || (args[8] != Py_None && !PyBytes_Check(args[8]))) {
        PyErr_SetString(PyExc_TypeError,
                        "sink_entries: ids (and heads) lists of n, uniq and dedup bytes");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &offs, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (args[1] == Py_None) {
        data.buf = (void *)"";
        data.len = 0;
        data.obj = NULL;
    } else if (PyObject_GetBuffer(args[1], &data, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&offs);
        return NULL;
    }
    out = sink_entries_build(&offs, &data, wide, start, n, heads, ids, args[7], args[8]);
    if (args[1] != Py_None) {
        PyBuffer_Release(&data);
    }
    PyBuffer_Release(&offs);
    return out;
}

#define SINK_METHODS                                                                            \
    {"sink_entries", (PyCFunction)(void (*)(void))sink_entries, METH_FASTCALL,                  \
     "The Spark sink's SEND_BATCH entries of a run of rows (_entries.sink_entries_py)."},
