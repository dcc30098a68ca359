/* ariane._speedups: cq_groups, the compiled twin of ariane.store.dispatch_groups.cq_groups_py
 * (issue 18: the reput thread's ConsumeQueue writes and arriving-listener calls per queue of a
 * dispatch batch, with no numpy call and no Python work per record).
 *
 *   cq_groups(columns) -> list[tuple] | None
 *
 * How it works: `columns` are a dispatch batch's columns (zip(*requests): topics, queue ids,
 * physical offsets, sizes, tags codes, store times, queue offsets, keys, uniq keys, sysFlags,
 * ...). One pass puts each record that enters the ConsumeQueue (not a PREPARED or ROLLBACK
 * transaction record) in the group of its (topic, queue id), groups in order of first
 * appearance; a second writes each group's ConsumeQueue units (20 bytes each, ">qiq": physical
 * offset, size, tags code) back to back. Each group is the tuple
 *
 *   (topic, queue_id, count, first_phys, last_phys, first_offset, last_row, units, same_tags)
 *
 * `units` is None unless the group is a run (queue offsets consecutive, physical offsets
 * increasing: what ConsumeQueue.put_run writes at once); `same_tags` says whether every record
 * of the group has one tags code (the listener is then called once per group). A batch with
 * an element that is not an exact int of the field's range, a topic that is not an exact str,
 * columns of unequal lengths or more than CQG_MAX groups returns None: the caller takes the
 * reference path (which says why, or raises as before).
 *
 * Included by _speedups.c after _speedups_put.h (put_int, put_be64/put_be32).
 */

enum { CQG_MAX = 256, CQG_UNIT = 20 };

typedef struct {
    PyObject *topic; /* borrowed from the column */
    int64_t queue_id, count, first_phys, last_phys, first_offset, last_offset, tags, last_row;
    int run, same_tags;
    unsigned char *w; /* the units' write cursor (second pass) */
} cqg_group;

