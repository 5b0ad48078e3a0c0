/* kaflite.spark._decode: the compiled half of kaflite.spark.batches (see its docstring for the rules), and
 * of the sink's encoder kaflite.spark.encode (`records`, `murmur2`: their rules head their section).
 *
 * columns(sections, meta, start, until, want_headers) walks the (decompressed) records sections of the
 * batches batches.decode_batches kept, one C step per record, and fills the source's column buffers:
 * offsets and timestamps (int64), timestampType (int32), the key and value columns as Arrow binary
 * buffers (int32 offsets, packed data, validity bitmap) and, with want_headers, the headers column's
 * buffers (list offsets and validity; struct children key string and value binary). pyarrow wraps the
 * returned bytes objects without copying them (pa.py_buffer + pa.Array.from_buffers).
 *
 * Rules (checkable against the pure decoder, tests/spark/test_batches_compiled.py):
 * - every record of every section is chained by its length; a length varint that runs past its section,
 *   a negative length, a record running past its section, or records not filling their section exactly
 *   raise Corrupt, as do varints longer than 10 bytes;
 * - a record's attributes, timestamp delta and offset delta must lie inside the record (the pure decoder
 *   lets them run on into the next record when the record is outside [start, until): both reject such a
 *   record inside the range);
 * - the records' offsets (base offset + delta) must increase strictly across the whole call;
 * - only records with start <= offset < until become rows; only for them are the key, value and headers
 *   read: a key or value length below -1, a negative header count, or fields not ending exactly at the
 *   record's end (with headers unread: not ending inside it) raise Corrupt; with want_headers, a header
 *   key of negative length, or headers not ending exactly at the record's end, raise Corrupt; a header
 *   value of negative length is null (as in the pure decoder);
 * - header keys are UTF-8 with invalid bytes replaced by U+FFFD (Python's errors="replace");
 * - Corrupt's message is one of the pure decoder's CORRUPT_MESSAGE texts; batches.py raises it as
 *   KafkaError(CORRUPT_MESSAGE).
 * The sizes that bound int32 offsets (records under 2 GiB) are checked by batches.py before the call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyObject *Corrupt;

#define E_FILL "a batch's records do not fill its records section"
#define E_NEG_LEN "negative record length"
#define E_FIELDS_PAST "record fields run past the end of the batch"
#define E_NEG_FIELD "negative record field length"
#define E_FIELDS_LEN "record fields do not match the record length"
#define E_NULL_HKEY "null header key"
#define E_HEADERS_LEN "record headers do not match the record length"
#define E_VARINT "varint is too long"
#define E_ORDER "record offsets do not increase"

/* 0: read; -1: runs past `end`; -2: longer than 10 bytes (Kafka's varints are at most 10) */
static inline int read_varint(const uint8_t **pp, const uint8_t *end, int64_t *out) {
    const uint8_t *p = *pp;
    uint64_t raw = 0;
    int shift = 0;
    for (;;) {
        if (p >= end) return -1;
        uint8_t b = *p++;
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) break;
        shift += 7;
        if (shift > 63) return -2;
    }
    *pp = p;
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
}

/* a growable byte buffer (header pieces, whose total size is not known beforehand) */
typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Grow;

