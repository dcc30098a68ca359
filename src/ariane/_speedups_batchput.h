/* ariane._speedups: a SEND_BATCH body of the common shape put into the CommitLog in two C calls
 * (issue 19 item 3: the Spark sink's writes), the compiled twins of
 * ariane.store.batch_put.scan_py / write_py (RocketMQ CommitLog.asyncPutMessages with
 * MessageExtEncoder.encodeBatch, for one shape of batch).
 *
 *   batch_scan(data, stamp_len, max_props) -> (uniq, dedup, keys, payload_sum, payload_max) | None
 *   batch_write(mm, pos, data, stamp, topic_tail, magic, queue_id, sys_flag, born_ts,
 *               born_addr, born_port, store_addr, store_port, reconsume,
 *               phys, queue_offset, store_ts) -> list[int]   (each record's stored size)
 *   offset_msg_ids(prefix, offsets) -> str | None   the answer's msgId of a batch: prefix then
 *       16 upper-case hex digits per offset, comma-separated (twin of
 *       ariane.common.msgid.offset_msg_ids_py); None for an offset that is not an int in
 *       [0, 2**63) or a prefix that is not ASCII (the twin then decides)
 *
 * How it works. batch_scan walks the body as decode_batch does and accepts only the shape the
 * bulk path takes, without making a BatchEntry, a properties dict or a BatchItem: every
 * message's properties are ASCII, end with the separator, are made of well-formed name\x01value
 * pairs, carry UNIQ_KEY, at most once each of UNIQ_KEY, __ARIANE_DEDUP and KEYS, none of
 * TRAN_MSG, DELAY, CLUSTER, MSG_REGION, TRACE_ON, TAGS, and fit max_props once `stamp_len`
 * bytes are added. It returns the columns the broker needs (ids for the idempotence window, the
 * index keys) and the sums for the size checks; anything else (a corrupt body too) returns None
 * and the caller takes the existing path, which says why. batch_write then writes the records
 * of the scanned body from `pos` of the writable buffer `mm`: the fixed header, the body, the
 * topic and the properties followed by `stamp` (the CLUSTER/MSG_REGION/TRACE_ON text every
 * message of the shape gets), exactly the bytes CommitLog._write_batch writes for the stamped
 * items; BODYCRC is zlib's CRC-32 (slice-by-8 here, checked against zlib by the tests).
 *
 * Included by _speedups.c after be16/be32.
 */

#define BP_FIXED 22 /* batch entry: TOTALSIZE MAGIC BODYCRC FLAG BODYLENGTH + PROPERTIESLENGTH */

static uint32_t BP_CRC[8][256];
static int BP_CRC_READY;

static void bp_crc_init(void) {
    uint32_t c;
    int i, k;
    for (i = 0; i < 256; i++) {
        c = (uint32_t)i;
        for (k = 0; k < 8; k++) {
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        }
        BP_CRC[0][i] = c;
    }
    for (i = 0; i < 256; i++) {
        c = BP_CRC[0][i];
        for (k = 1; k < 8; k++) {
            c = BP_CRC[0][c & 0xFF] ^ (c >> 8);
            BP_CRC[k][i] = c;
        }
    }
    BP_CRC_READY = 1;
}

/* the table loop: state c (inverted) over p[0:n) */
static uint32_t bp_crc_run(uint32_t c, const unsigned char *p, Py_ssize_t n) {
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                      (uint32_t)p[7] << 24;
        c = BP_CRC[7][lo & 0xFF] ^ BP_CRC[6][(lo >> 8) & 0xFF] ^ BP_CRC[5][(lo >> 16) & 0xFF] ^
            BP_CRC[4][lo >> 24] ^ BP_CRC[3][hi & 0xFF] ^ BP_CRC[2][(hi >> 8) & 0xFF] ^
            BP_CRC[1][(hi >> 16) & 0xFF] ^ BP_CRC[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) {
        c = BP_CRC[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    }
    return c;
}

/* zlib's crc32(p[0:n)): folded by carry-less multiplication where the CPU can
 * (_speedups_crc.h), the table loop elsewhere and for the tail */
static uint32_t bp_crc32(const unsigned char *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
#if CRC_HAVE_FOLD
    if (n >= 64 && crc_fold_ok()) {
        unsigned char folded[16];
        Py_ssize_t used = crc_fold(p, n, c, folded);
        c = bp_crc_run(0, folded, 16);
        p += used;
        n -= used;
    }
#endif
    return bp_crc_run(c, p, n) ^ 0xFFFFFFFFu;
}

static void bp_put32(unsigned char *p, int64_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)(u >> 24);
    p[1] = (unsigned char)(u >> 16);
    p[2] = (unsigned char)(u >> 8);
    p[3] = (unsigned char)u;
}

