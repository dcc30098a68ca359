/* ariane._speedups: the compiled twins of a few per-message pure-Python functions (issue 18).
 *
 * How it works: each function here has a pure-Python twin that stays the reference
 * (ariane.common.properties, ariane.common.batch); ariane.common.native picks this module when
 * it was built and ARIANE_PURE is not set. tests/unit/common/test_native_identity.py checks that
 * both produce identical output (values, types, order, errors) on generated inputs.
 *
 *   encode_properties(mapping) -> str       RocketMQ MessageDecoder.messageProperties2String
 *   decode_properties(text) -> dict         MessageDecoder.string2messageProperties
 *   decode_batch(data, entry_cls) -> list   MessageDecoder.decodeMessages (SEND_BATCH body)
 *   decode_record_v4(buf, pos)              MessageDecoder.decode of one CommitLog record with
 *       IPv4 hosts: (MessageExt, end), or None whenever anything is unusual (bad magic, lengths,
 *       UTF-8, IPv6 hosts): the pure decoder then decides, so errors stay the pure ones
 *   decode_records_v4(buf, skip_flags)      MessageDecoder.decodesBatch of a PULL body: a list
 *       of MessageExt built through their slots, or None if any record is unusual
 *       (_speedups_records.h, with configure_records)
 *   join_spans(buf, starts, stops)          spans of a mapped file joined in one copy (a bulk
 *       pull answer's runs of records; _speedups_records.h, twin store.reads._join_spans_py)
 *   acl_canonical(ext, skip) -> bytes       AclUtils.combineRequestContent without the body:
 *       the values of ext but "Signature" (and skip) in key order, UTF-8
 *   acl_signature(ext, body, mac, skip) -> str   Base64(HmacSHA1) of that content then the
 *       body, computed by copying the keyed `mac` (a hashlib HMAC) and feeding it: the
 *       crypto stays hashlib's, only the calls around it are compiled
 *   acl_hmac_key / acl_sign / acl_verify    the same signature on OpenSSL's SHA-1 with the key
 *       schedule computed once (_speedups_acl.h; only when built with OpenSSL)
 *   sub_records / sub_pairs / sub_before   the SubBefore/SubAfter trace records of listener
 *       calls, a call's open pair (_speedups_trace.h; twins of _trace_records.sub_*_py)
 *   decode_json_frame(source, start, end)   _speedups_frame.h: the plain case of a remoting
 *       frame with a JSON header, or None (the pure codec then decides)
 *
 *   decode_columns(buf, start, end, tags, with_props, skip, fields)   MessageDecoder.
 *       decodesBatch of a PULL body straight into Arrow-layout column buffers, only the
 *       columns of `fields` (_speedups_columns.h)
 *   batch_scan / batch_write   a SEND_BATCH body of the common shape scanned, then written as
 *       CommitLog records (_speedups_batchput.h; twins of store.batch_put.scan_py / write_py)
 *
 * Built by hatch_build.py during `pip install` when a C compiler is present; nothing else in
 * the package needs it. Only the stable parts of the CPython C API are used.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *SEP_NV;   /* "\x01" */
static PyObject *SEP_PROP; /* "\x02" */
static PyObject *EMPTY;    /* "" */

/* f"{x}" of the pure twin: str objects as they are, anything else through format(x, ""). */
static PyObject *as_text(PyObject *x) {
    if (PyUnicode_CheckExact(x)) {
        Py_INCREF(x);
        return x;
    }
    return PyObject_Format(x, EMPTY);
}

static int append_entry(PyObject *parts, PyObject *k, PyObject *v) {
    PyObject *ks, *vs;
    int rc = -1;
    if (v == Py_None) {
        return 0;
    }
    ks = as_text(k);
    if (ks == NULL) {
        return -1;
    }
    vs = as_text(v);
    if (vs == NULL) {
        Py_DECREF(ks);
        return -1;
    }
    if (PyList_Append(parts, ks) == 0 && PyList_Append(parts, SEP_NV) == 0 &&
        PyList_Append(parts, vs) == 0 && PyList_Append(parts, SEP_PROP) == 0) {
        rc = 0;
    }
    Py_DECREF(ks);
    Py_DECREF(vs);
    return rc;
}

