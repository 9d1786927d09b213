"""The browser page with a mix (``keras-seq export web --mix``): the step model mixed with a
compact n-gram (``ngram.js``) and a cache of the words typed (``mix.js``). In headless
Chromium the page's mixture, and each of its three sources, must be Python's
:class:`~keras_seq.runtime.mixture.MixedLM` on the same text; its top-3 the same words;
the forget button must empty the cache. And ``export_web`` refuses a mix the page cannot
serve.

The learned toy LSTM (float32 step model) is mixed with a KN3 (8-bit) on its words, less
"log" and plus "zebra" (a word the model lacks), so the n-gram's mapping onto the model's
ids drops and renormalises; the cache fades by half every 2 words, so a long text crosses
the cache's rescaling (weights above 1e30).
"""

import warnings

import numpy as np
import pytest

from keras_seq.data.tokenizers import load_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.export.web import export_web
from keras_seq.ngram.compact import read_compact, write_compact
from keras_seq.ngram.kneser_ney import train_kneser_ney
from keras_seq.runtime.mixture import MixedLM, MixSpec
from keras_seq.runtime.web_server import SiteServer
from tests.fixtures.lm_runs import learned_run, toy_corpus_text
from tests.fixtures.web_page import open_page
from tests.prereqs import needs
from tests.shared_cache import shared_folder

WEIGHTS = {"neural": 0.5, "ngram": 0.3, "cache": 0.2}
# |page − Python| per probability. Python mixes in float32, the page in float64; the neural
# part also differs by LiteRT vs LiteRT.js (XNNPACK on x86 and on Wasm). Largest measured
# on these texts (printed with -s): neural 7.3e-8, n-gram 9.6e-8, cache 3.5e-8, mixture 2.9e-8.
NEURAL_ATOL = 1e-6
NGRAM_ATOL = CACHE_ATOL = 1e-6
MIX_ATOL = 1e-6

pytestmark = needs("chromium", "litertjs")


@pytest.fixture(scope="module")
def mix_parts(tmp_path_factory):
    """``(step model, mix.json)``: the learned toy LSTM as a float32 step model; a KN3 on
    the toy corpus without "log", with "zebra"; weights 0.5 / 0.3 / 0.2, half-life 2."""
    def build(out):
        from keras_seq.export.tflite import export_tflite

        export_tflite(learned_run(tmp_path_factory), out, variants=("float32",),
                      graphs=("step",), seq_length=8, calib_tokens=40, parity_tokens=40,
                      val_tokens=100, printer=lambda *a: None)

    models = shared_folder(tmp_path_factory, "web_mix_tflite", build)
    root = tmp_path_factory.mktemp("mix")
    lines = [line.split() for line in toy_corpus_text().splitlines() if "log" not in line]
    lines += [["the", "zebra", "sat", "on", "a", "mat"]] * 5
    fingerprint = load_tokenizer(models / "tokenizer.json").fingerprint
    with warnings.catch_warnings():  # a toy corpus: KN's fallback discounts
        warnings.simplefilter("ignore")
        ngram = train_kneser_ney(lines, order=3,
                                 metadata={"tokenizer_fingerprint": fingerprint})
    write_compact(ngram, root / "kn3.q8.bin", quantize_bits=8)
    MixSpec(WEIGHTS, ngram="kn3.q8.bin", half_life=2).save(root / "mix.json")
    return models / "step_float32.tflite", root / "mix.json"


@pytest.fixture(scope="module")
def site(mix_parts, tmp_path_factory):
    """The mixed site, written by the CLI (``keras-seq export web --mix``)."""
    from keras_seq.cli import main

    model, mix = mix_parts
    out = tmp_path_factory.mktemp("mixsite") / "web"
    assert main(["export", "web", "--model", str(model), "--out", str(out),
                 "--mix", str(mix)]) == 0
    return out


