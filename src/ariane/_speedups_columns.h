/* ariane._speedups: decode_columns, the compiled twin of
 * ariane.common.record_columns.decode_columns_py (issue 19: Spark reads).
 *
 *   decode_columns(buf, start, end, tags, with_props, skip, fields) -> tuple | None
 *       buf: one bytes-like object, or a list of them (PULL bodies, walked in turn: no join)
 *       fields: bit mask of the columns built (bit i: fixed column i of the C_* enum, bit
 *       C_FIXED_N + j: string column j of the T_* enum); the others come back empty (b"")
 *       and cost nothing (no properties parsed when neither tags, keys, msgId, the tag
 *       filter nor the properties column needs them)
 *
 * How it works: one walk over the concatenated CommitLog records of a PULL body (RocketMQ
 * MessageDecoder.decodesBatch layout, see ariane/store/format.py) that checks every record and
 * appends the kept ones (queue offset in [start, end), TAGS in `tags` when given) to growable
 * column buffers in Arrow's layouts: native int32/int64 arrays, (int32 offsets, data) for
 * strings, plus an LSB validity bitmap for tags and keys, and the properties as entry offsets
 * and key/value strings. The Python wrapper turns the tuple into RecordColumns. A malformed
 * record raises ValueError((message, pos)) (the wrapper makes it a CorruptionError), with the
 * pure twin's messages; a well-formed record this path does not handle (IPv6 hosts, compressed
 * body, timestamps beyond int64 microseconds) returns None, as the twin does.
 *
 * Included by _speedups.c after its be16/be32/be64 helpers; no Python object per row.
 */

#define COL_MAGIC_V1 ((int32_t)0xDAA320A7)
#define COL_MAGIC_V2 ((int32_t)0xDAA320AB)
#define COL_MIN_TOTAL 91
#define COL_FIXED 88
#define COL_V6_FLAGS 0x30
#define COL_COMPRESSED 0x1
#define COL_MAX_MS (INT64_MAX / 1000)

/* a growable byte buffer; with `owner` (a bytearray) its storage, of a fixed size */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
    PyObject *owner;
} gbuf;

static int gb_reserve(gbuf *b, Py_ssize_t extra) {
    Py_ssize_t want = b->len + extra, cap = b->cap ? b->cap : 256;
    char *grown;
    if (want <= b->cap) {
        return 0;
    }
    if (b->owner != NULL) {
        return -1; /* cannot happen: the bodies are parts of buf */
    }
    while (cap < want) {
        cap *= 2;
    }
    grown = PyMem_RawRealloc(b->p, (size_t)cap);
    if (grown == NULL) {
        return -1;
    }
    b->p = grown;
    b->cap = cap;
    return 0;
}

static int gb_put(gbuf *b, const void *src, Py_ssize_t n) {
    if (gb_reserve(b, n) < 0) {
        return -1;
    }
    if (n) {
        memcpy(b->p + b->len, src, (size_t)n);
    }
    b->len += n;
    return 0;
}

/* the bytes of b; a bytearray for an owned buffer, shrunk to its length (no copy) */
static PyObject *gb_bytes(const gbuf *b) {
    if (b->owner != NULL) {
        if (PyByteArray_Resize(b->owner, b->len) < 0) {
            return NULL;
        }
        Py_INCREF(b->owner);
        return b->owner;
    }
    return PyBytes_FromStringAndSize(b->len ? b->p : "", b->len);
}

static void gb_free(gbuf *b) {
    if (b->owner != NULL) {
        Py_DECREF(b->owner);
    } else {
        PyMem_RawFree(b->p);
    }
}

/* a string column: int32 offsets, data and (nullable ones) a validity bitmap */
typedef struct {
    gbuf off, data, valid;
    Py_ssize_t n;
} tcol;

static int tc_init(tcol *c) {
    int32_t zero = 0;
    return gb_put(&c->off, &zero, 4);
}