static PyObject *encode_properties(PyObject *module, PyObject *props) {
    PyObject *parts, *result = NULL;
    (void)module;
    parts = PyList_New(0);
    if (parts == NULL) {
        return NULL;
    }
    if (PyDict_CheckExact(props)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(props, &pos, &k, &v)) {
            /* format() may run Python code that mutates the dict: hold both */
            int rc;
            Py_INCREF(k);
            Py_INCREF(v);
            rc = append_entry(parts, k, v);
            Py_DECREF(k);
            Py_DECREF(v);
            if (rc < 0) {
                goto done;
            }
        }
    } else {
        PyObject *items, *it, *pair;
        items = PyObject_CallMethod(props, "items", NULL);
        if (items == NULL) {
            goto done;
        }
        it = PyObject_GetIter(items);
        Py_DECREF(items);
        if (it == NULL) {
            goto done;
        }
        while ((pair = PyIter_Next(it)) != NULL) {
            PyObject *k, *v;
            int rc;
            if (!PyArg_ParseTuple(pair, "OO", &k, &v)) {
                Py_DECREF(pair);
                Py_DECREF(it);
                goto done;
            }
            rc = append_entry(parts, k, v);
            Py_DECREF(pair);
            if (rc < 0) {
                Py_DECREF(it);
                goto done;
            }
        }
        Py_DECREF(it);
        if (PyErr_Occurred()) {
            goto done;
        }
    }
    result = PyUnicode_Join(EMPTY, parts);
done:
    Py_DECREF(parts);
    return result;
}

/* The property names every send carries, as interned str objects (their hash computed once):
 * decode_properties hands out these objects for those names instead of a new str (issue 18:
 * ~4 names per single send, each a new str hashed with siphash when put in the dict). Equal
 * keys, so the dict is the same to any reader. */
static const char *const DP_NAMES[] = {"UNIQ_KEY", "TAGS", "KEYS", "WAIT", "CLUSTER",
                                       "MSG_REGION", "TRACE_ON"};
enum { DP_NAME_COUNT = sizeof(DP_NAMES) / sizeof(DP_NAMES[0]) };
static PyObject *DP_NAME_OBJ[DP_NAME_COUNT];
static Py_ssize_t DP_NAME_LEN[DP_NAME_COUNT];

/* text[start:stop] as a name: one of DP_NAMES' objects (a new reference) or a new str */
static PyObject *dp_name(PyObject *text, Py_ssize_t start, Py_ssize_t stop) {
    if (PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND && DP_NAME_OBJ[0] != NULL) {
        const char *s = (const char *)PyUnicode_1BYTE_DATA(text) + start;
        Py_ssize_t n = stop - start;
        for (int k = 0; k < DP_NAME_COUNT; k++) {
            if (DP_NAME_LEN[k] == n && s[0] == DP_NAMES[k][0] &&
                memcmp(s, DP_NAMES[k], (size_t)n) == 0) {
                return Py_NewRef(DP_NAME_OBJ[k]);
            }
        }
    }
    return PyUnicode_Substring(text, start, stop);
}

/* out[name] = value, both references consumed (either may be NULL: an error is set); 0 or -1
 * with out released */
static int dp_set(PyObject *out, PyObject *name, PyObject *value) {
    int rc = value ? PyDict_SetItem(out, name, value) : -1;
    Py_XDECREF(name);
    Py_XDECREF(value);
    if (rc < 0) {
        Py_DECREF(out);
    }
    return rc;
}

/* "true", the value a send's WAIT has: handed out instead of a new str (an equal str) */
static PyObject *DP_TRUE;

/* decode_properties for a text of one byte per character: the same segments found with
 * memchr on its bytes (no PyUnicode_FindChar call per separator); the same dict */
static PyObject *dp_scan1(PyObject *out, PyObject *text, Py_ssize_t n) {
    const char *base = (const char *)PyUnicode_1BYTE_DATA(text);
    Py_ssize_t start = 0;
    while (start <= n) {
        const char *e = start < n ? memchr(base + start, 0x02, (size_t)(n - start)) : NULL;
        Py_ssize_t end = e != NULL ? e - base : n;
        const char *q = end > start ? memchr(base + start, 0x01, (size_t)(end - start)) : NULL;
        Py_ssize_t sep = q != NULL ? q - base : -1;
        if (sep > start && sep + 1 < end) {
            PyObject *name = dp_name(text, start, sep), *value = NULL;
            if (name != NULL) {
                if (end - sep - 1 == 4 && DP_TRUE != NULL && memcmp(q + 1, "true", 4) == 0) {
                    value = Py_NewRef(DP_TRUE);
                } else {
                    value = PyUnicode_Substring(text, sep + 1, end);
                }
            }
            if (dp_set(out, name, value) < 0) {
                return NULL;
            }
        }
        start = end + 1;
    }
    return out;
}