@pytest.fixture(scope="module")
def server(site):
    with SiteServer(site, port=0) as srv:
        yield srv


def _wait_for_strip(page, text):
    """Until the strip shown is the one for ``text`` (which may hold a line break)."""
    page.wait_for_function("(t) => document.getElementById('suggestions').dataset.text === t",
                           arg=text)


def _python_mix(model, mix, text, forget_after=None):
    """``(MixedLM, prefix)`` after the complete words of ``text`` (a new stream, an empty
    cache; ``forget()`` after the first ``forget_after`` words), and the word still being
    typed."""
    lm = MixedLM(model, mix)
    lm.keep_parts = True
    tok = lm.tokenizer
    tokens = tok.tokens(text)
    partial = ""
    if tokens and not text[-1].isspace() and (text[-1].isalnum() or text[-1] in "_'"):
        partial = tokens.pop()
    ids = tok.tokens_to_ids(tokens)
    lm.feed_ids([])  # the start token
    for i, token in enumerate(ids):
        if i == forget_after:
            lm.forget()
        lm.step(int(token))
    return lm, partial.lower()


def _compare(page, model, mix, text, worst, forget_after=None):
    """The page's mixture and sources for ``text`` against Python's; the largest gaps go
    into ``worst``."""
    js = page.evaluate("(t) => window.kerasSeq.mixture(t)", text)
    lm, _ = _python_mix(model, mix, text, forget_after)
    neural, ngram, cache = lm.parts
    for key, ours, theirs in (("neural", js["neural"], neural), ("ngram", js["ngram"], ngram),
                              ("cache", js["cache"], cache), ("mixed", js["mixed"], lm._mixed)):
        worst[key] = max(worst.get(key, 0.0), float(np.abs(np.subtract(ours, theirs)).max()))
    assert js["cacheWords"] == lm._cache.words, text
    return js, lm


def _check_worst(worst):
    print("largest |page - Python|:", {k: f"{v:.1e}" for k, v in worst.items()})
    assert worst["neural"] <= NEURAL_ATOL and worst["mixed"] <= MIX_ATOL, worst
    assert worst["ngram"] <= NGRAM_ATOL and worst["cache"] <= CACHE_ATOL, worst


def test_the_mixed_page_suggests_what_python_mixes(browser, server, mix_parts):
    """Typed key by key, edited back with Backspace, then a long text at once: after each,
    the page's probabilities (the mixture and each source) are MixedLM's on the text as it
    stands, and the strip is MixedLM's top-3."""
    model, mix = mix_parts
    page, errors = open_page(browser, f"{server.url}index.html")
    info = page.evaluate("window.kerasSeq.ready")
    assert info["mix"] == WEIGHTS
    assert "mixes neural 0.50 + KN3 0.30 + your words 0.20" in page.inner_text("#mix")
    worst, text = {}, ""
    # words the n-gram lacks (log) and the model lacks (zebra: <unk>), a line break (the
    # n-gram back at <s>, nothing cached), a word being typed (a prefix), Backspace into
    # earlier words (the cache loses them)
    for keys in ("the ", "cat sat on a ", "zebra mat\nthe big dog ran on the log ",
                 "and the small red c", "Backspace*14", "Backspace*9", "a big red "):
        if keys.startswith("Backspace"):
            for _ in range(int(keys.split("*")[1])):
                page.press("#input", "Backspace")
            text = text[:-int(keys.split("*")[1])]
        else:
            page.type("#input", keys)
            text += keys
        _wait_for_strip(page, text)
        shown = [(b.get_attribute("data-token"), float(b.get_attribute("data-prob")))
                 for b in page.query_selector_all("#suggestions .suggestion")]
        _, lm = _compare(page, model, mix, text, worst)
        _, prefix = _python_mix(model, mix, text)
        expected = lm.suggest(3, prefix=prefix)
        assert [t for t, _ in shown] == [t for t, _ in expected], text
        np.testing.assert_allclose([p for _, p in shown], [p for _, p in expected],
                                   atol=MIX_ATOL, rtol=0)
        words = int(page.get_attribute("#mix", "data-cache-words"))
        assert words == lm._cache.words and f"{words} word" in page.inner_text("#mix")
    # 240 words: the cache's weight passes 1e30 (2^(240/2)) and is rescaled on both sides
    long = " ".join(toy_corpus_text(60, seed=5).split()[:240]) + " "
    page.fill("#input", long)
    js, lm = _compare(page, model, mix, long, worst)
    assert js["cacheWords"] == 240 and lm._cache._weight < 1e30
    _check_worst(worst)
    assert not errors and page.is_hidden("#error")
    page.close()


