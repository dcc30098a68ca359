/* ariane._speedups: IndexFile keys of a dispatch batch in two C calls (issue 15: a trace message
 * carries ~400 keys, indexed by the reput thread while it holds the GIL the broker's event loop
 * needs to answer pulls). The compiled twins of ariane.store._index_put.
 *
 *   index_key_entries(topics, phys, stamps, keys, uniqs, flags, end_phy) -> bytes | None
 *   index_write(mm, slot_num, index_num, count, begin_phy, begin_ts, entries, start)
 *       -> (written, new_slots, begin_phy, begin_ts)
 *
 * How it works. index_key_entries walks a batch given as columns (tuples of equal length, the
 * DispatchRequest fields) and, for every record the index does not cover yet (phys >= end_phy)
 * and that is not a ROLLBACK, lists its keys in IndexService order (UNIQ_KEY, then each
 * non-empty space-separated KEYS item) as 20-byte native-order (struct "=iqq": keyHash int32, phyOffset
 * int64, storeTimestamp int64) items. keyHash is RocketMQ's indexKeyHashMethod of
 * "topic#key": Java's String.hashCode over UTF-16 units (a code point above U+FFFF counts as
 * its surrogate pair), absolute value, Integer.MIN_VALUE -> 0; the prefix "topic#" is hashed
 * once per run of equal topics and the key continues it. None when a column holds a value of
 * an unexpected type (the caller takes the pure path); nothing is written by it.
 *
 * index_write puts items from `start` into one IndexFile's map exactly as IndexFile.put_key
 * does, one by one: entry (keyHash, phyOffset, timeDiff, prevIndex, big-endian) first, then
 * its slot, so the file's bytes equal the key-by-key path's. It stops when the file is full
 * and returns how many it wrote, how many of them started an empty slot chain, and the file's
 * (possibly new) begin offset and time. The whole call holds the GIL: it takes ~20-40 ns per
 * key, far less than the interpreter's switch interval, and lookups (under the GIL) never see a
 * half-written entry. ValueError when the layout does not fit the map.
 *
 * Included by _speedups.c.
 */

#define IX_ITEM 20
#define IX_HEADER 40
#define IX_ENTRY 20
#define IX_ROLLBACK 0xC
#define IX_INT_MAX 0x7FFFFFFFLL

static void ix_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint32_t ix_read_be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Java hash continued over code points [from, to) of a str's data */
static uint32_t ix_hash(uint32_t h, int kind, const void *data, Py_ssize_t from, Py_ssize_t to) {
    Py_ssize_t i;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *c = (const Py_UCS1 *)data;
        for (i = from; i + 4 <= to; i += 4) { /* four units per step: a shorter dependency chain */
            h = 923521u * h + 29791u * c[i] + 961u * c[i + 1] + 31u * c[i + 2] + c[i + 3];
        }
        for (; i < to; i++) {
            h = 31u * h + c[i];
        }
        return h;
    }
    for (i = from; i < to; i++) {
        Py_UCS4 cp = PyUnicode_READ(kind, data, i);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = 31u * h + (uint32_t)(0xD800 + (cp >> 10));
            h = 31u * h + (uint32_t)(0xDC00 + (cp & 0x3FF));
        } else {
            h = 31u * h + cp;
        }
    }
    return h;
}

static int32_t ix_key_hash(uint32_t h) {
    if (h == 0x80000000u) {
        return 0;
    }
    return (h & 0x80000000u) ? (int32_t)(0u - h) : (int32_t)h;
}

typedef struct {
    char *out;
    Py_ssize_t len, cap;
} IxBuf;

