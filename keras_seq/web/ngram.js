// A keras-seq compact n-gram (the file keras_seq/ngram/compact.py writes, e.g. kn3.q8.bin)
// in JavaScript, streamed one word at a time beside the step model, and its next-word
// distribution on the model's ids: the numbers of Python's NgramOnModelVocab
// (keras_seq/runtime/mixture.py), in float64 where Python rounds to float32.
//
//   const ngram = readCompact(bytes, "mix/kn3.q8.bin");
//   const onModel = new NgramOnModelVocab(ngram, tokenizer);
//   onModel.step(tokenizer.eosId); onModel.step(id);
//   onModel.probs(0.15)    // Float64Array: p(next) × 0.15 over the model's ids
//
// The site checks the file's sha256 when it is fetched (site.json), so its crc32s are not
// read again here.

export class NgramError extends Error {}

const MAGIC = "KSNGRAM\0";
const VERSION = 1;
const FORMAT = "keras-seq-compact-ngram";
const PREFIX_BYTES = 32;  // magic, version, header length, header crc, body crc, body length
const ALIGN = 64;
const TYPES = {"<f8": Float64Array, "<f4": Float32Array, "|u1": Uint8Array,
               "<u2": Uint16Array, "<u4": Uint32Array};
const BOS = 1, EOS = 2;  // the n-gram's ids of <s> and </s> (<unk> is 0)

// The model in a compact file's bytes (a Uint8Array): {order, counts, vocab, strict,
// metadata, arrays}, each array a typed view of the bytes (little-endian, as every browser).
export function readCompact(bytes, name = "the n-gram") {
  if (bytes.byteOffset % 8) bytes = bytes.slice();  // typed views need aligned offsets
  const bad = (what) => new NgramError(`${name} is not a usable keras-seq compact n-gram: ` +
                                       `${what}; write it with write_compact`);
  const magic = String.fromCharCode(...bytes.subarray(0, 8));
  if (bytes.length < PREFIX_BYTES || magic !== MAGIC) throw bad("no KSNGRAM magic");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint32(8, true);
  if (version !== VERSION) throw bad(`format version ${version}, the page reads ${VERSION}`);
  const headBytes = view.getUint32(12, true);
  const size = PREFIX_BYTES + headBytes + Number(view.getBigUint64(24, true));
  if (bytes.length !== size) throw bad(`${bytes.length} bytes, its header says ${size}`);
  const header = JSON.parse(new TextDecoder().decode(
    bytes.subarray(PREFIX_BYTES, PREFIX_BYTES + headBytes)));
  if (header.format !== FORMAT) throw bad(`format ${header.format}`);
  const start = Math.ceil((PREFIX_BYTES + headBytes) / ALIGN) * ALIGN;
  const arrays = {};
  for (const [key, spec] of Object.entries(header.arrays)) {
    const Type = TYPES[spec.dtype];
    const length = spec.shape.reduce((a, b) => a * b, 1);
    const at = bytes.byteOffset + start + spec.offset;
    if (!Type || start + spec.offset + length * (Type ? Type.BYTES_PER_ELEMENT : 0) > size) {
      throw bad(`array ${key} (${spec.dtype}) lies outside the file`);
    }
    arrays[key] = new Type(bytes.buffer, at, length);
  }
  return {order: header.order, counts: header.counts, vocab: header.vocab,
          strict: Boolean(header.strict), metadata: header.metadata || {}, arrays};
}

// row → log10 value of one order and kind ("p" or "b"), through its codebook if quantized.
function values(arrays, kind, n) {
  const codes = arrays[`${kind}${n}`], book = arrays[`${kind}${n}_cb`];
  if (!codes) return () => 0;  // no backoffs at the highest order
  return book ? (row) => book[codes[row]] : (row) => codes[row];
}

// Python's NgramStream (trie index): the history starts at <s>; after </s> it starts again;
// stepping <s> just resets.
export class NgramStream {
  constructor(model) {
    const N = model.order, a = model.arrays;
    this.N = N;
    this.V = model.vocab.length;
    this.strict = model.strict;
    this.unigram = a.p1;  // log10 p per n-gram word id
    this.p = [null];      // p[n](row), b[n](row), words[n], offsets[n] per order n
    this.b = [null];
    this.words = [null, null];
    this.offsets = [null, null];
    for (let n = 1; n <= N; n++) {
      this.p.push(values(a, "p", n));
      this.b.push(n < N ? values(a, "b", n) : () => 0);
      if (n >= 2) {
        this.words.push(a[`w${n}`]);
        this.offsets.push(a[`o${n}`]);
      }
    }
    this.reset();
  }

  reset() {
    this.ctx = this.N > 1 ? [BOS, ...new Array(this.N - 2).fill(-1)] : [];
    this.pos = 1;  // sentence position of the next word (<s> is 0)
  }

  snapshot() { return {ctx: this.ctx.slice(), pos: this.pos}; }

  restore(snap) {
    this.ctx = snap.ctx.slice();
    this.pos = snap.pos;
  }

