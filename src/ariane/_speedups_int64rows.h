/* ariane._speedups: int64_rows, the compiled twin of ariane.store.dispatch_rows.int64_rows_py
 * (issue 18: the reput thread's ConsumeQueue columns, `ariane bench store`).
 *
 *   int64_rows(columns) -> bytearray | None
 *
 * How it works: `columns` is a tuple of k tuples or lists of one length n (a dispatch batch's
 * sysFlags, queue ids, physical offsets, sizes, tags codes and queue offsets); the result holds
 * them as k rows of n native int64 values, one row after the other, which is what
 * numpy.array(columns, dtype=numpy.int64) holds, without numpy's per-element type discovery
 * (~300 instructions per message for six columns). Columns of unequal lengths or an element
 * that is not an exact int in the int64 range return None: the pure twin decides (numpy raises
 * or converts).
 *
 * Included by _speedups.c after _speedups_put.h (put_int).
 */

static PyObject *int64_rows(PyObject *module, PyObject *columns) {
    Py_ssize_t k, n, i, j;
    PyObject *out;
    int64_t *w;
    (void)module;
    if (!PyTuple_Check(columns)) {
        PyErr_SetString(PyExc_TypeError, "int64_rows(columns): a tuple of columns");
        return NULL;
    }
    k = PyTuple_GET_SIZE(columns);
    for (i = 0; i < k; i++) {
        PyObject *col = PyTuple_GET_ITEM(columns, i);
        if (!PyTuple_CheckExact(col) && !PyList_CheckExact(col)) {
            Py_RETURN_NONE;
        }
    }
    n = k ? PySequence_Fast_GET_SIZE(PyTuple_GET_ITEM(columns, 0)) : 0;
    if (n > PY_SSIZE_T_MAX / 8 / (k ? k : 1)) {
        return PyErr_NoMemory();
    }
    out = PyByteArray_FromStringAndSize(NULL, k * n * 8);
    if (out == NULL) {
        return NULL;
    }
    w = (int64_t *)PyByteArray_AS_STRING(out);
    for (i = 0; i < k; i++) {
        PyObject *col = PyTuple_GET_ITEM(columns, i);
        PyObject **items = PySequence_Fast_ITEMS(col);
        if (PySequence_Fast_GET_SIZE(col) != n) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        for (j = 0; j < n; j++) {
            if (!put_int(items[j], INT64_MIN, INT64_MAX, w++)) {
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
        }
    }
    return out;
}

#define INT64ROWS_METHODS                                                                       \
    {"int64_rows", (PyCFunction)int64_rows, METH_O,                                             \
     "Equal-length int columns as rows of native int64 (numpy.array(columns, int64)), or None."},
