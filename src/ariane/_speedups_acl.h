/* ariane._speedups, ACL part 2: HMAC-SHA1 request signatures on OpenSSL's SHA-1 (issue 11).
 *
 * How it works: RocketMQ's AclClientRPCHook signs Base64(HmacSHA1(secret, content)) where the
 * content is acl_canonical(ext, skip) then the body. HMAC (RFC 2104) is SHA-1 over the key
 * XOR ipad block then the content, and SHA-1 over the key XOR opad block then that digest; the
 * SHA-1 states after the two key blocks depend on the secret only, so acl_hmac_key computes
 * them once and each signature starts from a plain struct copy of them (no digest context is
 * allocated or duplicated per request, which is what hashlib's hmac objects cost). The SHA-1
 * itself is OpenSSL's (SHA1_Update: its assembly, SHA-NI where the CPU has it), the same
 * library hashlib uses. The GIL is held throughout, so a request never lets the store's
 * threads in mid-check.
 *
 *   acl_hmac_key(secret: bytes) -> bytes     the two SHA-1 states (opaque, for the calls below)
 *   acl_sign(ext, body, key, skip) -> str    Base64(HmacSHA1) of acl_canonical(ext, skip) then
 *       body; the same errors as the pure twin (TypeError for a value that is not a str before
 *       UnicodeEncodeError for one that is not UTF-8)
 *   acl_verify(ext, body, key) -> bool       ext["Signature"] is a non-empty ASCII str equal
 *       to acl_sign(ext, body, key, None) (compared in constant time)
 *
 * The pure twins are ariane.acl.credentials.hmac_key / content_signature_py /
 * verify_signature_py (hashlib's hmac); tests/unit/acl/test_signing_key.py checks that both
 * give the same bytes. Compiled only when hatch_build.py finds OpenSSL's headers and library
 * (ARIANE_OPENSSL): without them these three functions are absent and the hmac-object path
 * (acl_signature) runs.
 *
 * Included by _speedups.c after its ACL helpers (left_out, B64); not a separate unit.
 */
#ifdef ARIANE_OPENSSL
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA1_Init & co.: deprecated in 3.0, still exported */
#include <openssl/sha.h>

/* the key blob: the inner state (after key ^ ipad) then the outer state (after key ^ opad) */
#define ACL_KEY_SIZE ((Py_ssize_t)(2 * sizeof(SHA_CTX)))