static void bp_put64(unsigned char *p, int64_t v) {
    bp_put32(p, (int64_t)((uint64_t)v >> 32));
    bp_put32(p + 4, v);
}

/* the entry at pos of buf[0:end] as decode_batch reads it: 0 and its parts, or 1 (not well
 * formed: the caller's path decides) */
static int bp_entry(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, int32_t *total,
                    int32_t *flag, int32_t *body_len, int32_t *props_len) {
    if (end - pos < BP_FIXED) {
        return 1;
    }
    *total = be32(buf + pos);
    *flag = be32(buf + pos + 12);
    *body_len = be32(buf + pos + 16);
    if (*body_len < 0 || (int64_t)*total < (int64_t)BP_FIXED + *body_len ||
        (int64_t)*total > (int64_t)(end - pos)) {
        return 1;
    }
    *props_len = be16(buf + pos + 20 + *body_len);
    if (*props_len < 0 || (int64_t)BP_FIXED + *body_len + *props_len != (int64_t)*total) {
        return 1;
    }
    return 0;
}

enum { BP_OTHER, BP_UNIQ, BP_DEDUP, BP_KEYS, BP_SLOW };

static int bp_name(const unsigned char *s, Py_ssize_t n) {
#define BP_IS(lit) (n == (Py_ssize_t)sizeof(lit) - 1 && memcmp(s, lit, sizeof(lit) - 1) == 0)
    if (BP_IS("UNIQ_KEY")) {
        return BP_UNIQ;
    }
    if (BP_IS("__ARIANE_DEDUP")) {
        return BP_DEDUP;
    }
    if (BP_IS("KEYS")) {
        return BP_KEYS;
    }
    if (BP_IS("TRAN_MSG") || BP_IS("DELAY") || BP_IS("CLUSTER") || BP_IS("MSG_REGION") ||
        BP_IS("TRACE_ON") || BP_IS("TAGS")) {
        return BP_SLOW;
    }
#undef BP_IS
    return BP_OTHER;
}

/* the (start, length) of the values of UNIQ_KEY, __ARIANE_DEDUP and KEYS in p[0:n] (length -1:
 * absent); 0, or 1 when the properties are not of the shape */
static int bp_props(const unsigned char *p, Py_ssize_t n, Py_ssize_t found[3][2]) {
    Py_ssize_t s = 0, i;
    unsigned char any = 0;
    for (i = 0; i < 3; i++) {
        found[i][1] = -1;
    }
    if (n == 0 || p[n - 1] != 0x02) {
        return 1;
    }
    for (i = 0; i < n; i++) {
        any |= p[i];
    }
    if (any & 0x80) {
        return 1;
    }
    while (s < n) {
        const unsigned char *e = memchr(p + s, 0x02, (size_t)(n - s));
        const unsigned char *nv = memchr(p + s, 0x01, (size_t)(e - (p + s)));
        Py_ssize_t seg_end = e - p, name_len, kind;
        if (nv == NULL) {
            return 1;
        }
        name_len = nv - (p + s);
        if (name_len == 0 || nv + 1 == e) {
            return 1;
        }
        kind = bp_name(p + s, name_len);
        if (kind == BP_SLOW) {
            return 1;
        }
        if (kind != BP_OTHER) {
            if (found[kind - 1][1] >= 0) {
                return 1;
            }
            found[kind - 1][0] = (nv + 1) - p;
            found[kind - 1][1] = e - (nv + 1);
        }
        s = seg_end + 1;
    }
    return found[0][1] < 0;
}

static PyObject *bp_text(const unsigned char *p, Py_ssize_t at[2]) {
    if (at[1] < 0) {
        Py_RETURN_NONE;
    }
    return PyUnicode_DecodeASCII((const char *)p + at[0], at[1], NULL);
}

