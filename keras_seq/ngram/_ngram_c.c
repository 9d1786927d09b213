/* The compiled kernel of bounded Kneser-Ney estimation: ARPA lines as bytes, the twin of
 * the numpy reference arpa_lines._numpy_lines, which stays in the package (tests compare
 * the two). Its second kernel, merge, is counting's k-way merge of sorted runs, the twin of
 * external._merge_runs_numpy (described where it is defined below). A radix argsort was
 * tried here too and dropped: numpy's own sort of int64 keys (SIMD) was faster on the
 * counting blocks.
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
    Py_BEGIN_ALLOW_THREADS /* raw buffers only from here: threads may format other blocks */
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
    Py_END_ALLOW_THREADS
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

/* ------------------------------------------------------------------ k-way merge of runs
 *
 * merge(run_paths, run_starts, run_rows, keys_path, counts_path, aux_path,
 *       rank_paths_or_None, buffer_rows) -> unique rows
 *
 * The twin of external._merge_runs_numpy. Each run is a file of sorted (key, count, aux)
 * int64 rows with no key twice, of which rows run_starts[r] .. + run_rows[r] are merged.
 * The merged order goes to three int64 files: every key once, ascending; its counts summed
 * over the runs; the aux of its first run. With rank_paths, rank_paths[r] gets, for every
 * merged row of run r, the row of its key in the merged order. The GIL is released while
 * it runs, so threads can merge disjoint key ranges of the same runs at once. A binary heap picks the run with the smallest next key (ties: the lower run), so
 * each row costs O(log k) comparisons; files are read and written through buffers of
 * buffer_rows rows (runs) and OUT_ROWS values (outputs). */

#define OUT_ROWS 8192

typedef struct {
    FILE *f;
    int64_t buf[OUT_ROWS];
    int n;
} Out;

static int out_flush(Out *o) {
    if (o->n && fwrite(o->buf, 8, (size_t)o->n, o->f) != (size_t)o->n) return -1;
    o->n = 0;
    return 0;
}

static int out_put(Out *o, int64_t v) {
    o->buf[o->n++] = v;
    return o->n == OUT_ROWS ? out_flush(o) : 0;
}

typedef struct {
    FILE *f;
    int64_t *rows; /* buffer_rows * 3 */
    Py_ssize_t n, i, left;
} Run;

static int run_fill(Run *r, Py_ssize_t buffer_rows) {
    Py_ssize_t m = r->left < buffer_rows ? r->left : buffer_rows;
    if (m && fread(r->rows, 24, (size_t)m, r->f) != (size_t)m) return -1;
    r->n = m;
    r->i = 0;
    r->left -= m;
    return 0;
}

typedef struct { /* a heap entry: a run and its next key, kept here so that comparisons */
    int64_t key;   /* read the heap's own array, not the runs' buffers */
    int run;
} Head;

static inline int head_less(Head a, Head b) {
    return a.key < b.key || (a.key == b.key && a.run < b.run);
}

static void heap_down(Head *heap, int size, int at) {
    Head top = heap[at];
    for (;;) {
        int c = 2 * at + 1;
        if (c >= size) break;
        if (c + 1 < size && head_less(heap[c + 1], heap[c])) c++;
        if (!head_less(heap[c], top)) break;
        heap[at] = heap[c];
        at = c;
    }
    heap[at] = top;
}

static FILE *open_or_raise(PyObject *path, const char *mode) {
    FILE *f = fopen(PyBytes_AS_STRING(path), mode);
    if (!f) PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
    return f;
}

/* The merge proper, on open files: 0 on success, -1 on a failed read or write. */
static int merge_files(Run *runs, Out *rank, int k, Out *keys, Out *counts, Out *aux,
                       Py_ssize_t buffer_rows, int64_t *unique) {
    Head *heap = malloc(sizeof(Head) * (size_t)(k ? k : 1));
    int size = 0;
    if (!heap) return -2;
    for (int r = 0; r < k; r++) {
        if (run_fill(&runs[r], buffer_rows) < 0) { free(heap); return -1; }
        if (runs[r].n) heap[size++] = (Head){runs[r].rows[0], r};
    }
    for (int i = size / 2 - 1; i >= 0; i--) heap_down(heap, size, i);
    int64_t u = -1, key = 0, count = 0, first_aux = 0;
    int status = 0;
    while (size && !status) {
        int at = heap[0].run;
        Run *r = &runs[at];
        const int64_t *row = r->rows + 3 * r->i;
        if (u < 0 || row[0] != key) {
            if (u >= 0 && (out_put(keys, key) || out_put(counts, count)
                           || out_put(aux, first_aux))) status = -1;
            u++;
            key = row[0];
            count = 0;
            first_aux = row[2];
        }
        count += row[1];
        if (rank && out_put(&rank[at], u)) status = -1;
        if (++r->i == r->n) {
            if (run_fill(r, buffer_rows) < 0) { status = -1; break; }
            if (!r->n) {
                heap[0] = heap[--size];
                heap_down(heap, size, 0);
                continue;
            }
        }
        heap[0].key = r->rows[3 * r->i];
        heap_down(heap, size, 0);
    }
    if (!status && u >= 0 && (out_put(keys, key) || out_put(counts, count)
                              || out_put(aux, first_aux))) status = -1;
    free(heap);
    *unique = u + 1;
    return status;
}