static int tc_add(tcol *c, const unsigned char *s, Py_ssize_t n, int present) {
    int32_t end;
    if (c->n % 8 == 0) {
        unsigned char z = 0;
        if (gb_put(&c->valid, &z, 1) < 0) {
            return -1;
        }
    }
    if (present) {
        c->valid.p[c->n / 8] |= (char)(1 << (c->n % 8));
    }
    c->n++;
    if (present && gb_put(&c->data, s, n) < 0) {
        return -1;
    }
    end = (int32_t)c->data.len;
    return gb_put(&c->off, &end, 4);
}

static void tc_free(tcol *c) {
    gb_free(&c->off);
    gb_free(&c->data);
    gb_free(&c->valid);
}

enum { C_QID, C_SYS, C_RECONSUME, C_QOFF, C_PHYS, C_BORN, C_STORE, C_FIXED_N };
enum { T_BODY, T_TOPIC, T_TAGS, T_KEYS, T_MSGID, T_BORNH, T_STOREH, T_NAMES, T_VALUES, T_N };

typedef struct {
    const unsigned char *name, *value;
    Py_ssize_t nlen, vlen;
} prop_entry;

typedef struct {
    gbuf fixed[C_FIXED_N];
    tcol text[T_N];
    gbuf entries;    /* int32 entry offsets of the properties column */
    prop_entry *ent; /* one record's properties */
    Py_ssize_t ent_cap, ent_n;
    Py_ssize_t tags_at, keys_at, uniq_at; /* their entries (-1: none) */
    Py_ssize_t rows;
    int fields; /* the mask of columns built */
    unsigned char host_key[2][8]; /* last host formatted (born, store) */
    char host_text[2][32];
    Py_ssize_t host_len[2];
    char err[160]; /* a malformed record's message ("": out of memory) */
    Py_ssize_t err_pos;
} col_state;

static void cs_free(col_state *s) {
    int i;
    for (i = 0; i < C_FIXED_N; i++) {
        gb_free(&s->fixed[i]);
    }
    for (i = 0; i < T_N; i++) {
        tc_free(&s->text[i]);
    }
    gb_free(&s->entries);
    PyMem_RawFree(s->ent);
}

/* note a malformed record (the walk runs without the GIL; raised once it is back) */
static int col_error(col_state *s, Py_ssize_t pos, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    s->err_pos = pos;
    return -1;
}

/* the Python error of a failed walk: ValueError((message, pos)), else out of memory */
static void raise_walk_error(const col_state *s) {
    PyObject *args;
    if (s->err[0] == 0) {
        PyErr_NoMemory();
        return;
    }
    args = Py_BuildValue("(sn)", s->err, s->err_pos);
    if (args != NULL) {
        PyErr_SetObject(PyExc_ValueError, args);
        Py_DECREF(args);
    }
}

/* strict UTF-8, as bytes.decode() accepts it (no surrogates, overlongs or > U+10FFFF) */
static int utf8_ok(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i], c1;
        if (c < 0x80) {
            uint64_t word;
            i++;
            /* ASCII (names, topics, ids): eight bytes per step while none has its top bit */
            while (i + 8 <= n) {
                memcpy(&word, s + i, 8);
                if (word & 0x8080808080808080ULL) {
                    break;
                }
                i += 8;
            }
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) {
                return 0;
            }
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) {
                return 0;
            }
            c1 = s[i + 1];
            if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c1 & 0xC0) != 0x80 ||
                (s[i + 2] & 0xC0) != 0x80) {
                return 0;
            }
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) {
                return 0;
            }
            c1 = s[i + 1];
            if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F) || (c1 & 0xC0) != 0x80 ||
                (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80) {
                return 0;
            }
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* one record's properties as decode_properties leaves them: a name twice keeps its first
 * position and its last value; empty names or values are dropped */
