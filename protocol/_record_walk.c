/*
 * The record walk of protocol/record_walk.py in C: the same algorithm, step for step,
 * because it runs for every record of every produced batch and Python spends about
 * about 1 us per record on it, which halved produce throughput in the bench.
 *
 * walk(data, position, end, record_count, find_keyless) reads the records of one batch
 * in data[position:end] and returns
 *     (0, min_timestamp_delta, max_timestamp_delta, keyless_indexes_or_None)
 * or, for a malformed batch,
 *     (kind, record_index, a, b)
 * where kind is one of the Malformed codes of record_walk.py, which turns it into
 * INVALID_RECORD with Kafka's wording. The input is untrusted: every byte read is
 * checked against its bound first, and skips are compared, never dereferenced.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Keep in step with class Malformed in record_walk.py. */
enum {
    OK = 0,
    PREMATURE_EOF = 1,
    RECORD_SIZE = 2,
    OFFSET_DELTA = 3,
    OVERRUN = 4,
    HEADER_COUNT_NEGATIVE = 5,
    HEADER_COUNT_LARGE = 6,
    HEADER_KEY_NEGATIVE = 7,
    TRAILING = 8,
    STRUCTURE = 9,
};

/*
 * A zig-zag varint of at most max_bytes bytes (5: a Java int, 10: a Java long) read from
 * p[*pos] below limit, wrapped to 32 or 64 bits as Java's ByteUtils does. Returns OK, or
 * STRUCTURE when the limit comes first or the varint is too long.
 */
static inline int read_varint(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t limit,
                              int max_bytes, int64_t *out)
{
    uint64_t raw = 0;
    int shift = 0;
    Py_ssize_t i = *pos;
    for (int n = 0; n < max_bytes; n++) {
        if (i >= limit)
            return STRUCTURE;
        uint8_t b = p[i++];
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            if (max_bytes == 5) {
                uint32_t r = (uint32_t)raw;
                *out = (int32_t)((r >> 1) ^ (0u - (r & 1u)));
            } else {
                *out = (int64_t)((raw >> 1) ^ (0u - (raw & 1u)));
            }
            *pos = i;
            return OK;
        }
        shift += 7;
    }
    return STRUCTURE;
}

static PyObject *
walk(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t position, end, record_count;
    int find_keyless;
    if (!PyArg_ParseTuple(args, "y*nnnp", &view, &position, &end, &record_count,
                          &find_keyless))
        return NULL;
    if (position < 0 || end < position || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "position and end must lie within the buffer");
        return NULL;
    }
    const uint8_t *p = (const uint8_t *)view.buf;
    PyObject *keyless = NULL;
    if (find_keyless) {
        keyless = PyList_New(0);
        if (keyless == NULL) {
            PyBuffer_Release(&view);
            return NULL;
        }
    }
    int64_t low = INT64_MAX, high = INT64_MIN;
    int kind = OK;
    Py_ssize_t index = 0;
    int64_t a = 0, b = 0;
    Py_ssize_t pos = position;

    for (index = 0; index < record_count; index++) {
        if (pos >= end) {
            kind = PREMATURE_EOF;
            break;
        }
        int64_t length;
        if ((kind = read_varint(p, &pos, end, 5, &length)) != OK)
            break;
        if (length <= 0 || length > end - pos) {
            kind = RECORD_SIZE;
            a = length;
            b = end - pos;
            break;
        }
        Py_ssize_t start = pos;
        Py_ssize_t record_end = pos + (Py_ssize_t)length;
        pos += 1; /* attributes: one byte, no bits in use */

        int64_t delta;
        if ((kind = read_varint(p, &pos, record_end, 10, &delta)) != OK)
            break;
        if (delta < low)
            low = delta;
        if (delta > high)
            high = delta;

        int64_t offset_delta;
        if ((kind = read_varint(p, &pos, record_end, 5, &offset_delta)) != OK)
            break;
        if (offset_delta != index) {
            kind = OFFSET_DELTA;
            a = offset_delta;
            break;
        }

        int64_t key_length;
        if ((kind = read_varint(p, &pos, record_end, 5, &key_length)) != OK)
            break;
        /* Any negative length is null, as Kafka reads it. */
        if (key_length > 0) {
            pos += (Py_ssize_t)key_length;
            if (pos > record_end) {
                kind = OVERRUN;
                a = length;
                b = pos - start;
                break;
            }
        } else if (key_length < 0 && keyless != NULL) {
            PyObject *item = PyLong_FromSsize_t(index);
            if (item == NULL || PyList_Append(keyless, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(keyless);
                PyBuffer_Release(&view);
                return NULL;
            }
            Py_DECREF(item);
        }

        int64_t value_length;
        if ((kind = read_varint(p, &pos, record_end, 5, &value_length)) != OK)
            break;
        if (value_length > 0) {
            pos += (Py_ssize_t)value_length;
            if (pos > record_end) {
                kind = OVERRUN;
                a = length;
                b = pos - start;
                break;
            }
        }

        int64_t header_count;
        if ((kind = read_varint(p, &pos, record_end, 5, &header_count)) != OK)
            break;
        if (header_count < 0) {
            kind = HEADER_COUNT_NEGATIVE;
            a = header_count;
            break;
        }
        if (header_count > record_end - pos) {
            kind = HEADER_COUNT_LARGE;
            a = header_count;
            break;
        }
        for (int64_t h = 0; h < header_count && kind == OK; h++) {
            int64_t header_key_length, header_value_length;
            if ((kind = read_varint(p, &pos, record_end, 5, &header_key_length)) != OK)
                break;
            if (header_key_length < 0) {
                kind = HEADER_KEY_NEGATIVE;
                a = header_key_length;
                break;
            }
            pos += (Py_ssize_t)header_key_length;
            if (pos > record_end) {
                kind = OVERRUN;
                a = length;
                b = pos - start;
                break;
            }
            if ((kind = read_varint(p, &pos, record_end, 5, &header_value_length)) != OK)
                break;
            if (header_value_length > 0) {
                pos += (Py_ssize_t)header_value_length;
                if (pos > record_end) {
                    kind = OVERRUN;
                    a = length;
                    b = pos - start;
                    break;
                }
            }
        }
        if (kind != OK)
            break;
        if (pos != record_end) {
            kind = OVERRUN;
            a = length;
            b = pos - start;
            break;
        }
    }
    if (kind == OK && pos != end)
        kind = TRAILING;
    PyBuffer_Release(&view);

    if (kind != OK) {
        Py_XDECREF(keyless);
        return Py_BuildValue("(inLL)", kind, index, (long long)a, (long long)b);
    }
    if (keyless == NULL) {
        keyless = Py_None;
        Py_INCREF(keyless);
    }
    return Py_BuildValue("(iLLN)", OK, (long long)low, (long long)high, keyless);
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Walk the records of one batch; see record_walk.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_record_walk", "The record walk of record_walk.py, in C.", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__record_walk(void)
{
    return PyModule_Create(&module);
}
