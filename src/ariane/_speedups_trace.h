/* The compiled twins of ariane.client._trace_records.sub_records_py, sub_pairs_py and
 * sub_before_py (#included by _speedups.c).
 *
 *   sub_records(calls, group, request_prefix, sub_before, item_chars, item_key_chars)
 *       -> list of (topic, records, count, index keys), or None
 *   sub_pairs(pairs, group, request_prefix, taken, item_chars, item_key_chars)
 *       -> the same for open pairs, claimed here (twin of sub_pairs_py)
 *   sub_before(owner, msgs, trace_topic, now_ns, counter, default_region)
 *       -> the open pair of a one-message listener call (ConsumeTracer.before), None, or
 *          NotImplemented (see below)
 *   sub_after(pair, count, success, outcome, now_ns, usual) -> None, or the end the caller
 *       ships (ConsumeTracer.after; see below)
 *
 * How it works: the records of a round of listener calls are written as UTF-8 into one growing
 * buffer, the characters counted as the pure twin counts them (len of each str piece, digits
 * and separators one each), and every item is decoded into a str when it is closed. Anything
 * unusual (a value that is not an exact str/int/tuple of the expected shape, an int outside
 * 64 bits, a negative time, a str that has no UTF-8 form) answers None and the pure twin
 * writes the round: its results and its errors stay the reference.
 */

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} tr_buf;

static int tr_grow(tr_buf *b, Py_ssize_t need) {
    Py_ssize_t cap;
    char *p;
    if (b->len + need <= b->cap) {
        return 0;
    }
    cap = b->cap ? b->cap : 65536;
    while (cap < b->len + need) {
        cap *= 2;
    }
    p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Inlined (a record is ~20 pieces: a call and a library memcpy each cost more than most
 * pieces; literal pieces become stores). */
#if defined(__GNUC__)
#define TR_INLINE static inline __attribute__((always_inline))
#else
#define TR_INLINE static inline
#endif

TR_INLINE int tr_put(tr_buf *b, const char *s, Py_ssize_t n) {
    if (b->len + n > b->cap && tr_grow(b, n) < 0) {
        return -1;
    }
    memcpy(b->p + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

/* A str's UTF-8 form and its length in characters; -1 (error set) when it has no UTF-8 form. */
typedef struct {
    const char *u;
    Py_ssize_t n, chars;
} tr_text;

static int tr_text_of(PyObject *s, tr_text *t) {
    if (!PyUnicode_CheckExact(s)) {
        PyErr_SetString(PyExc_TypeError, "not a str");
        return -1;
    }
    t->u = PyUnicode_AsUTF8AndSize(s, &t->n);
    if (t->u == NULL) {
        return -1;
    }
    t->chars = PyUnicode_GET_LENGTH(s);
    return 0;
}

/* An exact int that fits in a long long; -1 (error set) otherwise. */
static int tr_ll(PyObject *x, long long *out) {
    int overflow = 0;
    if (!PyLong_CheckExact(x)) {
        PyErr_SetString(PyExc_TypeError, "not an int");
        return -1;
    }
    *out = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_OverflowError, "int beyond 64 bits");
        }
        return -1;
    }
    return 0;
}

/* One listener call, parsed. */
typedef struct {
    PyObject *topic, *entries, *one; /* entries: a tuple of entries; or one: a flat OneData */
    tr_text region;
    long long began_ms, now_ms, cost, outcome;
    int ended, success;
    char rid[40];
    Py_ssize_t rid_n;
} tr_call;

static int tr_parse_after(PyObject *after, long long *now_ns, long long *count, tr_call *c);

/* A call from its before data (a 5-tuple BeforeData or a 7-tuple OneData) and after data
 * (None: still running; a 4-tuple AfterData; or its end time alone, an exact int). */
