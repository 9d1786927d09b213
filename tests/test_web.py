"""The browser demo in a real browser: headless Chromium (Debian's package) driven by
Playwright opens the site `keras-seq export web` wrote, served by `keras-seq demo --web`'s
server, types a prefix key by key, and the page's suggestions must be LiteRT Python's on the
same model and prefix, for every step variant. Also: the JavaScript tokenizer gives the
Python ids on hostile strings, and a missing or damaged model shows an error on the page.

Skips, naming the reason, where Chromium, Playwright or LiteRT.js (``make web-deps``) is
missing; CI installs all three.
"""

import json
import shutil

import numpy as np
import pytest

from keras_seq.data.tokenizers import load_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.export.web import export_web, step_models
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.runtime.web_server import SiteServer
from tests.fixtures.lm_runs import learned_run
from tests.fixtures.web_page import open_page
from tests.prereqs import needs
from tests.shared_cache import shared_folder

VARIANTS = ("float32", "float16", "dynamic", "int8", "int16x8", "int4", "dynamic_shared")
# a quantization-aware fine-tune of the same run, exported in the variant it trained for
# (integer weights and activations from learned ranges; a QAT int4 file has the ops of
# step_int4, only other integers)
QAT_MODELS = ("int8_qat",)
# The page and LiteRT Python run the same file on XNNPACK (Wasm SIMD in the browser, x86
# here): the largest |Δp| measured over these prefixes was 8.6e-8 (float16); every other
# variant, int4 and dynamic_shared included, stayed below 8e-8.
PROB_ATOL = 1e-6
PREFIXES = ("the ", "a big ", "the small red c", "a dog sat on the big red ")
HOSTILE = ("", "   ", "\n\n", "The Cat SAT.", "don't stop!!", "naïve café — déjà vu",
           "ΟΔΟΣ Σ", "İstanbul", "日本語のテキスト", "emoji 🙂👍🏽 end", "tab\tsep\r\nline",
           "a <unk> b <UNK>", "x\x1ey\x1fz", "zebra quokka", "under_score it's 42 ½ ³",
           "trailing space ", "no newline", "ends\n", "\u00a0nbsp\u2003em", "Ǆemo ǅ",
           "ﬁne ligature", "a" * 300)


pytestmark = needs("chromium", "litertjs")


@pytest.fixture(scope="module")
def exported_steps(tmp_path_factory):
    """The learned toy LSTM exported as every step variant (no sequence or fused graphs),
    once per test run."""
    def build(out):
        from keras_seq.export.tflite import export_tflite
        from keras_seq.tasks.lm.task import finetune_lm

        quiet = {"parity_tokens": 40, "val_tokens": 100, "printer": lambda *a: None}
        run = learned_run(tmp_path_factory)
        export_tflite(run, out, variants=VARIANTS, graphs=("step",), seq_length=8,
                      calib_tokens=40, **quiet)
        for name in QAT_MODELS:
            mode = name.split("_")[0]
            finetune_lm(run, out / f"run_{mode}", mode, epochs=1, lr=3e-3,
                        printer=lambda *a: None)
            export_tflite(out / f"run_{mode}", out / mode, variants=[mode], graphs=("step",),
                          **quiet)
            for suffix in (".tflite", ".json"):  # beside the others, under its own name
                shutil.copy2(out / mode / f"step_{mode}{suffix}", out / f"step_{name}{suffix}")

    return shared_folder(tmp_path_factory, "web_tflite", build)


