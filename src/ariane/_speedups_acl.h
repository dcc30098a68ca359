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
 *   acl_sign_request(key, access_key, token, request) -> None   the client's whole signer
 *   acl_fast_check(grants, code, ext, body) -> bool | None      the broker hook's fast path
 *
 * The pure twins are ariane.acl.credentials.hmac_key / content_signature_py /
 * verify_signature_py / sign_request_py and ariane.acl.validator.fast_check_py (hashlib's
 * hmac); tests/unit/acl/test_signing_key.py and test_fast_check.py check that both give the
 * same bytes and answers. Compiled only when hatch_build.py finds OpenSSL's headers and library
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
        const Py_UCS1 *da = PyUnicode_1BYTE_DATA(a), *db = PyUnicode_1BYTE_DATA(b);
        int c;
        if (la > 0 && lb > 0 && da[0] != db[0]) { /* most header keys differ at once */
            return da[0] < db[0];
        }
        c = memcmp(da, db, (size_t)(la < lb ? la : lb));
        return c < 0 || (c == 0 && la < lb);
    }
    return PyObject_RichCompareBool(a, b, Py_LT);
}

/* Two exact str are equal: the same length, kind and code units (str are stored in their
 * narrowest kind, so equal texts have the same kind). */
static inline int acl_str_eq(PyObject *a, PyObject *b) {
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

/* Bytes of header values hashed in one SHA1_Update (a send's header is about 200). */
#define ACL_GATHER 512

/* The UTF-8 of a str whose encoding was checked (acl_hmac): a compact ASCII str's own bytes,
 * else PyUnicode_AsUTF8AndSize's cached copy. */
static const char *acl_utf8(PyObject *value, Py_ssize_t *size) {
    if (PyUnicode_IS_COMPACT_ASCII(value)) {
        *size = PyUnicode_GET_LENGTH(value);
        return (const char *)PyUnicode_DATA(value);
    }
    return PyUnicode_AsUTF8AndSize(value, size);
}

/* Feed the values of ext but Signature (and skip) in key order, then the body, into the inner
 * state; write the HMAC into mac. Errors as the pure twin's canonical_text then body. */
static int acl_hmac(PyObject *ext, PyObject *body, PyObject *key, PyObject *skip,
                    unsigned char mac[SHA_DIGEST_LENGTH]) {
    PyObject *stack[ACL_FAST_FIELDS], **values = stack;
    Py_ssize_t n, m = 0, i, size, used = 0;
    char gather[ACL_GATHER];
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
        if (!PyUnicode_IS_COMPACT_ASCII(values[i]) &&
            PyUnicode_AsUTF8AndSize(values[i], &size) == NULL) {
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
    for (i = 0; i < m; i++) { /* short values gathered: one SHA1_Update per ACL_GATHER bytes */
        data = acl_utf8(values[i], &size);
        if (used + size > ACL_GATHER) {
            SHA1_Update(&ctx, gather, (size_t)used);
            used = 0;
        }
        if (size > ACL_GATHER) {
            SHA1_Update(&ctx, data, (size_t)size);
        } else {
            memcpy(gather + used, data, (size_t)size);
            used += size;
        }
    }
    if (used > 0) {
        SHA1_Update(&ctx, gather, (size_t)used);
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

/* Interned names of the request calls below, made on first use. */
static PyObject *ACL_EXT_FIELDS, *ACL_BODY, *ACL_ACCESS_KEY, *ACL_TOKEN, *ACL_TOPIC, *ACL_GROUP,
    *ACL_B;

static int acl_names(void) {
    if (ACL_B != NULL) {
        return 0;
    }
    ACL_EXT_FIELDS = PyUnicode_InternFromString("ext_fields");
    ACL_BODY = PyUnicode_InternFromString("body");
    ACL_ACCESS_KEY = PyUnicode_InternFromString("AccessKey");
    ACL_TOKEN = PyUnicode_InternFromString("SecurityToken");
    ACL_TOPIC = PyUnicode_InternFromString("topic");
    ACL_GROUP = PyUnicode_InternFromString("consumerGroup");
    if (!ACL_EXT_FIELDS || !ACL_BODY || !ACL_ACCESS_KEY || !ACL_TOKEN || !ACL_TOPIC || !ACL_GROUP) {
        return -1;
    }
    ACL_B = PyUnicode_InternFromString("b");
    return ACL_B == NULL ? -1 : 0;
}

/* acl_sign_request(key, access_key, token, request) -> None: the client's signer
 * (credentials.sign_request_py): AccessKey (and SecurityToken unless token is None) into
 * request.ext_fields, then Signature over every field and request.body. */
static PyObject *acl_sign_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *ext, *body, *sig;
    unsigned char mac[SHA_DIGEST_LENGTH];
    char text[28];
    int rc = -1;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "acl_sign_request(key, access_key, token, request)");
        return NULL;
    }
    if (acl_names() < 0 || (ext = PyObject_GetAttr(args[3], ACL_EXT_FIELDS)) == NULL) {
        return NULL;
    }
    body = PyObject_GetAttr(args[3], ACL_BODY);
    if (body != NULL && PyObject_SetItem(ext, ACL_ACCESS_KEY, args[1]) == 0 &&
        (args[2] == Py_None || PyObject_SetItem(ext, ACL_TOKEN, args[2]) == 0) &&
        acl_hmac(ext, body, args[0], Py_None, mac) == 0) {
        acl_b64(mac, text);
        sig = PyUnicode_DecodeASCII(text, 28, NULL);
        if (sig != NULL) {
            rc = PyObject_SetItem(ext, SIGNATURE_KEY, sig);
            Py_DECREF(sig);
        }
    }
    Py_XDECREF(body);
    Py_DECREF(ext);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ext.get(key) for the fast check: a new reference, None when absent (NULL on error). */
static PyObject *acl_get_or_none(PyObject *ext, PyObject *key) {
    PyObject *value = acl_get(ext, key);
    if (value == NULL && !PyErr_Occurred()) {
        Py_RETURN_NONE;
    }
    return value;
}

/* acl_fast_check(grants, code, ext, body) -> bool | None: the broker hook's fast path
 * (validator.fast_check_py): for a send (310, 320) or a pull (11), the grant remembered in
 * grants under fast_key(code, ext): None when none is, False when it is None (ask decide) or
 * the signature does not verify with it, True when it does. False for every other code. */
static PyObject *acl_fast_check(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *code, *ext, *need, *mac, *res, *call[3];
    long c;
    if (nargs != 4 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "acl_fast_check(grants: dict, code, ext, body)");
        return NULL;
    }
    code = args[1];
    ext = args[2];
    c = PyLong_AsLong(code);
    if (c == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (c != 310 && c != 320 && c != 11) {
        Py_RETURN_FALSE;
    }
    if (acl_names() < 0 || (need = PyTuple_New(4)) == NULL) {
        return NULL;
    }
    Py_INCREF(code);
    PyTuple_SET_ITEM(need, 0, code);
    PyTuple_SET_ITEM(need, 1, acl_get_or_none(ext, ACL_ACCESS_KEY));
    PyTuple_SET_ITEM(need, 2, acl_get_or_none(ext, c == 11 ? ACL_TOPIC : ACL_B));
    if (c == 11) {
        PyTuple_SET_ITEM(need, 3, acl_get_or_none(ext, ACL_GROUP));
    } else {
        Py_INCREF(Py_None);
        PyTuple_SET_ITEM(need, 3, Py_None);
    }
    if (!PyTuple_GET_ITEM(need, 1) || !PyTuple_GET_ITEM(need, 2) || !PyTuple_GET_ITEM(need, 3)) {
        Py_DECREF(need);
        return NULL;
    }
    mac = PyDict_GetItemWithError(args[0], need); /* borrowed */
    Py_DECREF(need);
    if (mac == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    if (mac == Py_None) {
        Py_RETURN_FALSE;
    }
    Py_INCREF(mac); /* held while acl_verify may run Python code (a mapping's methods) */
    call[0] = ext;
    call[1] = args[3];
    call[2] = mac;
    res = acl_verify(module, call, 3);
    Py_DECREF(mac);
    return res;
}

#define ACL_OPENSSL_METHODS                                                                       \
    {"acl_hmac_key", (PyCFunction)acl_hmac_key, METH_O,                                           \
     "The HMAC-SHA1 key schedule of a secret (opaque bytes for acl_sign / acl_verify)."},         \
        {"acl_sign", (PyCFunction)(void (*)(void))acl_sign, METH_FASTCALL,                        \
         "Base64(HmacSHA1) of acl_canonical(ext, skip) then body, with an acl_hmac_key key."},    \
        {"acl_verify", (PyCFunction)(void (*)(void))acl_verify, METH_FASTCALL,                    \
         "Whether ext['Signature'] is acl_sign(ext, body, key, None)."},                         \
        {"acl_sign_request", (PyCFunction)(void (*)(void))acl_sign_request, METH_FASTCALL,        \
         "Sign a request in place: AccessKey (SecurityToken) then Signature."},                   \
        {"acl_fast_check", (PyCFunction)(void (*)(void))acl_fast_check, METH_FASTCALL,            \
         "The ACL hook's fast path: True, False, or None when no grant is remembered."},
#else
#define ACL_OPENSSL_METHODS
#endif
