/* ariane._speedups: a single send's JSON header read straight from the frame bytes (issue 18:
 * no orjson parse, no header or extFields dict, no RemotingCommand for a read's plain
 * SEND_MESSAGE / SEND_MESSAGE_V2 requests; RocketMQ RemotingCommand.decode + the header's
 * decodeCommandCustomHeader).
 *
 *   configure_raw_send(cls, slots, languages)   set once by ariane.remoting.protocol.rawsend
 *   send_header_scan(header) -> (code, opaque, ext_at, ext_end, {key: value}) | None
 *
 * Twin: rawsend.scan_send_header (pure Python, the same decisions).
 *
 * How it works. rs_scan accepts only the exact shape the RocketMQ clients (and ours) write:
 *   {"code":C,"extFields":{"k":"v",...},"flag":0,"language":"L","opaque":O,
 *    "serializeTypeCurrentRPC":"JSON","version":V}
 * with no whitespace and nothing after the final brace; C is 10 or 310; C, O and V are JSON
 * integers in the int32 range; L a language name of the codec's table; the extFields keys
 * plain ASCII (no escape), at most RS_MAX_PAIRS of them, no key twice; every value a JSON
 * string whose escapes are the standard ones (\uXXXX but a surrogate) and whose other bytes
 * are valid UTF-8 and no control character. Such a header is one orjson parses into exactly
 * these values (tests/unit/remoting/test_sendscan.py checks it against orjson), so the frame
 * the decoder leaves raw (a RawSend: code, flag, opaque, body, the source and the frame's and
 * extFields' offsets in it) decodes later, if anything needs the command, into the command the
 * eager decoder would have made. Anything else returns 0 and the frame is decoded as before.
 *
 * decode_json_frames (_speedups_frame.h) makes the RawSends. The one scan's extFields pairs
 * travel with the RawSend (its `spans` slot: an rs_span per pair, offsets into the source), so
 * send_prepare_run (_speedups_sendraw.h) reads the header fields without scanning the
 * extFields again (issue 18: the header was scanned twice, ~3,600 instructions per send).
 */

#include "structmember.h" /* PyMemberDef, T_OBJECT_EX */
#if defined(__SSE2__) && defined(__GNUC__)
#define RS_SSE2 1
#include <emmintrin.h> /* rs_string: 16 bytes at a time (every x86-64 has SSE2) */
#endif

enum { RS_MAX_PAIRS = 24, RS_MAX_KEY = 32 };

typedef struct {
    const unsigned char *k, *v; /* key and value bytes inside the quotes */
    Py_ssize_t kn, vn;
    int esc, high; /* the value has an escape / a byte >= 0x80 */
} rs_pair;

typedef struct {
    int n;
    rs_pair p[RS_MAX_PAIRS];
} rs_ext;

static PyObject *RS_CLS, *RS_LANGS;
/* RawSend's slots: code, flag, opaque, body, source, start, end, ext_at, ext_end, spans */
enum { RS_CODE, RS_FLAG, RS_OPAQUE, RS_BODY, RS_SOURCE, RS_START, RS_END, RS_EXT_AT,
       RS_EXT_END, RS_SPANS, RS_SLOT_COUNT };

/* one extFields pair in a RawSend's `spans` bytes: offsets into its source */
typedef struct {
    uint32_t k, v, vn;
    uint8_t kn, esc, high, pad;
} rs_span;
static PyMemberDef *RS_SLOTS[RS_SLOT_COUNT];
/* the last language name found in the table (a read's frames all carry the same) */
static char RS_LANG_OK[16];
static Py_ssize_t RS_LANG_LEN = -1;

