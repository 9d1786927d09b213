// The keras-seq keyboard demo page: next-word suggestions as you type and streaming
// generation, on LiteRT.js in this browser. The page's options come from its URL:
//   index.html?model=<name>&accelerator=wasm|webgpu&threads=N
// Tests and benchmarks drive it through `window.kerasSeq` (see the bottom of this file).
// A site with a mix (site.json's "mix": mix.json and its n-gram, `keras-seq export web
// --mix`) suggests from the mixture of the step model, the n-gram and the words typed.

import {loadLiteRt} from "./litert/core/index.js";
import {ModelError, StepLM, fetchModel} from "./lm.js";
import {MixedLM} from "./mix.js";
import {NgramOnModelVocab, readCompact} from "./ngram.js";
import {Tokenizer} from "./tokenizer.js";

const $ = (id) => document.getElementById(id);
const WORD_CHAR = /[\p{L}\p{N}_']$/u;
const TRAILING_SPACE = /[ \t\n\r\f\v]$/;

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = false;
  $("status").textContent = "failed";
  document.body.dataset.state = "error";
}

function percentile(values, q) {
  if (!values.length) return NaN;
  const sorted = Float64Array.from(values).sort();
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos), hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

// The typed text as a context the model has read and the word still being typed.
export function splitTyped(tokenizer, text) {
  if (tokenizer.kind === "char") return {ids: Array.from(tokenizer.encode(text)), partial: ""};
  const tokens = tokenizer.tokens(text);
  let partial = "";
  if (tokens.length && !TRAILING_SPACE.test(text) && WORD_CHAR.test(text)) {
    partial = tokens.pop();
  }
  return {ids: tokens.map((t) => tokenizer.idOf(t)), partial};
}

class Keyboard {
  constructor(lm, top) {
    this.lm = lm;
    this.top = top;
    this.fed = [];          // ids fed after the start token
    this.snapshots = [];    // state after the start token, then after each fed id
    this.latencies = [];
    this.queue = Promise.resolve();
  }

  async start() {
    for (const snap of this.snapshots) this.lm.release(snap);
    this.lm.reset();
    await this.lm.step(this.lm.tokenizer.startId());
    this.fed = [];
    this.snapshots = [this.lm.snapshot()];
  }

  // Bring the model's context to `ids`: go back to the longest common prefix, feed the rest.
  async sync(ids) {
    let common = 0;
    while (common < ids.length && common < this.fed.length && ids[common] === this.fed[common]) {
      common++;
    }
    if (common < this.fed.length) {
      this.lm.restore(this.snapshots[common]);
      this.fed.length = common;
      for (const snap of this.snapshots.splice(common + 1)) this.lm.release(snap);
    }
    for (const id of ids.slice(common)) {
      const t0 = performance.now();
      await this.lm.step(id);
      this.latencies.push((performance.now() - t0) * 1000);
      this.fed.push(id);
      this.snapshots.push(this.lm.snapshot());
    }
  }

  // Suggestions for the typed text (serialised: keystrokes arrive faster than steps).
  suggestFor(text, k = this.top) {
    const job = this.queue.then(async () => {
      const {ids, partial} = splitTyped(this.lm.tokenizer, text);
      await this.sync(ids);
      const prefix = this.lm.tokenizer.options.lower !== false ? partial.toLowerCase() : partial;
      return {context: ids, partial: prefix, suggestions: this.lm.suggest(k, prefix)};
    });
    this.queue = job.catch(() => {});
    return job;
  }
}

// The running hit rate of what the user types (docs/keyboard.md's top-1 / top-3): for each
// word typed, was it first / among the suggestions shown before its first letter? Each
// strip shown with nothing typed of the next word is kept by its context; a word counts
// once, when the context first goes past it.
class HitRate {
  constructor() {
    this.strips = new Map();   // context ids joined → the suggestion ids shown there
    this.counted = new Set();  // "context>word" already counted
    this.words = 0;
    this.top1 = 0;
    this.top3 = 0;
  }

