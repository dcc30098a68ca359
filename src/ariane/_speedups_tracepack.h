/* The entry buffer's writers: take (its records as items) and pack (whole trace messages)
 * (#included by _speedups_tracehook.h before TraceEntries' method table; twins of
 * ariane.client._trace_records.EntryBufferPy.take and .pack).
 *
 *   take(group, request_prefix, item_chars, item_key_chars) -> [(topic, records, count, keys)]
 *   pack(group, request_prefix, item_chars, item_key_chars, max_chars, max_key_chars)
 *       -> [(UTF-8 body, records, KEYS)], or None (nothing taken)
 *
 * How it works: both move the pending entries out of the buffer first (te_move: no Python code
 * runs while the entries change; the GIL is the lock), then write their records as UTF-8 into one
 * growing buffer (te_write: SubBefore and, when the call ended, SubAfter, as sub_records writes
 * them), the characters counted as the pure twin counts them. take closes an item (a str, its
 * count and its index keys) at item_chars characters or item_key_chars characters of keys, as
 * sub_records cuts them; the dispatcher's worker then had _trace_dispatch.pack join the items'
 * strs and keys into trace messages, dedup the keys and encode the body again. pack cuts the same
 * items without making them and applies pack's rules to them as they close (a message closes
 * before its KEYS would pass max_key_chars and once its body reaches max_chars): a message is a
 * contiguous run of the buffer, so its body is one copy of the bytes the records were written as,
 * and its KEYS the keys of its entries without repeats, in order, space-separated (what
 * join_keys makes of the items' keys). pack answers None before taking anything when an entry's
 * keys could make one item pass max_key_chars (pack keeps only the keys that fit then: the
 * caller takes items and packs them, as before).
 */

/* Move the pending entries out of b into a new array *w (the running ones stay with their
 * SubBefore taken, as TE_SENT; the captured ones, not delivered yet, stay as they are); how
 * many, -1 with no memory. */