/* one message's ids appended to the columns; 0 or -1 on error */
static int bp_ids(const unsigned char *p, Py_ssize_t found[3][2], PyObject *cols[3]) {
    PyObject *uniq = bp_text(p, found[0]), *dedup = NULL, *keys = NULL;
    int rc = -1;
    if (uniq == NULL) {
        return -1;
    }
    if (found[1][1] == found[0][1] && memcmp(p + found[1][0], p + found[0][0], found[0][1]) == 0) {
        Py_INCREF(uniq);
        dedup = uniq; /* the sink's case: one str for both */
    } else {
        dedup = bp_text(p, found[1]);
    }
    keys = dedup ? bp_text(p, found[2]) : NULL;
    if (keys != NULL && PyList_Append(cols[0], uniq) == 0 && PyList_Append(cols[1], dedup) == 0 &&
        PyList_Append(cols[2], keys) == 0) {
        rc = 0;
    }
    Py_DECREF(uniq);
    Py_XDECREF(dedup);
    Py_XDECREF(keys);
    return rc;
}

static PyObject *batch_scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    PyObject *cols[3] = {NULL, NULL, NULL}, *out = NULL;
    Py_ssize_t pos = 0, end, stamp_len, max_props, found[3][2];
    long long sum = 0, top = 0;
    const unsigned char *buf;
    int32_t total, flag, body_len, props_len;
    int i, shape = 1;
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "batch_scan(data, stamp_len, max_props)");
        return NULL;
    }
    stamp_len = PyLong_AsSsize_t(args[1]);
    max_props = stamp_len < 0 && PyErr_Occurred() ? -1 : PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred() || PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    buf = (const unsigned char *)view.buf;
    end = view.len;
    for (i = 0; i < 3; i++) {
        if ((cols[i] = PyList_New(0)) == NULL) {
            goto done;
        }
    }
    while (pos < end) {
        const unsigned char *p;
        if (bp_entry(buf, pos, end, &total, &flag, &body_len, &props_len) != 0 ||
            (Py_ssize_t)props_len + stamp_len > max_props) {
            shape = 0;
            break;
        }
        p = buf + pos + BP_FIXED + body_len;
        if (bp_props(p, props_len, found) != 0) {
            shape = 0;
            break;
        }
        if (bp_ids(p, found, cols) < 0) {
            goto done;
        }
        sum += (long long)body_len + props_len;
        if ((long long)body_len + props_len > top) {
            top = (long long)body_len + props_len;
        }
        pos += total;
    }
    if (!shape || PyList_GET_SIZE(cols[0]) == 0) {
        out = Py_None;
        Py_INCREF(out);
    } else {
        out = Py_BuildValue("(OOOLL)", cols[0], cols[1], cols[2], sum, top);
    }
done:
    for (i = 0; i < 3; i++) {
        Py_XDECREF(cols[i]);
    }
    PyBuffer_Release(&view);
    return out;
}

