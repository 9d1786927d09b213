// A keras-seq step model on LiteRT.js: one token in, next-token logits out, the recurrent
// state carried in JavaScript between calls (the exported "step" graph, explicit state).
//
//   const lm = await StepLM.load(entry, tokenizer, {accelerator: "wasm", threads: 1});
//   lm.reset(); lm.step(tokenizer.startId());
//   await lm.feed(tokenizer.encode("my lord"));
//   lm.suggest(3)          // [{token: "and", id: 7, prob: 0.12}, ...]
//
// `lm.logits` and the state arrays are the model's own buffers, written in place by every
// step (a new 26 KB Float32Array costs ~20 µs in Chromium, an in-place copy ~0.2 µs): copy
// them to keep them, or take a `snapshot()` (and `release()` it when done).
//
// `entry` is one model of site.json: {file, sha256, meta} with meta the exporter's metadata
// (state names and shapes, vocabulary size, signature).

import {Tensor, getGlobalLiteRt, loadAndCompile} from "./litert/core/index.js";

export class ModelError extends Error {}

async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

// Fetch a model file and check it is the one the metadata describes (size, then sha256).
export async function fetchModel(entry) {
  let response;
  try {
    response = await fetch(entry.file);
  } catch (err) {
    throw new ModelError(`cannot fetch ${entry.file}: ${err.message}`);
  }
  if (!response.ok) {
    throw new ModelError(`model file ${entry.file} is missing (HTTP ${response.status}); ` +
                         "export the site again with `keras-seq export web`");
  }
  const bytes = new Uint8Array(await response.arrayBuffer());
  const actual = await sha256Hex(bytes);
  if (actual !== entry.sha256) {
    throw new ModelError(`model file ${entry.file} is damaged: ${bytes.length} bytes hashing to ` +
                         `${actual.slice(0, 12)}…, the site expects ${entry.size} bytes hashing ` +
                         `to ${entry.sha256.slice(0, 12)}…; export the site again`);
  }
  return bytes;
}