static Py_ssize_t te_move(te_buf *b, te_entry **w_out) {
    te_entry *w = NULL;
    Py_ssize_t nw = 0, kept = 0, i;
    if (b->pending > 0) {
        w = PyMem_Malloc((size_t)b->pending * sizeof(te_entry));
        if (w == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    for (i = 0; i < b->n && nw < b->pending; i++) {
        te_entry *x = &b->e[i];
        if (x->state == TE_SENT || x->state == TE_CAPTURED) { /* captured: not delivered yet */
            b->e[kept++] = *x;
            continue;
        }
        w[nw] = *x;
        if (x->state == TE_OPEN) { /* its SubBefore now; it stays for its end */
            Py_INCREF(x->region);
            Py_INCREF(x->topic);
            Py_INCREF(x->msg_id);
            Py_XINCREF(x->keys);
            x->state = TE_SENT;
            b->e[kept++] = *x;
        }
        nw++;
    }
    for (; i < b->n; i++) { /* only entries still running are left past the pending ones */
        b->e[kept++] = b->e[i];
    }
    b->n = kept;
    b->pending = 0;
    *w_out = w;
    return nw;
}

/* The writing state of take and pack, with what neighbouring entries share formatted once (the
 * region's text, the start and end milliseconds' digits, the request id's first 14 hex digits):
 * formatting numbers was most of a record's cost. */
typedef struct {
    tr_buf buf;
    tr_text group, pre;
    Py_ssize_t size, key_size, records; /* of the open item */
    PyObject *region_of;                /* borrowed: the taken entries hold it */
    tr_text region;
    long long began_ms, now_ms;
    unsigned long long block; /* the request number >> 8 whose id is in rid */
    int began_n, now_n, rid_n;
    char began[24], now[24], rid[40];
} te_writer;

static void te_writer_init(te_writer *wr) {
    memset(wr, 0, sizeof(*wr));
    wr->began_ms = wr->now_ms = -1; /* times are never negative */
    wr->block = ~0ULL;              /* no number's: (2**64 - 1) >> 8 is below it */
}

/* take's and pack's arguments (group, request_prefix, item_chars, item_key_chars). */
static int te_writer_args(te_writer *wr, PyObject *const *args, long long *item_chars,
                          long long *item_key_chars) {
    if (tr_text_of(args[0], &wr->group) < 0 || tr_text_of(args[1], &wr->pre) < 0 ||
        te_ll(args[2], item_chars, 1) < 0 || te_ll(args[3], item_key_chars, 1) < 0) {
        return -1;
    }
    return 0;
}

static int te_prefix_ok(te_writer *wr) {
    if (wr->pre.n > 16 || wr->pre.n != wr->pre.chars) {
        PyErr_SetString(PyExc_ValueError, "request_prefix: at most 16 ASCII characters");
        return 0;
    }
    memcpy(wr->rid, wr->pre.u, (size_t)wr->pre.n);
    wr->rid_n = (int)wr->pre.n + 16;
    return 1;
}

static const char TE_HEX[] = "0123456789ABCDEF";

/* A record's variable pieces are short (digits, the region, the group, ids of 32 characters):
 * copied with at most four word moves (overlapping ones for lengths between powers of two)
 * instead of a library memcpy call each (~30 instructions a call, ~16 calls per delivery). */
TR_INLINE char *te_copy(char *p, const char *s, Py_ssize_t n) {
    uint64_t a, b, c, d;
    if (n >= 8) {
        if (n > 32) {
            memcpy(p, s, (size_t)n);
        } else if (n > 16) {
            memcpy(&a, s, 8);
            memcpy(&b, s + 8, 8);
            memcpy(&c, s + n - 16, 8);
            memcpy(&d, s + n - 8, 8);
            memcpy(p, &a, 8);
            memcpy(p + 8, &b, 8);
            memcpy(p + n - 16, &c, 8);
            memcpy(p + n - 8, &d, 8);
        } else {
            memcpy(&a, s, 8);
            memcpy(&b, s + n - 8, 8);
            memcpy(p, &a, 8);
            memcpy(p + n - 8, &b, 8);
        }
    } else if (n >= 4) {
        uint32_t x, y;
        memcpy(&x, s, 4);
        memcpy(&y, s + n - 4, 4);
        memcpy(p, &x, 4);
        memcpy(p + n - 4, &y, 4);
    } else if (n > 0) {
        p[0] = s[0];
        p[n / 2] = s[n / 2];
        p[n - 1] = s[n - 1];
    }
    return p + n;
}

#define TE_PUT(p, s, n) ((p) = te_copy((p), (s), (n)))
#define TE_LIT(p, s) (memcpy((p), (s), sizeof(s) - 1), (p) += sizeof(s) - 1)

/* The records of entry x into wr (its keys' characters added to the item's): SubBefore unless
 * its SubBefore was written, SubAfter once its call ended, as sub_records writes them. */
static int te_write(te_writer *wr, const te_entry *x) {
    tr_text id, keys = {"null", 4, 4};
    char *p, *start;
    int before = x->state == TE_OPEN || x->state == TE_ENDED, ended = x->state >= TE_ENDED;
    long long began_ms = x->began_ns / 1000000;
    Py_ssize_t need, surplus = 0;
    if (x->region != wr->region_of) {
        if (tr_text_of(x->region, &wr->region) < 0) {
            wr->region_of = NULL;
            return -1;
        }
        wr->region_of = x->region;
    }
    if (tr_text_of(x->msg_id, &id) < 0 ||
        (x->keys != NULL && PyUnicode_GET_LENGTH(x->keys) > 0 && tr_text_of(x->keys, &keys) < 0)) {
        return -1;
    }
    if (x->number >> 8 != wr->block) {
        unsigned long long high = x->number >> 8;
        wr->block = high;
        for (int k = 13; k >= 0; k--, high >>= 4) {
            wr->rid[wr->pre.n + k] = TE_HEX[high & 0xF];
        }
    }
    wr->rid[wr->pre.n + 14] = TE_HEX[(x->number >> 4) & 0xF];
    wr->rid[wr->pre.n + 15] = TE_HEX[x->number & 0xF];
    need = 2 * (wr->rid_n + id.n + keys.n + wr->group.n) + wr->region.n + 5 * 24 + 40;
    if (wr->buf.len + need > wr->buf.cap && tr_grow(&wr->buf, need) < 0) {
        return -1;
    }
    p = start = wr->buf.p + wr->buf.len;
    if (before) {
        if (began_ms != wr->began_ms) {
            wr->began_ms = began_ms;
            wr->began_n = tr_digits(wr->began, began_ms);
        }
        TE_LIT(p, "SubBefore\x01");
        TE_PUT(p, wr->began, wr->began_n);
        *p++ = '\x01';
        TE_PUT(p, wr->region.u, wr->region.n);
        *p++ = '\x01';
        TE_PUT(p, wr->group.u, wr->group.n);
        *p++ = '\x01';
        TE_PUT(p, wr->rid, wr->rid_n);
        *p++ = '\x01';
        TE_PUT(p, id.u, id.n);
        *p++ = '\x01';
        p += tr_digits(p, x->retries); /* into the reserved room */
        *p++ = '\x01';
        TE_PUT(p, keys.u, keys.n);
        *p++ = '\x02';
        surplus += (wr->region.n - wr->region.chars) + (wr->group.n - wr->group.chars) +
                   (id.n - id.chars) + (keys.n - keys.chars);
        wr->records++;
    }
    if (ended) {
        long long now_ms = x->end_ns / 1000000, d = x->count > 0 ? x->count : 1;
        long long cost = now_ms - began_ms < 0 ? 0 : (now_ms - began_ms) / d;
        if (now_ms != wr->now_ms) {
            wr->now_ms = now_ms;
            wr->now_n = tr_digits(wr->now, now_ms);
        }
        TE_LIT(p, "SubAfter\x01");
        TE_PUT(p, wr->rid, wr->rid_n);
        *p++ = '\x01';
        TE_PUT(p, id.u, id.n);
        *p++ = '\x01';
        p += tr_digits(p, cost); /* into the reserved room */
        if (x->success) {
            TE_LIT(p, "\x01" "true\x01");
        } else {
            TE_LIT(p, "\x01" "false\x01"); /* "\x01f" would be one escape */
        }
        TE_PUT(p, keys.u, keys.n);
        *p++ = '\x01';
        p += tr_digits(p, x->code); /* into the reserved room */
        *p++ = '\x01';
        TE_PUT(p, wr->now, wr->now_n);
        *p++ = '\x01';
        TE_PUT(p, wr->group.u, wr->group.n);
        *p++ = '\x02';
        surplus += (id.n - id.chars) + (keys.n - keys.chars) + (wr->group.n - wr->group.chars);
        wr->records++;
    }
    wr->buf.len += p - start;
    wr->size += (p - start) - surplus;
    wr->key_size += id.chars + 1;
    if (x->keys != NULL && PyUnicode_GET_LENGTH(x->keys) > 0) {
        wr->key_size += PyUnicode_GET_LENGTH(x->keys) + 1;
    }
    return 0;
}

static void te_free(te_entry *w, Py_ssize_t nw) {
    for (Py_ssize_t i = 0; i < nw; i++) {
        te_release(&w[i]);
    }
    PyMem_Free(w);
}

/* take(group, request_prefix, item_chars, item_key_chars): the records of the pending entries,
 * cut into items as sub_records cuts them (checked after each entry). */
static PyObject *te_take(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    te_entry *w = NULL;
    Py_ssize_t nw, i;
    PyObject *out = NULL, *index = NULL, *topic = NULL;
    te_writer wr;
    long long item_chars, item_key_chars;
    te_writer_init(&wr);
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "take() takes 4 arguments");
        return NULL;
    }
    if (te_writer_args(&wr, args, &item_chars, &item_key_chars) < 0 || !te_prefix_ok(&wr) ||
        (nw = te_move((te_buf *)self, &w)) < 0) {
        return NULL;
    }
    out = PyList_New(0);
    index = PyList_New(0);
    if (out == NULL || index == NULL) {
        goto fail;
    }
    for (i = 0; i < nw; i++) {
        te_entry *x = &w[i];
        if (te_write(&wr, x) < 0 || PyList_Append(index, x->msg_id) < 0 ||
            (x->keys != NULL && PyUnicode_GET_LENGTH(x->keys) > 0 &&
             PyList_Append(index, x->keys) < 0)) {
            goto fail;
        }
        topic = x->topic;
        if (wr.key_size >= item_key_chars || wr.size >= item_chars) {
            if (tr_close(out, topic, &wr.buf, wr.records, &index) < 0) {
                goto fail;
            }
            wr.size = wr.key_size = wr.records = 0;
        }
    }
    if (wr.records > 0 && tr_close(out, topic, &wr.buf, wr.records, &index) < 0) {
        goto fail;
    }
    Py_DECREF(index);
    index = NULL;
    goto done;
fail:
    Py_CLEAR(out);
    Py_XDECREF(index);
done:
    te_free(w, nw);
    PyMem_Free(wr.buf.p);
    return out;
}

