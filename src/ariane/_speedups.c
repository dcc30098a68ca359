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
            PyObject *name = PyUnicode_Substring(text, start, sep);
            PyObject *value = name ? PyUnicode_Substring(text, sep + 1, end) : NULL;
            int rc = value ? PyDict_SetItem(out, name, value) : -1;
            Py_XDECREF(name);
            Py_XDECREF(value);
            if (rc < 0) {
                Py_DECREF(out);
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

static PyMethodDef methods[] = {
    {"encode_properties", (PyCFunction)encode_properties, METH_O,
     "Serialise a properties map (k\\x01v\\x02 per entry, None values skipped)."},
    {"decode_properties", (PyCFunction)decode_properties, METH_O,
     "Parse a properties string; malformed segments are dropped."},
    {"decode_batch", (PyCFunction)(void (*)(void))decode_batch, METH_FASTCALL,
     "Split a SEND_BATCH body into entry_cls(body, flag, properties) objects."},
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
    if (SEP_NV == NULL || SEP_PROP == NULL || EMPTY == NULL) {
        return NULL;
    }
    m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "ABI", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