static int grow_reserve(Grow *g, Py_ssize_t more) {
    if (g->len + more <= g->cap) return 0;
    Py_ssize_t cap = g->cap ? g->cap : 256;
    while (cap < g->len + more) cap *= 2;
    char *d = realloc(g->data, (size_t)cap);
    if (d == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    g->data = d;
    g->cap = cap;
    return 0;
}

static int grow_put(Grow *g, const void *src, Py_ssize_t n) {
    if (grow_reserve(g, n) < 0) return -1;
    if (n) memcpy(g->data + g->len, src, (size_t)n);
    g->len += n;
    return 0;
}

static int grow_i32(Grow *g, int32_t v) { return grow_put(g, &v, sizeof v); }

static int grow_bit(Grow *bits, Py_ssize_t index, int set) {
    if (index % 8 == 0) {
        uint8_t zero = 0;
        if (grow_put(bits, &zero, 1) < 0) return -1;
    }
    if (set) ((uint8_t *)bits->data)[index / 8] |= (uint8_t)(1u << (index % 8));
    return 0;
}

static PyObject *grow_bytes(Grow *g) { return PyBytes_FromStringAndSize(g->data ? g->data : "", g->len); }

typedef struct {
    Grow list_off, list_valid, key_off, key_data, val_off, val_data, val_valid;
    Py_ssize_t entries, list_nulls, val_nulls;
} Headers;

static void headers_free(Headers *h) {
    free(h->list_off.data);
    free(h->list_valid.data);
    free(h->key_off.data);
    free(h->key_data.data);
    free(h->val_off.data);
    free(h->val_data.data);
    free(h->val_valid.data);
}

/* the headers of one record, from `p` to the record's end `rend`: 0, or -1 with an exception set */
static int read_headers(Headers *h, Py_ssize_t row, const uint8_t *p, const uint8_t *rend, int64_t count) {
    if (count > 0) {
        for (int64_t i = 0; i < count; i++) {
            int64_t klen, vlen;
            int rc = read_varint(&p, rend, &klen);
            if (rc == -2) goto too_long;
            if (rc < 0) goto mismatch;
            if (klen < 0) {
                PyErr_SetString(Corrupt, E_NULL_HKEY);
                return -1;
            }
            if (klen > rend - p) goto mismatch;
            const uint8_t *key = p;
            p += klen;
            int ascii = 1;
            for (int64_t j = 0; j < klen; j++) {
                if (key[j] >= 0x80) {
                    ascii = 0;
                    break;
                }
            }
            if (ascii) {
                if (grow_put(&h->key_data, key, (Py_ssize_t)klen) < 0) return -1;
            } else {
                /* Python's own decoder, so that replacement matches bytes.decode(errors="replace") */
                PyObject *text = PyUnicode_DecodeUTF8((const char *)key, (Py_ssize_t)klen, "replace");
                if (text == NULL) return -1;
                Py_ssize_t size;
                const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size);
                int bad = utf8 == NULL || grow_put(&h->key_data, utf8, size) < 0;
                Py_DECREF(text);
                if (bad) return -1;
            }
            if (grow_i32(&h->key_off, (int32_t)h->key_data.len) < 0) return -1;
            rc = read_varint(&p, rend, &vlen);
            if (rc == -2) goto too_long;
            if (rc < 0) goto mismatch;
            if (vlen >= 0) {
                if (vlen > rend - p) goto mismatch;
                if (grow_put(&h->val_data, p, (Py_ssize_t)vlen) < 0) return -1;
                p += vlen;
            } else {
                h->val_nulls++;
            }
            if (grow_bit(&h->val_valid, h->entries, vlen >= 0) < 0) return -1;
            if (grow_i32(&h->val_off, (int32_t)h->val_data.len) < 0) return -1;
            h->entries++;
        }
        if (p != rend) goto mismatch;
    } else {
        h->list_nulls++; /* a record without headers has null headers, as in Spark */
    }
    if (grow_bit(&h->list_valid, row, count > 0) < 0) return -1;
    return grow_i32(&h->list_off, (int32_t)h->entries);
mismatch:
    PyErr_SetString(Corrupt, E_HEADERS_LEN);
    return -1;
too_long:
    PyErr_SetString(Corrupt, E_VARINT);
    return -1;
}

/* one binary column being filled: int32 offsets, packed data (preallocated to the records' size), bits */
typedef struct {
    PyObject *off, *data, *valid;
    int32_t *offp;
    char *datap;
    uint8_t *validp;
    Py_ssize_t used, nulls;
} Binary;

static int binary_new(Binary *b, Py_ssize_t rows, Py_ssize_t bytes) {
    b->off = PyBytes_FromStringAndSize(NULL, (rows + 1) * (Py_ssize_t)sizeof(int32_t));
    b->data = PyBytes_FromStringAndSize(NULL, bytes);
    b->valid = PyBytes_FromStringAndSize(NULL, (rows + 7) / 8);
    if (!b->off || !b->data || !b->valid) return -1;
    b->offp = (int32_t *)PyBytes_AS_STRING(b->off);
    b->datap = PyBytes_AS_STRING(b->data);
    b->validp = (uint8_t *)PyBytes_AS_STRING(b->valid);
    memset(b->validp, 0, (size_t)((rows + 7) / 8));
    b->offp[0] = 0;
    b->used = b->nulls = 0;
    return 0;
}