/* The KEYS of a trace message: keys[0..n) without repeats, in order, space-separated
 * (join_keys_py; equal strs found as trace_join_keys finds them). */
static PyObject *te_join(PyObject **keys, Py_ssize_t n) {
    Py_ssize_t cap = 8, i, kept = 0, total = 0, *table, *unique;
    Py_UCS4 maxchar = 0;
    PyObject *out;
    while (cap < 2 * n) {
        cap *= 2;
    }
    table = PyMem_Calloc((size_t)cap, sizeof(Py_ssize_t)); /* position + 1 in keys; 0: free */
    unique = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(Py_ssize_t));
    if (table == NULL || unique == NULL) {
        PyMem_Free(table);
        PyMem_Free(unique);
        return PyErr_NoMemory();
    }
    for (i = 0; i < n; i++) {
        size_t slot = (size_t)tk_hash(keys[i]) & (size_t)(cap - 1);
        while (table[slot] && !tk_equal(keys[table[slot] - 1], keys[i])) {
            slot = (slot + 1) & (size_t)(cap - 1);
        }
        if (!table[slot]) {
            table[slot] = i + 1;
            unique[kept++] = i;
            total += PyUnicode_GET_LENGTH(keys[i]) + 1;
            if (PyUnicode_MAX_CHAR_VALUE(keys[i]) > maxchar) {
                maxchar = PyUnicode_MAX_CHAR_VALUE(keys[i]);
            }
        }
    }
    PyMem_Free(table);
    out = PyUnicode_New(kept ? total - 1 : 0, maxchar);
    if (out != NULL) {
        Py_ssize_t at = 0;
        for (i = 0; i < kept; i++) {
            PyObject *key = keys[unique[i]];
            Py_ssize_t len = PyUnicode_GET_LENGTH(key);
            if (i > 0) {
                PyUnicode_WRITE(PyUnicode_KIND(out), PyUnicode_DATA(out), at++, ' ');
            }
            if (PyUnicode_KIND(key) == PyUnicode_KIND(out)) {
                memcpy((char *)PyUnicode_DATA(out) + at * PyUnicode_KIND(out),
                       PyUnicode_DATA(key), (size_t)(len * PyUnicode_KIND(key)));
            } else if (PyUnicode_CopyCharacters(out, at, key, 0, len) < 0) {
                Py_CLEAR(out);
                break;
            }
            at += len;
        }
    }
    PyMem_Free(unique);
    return out;
}