static void note_named(col_state *s, Py_ssize_t k) {
    const prop_entry *e = &s->ent[k];
    if (e->nlen == 4 && memcmp(e->name, "TAGS", 4) == 0) {
        s->tags_at = k;
    } else if (e->nlen == 4 && memcmp(e->name, "KEYS", 4) == 0) {
        s->keys_at = k;
    } else if (e->nlen == 8 && memcmp(e->name, "UNIQ_KEY", 8) == 0) {
        s->uniq_at = k;
    }
}

static int parse_props(col_state *s, const unsigned char *t, Py_ssize_t n) {
    Py_ssize_t at = 0;
    s->ent_n = 0;
    s->tags_at = s->keys_at = s->uniq_at = -1;
    while (n > 0 && at <= n) {
        const unsigned char *seg = t + at, *stop = memchr(seg, 2, (size_t)(n - at)), *sep;
        Py_ssize_t len = stop ? stop - seg : n - at, k;
        at += len + 1;
        sep = memchr(seg, 1, (size_t)len);
        if (sep == NULL || sep == seg || sep == seg + len - 1) {
            continue;
        }
        for (k = 0; k < s->ent_n; k++) {
            const prop_entry *e = &s->ent[k];
            if (e->nlen == sep - seg && e->name[0] == seg[0] &&
                memcmp(e->name, seg, (size_t)(sep - seg)) == 0) {
                break;
            }
        }
        if (k == s->ent_n) {
            if (s->ent_n == s->ent_cap) {
                Py_ssize_t cap = s->ent_cap ? s->ent_cap * 2 : 16;
                prop_entry *grown = PyMem_RawRealloc(s->ent, (size_t)cap * sizeof(prop_entry));
                if (grown == NULL) {
                    return -1;
                }
                s->ent = grown;
                s->ent_cap = cap;
            }
            s->ent[k].name = seg;
            s->ent[k].nlen = sep - seg;
            s->ent_n++;
            note_named(s, k);
        }
        s->ent[k].value = sep + 1;
        s->ent[k].vlen = seg + len - sep - 1;
    }
    return 0;
}

static const prop_entry *named(const col_state *s, Py_ssize_t k) {
    return k < 0 ? NULL : &s->ent[k];
}

/* a tuple of bytes names as a compact array (the tuple keeps them alive) */
typedef struct {
    Py_ssize_t n;
    uint64_t lens; /* bit k: a name of length k (k < 63), bit 63: a longer one */
    Py_ssize_t *len;
    const char **name;
} name_set;

static int ns_init(name_set *ns, PyObject *names) {
    Py_ssize_t i;
    ns->n = names == Py_None ? 0 : PyTuple_GET_SIZE(names);
    ns->lens = 0;
    ns->len = PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)(ns->n + 1));
    ns->name = PyMem_RawMalloc(sizeof(char *) * (size_t)(ns->n + 1));
    if (ns->len == NULL || ns->name == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (i = 0; i < ns->n; i++) {
        PyObject *x = PyTuple_GET_ITEM(names, i);
        ns->len[i] = PyBytes_GET_SIZE(x);
        ns->name[i] = PyBytes_AS_STRING(x);
        ns->lens |= (uint64_t)1 << (ns->len[i] < 63 ? ns->len[i] : 63);
    }
    return 0;
}

static int in_names(const name_set *ns, const unsigned char *v, Py_ssize_t n) {
    Py_ssize_t i;
    if (!(ns->lens & ((uint64_t)1 << (n < 63 ? n : 63)))) {
        return 0;
    }
    for (i = 0; i < ns->n; i++) {
        if (ns->len[i] == n && ns->name[i][0] == (char)v[0] &&
            memcmp(ns->name[i], v, (size_t)n) == 0) {
            return 1;
        }
    }
    return 0;
}

static int put_i32(gbuf *b, int32_t v) { return gb_put(b, &v, 4); }
static int put_i64(gbuf *b, int64_t v) { return gb_put(b, &v, 8); }