static int tr_parse_call(PyObject *before, PyObject *after, PyObject *prefix, tr_call *c) {
    PyObject *number_obj;
    long long began_ns, now_ns, count;
    unsigned long long number;
    tr_text pre;
    if (!PyTuple_CheckExact(before) ||
        (PyTuple_GET_SIZE(before) != 5 && PyTuple_GET_SIZE(before) != 7)) {
        goto shape;
    }
    if (tr_ll(PyTuple_GET_ITEM(before, 0), &began_ns) < 0 ||
        tr_text_of(PyTuple_GET_ITEM(before, 1), &c->region) < 0) {
        return -1;
    }
    number_obj = PyTuple_GET_ITEM(before, 2);
    c->topic = PyTuple_GET_ITEM(before, 3);
    if (PyTuple_GET_SIZE(before) == 7) {
        c->entries = NULL;
        c->one = before;
    } else {
        c->entries = PyTuple_GET_ITEM(before, 4);
        c->one = NULL;
        if (!PyTuple_CheckExact(c->entries)) {
            goto shape;
        }
    }
    if (!PyLong_CheckExact(number_obj) || !PyUnicode_CheckExact(c->topic) || began_ns < 0) {
        goto shape;
    }
    number = PyLong_AsUnsignedLongLong(number_obj);
    if (number == (unsigned long long)-1 && PyErr_Occurred()) {
        return -1;
    }
    if (tr_text_of(prefix, &pre) < 0 || pre.n > 16 || pre.n != pre.chars) {
        goto shape;
    }
    memcpy(c->rid, pre.u, (size_t)pre.n);
    for (int k = 15; k >= 0; k--, number >>= 4) {
        c->rid[pre.n + k] = "0123456789ABCDEF"[number & 0xF];
    }
    c->rid_n = pre.n + 16;
    c->began_ms = began_ns / 1000000;
    c->ended = after != Py_None;
    if (!c->ended) {
        return 0;
    }
    if (PyLong_CheckExact(after)) {
        /* the usual end as its time alone: one message, success, SUCCESS (code 0) */
        if (tr_ll(after, &now_ns) < 0) {
            return -1;
        }
        count = 1;
        c->success = 1;
        c->outcome = 0;
    } else if (tr_parse_after(after, &now_ns, &count, c) < 0) {
        return -1;
    }
    if (now_ns < 0) {
        goto shape;
    }
    c->now_ms = now_ns / 1000000;
    {
        /* Python's floor division; a negative cost is written as 0 */
        long long d = count > 0 ? count : 1, diff = c->now_ms - c->began_ms;
        c->cost = diff < 0 ? 0 : diff / d;
    }
    return 0;
shape:
    PyErr_SetString(PyExc_TypeError, "unexpected call shape");
    return -1;
}

/* After data as a 4-tuple (end ns, messages, success, result code). */
static int tr_parse_after(PyObject *after, long long *now_ns, long long *count, tr_call *c) {
    if (!PyTuple_CheckExact(after) || PyTuple_GET_SIZE(after) != 4) {
        PyErr_SetString(PyExc_TypeError, "unexpected call shape");
        return -1;
    }
    if (tr_ll(PyTuple_GET_ITEM(after, 0), now_ns) < 0 ||
        tr_ll(PyTuple_GET_ITEM(after, 1), count) < 0) {
        return -1;
    }
    c->success = PyObject_IsTrue(PyTuple_GET_ITEM(after, 2));
    if (c->success < 0) {
        return -1;
    }
    {
        /* int(outcome): a ConsumeReturnType (IntEnum) or an int */
        PyObject *code = PyNumber_Long(PyTuple_GET_ITEM(after, 3));
        int bad;
        if (code == NULL) {
            return -1;
        }
        bad = tr_ll(code, &c->outcome);
        Py_DECREF(code);
        if (bad < 0) {
            return -1;
        }
    }
    return 0;
}

/* The decimal digits of v into tmp (at least 21 bytes); their count. (snprintf costs more
 * than the rest of a record.) */