/* pack's trace messages as they close. */
typedef struct {
    PyObject *out;
    PyObject **keys;              /* the keys of the round (borrowed from the taken entries) */
    Py_ssize_t nkeys;
    Py_ssize_t start, k0;         /* the open message: its first byte and key */
    Py_ssize_t size, key_size, records, items;
    Py_ssize_t item_start, item_k0; /* the open item */
} te_packer;

/* Close the open message at byte `end` and key `k_end`: (body, records, KEYS) appended. */
static int te_emit(te_packer *p, const tr_buf *b, Py_ssize_t end, Py_ssize_t k_end) {
    PyObject *body = NULL, *keys = NULL, *item = NULL;
    int rc = -1;
    if ((body = PyBytes_FromStringAndSize(b->p + p->start, end - p->start)) != NULL &&
        (keys = te_join(p->keys + p->k0, k_end - p->k0)) != NULL &&
        (item = Py_BuildValue("(OnO)", body, p->records, keys)) != NULL) {
        rc = PyList_Append(p->out, item);
    }
    Py_XDECREF(body);
    Py_XDECREF(keys);
    Py_XDECREF(item);
    p->start = end;
    p->k0 = k_end;
    p->size = p->key_size = p->records = p->items = 0;
    return rc;
}

/* The open item closed (its bytes from item_start to the buffer's end): pack's step for it. */
static int te_item(te_packer *p, te_writer *wr, long long max_chars, long long max_key_chars) {
    if (p->items > 0 && p->key_size + wr->key_size > max_key_chars &&
        te_emit(p, &wr->buf, p->item_start, p->item_k0) < 0) {
        return -1;
    }
    p->key_size += wr->key_size;
    p->size += wr->size;
    p->records += wr->records;
    p->items++;
    wr->size = wr->key_size = wr->records = 0;
    if (p->size >= max_chars && te_emit(p, &wr->buf, wr->buf.len, p->nkeys) < 0) {
        return -1;
    }
    if (p->start > 0) { /* what is written before the open message is sent: the buffer starts
                         * again (a message closed before an item's keys keeps that item) */
        memmove(wr->buf.p, wr->buf.p + p->start, (size_t)(wr->buf.len - p->start));
        wr->buf.len -= p->start;
        p->start = 0;
    }
    p->item_start = wr->buf.len;
    p->item_k0 = p->nkeys;
    return 0;
}