  update(result) {
    const ids = result.context;
    for (let i = 0; i < ids.length; i++) {
      const context = ids.slice(0, i).join(",");
      const key = `${context}>${ids[i]}`;
      const strip = this.strips.get(context);
      if (!strip || this.counted.has(key)) continue;
      this.counted.add(key);
      this.words++;
      if (strip[0] === ids[i]) this.top1++;
      if (strip.slice(0, 3).includes(ids[i])) this.top3++;
    }
    if (result.partial === "") this.strips.set(ids.join(","), result.suggestions.map((s) => s.id));
  }
}

function renderHits(hits) {
  const el = $("hits");
  el.dataset.words = String(hits.words);
  el.dataset.top1 = String(hits.top1);
  el.dataset.top3 = String(hits.top3);
  const pct = (n) => `${(100 * n / hits.words).toFixed(0)}%`;
  el.textContent = hits.words
    ? `your words: ${hits.words} · the first suggestion ${pct(hits.top1)} · among the 3 ` +
      `${pct(hits.top3)}`
    : "";
}

function renderSuggestions(result, onPick) {
  const strip = $("suggestions");
  strip.replaceChildren();
  for (const s of result.suggestions) {
    const b = document.createElement("button");
    b.className = "suggestion";
    b.dataset.token = s.token;
    b.dataset.prob = String(s.prob);
    b.textContent = s.token === "<eos>" ? "⏎" : s.token;
    const p = document.createElement("small");
    p.textContent = ` ${(100 * s.prob).toFixed(1)}%`;
    b.append(p);
    b.addEventListener("click", () => onPick(s));
    strip.append(b);
  }
  strip.dataset.partial = result.partial;
  strip.dataset.count = String(result.suggestions.length);
}

// The mixture of site.json's "mix" around the step model: mix.json and its n-gram fetched
// and checked against their sha256.
async function loadMix(mix, neural, tokenizer) {
  const spec = JSON.parse(new TextDecoder().decode(await fetchModel(mix)));
  if (spec.format !== "keras-seq-mix/1") {
    throw new ModelError(`${mix.file} has format ${spec.format}, expected 'keras-seq-mix/1'; ` +
                         "export the site again with --mix");
  }
  let ngram = null, model = null;
  if (mix.ngram) {
    model = readCompact(await fetchModel(mix.ngram), mix.ngram.file);
    ngram = new NgramOnModelVocab(model, tokenizer);
  }
  const lm = new MixedLM(neural, spec, ngram);
  const fading = spec.half_life == null ? "" : `, fading by half every ${spec.half_life} words`;
  $("mix-text").textContent = `mixes ${lm.describe(model)}${fading}`;
  $("mix").hidden = false;
  return lm;
}

function renderMix(lm) {
  if (!lm.cache) return;
  const words = lm.cache.words;
  $("mix").dataset.cacheWords = String(words);
  $("cache-words").textContent = ` · ${words} word${words === 1 ? "" : "s"} in the cache`;
}

function renderLatency(latencies) {
  const last = latencies[latencies.length - 1];
  $("latency").textContent = latencies.length
    ? `last step ${last.toFixed(0)} µs · p50 ${percentile(latencies, 0.5).toFixed(0)} µs over ` +
      `${latencies.length} steps`
    : "";
}