/* name = up to the first \x01, value = the rest; both must be non-empty (the Java decoder
 * drops other segments). Later duplicates overwrite earlier ones, as in a dict. */
static PyObject *decode_properties(PyObject *module, PyObject *text) {
    PyObject *out;
    Py_ssize_t n, start = 0;
    (void)module;
    out = PyDict_New();
    if (out == NULL) {
        return NULL;
    }
    switch (PyObject_IsTrue(text)) {
    case 0:
        return out;
    case -1:
        Py_DECREF(out);
        return NULL;
    }
    if (!PyUnicode_Check(text)) {
        Py_DECREF(out);
        PyErr_Format(PyExc_TypeError, "properties must be str, not %.100s",
                     Py_TYPE(text)->tp_name);
        return NULL;
    }
    n = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND) {
        return dp_scan1(out, text, n);
    }
    while (start <= n) {
        Py_ssize_t end = PyUnicode_FindChar(text, 0x02, start, n, 1);
        Py_ssize_t sep;
        if (end == -2) {
            Py_DECREF(out);
            return NULL;
        }
        if (end < 0) {
            end = n;
        }
        sep = end > start ? PyUnicode_FindChar(text, 0x01, start, end, 1) : -1;
        if (sep == -2) {
            Py_DECREF(out);
            return NULL;
        }
        if (sep > start && sep + 1 < end) {
            PyObject *name = dp_name(text, start, sep);
            PyObject *value = name ? PyUnicode_Substring(text, sep + 1, end) : NULL;
            if (dp_set(out, name, value) < 0) {
                return NULL;
            }
        }
        start = end + 1;
    }
    return out;
}

static int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

static int16_t be16(const unsigned char *p) {
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

/* Raises ValueError(message, pos); the Python caller turns it into CorruptionError. */
static PyObject *corrupt(const char *message, Py_ssize_t pos) {
    PyObject *args = Py_BuildValue("(sn)", message, pos);
    if (args != NULL) {
        PyErr_SetObject(PyExc_ValueError, args);
        Py_DECREF(args);
    }
    return NULL;
}

#define BATCH_FIXED 22 /* TOTALSIZE MAGIC BODYCRC FLAG BODYLENGTH (5 x i32) + PROPSLENGTH i16 */

static PyObject *decode_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    PyObject *out = NULL, *entry_cls;
    const unsigned char *buf;
    Py_ssize_t pos = 0, end;
    char message[160];
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decode_batch(data, entry_cls)");
        return NULL;
    }
    entry_cls = args[1];
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    buf = (const unsigned char *)view.buf;
    end = view.len;
    out = PyList_New(0);
    if (out == NULL) {
        goto fail;
    }
    while (pos < end) {
        int32_t total, flag, body_len;
        int16_t props_len;
        Py_ssize_t body_start, body_end, props_start;
        PyObject *body, *props, *flag_obj, *entry;
        if (end - pos < BATCH_FIXED) {
            corrupt("batch entry truncated", pos);
            goto fail;
        }
        total = be32(buf + pos);
        flag = be32(buf + pos + 12);
        body_len = be32(buf + pos + 16);
        if (body_len < 0 || (int64_t)total < (int64_t)BATCH_FIXED + body_len ||
            (int64_t)total > (int64_t)(end - pos)) {
            PyOS_snprintf(message, sizeof(message),
                          "batch entry has inconsistent lengths (total %d, body %d)", (int)total,
                          (int)body_len);
            corrupt(message, pos);
            goto fail;
        }
        body_start = pos + 20;
        body_end = body_start + body_len;
        props_len = be16(buf + body_end);
        if (props_len < 0 || (int64_t)BATCH_FIXED + body_len + props_len != (int64_t)total) {
            PyOS_snprintf(message, sizeof(message),
                          "batch entry has inconsistent lengths (total %d, properties %d)",
                          (int)total, (int)props_len);
            corrupt(message, pos);
            goto fail;
        }
        props_start = body_end + 2;
        props = PyUnicode_DecodeUTF8((const char *)buf + props_start, props_len, "strict");
        if (props == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                corrupt("batch entry properties are not UTF-8", pos);
            }
            goto fail;
        }
        body = PyBytes_FromStringAndSize((const char *)buf + body_start, body_len);
        flag_obj = body ? PyLong_FromLong(flag) : NULL;
        entry = flag_obj ? PyObject_CallFunctionObjArgs(entry_cls, body, flag_obj, props, NULL)
                         : NULL;
        Py_XDECREF(body);
        Py_XDECREF(flag_obj);
        Py_DECREF(props);
        if (entry == NULL) {
            goto fail;
        }
        if (PyList_Append(out, entry) < 0) {
            Py_DECREF(entry);
            goto fail;
        }
        Py_DECREF(entry);
        pos += total;
    }
    PyBuffer_Release(&view);
    return out;
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* set once by configure(): the classes a record decodes into and the format's constants */
static PyObject *MSG_CLS, *HOSTPORT_CLS;
static int32_t MAGIC_V1, MAGIC_V2, V6_FLAGS;