/* Whether a pending entry's keys could make one item pass max_key_chars: more than
 * max_key_chars - max(item_key_chars, 0) characters (an item closes once its keys reach
 * item_key_chars, so it holds less than that before its last entry). */
static int te_keys_too_long(const te_buf *b, long long item_key_chars, long long max_key_chars) {
    long long open = item_key_chars > 0 ? item_key_chars : 0, limit;
    if (open > max_key_chars) { /* below any entry's keys (two characters at least) */
        return b->pending > 0;
    }
    limit = max_key_chars - open;
    for (Py_ssize_t i = 0; i < b->n; i++) {
        const te_entry *x = &b->e[i];
        long long chars;
        if (x->state == TE_SENT || x->state == TE_CAPTURED) {
            continue;
        }
        chars = PyUnicode_GET_LENGTH(x->msg_id) + 1;
        if (x->keys != NULL && PyUnicode_GET_LENGTH(x->keys) > 0) {
            chars += PyUnicode_GET_LENGTH(x->keys) + 1;
        }
        if (chars > limit) {
            return 1;
        }
    }
    return 0;
}

/* pack(group, request_prefix, item_chars, item_key_chars, max_chars, max_key_chars): the trace
 * messages of the pending entries, as take's items packed by _trace_dispatch.pack would be (see
 * the top of this file); None when an entry's keys are too long for that (nothing taken). */
static PyObject *te_pack(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    te_buf *b = (te_buf *)self;
    te_entry *w = NULL;
    Py_ssize_t nw = 0, i;
    te_writer wr;
    te_packer p = {NULL};
    long long item_chars, item_key_chars, max_chars, max_key_chars;
    te_writer_init(&wr);
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "pack() takes 6 arguments");
        return NULL;
    }
    if (te_writer_args(&wr, args, &item_chars, &item_key_chars) < 0 ||
        te_ll(args[4], &max_chars, 1) < 0 || te_ll(args[5], &max_key_chars, 1) < 0 ||
        !te_prefix_ok(&wr)) {
        return NULL;
    }
    if (te_keys_too_long(b, item_key_chars, max_key_chars)) {
        Py_RETURN_NONE;
    }
    if ((nw = te_move(b, &w)) < 0) {
        return NULL;
    }
    p.keys = PyMem_Malloc((size_t)(2 * nw + 1) * sizeof(PyObject *));
    if (p.keys == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    if ((p.out = PyList_New(0)) == NULL) {
        goto fail;
    }
    for (i = 0; i < nw; i++) {
        te_entry *x = &w[i];
        if (te_write(&wr, x) < 0) {
            goto fail;
        }
        p.keys[p.nkeys++] = x->msg_id;
        if (x->keys != NULL && PyUnicode_GET_LENGTH(x->keys) > 0) {
            p.keys[p.nkeys++] = x->keys;
        }
        if ((wr.key_size >= item_key_chars || wr.size >= item_chars) &&
            te_item(&p, &wr, max_chars, max_key_chars) < 0) {
            goto fail;
        }
    }
    if (wr.records > 0 && te_item(&p, &wr, max_chars, max_key_chars) < 0) {
        goto fail;
    }
    if (p.items > 0 && te_emit(&p, &wr.buf, wr.buf.len, p.nkeys) < 0) {
        goto fail;
    }
    goto done;
fail:
    Py_CLEAR(p.out);
done:
    te_free(w, nw);
    PyMem_Free(p.keys);
    PyMem_Free(wr.buf.p);
    return p.out;
}

/* ---- trace_bind(func, *args): functools.partial(func, *args) for the hooks' calls ------------
 *
 * ConsumeTracer binds the hooks' first arguments (ten and five of them). functools.partial
 * allocates a stack for a call of more than five arguments in all (PyMem_Malloc and its free,
 * each call: two per delivery); this one lays them out on the C stack (up to TB_STACK, more on
 * the heap). Same call, same answer, same exceptions: the twin is
 * functools.partial (its .func and .args are here too). */

