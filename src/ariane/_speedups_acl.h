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

/* Feed the values of ext but Signature (and skip) in key order, then the body, into the inner
 * state; write the HMAC into mac. Errors as the pure twin's canonical_text then body. */
static int acl_hmac(PyObject *ext, PyObject *body, PyObject *key, PyObject *skip,
                    unsigned char mac[SHA_DIGEST_LENGTH]) {
    PyObject *keys, **values = NULL;
    Py_ssize_t n, m = 0, i, size;
    SHA_CTX ctx;
    Py_buffer view;
    const char *data;
    int rc = -1, has_body;
    if (!PyBytes_Check(key) || PyBytes_GET_SIZE(key) != ACL_KEY_SIZE) {
        PyErr_SetString(PyExc_TypeError, "key must come from acl_hmac_key()");
        return -1;
    }
    keys = PyMapping_Keys(ext);
    if (keys == NULL) {
        return -1;
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
    for (i = 0; i < n; i++) { /* every value first: a non-str is a TypeError before encoding */
        PyObject *k = PyList_GET_ITEM(keys, i), *value;
        int out_ = left_out(k, skip);
        if (out_ < 0) {
            goto done;
        }
        if (out_) {
            continue;
        }
        value = PyObject_GetItem(ext, k);
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
    for (i = 0; i < m; i++) { /* then every encoding, before anything is hashed */
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
    if (values != NULL) {
        for (i = 0; i < m; i++) {
            Py_DECREF(values[i]);
        }
        PyMem_Free(values);
    }
    Py_DECREF(keys);
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