/* "a.b.c.d:port" of the 8 host bytes at h (port signed, as the twin prints it) */
static int add_host(col_state *s, int which, const unsigned char *h) {
    if (memcmp(s->host_key[which], h, 8) != 0 || s->host_len[which] == 0) {
        int len = snprintf(s->host_text[which], sizeof s->host_text[which], "%u.%u.%u.%u:%d",
                           h[0], h[1], h[2], h[3], (int)be32(h + 4));
        memcpy(s->host_key[which], h, 8);
        s->host_len[which] = len;
    }
    return tc_add(&s->text[which ? T_STOREH : T_BORNH], (const unsigned char *)s->host_text[which],
                  s->host_len[which], 1);
}

static int add_msg_id(col_state *s, const unsigned char *r, const prop_entry *uniq) {
    static const char hex[] = "0123456789ABCDEF";
    unsigned char raw[16], text[32];
    int i;
    if (uniq != NULL) {
        return tc_add(&s->text[T_MSGID], uniq->value, uniq->vlen, 1);
    }
    memcpy(raw, r + 64, 8); /* store host and port */
    memcpy(raw + 8, r + 28, 8); /* physical offset */
    for (i = 0; i < 16; i++) {
        text[2 * i] = (unsigned char)hex[raw[i] >> 4];
        text[2 * i + 1] = (unsigned char)hex[raw[i] & 15];
    }
    return tc_add(&s->text[T_MSGID], text, 32, 1);
}

static int add_opt(tcol *c, const prop_entry *e) {
    return e ? tc_add(c, e->value, e->vlen, 1) : tc_add(c, NULL, 0, 0);
}

#define WANT_FIXED(s, c) ((s)->fields & (1 << (c)))
#define WANT_TEXT(s, t) ((s)->fields & (1 << (C_FIXED_N + (t))))
/* the columns that read the properties: tags, keys, msgId */
#define PROP_TEXTS ((1 << (C_FIXED_N + T_TAGS)) | (1 << (C_FIXED_N + T_KEYS)) | \
                    (1 << (C_FIXED_N + T_MSGID)))