TR_INLINE int tr_digits(char *tmp, long long v) {
    char rev[24];
    int n = 0, k = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        rev[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (v < 0) {
        tmp[k++] = '-';
    }
    while (n) {
        tmp[k++] = rev[--n];
    }
    return k;
}

TR_INLINE int tr_num(tr_buf *b, long long v, Py_ssize_t *chars) {
    char tmp[24];
    int n = tr_digits(tmp, v);
    *chars += n;
    return tr_put(b, tmp, n);
}

TR_INLINE int tr_str(tr_buf *b, const tr_text *t, Py_ssize_t *chars) {
    *chars += t->chars;
    return tr_put(b, t->u, t->n);
}

#define TR_LIT(b, s, chars) (*(chars) += (Py_ssize_t)(sizeof(s) - 1), tr_put((b), (s), sizeof(s) - 1))

/* The records of one message of call c. */
static int tr_records(tr_buf *b, const tr_call *c, const tr_text *group, const tr_text *id,
                      long long retries, const tr_text *keys, int sub_before, Py_ssize_t *chars,
                      Py_ssize_t *records) {
    if (sub_before) {
        if (TR_LIT(b, "SubBefore\x01", chars) < 0 || tr_num(b, c->began_ms, chars) < 0 ||
            TR_LIT(b, "\x01", chars) < 0 || tr_str(b, &c->region, chars) < 0 ||
            TR_LIT(b, "\x01", chars) < 0 || tr_str(b, group, chars) < 0 ||
            TR_LIT(b, "\x01", chars) < 0 || (*chars += c->rid_n, tr_put(b, c->rid, c->rid_n)) < 0 ||
            TR_LIT(b, "\x01", chars) < 0 || tr_str(b, id, chars) < 0 ||
            TR_LIT(b, "\x01", chars) < 0 || tr_num(b, retries, chars) < 0 ||
            TR_LIT(b, "\x01", chars) < 0 || tr_str(b, keys, chars) < 0 ||
            TR_LIT(b, "\x02", chars) < 0) {
            return -1;
        }
        *records += 1;
    }
    if (c->ended) {
        if (TR_LIT(b, "SubAfter\x01", chars) < 0 ||
            (*chars += c->rid_n, tr_put(b, c->rid, c->rid_n)) < 0 ||
            TR_LIT(b, "\x01", chars) < 0 || tr_str(b, id, chars) < 0 ||
            TR_LIT(b, "\x01", chars) < 0 || tr_num(b, c->cost, chars) < 0 ||
            (c->success ? TR_LIT(b, "\x01" "true\x01", chars) : TR_LIT(b, "\x01" "false\x01", chars)) < 0 ||
            tr_str(b, keys, chars) < 0 || TR_LIT(b, "\x01", chars) < 0 ||
            tr_num(b, c->outcome, chars) < 0 || TR_LIT(b, "\x01", chars) < 0 ||
            tr_num(b, c->now_ms, chars) < 0 || TR_LIT(b, "\x01", chars) < 0 ||
            tr_str(b, group, chars) < 0 || TR_LIT(b, "\x02", chars) < 0) {
            return -1;
        }
        *records += 1;
    }
    return 0;
}

/* Close the item: append (topic, records, count, tuple(index)) to out and reset. */
static int tr_close(PyObject *out, PyObject *topic, tr_buf *b, Py_ssize_t records,
                    PyObject **index) {
    PyObject *text, *keys, *item;
    text = PyUnicode_DecodeUTF8(b->p, b->len, NULL);
    if (text == NULL) {
        return -1;
    }
    keys = PyList_AsTuple(*index);
    if (keys == NULL) {
        Py_DECREF(text);
        return -1;
    }
    item = Py_BuildValue("(ONnN)", topic, text, records, keys);
    if (item == NULL) {
        return -1;
    }
    if (PyList_Append(out, item) < 0) {
        Py_DECREF(item);
        return -1;
    }
    Py_DECREF(item);
    Py_SETREF(*index, PyList_New(0));
    b->len = 0;
    return *index == NULL ? -1 : 0;
}

/* The records of calls (pairs == 0: a list of (before, after) tuples) or of open pairs
 * (pairs == 1: a list of [owner, before, ...] lists, each claimed by appending taken). */
static PyObject *tr_run(PyObject *calls, int pairs, PyObject *taken, PyObject *group_obj,
                        PyObject *prefix, int sub_before, PyObject *chars_obj,
                        PyObject *key_chars_obj) {
    PyObject *out = NULL, *index = NULL, *topic = NULL;
    tr_buf b = {NULL, 0, 0};
    tr_text group, nulltext = {"null", 4, 4};
    long long item_chars, item_key_chars;
    Py_ssize_t size = 0, key_size = 0, records = 0, i, j, ncalls;
    if (!PyList_CheckExact(calls) || tr_text_of(group_obj, &group) < 0 ||
        !PyUnicode_CheckExact(prefix) || tr_ll(chars_obj, &item_chars) < 0 ||
        tr_ll(key_chars_obj, &item_key_chars) < 0) {
        goto unusual;
    }
    out = PyList_New(0);
    index = PyList_New(0);
    if (out == NULL || index == NULL) {
        goto unusual;
    }
    ncalls = PyList_GET_SIZE(calls);
    for (i = 0; i < ncalls; i++) {
        tr_call c;
        Py_ssize_t nentries;
        PyObject *call = PyList_GET_ITEM(calls, i), *before, *after;
        if (pairs) {
            /* claim: the first object appended after [owner, before] is the after data,
             * unless it is taken (the worker came first) */
            if (!PyList_CheckExact(call) || PyList_GET_SIZE(call) < 2 ||
                PyList_Append(call, taken) < 0) {
                PyErr_SetString(PyExc_TypeError, "unexpected pair");
                goto unusual;
            }
            before = PyList_GET_ITEM(call, 1);
            after = PyList_GET_ITEM(call, 2);
            if (after == taken) {
                after = Py_None;
            }
        } else {
            if (!PyTuple_CheckExact(call) || PyTuple_GET_SIZE(call) != 2) {
                PyErr_SetString(PyExc_TypeError, "unexpected call");
                goto unusual;
            }
            before = PyTuple_GET_ITEM(call, 0);
            after = PyTuple_GET_ITEM(call, 1);
        }
        if (tr_parse_call(before, after, prefix, &c) < 0) {
            goto unusual;
        }
        topic = c.topic; /* borrowed from calls, which the caller holds */
        nentries = c.one != NULL ? 1 : PyTuple_GET_SIZE(c.entries);
        for (j = 0; j < nentries; j++) {
            PyObject *id_obj, *retries_obj, *text;
            tr_text id, keys;
            long long retries;
            if (c.one != NULL) {
                id_obj = PyTuple_GET_ITEM(c.one, 4);
                retries_obj = PyTuple_GET_ITEM(c.one, 5);
                text = PyTuple_GET_ITEM(c.one, 6);
            } else {
                PyObject *entry = PyTuple_GET_ITEM(c.entries, j);
                if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3) {
                    PyErr_SetString(PyExc_TypeError, "unexpected entry");
                    goto unusual;
                }
                id_obj = PyTuple_GET_ITEM(entry, 0);
                retries_obj = PyTuple_GET_ITEM(entry, 1);
                text = PyTuple_GET_ITEM(entry, 2);
            }
            if (tr_text_of(id_obj, &id) < 0 || tr_ll(retries_obj, &retries) < 0) {
                goto unusual;
            }
            if (text == Py_None) {
                keys = nulltext;
            } else if (tr_text_of(text, &keys) < 0) {
                goto unusual;
            } else if (keys.chars == 0) {
                keys = nulltext;
            }
            if (tr_records(&b, &c, &group, &id, retries, &keys, sub_before, &size, &records) < 0 ||
                PyList_Append(index, id_obj) < 0) {
                goto unusual;
            }
            key_size += id.chars + 1;
            if (text != Py_None && PyUnicode_GET_LENGTH(text) > 0) {
                if (PyList_Append(index, text) < 0) {
                    goto unusual;
                }
                key_size += PyUnicode_GET_LENGTH(text) + 1;
            }
        }
        if (key_size >= item_key_chars || size >= item_chars) {
            /* as the pure twin: closed even without records (keys only) */
            if (tr_close(out, topic, &b, records, &index) < 0) {
                goto unusual;
            }
            size = key_size = records = 0;
        }
    }
    if (records > 0 && tr_close(out, topic, &b, records, &index) < 0) {
        goto unusual;
    }
    PyMem_Free(b.p);
    Py_DECREF(index);
    return out;
unusual:
    PyMem_Free(b.p);
    Py_XDECREF(index);
    Py_XDECREF(out);
    if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
        return NULL;
    }
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyObject *sub_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int sub_before;
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "sub_records() takes 6 arguments");
        return NULL;
    }
    sub_before = PyObject_IsTrue(args[3]);
    if (sub_before < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return tr_run(args[0], 0, NULL, args[1], args[2], sub_before, args[4], args[5]);
}