function sameBits(a, b) {
  if (!a || !b || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

function softmax(logits) {
  let max = -Infinity;
  for (const v of logits) if (v > max) max = v;
  const probs = new Float64Array(logits.length);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) { probs[i] = Math.exp(logits[i] - max); sum += probs[i]; }
  for (let i = 0; i < probs.length; i++) probs[i] /= sum;
  return probs;
}

// 2^-n for n = 0..1099 (2^-1075 and below are 0 in float64).
const POW2_NEG = Float64Array.from({length: 1100}, (_, n) => 2 ** -n);

// log Σ exp(v): the softmax's normaliser, in one pass over the logits. exp(v - max) is
// 2^-y with y = (max - v)·log2(e) ≥ 0, split into an integer n (a table) and a fraction
// f ∈ [-0.5, 0.5] whose 2^f is a degree-7 Taylor polynomial of exp(f·ln 2): relative error
// < 1e-8 per term (float32 logits carry 6e-8); 39 µs for 6,476 logits in Chromium against
// 52 µs with Math.exp (docs/browser.md).
export function logSumExp(values) {
  let max = -Infinity;
  for (let i = 0; i < values.length; i++) if (values[i] > max) max = values[i];
  let sum = 0;
  for (let i = 0; i < values.length; i++) {
    const y = (max - values[i]) * Math.LOG2E;
    if (!(y < 1099.5)) continue;  // the term is 0 in float64
    const n = (y + 0.5) | 0;
    const f = n - y;
    sum += POW2_NEG[n] * (1 + f * (0.6931471805599453 + f * (0.2402265069591007 +
      f * (0.05550410866482158 + f * (0.009618129107628477 + f * (0.0013333558146428443 +
      f * (0.00015403530393381608 + f * 1.525273380405984e-05)))))));
  }
  return max + Math.log(sum);
}

// A small seeded generator (mulberry32): the page's samples repeat for the same seed.
export function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The ids of the k largest values, largest first (ties: the lower id first), among `ids`
// (increasing; default: every id).
export function topIds(values, k, ids = null) {
  const n = ids ? ids.length : values.length;
  const best = [];
  for (let j = 0; j < n; j++) {
    const id = ids ? ids[j] : j, v = values[id];
    if (best.length === k && v <= values[best[k - 1]]) continue;
    let at = best.length;
    while (at > 0 && values[best[at - 1]] < v) at--;
    best.splice(at, 0, id);
    if (best.length > k) best.pop();
  }
  return best;
}

// The samplers of keras_seq/sampling.py: probabilities after temperature, then greedy,
// top-k or top-p (nucleus); banned ids (<pad>, <unk>) never come out.
export function sampleToken(logits, {sampler = "top-k", k = 10, p = 0.9, temperature = 1.0,
                                     banned = [], random = Math.random} = {}) {
  const z = Float64Array.from(logits, (v) => v / (sampler === "greedy" ? 1 : temperature));
  for (const id of banned) z[id] = -Infinity;
  if (sampler === "greedy") {
    let best = 0;
    for (let i = 1; i < z.length; i++) if (z[i] > z[best]) best = i;
    return best;
  }
  const probs = softmax(z);
  let keep;
  if (sampler === "top-k") {
    keep = topIds(probs, k);
  } else {
    keep = Array.from(probs.keys()).sort((a, b) => probs[b] - probs[a] || a - b);
  }
  if (sampler === "top-p") {
    const order = keep;
    let total = 0, n = 0;
    while (n < order.length && total < p - 1e-9) total += probs[order[n++]];
    keep = order.slice(0, Math.max(n, 1));
  }
  let mass = 0;
  for (const id of keep) mass += probs[id];
  let r = random() * mass;
  for (const id of keep) { r -= probs[id]; if (r <= 0) return id; }
  return keep[keep.length - 1];
}

// Float32Array slots of one length carved from large chunks, reused once given back: a
// snapshot per typed word then costs a view (~0.05 µs), not an allocation.
class SlotPool {
  constructor(length, perChunk = 64) {
    this.length = length;
    this.perChunk = perChunk;
    this.free = [];
    this.chunk = null;
    this.used = perChunk;
  }

  take() {
    if (this.free.length) return this.free.pop();
    if (this.used === this.perChunk) {
      this.chunk = new Float32Array(this.length * this.perChunk);
      this.used = 0;
    }
    const start = this.length * this.used++;
    return this.chunk.subarray(start, start + this.length);
  }

  give(slot) {
    this.free.push(slot);
  }
}

export class StepLM {
  constructor(compiled, entry, tokenizer, options) {
    this.compiled = compiled;
    this.entry = entry;
    this.meta = entry.meta;
    this.tokenizer = tokenizer;
    this.options = options;
    this.runner = compiled.signatures[this.meta.signature];
    if (!this.runner) {
      throw new ModelError(`${entry.file} has no signature '${this.meta.signature}'`);
    }
    this.stateNames = this.meta.state_names || [];
    this.stateShapes = this.meta.state_shapes || {};
    this.vocabSize = this.meta.vocab_size;
    this.banned = [tokenizer.padId, tokenizer.unkId].filter((id) => id !== undefined);
    this.prefixIds = new Map();  // typed prefix → the ids a suggestion may be, in id order
    this.states = {};
    this.pools = {logits: new SlotPool(this.vocabSize)};
    for (const name of this.stateNames) {
      const length = this.stateShapes[name].reduce((a, b) => a * b, 1);
      this.states[name] = new Float32Array(length);
      this.pools[name] = new SlotPool(length);
    }
    this.logitsBuffer = new Float32Array(this.vocabSize);
    this.reset();
  }

  static async load(entry, tokenizer, {accelerator = "wasm", threads = 1} = {}) {
    if (entry.meta.tokenizer_fingerprint !== tokenizer.fingerprint) {
      throw new ModelError(`${entry.file} was exported with tokenizer ` +
                           `${entry.meta.tokenizer_fingerprint}, the site has ${tokenizer.fingerprint}`);
    }
    const bytes = await fetchModel(entry);
    let compiled;
    try {
      compiled = await loadAndCompile(bytes, {accelerator, cpuOptions: {numThreads: threads}});
    } catch (err) {
      throw new ModelError(`LiteRT.js cannot load ${entry.file} (${entry.meta.variant}) on ` +
                           `${accelerator}: ${err.message || err}`);
    }
    if (entry.meta.graph !== "step") {
      compiled.delete();
      throw new ModelError(`LiteRT.js loaded ${entry.file}, a '${entry.meta.graph}' model, but ` +
                           "the page streams 'step' models (the state carried in JavaScript)");
    }
    const lm = new StepLM(compiled, entry, tokenizer, {accelerator, threads});
    lm.fastPath = await lm.enableFastPath();
    return lm;
  }

  reset() {
    for (const name of this.stateNames) this.states[name].fill(0);
    this.logits = null;
    this.logZ = null;  // log Σ exp(logits), computed once per step when a strip needs it
    this.history = [];
  }

  // A copy of the state, to come back to (the page keeps one per fed token for Backspace);
  // `release` gives its buffers back for the next snapshot.
  snapshot() {
    const states = {};
    for (const name of this.stateNames) {
      states[name] = this.pools[name].take();
      states[name].set(this.states[name]);
    }
    let logits = null;
    if (this.logits) {
      logits = this.pools.logits.take();
      logits.set(this.logits);
    }
    return {states, logits, history: this.history.slice()};
  }

  restore(snap) {
    for (const name of this.stateNames) this.states[name].set(snap.states[name]);
    this.logits = snap.logits && this.logitsBuffer;
    if (snap.logits) this.logitsBuffer.set(snap.logits);
    this.logZ = null;
    this.history = snap.history.slice();
  }

  release(snap) {
    for (const name of this.stateNames) this.pools[name].give(snap.states[name]);
    if (snap.logits) this.pools.logits.give(snap.logits);
  }

  // Feed one token id; returns the next-token logits (Float32Array of the vocabulary size).
  async step(tokenId) {
    if (!(tokenId >= 0 && tokenId < this.vocabSize)) {
      throw new ModelError(`token id ${tokenId} is outside the vocabulary (${this.vocabSize})`);
    }
    if (this.fast) await this.fastStep(tokenId);
    else await this.checkedStep(tokenId);
    this.logZ = null;
    const logits = this.logits;
    for (let i = 0; i < logits.length; i++) {  // indexed: `for…of` costs ~10× more here
      if (!Number.isFinite(logits[i])) {
        throw new ModelError(`${this.entry.file} produced a non-finite logit: its weights are ` +
                             "damaged or overflow");
      }
    }
    this.history.push(tokenId);
    return this.logits;
  }

  // One step through LiteRT.js's public API: new input Tensors, checked, run, read, freed.
  async checkedStep(tokenId) {
    const inputs = {token: new Tensor(Int32Array.of(tokenId), [1])};
    for (const name of this.stateNames) {
      inputs[name] = new Tensor(this.states[name], this.stateShapes[name]);
    }
    let outputs;
    try {
      outputs = await this.runner.run(inputs);
    } finally {
      for (const t of Object.values(inputs)) t.delete();
    }
    try {
      for (const name of this.stateNames) this.states[name].set(await this.read(outputs[name]));
      this.logitsBuffer.set(await this.read(outputs.logits));
      this.logits = this.logitsBuffer;
    } finally {
      for (const t of Object.values(outputs)) t.delete();
    }
  }

  // The Wasm fast path: the input buffers are made (and checked by LiteRT.js) once, each step
  // writes the token and state into them in place and calls the compiled model directly. It
  // skips the per-call allocation and checks of run() (most of the time of a small model).
  // `enableFastPath` turns it on only after one step gave the same bits both ways.
  async enableFastPath() {
    const runner = this.runner;
    const compiled = runner.liteRtCompiledModel;
    if (this.options.accelerator !== "wasm" || !compiled || runner.signatureIndex === undefined) {
      return false;
    }
    const inputs = runner.getInputDetails().map((d) => d.name);
    const tensors = inputs.map((name) => (name === "token"
      ? new Tensor(new Int32Array(1), [1])
      : new Tensor(new Float32Array(this.states[name].length), this.stateShapes[name])));
    const outputs = runner.getOutputDetails().map((d) => d.name);
    // Where each output goes: the bytes of our own buffers (null: an output we do not read).
    const targets = outputs.map((name) => {
      const buffer = name === "logits" ? this.logitsBuffer : this.states[name];
      return buffer ? new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength) : null;
    });
    this.fast = {compiled, index: runner.signatureIndex, inputs, outputs, tensors, targets,
                 buffers: tensors.map((t) => t.liteRtTensorBuffer), token: new Int32Array(1),
                 wasm: getGlobalLiteRt().liteRtWasm};
    const checked = this.snapshot();
    const start = this.tokenizer.startId();
    await this.checkedStep(start);
    const reference = this.snapshot();
    this.restore(checked);
    try {
      await runner.run(tensors);  // LiteRT.js checks these buffers against the signature
      await this.fastStep(start);
    } catch (err) {
      this.disableFastPath();
      this.restore(checked);
      return false;
    }
    const same = sameBits(this.logits, reference.logits) &&
      this.stateNames.every((n) => sameBits(this.states[n], reference.states[n]));
    this.restore(checked);
    this.release(checked);
    this.release(reference);
    if (!same) this.disableFastPath();
    return same;
  }

  disableFastPath() {
    if (!this.fast) return;
    for (const t of this.fast.tensors) t.delete();
    this.fast = null;
  }

  async fastStep(tokenId) {
    const {compiled, index, inputs, targets, buffers, token, wasm} = this.fast;
    token[0] = tokenId;
    for (let i = 0; i < inputs.length; i++) {
      const data = inputs[i] === "token" ? token : this.states[inputs[i]];
      const ptr = buffers[i].lock(wasm.LiteRtTensorBufferLockMode.WRITE);
      wasm.HEAPU8.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), ptr);
      buffers[i].unlock();
    }
    const results = await compiled.run(index, buffers);
    try {
      for (let i = 0; i < targets.length; i++) {
        const target = targets[i];
        if (!target) continue;
        const ptr = results[i].lock(wasm.LiteRtTensorBufferLockMode.READ);
        target.set(wasm.HEAPU8.subarray(ptr, ptr + target.byteLength));
        results[i].unlock();
      }
    } finally {
      for (const r of results) r.delete();
    }
    this.logits = this.logitsBuffer;
  }

  async read(tensor) {
    if (tensor.accelerator === "wasm") return tensor.toTypedArray();
    const local = await tensor.copyTo("wasm");
    try { return local.toTypedArray().slice(); } finally { local.delete(); }
  }

  // Feed ids one by one (starting the stream first); returns each step's time in µs.
  async feed(ids) {
    if (!this.history.length) await this.step(this.tokenizer.startId());
    const micros = [];
    for (const id of ids) {
      const t0 = performance.now();
      await this.step(id);
      micros.push((performance.now() - t0) * 1000);
    }
    return micros;
  }

  // The k likeliest next tokens (never <pad>/<unk>), optionally those starting with `prefix`.
  // Ranked on the logits (the softmax keeps their order; ties to the lower id, as Python's
  // stable sort), among the ids the prefix allows (cached per prefix); the probabilities of
  // the k from the normaliser, one O(V) pass per step however many keystrokes read it.
  suggest(k = 3, prefix = "") {
    if (!this.logits) throw new ModelError("no context yet: feed a token first");
    const best = topIds(this.logits, k, this.idsStartingWith(prefix));
    if (this.logZ === null) this.logZ = logSumExp(this.logits);
    const vocab = this.tokenizer.vocab;
    return best.map((id) => ({token: vocab[id], id, prob: Math.exp(this.logits[id] - this.logZ)}));
  }

  // The ids that may be suggested after typing `prefix` (Int32Array, increasing): the
  // vocabulary less <pad>/<unk> for "", else the entries of the prefix one letter shorter
  // that start with it. A page types few distinct prefixes; the cache is emptied past 4096.
  idsStartingWith(prefix) {
    let ids = this.prefixIds.get(prefix);
    if (ids) return ids;
    const vocab = this.tokenizer.vocab;
    if (prefix === "") {
      const skip = new Set(this.banned);
      ids = Int32Array.from(vocab.keys()).filter((id) => !skip.has(id));
    } else {
      const shorter = Array.from(prefix).slice(0, -1).join("");
      ids = this.idsStartingWith(shorter).filter((id) => vocab[id].startsWith(prefix));
    }
    if (this.prefixIds.size >= 4096) this.prefixIds.clear();
    this.prefixIds.set(prefix, ids);
    return ids;
  }

  // Sample `n` tokens from the current state; onToken(id, micros) as each arrives.
  async generate(n, samplerOptions, onToken) {
    const random = seededRandom(samplerOptions.seed ?? 0);
    const ids = [], micros = [];
    if (!this.logits) await this.step(this.tokenizer.startId());
    for (let i = 0; i < n; i++) {
      const id = sampleToken(this.logits, {...samplerOptions, banned: this.banned, random});
      const t0 = performance.now();
      await this.step(id);
      micros.push((performance.now() - t0) * 1000);
      ids.push(id);
      if (onToken) onToken(id, micros[micros.length - 1]);
    }
    return {ids, micros};
  }

  // How a generated token is written after the previous one.
  tokenText(id) {
    const tok = this.tokenizer.vocab[id];
    if (this.tokenizer.kind === "char") return tok;
    if (tok === "<eos>") return "\n";
    const h = this.history;
    const previous = h.length >= 2 ? h[h.length - 2] : null;
    return previous === null || previous === this.tokenizer.eosId ? tok : ` ${tok}`;
  }
}