static PyObject *configure_raw_send(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3 || !PyType_Check(args[0]) || !PyTuple_CheckExact(args[1]) ||
        PyTuple_GET_SIZE(args[1]) != RS_SLOT_COUNT || !PyDict_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "configure_raw_send(cls, slots, languages)");
        return NULL;
    }
    for (int k = 0; k < RS_SLOT_COUNT; k++) {
        PyObject *slot = PyTuple_GET_ITEM(args[1], k);
        if (!Py_IS_TYPE(slot, &PyMemberDescr_Type) ||
            ((PyDescrObject *)slot)->d_type != (PyTypeObject *)args[0] ||
            ((PyMemberDescrObject *)slot)->d_member->type != T_OBJECT_EX) {
            PyErr_SetString(PyExc_TypeError, "configure_raw_send: not a slot of the class");
            return NULL;
        }
    }
    for (int k = 0; k < RS_SLOT_COUNT; k++) {
        RS_SLOTS[k] = ((PyMemberDescrObject *)PyTuple_GET_ITEM(args[1], k))->d_member;
    }
    Py_INCREF(args[1]); /* keeps the descriptors (and their PyMemberDefs) alive */
    Py_XSETREF(RS_CLS, Py_NewRef(args[0]));
    Py_XSETREF(RS_LANGS, Py_NewRef(args[2]));
    RS_LANG_LEN = -1;
    Py_RETURN_NONE;
}

/* a RawSend's slot value (borrowed; NULL when unset) */
static inline PyObject *rs_slot(PyObject *obj, int k) {
    return *(PyObject **)((char *)obj + RS_SLOTS[k]->offset);
}