/* sub_pairs(pairs, group, request_prefix, taken, item_chars, item_key_chars) */
static PyObject *sub_pairs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "sub_pairs() takes 6 arguments");
        return NULL;
    }
    return tr_run(args[0], 1, args[3], args[1], args[2], 1, args[4], args[5]);
}

/* sub_before(owner, msgs, trace_topic, now_ns, counter, default_region): the open pair of a
 * listener call's SubBefore (twin of ariane.client._trace_records.sub_before_py):
 * [owner, (now_ns(), region, next(counter), topic, msgId, retry times, KEYS or None)] for one
 * traced message; None when the message is not traced (TRACE_ON=false, or a trace topic);
 * NotImplemented for anything else (not a list of one message, values that are not exact
 * str/dict), decided before now_ns or counter are called, so the caller can take its general
 * path. What the calls raise propagates. */
static PyObject *TB_PROPERTIES, *TB_TOPIC, *TB_OFFSET_ID, *TB_RETRIES, *TB_SWITCH, *TB_REGION,
    *TB_UNIQ, *TB_KEYS;

static int tb_init(void) {
    if (TB_KEYS != NULL) {
        return 0;
    }
    TB_PROPERTIES = PyUnicode_InternFromString("properties");
    TB_TOPIC = PyUnicode_InternFromString("topic");
    TB_OFFSET_ID = PyUnicode_InternFromString("offset_msg_id");
    TB_RETRIES = PyUnicode_InternFromString("reconsume_times");
    TB_SWITCH = PyUnicode_InternFromString("TRACE_ON");
    TB_REGION = PyUnicode_InternFromString("MSG_REGION");
    TB_UNIQ = PyUnicode_InternFromString("UNIQ_KEY");
    if (TB_PROPERTIES == NULL || TB_TOPIC == NULL || TB_OFFSET_ID == NULL || TB_RETRIES == NULL ||
        TB_SWITCH == NULL || TB_REGION == NULL || TB_UNIQ == NULL) {
        return -1;
    }
    TB_KEYS = PyUnicode_InternFromString("KEYS");
    return TB_KEYS == NULL ? -1 : 0;
}