def test_forget_empties_the_cache(browser, server, mix_parts):
    """The button empties the cache: the mixture is then the model's and the n-gram's
    alone (their weights renormalised), words typed after it fill it again (MixedLM's
    forget() then steps), and going back before it does not bring the old words back."""
    model, mix = mix_parts
    page, errors = open_page(browser, f"{server.url}index.html")
    page.evaluate("window.kerasSeq.ready")
    text = "the cat sat on a mat "
    page.type("#input", text)
    _wait_for_strip(page, text)
    assert page.evaluate("(t) => window.kerasSeq.mixture(t)", text)["cacheWords"] == 6
    page.click("#forget")
    page.wait_for_selector("#mix[data-cache-words='0']")
    js = page.evaluate("(t) => window.kerasSeq.mixture(t)", text)
    assert js["cacheWords"] == 0 and not any(js["cache"])
    lm, _ = _python_mix(model, mix, text)
    neural, ngram, _ = lm.parts
    alone = (WEIGHTS["neural"] * neural + WEIGHTS["ngram"] * ngram) / 0.8
    np.testing.assert_allclose(js["mixed"], alone, atol=MIX_ATOL, rtol=0)
    shown = [b.get_attribute("data-token") for b in page.query_selector_all(".suggestion")]
    assert shown == [t for t, _ in largest_three(alone, lm)]
    worst = {}
    page.type("#input", "the dog ")
    text += "the dog "
    js, _ = _compare(page, model, mix, text, worst, forget_after=6)
    assert js["cacheWords"] == 2
    _check_worst(worst)
    for _ in range(14):  # back into the words typed before forgetting
        page.press("#input", "Backspace")
    js = page.evaluate("(t) => window.kerasSeq.mixture(t)", text[:-14])
    assert js["cacheWords"] == 0 and not any(js["cache"])
    assert not errors
    page.close()


def largest_three(probs, lm):
    """The top-3 of ``probs`` without <pad>/<unk>, ties to the lower id."""
    tok = lm.tokenizer
    order = [i for i in np.argsort(-probs, kind="stable") if i not in (tok.pad_id, tok.unk_id)]
    return [(tok.vocab[i], float(probs[i])) for i in order[:3]]


def test_the_page_generates_from_the_mixture(browser, server):
    """Generation samples the mixture's log-probabilities and leaves the cache as it was."""
    page, errors = open_page(browser, f"{server.url}index.html")
    page.evaluate("window.kerasSeq.ready")
    page.type("#input", "the cat ")
    page.fill("#ntokens", "10")
    page.click("#generate")
    page.wait_for_selector("#genstats:has-text('10 tokens')")
    assert len(page.inner_text("#generated").split()) >= 5
    assert page.evaluate("window.kerasSeq.mixture('the cat ')")["cacheWords"] == 2
    assert not errors
    page.close()


def test_a_site_without_a_mix_does_not_mix(browser, mix_parts, tmp_path):
    model, _ = mix_parts
    site = tmp_path / "web"
    assert "mix" not in export_web([model], site)
    with SiteServer(site, port=0) as srv:
        page, errors = open_page(browser, f"{srv.url}index.html")
        assert page.evaluate("window.kerasSeq.ready")["mix"] is None
        assert page.is_hidden("#mix") and page.evaluate("window.kerasSeq.mixture('the ')") is None
        assert not errors
        page.close()


