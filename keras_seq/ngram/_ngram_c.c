/* The compiled kernel of bounded Kneser-Ney estimation: ARPA lines as bytes, the twin of
 * the numpy reference arpa_lines._numpy_lines, which stays in the package (tests compare
 * the two). A radix argsort was tried here too and dropped: numpy's own argsort of int64
 * keys (SIMD quicksort) was faster on the counting blocks.
 *
 * lines(words, offsets, lengths, cols, n, log10_prob, log10_backoff_or_None) -> bytes
 *
 *   words:    the vocabulary as one UTF-8 buffer (uint8), each word followed by a space
 *   offsets:  int64, where each word starts in `words`; lengths: int64, its byte length
 *   cols:     int64 (rows * n), the word ids of each row, row after row
 *   log10_prob, log10_backoff: float64 (rows), already clipped to [-99, inf) and finite
 *
 * Each line is "p<TAB>w1 ... wn[<TAB>backoff]<NEWLINE>" with every number as "%.7g" prints
 * it. Numbers are formatted by the method of arpa_lines.format_g7_bytes (7 significant
 * digits rounded in float64); the few whose 8th digit lies too near a rounding tie for
 * float64 to decide, and magnitudes outside [1e-15, 1e15), go to snprintf, which rounds
 * the exact binary value as Python's "%.7g" does. tests/test_arpa_lines.py compares this
 * module with the numpy code and with Python's formatting.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define G7_MAX 24 /* longest "%.7g" of a finite double is "-1.234567e-308": 14 bytes */

static const double POW10[23] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static double scaled(double a, int e) { /* a * 10**(6 - e), one rounding */
    int k = 6 - e;
    return k >= 0 ? a * POW10[k] : a / POW10[-k];
}

/* "%.7g" of v into out; returns its length. */
static int format_g7(double v, char *out) {
    double a = fabs(v);
    if (v == 0.0) {
        if (signbit(v)) { out[0] = '-'; out[1] = '0'; return 2; }
        out[0] = '0';
        return 1;
    }
    if (!isfinite(v) || a < 1e-15 || a >= 1e15) return snprintf(out, G7_MAX, "%.7g", v);
    int e = (int)floor(log10(a));
    double s = scaled(a, e);
    if (s >= 1e7) e += 1;
    else if (s < 1e6) e -= 1;
    s = scaled(a, e);
    double frac = s - floor(s);
    if (!(fabs(frac - 0.5) > 1e-7 && s >= 1e6 && s < 1e7))
        return snprintf(out, G7_MAX, "%.7g", v);
    uint32_t m = (uint32_t)floor(s + 0.5);
    if (m >= 10000000u) { m /= 10; e += 1; }
    char d[7];
    for (int i = 6; i >= 0; i--) { d[i] = (char)('0' + m % 10); m /= 10; }
    int kept = 7;
    while (kept > 1 && d[kept - 1] == '0') kept--;
    char *p = out;
    if (signbit(v)) *p++ = '-';
    if (e >= -4 && e < 7) { /* %f style with 6 - e decimals, trailing zeros stripped */
        if (e >= 0) {
            for (int i = 0; i <= e; i++) *p++ = i < kept ? d[i] : '0';
            if (kept > e + 1) {
                *p++ = '.';
                for (int i = e + 1; i < kept; i++) *p++ = d[i];
            }
        } else {
            *p++ = '0'; *p++ = '.';
            for (int i = 0; i < -e - 1; i++) *p++ = '0';
            for (int i = 0; i < kept; i++) *p++ = d[i];
        }
    } else { /* %e style, at least two exponent digits */
        *p++ = d[0];
        if (kept > 1) {
            *p++ = '.';
            for (int i = 1; i < kept; i++) *p++ = d[i];
        }
        *p++ = 'e';
        *p++ = e < 0 ? '-' : '+';
        int x = e < 0 ? -e : e;
        if (x >= 100) *p++ = (char)('0' + x / 100);
        *p++ = (char)('0' + (x / 10) % 10);
        *p++ = (char)('0' + x % 10);
    }
    return (int)(p - out);
}