static PyObject *acl_hmac_key(PyObject *module, PyObject *secret) {
    unsigned char block[SHA_CBLOCK], pad[SHA_CBLOCK];
    SHA_CTX states[2];
    Py_buffer view;
    int i;
    if (PyObject_GetBuffer(secret, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    memset(block, 0, sizeof(block));
    if (view.len > SHA_CBLOCK) { /* a long key is hashed first (RFC 2104) */
        SHA1((const unsigned char *)view.buf, (size_t)view.len, block);
    } else {
        memcpy(block, view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    for (i = 0; i < SHA_CBLOCK; i++) {
        pad[i] = block[i] ^ 0x36;
    }
    SHA1_Init(&states[0]);
    SHA1_Update(&states[0], pad, SHA_CBLOCK);
    for (i = 0; i < SHA_CBLOCK; i++) {
        pad[i] = block[i] ^ 0x5c;
    }
    SHA1_Init(&states[1]);
    SHA1_Update(&states[1], pad, SHA_CBLOCK);
    return PyBytes_FromStringAndSize((const char *)states, ACL_KEY_SIZE);
}

/* The value of `key` in ext as a new reference, NULL with no error when absent. */
static PyObject *acl_get(PyObject *ext, PyObject *key) {
    PyObject *value;
    if (PyDict_CheckExact(ext)) {
        value = PyDict_GetItemWithError(ext, key);
        Py_XINCREF(value);
        return value;
    }
    value = PyObject_GetItem(ext, key);
    if (value == NULL && PyErr_ExceptionMatches(PyExc_KeyError)) {
        PyErr_Clear();
    }
    return value;
}

/* Most header fields a request has on the fast path of acl_values (a SEND_MESSAGE_V2 has 16). */
#define ACL_FAST_FIELDS 48

/* key a < key b, for exact str keys: bytes order for two ASCII keys (code point order, as
 * Python compares them), else Python's comparison. 1, 0, or -1 on error. */
static int acl_key_less(PyObject *a, PyObject *b) {
    if (PyUnicode_IS_ASCII(a) && PyUnicode_IS_ASCII(b)) {
        Py_ssize_t la = PyUnicode_GET_LENGTH(a), lb = PyUnicode_GET_LENGTH(b);
        int c = memcmp(PyUnicode_1BYTE_DATA(a), PyUnicode_1BYTE_DATA(b), (size_t)(la < lb ? la : lb));
        return c < 0 || (c == 0 && la < lb);
    }
    return PyObject_RichCompareBool(a, b, Py_LT);
}

/* Two exact str are equal: the same length, kind and code units (str are stored in their
 * narrowest kind, so equal texts have the same kind). */
static int acl_str_eq(PyObject *a, PyObject *b) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return a == b || (len == PyUnicode_GET_LENGTH(b) && kind == PyUnicode_KIND(b) &&
                      memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)len * kind) == 0);
}

/* 1 if the exact str key is "Signature" or the exact str skip, else 0. */
static int acl_left_out(PyObject *key, PyObject *skip) {
    return acl_str_eq(key, SIGNATURE_KEY) || (skip != Py_None && acl_str_eq(key, skip));
}

/* The values of ext but Signature (and skip) in key order, as new references in values[0..m).
 * Fast path: an exact dict of at most ACL_FAST_FIELDS exact str keys, skip None or an exact
 * str: the items are taken with PyDict_Next and insertion-sorted (keys are unique and str order
 * is total, so the order is sorted()'s). Anything else: the keys are listed and sorted by
 * Python. Returns m, or -1 on error (TypeError for a value that is not a str, as the pure
 * twin's join: at the position in the joined sequence). */
static Py_ssize_t acl_values(PyObject *ext, PyObject *skip, PyObject **values, Py_ssize_t cap) {
    PyObject *keys[ACL_FAST_FIELDS], *vals[ACL_FAST_FIELDS], *k, *v, *list = NULL;
    Py_ssize_t n = 0, m = 0, i, j, pos = 0;
    int fast = PyDict_CheckExact(ext) && PyDict_GET_SIZE(ext) <= ACL_FAST_FIELDS &&
               PyDict_GET_SIZE(ext) <= cap && (skip == Py_None || PyUnicode_CheckExact(skip));
    if (fast) {
        while (PyDict_Next(ext, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k)) {
                fast = 0;
                break;
            }
            for (j = n; j > 0; j--) { /* insertion: a client's fields come nearly sorted */
                int less = acl_key_less(k, keys[j - 1]);
                if (less < 0) {
                    return -1;
                }
                if (!less) {
                    break;
                }
                keys[j] = keys[j - 1];
                vals[j] = vals[j - 1];
            }
            keys[j] = k;
            vals[j] = v;
            n++;
        }
    }
    if (fast) {
        for (i = 0; i < n; i++) {
            if (acl_left_out(keys[i], skip)) {
                continue;
            }
            Py_INCREF(vals[i]);
            values[m++] = vals[i];
        }
    } else {
        list = PyMapping_Keys(ext);
        if (list == NULL || PyList_Sort(list) < 0) {
            Py_XDECREF(list);
            return -1;
        }
        n = PyList_GET_SIZE(list);
        for (i = 0; i < n && m < cap; i++) {
            int out_ = left_out(PyList_GET_ITEM(list, i), skip);
            if (out_ < 0) {
                goto fail;
            }
            if (out_) {
                continue;
            }
            v = PyObject_GetItem(ext, PyList_GET_ITEM(list, i));
            if (v == NULL) {
                goto fail;
            }
            values[m++] = v;
        }
        if (i < n) {
            PyErr_SetString(PyExc_ValueError, "ext changed size while it was read");
            goto fail;
        }
        Py_DECREF(list);
        list = NULL;
    }
    for (i = 0; i < m; i++) {
        if (!PyUnicode_Check(values[i])) {
            PyErr_Format(PyExc_TypeError, "sequence item %zd: expected str instance, %.80s found",
                         i, Py_TYPE(values[i])->tp_name);
            goto fail;
        }
    }
    return m;
fail:
    Py_XDECREF(list);
    for (i = 0; i < m; i++) {
        Py_DECREF(values[i]);
    }
    return -1;
}

/* Feed the values of ext but Signature (and skip) in key order, then the body, into the inner
 * state; write the HMAC into mac. Errors as the pure twin's canonical_text then body. */