@pytest.fixture(scope="module")
def site(exported_steps, tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "web"
    export_web(step_models(exported_steps), out, default="step_dynamic")
    return out


@pytest.fixture(scope="module")
def server(site):
    with SiteServer(site, port=0) as srv:
        yield srv


def _python_suggestions(model, text, k=3):
    """What LiteRT Python suggests for ``text`` typed on the page: the complete words are the
    context, a word still being typed (no space after it) filters the suggestions."""
    lm = LiteRTLM(model)
    tok = lm.tokenizer
    tokens = tok.tokens(text)
    partial = ""
    if tokens and not text[-1].isspace() and (text[-1].isalnum() or text[-1] in "_'"):
        partial = tokens.pop()
    lm.reset()
    lm.feed_ids(tok.tokens_to_ids(tokens))
    return lm.suggest(k, prefix=partial.lower())


@pytest.mark.parametrize("variant", VARIANTS + QAT_MODELS)
def test_typed_suggestions_equal_litert_python(browser, server, exported_steps, variant):
    page, errors = open_page(browser, f"{server.url}index.html?model=step_{variant}")
    info = page.evaluate("window.kerasSeq.ready")
    assert info["variant"] == variant.removesuffix("_qat")
    assert info["crossOriginIsolated"] and info["fastPath"]
    for prefix in PREFIXES:
        page.fill("#input", "")
        page.type("#input", prefix)  # key by key: every keystroke updates the strip
        page.wait_for_selector(f"#suggestions[data-text={json.dumps(prefix)}]")
        buttons = page.query_selector_all("#suggestions .suggestion")
        shown = [(b.get_attribute("data-token"), float(b.get_attribute("data-prob")))
                 for b in buttons]
        expected = _python_suggestions(exported_steps / f"step_{variant}.tflite", prefix)
        assert [t for t, _ in shown] == [t for t, _ in expected], (variant, prefix)
        np.testing.assert_allclose([p for _, p in shown], [p for _, p in expected],
                                   atol=PROB_ATOL, rtol=0)
        assert "<pad>" not in [t for t, _ in shown] and "<unk>" not in [t for t, _ in shown]
    assert "µs" in page.inner_text("#latency")
    assert not errors and page.is_hidden("#error")
    page.close()


def test_the_page_counts_how_often_the_typed_word_was_suggested(browser, server,
                                                                 exported_steps):
    """The running hit rate: each word typed, against the strip shown before its first
    letter (what LiteRT Python suggests after the words before it)."""
    text = "a dog sat on the big red mat "
    page, errors = open_page(browser, f"{server.url}index.html?model=step_dynamic")
    page.evaluate("window.kerasSeq.ready")
    page.type("#input", text)
    page.wait_for_selector(f"#suggestions[data-text={json.dumps(text)}]")
    shown = {key: int(page.get_attribute("#hits", f"data-{key}"))
             for key in ("words", "top1", "top3")}
    lm = LiteRTLM(exported_steps / "step_dynamic.tflite")
    words = lm.tokenizer.tokens(text)
    top1 = top3 = 0
    for i, word in enumerate(words):
        lm.reset()
        lm.feed_ids(lm.tokenizer.tokens_to_ids(words[:i]))
        strip = [token for token, _ in lm.suggest(3)]
        top1 += strip[0] == word
        top3 += word in strip
    assert shown == {"words": len(words), "top1": top1, "top3": top3}
    assert top3 > top1 > 0  # the toy corpus is predictable: both counts mean something
    assert "the first suggestion" in page.inner_text("#hits") and not errors
    page.close()


def test_editing_back_into_earlier_words_suggests_what_python_does(browser, server,
                                                                   exported_steps):
    """Backspace into an earlier word and type on: the page restores the state it kept for
    that word (snapshots from a pool, given back when the text is cut) and reads on; each
    strip equals LiteRT Python's for the text as it stands."""
    page, errors = open_page(browser, f"{server.url}index.html?model=step_dynamic")
    page.evaluate("window.kerasSeq.ready")
    model = exported_steps / "step_dynamic.tflite"
    text = ""
    # back to a word boundary kept before (after "on", after "the", after "big"), into a
    # word (a partial prefix), and to the start
    for keys in ("a dog sat on the big ", "Backspace*8", "the red mat ", "Backspace*8",
                 "big red ", "Backspace*4", "Backspace*6", "dog a", "Backspace*30",
                 "the small dog "):
        if keys.startswith("Backspace"):
            for _ in range(int(keys.split("*")[1])):
                page.press("#input", "Backspace")
            text = text[:-int(keys.split("*")[1])]
        else:
            page.type("#input", keys)
            text += keys
        page.wait_for_selector(f"#suggestions[data-text={json.dumps(text)}]")
        shown = [b.get_attribute("data-token")
                 for b in page.query_selector_all("#suggestions .suggestion")]
        assert shown == [t for t, _ in _python_suggestions(model, text)], text
    assert not errors and page.is_hidden("#error")
    page.close()


def test_the_pages_normaliser_is_float64_log_sum_exp(browser, server):
    """lm.js's logSumExp (a table and a polynomial for exp) against Math.exp in float64,
    on logits from narrow to wide, with -1e30 entries that vanish."""
    page, _ = open_page(browser, f"{server.url}index.html")
    page.evaluate("window.kerasSeq.ready")
    worst = page.evaluate("""async () => {
      const {logSumExp} = await import('./lm.js');
      let worst = 0, seed = 7;
      const random = () => ((seed = (seed * 16807) % 2147483647) / 2147483647);
      for (const scale of [0.01, 1, 8, 40, 300]) {
        for (let trial = 0; trial < 20; trial++) {
          const v = Float32Array.from({length: 5000}, () => (random() - 0.5) * 2 * scale);
          v[trial] = -1e30;
          let max = -Infinity, sum = 0;
          for (const x of v) max = Math.max(max, x);
          for (const x of v) sum += Math.exp(x - max);
          worst = Math.max(worst, Math.abs(logSumExp(v) - (max + Math.log(sum))));
        }
      }
      return worst;
    }""")
    assert worst < 1e-8  # a probability off by < 1e-8 relative; float32 logits carry 6e-8
    page.close()


def test_page_generates_and_benchmarks(browser, server):
    page, errors = open_page(browser, f"{server.url}index.html")
    page.evaluate("window.kerasSeq.ready")
    page.type("#input", "the ")
    page.fill("#ntokens", "12")
    page.click("#generate")
    page.wait_for_selector("#genstats:has-text('12 tokens')")
    words = page.inner_text("#generated").split()
    assert len(words) >= 8 and "<unk>" not in words and "<pad>" not in words
    micros = page.evaluate("window.kerasSeq.benchmark({steps: 30, warmup: 5})")
    assert len(micros) == 30 and all(m > 0 for m in micros)
    keys = page.evaluate("window.kerasSeq.benchmarkKeystrokes({ids: [4, 5, 6, 7, 8, 9], "
                         "prefixes: ['t', '', 'a', 'th', 'zz', ''], warmup: 2})")
    assert len(keys) == 4 and all(m > 0 for m in keys)
    assert not errors
    page.close()


def test_javascript_tokenizer_gives_python_ids(browser, server, site):
    tok = load_tokenizer(site / "tokenizer.json")
    page, _ = open_page(browser, f"{server.url}index.html")
    page.evaluate("window.kerasSeq.ready")
    for text in HOSTILE:
        js = page.evaluate("(t) => window.kerasSeq.tokenize(t)", text)
        assert js == tok.encode(text).tolist(), repr(text)
    # A lone surrogate: refused on both sides, never encoded.
    with pytest.raises(Exception, match="lone surrogate"):
        tok.encode("a\ud800")
    message = page.evaluate("window.kerasSeq.tokenize('a' + String.fromCharCode(0xd800))"
                            ".then(() => 'encoded', (e) => e.message)")
    assert "lone surrogate U+D800" in message
    page.close()


def test_javascript_char_tokenizer_gives_python_ids(browser, server):
    """The char rule, checked in the page's module on a char vocabulary."""
    from keras_seq.data.tokenizers import make_tokenizer

    tok = make_tokenizer("char").fit("the cat sat on the mat.\nNaïve 🙂!\n")
    page, _ = open_page(browser, f"{server.url}index.html")
    page.evaluate("window.kerasSeq.ready")
    for text in HOSTILE:
        js = page.evaluate("async ([data, t]) => { const m = await import('./tokenizer.js');"
                           " return Array.from(m.Tokenizer.fromJSON(data).encode(t)); }",
                           [tok.to_dict(), text])
        assert js == tok.encode(text).tolist(), repr(text)
    page.close()


def _damaged_site(site, tmp_path, damage):
    copy = tmp_path / "web"
    shutil.copytree(site, copy)
    damage(copy)
    return copy


def _page_error(browser, site_dir, query=""):
    with SiteServer(site_dir, port=0) as srv:
        page, _ = open_page(browser, f"{srv.url}index.html{query}")
        page.wait_for_selector("#error:not([hidden])", timeout=30_000)
        text = page.inner_text("#error")
        assert page.evaluate("document.body.dataset.state") == "error"
        page.close()
    return text


def test_missing_model_shows_an_error(browser, site, tmp_path):
    broken = _damaged_site(site, tmp_path, lambda d: (d / "models/step_dynamic.tflite").unlink())
    text = _page_error(browser, broken)
    assert "models/step_dynamic.tflite is missing (HTTP 404)" in text


def test_damaged_model_shows_an_error(browser, site, tmp_path):
    def truncate(d):
        path = d / "models/step_dynamic.tflite"
        path.write_bytes(path.read_bytes()[:1000])

    text = _page_error(browser, _damaged_site(site, tmp_path, truncate))
    assert "is damaged: 1000 bytes" in text


def test_unloadable_model_shows_litert_js_error(browser, site, tmp_path):
    """A file whose hash the site vouches for, but which is not a model: LiteRT.js's own
    error reaches the page."""
    def corrupt_and_rehash(d):
        import hashlib

        path = d / "models/step_dynamic.tflite"
        path.write_bytes(b"\0" * 4096)
        meta = json.loads((d / "site.json").read_text())
        for m in meta["models"]:
            if m["name"] == "step_dynamic":
                m["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        (d / "site.json").write_text(json.dumps(meta))

    text = _page_error(browser, _damaged_site(site, tmp_path, corrupt_and_rehash))
    assert "LiteRT.js cannot load models/step_dynamic.tflite" in text


def test_unknown_model_and_missing_site(browser, site, tmp_path):
    assert "this site has no model 'nope'" in _page_error(browser, site, "?model=nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "site.json").write_text("{}")
    shutil.copy(site / "index.html", empty)
    for name in ("app.js", "lm.js", "tokenizer.js"):
        shutil.copy(site / name, empty)
    shutil.copytree(site / "litert", empty / "litert")
    (empty / "site.json").unlink()
    with pytest.raises(KerasSeqError, match="not a keras-seq site"):
        SiteServer(empty, port=0)


def test_bench_web_measures_browser_and_native(browser, exported_steps, tmp_path):
    from keras_seq.benchmarks.web import format_web_report, plot_web_report, run_web_benchmark

    shot = tmp_path / "page.png"
    report = run_web_benchmark(exported_steps, steps=10, warmup=2, rounds=2, threads=(1, 2),
                               browser=browser,
                               webgpu=False, names=["step_dynamic"], screenshot=shot,
                               screenshot_text="the ", printer=lambda m: None)
    (row,) = report["rows"]
    assert set(row["cells"]) == set(row["keys"]) == {"native ×1", "native ×2", "wasm ×1",
                                                      "wasm ×2"}
    for cell in [*row["cells"].values(), *row["keys"].values()]:
        assert 0 < cell["min_us"] <= cell["p50_us"] <= cell["max_us"]
    assert set(row["key_ratio"]) == {"wasm ×1", "wasm ×2"}
    ratio = row["key_ratio"]["wasm ×1"]
    assert 0 < ratio["min"] <= ratio["p50"] <= ratio["max"]
    assert report["typed_words"] == 12
    text = format_web_report(report)
    assert "| step_dynamic |" in text and "Keystroke path" in text and "÷ native ×1" in text
    assert plot_web_report(report, tmp_path / "b.png").stat().st_size > 1000
    assert shot.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(KerasSeqError, match="no step model"):
        run_web_benchmark(exported_steps, steps=10, names=["step_nope"], browser=browser)


def test_page_samplers_draw_from_pythons_distributions(browser, server):
    """Each sampler of the page, 4,000 seeded draws on fixed logits: the frequencies are the
    probabilities keras_seq.sampling gives (within 0.03), banned ids never come out."""
    from keras_seq.sampling import make_sampler, without_ids

    logits = [2.0, 1.5, 1.0, 0.2, -1.0, 3.0]
    banned = [5]
    page, _ = open_page(browser, f"{server.url}index.html")
    page.evaluate("window.kerasSeq.ready")
    for name, options in (("greedy", {}), ("temperature", {"temperature": 0.7}),
                          ("top-k", {"k": 2}), ("top-p", {"p": 0.8, "temperature": 1.3})):
        draws = page.evaluate(
            "async ([logits, options, banned]) => { const m = await import('./lm.js');"
            " const random = m.seededRandom(7); const out = [];"
            " for (let i = 0; i < 4000; i++) out.push(m.sampleToken(logits,"
            " {...options, banned, random})); return out; }",
            [logits, {"sampler": name, **options}, banned])
        masked = without_ids(np.array(logits), banned)  # what the Python demo samples from
        sampler = make_sampler(name, temperature=options.get("temperature", 1.0),
                               top_k=options.get("k", 10), top_p=options.get("p", 0.9))
        expected = (np.eye(len(logits))[int(np.argmax(masked))] if name == "greedy"
                    else sampler.probabilities(masked))
        freq = np.bincount(draws, minlength=len(logits)) / len(draws)
        np.testing.assert_allclose(freq, expected, atol=0.03, err_msg=name)
        assert freq[banned].sum() == 0
    page.close()
