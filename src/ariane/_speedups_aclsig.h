/* ariane._speedups, ACL part 1: the signature content (ariane.acl.credentials, issue 11).
 *
 * How it works: RocketMQ's AclUtils.combineRequestContent joins the values of a request's
 * extFields but "Signature" in key order, then the body; HmacSHA1 of that, Base64-encoded, is
 * the signature. acl_canonical builds the content without the body (UTF-8); acl_signature
 * copies a keyed hashlib HMAC and feeds it the content and the body, so the crypto stays
 * hashlib's and only the calls around it are compiled. Part 2 (_speedups_acl.h) does the same
 * on OpenSSL's SHA-1 with the key schedule computed once. #included by _speedups.c.
 */

/* ---- ACL signature content (ariane.acl.credentials) ------------------------------------ */

static PyObject *SIGNATURE_KEY; /* "Signature" */
static PyObject *S_COPY, *S_UPDATE, *S_DIGEST;

/* hashlib releases the GIL while hashing 2048 bytes or more (see _GIL_SAFE_CHUNK of the
 * pure twin): feed at most this many bytes per update() call. */
#define GIL_SAFE_CHUNK 2047

/* 1 if key equals "Signature" or skip (when skip is not None), 0 if not, -1 on error. */
static int left_out(PyObject *key, PyObject *skip) {
    int eq = PyObject_RichCompareBool(key, SIGNATURE_KEY, Py_EQ);
    if (eq != 0 || skip == Py_None) {
        return eq;
    }
    return PyObject_RichCompareBool(key, skip, Py_EQ);
}

/* The pure twin: sorted keys, Signature and skip removed, "".join(values) (TypeError for a
 * value that is not a str, before any encoding), then .encode("utf-8"). */
static PyObject *canonical(PyObject *ext, PyObject *skip) {
    PyObject *keys, *result = NULL, **values = NULL;
    Py_ssize_t n, m = 0, i, total = 0, size;
    const char *data;
    char *out;
    keys = PyMapping_Keys(ext);
    if (keys == NULL) {
        return NULL;
    }
    if (PyList_Sort(keys) < 0) {
        goto done;
    }
    n = PyList_GET_SIZE(keys);
    values = PyMem_Malloc((n ? n : 1) * sizeof(PyObject *));
    if (values == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i), *value;
        int out_ = left_out(key, skip);
        if (out_ < 0) {
            goto done;
        }
        if (out_) {
            continue;
        }
        value = PyObject_GetItem(ext, key);
        if (value == NULL) {
            goto done;
        }
        values[m++] = value;
        if (!PyUnicode_Check(value)) {
            PyErr_Format(PyExc_TypeError, "sequence item %zd: expected str instance, %.80s found",
                         m - 1, Py_TYPE(value)->tp_name);
            goto done;
        }
    }
    for (i = 0; i < m; i++) {
        if (PyUnicode_AsUTF8AndSize(values[i], &size) == NULL) {
            goto done;
        }
        total += size;
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL) {
        goto done;
    }
    out = PyBytes_AS_STRING(result);
    for (i = 0; i < m; i++) {
        data = PyUnicode_AsUTF8AndSize(values[i], &size);
        memcpy(out, data, (size_t)size);
        out += size;
    }
done:
    if (values != NULL) {
        for (i = 0; i < m; i++) {
            Py_DECREF(values[i]);
        }
        PyMem_Free(values);
    }
    Py_DECREF(keys);
    return result;
}

static PyObject *acl_canonical(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "acl_canonical(ext, skip) takes 2 arguments");
        return NULL;
    }
    return canonical(args[0], args[1]);
}

/* mac.update(data) in chunks of at most GIL_SAFE_CHUNK bytes. */
static int feed(PyObject *mac, PyObject *data) {
    Py_buffer view;
    Py_ssize_t start;
    PyObject *r;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    if (view.len <= GIL_SAFE_CHUNK) {
        PyBuffer_Release(&view);
        r = PyObject_CallMethodOneArg(mac, S_UPDATE, data);
        if (r == NULL) {
            return -1;
        }
        Py_DECREF(r);
        return 0;
    }
    for (start = 0; start < view.len; start += GIL_SAFE_CHUNK) {
        Py_ssize_t len = view.len - start < GIL_SAFE_CHUNK ? view.len - start : GIL_SAFE_CHUNK;
        PyObject *part = PyMemoryView_FromMemory((char *)view.buf + start, len, PyBUF_READ);
        if (part == NULL) {
            PyBuffer_Release(&view);
            return -1;
        }
        r = PyObject_CallMethodOneArg(mac, S_UPDATE, part);
        Py_DECREF(part);
        if (r == NULL) {
            PyBuffer_Release(&view);
            return -1;
        }
        Py_DECREF(r);
    }
    PyBuffer_Release(&view);
    return 0;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Standard base64 with padding (binascii.b2a_base64(newline=False)) as an ASCII str. */
static PyObject *base64_text(PyObject *digest) {
    char buf[128];
    const unsigned char *d;
    Py_ssize_t n, i, o = 0;
    if (!PyBytes_Check(digest) || PyBytes_GET_SIZE(digest) > 90) {
        PyErr_SetString(PyExc_TypeError, "digest() must return at most 90 bytes");
        return NULL;
    }
    d = (const unsigned char *)PyBytes_AS_STRING(digest);
    n = PyBytes_GET_SIZE(digest);
    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = ((uint32_t)d[i] << 16) | ((uint32_t)d[i + 1] << 8) | d[i + 2];
        buf[o++] = B64[v >> 18];
        buf[o++] = B64[(v >> 12) & 63];
        buf[o++] = B64[(v >> 6) & 63];
        buf[o++] = B64[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)d[i] << 16;
        buf[o++] = B64[v >> 18];
        buf[o++] = B64[(v >> 12) & 63];
        buf[o++] = '=';
        buf[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)d[i] << 16) | ((uint32_t)d[i + 1] << 8);
        buf[o++] = B64[v >> 18];
        buf[o++] = B64[(v >> 12) & 63];
        buf[o++] = B64[(v >> 6) & 63];
        buf[o++] = '=';
    }
    return PyUnicode_DecodeASCII(buf, o, NULL);
}

static PyObject *acl_signature(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *text, *mac, *digest, *result = NULL, *body;
    int has_body;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "acl_signature(ext, body, mac, skip) takes 4 arguments");
        return NULL;
    }
    text = canonical(args[0], args[3]);
    if (text == NULL) {
        return NULL;
    }
    body = args[1];
    has_body = body == Py_None ? 0 : PyObject_IsTrue(body);
    if (has_body < 0) {
        Py_DECREF(text);
        return NULL;
    }
    mac = PyObject_CallMethodNoArgs(args[2], S_COPY);
    if (mac == NULL) {
        Py_DECREF(text);
        return NULL;
    }
    if (feed(mac, text) == 0 && (!has_body || feed(mac, body) == 0)) {
        digest = PyObject_CallMethodNoArgs(mac, S_DIGEST);
        if (digest != NULL) {
            result = base64_text(digest);
            Py_DECREF(digest);
        }
    }
    Py_DECREF(mac);
    Py_DECREF(text);
    return result;
}