@pytest.mark.parametrize("order, bits, strict", [(4, None, False), (2, 8, True)])
def test_ngram_js_streams_pythons_distribution(browser, server, site, tmp_path, order, bits,
                                               strict):
    """ngram.js on the files the page does not ship here: float64 values without codebooks
    (order 4), and a strict model (unseen words impossible: the dense path). Word by word,
    its distribution on the model's ids is NgramOnModelVocab's."""
    from keras_seq.runtime.mixture import NgramOnModelVocab

    lines = [line.split() for line in toy_corpus_text().splitlines() if "log" not in line]
    lines += [["the", "zebra", "sat", "on", "a", "mat"]] * 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = train_kneser_ney(lines, order=order)
    model.strict = strict
    write_compact(model, tmp_path / "m.bin", quantize_bits=bits)
    tok = load_tokenizer(site / "tokenizer.json")
    ids = [tok.eos_id] + tok.encode("the cat sat on a mat\na big red dog ran").tolist()
    page, errors = open_page(browser, f"{server.url}index.html")
    page.evaluate("window.kerasSeq.ready")
    got = page.evaluate("""async ([bytes, data, ids]) => {
      const {readCompact, NgramOnModelVocab} = await import('./ngram.js');
      const {Tokenizer} = await import('./tokenizer.js');
      const ngram = new NgramOnModelVocab(readCompact(Uint8Array.from(bytes)),
                                          Tokenizer.fromJSON(data));
      return ids.map((id) => { ngram.step(id); return Array.from(ngram.probs(1)); });
    }""", [list((tmp_path / "m.bin").read_bytes()), tok.to_dict(), ids])
    python = NgramOnModelVocab(read_compact(tmp_path / "m.bin"), tok)
    zeros = 0
    for i, token in enumerate(ids):
        python.step(token)
        expected = python.probs()
        assert np.isfinite(expected).all()
        np.testing.assert_allclose(got[i], expected, atol=NGRAM_ATOL, rtol=0, err_msg=str(i))
        zeros += int((expected == 0).sum())
    # <pad> and "log" (the n-gram lacks it) are always 0; a strict model's unseen words too
    assert (zeros > 2 * len(ids)) == strict
    assert not errors
    page.close()


def test_export_refuses_a_mix_the_page_cannot_serve(mix_parts, tmp_path):
    """A missing n-gram, an n-gram of another tokenizer, of another vocabulary: each refused
    in one line naming what came, what was expected and what to do; nothing written."""
    model, mix = mix_parts
    out = tmp_path / "web"

    def refused(match, folder):
        with pytest.raises(KerasSeqError, match=match) as err:
            export_web([model], out, mix=folder / "mix.json")
        assert "\n" not in str(err.value) and not out.exists()
        return str(err.value)

    lonely = tmp_path / "lonely"
    lonely.mkdir()
    (lonely / "mix.json").write_text(mix.read_text())
    said = refused(r"names the n-gram 'kn3.q8.bin', but .*kn3.q8.bin is missing", lonely)
    assert "put the n-gram file beside mix.json" in said
    lines = [["zz", "yy", "xx"], ["xx", "zz"]] * 5
    for name, metadata, match in (
            ("other_tokenizer", {"tokenizer_fingerprint": "word:other"},
             r"trained on tokenizer word:other, the site's models on word:.*; mix the n-gram"),
            ("other_vocabulary", {}, r"knows 2 of the model's \d+ tokens: .*another vocabulary")):
        folder = tmp_path / name
        folder.mkdir()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            write_compact(train_kneser_ney(lines, order=2, metadata=metadata),
                          folder / "kn3.q8.bin")
        (folder / "mix.json").write_text(mix.read_text())
        refused(match, folder)