static int acl_hmac(PyObject *ext, PyObject *body, PyObject *key, PyObject *skip,
                    unsigned char mac[SHA_DIGEST_LENGTH]) {
    PyObject *stack[ACL_FAST_FIELDS], **values = stack;
    Py_ssize_t n, m = 0, i, size;
    SHA_CTX ctx;
    Py_buffer view;
    const char *data;
    int rc = -1, has_body;
    if (!PyBytes_Check(key) || PyBytes_GET_SIZE(key) != ACL_KEY_SIZE) {
        PyErr_SetString(PyExc_TypeError, "key must come from acl_hmac_key()");
        return -1;
    }
    n = PyObject_Length(ext);
    if (n < 0) {
        return -1;
    }
    if (n > ACL_FAST_FIELDS) {
        values = PyMem_Malloc((size_t)n * sizeof(PyObject *));
        if (values == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    m = acl_values(ext, skip, values, n > ACL_FAST_FIELDS ? n : ACL_FAST_FIELDS);
    if (m < 0) {
        m = 0;
        goto done;
    }
    for (i = 0; i < m; i++) { /* every encoding, before anything is hashed */
        if (PyUnicode_AsUTF8AndSize(values[i], &size) == NULL) {
            goto done;
        }
    }
    has_body = body == Py_None ? 0 : PyObject_IsTrue(body);
    if (has_body < 0) {
        goto done;
    }
    if (has_body && PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0) {
        goto done;
    }
    memcpy(&ctx, PyBytes_AS_STRING(key), sizeof(SHA_CTX));
    for (i = 0; i < m; i++) {
        data = PyUnicode_AsUTF8AndSize(values[i], &size);
        SHA1_Update(&ctx, data, (size_t)size);
    }
    if (has_body) {
        SHA1_Update(&ctx, view.buf, (size_t)view.len);
        PyBuffer_Release(&view);
    }
    SHA1_Final(mac, &ctx);
    memcpy(&ctx, PyBytes_AS_STRING(key) + sizeof(SHA_CTX), sizeof(SHA_CTX));
    SHA1_Update(&ctx, mac, SHA_DIGEST_LENGTH);
    SHA1_Final(mac, &ctx);
    rc = 0;
done:
    for (i = 0; i < m; i++) {
        Py_DECREF(values[i]);
    }
    if (values != stack) {
        PyMem_Free(values);
    }
    return rc;
}

/* Standard base64 of a SHA-1 digest: 28 characters with one '=' of padding. */
static void acl_b64(const unsigned char d[SHA_DIGEST_LENGTH], char out[28]) {
    int i, o = 0;
    for (i = 0; i < 18; i += 3) {
        uint32_t v = ((uint32_t)d[i] << 16) | ((uint32_t)d[i + 1] << 8) | d[i + 2];
        out[o++] = B64[v >> 18];
        out[o++] = B64[(v >> 12) & 63];
        out[o++] = B64[(v >> 6) & 63];
        out[o++] = B64[v & 63];
    }
    {
        uint32_t v = ((uint32_t)d[18] << 16) | ((uint32_t)d[19] << 8);
        out[o++] = B64[v >> 18];
        out[o++] = B64[(v >> 12) & 63];
        out[o++] = B64[(v >> 6) & 63];
        out[o] = '=';
    }
}

static PyObject *acl_sign(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    unsigned char mac[SHA_DIGEST_LENGTH];
    char text[28];
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "acl_sign(ext, body, key, skip) takes 4 arguments");
        return NULL;
    }
    if (acl_hmac(args[0], args[1], args[2], args[3], mac) < 0) {
        return NULL;
    }
    acl_b64(mac, text);
    return PyUnicode_DecodeASCII(text, 28, NULL);
}

static PyObject *acl_verify(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    unsigned char mac[SHA_DIGEST_LENGTH];
    char text[28];
    const char *got;
    Py_ssize_t size, i;
    PyObject *sig;
    unsigned diff = 0;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "acl_verify(ext, body, key) takes 3 arguments");
        return NULL;
    }
    sig = acl_get(args[0], SIGNATURE_KEY);
    if (sig == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_FALSE;
    }
    if (!PyUnicode_Check(sig) || PyUnicode_GET_LENGTH(sig) == 0 || !PyUnicode_IS_ASCII(sig)) {
        Py_DECREF(sig);
        Py_RETURN_FALSE;
    }
    if (acl_hmac(args[0], args[1], args[2], Py_None, mac) < 0) {
        Py_DECREF(sig);
        return NULL;
    }
    acl_b64(mac, text);
    got = PyUnicode_AsUTF8AndSize(sig, &size); /* ASCII: the str's own bytes */
    if (got == NULL) {
        Py_DECREF(sig);
        return NULL;
    }
    diff = size != 28;
    for (i = 0; i < 28; i++) { /* constant time over our 28 characters */
        diff |= (unsigned)(unsigned char)text[i] ^ (unsigned)(unsigned char)got[i < size ? i : 0];
    }
    Py_DECREF(sig);
    return PyBool_FromLong(diff == 0);
}

#define ACL_OPENSSL_METHODS                                                                       \
    {"acl_hmac_key", (PyCFunction)acl_hmac_key, METH_O,                                           \
     "The HMAC-SHA1 key schedule of a secret (opaque bytes for acl_sign / acl_verify)."},         \
        {"acl_sign", (PyCFunction)(void (*)(void))acl_sign, METH_FASTCALL,                        \
         "Base64(HmacSHA1) of acl_canonical(ext, skip) then body, with an acl_hmac_key key."},    \
        {"acl_verify", (PyCFunction)(void (*)(void))acl_verify, METH_FASTCALL,                    \
         "Whether ext['Signature'] is acl_sign(ext, body, key, None)."},
#else
#define ACL_OPENSSL_METHODS
#endif
