// The keyboard's mixture in the page (Python's MixedLM, keras_seq/runtime/mixture.py): the
// step model, a compact n-gram on the model's ids and a cache of the words typed, mixed
//
//   p(w) = λ_neural · p_neural(w) + λ_ngram · p_ngram(w) + λ_cache · p_cache(w)
//
// with the weights of the site's mix.json. Until the cache holds a word its weight goes to
// the other two. `step` mixes without a logarithm (what the strip needs); `logits` takes it
// when read (generation). The same arithmetic as Python, in float64 where it rounds to float32.
//
//   const lm = new MixedLM(stepLM, spec, new NgramOnModelVocab(ngram, tokenizer));
//   await lm.step(id); lm.suggest(3)   // [{token, id, prob}, ...] from the mixture
//   lm.forget()                        // empty the cache of typed words (a new user)
//
// A snapshot holds the model's state, the n-gram's history and the cache, so going back to
// an earlier word (Backspace) also takes the words after it out of the cache.

import {ModelError, StepLM, topIds} from "./lm.js";

export const SOURCES = ["neural", "ngram", "cache"];

// Counts of the words typed so far, each fading by half every `halfLife` words (null: no
// fading): later words are added with a growing weight instead of every count shrinking.
// Sparse: a map of the words typed, not a count per vocabulary entry.
export class WordCache {
  constructor(halfLife, ignored = []) {
    this.halfLife = halfLife;
    this.growth = halfLife == null ? 1 : 2 ** (1 / halfLife);
    this.ignored = new Set(ignored.filter((id) => id != null));
    this.forget();
  }

  forget() {
    this.counts = new Map();  // token id → its weight
    this.total = 0;
    this.weight = 1;
    this.words = 0;
  }

  add(token) {
    if (this.ignored.has(token)) return;
    this.counts.set(token, (this.counts.get(token) || 0) + this.weight);
    this.total += this.weight;
    this.words++;
    this.weight *= this.growth;
    if (this.weight > 1e30) {  // rescaled where Python's float32 counts are; ratios unchanged
      for (const [t, c] of this.counts) this.counts.set(t, c / this.weight);
      this.total /= this.weight;
      this.weight = 1;
    }
  }

  snapshot() {
    const {total, weight, words} = this;
    return {counts: new Map(this.counts), total, weight, words};
  }

  restore(snap) {
    this.counts = new Map(snap.counts);
    ({total: this.total, weight: this.weight, words: this.words} = snap);
  }

  // p(w) over `V` ids (Float64Array; all 0 while empty).
  probs(V) {
    const p = new Float64Array(V);
    for (const [t, c] of this.counts) p[t] = c / this.total;
    return p;
  }
}

// The weights of a mix.json, checked as MixSpec checks them: ≥ 0 and summing to 1.
export function mixWeights(spec) {
  const w = SOURCES.map((s) => Number((spec.weights || {})[s] ?? 0));
  const sum = w.reduce((a, b) => a + b, 0);
  if (w.some((v) => !(v >= 0)) || Math.abs(sum - 1) > 1e-6) {
    throw new ModelError(`mixture weights must be ≥ 0 and sum to 1, got ` +
                         `${JSON.stringify(spec.weights)}; export the site again with --mix`);
  }
  return w;
}

export class MixedLM {
  constructor(neural, spec, ngram = null) {
    const tok = neural.tokenizer;
    if (tok.kind !== "word") {
      throw new ModelError(`the mixture works on words; ${neural.entry.file} reads ` +
                           `${tok.kind} tokens`);
    }
    this.neural = neural;
    this.spec = spec;
    this.w = mixWeights(spec);
    if (this.w[1] > 0 && !ngram) {
      throw new ModelError("the mixture weighs an n-gram but none was given");
    }
    this.ngram = this.w[1] > 0 ? ngram : null;
    this.cache = new WordCache(spec.half_life ?? null, [tok.padId, tok.unkId, tok.eosId]);
    this.mixed = new Float64Array(neural.vocabSize);
    this.epoch = 0;  // forget() counts up: older snapshots then restore an empty cache
    this.reset();
  }

  get tokenizer() { return this.neural.tokenizer; }
  get entry() { return this.neural.entry; }
  get vocabSize() { return this.neural.vocabSize; }
  get banned() { return this.neural.banned; }
  get history() { return this.neural.history; }
  get fastPath() { return this.neural.fastPath; }