static int add_fixed(col_state *s, const unsigned char *r) {
    static const int at[C_FIXED_N] = {12, 36, 72, 20, 28, 40, 56};
    int c;
    for (c = 0; c < C_FIXED_N; c++) {
        int rc;
        if (!WANT_FIXED(s, c)) {
            continue;
        }
        if (c < C_QOFF) {
            rc = put_i32(&s->fixed[c], be32(r + at[c]));
        } else {
            rc = put_i64(&s->fixed[c], be64(r + at[c]) * (c >= C_BORN ? 1000 : 1));
        }
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

/* append one kept record (properties parsed into s->ent when needed) */
static int add_record(col_state *s, const unsigned char *r, const unsigned char *body,
                      Py_ssize_t body_len, const unsigned char *topic, Py_ssize_t topic_len,
                      int with_props, const name_set *skip) {
    Py_ssize_t k;
    if (add_fixed(s, r) < 0 ||
        (WANT_TEXT(s, T_BODY) && tc_add(&s->text[T_BODY], body, body_len, 1) < 0) ||
        (WANT_TEXT(s, T_TOPIC) && tc_add(&s->text[T_TOPIC], topic, topic_len, 1) < 0) ||
        (WANT_TEXT(s, T_TAGS) && add_opt(&s->text[T_TAGS], named(s, s->tags_at)) < 0) ||
        (WANT_TEXT(s, T_KEYS) && add_opt(&s->text[T_KEYS], named(s, s->keys_at)) < 0) ||
        (WANT_TEXT(s, T_MSGID) && add_msg_id(s, r, named(s, s->uniq_at)) < 0) ||
        (WANT_TEXT(s, T_BORNH) && add_host(s, 0, r + 48) < 0) ||
        (WANT_TEXT(s, T_STOREH) && add_host(s, 1, r + 64) < 0)) {
        return -1;
    }
    s->rows++;
    if (!with_props) {
        return 0;
    }
    for (k = 0; k < s->ent_n; k++) {
        const prop_entry *e = &s->ent[k];
        if (in_names(skip, e->name, e->nlen)) {
            continue;
        }
        if (tc_add(&s->text[T_NAMES], e->name, e->nlen, 1) < 0 ||
            tc_add(&s->text[T_VALUES], e->value, e->vlen, 1) < 0) {
            return -1;
        }
    }
    return put_i32(&s->entries, (int32_t)s->text[T_NAMES].n);
}

static PyObject *strings_tuple(const tcol *c, int nullable) {
    if (nullable) {
        return Py_BuildValue("(NNN)", gb_bytes(&c->valid), gb_bytes(&c->off), gb_bytes(&c->data));
    }
    return Py_BuildValue("(NN)", gb_bytes(&c->off), gb_bytes(&c->data));
}

static PyObject *columns_result(col_state *s, int with_props) {
    PyObject *props;
    if (with_props) {
        props = Py_BuildValue("(NNNNN)", gb_bytes(&s->entries), gb_bytes(&s->text[T_NAMES].off),
                              gb_bytes(&s->text[T_NAMES].data), gb_bytes(&s->text[T_VALUES].off),
                              gb_bytes(&s->text[T_VALUES].data));
        if (props == NULL) {
            return NULL;
        }
    } else {
        props = Py_None;
        Py_INCREF(props);
    }
    return Py_BuildValue(
        "(nNNNNNNNNNNNNNNN)", s->rows, gb_bytes(&s->fixed[C_QID]), gb_bytes(&s->fixed[C_QOFF]),
        gb_bytes(&s->fixed[C_PHYS]), gb_bytes(&s->fixed[C_SYS]), gb_bytes(&s->fixed[C_BORN]),
        gb_bytes(&s->fixed[C_STORE]), gb_bytes(&s->fixed[C_RECONSUME]),
        strings_tuple(&s->text[T_BODY], 0), strings_tuple(&s->text[T_TOPIC], 0),
        strings_tuple(&s->text[T_TAGS], 1), strings_tuple(&s->text[T_KEYS], 1),
        strings_tuple(&s->text[T_MSGID], 0), strings_tuple(&s->text[T_BORNH], 0),
        strings_tuple(&s->text[T_STOREH], 0), props);
}

static int64_t clamp_i64(PyObject *x) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow) {
        return overflow > 0 ? INT64_MAX : INT64_MIN;
    }
    return (int64_t)v;
}

/* 1: keep (tag filter), 0: drop; tags is None or a tuple of bytes */
static int tag_kept(const col_state *s, const name_set *tags) {
    const prop_entry *e;
    if (tags == NULL) {
        return 1;
    }
    e = named(s, s->tags_at);
    return e != NULL && in_names(tags, e->value, e->vlen);
}

