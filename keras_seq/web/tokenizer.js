// keras-seq tokenizers in JavaScript: the same ids as keras_seq/data/tokenizers.py.
//
// Word rule (see that module's docstring): the markers U+001E/U+001F become spaces; lower-case;
// drop leading ASCII whitespace; each line break (with the whitespace around it) becomes one
// <eos>; a literal "<unk>" stays one token; every character that is not a letter, digit,
// underscore, apostrophe or ASCII whitespace is a token of its own; split on ASCII whitespace.
// Python's `\w` is a letter (L*), a digit or numeric character (N*) or "_": here \p{L}\p{N}_.
// Char rule: one token per Unicode code point. Both refuse a lone surrogate, as Python does.
//
//   const tok = Tokenizer.fromJSON(await (await fetch("tokenizer.json")).json());
//   tok.encode("The cat sat.\n")   // Int32Array of ids, <eos> at the line break

const WS = " \\t\\n\\r\\f\\v";
const LINE_BREAK = "\x1e";
const UNK_MARK = "\x1f";
const MARKERS = /[\x1e\x1f]/g;
const LEADING = new RegExp(`^[${WS}]+`);
const BREAKS = new RegExp(`[${WS}]*\\n[${WS}]*`, "g");
const PUNCT = new RegExp(`[^\\p{L}\\p{N}_${WS}']`, "gu");
const SPLIT = new RegExp(`[${WS}]+`);
const SURROGATE = /\p{Cs}/u;

export const PAD = "<pad>";
export const UNK = "<unk>";
export const EOS = "<eos>";

export class TokenizerError extends Error {}

function checkText(text) {
  if (typeof text !== "string") {
    throw new TokenizerError(`text must be a string, got ${typeof text}`);
  }
  const bad = SURROGATE.exec(text);
  if (bad) {
    const code = bad[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    throw new TokenizerError(`text holds a lone surrogate U+${code} at character ${bad.index}; ` +
                             "expected valid Unicode text");
  }
  return text;
}

export function splitWords(text, lower) {
  let t = checkText(text).replace(MARKERS, " ");
  if (lower) t = t.toLowerCase();
  t = t.replace(LEADING, "");
  t = t.replace(BREAKS, ` ${LINE_BREAK} `);
  t = t.split(UNK).join(UNK_MARK);
  t = t.replace(PUNCT, (m) => ` ${m} `);
  return t.split(SPLIT).filter((w) => w.length > 0).map((w) => (w === UNK_MARK ? UNK : w));
}

export class Tokenizer {
  constructor(data) {
    if (!data || data.format !== "keras-seq-tokenizer") {
      throw new TokenizerError(`tokenizer.json has format ${data && data.format}, expected ` +
                               "'keras-seq-tokenizer'; export the site again");
    }
    if (data.kind !== "word" && data.kind !== "char") {
      throw new TokenizerError(`the page reads word and char tokenizers, got '${data.kind}'`);
    }
    this.kind = data.kind;
    this.options = data.options || {};
    this.vocab = data.vocab;
    this.fingerprint = data.fingerprint;
    this.index = new Map(this.vocab.map((t, i) => [t, i]));
    this.padId = this.index.get(PAD);
    this.unkId = this.index.get(UNK);
    this.eosId = this.index.has(EOS) ? this.index.get(EOS) : null;
  }

  static fromJSON(data) { return new Tokenizer(data); }

  get vocabSize() { return this.vocab.length; }

  // The token strings of `text` (<eos> at line breaks for word; unknown tokens kept as is).
  tokens(text) {
    if (this.kind === "char") return Array.from(checkText(text));
    const lower = this.options.lower !== false;
    return splitWords(text, lower).map((w) => (w === LINE_BREAK ? EOS : w));
  }

  idOf(token) {
    const id = this.index.get(token);
    return id === undefined ? this.unkId : id;
  }

  encode(text) { return Int32Array.from(this.tokens(text), (t) => this.idOf(t)); }

  // The id a stream starts from: <eos> (a line boundary), or "\n" for char models.
  startId() {
    if (this.eosId !== null) return this.eosId;
    const id = this.index.get("\n");
    return id === undefined ? this.unkId : id;
  }
}