/* props[key] as a new reference, NULL when absent; -1 (no error) when not an exact str. */
static int tb_get(PyObject *props, PyObject *key, PyObject **out) {
    PyObject *v = PyDict_GetItemWithError(props, key);
    *out = NULL;
    if (v == NULL) {
        return PyErr_Occurred() ? -2 : 0;
    }
    if (!PyUnicode_CheckExact(v)) {
        return -1;
    }
    Py_INCREF(v);
    *out = v;
    return 0;
}

/* The values of the one message, read before any call; 1: NotImplemented, 0: go on, -2: error. */
typedef struct {
    PyObject *props, *topic, *sw, *region, *uniq, *keys;
} tb_read;

static void tb_clear(tb_read *r) {
    Py_CLEAR(r->props);
    Py_CLEAR(r->topic);
    Py_CLEAR(r->sw);
    Py_CLEAR(r->region);
    Py_CLEAR(r->uniq);
    Py_CLEAR(r->keys);
}

static sr_cache TB_PROPS_AT, TB_TOPIC_AT, TB_RETRIES_AT; /* _speedups_slotread.h */

static int tb_read_msg(PyObject *msg, tb_read *r) {
    int rc;
    r->props = sr_get(msg, TB_PROPERTIES, &TB_PROPS_AT);
    if (r->props == NULL) {
        return -2;
    }
    r->topic = sr_get(msg, TB_TOPIC, &TB_TOPIC_AT);
    if (r->topic == NULL) {
        return -2;
    }
    if (!PyDict_CheckExact(r->props) || !PyUnicode_CheckExact(r->topic)) {
        return 1;
    }
    if ((rc = tb_get(r->props, TB_SWITCH, &r->sw)) < 0 ||
        (rc = tb_get(r->props, TB_REGION, &r->region)) < 0 ||
        (rc = tb_get(r->props, TB_UNIQ, &r->uniq)) < 0 ||
        (rc = tb_get(r->props, TB_KEYS, &r->keys)) < 0) {
        return rc == -1 ? 1 : -2;
    }
    return 0;
}