static int rs_hex(unsigned char ch) {
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    ch |= 0x20;
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* the length of the valid UTF-8 sequence at p (p < e, *p >= 0x80), 0 when it is not one */
static int rs_utf8(const unsigned char *p, const unsigned char *e) {
    unsigned char c = p[0], lo = 0x80, hi = 0xBF;
    int n;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (e - p < n || p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (int k = 2; k < n; k++) {
        if (p[k] < 0x80 || p[k] > 0xBF) {
            return 0;
        }
    }
    return n;
}

/* nonzero when one of the 8 bytes of x is a quote, a backslash, a control character or
 * >= 0x80 (the borrows may flag a byte after a true one: only "all plain" is exact) */
static inline uint64_t rs_special8(uint64_t x) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    return (((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) | x) & highs;
}

/* a JSON string from *pp (at its opening quote) to after its closing quote: 1 and the
 * contents' span, 0 when it is not one rs_scan takes */
static int rs_string(const unsigned char **pp, const unsigned char *e, rs_pair *out, int key) {
    const unsigned char *p = *pp, *s;
    int esc = 0, high = 0;
    if (p >= e || *p != '"') {
        return 0;
    }
    s = ++p;
    while (p < e) {
        unsigned char ch;
        uint64_t x;
#if defined(RS_SSE2)
        /* 16 bytes at a time: a quote, a backslash, a control character or a byte >= 0x80
         * (negative as a signed byte, so below 0x20 too) flags its lane; to the first one */
        while (e - p >= 16) {
            const __m128i v = _mm_loadu_si128((const __m128i *)p);
            const __m128i m = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                             _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
            const int bits = _mm_movemask_epi8(m);
            if (bits != 0) {
                p += __builtin_ctz((unsigned)bits);
                goto flagged;
            }
            p += 16;
        }
#endif
        while (e - p >= 8) { /* 8 plain bytes at a time, then to the first other one */
            uint64_t special;
            memcpy(&x, p, 8);
            special = rs_special8(x);
            if (special) {
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                p += __builtin_ctzll(special) >> 3; /* the lowest flag is a true one */
#endif
                break;
            }
            p += 8;
        }
#if defined(RS_SSE2)
    flagged:
#endif
        if (p >= e) {
            break;
        }
        ch = *p;
        if (ch == '"') {
            break;
        }
        if (ch < 0x20) {
            return 0;
        }
        if (ch == '\\') {
            if (key || e - p < 2) {
                return 0;
            }
            esc = 1;
            ch = p[1];
            if (ch == 'u') {
                int cp = 0;
                if (e - p < 6) {
                    return 0;
                }
                for (int k = 2; k < 6; k++) {
                    int d = rs_hex(p[k]);
                    if (d < 0) {
                        return 0;
                    }
                    cp = cp * 16 + d;
                }
                if (cp >= 0xD800 && cp <= 0xDFFF) {
                    return 0; /* a surrogate: orjson pairs them; not here */
                }
                p += 6;
            } else if (ch == '"' || ch == '\\' || ch == '/' || ch == 'b' || ch == 'f' ||
                       ch == 'n' || ch == 'r' || ch == 't') {
                p += 2;
            } else {
                return 0;
            }
            continue;
        }
        if (ch >= 0x80) {
            int n = key ? 0 : rs_utf8(p, e);
            if (n == 0) {
                return 0;
            }
            high = 1;
            p += n;
            continue;
        }
        p++;
    }
    if (p >= e) {
        return 0;
    }
    if (key) {
        out->k = s;
        out->kn = p - s;
    } else {
        out->v = s;
        out->vn = p - s;
        out->esc = esc;
        out->high = high;
    }
    *pp = p + 1;
    return 1;
}

/* the extFields object at p (e: the header's end): 1, its pairs and *after (past its closing
 * brace), 0 when it is not one rs_scan takes */
static int rs_ext_scan(const unsigned char *p, const unsigned char *e, rs_ext *ext,
                       const unsigned char **after) {
    int n = 0;
    if (p >= e || *p++ != '{') {
        return 0;
    }
    if (p < e && *p == '}') {
        ext->n = 0;
        *after = p + 1;
        return 1;
    }
    for (;;) {
        rs_pair *pair;
        if (n == RS_MAX_PAIRS) {
            return 0;
        }
        pair = &ext->p[n];
        if (!rs_string(&p, e, pair, 1) || pair->kn == 0 || pair->kn > RS_MAX_KEY || p >= e ||
            *p++ != ':' || !rs_string(&p, e, pair, 0)) {
            return 0;
        }
        for (int k = 0; k < n; k++) { /* the length and first byte before a memcmp */
            if (ext->p[k].kn == pair->kn && ext->p[k].k[0] == pair->k[0] &&
                (pair->kn == 1 ||
                 memcmp(ext->p[k].k + 1, pair->k + 1, (size_t)pair->kn - 1) == 0)) {
                return 0; /* a key twice */
            }
        }
        n++;
        if (p >= e) {
            return 0;
        }
        if (*p == '}') {
            ext->n = n;
            *after = p + 1;
            return 1;
        }
        if (*p++ != ',') {
            return 0;
        }
    }
}

/* a JSON integer in the int32 range at *pp: 1 and *out, 0 when not one */
static int rs_int(const unsigned char **pp, const unsigned char *e, long *out) {
    const unsigned char *p = *pp;
    int neg = 0, digits = 0;
    long long x = 0;
    if (p < e && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= e || *p < '0' || *p > '9') {
        return 0;
    }
    if (*p == '0') { /* JSON: no leading zero */
        p++;
    } else {
        while (p < e && *p >= '0' && *p <= '9') {
            if (++digits > 10) {
                return 0;
            }
            x = x * 10 + (*p++ - '0');
        }
    }
    if (p < e && (*p == '.' || *p == 'e' || *p == 'E')) {
        return 0;
    }
    if (neg) {
        x = -x;
    }
    if (x < INT32_MIN || x > INT32_MAX) {
        return 0;
    }
    *out = (long)x;
    *pp = p;
    return 1;
}

static int rs_lit(const unsigned char **pp, const unsigned char *e, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(e - *pp) < n || memcmp(*pp, lit, n) != 0) {
        return 0;
    }
    *pp += n;
    return 1;
}

/* whether the language name is in the codec's table: 1, 0, -1 on an error */
static int rs_language(const unsigned char *s, Py_ssize_t n) {
    PyObject *name, *found;
    if (n == RS_LANG_LEN && memcmp(s, RS_LANG_OK, (size_t)n) == 0) {
        return 1;
    }
    if (n == 0 || n > (Py_ssize_t)sizeof(RS_LANG_OK) || RS_LANGS == NULL) {
        return 0;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (s[k] >= 0x80) {
            return 0;
        }
    }
    name = PyUnicode_FromStringAndSize((const char *)s, n);
    if (name == NULL) {
        return -1;
    }
    found = PyDict_GetItemWithError(RS_LANGS, name);
    Py_DECREF(name);
    if (found == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    memcpy(RS_LANG_OK, s, (size_t)n);
    RS_LANG_LEN = n;
    return 1;
}

/* the header h[0:n]: 1 (code, opaque, extFields' span and *pairs set), 0 not the plain shape,
 * -1 error */
static int rs_scan(const unsigned char *h, Py_ssize_t n, long *code, long *opaque,
                   Py_ssize_t *ext_at, Py_ssize_t *ext_end, rs_ext *pairs) {
    const unsigned char *p = h, *e = h + n, *ext;
    rs_pair lang;
    long flag, version;
    if (!rs_lit(&p, e, "{\"code\":") || !rs_int(&p, e, code) || (*code != 10 && *code != 310) ||
        !rs_lit(&p, e, ",\"extFields\":{")) {
        return 0;
    }
    ext = p - 1;
    if (!rs_ext_scan(ext, e, pairs, &p)) {
        return 0;
    }
    *ext_at = ext - h;
    *ext_end = p - h;
    if (!rs_lit(&p, e, ",\"flag\":") || !rs_int(&p, e, &flag) || flag != 0 ||
        !rs_lit(&p, e, ",\"language\":") || !rs_string(&p, e, &lang, 0) || lang.esc ||
        lang.high || !rs_lit(&p, e, ",\"opaque\":") || !rs_int(&p, e, opaque) ||
        !rs_lit(&p, e, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":") ||
        !rs_int(&p, e, &version) || !rs_lit(&p, e, "}") || p != e) {
        return 0;
    }
    return rs_language(lang.v, lang.vn);
}

/* a pair's value as a str (new reference), NULL with no error when not decodable here */
static PyObject *rs_value(const rs_pair *pr) {
    unsigned char stack[1024], *buf = stack;
    const unsigned char *p = pr->v, *e = pr->v + pr->vn;
    Py_ssize_t n = 0;
    PyObject *s;
    int high = pr->high;
    if (!pr->esc && !high) {
        s = PyUnicode_New(pr->vn, 127);
        if (s != NULL) {
            memcpy(PyUnicode_1BYTE_DATA(s), pr->v, (size_t)pr->vn);
        }
        return s;
    }
    if (pr->vn > (Py_ssize_t)sizeof(stack)) { /* an escape never makes the text longer */
        buf = PyMem_Malloc((size_t)pr->vn);
        if (buf == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    while (p < e) {
        const unsigned char *bs = memchr(p, '\\', (size_t)(e - p));
        unsigned char ch;
        if (bs != p) { /* the text up to the next escape as it is */
            Py_ssize_t run = (bs == NULL ? e : bs) - p;
            memcpy(buf + n, p, (size_t)run);
            n += run;
            p += run;
            continue;
        }
        ch = p[1];
        if (ch == 'u') {
            unsigned cp = (unsigned)(rs_hex(p[2]) << 12 | rs_hex(p[3]) << 8 | rs_hex(p[4]) << 4 |
                                     rs_hex(p[5]));
            if (cp < 0x80) {
                buf[n++] = (unsigned char)cp;
            } else if (cp < 0x800) {
                buf[n++] = (unsigned char)(0xC0 | (cp >> 6));
                buf[n++] = (unsigned char)(0x80 | (cp & 0x3F));
                high = 1;
            } else {
                buf[n++] = (unsigned char)(0xE0 | (cp >> 12));
                buf[n++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                buf[n++] = (unsigned char)(0x80 | (cp & 0x3F));
                high = 1;
            }
            p += 6;
            continue;
        }
        buf[n++] = ch == 'b'   ? '\b'
                   : ch == 'f' ? '\f'
                   : ch == 'n' ? '\n'
                   : ch == 'r' ? '\r'
                   : ch == 't' ? '\t'
                               : ch; /* '"', '\\', '/' */
        p += 2;
    }
    if (high) {
        s = PyUnicode_DecodeUTF8((const char *)buf, n, NULL);
        if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear(); /* rs_scan validated it: not expected; the reference decides */
        }
    } else {
        s = PyUnicode_New(n, 127);
        if (s != NULL) {
            memcpy(PyUnicode_1BYTE_DATA(s), buf, (size_t)n);
        }
    }
    if (buf != stack) {
        PyMem_Free(buf);
    }
    return s;
}

static PyObject *send_header_scan(PyObject *module, PyObject *header) {
    const unsigned char *h;
    Py_ssize_t n, ext_at, ext_end;
    long code, opaque;
    rs_ext pairs;
    PyObject *ext, *out;
    int got;
    (void)module;
    if (!PyBytes_CheckExact(header)) {
        PyErr_SetString(PyExc_TypeError, "send_header_scan(header: bytes)");
        return NULL;
    }
    h = (const unsigned char *)PyBytes_AS_STRING(header);
    n = PyBytes_GET_SIZE(header);
    got = rs_scan(h, n, &code, &opaque, &ext_at, &ext_end, &pairs);
    if (got <= 0) {
        if (got < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    ext = PyDict_New();
    for (int k = 0; ext != NULL && k < pairs.n; k++) {
        PyObject *key = PyUnicode_FromStringAndSize((const char *)pairs.p[k].k, pairs.p[k].kn);
        PyObject *value = key == NULL ? NULL : rs_value(&pairs.p[k]);
        if (value == NULL || PyDict_SetItem(ext, key, value) < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_AssertionError, "send_header_scan: a value not decoded");
            }
            Py_CLEAR(ext);
        }
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    if (ext == NULL) {
        return NULL;
    }
    out = Py_BuildValue("(llnnN)", code, opaque, ext_at, ext_end, ext);
    return out;
}

/* decode_json_frames' raw case: a RawSend of the frame source[start:end] (the header word at
 * start), a new reference; Py_None (a new reference) when the frame is not a plain send;
 * NULL on an error */
static PyObject *rs_raw_frame(PyObject *source, Py_ssize_t start, Py_ssize_t end) {
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(source);
    uint32_t word = (uint32_t)be32(b + start);
    Py_ssize_t hs = start + 4, he = hs + (Py_ssize_t)(word & 0xFFFFFF), ext_at, ext_end;
    long code, opaque;
    rs_ext pairs;
    PyObject *vals[RS_SLOT_COUNT] = {NULL}, *obj;
    int got;
    if ((word >> 24) != 0 || he > end || RS_CLS == NULL || end > (Py_ssize_t)UINT32_MAX) {
        Py_RETURN_NONE;
    }
    got = rs_scan(b + hs, he - hs, &code, &opaque, &ext_at, &ext_end, &pairs);
    if (got <= 0) {
        return got < 0 ? NULL : Py_NewRef(Py_None);
    }
    vals[RS_SPANS] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(rs_span) * pairs.n);
    if (vals[RS_SPANS] != NULL) {
        rs_span *sp = (rs_span *)PyBytes_AS_STRING(vals[RS_SPANS]);
        for (int k = 0; k < pairs.n; k++) { /* offsets into the source */
            const rs_pair *pr = &pairs.p[k];
            sp[k].k = (uint32_t)(pr->k - b);
            sp[k].kn = (uint8_t)pr->kn;
            sp[k].v = (uint32_t)(pr->v - b);
            sp[k].vn = (uint32_t)pr->vn;
            sp[k].esc = (uint8_t)pr->esc;
            sp[k].high = (uint8_t)pr->high;
            sp[k].pad = 0;
        }
    }
    vals[RS_CODE] = PyLong_FromLong(code);
    vals[RS_FLAG] = PyLong_FromLong(0);
    vals[RS_OPAQUE] = PyLong_FromLong(opaque);
    vals[RS_BODY] = he < end ? PyBytes_FromStringAndSize((const char *)b + he, end - he)
                             : Py_NewRef(Py_None);
    vals[RS_SOURCE] = Py_NewRef(source);
    vals[RS_START] = PyLong_FromSsize_t(start);
    vals[RS_END] = PyLong_FromSsize_t(end);
    vals[RS_EXT_AT] = PyLong_FromSsize_t(hs + ext_at);
    vals[RS_EXT_END] = PyLong_FromSsize_t(hs + ext_end);
    obj = NULL;
    for (int k = 0; k < RS_SLOT_COUNT; k++) {
        if (vals[k] == NULL) {
            goto done;
        }
    }
    obj = ((PyTypeObject *)RS_CLS)->tp_alloc((PyTypeObject *)RS_CLS, 0);
    if (obj != NULL) {
        for (int k = 0; k < RS_SLOT_COUNT; k++) { /* T_OBJECT_EX slots: the value moves in */
            *(PyObject **)((char *)obj + RS_SLOTS[k]->offset) = vals[k];
            vals[k] = NULL;
        }
    }
done:
    for (int k = 0; k < RS_SLOT_COUNT; k++) {
        Py_XDECREF(vals[k]);
    }
    return obj;
}

/* a RawSend's extFields pairs from its `spans` (rs_raw_frame's one scan), pointing into
 * source b[0:size]: 1, or 0 when the slot is not such spans (each checked to lie inside the
 * extFields object [ext_at, ext_end) of the source; the caller then scans it again) */
static int rs_spans_read(PyObject *spans, const unsigned char *b, Py_ssize_t ext_at,
                         Py_ssize_t ext_end, rs_ext *ext) {
    const rs_span *sp;
    Py_ssize_t size;
    int n;
    if (spans == NULL || !PyBytes_CheckExact(spans)) {
        return 0;
    }
    size = PyBytes_GET_SIZE(spans);
    if (size % (Py_ssize_t)sizeof(rs_span) != 0 ||
        size > (Py_ssize_t)sizeof(rs_span) * RS_MAX_PAIRS) {
        return 0;
    }
    n = (int)(size / (Py_ssize_t)sizeof(rs_span));
    sp = (const rs_span *)PyBytes_AS_STRING(spans);
    for (int k = 0; k < n; k++) {
        rs_pair *pr = &ext->p[k];
        if (sp[k].kn == 0 || sp[k].kn > RS_MAX_KEY || (Py_ssize_t)sp[k].k < ext_at ||
            (Py_ssize_t)sp[k].k + sp[k].kn > ext_end || (Py_ssize_t)sp[k].v < ext_at ||
            (Py_ssize_t)sp[k].v + (Py_ssize_t)sp[k].vn > ext_end) {
            return 0;
        }
        pr->k = b + sp[k].k;
        pr->kn = sp[k].kn;
        pr->v = b + sp[k].v;
        pr->vn = sp[k].vn;
        pr->esc = sp[k].esc;
        pr->high = sp[k].high;
    }
    ext->n = n;
    return 1;
}

#define SENDSCAN_METHODS                                                                        \
    {"configure_raw_send", (PyCFunction)(void (*)(void))configure_raw_send, METH_FASTCALL,     \
     "configure_raw_send(cls, slots, languages): the RawSend class for decode_json_frames."},  \
        {"send_header_scan", (PyCFunction)send_header_scan, METH_O,                             \
         "send_header_scan(header): (code, opaque, ext_at, ext_end, ext) of a plain send's "     \
         "JSON header, else None."},