#define TB_STACK 24

typedef struct {
    PyObject_HEAD
    PyObject *func, *args; /* args: a tuple */
    vectorcallfunc vectorcall;
    _PyCFunctionFast direct; /* func's C function when it is one of the hooks below, else NULL */
} tb_bound;

/* _speedups_tracehook.h's hooks (defined after this file): a bound hook calls its function as C,
 * without the builtin's vectorcall, recursion check and result check around it (they are ours:
 * they take no keywords and neither recurse nor answer NULL without an error). */
static PyObject *trace_hook_before(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
static PyObject *trace_hook_after(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
static PyObject *trace_hook_capture(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
static PyObject *trace_hook_end(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

static PyTypeObject *TB_BOUND_TYPE;

static PyObject *tb_bound_call(PyObject *self, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
    tb_bound *b = (tb_bound *)self;
    PyObject *stack[TB_STACK];
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nb = PyTuple_GET_SIZE(b->args);
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject **all = stack, *out;
    if (nb + nargs + nkw > TB_STACK &&
        (all = PyMem_Malloc((size_t)(nb + nargs + nkw) * sizeof(PyObject *))) == NULL) {
        return PyErr_NoMemory();
    }
    memcpy(all, &PyTuple_GET_ITEM(b->args, 0), (size_t)nb * sizeof(PyObject *));
    memcpy(all + nb, args, (size_t)(nargs + nkw) * sizeof(PyObject *));
    if (kwnames == NULL && b->direct != NULL) { /* one of the hooks: called as C */
        out = b->direct(PyCFunction_GET_SELF(b->func), all, nb + nargs);
    } else {
        out = PyObject_Vectorcall(b->func, all, (size_t)(nb + nargs), kwnames);
    }
    if (all != stack) {
        PyMem_Free(all);
    }
    return out;
}

static void tb_bound_dealloc(PyObject *self) {
    tb_bound *b = (tb_bound *)self;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Py_CLEAR(b->func);
    Py_CLEAR(b->args);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int tb_bound_traverse(PyObject *self, visitproc visit, void *arg) {
    tb_bound *b = (tb_bound *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(b->func);
    Py_VISIT(b->args);
    return 0;
}

static int tb_bound_clear(PyObject *self) {
    tb_bound *b = (tb_bound *)self;
    Py_CLEAR(b->func);
    Py_CLEAR(b->args);
    return 0;
}

static PyMemberDef tb_bound_members[] = {
    {"func", T_OBJECT, offsetof(tb_bound, func), READONLY, "the function"},
    {"args", T_OBJECT, offsetof(tb_bound, args), READONLY, "its first arguments"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(tb_bound, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot tb_bound_slots[] = {
    {Py_tp_dealloc, tb_bound_dealloc},
    {Py_tp_traverse, tb_bound_traverse},
    {Py_tp_clear, tb_bound_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, tb_bound_members},
    {Py_tp_doc, "functools.partial(func, *args) for the trace hooks (trace_bind)."},
    {0, NULL},
};

static PyType_Spec tb_bound_spec = {
    "ariane._speedups.TraceBound", sizeof(tb_bound), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, tb_bound_slots,
};

static PyObject *trace_bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    tb_bound *b;
    (void)self;
    if (nargs < 1 || !PyCallable_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "trace_bind(func, *args): func must be callable");
        return NULL;
    }
    if (TB_BOUND_TYPE == NULL &&
        (TB_BOUND_TYPE = (PyTypeObject *)PyType_FromSpec(&tb_bound_spec)) == NULL) {
        return NULL;
    }
    b = PyObject_GC_New(tb_bound, TB_BOUND_TYPE);
    if (b == NULL) {
        return NULL;
    }
    b->func = Py_NewRef(args[0]);
    b->args = PyTuple_New(nargs - 1);
    b->vectorcall = tb_bound_call;
    b->direct = NULL;
    if (PyCFunction_CheckExact(args[0]) &&
        PyCFunction_GET_FLAGS(args[0]) == METH_FASTCALL &&
        (PyCFunction_GET_FUNCTION(args[0]) == (PyCFunction)(void (*)(void))trace_hook_before ||
         PyCFunction_GET_FUNCTION(args[0]) == (PyCFunction)(void (*)(void))trace_hook_after ||
         PyCFunction_GET_FUNCTION(args[0]) == (PyCFunction)(void (*)(void))trace_hook_capture ||
         PyCFunction_GET_FUNCTION(args[0]) == (PyCFunction)(void (*)(void))trace_hook_end)) {
        b->direct = (_PyCFunctionFast)(void (*)(void))PyCFunction_GET_FUNCTION(args[0]);
    }
    if (b->args == NULL) {
        Py_DECREF(b);
        return NULL;
    }
    for (Py_ssize_t i = 1; i < nargs; i++) {
        PyTuple_SET_ITEM(b->args, i - 1, Py_NewRef(args[i]));
    }
    PyObject_GC_Track(b);
    return (PyObject *)b;
}

/* ---- trace_counter(start): itertools.count(start) for the request numbers --------------------
 *
 * The hooks take a request number per delivery; from itertools.count that is an int made, read
 * and freed. From this counter the compiled hook reads and advances the C value (tc_next); any
 * other iterator is next()ed. next() from Python answers what itertools.count would, past 2**64
 * too (the count goes on as a Python int there: tc_next then answers it, the hook refuses it as
 * its pure twin does). */

typedef struct {
    PyObject_HEAD
    unsigned long long next;
    PyObject *big; /* the count once past 2**64 - 1, else NULL */
} tc_counter;

static PyTypeObject *TC_TYPE;

static PyObject *tc_iternext(PyObject *self) {
    tc_counter *c = (tc_counter *)self;
    PyObject *out, *one;
    if (c->big == NULL) {
        out = PyLong_FromUnsignedLongLong(c->next);
        if (out != NULL && c->next++ == ULLONG_MAX) {
            one = PyLong_FromLong(1);
            c->big = one == NULL ? NULL : PyNumber_Add(out, one);
            Py_XDECREF(one);
            if (c->big == NULL) {
                Py_DECREF(out);
                return NULL;
            }
        }
        return out;
    }
    out = Py_NewRef(c->big);
    one = PyLong_FromLong(1);
    Py_XSETREF(c->big, one == NULL ? NULL : PyNumber_Add(out, one));
    Py_XDECREF(one);
    if (c->big == NULL) { /* never a count again: the value stays */
        c->big = out;
        return NULL;
    }
    return out;
}

/* The next request number: 0, or 1 for a value that is not one (an int beyond 64 bits or
 * something else: the caller's TypeError), -1 with the iterator's exception. */
static int tc_next(PyObject *counter, unsigned long long *out) {
    PyObject *v;
    int rc;
    if (Py_IS_TYPE(counter, TC_TYPE) && ((tc_counter *)counter)->big == NULL &&
        ((tc_counter *)counter)->next != ULLONG_MAX) {
        *out = ((tc_counter *)counter)->next++;
        return 0;
    }
    if ((v = PyIter_Next(counter)) == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetNone(PyExc_StopIteration);
        }
        return -1;
    }
    rc = te_ull(v, out);
    Py_DECREF(v);
    return rc;
}

static void tc_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    Py_CLEAR(((tc_counter *)self)->big);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyType_Slot tc_slots[] = {
    {Py_tp_dealloc, tc_dealloc},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, tc_iternext},
    {Py_tp_doc, "itertools.count(start) of the trace hooks' request numbers (trace_counter)."},
    {0, NULL},
};

static PyType_Spec tc_spec = {
    "ariane._speedups.TraceCounter", sizeof(tc_counter), 0, Py_TPFLAGS_DEFAULT, tc_slots,
};

static PyObject *trace_counter(PyObject *self, PyObject *start) {
    tc_counter *c;
    unsigned long long first;
    (void)self;
    if (te_ull(start, &first) < 0) {
        return NULL;
    }
    if (TC_TYPE == NULL && (TC_TYPE = (PyTypeObject *)PyType_FromSpec(&tc_spec)) == NULL) {
        return NULL;
    }
    if ((c = PyObject_New(tc_counter, TC_TYPE)) == NULL) {
        return NULL;
    }
    c->next = first;
    c->big = NULL;
    return (PyObject *)c;
}

#define SPEEDUPS_TRACEPACK_METHODS                                                               \
    {"trace_bind", (PyCFunction)(void (*)(void))trace_bind, METH_FASTCALL,                      \
     "functools.partial(func, *args) without a heap stack per call (the trace hooks)."},        \
        {"trace_counter", (PyCFunction)trace_counter, METH_O,                                    \
         "itertools.count(start) for an int in [0, 2**64) (the trace hooks' request numbers)."},