static PyObject *tb_pair(PyObject *const *args, PyObject *msg, tb_read *r) {
    PyObject *ns, *number, *uniq = NULL, *retries = NULL, *data = NULL, *pair = NULL;
    PyObject *region = r->region != NULL && PyUnicode_GET_LENGTH(r->region) ? r->region : args[5];
    ns = PyObject_CallNoArgs(args[3]);
    if (ns == NULL) {
        return NULL;
    }
    number = PyIter_Next(args[4]);
    if (number == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetNone(PyExc_StopIteration);
        }
        goto done;
    }
    if (r->uniq != NULL && PyUnicode_GET_LENGTH(r->uniq)) {
        uniq = Py_NewRef(r->uniq);
    } else if ((uniq = PyObject_GetAttr(msg, TB_OFFSET_ID)) == NULL) {
        goto done;
    }
    if ((retries = sr_get(msg, TB_RETRIES, &TB_RETRIES_AT)) == NULL) {
        goto done;
    }
    data = PyTuple_Pack(7, ns, region, number, r->topic, uniq, retries,
                        r->keys != NULL ? r->keys : Py_None);
    if (data != NULL && (pair = PyList_New(4)) != NULL) {
        /* room for the two appends to come (the end, the worker's TAKEN): no realloc */
        Py_SET_SIZE(pair, 2);
        PyList_SET_ITEM(pair, 0, Py_NewRef(args[0]));
        PyList_SET_ITEM(pair, 1, Py_NewRef(data));
        /* Out of the collector's sight (it would untrack the tuple of atoms itself, at its
         * first run): the pairs wait up to a linger in the dispatcher's queue, and thousands of
         * them tracked made the traced drain run the collector 15x as often (generation 2
         * included). The pair holds its owner, its data (atoms) and later an int end or the
         * TAKEN marker; it is freed by reference counting when the worker takes it, and the
         * dispatcher's close clears its queue, so no cycle needs the collector. */
        PyObject_GC_UnTrack(data);
        PyObject_GC_UnTrack(pair);
    }
done:
    Py_DECREF(ns);
    Py_XDECREF(number);
    Py_XDECREF(uniq);
    Py_XDECREF(retries);
    Py_XDECREF(data);
    return pair;
}

static PyObject *sub_before(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    tb_read r = {NULL, NULL, NULL, NULL, NULL, NULL};
    PyObject *msgs, *out = NULL;
    int rc;
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "sub_before() takes 6 arguments");
        return NULL;
    }
    if (tb_init() < 0) {
        return NULL;
    }
    msgs = args[1];
    if (!PyList_CheckExact(msgs) || PyList_GET_SIZE(msgs) != 1 || !PyUnicode_CheckExact(args[2]) ||
        !PyUnicode_CheckExact(args[5])) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    rc = tb_read_msg(PyList_GET_ITEM(msgs, 0), &r);
    if (rc == 1) {
        out = Py_NewRef(Py_NotImplemented);
    } else if (rc == 0) {
        if ((r.sw != NULL && PyUnicode_CompareWithASCIIString(r.sw, "false") == 0) ||
            PyUnicode_Tailmatch(r.topic, args[2], 0, PY_SSIZE_T_MAX, -1) == 1) {
            out = Py_NewRef(Py_None);
        } else {
            out = tb_pair(args, PyList_GET_ITEM(msgs, 0), &r);
        }
    }
    tb_clear(&r);
    return out;
}

/* sub_after(pair, count, success, outcome, now_ns, usual): the end of the listener call `pair`
 * opened (twin of ariane.client._trace_records.sub_after_py): now_ns() alone for the usual end
 * (one message, success, `outcome is usual`), else (now, count, success, outcome), appended to
 * the pair; None when it was the pair's first append (the worker will write both records), else
 * that end (the worker took the pair first: the caller ships the SubAfter). */
static PyObject *sub_after(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *pair, *now, *done;
    int ok, overflow = 0;
    (void)self;
    if (nargs != 6 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "sub_after(pair: list, count, success, outcome, now_ns, "
                                         "usual)");
        return NULL;
    }
    pair = args[0];
    if ((ok = PyObject_IsTrue(args[2])) < 0 || (now = PyObject_CallNoArgs(args[4])) == NULL) {
        return NULL;
    }
    if (ok && args[3] == args[5] && PyLong_CheckExact(args[1]) &&
        PyLong_AsLongAndOverflow(args[1], &overflow) == 1 && !overflow) {
        done = now;
    } else {
        done = PyTuple_Pack(4, now, args[1], args[2], args[3]);
        Py_DECREF(now);
        if (done == NULL) {
            return NULL;
        }
    }
    if (PyList_Append(pair, done) < 0) {
        Py_DECREF(done);
        return NULL;
    }
    if (PyList_GET_SIZE(pair) <= 2) { /* not a pair: pair[2] fails, as in the twin */
        Py_DECREF(done);
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        return NULL;
    }
    if (PyList_GET_ITEM(pair, 2) == done) {
        Py_DECREF(done);
        Py_RETURN_NONE;
    }
    return done;
}