/* one record at b[pos:]: 1 appended or skipped, 0 not handled here (None), -1 error */
static int column_record(col_state *s, const unsigned char *b, Py_ssize_t len, Py_ssize_t pos,
                         Py_ssize_t base, int64_t start, int64_t end, const name_set *tags,
                         int with_props, const name_set *skip, Py_ssize_t *next) {
    const unsigned char *r = b + pos, *body, *topic, *text;
    Py_ssize_t left = len - pos, p;
    int32_t total, magic, sys_flag, body_len, topic_len, props_len, width;
    int64_t born, store, qoff;
    if (left < COL_MIN_TOTAL) {
        return col_error(s, base + pos, "record truncated: %zd bytes left", left);
    }
    total = be32(r);
    magic = be32(r + 4);
    sys_flag = be32(r + 36);
    body_len = be32(r + 84);
    if (magic != COL_MAGIC_V1 && magic != COL_MAGIC_V2) {
        return col_error(s, base + pos, "bad magic code 0x%08x", (unsigned)magic);
    }
    if (total < COL_MIN_TOTAL) {
        return col_error(s, base + pos, "bad total size %d", (int)total);
    }
    if (total > left) {
        return col_error(s, base + pos, "record truncated: total size %d, %zd bytes left",
                         (int)total, left);
    }
    if (sys_flag & COL_V6_FLAGS) {
        return 0;
    }
    width = magic == COL_MAGIC_V2 ? 2 : 1;
    if (body_len < 0 || (int64_t)COL_FIXED + body_len + width + 2 > total) {
        return col_error(s, base + pos, "bad body length %d", (int)body_len);
    }
    body = r + COL_FIXED;
    p = COL_FIXED + body_len;
    topic_len = width == 2 ? be16(r + p) : (signed char)r[p];
    p += width;
    if (topic_len < 0 || p + topic_len + 2 > total) {
        return col_error(s, base + pos, "bad topic length %d", (int)topic_len);
    }
    topic = r + p;
    p += topic_len;
    props_len = be16(r + p);
    p += 2;
    if (props_len < 0 || p + props_len != total) {
        return col_error(s, base + pos, "bad properties length %d for total %d",
                         (int)props_len, (int)total);
    }
    text = r + p;
    if (!utf8_ok(topic, topic_len)) {
        return col_error(s, base + pos, "topic is not UTF-8");
    }
    if (!utf8_ok(text, props_len)) {
        return col_error(s, base + pos, "properties are not UTF-8");
    }
    born = be64(r + 40);
    store = be64(r + 56);
    if ((sys_flag & COL_COMPRESSED) || born > COL_MAX_MS || born < -COL_MAX_MS ||
        store > COL_MAX_MS || store < -COL_MAX_MS) {
        return 0;
    }
    *next = pos + total;
    qoff = be64(r + 20);
    if (qoff < start || qoff >= end) {
        return 1;
    }
    if ((tags != NULL || with_props || (s->fields & PROP_TEXTS)) &&
        parse_props(s, text, props_len) < 0) {
        return -1;
    }
    if (!tag_kept(s, tags)) {
        return 1;
    }
    if (add_record(s, r, body, body_len, topic, topic_len, with_props, skip) < 0) {
        return -1;
    }
    return 1;
}

static int names_tuple(PyObject *x, int none_ok) {
    Py_ssize_t i;
    if (none_ok && x == Py_None) {
        return 1;
    }
    if (!PyTuple_Check(x)) {
        return 0;
    }
    for (i = 0; i < PyTuple_GET_SIZE(x); i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(x, i))) {
            return 0;
        }
    }
    return 1;
}

/* the bodies of buf (one bytes-like object, or a list of them) as buffer views */
typedef struct {
    Py_buffer *v;
    Py_ssize_t n, total;
} views;

static void views_release(views *vs) {
    Py_ssize_t i;
    for (i = 0; i < vs->n; i++) {
        PyBuffer_Release(&vs->v[i]);
    }
    PyMem_Free(vs->v);
}