async function main() {
  const params = new URLSearchParams(location.search);
  const siteResponse = await fetch("site.json");
  if (!siteResponse.ok) {
    throw new ModelError(`site.json is missing (HTTP ${siteResponse.status}): this folder is ` +
                         "not a keras-seq site; write one with `keras-seq export web`");
  }
  const site = await siteResponse.json();
  const name = params.get("model") || site.default;
  const accelerator = params.get("accelerator") || "wasm";
  const threads = Math.max(1, parseInt(params.get("threads") || "1", 10) || 1);
  const entry = site.models.find((m) => m.name === name);
  fillChoices(site, name, accelerator, threads);
  if (!entry) {
    throw new ModelError(`this site has no model '${name}'; it has ` +
                         site.models.map((m) => m.name).join(", "));
  }
  if (threads > 1 && !self.crossOriginIsolated) {
    throw new ModelError(`${threads} threads need a cross-origin-isolated page (COOP/COEP ` +
                         "headers); serve the site with `keras-seq demo --web`");
  }
  if (accelerator === "webgpu" && !navigator.gpu) {
    throw new ModelError("WebGPU is not available in this browser; use accelerator=wasm");
  }
  $("status").textContent = `loading LiteRT.js (${threads > 1 ? "threaded " : ""}Wasm)…`;
  // WebGPU runs need the JSPI build (LiteRT.js's GPU path awaits inside Wasm).
  await loadLiteRt(new URL("litert/wasm/", location.href).href,
                   {threads: threads > 1, jspi: accelerator === "webgpu"});
  const tokResponse = await fetch(site.tokenizer);
  if (!tokResponse.ok) throw new ModelError(`tokenizer ${site.tokenizer} is missing`);
  const tokenizer = Tokenizer.fromJSON(await tokResponse.json());
  $("status").textContent = `loading ${entry.file}…`;
  const neural = await StepLM.load(entry, tokenizer, {accelerator, threads});
  const lm = site.mix ? await loadMix(site.mix, neural, tokenizer) : neural;
  const keyboard = new Keyboard(lm, site.top || 3);
  await keyboard.start();
  const meta = entry.meta;
  $("model").textContent = `${meta.cell} ${meta.num_layers}×${meta.units}, ${meta.variant}, ` +
    `${(entry.size / 1e6).toFixed(2)} MB, ${tokenizer.kind} vocabulary ` +
    `${tokenizer.vocabSize.toLocaleString("en")} · ${accelerator}, ${threads} thread(s)`;

  const input = $("input");
  const pick = (s) => {
    const {partial} = splitTyped(tokenizer, input.value);
    const head = partial ? input.value.slice(0, input.value.length - partial.length) : input.value;
    const word = s.token === "<eos>" ? "\n" : s.token;
    const sep = tokenizer.kind === "char" || word === "\n" ? "" : " ";
    input.value = head + word + sep;
    refresh();
    input.focus();
  };
  let pending = 0;
  const hits = new HitRate();
  const refresh = async () => {
    const mine = ++pending;
    document.body.dataset.state = "busy";
    try {
      const result = await keyboard.suggestFor(input.value);
      hits.update(result);  // every result, even one a newer keystroke overtook
      if (mine !== pending) return;
      renderSuggestions(result, pick);
      renderHits(hits);
      renderLatency(keyboard.latencies);
      renderMix(lm);
      $("suggestions").dataset.text = input.value;
      document.body.dataset.state = "ready";
    } catch (err) {
      showError(err.message || String(err));
    }
  };
  input.addEventListener("input", refresh);
  $("forget").addEventListener("click", () => {
    keyboard.queue = keyboard.queue.then(() => lm.forget());
    refresh();
    input.focus();
  });
  $("generate").addEventListener("click", () => generate(keyboard, input));
  await refresh();
  $("status").textContent = "ready";
  return {keyboard, lm, tokenizer, entry};
}

async function generate(keyboard, input) {
  const out = $("generated");
  out.textContent = "";
  const options = {sampler: $("sampler").value, k: parseInt($("topk").value, 10) || 10,
                   p: parseFloat($("topp").value) || 0.9,
                   temperature: parseFloat($("temperature").value) || 1.0,
                   seed: parseInt($("seed").value, 10) || 0};
  const n = Math.max(1, Math.min(500, parseInt($("ntokens").value, 10) || 20));
  const job = keyboard.queue.then(async () => {
    await keyboard.sync(splitTyped(keyboard.lm.tokenizer, input.value).ids);
    const saved = keyboard.lm.snapshot();
    const result = await keyboard.lm.generate(n, options, (id) => {
      out.textContent += keyboard.lm.tokenText(id);
    });
    keyboard.lm.restore(saved);  // the typed context stays where it was
    keyboard.lm.release(saved);
    return result;
  });
  keyboard.queue = job.catch(() => {});
  try {
    const {micros} = await job;
    $("genstats").textContent = `${micros.length} tokens · p50 ${percentile(micros, 0.5).toFixed(0)} ` +
      `µs, p95 ${percentile(micros, 0.95).toFixed(0)} µs per token`;
  } catch (err) {
    showError(err.message || String(err));
  }
}