static int ix_add(IxBuf *b, uint32_t h, int64_t phys, int64_t ts) {
    if (b->len + IX_ITEM > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap * 2 : 64 * IX_ITEM;
        char *grown = PyMem_Realloc(b->out, (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->out = grown;
        b->cap = cap;
    }
    int32_t kh = ix_key_hash(h);
    memcpy(b->out + b->len, &kh, 4); /* native order: struct "=iqq" */
    memcpy(b->out + b->len + 4, &phys, 8);
    memcpy(b->out + b->len + 12, &ts, 8);
    b->len += IX_ITEM;
    return 0;
}

/* the items of one record's KEYS (space-separated, empty items skipped) */
static int ix_add_spaced(IxBuf *b, uint32_t prefix, PyObject *keys, int64_t phys, int64_t ts) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(keys), start = 0, i;
    int kind = PyUnicode_KIND(keys);
    const void *data = PyUnicode_DATA(keys);
    for (i = 0; i <= len; i++) {
        if (i < len && (kind == PyUnicode_1BYTE_KIND ? ((const Py_UCS1 *)data)[i]
                                                     : PyUnicode_READ(kind, data, i)) != ' ') {
            continue;
        }
        if (i > start && ix_add(b, ix_hash(prefix, kind, data, start, i), phys, ts) < 0) {
            return -1;
        }
        start = i + 1;
    }
    return 0;
}

static int ix_int64(PyObject *v, int64_t *out) {
    if (!PyLong_CheckExact(v)) {
        return 0;
    }
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = (int64_t)x;
    return 1;
}

/* 1 = added (or skipped), 0 = unexpected types, -1 = error */
static int ix_record(IxBuf *b, PyObject *const *cols, Py_ssize_t i, int64_t end_phy,
                     PyObject **last_topic, uint32_t *prefix) {
    PyObject *topic = PyTuple_GET_ITEM(cols[0], i), *keys = PyTuple_GET_ITEM(cols[3], i);
    PyObject *uniq = PyTuple_GET_ITEM(cols[4], i);
    int64_t phys, ts, flag;
    if (!ix_int64(PyTuple_GET_ITEM(cols[1], i), &phys) ||
        !ix_int64(PyTuple_GET_ITEM(cols[2], i), &ts) ||
        !ix_int64(PyTuple_GET_ITEM(cols[5], i), &flag) || !PyUnicode_CheckExact(topic) ||
        (keys != Py_None && !PyUnicode_CheckExact(keys)) ||
        (uniq != Py_None && !PyUnicode_CheckExact(uniq))) {
        return 0;
    }
    int has_uniq = uniq != Py_None && PyUnicode_GET_LENGTH(uniq) > 0;
    int has_keys = keys != Py_None && PyUnicode_GET_LENGTH(keys) > 0;
    if ((!has_uniq && !has_keys) || phys < end_phy || (flag & IX_ROLLBACK) == IX_ROLLBACK) {
        return 1;
    }
    if (topic != *last_topic) {
        int r = *last_topic == NULL ? 0 : PyUnicode_Compare(topic, *last_topic);
        if (r == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (*last_topic == NULL || r != 0) {
            Py_ssize_t n = PyUnicode_GET_LENGTH(topic);
            *prefix = 31u * ix_hash(0, PyUnicode_KIND(topic), PyUnicode_DATA(topic), 0, n) + '#';
        }
        *last_topic = topic;
    }
    if (has_uniq) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(uniq);
        if (ix_add(b, ix_hash(*prefix, PyUnicode_KIND(uniq), PyUnicode_DATA(uniq), 0, n), phys,
                   ts) < 0) {
            return -1;
        }
    }
    if (has_keys && ix_add_spaced(b, *prefix, keys, phys, ts) < 0) {
        return -1;
    }
    return 1;
}

static PyObject *index_key_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t n, i, c;
    int64_t end_phy;
    PyObject *last_topic = NULL, *result;
    uint32_t prefix = 0;
    IxBuf b = {NULL, 0, 0};
    (void)module;
    if (nargs != 7 || !PyLong_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "index_key_entries(topics, phys, stamps, keys, uniqs, flags, end_phy)");
        return NULL;
    }
    for (c = 0; c < 6; c++) {
        if (!PyTuple_Check(args[c]) || PyTuple_GET_SIZE(args[c]) != PyTuple_GET_SIZE(args[0])) {
            PyErr_SetString(PyExc_TypeError, "index_key_entries: columns are tuples of one length");
            return NULL;
        }
    }
    end_phy = (int64_t)PyLong_AsLongLong(args[6]);
    if (end_phy == -1 && PyErr_Occurred()) {
        return NULL;
    }
    n = PyTuple_GET_SIZE(args[0]);
    for (i = 0; i < n; i++) {
        int r = ix_record(&b, args, i, end_phy, &last_topic, &prefix);
        if (r <= 0) {
            PyMem_Free(b.out);
            if (r < 0) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
    }
    result = PyBytes_FromStringAndSize(b.out ? b.out : "", b.len);
    PyMem_Free(b.out);
    return result;
}