static PyObject *merge(PyObject *self, PyObject *args) {
    PyObject *paths, *starts, *row_counts, *rank_paths, *names[3];
    Py_ssize_t buffer_rows;
    if (!PyArg_ParseTuple(args, "O!O!O!O&O&O&On", &PyList_Type, &paths, &PyList_Type, &starts,
                          &PyList_Type, &row_counts, PyUnicode_FSConverter, &names[0],
                          PyUnicode_FSConverter, &names[1], PyUnicode_FSConverter, &names[2],
                          &rank_paths, &buffer_rows))
        return NULL;
    int k = (int)PyList_GET_SIZE(paths), ok = 0;
    int64_t unique = 0;
    Run *runs = calloc((size_t)(k ? k : 1), sizeof(Run));
    Out *outs = calloc(3, sizeof(Out));
    Out *rank = rank_paths == Py_None ? NULL : calloc((size_t)(k ? k : 1), sizeof(Out));
    if (!runs || !outs || (rank_paths != Py_None && !rank)) { PyErr_NoMemory(); goto done; }
    if (buffer_rows < 1 || PyList_GET_SIZE(row_counts) != k || PyList_GET_SIZE(starts) != k
        || (rank && (!PyList_Check(rank_paths) || PyList_GET_SIZE(rank_paths) != k))) {
        PyErr_SetString(PyExc_ValueError, "merge(): expected one start, one row count (and "
                        "one rank path) per run and buffer_rows >= 1");
        goto done;
    }
    for (int i = 0; i < 3; i++)
        if (!(outs[i].f = open_or_raise(names[i], "wb"))) goto done;
    for (int r = 0; r < k; r++) {
        PyObject *p = NULL;
        runs[r].left = PyLong_AsSsize_t(PyList_GET_ITEM(row_counts, r));
        Py_ssize_t start = PyLong_AsSsize_t(PyList_GET_ITEM(starts, r));
        if (runs[r].left < 0 || start < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "merge(): rows < 0");
            goto done;
        }
        if (!PyUnicode_FSConverter(PyList_GET_ITEM(paths, r), &p)) goto done;
        runs[r].f = open_or_raise(p, "rb");
        if (runs[r].f && fseeko(runs[r].f, (off_t)start * 24, SEEK_SET)) {
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, p);
            fclose(runs[r].f);
            runs[r].f = NULL;
        }
        Py_DECREF(p);
        if (!runs[r].f) goto done;
        if (!(runs[r].rows = malloc(24 * (size_t)buffer_rows))) { PyErr_NoMemory(); goto done; }
        if (rank) {
            if (!PyUnicode_FSConverter(PyList_GET_ITEM(rank_paths, r), &p)) goto done;
            rank[r].f = open_or_raise(p, "wb");
            Py_DECREF(p);
            if (!rank[r].f) goto done;
        }
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = merge_files(runs, rank, k, &outs[0], &outs[1], &outs[2], buffer_rows, &unique);
    for (int i = 0; i < 3 && !status; i++) status = out_flush(&outs[i]);
    for (int r = 0; rank && r < k && !status; r++) status = out_flush(&rank[r]);
    Py_END_ALLOW_THREADS
    if (status == -2) PyErr_NoMemory();
    else if (status) PyErr_SetString(PyExc_OSError, "merge(): a run was shorter than its row "
                                     "count, or a write failed (disk full?)");
    else ok = 1;
done:
    for (int i = 0; i < 3; i++) {
        if (outs && outs[i].f && fclose(outs[i].f) && ok) {
            PyErr_SetFromErrno(PyExc_OSError);
            ok = 0;
        }
        Py_DECREF(names[i]);
    }
    for (int r = 0; r < k; r++) {
        if (runs && runs[r].f) fclose(runs[r].f);
        if (runs) free(runs[r].rows);
        if (rank && rank[r].f && fclose(rank[r].f) && ok) {
            PyErr_SetFromErrno(PyExc_OSError);
            ok = 0;
        }
    }
    free(runs);
    free(outs);
    free(rank);
    return ok ? PyLong_FromLongLong(unique) : NULL;
}

static PyMethodDef METHODS[] = {

    {"lines", lines, METH_VARARGS, "ARPA lines of a block of rows, as bytes (see the file)."},
    {"g7", g7, METH_O, "'%.7g' % v, by the compiled formatter."},
    {"merge", merge, METH_VARARGS, "k-way merge of sorted (key, count, aux) runs (see the "
     "file)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_ngram_c",
                                    "Kneser-Ney kernels in C (keras_seq.ngram)", -1,
                                    METHODS};

PyMODINIT_FUNC PyInit__ngram_c(void) { return PyModule_Create(&MODULE); }