function fillChoices(site, name, accelerator, threads) {
  const go = (key, value) => {
    const params = new URLSearchParams(location.search);
    params.set(key, value);
    location.search = params.toString();
  };
  const models = $("choose-model");
  for (const m of site.models) models.append(new Option(`${m.name} (${(m.size / 1e6).toFixed(2)} MB)`, m.name));
  models.value = name;
  models.addEventListener("change", () => go("model", models.value));
  $("choose-accelerator").value = accelerator;
  $("choose-accelerator").addEventListener("change", (e) => go("accelerator", e.target.value));
  $("choose-threads").value = String(threads);
  $("choose-threads").addEventListener("change", (e) => go("threads", e.target.value));
}

// Per-token latency of the step model: `steps` greedy tokens from a new stream (after
// `warmup` untimed ones); the typed context is restored afterwards.
async function benchmark(app, {steps = 200, warmup = 20} = {}) {
  return timed(app, async (lm) => {
    const micros = [];
    for (let i = 0; i < warmup + steps; i++) {
      const id = sampleGreedy(lm);
      const t0 = performance.now();
      await lm.step(id);
      if (i >= warmup) micros.push((performance.now() - t0) * 1000);
    }
    return micros;
  });
}

// The keystroke path's latency: for each word `ids[i]` of a typed text, the step that reads
// it and the strip for the first letters of the next word, `prefixes[i]` (top-`k`), as the
// page runs them when a word ends and the next one starts. The first `warmup` are untimed.
async function benchmarkKeystrokes(app, {ids, prefixes, k = 3, warmup = 20} = {}) {
  return timed(app, async (lm) => {
    const micros = [];
    for (let i = 0; i < ids.length; i++) {
      const t0 = performance.now();
      await lm.step(ids[i]);
      lm.suggest(k, prefixes[i]);
      if (i >= warmup) micros.push((performance.now() - t0) * 1000);
    }
    return micros;
  });
}

// Run `body(lm)` on a new stream in the keyboard's queue; the typed context comes back after.
async function timed(app, body) {
  const {keyboard, lm} = app;
  const job = keyboard.queue.then(async () => {
    const saved = lm.snapshot();
    lm.reset();
    await lm.step(lm.tokenizer.startId());
    try {
      return await body(lm);
    } finally {
      lm.restore(saved);
      lm.release(saved);
    }
  });
  keyboard.queue = job.catch(() => {});
  return job;
}

// The mixture's probabilities and each source's after `text` (null without a mix): what
// tests compare with Python's MixedLM.
async function mixtureFor(app, text) {
  const {keyboard, lm} = app;
  if (!lm.cache) return null;
  const job = keyboard.queue.then(async () => {
    await keyboard.sync(splitTyped(lm.tokenizer, text).ids);
    const {neural, ngram, cache} = lm.parts();
    return {mixed: Array.from(lm.mixed), neural: Array.from(neural),
            ngram: ngram && Array.from(ngram), cache: Array.from(cache),
            cacheWords: lm.cache.words};
  });
  keyboard.queue = job.catch(() => {});
  return job;
}

function sampleGreedy(lm) {
  let best = -1;
  for (let i = 0; i < lm.logits.length; i++) {
    if (lm.banned.includes(i)) continue;
    if (best < 0 || lm.logits[i] > lm.logits[best]) best = i;
  }
  return best;
}

const ready = main();
ready.catch((err) => showError(err.message || String(err)));
window.kerasSeq = {
  ready: ready.then((app) => ({model: app.entry.name, variant: app.entry.meta.variant, fastPath: app.lm.fastPath,
                               crossOriginIsolated: self.crossOriginIsolated,
                               mix: app.lm.cache ? app.lm.spec.weights : null})),
  tokenize: async (text) => Array.from((await ready).tokenizer.encode(text)),
  suggest: async (text, k) => (await ready).keyboard.suggestFor(text, k),
  benchmark: async (options) => benchmark(await ready, options),
  benchmarkKeystrokes: async (options) => benchmarkKeystrokes(await ready, options),
  mixture: async (text) => mixtureFor(await ready, text),
};