  // A new stream (zero state, the n-gram at <s>); the cache keeps its words.
  reset() {
    this.neural.reset();
    if (this.ngram) this.ngram.reset();
    this.ready = false;
    this._logits = null;
  }

  // Empty the cache of typed words (a new user); the current position is mixed again
  // without it.
  forget() {
    this.cache.forget();
    this.epoch++;
    if (this.ready) this.mix();
  }

  // Feed one token id and mix the next token's probabilities (Python's advance): the model
  // steps, the n-gram steps, the cache counts the word (not <eos>, <unk>, <pad>), then mix.
  async step(tokenId) {
    await this.neural.step(tokenId);
    if (this.ngram) this.ngram.step(tokenId);
    this.cache.add(tokenId);
    this.mix();
  }

  mix() {
    const raw = this.neural.logits, mixed = this.mixed, cache = this.cache;
    let [w0, w1, w2] = this.w;
    if (!cache.total) {  // nothing typed yet: the cache's share goes to the rest
      const sum = w0 + w1;
      [w0, w1, w2] = [w0 / sum, w1 / sum, 0];
    }
    let max = -Infinity;
    for (let i = 0; i < raw.length; i++) if (raw[i] > max) max = raw[i];
    let sum = 0;
    for (let i = 0; i < raw.length; i++) sum += (mixed[i] = Math.exp(raw[i] - max));
    const scale = w0 / sum;
    for (let i = 0; i < mixed.length; i++) mixed[i] *= scale;
    if (w1) {
      const ngram = this.ngram.probs(w1);
      for (let i = 0; i < mixed.length; i++) mixed[i] += ngram[i];
    }
    if (w2) {
      const f = w2 / cache.total;
      for (const [t, c] of cache.counts) mixed[t] += c * f;
    }
    this.ready = true;
    this._logits = null;
  }

  // The mixture's natural-log probabilities (what the samplers read), taken when first read.
  get logits() {
    if (!this.ready) return null;
    if (!this._logits) this._logits = Float64Array.from(this.mixed, Math.log);
    return this._logits;
  }

  // Each source's probabilities of the next token here (for checks): {neural, ngram, cache}.
  parts() {
    const raw = this.neural.logits;
    let max = -Infinity, sum = 0;
    for (const v of raw) max = Math.max(max, v);
    const neural = Float64Array.from(raw, (v) => Math.exp(v - max));
    for (const v of neural) sum += v;
    for (let i = 0; i < neural.length; i++) neural[i] /= sum;
    const ngram = this.ngram && this.ngram.probs(1, new Float64Array(this.vocabSize));
    return {neural, ngram, cache: this.cache.probs(this.vocabSize)};
  }

  snapshot() {
    return {neural: this.neural.snapshot(), ngram: this.ngram && this.ngram.snapshot(),
            cache: this.cache.snapshot(), epoch: this.epoch};
  }

  restore(snap) {
    this.neural.restore(snap.neural);
    if (this.ngram) this.ngram.restore(snap.ngram);
    if (snap.epoch === this.epoch) this.cache.restore(snap.cache);
    else this.cache.forget();  // taken before forget(): its words are forgotten too
    this._logits = null;
    this.ready = Boolean(this.neural.logits);
    if (this.ready) this.mix();
  }

  release(snap) { this.neural.release(snap.neural); }

  // The k likeliest next tokens (never <pad>/<unk>), optionally those starting with
  // `prefix`, ranked on the mixture's probabilities (ties: the lower id).
  suggest(k = 3, prefix = "") {
    if (!this.ready) throw new ModelError("no context yet: feed a token first");
    const vocab = this.tokenizer.vocab;
    return topIds(this.mixed, k, this.neural.idsStartingWith(prefix))
      .map((id) => ({token: vocab[id], id, prob: this.mixed[id]}));
  }

  // StepLM's sampling loop and text, on the mixture.
  generate(n, samplerOptions, onToken) {
    return StepLM.prototype.generate.call(this, n, samplerOptions, onToken);
  }

  tokenText(id) { return StepLM.prototype.tokenText.call(this, id); }

  // "neural 0.80 + KN3 0.15 + your words 0.05": what the page says it mixes.
  describe(ngramModel) {
    const name = !ngramModel ? "n-gram" : ngramModel.metadata.smoothing === "kn"
      ? `KN${ngramModel.order}` : `${ngramModel.order}-gram`;
    const labels = ["neural", name, "your words"];
    return this.w.map((w, i) => (w > 0 ? `${labels[i]} ${w.toFixed(2)}` : null))
      .filter(Boolean).join(" + ");
  }
}