static PyObject *configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "configure(msg_cls, hostport_cls, v1, v2, v6_flags)");
        return NULL;
    }
    MAGIC_V1 = (int32_t)PyLong_AsLong(args[2]);
    MAGIC_V2 = (int32_t)PyLong_AsLong(args[3]);
    V6_FLAGS = (int32_t)PyLong_AsLong(args[4]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_XDECREF(MSG_CLS);
    Py_XDECREF(HOSTPORT_CLS);
    Py_INCREF(args[0]);
    Py_INCREF(args[1]);
    MSG_CLS = args[0];
    HOSTPORT_CLS = args[1];
    Py_RETURN_NONE;
}

static int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint64_t)(uint32_t)be32(p + 4));
}

static PyObject *host_port(const unsigned char *addr, int32_t port) {
    PyObject *a = PyBytes_FromStringAndSize((const char *)addr, 4);
    PyObject *p = a ? PyLong_FromLong(port) : NULL;
    PyObject *hp = p ? PyObject_CallFunctionObjArgs(HOSTPORT_CLS, a, p, NULL) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(p);
    return hp;
}

#include "_speedups_records.h" /* decode_record_v4, decode_records_v4: MessageExt objects */

#include "_speedups_aclsig.h" /* acl_canonical, acl_signature: the signature content */
#include "_speedups_acl.h" /* acl_hmac_key, acl_sign, acl_verify (with OpenSSL) */

/* java_hash_units(s) -> (h, n): Java's String.hashCode of s as an unsigned 32-bit int (31 * h + unit
 * over the UTF-16 code units, wrapping) and the number of those units. A code point above U+FFFF
 * counts as its surrogate pair, as in Java. */
static PyObject *java_hash_units(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "java_hash_units() needs a str");
        return NULL;
    }
    Py_ssize_t len = PyUnicode_GET_LENGTH(arg);
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    uint32_t h = 0;
    Py_ssize_t units = len;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *c = (const Py_UCS1 *)data;
        for (Py_ssize_t i = 0; i < len; i++) {
            h = 31u * h + c[i];
        }
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *c = (const Py_UCS2 *)data;
        for (Py_ssize_t i = 0; i < len; i++) {
            h = 31u * h + c[i];
        }
    } else {
        for (Py_ssize_t i = 0; i < len; i++) {
            Py_UCS4 cp = PyUnicode_READ(kind, data, i);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                h = 31u * h + (uint32_t)(0xD800 + (cp >> 10));
                h = 31u * h + (uint32_t)(0xDC00 + (cp & 0x3FF));
                units++;
            } else {
                h = 31u * h + cp;
            }
        }
    }
    return Py_BuildValue("(kn)", (unsigned long)h, units);
}

#include "_speedups_slotread.h" /* sr_get: a slots attribute where its descriptor says */
#include "_speedups_trace.h"
#include "_speedups_tracehook.h" /* trace_hook_before/after: the consume trace hooks in one call */
#include "_speedups_sendscan.h" /* rs_scan: a single send's JSON header from its bytes */
#include "_speedups_frame.h" /* decode_json_frame: the frame family */
#include "_speedups_columns.h" /* decode_columns: records to Arrow-layout column buffers */
#include "_speedups_dispatch.h" /* dispatch_record: a record's DispatchRequest (DLedger followers) */
#include "_speedups_crc.h" /* crc_fold: CRC-32 by carry-less multiplication (x86-64) */
#include "_speedups_batchput.h" /* batch_scan, batch_write: SEND_BATCH bodies into the CommitLog */
#include "_speedups_sink.h" /* sink_entries: the Spark sink's batch entries from Arrow buffers */
#include "_speedups_index.h" /* index_key_entries, index_write: a batch's IndexFile keys */
#include "structmember.h" /* T_OBJECT_EX: the put result's slots */
#include "_speedups_put.h" /* put_prepare, put_write: one message into the CommitLog */
#include "_speedups_putlog.h" /* put_log: CommitLog.put_message's locked part */
#include "_speedups_storeput.h" /* store_put_method: MessageStore.put_message's common put */
#include "_speedups_int64rows.h" /* int64_rows: the reput's int columns as int64 rows */
#include "_speedups_cqgroups.h" /* cq_groups: a dispatch batch's ConsumeQueue groups */
#include "_speedups_batchenc.h" /* encode_entries: a producer's batch body */
#include "_speedups_header.h" /* header_parse: typed headers from extFields */
#include "_speedups_client.h" /* send_head, send_result: a single send's frame head, its answer */
#include "_speedups_sendrun.h" /* send_prepare_run, send_answer_run: a read's single sends */
#include "_speedups_sendraw.h" /* sr_prepare_raw: a RawSend's ready send */

