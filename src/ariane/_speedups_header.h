/* header_parse: a typed custom header out of a command's extFields (issue 18: the SEND header
 * of every single send, and every other header). Twin: the ``from_ext_fields_py`` that
 * ``ariane.remoting.protocol.headers._base`` compiles per class (the reference).
 *
 * How it works: ``plan`` is one tuple per field, (key, kind, required, default, slot), where
 * kind is 0 str, 1 I32, 2 I64, 3 bool and slot the class's member descriptor. The object is
 * allocated without __init__ (as the twin's ``object.__new__``) and each value goes straight
 * into its slot. Only the plain case is done here: ext an exact dict; integers of ASCII digits
 * with an optional '-' (at most 18 digits) inside the Java type's range; booleans "true",
 * "false", "1" or "0". Anything else (a missing required key, "+1", " 1", "TRUE", a
 * 19-digit long...) returns None before any effect visible to the caller, and the twin
 * decides: it owns every lenient reading and every HeaderFieldError. */

#include "structmember.h" /* PyMember_SetOne, PyMemberDescrObject */

enum { HDR_STR = 0, HDR_I32 = 1, HDR_I64 = 2, HDR_BOOL = 3 };

/* 1 and *out set: converted; 0: not the plain case (the twin decides); -1: error set */
static int hdr_int(PyObject *v, long kind, PyObject **out) {
    const char *s;
    Py_ssize_t n, i = 0;
    long long x = 0;
    if (!PyUnicode_CheckExact(v) || !PyUnicode_IS_ASCII(v)) {
        return 0;
    }
    n = PyUnicode_GET_LENGTH(v);
    s = (const char *)PyUnicode_1BYTE_DATA(v);
    if (n > 0 && s[0] == '-') {
        i = 1;
    }
    if (n - i < 1 || n - i > 18) {
        return 0;
    }
    for (Py_ssize_t j = i; j < n; j++) {
        char c = s[j];
        if (c < '0' || c > '9') {
            return 0;
        }
        x = x * 10 + (c - '0');
    }
    if (i) {
        x = -x;
    }
    if (kind == HDR_I32 && (x < INT32_MIN || x > INT32_MAX)) {
        return 0;
    }
    *out = PyLong_FromLongLong(x);
    return *out == NULL ? -1 : 1;
}

static int hdr_bool(PyObject *v, PyObject **out) {
    if (!PyUnicode_CheckExact(v)) {
        return 0;
    }
    if (PyUnicode_CompareWithASCIIString(v, "true") == 0 ||
        PyUnicode_CompareWithASCIIString(v, "1") == 0) {
        *out = Py_NewRef(Py_True);
        return 1;
    }
    if (PyUnicode_CompareWithASCIIString(v, "false") == 0 ||
        PyUnicode_CompareWithASCIIString(v, "0") == 0) {
        *out = Py_NewRef(Py_False);
        return 1;
    }
    return 0;
}

/* the value of one field: 1 and *out (a new reference), 0 not plain, -1 error */
static int hdr_value(PyObject *ext, PyObject *field, PyObject **out) {
    PyObject *key = PyTuple_GET_ITEM(field, 0);
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(field, 1));
    PyObject *v;
    if (kind == -1 && PyErr_Occurred()) {
        return -1;
    }
    v = PyDict_GetItemWithError(ext, key);
    if (v == NULL && PyErr_Occurred()) {
        return -1;
    }
    if (v == NULL || v == Py_None) { /* the twin's get() gives None: missing */
        if (PyObject_IsTrue(PyTuple_GET_ITEM(field, 2))) {
            return 0; /* required: the twin raises HeaderFieldError */
        }
        *out = Py_NewRef(PyTuple_GET_ITEM(field, 3));
        return 1;
    }
    if (kind == HDR_STR) {
        *out = Py_NewRef(v); /* assigned as it is, like the twin */
        return 1;
    }
    if (kind == HDR_BOOL) {
        return hdr_bool(v, out);
    }
    return hdr_int(v, kind, out);
}

static PyObject *header_parse(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *cls, *plan, *ext, *obj;
    PyTypeObject *type;
    Py_ssize_t count;
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "header_parse(cls, plan, ext)");
        return NULL;
    }
    cls = args[0];
    plan = args[1];
    ext = args[2];
    if (!PyType_Check(cls) || !PyTuple_CheckExact(plan)) {
        PyErr_SetString(PyExc_TypeError, "header_parse: cls must be a type, plan a tuple");
        return NULL;
    }
    if (!PyDict_CheckExact(ext)) {
        Py_RETURN_NONE;
    }
    type = (PyTypeObject *)cls;
    obj = type->tp_alloc(type, 0);
    if (obj == NULL) {
        return NULL;
    }
    count = PyTuple_GET_SIZE(plan);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *field = PyTuple_GET_ITEM(plan, i), *slot, *value = NULL;
        int got;
        if (!PyTuple_CheckExact(field) || PyTuple_GET_SIZE(field) != 5 ||
            !Py_IS_TYPE(PyTuple_GET_ITEM(field, 4), &PyMemberDescr_Type)) {
            Py_DECREF(obj);
            PyErr_SetString(PyExc_TypeError, "header_parse: a plan field is not "
                                             "(key, kind, required, default, member slot)");
            return NULL;
        }
        slot = PyTuple_GET_ITEM(field, 4);
        if (!PyType_IsSubtype(type, ((PyDescrObject *)slot)->d_type)) {
            Py_DECREF(obj);
            PyErr_SetString(PyExc_TypeError, "header_parse: a slot of another class");
            return NULL;
        }
        got = hdr_value(ext, field, &value);
        if (got <= 0) {
            Py_DECREF(obj);
            if (got < 0) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
        got = PyMember_SetOne((char *)obj, ((PyMemberDescrObject *)slot)->d_member, value);
        Py_DECREF(value);
        if (got < 0) {
            Py_DECREF(obj);
            return NULL;
        }
    }
    return obj;
}

#define HEADER_METHODS                                                                          \
    {"header_parse", (PyCFunction)(void (*)(void))header_parse, METH_FASTCALL,                 \
     "header_parse(cls, plan, ext): the header from extFields in the plain case, else None."},