static void cqg_be(unsigned char *p, uint64_t v, int bytes) {
    for (int k = bytes - 1; k >= 0; k--) {
        p[k] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
}

static PyObject *cqg_result(cqg_group *g, int ng, const int32_t *gid, const int64_t *vals,
                            Py_ssize_t n) {
    PyObject *units[CQG_MAX] = {NULL}, *out = NULL;
    for (int k = 0; k < ng; k++) {
        if (g[k].run) {
            units[k] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(g[k].count * CQG_UNIT));
            if (units[k] == NULL) {
                goto done;
            }
            g[k].w = (unsigned char *)PyBytes_AS_STRING(units[k]);
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        cqg_group *gr;
        if (gid[i] < 0 || !g[gid[i]].run) {
            continue;
        }
        gr = &g[gid[i]];
        cqg_be(gr->w, (uint64_t)vals[3 * i], 8);
        cqg_be(gr->w + 8, (uint64_t)(uint32_t)(int32_t)vals[3 * i + 1], 4);
        cqg_be(gr->w + 12, (uint64_t)vals[3 * i + 2], 8);
        gr->w += CQG_UNIT;
    }
    out = PyList_New(ng);
    for (int k = 0; out != NULL && k < ng; k++) {
        PyObject *item = Py_BuildValue(
            "(OLLLLLLOO)", g[k].topic, (long long)g[k].queue_id, (long long)g[k].count,
            (long long)g[k].first_phys, (long long)g[k].last_phys, (long long)g[k].first_offset,
            (long long)g[k].last_row, units[k] != NULL ? units[k] : Py_None,
            g[k].same_tags ? Py_True : Py_False);
        if (item == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, k, item);
    }
done:
    for (int k = 0; k < ng; k++) {
        Py_XDECREF(units[k]);
    }
    return out;
}

static PyObject *cq_groups(PyObject *module, PyObject *columns) {
    PyObject **cols[10];
    cqg_group *g = NULL;
    int32_t *gid = NULL;
    int64_t *vals = NULL;
    PyObject *out = NULL;
    Py_ssize_t n;
    int ng = 0, last = -1;
    (void)module;
    if (!PyTuple_Check(columns)) {
        PyErr_SetString(PyExc_TypeError, "cq_groups(columns): a tuple of columns");
        return NULL;
    }
    if (PyTuple_GET_SIZE(columns) < 10) {
        Py_RETURN_NONE;
    }
    n = -1;
    for (int c = 0; c < 10; c++) {
        PyObject *col = PyTuple_GET_ITEM(columns, c);
        if (!PyTuple_CheckExact(col) && !PyList_CheckExact(col)) {
            Py_RETURN_NONE;
        }
        if (n >= 0 && PySequence_Fast_GET_SIZE(col) != n) {
            Py_RETURN_NONE;
        }
        n = PySequence_Fast_GET_SIZE(col);
        cols[c] = PySequence_Fast_ITEMS(col);
    }
    g = PyMem_Malloc(sizeof(cqg_group) * CQG_MAX);
    gid = PyMem_Malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    vals = PyMem_Malloc(sizeof(int64_t) * 3 * (size_t)(n ? n : 1));
    if (g == NULL || gid == NULL || vals == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *topic = cols[0][i];
        int64_t flag, qid, phys, size, tags, offset;
        int k;
        cqg_group *gr;
        if (!put_int(cols[9][i], INT32_MIN, INT32_MAX, &flag)) {
            goto fallback;
        }
        if ((flag & 0xC) == 0x4 || (flag & 0xC) == 0xC) { /* PREPARED / ROLLBACK: no entry */
            gid[i] = -1;
            continue;
        }
        if (!PyUnicode_CheckExact(topic) || !put_int(cols[1][i], INT32_MIN, INT32_MAX, &qid) ||
            !put_int(cols[2][i], INT64_MIN, INT64_MAX, &phys) ||
            !put_int(cols[3][i], INT32_MIN, INT32_MAX, &size) ||
            !put_int(cols[4][i], INT64_MIN, INT64_MAX, &tags) ||
            !put_int(cols[6][i], INT64_MIN, INT64_MAX, &offset)) {
            goto fallback;
        }
        k = -1;
        if (last >= 0 && g[last].queue_id == qid &&
            (g[last].topic == topic || PyUnicode_Compare(g[last].topic, topic) == 0)) {
            k = last;
        } else {
            for (int j = 0; j < ng; j++) {
                if (g[j].queue_id == qid &&
                    (g[j].topic == topic || PyUnicode_Compare(g[j].topic, topic) == 0)) {
                    k = j;
                    break;
                }
            }
        }
        if (k < 0) {
            if (ng == CQG_MAX) {
                goto fallback;
            }
            k = ng++;
            gr = &g[k];
            gr->topic = topic;
            gr->queue_id = qid;
            gr->count = 0;
            gr->first_phys = phys;
            gr->first_offset = offset;
            gr->tags = tags;
            gr->run = 1;
            gr->same_tags = 1;
        } else {
            gr = &g[k];
            if (offset != gr->last_offset + 1 || phys <= gr->last_phys) {
                gr->run = 0;
            }
            if (tags != gr->tags) {
                gr->same_tags = 0;
            }
        }
        gr->count++;
        gr->last_phys = phys;
        gr->last_offset = offset;
        gr->last_row = i;
        gid[i] = k;
        vals[3 * i] = phys;
        vals[3 * i + 1] = size;
        vals[3 * i + 2] = tags;
        last = k;
    }
    out = cqg_result(g, ng, gid, vals, n);
    goto done;
fallback:
    out = Py_NewRef(Py_None);
done:
    PyMem_Free(g);
    PyMem_Free(gid);
    PyMem_Free(vals);
    return out;
}

#define CQGROUPS_METHODS                                                                        \
    {"cq_groups", (PyCFunction)cq_groups, METH_O,                                               \
     "A dispatch batch's ConsumeQueue groups per (topic, queue id), with their units, or None."},