static PyMethodDef methods[] = {
    {"encode_properties", (PyCFunction)encode_properties, METH_O,
     "Serialise a properties map (k\\x01v\\x02 per entry, None values skipped)."},
    {"decode_properties", (PyCFunction)decode_properties, METH_O,
     "Parse a properties string; malformed segments are dropped."},
    {"decode_batch", (PyCFunction)(void (*)(void))decode_batch, METH_FASTCALL,
     "Split a SEND_BATCH body into entry_cls(body, flag, properties) objects."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(msg_cls, hostport_cls, magic_v1, magic_v2, v6_flags) for decode_record_v4."},
    RECORDS_METHODS
    {"acl_canonical", (PyCFunction)(void (*)(void))acl_canonical, METH_FASTCALL,
     "The signed header content: values but Signature (and skip) in key order, UTF-8."},
    {"acl_signature", (PyCFunction)(void (*)(void))acl_signature, METH_FASTCALL,
     "Base64(HMAC) of acl_canonical(ext, skip) then body, from a copy of the keyed mac."},
    ACL_OPENSSL_METHODS
    {"java_hash_units", (PyCFunction)java_hash_units, METH_O,
     "(Java String.hashCode as unsigned 32 bits, UTF-16 code units) of a str."},
    {"sub_records", (PyCFunction)(void (*)(void))sub_records, METH_FASTCALL,
     "SubBefore/SubAfter records of listener calls (_trace_records.sub_records_py), or None."},
    {"sub_pairs", (PyCFunction)(void (*)(void))sub_pairs, METH_FASTCALL,
     "The records of open trace pairs, claimed here (_trace_records.sub_pairs_py), or None."},
    SPEEDUPS_TRACE_HOOK_METHODS
    SPEEDUPS_TRACEHOOK_METHODS
    SPEEDUPS_TRACEPACK_METHODS
    SPEEDUPS_FRAME_METHODS
    SENDSCAN_METHODS
    COLUMNS_METHODS
    DISPATCH_METHODS
    BATCHPUT_METHODS
    SINK_METHODS
    INDEX_METHODS
    PUT_METHODS
    PUTLOG_METHODS
    STOREPUT_METHODS
    INT64ROWS_METHODS
    CQGROUPS_METHODS
    BATCHENC_METHODS
    HEADER_METHODS
    CLIENT_METHODS
    SENDRUN_METHODS
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ariane._speedups", "Compiled twins of Ariane's per-message code.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    PyObject *m;
    SEP_NV = PyUnicode_FromString("\x01");
    SEP_PROP = PyUnicode_FromString("\x02");
    EMPTY = PyUnicode_FromString("");
    SIGNATURE_KEY = PyUnicode_InternFromString("Signature");
    S_COPY = PyUnicode_InternFromString("copy");
    S_UPDATE = PyUnicode_InternFromString("update");
    S_DIGEST = PyUnicode_InternFromString("digest");
    if (SEP_NV == NULL || SEP_PROP == NULL || EMPTY == NULL || SIGNATURE_KEY == NULL ||
        S_COPY == NULL || S_UPDATE == NULL || S_DIGEST == NULL) {
        return NULL;
    }
    for (int k = 0; k < DP_NAME_COUNT; k++) {
        PyObject *name = PyUnicode_InternFromString(DP_NAMES[k]);
        if (name == NULL || PyObject_Hash(name) == -1) {
            Py_XDECREF(name);
            return NULL;
        }
        DP_NAME_LEN[k] = (Py_ssize_t)strlen(DP_NAMES[k]);
        DP_NAME_OBJ[k] = name;
    }
    if ((DP_TRUE = PyUnicode_InternFromString("true")) == NULL) {
        return NULL;
    }
    m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    /* configure_raw_send's slot count (10: RawSend with `spans`; an extension built before
     * has no constant and takes 9) */
    if (PyModule_AddIntConstant(m, "RAW_SEND_SLOTS", RS_SLOT_COUNT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "ABI", 2) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