  // The row of the order-n n-gram (context row c, word w), or -1: a binary search among c's
  // children.
  find(n, c, w) {
    const words = this.words[n];
    let lo = this.offsets[n][c], hi = this.offsets[n][c + 1];
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (words[mid] < w) lo = mid + 1;
      else hi = mid;
    }
    return lo < this.offsets[n][c + 1] && words[lo] === w ? lo : -1;
  }

  // Append word id w to the history (its probability is not needed here).
  step(w) {
    if (!(w >= 0 && w < this.V)) {
      throw new NgramError(`n-gram word id ${w} is outside 0..${this.V - 1}`);
    }
    if (w === BOS || w === EOS) {
      this.reset();
      return;
    }
    const N = this.N, old = this.ctx;
    const avail = Math.min(N, this.pos + 1);
    const next = [w];
    for (let n = 2; n <= avail && n < N; n++) {
      const c = old[n - 2];
      next.push(c >= 0 ? this.find(n, c, w) : -1);
    }
    while (next.length < N - 1) next.push(-1);
    this.ctx = next.slice(0, N - 1);
    this.pos++;
  }

  // Python's sparse_distribution: every word's log10 p is its unigram's plus `offset` (the
  // history's backoffs), except the rows lo..hi of order n of each pair, whose words get
  // p[n](row) + add; later pairs overwrite earlier ones.
  sparse() {
    const avail = Math.min(this.N, this.pos + 1);
    let offset = 0;
    const pairs = [];
    for (let k = 1; k < avail; k++) {
      const c = this.ctx[k - 1];
      if (c < 0) continue;
      const b = this.b[k](c);
      offset += b;
      for (const pair of pairs) pair.add += b;
      const lo = this.offsets[k + 1][c], hi = this.offsets[k + 1][c + 1];
      if (hi > lo) pairs.push({n: k + 1, lo, hi, add: 0});
    }
    return {offset, pairs};
  }

  // Python's distribution: log10 p of every n-gram word (Float64Array, <s>: -Infinity); a
  // strict model gives -Infinity to the words the last context has not seen.
  distribution() {
    const avail = Math.min(this.N, this.pos + 1);
    const dist = Float64Array.from(this.unigram);
    let exact = null;
    for (let k = 1; k < avail; k++) {
      const c = this.ctx[k - 1];
      exact = null;
      if (c < 0) continue;
      const b = this.b[k](c);
      for (let i = 0; i < dist.length; i++) dist[i] += b;
      exact = {n: k + 1, lo: this.offsets[k + 1][c], hi: this.offsets[k + 1][c + 1]};
      for (let r = exact.lo; r < exact.hi; r++) dist[this.words[k + 1][r]] = this.p[k + 1](r);
    }
    if (this.strict && avail > 1) {
      const kept = new Float64Array(dist.length).fill(-Infinity);
      for (let r = exact ? exact.lo : 0; exact && r < exact.hi; r++) {
        const w = this.words[exact.n][r];
        kept[w] = dist[w];
      }
      dist.set(kept);
    }
    dist[BOS] = -Infinity;
    return dist;
  }
}

// The n-gram on a word model's ids (Python's NgramOnModelVocab): the model's <eos> is the
// n-gram's </s>, its <unk> the n-gram's <unk>; <pad>, the n-gram's <s> and words one side
// lacks get 0 (a model word the n-gram lacks is stepped as <unk>), and the rest is
// renormalised to sum to 1.
export class NgramOnModelVocab {
  constructor(model, tokenizer) {
    this.stream = new NgramStream(model);
    const index = new Map(model.vocab.map((w, i) => [w, i]));
    const specials = new Map([[tokenizer.eosId, "</s>"], [tokenizer.unkId, "<unk>"]]);
    const vocab = tokenizer.vocab, V = vocab.length;
    const toNgram = Int32Array.from(vocab, (t, i) => index.get(specials.get(i) ?? t) ?? -1);
    if (tokenizer.padId !== undefined) toNgram[tokenizer.padId] = -1;
    const known = toNgram.filter((t) => t >= 0).length;
    if (known < 0.5 * V) {
      throw new NgramError(`the n-gram knows ${known} of the model's ${V} tokens: it was ` +
                           "trained on another vocabulary; mix the n-gram the pipeline trained " +
                           "on the model's tokens");
    }
    this.V = V;
    this.stepId = toNgram.map((t) => (t >= 0 ? t : index.get("<unk>")));
    this.toModel = new Int32Array(model.vocab.length).fill(-1);  // n-gram id → model id
    toNgram.forEach((t, i) => { if (t >= 0) this.toModel[t] = i; });
    this.toModel[index.get("<s>")] = -1;  // never predicted
    this.unigram = new Float64Array(V);   // p(w), in the model's order
    toNgram.forEach((t, i) => { if (t >= 0) this.unigram[i] = 10 ** this.stream.unigram[t]; });
    this.buffer = new Float64Array(V);
  }

  reset() { this.stream.reset(); }
  snapshot() { return this.stream.snapshot(); }
  restore(snap) { this.stream.restore(snap); }
  step(token) { this.stream.step(this.stepId[token]); }

  // p(next) over the model's ids times `scale`, written into `out` (Float64Array of V).
  probs(scale = 1, out = this.buffer) {
    const {toModel, stream} = this;
    if (stream.strict) {  // unseen words are impossible: no shared unigram layout
      out.fill(0);
      const dist = stream.distribution();
      for (let j = 0; j < dist.length; j++) if (toModel[j] >= 0) out[toModel[j]] = 10 ** dist[j];
    } else {
      const {offset, pairs} = stream.sparse();
      const f = 10 ** offset;
      for (let i = 0; i < out.length; i++) out[i] = this.unigram[i] * f;
      for (const {n, lo, hi, add} of pairs) {
        const words = stream.words[n], p = stream.p[n];
        for (let r = lo; r < hi; r++) {
          const at = toModel[words[r]];
          if (at >= 0) out[at] = Math.exp((p(r) + add) * Math.LN10);
        }
      }
    }
    let sum = 0;
    for (let i = 0; i < out.length; i++) sum += out[i];
    const norm = scale / sum;
    for (let i = 0; i < out.length; i++) out[i] *= norm;
    return out;
  }
}