static int need(Py_buffer *b, Py_ssize_t items, Py_ssize_t itemsize, const char *name) {
    if (b->len != items * itemsize) {
        PyErr_Format(PyExc_ValueError, "lines(): %s has %zd bytes, expected %zd (%zd items "
                     "of %zd bytes)", name, b->len, items * itemsize, items, itemsize);
        return 0;
    }
    return 1;
}

static PyObject *lines(PyObject *self, PyObject *args) {
    Py_buffer words, offsets, lengths, cols, prob, backoff = {0};
    Py_ssize_t n;
    PyObject *backoff_obj, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*y*ny*O", &words, &offsets, &lengths, &cols, &n,
                          &prob, &backoff_obj))
        return NULL;
    int has_backoff = backoff_obj != Py_None;
    if (has_backoff && PyObject_GetBuffer(backoff_obj, &backoff, PyBUF_SIMPLE) < 0) goto done;
    Py_ssize_t rows = prob.len / 8, vocab = offsets.len / 8;
    if (n < 1 || !need(&cols, rows * n, 8, "cols") || !need(&lengths, vocab, 8, "lengths")
        || (has_backoff && !need(&backoff, rows, 8, "log10_backoff"))) {
        if (n < 1 && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "lines(): n < 1");
        goto done;
    }
    const int64_t *col = cols.buf, *off = offsets.buf, *len = lengths.buf;
    const double *lp = prob.buf, *bo = has_backoff ? backoff.buf : NULL;
    const char *wb = words.buf;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < rows * n; i++) {
        if (col[i] < 0 || col[i] >= vocab) {
            PyErr_Format(PyExc_ValueError, "lines(): word id %lld is outside the %zd-word "
                         "vocabulary", (long long)col[i], vocab);
            goto done;
        }
        total += len[col[i]] + 1;
    }
    total += rows * (2 * G7_MAX + 3);
    result = PyBytes_FromStringAndSize(NULL, total);
    if (!result) goto done;
    char *p = PyBytes_AS_STRING(result);
    for (Py_ssize_t r = 0; r < rows; r++) {
        p += format_g7(lp[r], p);
        *p++ = '\t';
        const int64_t *c = col + r * n;
        for (Py_ssize_t j = 0; j < n; j++) {
            memcpy(p, wb + off[c[j]], (size_t)len[c[j]]);
            p += len[c[j]];
            *p++ = ' ';
        }
        p--; /* no space after the last word */
        if (bo) {
            *p++ = '\t';
            p += format_g7(bo[r], p);
        }
        *p++ = '\n';
    }
    if (_PyBytes_Resize(&result, p - PyBytes_AS_STRING(result)) < 0) result = NULL;
done:
    PyBuffer_Release(&words);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&cols);
    PyBuffer_Release(&prob);
    if (has_backoff && backoff.obj) PyBuffer_Release(&backoff);
    return result;
}

static PyObject *g7(PyObject *self, PyObject *arg) {
    char buf[G7_MAX];
    double v = PyFloat_AsDouble(arg);
    if (v == -1.0 && PyErr_Occurred()) return NULL;
    int k = format_g7(v, buf);
    return PyUnicode_FromStringAndSize(buf, k);
}

static PyMethodDef METHODS[] = {

    {"lines", lines, METH_VARARGS, "ARPA lines of a block of rows, as bytes (see the file)."},
    {"g7", g7, METH_O, "'%.7g' % v, by the compiled formatter."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_ngram_c",
                                    "Kneser-Ney kernels in C (keras_seq.ngram)", -1,
                                    METHODS};

PyMODINIT_FUNC PyInit__ngram_c(void) { return PyModule_Create(&MODULE); }