/* trace_join_keys(keys): " ".join(dict.fromkeys(keys)) for a list of exact str (twin of
 * ariane.client._trace_dispatch.join_keys_py), None for anything else. The KEYS of a trace
 * message: ~420 msgIds per message; dict.fromkeys hashed each with SipHash (the strs are
 * fresh) and built a dict. Here: a table of list positions, a cheap 64-bit hash of each str's
 * data (8 bytes a step, bijective steps, a final mix), equal strs found by kind, length and
 * bytes. */
static uint64_t tk_hash(PyObject *s) {
    const unsigned char *d = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s) * PyUnicode_KIND(s), i = 0;
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n, w;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, d + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 29;
    }
    if (i < n) {
        w = 0;
        memcpy(&w, d + i, (size_t)(n - i));
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
    }
    /* every bit into the low ones the table uses (msgIds differ in their last characters) */
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 33);
}

static int tk_equal(PyObject *a, PyObject *b) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    return a == b || (n == PyUnicode_GET_LENGTH(b) && PyUnicode_KIND(a) == PyUnicode_KIND(b) &&
                      memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b),
                             (size_t)(n * PyUnicode_KIND(a))) == 0);
}

static PyObject *trace_join_keys(PyObject *self, PyObject *keys) {
    Py_ssize_t n, cap = 8, i, kept = 0;
    Py_ssize_t *table;
    PyObject *unique, *sep, *out;
    (void)self;
    if (!PyList_CheckExact(keys)) {
        Py_RETURN_NONE;
    }
    n = PyList_GET_SIZE(keys);
    for (i = 0; i < n; i++) {
        if (!PyUnicode_CheckExact(PyList_GET_ITEM(keys, i))) {
            Py_RETURN_NONE;
        }
    }
    while (cap < 2 * n) {
        cap *= 2;
    }
    table = PyMem_Calloc((size_t)cap, sizeof(Py_ssize_t)); /* position + 1 in unique; 0: free */
    unique = PyList_New(n);
    if (table == NULL || unique == NULL) {
        PyMem_Free(table);
        Py_XDECREF(unique);
        return PyErr_NoMemory();
    }
    for (i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        size_t slot = (size_t)tk_hash(key) & (size_t)(cap - 1);
        while (table[slot] && !tk_equal(PyList_GET_ITEM(unique, table[slot] - 1), key)) {
            slot = (slot + 1) & (size_t)(cap - 1);
        }
        if (!table[slot]) {
            PyList_SET_ITEM(unique, kept, Py_NewRef(key));
            table[slot] = ++kept;
        }
    }
    PyMem_Free(table);
    Py_SET_SIZE(unique, kept); /* the slots past kept were never set (NULL) */
    sep = PyUnicode_FromStringAndSize(" ", 1);
    out = sep == NULL ? NULL : PyUnicode_Join(sep, unique);
    Py_XDECREF(sep);
    Py_DECREF(unique);
    return out;
}

/* trace_key_chars(keys): sum(len(k) + 1 for k in keys) for a tuple of exact str (twin of
 * _trace_dispatch.key_chars_py), None for anything else. */
static PyObject *trace_key_chars(PyObject *self, PyObject *keys) {
    Py_ssize_t i, n, total = 0;
    (void)self;
    if (!PyTuple_CheckExact(keys)) {
        Py_RETURN_NONE;
    }
    n = PyTuple_GET_SIZE(keys);
    for (i = 0; i < n; i++) {
        PyObject *key = PyTuple_GET_ITEM(keys, i);
        if (!PyUnicode_CheckExact(key)) {
            Py_RETURN_NONE;
        }
        total += PyUnicode_GET_LENGTH(key) + 1;
    }
    return PyLong_FromSsize_t(total);
}

#define SPEEDUPS_TRACE_HOOK_METHODS                                                              \
    {"sub_before", (PyCFunction)(void (*)(void))sub_before, METH_FASTCALL,                       \
     "The open pair of a listener call's SubBefore (_trace_records.sub_before_py)."},           \
        {"sub_after", (PyCFunction)(void (*)(void))sub_after, METH_FASTCALL,                     \
         "Append a listener call's end to its pair (_trace_records.sub_after_py)."},          \
        {"trace_join_keys", (PyCFunction)trace_join_keys, METH_O,                                \
         "' '.join(dict.fromkeys(keys)) of a list of str, or None (_trace_dispatch)."},          \
        {"trace_key_chars", (PyCFunction)trace_key_chars, METH_O,                                \
         "sum(len(k) + 1 for k in keys) of a tuple of str, or None (_trace_dispatch)."},