static PyObject *index_write(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    long long slot_num, index_num, count, begin_phy, begin_ts, start;
    Py_buffer mm, items;
    PyObject *result = NULL;
    (void)module;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "index_write(mm, slot_num, index_num, count, begin_phy, "
                                         "begin_ts, entries, start)");
        return NULL;
    }
    slot_num = PyLong_AsLongLong(args[1]);
    index_num = PyLong_AsLongLong(args[2]);
    count = PyLong_AsLongLong(args[3]);
    begin_phy = PyLong_AsLongLong(args[4]);
    begin_ts = PyLong_AsLongLong(args[5]);
    start = PyLong_AsLongLong(args[7]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &mm, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[6], &items, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&mm);
        return NULL;
    }
    long long entries_at = IX_HEADER + slot_num * 4;
    if (slot_num <= 0 || index_num <= 0 || count < 0 || start < 0 ||
        entries_at + index_num * IX_ENTRY > (long long)mm.len || items.len % IX_ITEM != 0 ||
        start * IX_ITEM > (long long)items.len) {
        PyErr_SetString(PyExc_ValueError, "index_write: layout does not fit the map or items");
        goto done;
    }
    unsigned char *base = (unsigned char *)mm.buf;
    const char *item = (const char *)items.buf + start * IX_ITEM;
    long long todo = (long long)items.len / IX_ITEM - start, written = 0, new_slots = 0;
    for (; written < todo && count < index_num; written++, item += IX_ITEM) {
        int32_t kh;
        int64_t phys, ts, diff = 0;
        memcpy(&kh, item, 4);
        memcpy(&phys, item + 4, 8);
        memcpy(&ts, item + 12, 8);
        unsigned char *slot = base + IX_HEADER + ((long long)kh % slot_num) * 4;
        long long prev = (int32_t)ix_read_be32(slot);
        if (prev <= 0 || prev > count) {
            prev = 0;
            new_slots++;
        }
        if (count <= 1) {
            begin_phy = phys;
            begin_ts = ts;
        }
        if (begin_ts > 0) {
            diff = ts - begin_ts;
            diff = diff < 0 ? 0 : diff / 1000;
            diff = diff > IX_INT_MAX ? IX_INT_MAX : diff;
        }
        unsigned char *e = base + entries_at + count * IX_ENTRY;
        ix_be32(e, (uint32_t)kh);
        ix_be32(e + 4, (uint32_t)((uint64_t)phys >> 32));
        ix_be32(e + 8, (uint32_t)phys);
        ix_be32(e + 12, (uint32_t)diff);
        ix_be32(e + 16, (uint32_t)prev);
        ix_be32(slot, (uint32_t)count);
        count++;
    }
    result = Py_BuildValue("(LLLL)", written, new_slots, begin_phy, begin_ts);
done:
    PyBuffer_Release(&items);
    PyBuffer_Release(&mm);
    return result;
}

#define INDEX_METHODS                                                                          \
    {"index_key_entries", (PyCFunction)(void (*)(void))index_key_entries, METH_FASTCALL,       \
     "(keyHash, phys, store time) items of a batch's index keys (_index_put), or None."},      \
        {"index_write", (PyCFunction)(void (*)(void))index_write, METH_FASTCALL,               \
         "Put index items into one IndexFile's map as put_key does; (written, new slots, "     \
         "begin phys, begin time)."},