static void binary_free(Binary *b) {
    Py_XDECREF(b->off);
    Py_XDECREF(b->data);
    Py_XDECREF(b->valid);
}

static inline void binary_add(Binary *b, Py_ssize_t row, const uint8_t *src, int64_t len) {
    if (len >= 0) {
        memcpy(b->datap + b->used, src, (size_t)len);
        b->used += (Py_ssize_t)len;
        b->validp[row / 8] |= (uint8_t)(1u << (row % 8));
    } else {
        b->nulls++;
    }
    b->offp[row + 1] = (int32_t)b->used;
}

static int shrink(PyObject **bytes, Py_ssize_t size) { return _PyBytes_Resize(bytes, size); }

static PyObject *columns(PyObject *self, PyObject *args) {
    PyObject *sections, *meta;
    long long start, until;
    int want_headers;
    if (!PyArg_ParseTuple(args, "O!O!LLp", &PyList_Type, &sections, &PyList_Type, &meta, &start, &until,
                          &want_headers))
        return NULL;
    Py_ssize_t nsec = PyList_GET_SIZE(sections);
    if (PyList_GET_SIZE(meta) != nsec) {
        PyErr_SetString(PyExc_ValueError, "sections and meta differ in length");
        return NULL;
    }
    Py_buffer *views = PyMem_Calloc((size_t)(nsec ? nsec : 1), sizeof(Py_buffer));
    long long(*metas)[5] = PyMem_Calloc((size_t)(nsec ? nsec : 1), sizeof(*metas));
    Py_ssize_t got = 0, rows_max = 0, bytes_total = 0, n = 0;
    PyObject *offsets = NULL, *micros = NULL, *types = NULL, *result = NULL;
    Binary key = {0}, value = {0};
    Headers hd;
    memset(&hd, 0, sizeof hd);
    if (views == NULL || metas == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < nsec; got++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(sections, got), &views[got], PyBUF_SIMPLE) < 0) goto done;
        PyObject *m = PyList_GET_ITEM(meta, got);
        if (!PyArg_ParseTuple(m, "LLLLL", &metas[got][0], &metas[got][1], &metas[got][2], &metas[got][3],
                              &metas[got][4])) {
            got++;
            goto done;
        }
        /* every record takes at least its length byte: no more rows than bytes, whatever the count says */
        long long count = metas[got][1] < 0 ? 0 : metas[got][1];
        rows_max += count < views[got].len ? (Py_ssize_t)count : views[got].len;
        bytes_total += views[got].len;
    }
    offsets = PyBytes_FromStringAndSize(NULL, rows_max * 8);
    micros = PyBytes_FromStringAndSize(NULL, rows_max * 8);
    types = PyBytes_FromStringAndSize(NULL, rows_max * 4);
    if (!offsets || !micros || !types) goto done;
    if (binary_new(&key, rows_max, bytes_total) < 0 || binary_new(&value, rows_max, bytes_total) < 0) goto done;
    if (want_headers && (grow_i32(&hd.list_off, 0) < 0 || grow_i32(&hd.key_off, 0) < 0 ||
                         grow_i32(&hd.val_off, 0) < 0))
        goto done;
    int64_t *offp = (int64_t *)PyBytes_AS_STRING(offsets);
    int64_t *usp = (int64_t *)PyBytes_AS_STRING(micros);
    int32_t *typep = (int32_t *)PyBytes_AS_STRING(types);
    int any_headers = 0, first = 1;
    int64_t previous = 0;

    for (Py_ssize_t s = 0; s < nsec; s++) {
        const uint8_t *p = views[s].buf, *send = p + views[s].len;
        int64_t base = metas[s][0], count = metas[s][1], base_ts = metas[s][2], max_ts = metas[s][3];
        int log_append = metas[s][4] != 0;
        for (int64_t r = 0; r < count; r++) {
            int64_t len, ts_delta, off_delta;
            int rc = read_varint(&p, send, &len);
            if (rc == -2) goto too_long;
            if (rc < 0) {
                PyErr_SetString(Corrupt, E_FILL); /* fewer records than the batch's count */
                goto done;
            }
            if (len < 0) {
                PyErr_SetString(Corrupt, E_NEG_LEN);
                goto done;
            }
            if (len > send - p) {
                PyErr_SetString(Corrupt, E_FILL);
                goto done;
            }
            const uint8_t *rend = p + len, *q = p + 1; /* after the attributes byte */
            p = rend;
            if (q > rend) goto fields_past;
            rc = read_varint(&q, rend, &ts_delta);
            if (rc == 0) rc = read_varint(&q, rend, &off_delta);
            if (rc == -2) goto too_long;
            if (rc < 0) goto fields_past;
            int64_t offset = (int64_t)((uint64_t)base + (uint64_t)off_delta);
            if (!first && offset <= previous) {
                PyErr_SetString(Corrupt, E_ORDER);
                goto done;
            }
            first = 0;
            previous = offset;
            if (offset < start || offset >= until) continue;
            int64_t klen, vlen, hcount;
            rc = read_varint(&q, rend, &klen);
            if (rc == 0 && klen >= -1 && klen > rend - q) goto fields_len;
            const uint8_t *kat = q;
            if (rc == 0 && klen > 0) q += klen;
            if (rc == 0) rc = read_varint(&q, rend, &vlen);
            if (rc == 0 && vlen >= -1 && vlen > rend - q) goto fields_len;
            const uint8_t *vat = q;
            if (rc == 0 && vlen > 0) q += vlen;
            if (rc == 0) rc = read_varint(&q, rend, &hcount);
            if (rc == -2) goto too_long;
            if (rc < 0) goto fields_len;
            if (klen < -1 || vlen < -1 || hcount < 0) {
                PyErr_SetString(Corrupt, E_NEG_FIELD);
                goto done;
            }
            if (hcount == 0 && q != rend) goto fields_len;
            offp[n] = offset;
            int64_t millis = log_append ? max_ts : (int64_t)((uint64_t)base_ts + (uint64_t)ts_delta);
            usp[n] = (int64_t)((uint64_t)millis * 1000u); /* Spark's TimestampType is microseconds */
            typep[n] = log_append;
            binary_add(&key, n, kat, klen);
            binary_add(&value, n, vat, vlen);
            if (hcount) any_headers = 1;
            if (want_headers && read_headers(&hd, n, q, rend, hcount) < 0) goto done;
            n++;
        }
        if (p != send) {
            PyErr_SetString(Corrupt, E_FILL);
            goto done;
        }
    }
    if (n == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (shrink(&offsets, n * 8) < 0 || shrink(&micros, n * 8) < 0 || shrink(&types, n * 4) < 0 ||
        shrink(&key.off, (n + 1) * 4) < 0 || shrink(&key.data, key.used) < 0 ||
        shrink(&value.off, (n + 1) * 4) < 0 || shrink(&value.data, value.used) < 0)
        goto done;
    PyObject *headers = Py_None;
    if (want_headers && any_headers) {
        headers = Py_BuildValue("(NNnnNNNNNn)", grow_bytes(&hd.list_off), grow_bytes(&hd.list_valid),
                                hd.list_nulls, hd.entries, grow_bytes(&hd.key_off), grow_bytes(&hd.key_data),
                                grow_bytes(&hd.val_off), grow_bytes(&hd.val_data), grow_bytes(&hd.val_valid),
                                hd.val_nulls);
        if (headers == NULL) goto done;
    } else {
        Py_INCREF(headers);
    }
    result = Py_BuildValue("(nOOOOOOnOOOnN)", n, offsets, micros, types, key.off, key.data,
                           key.nulls ? key.valid : Py_None, key.nulls, value.off, value.data,
                           value.nulls ? value.valid : Py_None, value.nulls, headers);
    goto done;
too_long:
    PyErr_SetString(Corrupt, E_VARINT);
    goto done;
fields_past:
    PyErr_SetString(Corrupt, E_FIELDS_PAST);
    goto done;
fields_len:
    PyErr_SetString(Corrupt, E_FIELDS_LEN);
done:
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(metas);
    Py_XDECREF(offsets);
    Py_XDECREF(micros);
    Py_XDECREF(types);
    binary_free(&key);
    binary_free(&value);
    headers_free(&hd);
    return result;
}