/* the int argument i as int64 (its range checked against [lo, hi]); -1 with an error set */
static int bp_int(PyObject *const *args, int i, int64_t lo, int64_t hi, int64_t *v) {
    long long x = PyLong_AsLongLong(args[i]);
    if (x == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (x < lo || x > hi) {
        PyErr_Format(PyExc_OverflowError, "batch_write argument %d out of range", i);
        return -1;
    }
    *v = (int64_t)x;
    return 0;
}

#define BP_I32 INT32_MIN, INT32_MAX
#define BP_I64 INT64_MIN, INT64_MAX

/* the header of one record up to BODYLENGTH at h; returns its length */
static Py_ssize_t bp_header(unsigned char *h, int64_t v[12], const Py_buffer hosts[2],
                            int32_t total, int32_t crc, int32_t flag, int32_t body_len,
                            int64_t queue_offset, int64_t phys) {
    /* v: magic queue_id sys_flag born_ts born_port store_port reconsume store_ts */
    Py_ssize_t at = 0;
    bp_put32(h, total);
    bp_put32(h + 4, v[0]);
    bp_put32(h + 8, crc);
    bp_put32(h + 12, v[1]);
    bp_put32(h + 16, flag);
    bp_put64(h + 20, queue_offset);
    bp_put64(h + 28, phys);
    bp_put32(h + 36, v[2]);
    bp_put64(h + 40, v[3]);
    at = 48;
    memcpy(h + at, hosts[0].buf, (size_t)hosts[0].len);
    at += hosts[0].len;
    bp_put32(h + at, v[4]);
    bp_put64(h + at + 4, v[7]);
    at += 12;
    memcpy(h + at, hosts[1].buf, (size_t)hosts[1].len);
    at += hosts[1].len;
    bp_put32(h + at, v[5]);
    bp_put32(h + at + 4, v[6]);
    bp_put64(h + at + 8, 0); /* PREPAREDTRANSACTIONOFFSET */
    bp_put32(h + at + 16, body_len);
    return at + 20;
}

/* writes the records of the scanned body (args: see the top of this file); the sizes list */
static PyObject *bp_write(Py_buffer *bufs, int64_t v[12], int64_t pos, int64_t phys,
                          int64_t queue_offset) {
    /* bufs: mm data stamp topic_tail born_addr store_addr */
    const unsigned char *data = bufs[1].buf;
    Py_ssize_t at = 0, end = bufs[1].len, fixed, need = 0;
    int32_t total, flag, body_len, props_len;
    unsigned char *out;
    PyObject *sizes = PyList_New(0);
    if (sizes == NULL) {
        return NULL;
    }
    fixed = 80 + bufs[4].len + bufs[5].len + bufs[3].len + 2;
    while (at < end) { /* sizes first: nothing written unless all of it fits */
        if (bp_entry(data, at, end, &total, &flag, &body_len, &props_len) != 0 ||
            props_len + bufs[2].len > 0x7FFF) {
            PyErr_SetString(PyExc_ValueError, "batch_write: the body is not a scanned batch");
            goto fail;
        }
        need += fixed + body_len + props_len + bufs[2].len;
        at += total;
    }
    if (pos < 0 || need > bufs[0].len - pos) {
        PyErr_SetString(PyExc_ValueError, "batch_write: the records do not fit");
        goto fail;
    }
    out = (unsigned char *)bufs[0].buf + pos;
    for (at = 0; at < end; at += total) {
        const unsigned char *body;
        int32_t size, plen;
        PyObject *n;
        Py_buffer hosts[2];
        bp_entry(data, at, end, &total, &flag, &body_len, &props_len);
        body = data + at + 20;
        plen = props_len + (int32_t)bufs[2].len;
        size = (int32_t)(fixed + body_len + plen);
        hosts[0] = bufs[4];
        hosts[1] = bufs[5];
        out += bp_header(out, v, hosts, size, (int32_t)(bp_crc32(body, body_len) & 0x7FFFFFFFu), flag, body_len,
                         queue_offset++, phys);
        memcpy(out, body, (size_t)body_len);
        out += body_len;
        memcpy(out, bufs[3].buf, (size_t)bufs[3].len);
        out += bufs[3].len;
        out[0] = (unsigned char)(plen >> 8);
        out[1] = (unsigned char)plen;
        out += 2;
        memcpy(out, body + body_len + 2, (size_t)props_len);
        out += props_len;
        memcpy(out, bufs[2].buf, (size_t)bufs[2].len);
        out += bufs[2].len;
        phys += size;
        n = PyLong_FromLong(size);
        if (n == NULL || PyList_Append(sizes, n) < 0) {
            Py_XDECREF(n);
            goto fail;
        }
        Py_DECREF(n);
    }
    return sizes;
fail:
    Py_DECREF(sizes);
    return NULL;
}

static PyObject *batch_write(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    /* buffer arguments: mm, data, stamp, topic_tail, born_addr, store_addr */
    static const int buf_at[6] = {0, 2, 3, 4, 9, 11};
    Py_buffer bufs[6];
    int64_t v[12], pos = 0, phys = 0, queue_offset = 0;
    PyObject *out = NULL;
    int got = 0;
    (void)module;
    if (nargs != 17) {
        PyErr_SetString(PyExc_TypeError,
                        "batch_write(mm, pos, data, stamp, topic_tail, magic, queue_id, sys_flag,"
                        " born_ts, born_addr, born_port, store_addr, store_port, reconsume, phys,"
                        " queue_offset, store_ts)");
        return NULL;
    }
    if (!BP_CRC_READY) {
        bp_crc_init();
    }
    if (bp_int(args, 1, BP_I64, &pos) < 0 || bp_int(args, 5, BP_I32, &v[0]) < 0 ||
        bp_int(args, 6, BP_I32, &v[1]) < 0 || bp_int(args, 7, BP_I32, &v[2]) < 0 ||
        bp_int(args, 8, BP_I64, &v[3]) < 0 || bp_int(args, 10, BP_I32, &v[4]) < 0 ||
        bp_int(args, 12, BP_I32, &v[5]) < 0 || bp_int(args, 13, BP_I32, &v[6]) < 0 ||
        bp_int(args, 14, BP_I64, &phys) < 0 || bp_int(args, 15, BP_I64, &queue_offset) < 0 ||
        bp_int(args, 16, BP_I64, &v[7]) < 0) {
        return NULL;
    }
    for (got = 0; got < 6; got++) {
        if (PyObject_GetBuffer(args[buf_at[got]], &bufs[got],
                               got == 0 ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) {
            goto done;
        }
    }
    if ((bufs[4].len != 4 && bufs[4].len != 16) || (bufs[5].len != 4 && bufs[5].len != 16)) {
        PyErr_SetString(PyExc_ValueError, "batch_write: host addresses are 4 or 16 bytes");
        goto done;
    }
    out = bp_write(bufs, v, pos, phys, queue_offset);
done:
    while (got-- > 0) {
        PyBuffer_Release(&bufs[got]);
    }
    return out;
}

static PyObject *offset_msg_ids(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    static const char HEX[] = "0123456789ABCDEF";
    PyObject *seq, *out = NULL;
    Py_ssize_t n, i, plen, each;
    const char *prefix;
    unsigned char *w;
    (void)module;
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "offset_msg_ids(prefix, offsets)");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(args[0])) {
        Py_RETURN_NONE;
    }
    prefix = PyUnicode_AsUTF8AndSize(args[0], &plen);
    seq = prefix ? PySequence_Fast(args[1], "offsets must be a sequence") : NULL;
    if (seq == NULL) {
        return NULL;
    }
    n = PySequence_Fast_GET_SIZE(seq);
    each = plen + 16;
    out = PyUnicode_New(n ? n * (each + 1) - 1 : 0, 127);
    if (out == NULL) {
        goto done;
    }
    w = PyUnicode_1BYTE_DATA(out);
    for (i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        long long v;
        int k;
        if (!PyLong_CheckExact(o) || (v = PyLong_AsLongLong(o)) < 0) {
            PyErr_Clear();
            Py_SETREF(out, Py_None);
            Py_INCREF(out);
            goto done;
        }
        if (i) {
            *w++ = ',';
        }
        memcpy(w, prefix, (size_t)plen);
        w += plen;
        for (k = 15; k >= 0; k--) {
            w[k] = (unsigned char)HEX[v & 0xF];
            v >>= 4;
        }
        w += 16;
    }
done:
    Py_DECREF(seq);
    return out;
}

/* crc32(data) -> zlib.crc32(data) (the body CRC's code, for the identity tests) */
static PyObject *crc32_bytes(PyObject *module, PyObject *arg) {
    Py_buffer view;
    uint32_t c;
    (void)module;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (!BP_CRC_READY) {
        bp_crc_init();
    }
    c = bp_crc32((const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

#define BATCHPUT_METHODS                                                                        \
    {"crc32", (PyCFunction)crc32_bytes, METH_O,                                                  \
     "zlib.crc32(data): the records' BODYCRC code (carry-less multiplication where it can)."},   \
            {"batch_scan", (PyCFunction)(void (*)(void))batch_scan, METH_FASTCALL,                      \
     "The columns of a SEND_BATCH body of the common shape (batch_put.scan_py), or None."},     \
        {"batch_write", (PyCFunction)(void (*)(void))batch_write, METH_FASTCALL,                \
         "Write the records of a scanned SEND_BATCH body into mm (batch_put.write_py)."},        \
        {"offset_msg_ids", (PyCFunction)(void (*)(void))offset_msg_ids, METH_FASTCALL,          \
         "prefix + %016X of each offset, comma-separated (msgid.offset_msg_ids_py), or None."},