static int views_get(views *vs, PyObject *buf) {
    int list = PyList_CheckExact(buf);
    Py_ssize_t i, count = list ? PyList_GET_SIZE(buf) : 1;
    vs->n = vs->total = 0;
    vs->v = PyMem_Malloc(sizeof(Py_buffer) * (size_t)(count + 1));
    if (vs->v == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (i = 0; i < count; i++) {
        /* each view holds a reference to its object: the list may change meanwhile */
        if (PyObject_GetBuffer(list ? PyList_GET_ITEM(buf, i) : buf, &vs->v[i], PyBUF_SIMPLE) < 0) {
            views_release(vs);
            return -1;
        }
        vs->n++;
        vs->total += vs->v[i].len;
    }
    return 0;
}

/* walk every record of every body (without the GIL): 1 done, 0 not handled here, -1 error */
static int walk_views(col_state *s, const views *vs, int64_t start, int64_t end,
                      const name_set *tags, int with_props, const name_set *skip) {
    Py_ssize_t i, base = 0, pos, next = 0;
    int rc = 1;
    for (i = 0; i < vs->n && rc > 0; i++) {
        const unsigned char *b = (const unsigned char *)vs->v[i].buf;
        for (pos = 0; rc > 0 && pos < vs->v[i].len; pos = next) {
            rc = column_record(s, b, vs->v[i].len, pos, base, start, end, tags, with_props, skip,
                               &next);
        }
        base += vs->v[i].len;
    }
    return rc;
}

static PyObject *decode_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    views vs;
    col_state s;
    name_set tags = {0, 0, NULL, NULL}, skip = {0, 0, NULL, NULL};
    int64_t start, end;
    int with_props, fields, i, rc = 1;
    PyObject *result = NULL;
    (void)module;
    if (nargs != 7 || !names_tuple(args[3], 1) || !names_tuple(args[5], 0) ||
        !PyLong_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "decode_columns(buf: bytes | list[bytes], start, end, "
                        "tags: tuple[bytes] | None, with_props, skip: tuple[bytes], fields: int)");
        return NULL;
    }
    start = clamp_i64(args[1]);
    end = clamp_i64(args[2]);
    fields = (int)(PyLong_AsLong(args[6]) & ((1 << (C_FIXED_N + T_NAMES)) - 1));
    with_props = PyObject_IsTrue(args[4]);
    if (PyErr_Occurred() || with_props < 0) {
        return NULL;
    }
    if (views_get(&vs, args[0]) < 0) {
        return NULL;
    }
    if (vs.total >= INT32_MAX) {
        views_release(&vs);
        Py_RETURN_NONE;
    }
    memset(&s, 0, sizeof s);
    s.fields = fields;
    for (i = 0; i < T_N && rc > 0; i++) {
        /* a column not built stays empty: no offsets either */
        if (i < T_NAMES ? WANT_TEXT(&s, i) != 0 : with_props) {
            rc = tc_init(&s.text[i]) < 0 ? -1 : 1;
        }
    }
    /* the bodies, written once, straight into the bytearray returned (they fit: each is
     * a part of a record of buf) */
    if (!WANT_TEXT(&s, T_BODY)) {
        /* not built */
    } else if ((s.text[T_BODY].data.owner = PyByteArray_FromStringAndSize(NULL, vs.total)) ==
               NULL) {
        rc = -1;
    } else {
        s.text[T_BODY].data.p = PyByteArray_AS_STRING(s.text[T_BODY].data.owner);
        s.text[T_BODY].data.cap = vs.total;
    }
    if (rc > 0 && (put_i32(&s.entries, 0) < 0 || ns_init(&tags, args[3]) < 0 ||
                   ns_init(&skip, args[5]) < 0)) {
        rc = -1;
    }
    if (rc > 0) {
        /* no Python object is touched in the walk: the pull loop's thread runs meanwhile */
        Py_BEGIN_ALLOW_THREADS
        rc = walk_views(&s, &vs, start, end, args[3] == Py_None ? NULL : &tags, with_props,
                        &skip);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            raise_walk_error(&s);
        }
    } else if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
    if (rc > 0) {
        result = columns_result(&s, with_props);
    } else if (rc == 0) {
        result = Py_None;
        Py_INCREF(result);
    }
    cs_free(&s);
    PyMem_RawFree(tags.len);
    PyMem_RawFree(tags.name);
    PyMem_RawFree(skip.len);
    PyMem_RawFree(skip.name);
    views_release(&vs);
    return result;
}

#define COLUMNS_METHODS                                                                        \
    {"decode_columns", (PyCFunction)(void (*)(void))decode_columns, METH_FASTCALL,             \
     "Records of a PULL body as Arrow-layout column buffers, or None (see record_columns)."},