/* ---- the sink's encoder: kaflite.spark.encode's compiled half ----------------------------------------
 *
 * records(order, group_end, key_start, key_len, key_data, value_start, value_len, value_data, ts,
 *         constant_ts, extra, max_batch_bytes) lays out the records sections of the rows of one
 * encode() call without headers of their own (at most the constant `extra` header entry on every record),
 * one C step per record, byte for byte what encode.py's pure path writes for the same call.
 * murmur2(offsets, data) is Kafka's murmur2 of every value, as encode.murmur2_array.
 *
 * Rules (checkable against the pure path, tests/spark/test_sink_encoder.py):
 * - `order` lists the rows in their output order; `group_end` cuts it into (topic, partition) groups
 *   (the end position of each, ascending, the last equal to n);
 * - a group is cut into batches as the pure path cuts it: each record counts with the pure path's upper
 *   bound of its size (its offset delta bounded by its rank in the group, its timestamp delta by 1 byte
 *   when every timestamp of the call is equal, else 10), a batch takes records while the sum of their
 *   bounds stays <= max_batch_bytes, and at least one;
 * - a record is: length, attributes 0, timestamp delta (from the batch's first record), offset delta
 *   (rank in its batch), key length (-1 null) and bytes, value length and bytes, header count (1 with
 *   `extra`, else 0) and `extra`; every number a zigzag varint;
 * - a key or value slice outside its data buffer raises ValueError before anything is written; when the
 *   records would take more than ENCODE_MAX_BYTES (the pure path's limit, Arrow's int32 offsets halved)
 *   the call returns None and encode.py splits the rows in halves, as the pure path does.
 */
#define ENCODE_MAX_BYTES ((int64_t)(0x7FFFFFFF / 2))

static inline uint64_t zigzag64(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static inline int64_t varint_width(int64_t v) {
    uint64_t u = zigzag64(v);
    int64_t w = 1;
    while (u >= 0x80) {
        u >>= 7;
        w++;
    }
    return w;
}

static inline uint8_t *put_varint(uint8_t *p, int64_t v) {
    uint64_t u = zigzag64(v);
    while (u >= 0x80) {
        *p++ = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    *p++ = (uint8_t)u;
    return p;
}

typedef struct {
    Py_buffer view;
    Py_ssize_t count; /* items of `itemsize` bytes */
} Arr;

static int arr_get(PyObject *o, Arr *a, Py_ssize_t itemsize, const char *name) {
    if (PyObject_GetBuffer(o, &a->view, PyBUF_SIMPLE) < 0) return -1;
    if (a->view.len % itemsize) {
        PyBuffer_Release(&a->view);
        a->view.obj = NULL;
        PyErr_Format(PyExc_ValueError, "%s: a buffer of %zd-byte items expected", name, itemsize);
        return -1;
    }
    a->count = a->view.len / itemsize;
    return 0;
}

static void arr_release(Arr *a) {
    if (a->view.obj != NULL) PyBuffer_Release(&a->view);
}

static inline int64_t fixed_part(int64_t kl, int64_t vl, int64_t extra_len) {
    /* attributes, key and value with their lengths, header count (0 or 1: one byte), extra entry */
    return 1 + varint_width(kl) + (kl > 0 ? kl : 0) + varint_width(vl) + (vl > 0 ? vl : 0) + 1 + extra_len;
}

static PyObject *records(PyObject *self, PyObject *args) {
    PyObject *o[9];
    int constant_ts;
    Py_buffer extra = {0};
    long long max_batch;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOpy*L", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &constant_ts, &extra, &max_batch))
        return NULL;
    enum { ORDER, GEND, KSTART, KLEN, KDATA, VSTART, VLEN, VDATA, TS };
    static const Py_ssize_t sizes[9] = {8, 8, 8, 8, 1, 8, 8, 1, 8};
    static const char *names[9] = {"order", "group_end", "key_start", "key_len", "key_data",
                                   "value_start", "value_len", "value_data", "ts"};
    Arr a[9];
    memset(a, 0, sizeof a);
    PyObject *result = NULL, *data = NULL, *starts = NULL, *ends = NULL, *base = NULL, *maxts = NULL;
    int64_t *bstart = NULL;
    Py_ssize_t nb = 0, cap = 0;
    for (int i = 0; i < 9; i++)
        if (arr_get(o[i], &a[i], sizes[i], names[i]) < 0) goto done;
    const int64_t *order = a[ORDER].view.buf, *gend = a[GEND].view.buf, *ks = a[KSTART].view.buf,
                  *kl = a[KLEN].view.buf, *vs = a[VSTART].view.buf, *vl = a[VLEN].view.buf,
                  *ts = a[TS].view.buf;
    const uint8_t *kd = a[KDATA].view.buf, *vd = a[VDATA].view.buf;
    Py_ssize_t n = a[ORDER].count, ngroups = a[GEND].count;
    int64_t extra_len = extra.len;
    if (a[KSTART].count != n || a[KLEN].count != n || a[VSTART].count != n || a[VLEN].count != n ||
        a[TS].count != n || (n && (ngroups == 0 || gend[ngroups - 1] != n))) {
        PyErr_SetString(PyExc_ValueError, "records: column lengths differ");
        goto done;
    }
    int64_t ts_bound = constant_ts ? 1 : 10, total = 0;
    /* pass 1: check the slices, cut the batches (the pure path's bounds), add up the exact sizes */
    Py_ssize_t k = 0;
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        Py_ssize_t ge = (Py_ssize_t)gend[g], gs = k;
        if (ge < k || ge > n) {
            PyErr_SetString(PyExc_ValueError, "records: group ends do not increase");
            goto done;
        }
        int64_t batch_sum = 0, in_batch = 0, batch_ts = 0;
        for (; k < ge; k++) {
            int64_t row = order[k];
            if (row < 0 || row >= n) {
                PyErr_SetString(PyExc_ValueError, "records: row index out of range");
                goto done;
            }
            int64_t klen = kl[row], vlen = vl[row];
            if ((klen > 0 && (ks[row] < 0 || ks[row] + klen > a[KDATA].count)) ||
                (vlen > 0 && (vs[row] < 0 || vs[row] + vlen > a[VDATA].count))) {
                PyErr_SetString(PyExc_ValueError, "records: a key or value outside its data");
                goto done;
            }
            int64_t fixed = fixed_part(klen, vlen, extra_len);
            int64_t body_bound = fixed + ts_bound + varint_width(k - gs);
            int64_t bound = body_bound + varint_width(body_bound);
            if (in_batch == 0 || batch_sum + bound > max_batch) {
                if (nb == cap) {
                    cap = cap ? cap * 2 : 64;
                    int64_t *grown = realloc(bstart, (size_t)cap * sizeof *bstart);
                    if (grown == NULL) {
                        PyErr_NoMemory();
                        goto done;
                    }
                    bstart = grown;
                }
                bstart[nb++] = k;
                batch_sum = in_batch = 0;
                batch_ts = ts[row];
            }
            batch_sum += bound;
            int64_t body = fixed + varint_width(ts[row] - batch_ts) + varint_width(in_batch);
            total += body + varint_width(body);
            in_batch++;
        }
    }
    if (total > ENCODE_MAX_BYTES) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    starts = PyBytes_FromStringAndSize(NULL, nb * 8);
    ends = PyBytes_FromStringAndSize(NULL, nb * 8);
    base = PyBytes_FromStringAndSize(NULL, nb * 8);
    maxts = PyBytes_FromStringAndSize(NULL, nb * 8);
    if (!data || !starts || !ends || !base || !maxts) goto done;
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(data), *p0 = p;
    int64_t *s_out = (int64_t *)PyBytes_AS_STRING(starts), *e_out = (int64_t *)PyBytes_AS_STRING(ends),
            *b_out = (int64_t *)PyBytes_AS_STRING(base), *m_out = (int64_t *)PyBytes_AS_STRING(maxts);
    /* pass 2: write every record (the batches are contiguous in `order`: batch b is [bstart[b], next)) */
    for (Py_ssize_t b = 0; b < nb; b++) {
        Py_ssize_t from = (Py_ssize_t)bstart[b], to = b + 1 < nb ? (Py_ssize_t)bstart[b + 1] : n;
        int64_t first_ts = ts[order[from]], top = first_ts;
        for (Py_ssize_t j = from; j < to; j++) {
            int64_t row = order[j], klen = kl[row], vlen = vl[row], t = ts[row];
            if (t > top) top = t;
            int64_t body =
                fixed_part(klen, vlen, extra_len) + varint_width(t - first_ts) + varint_width(j - from);
            p = put_varint(p, body);
            *p++ = 0; /* attributes */
            p = put_varint(p, t - first_ts);
            p = put_varint(p, j - from);
            p = put_varint(p, klen);
            if (klen > 0) {
                memcpy(p, kd + ks[row], (size_t)klen);
                p += klen;
            }
            p = put_varint(p, vlen);
            if (vlen > 0) {
                memcpy(p, vd + vs[row], (size_t)vlen);
                p += vlen;
            }
            *p++ = extra_len ? 2 : 0; /* header count 1 or 0, zigzagged */
            if (extra_len) {
                memcpy(p, extra.buf, (size_t)extra_len);
                p += extra_len;
            }
        }
        s_out[b] = from;
        e_out[b] = (int64_t)(p - p0);
        b_out[b] = first_ts;
        m_out[b] = top;
    }
    if (p - p0 != total) {
        PyErr_SetString(PyExc_AssertionError, "records: sizes do not add up");
        goto done;
    }
    result = Py_BuildValue("(OOOOO)", data, starts, ends, base, maxts);
done:
    for (int i = 0; i < 9; i++) arr_release(&a[i]);
    if (extra.obj != NULL) PyBuffer_Release(&extra);
    free(bstart);
    Py_XDECREF(data);
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    Py_XDECREF(base);
    Py_XDECREF(maxts);
    return result;
}

static PyObject *murmur2(PyObject *self, PyObject *args) {
    PyObject *oo, *od;
    if (!PyArg_ParseTuple(args, "OO", &oo, &od)) return NULL;
    Arr off = {0}, dat = {0};
    PyObject *out = NULL;
    if (arr_get(oo, &off, 8, "offsets") < 0) return NULL;
    if (arr_get(od, &dat, 1, "data") < 0) {
        arr_release(&off);
        return NULL;
    }
    Py_ssize_t n = off.count ? off.count - 1 : 0;
    const int64_t *o = off.view.buf;
    const uint8_t *d = dat.view.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (o[i] < 0 || o[i + 1] < o[i] || o[i + 1] > dat.count) {
            PyErr_SetString(PyExc_ValueError, "murmur2: offsets outside the data");
            goto done;
        }
    out = PyBytes_FromStringAndSize(NULL, n * 4);
    if (out == NULL) goto done;
    uint32_t *h_out = (uint32_t *)PyBytes_AS_STRING(out);
    const uint32_t m = 0x5bd1e995u;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *p = d + o[i];
        int64_t len = o[i + 1] - o[i];
        uint32_t h = 0x9747b28cu ^ (uint32_t)len;
        int64_t blocks = len / 4;
        for (int64_t j = 0; j < blocks; j++, p += 4) {
            uint32_t k =
                (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
            k *= m;
            k ^= k >> 24;
            k *= m;
            h *= m;
            h ^= k;
        }
        switch (len % 4) {
        case 3:
            h ^= (uint32_t)p[2] << 16; /* fall through */
        case 2:
            h ^= (uint32_t)p[1] << 8; /* fall through */
        case 1:
            h ^= p[0];
            h *= m;
        }
        h ^= h >> 13;
        h *= m;
        h ^= h >> 15;
        h_out[i] = h;
    }
done:
    arr_release(&off);
    arr_release(&dat);
    return out;
}

static PyMethodDef methods[] = {
    {"columns", columns, METH_VARARGS,
     "columns(sections, meta, start, until, want_headers) -> None or the column buffers (see batches.py)"},
    {"records", records, METH_VARARGS,
     "records(order, group_end, key_start, key_len, key_data, value_start, value_len, value_data, ts, "
     "constant_ts, extra, max_batch_bytes) -> None or (data, starts, ends, base_ts, max_ts) (see encode.py)"},
    {"murmur2", murmur2, METH_VARARGS, "murmur2(offsets, data) -> int32 hashes as bytes (see encode.py)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "kaflite.spark._decode",
                                    "Compiled record walks of kaflite.spark.batches and kaflite.spark.encode",
                                    -1, methods};

PyMODINIT_FUNC PyInit__decode(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Corrupt = PyErr_NewException("kaflite.spark._decode.Corrupt", PyExc_ValueError, NULL);
    if (Corrupt == NULL || PyModule_AddObjectRef(m, "Corrupt", Corrupt) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
