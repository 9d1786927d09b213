"""``keras-seq export web``: a static site that runs exported step models in a browser.

The site is a page (``index.html``), its JavaScript modules (the app, the step-model runner
and the tokenizer, from ``keras_seq/web/``), the models, one ``tokenizer.json`` and
``site.json`` (each model's file, size, sha256 and exporter metadata), plus LiteRT.js
(``@litertjs/core``, pinned in ``keras_seq/web/package.json`` and installed from npm by
``make web-deps``) copied in, so the site works offline and from any static server that
sends the cross-origin-isolation headers threaded Wasm needs (``keras-seq demo --web``
does)::

    web/
      index.html  app.js  lm.js  tokenizer.js  style.css
      site.json  tokenizer.json
      models/step_dynamic.tflite  models/step_float32.tflite ...
      litert/core/index.js  litert/wasm-utils/index.js  litert/wasm/*.wasm|*.js
      mix/mix.json  mix/kn3.q8.bin           (with ``mix=``)

With ``mix=`` (a ``mix.json`` of :mod:`keras_seq.runtime.mixture`, its n-gram beside it)
the page suggests from the mixture of the step model, the compact n-gram and a cache of the
words typed, as :class:`~keras_seq.runtime.mixture.MixedLM` does (``mix.js``, ``ngram.js``).

No TensorFlow here: the models are checked against their metadata (hash, tokenizer
fingerprint) and copied.

Example::

    export_web(["runs/pipeline/tflite/step_dynamic.tflite"], "runs/pipeline/web")
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

from keras_seq.atomic import file_sha256, write_json_atomic
from keras_seq.data.tokenizers import load_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.keyboard import SUGGESTIONS
from keras_seq.ngram.compact import read_compact
from keras_seq.runtime.metadata import read_metadata
from keras_seq.runtime.mixture import MixSpec, NgramOnModelVocab
from keras_seq.tables import print_json

WEB_SOURCES = Path(__file__).resolve().parent.parent / "web"
PAGE_FILES = ("index.html", "app.js", "lm.js", "tokenizer.js", "mix.js", "ngram.js",
              "style.css")
LITERT_ENV = "KERAS_SEQ_LITERT_JS"
# The Wasm builds the page may load: plain, threaded, a fallback for browsers without
# relaxed SIMD ("compat") and JSPI (what LiteRT.js's WebGPU path needs).
WASM_FILES = ("litert_wasm_internal", "litert_wasm_threaded_internal",
              "litert_wasm_compat_internal", "litert_wasm_jspi_internal")
STREAMED_GRAPHS = ("step", "step_fused")


def pinned_litert_version() -> str:
    """The ``@litertjs/core`` version ``keras_seq/web/package.json`` pins."""
    package = json.loads((WEB_SOURCES / "package.json").read_text())
    return package["dependencies"]["@litertjs/core"]


def find_litert_js(path: str | Path | None = None) -> Path:
    """The installed ``@litertjs`` folder (holding ``core/`` and ``wasm-utils/``).

    Looked up in order: ``path``, ``$KERAS_SEQ_LITERT_JS``, then ``keras_seq/web/node_modules``
    (where ``make web-deps`` installs it). Its version must be the pinned one.
    """
    candidates = [Path(p) for p in (path, os.environ.get(LITERT_ENV)) if p]
    candidates.append(WEB_SOURCES / "node_modules" / "@litertjs")
    for candidate in candidates:
        if (candidate / "core" / "package.json").is_file():
            break
    else:
        raise KerasSeqError(
            "LiteRT.js (@litertjs/core) is not installed: looked in "
            f"{', '.join(str(c) for c in candidates)}. Install it with `make web-deps` (npm ci in "
            f"keras_seq/web), or pass --litert-js pointing at a node_modules/@litertjs folder")
    version = json.loads((candidate / "core" / "package.json").read_text())["version"]
    if version != pinned_litert_version():
        raise KerasSeqError(
            f"{candidate / 'core'} is @litertjs/core {version}; keras-seq is tested with "
            f"{pinned_litert_version()} (keras_seq/web/package.json). Run `make web-deps`")
    return candidate


def _model_entry(path: Path) -> dict:
    meta = read_metadata(path)  # checks the hash and the graph name
    if meta["graph"] not in STREAMED_GRAPHS:
        raise KerasSeqError(
            f"{path.name} is a {meta['graph']!r} model; the page streams step models "
            "(step_*.tflite written by `keras-seq export tflite`)")
    name = path.stem
    return {"name": name, "file": f"models/{path.name}", "size": path.stat().st_size,
            "sha256": meta["tflite_sha256"], "meta": meta}


def step_models(folder: str | Path, graphs=("step",)) -> list[Path]:
    """The step ``.tflite`` files of an export folder whose graph is in ``graphs``.

    The page carries the state in JavaScript, so it streams ``step`` models; LiteRT.js 2.5.3
    cannot load the fused-LSTM ``step_fused`` ones ("Failed to load model from buffer",
    measured by ``keras-seq bench web``), which only the benchmark asks for.
    """
    found = [m for m in sorted(Path(folder).glob("step_*.tflite"))
             if read_metadata(m)["graph"] in graphs]
    if not found:
        raise KerasSeqError(f"no step_*.tflite in {folder}; export one with `keras-seq export "
                            "tflite --graphs step`")
    return found


def export_web(models, out_dir, default: str | None = None, litert_js=None,
               top: int = 3, mix=None) -> dict:
    """Write the site for ``models`` (paths of step ``.tflite`` files) into ``out_dir``.

    ``default`` names the model the page opens with (a file stem, e.g. ``step_dynamic``;
    default: the first). ``mix``: a ``mix.json`` (the pipeline's ``demo/mix.json``) whose
    mixture the page suggests from; refused unless its n-gram is beside it and on the
    models' vocabulary. Returns the ``site.json`` written.
    """
    models = [Path(m) for m in models]
    if not models:
        raise KerasSeqError("no model to put on the page; pass at least one step .tflite")
    litert = find_litert_js(litert_js)
    entries = [_model_entry(m) for m in models]
    names = [e["name"] for e in entries]
    if len(set(names)) != len(names):
        raise KerasSeqError(f"two models share a file name ({names}); the site keeps them "
                            "in one folder")
    tokenizer = _shared_tokenizer(models, entries)
    default = default or names[0]
    if default not in names:
        raise KerasSeqError(f"default model {default!r} is not among {names}")
    if top not in SUGGESTIONS:
        raise KerasSeqError(f"top must be {SUGGESTIONS} suggestions, got {top}")
    mixture = _checked_mix(Path(mix), tokenizer) if mix is not None else None

    out = Path(out_dir)
    if out.exists() and not (out / "site.json").is_file() and any(out.iterdir()):
        raise KerasSeqError(f"{out} exists and is not a keras-seq site; pick an empty or new "
                            "folder (nothing there was changed)")
    (out / "models").mkdir(parents=True, exist_ok=True)
    for name in PAGE_FILES:
        shutil.copy2(WEB_SOURCES / name, out / name)
    for model, entry in zip(models, entries):
        shutil.copy2(model, out / entry["file"])
        if file_sha256(out / entry["file"]) != entry["sha256"]:
            raise KerasSeqError(f"copying {model} to {out / entry['file']} changed it; check "
                                "the disk")
    shutil.copy2(tokenizer, out / "tokenizer.json")
    _copy_litert(litert, out / "litert")
    site = {"format": "keras-seq-web", "version": 1, "default": default, "top": top,
            "tokenizer": "tokenizer.json", "litert_js": pinned_litert_version(),
            "models": entries}
    if mixture is not None:
        site["mix"] = _copy_mix(*mixture, out)
    write_json_atomic(out / "site.json", site)  # last: a site with site.json is complete
    return site


def _shared_tokenizer(models: list[Path], entries: list[dict]) -> Path:
    fingerprints = {e["meta"]["tokenizer_fingerprint"] for e in entries}
    if len(fingerprints) != 1:
        raise KerasSeqError(f"the models use different tokenizers ({sorted(fingerprints)}); "
                            "one page serves models of one vocabulary")
    path = models[0].parent / entries[0]["meta"].get("tokenizer_file", "tokenizer.json")
    if not path.is_file():
        raise KerasSeqError(f"{path} is missing: the page needs the tokenizer exported with "
                            f"{models[0].name}")
    data = json.loads(path.read_text())
    if data.get("fingerprint") not in fingerprints:
        raise KerasSeqError(f"{path} has fingerprint {data.get('fingerprint')}, the models "
                            f"expect {fingerprints.pop()}; use the tokenizer exported with them")
    if data.get("kind") not in ("word", "char"):
        raise KerasSeqError(f"the page tokenizes word and char vocabularies in JavaScript; "
                            f"{path} is {data.get('kind')!r}")
    return path


def _checked_mix(mix: Path, tokenizer_path: Path):
    """``(spec, n-gram path or None)`` of ``mix``, refused unless the page can mix it with
    the models of ``tokenizer_path``: a word vocabulary, and an n-gram (when weighted) that
    is readable, beside it, and trained on the models' tokens."""
    spec = MixSpec.load(mix)
    tokenizer = load_tokenizer(tokenizer_path)
    if tokenizer.kind != "word":
        raise KerasSeqError(f"--mix {mix}: a mixture works on words, the site's models read "
                            f"{tokenizer.kind} tokens; export the site of a word model, or "
                            "without --mix")
    if not spec.weights["ngram"]:
        return spec, None
    path = mix.parent / spec.ngram
    if not path.is_file():
        raise KerasSeqError(f"--mix {mix} names the n-gram {spec.ngram!r}, but {path} is "
                            "missing; put the n-gram file beside mix.json (the pipeline "
                            "writes both into demo/)")
    ngram = read_compact(path)
    trained_on = ngram.metadata.get("tokenizer_fingerprint")
    if trained_on is not None and trained_on != tokenizer.fingerprint:
        raise KerasSeqError(f"--mix {mix}: its n-gram {path.name} was trained on tokenizer "
                            f"{trained_on}, the site's models on {tokenizer.fingerprint}; mix "
                            "the n-gram trained on the models' tokens (the pipeline's "
                            "demo/mix.json beside demo/model.tflite)")
    try:
        NgramOnModelVocab(ngram, tokenizer)
    except KerasSeqError as err:
        raise KerasSeqError(f"--mix {mix}: its n-gram {path.name}: {err}") from None
    return spec, path


def _copy_mix(spec, ngram_path: Path | None, out: Path) -> dict:
    """``mix/mix.json`` and its n-gram in the site, and their entry in ``site.json``."""
    (out / "mix").mkdir(exist_ok=True)
    entry = {"file": "mix/mix.json", "ngram": None}
    if ngram_path is not None:
        entry["ngram"] = {"file": f"mix/{ngram_path.name}"}
        shutil.copy2(ngram_path, out / entry["ngram"]["file"])
    # the n-gram beside it under its own name (None when unweighted: the page never reads it)
    replace(spec, ngram=ngram_path.name if ngram_path else None).save(out / entry["file"])
    for item in (entry, entry["ngram"]):
        if item is not None:
            item["size"] = (out / item["file"]).stat().st_size
            item["sha256"] = file_sha256(out / item["file"])
    entry["weights"], entry["half_life"] = spec.weights, spec.half_life
    return entry


def _copy_litert(litert: Path, target: Path) -> None:
    (target / "core").mkdir(parents=True, exist_ok=True)
    (target / "wasm-utils").mkdir(parents=True, exist_ok=True)
    (target / "wasm").mkdir(parents=True, exist_ok=True)
    shutil.copy2(litert / "core" / "dist" / "index.js", target / "core" / "index.js")
    shutil.copy2(litert / "wasm-utils" / "dist" / "index.js", target / "wasm-utils" / "index.js")
    for stem in WASM_FILES:
        for suffix in (".js", ".wasm"):
            shutil.copy2(litert / "core" / "wasm" / f"{stem}{suffix}",
                         target / "wasm" / f"{stem}{suffix}")


def run_web(args) -> int:
    """``keras-seq export web``: the site, and one line (or ``--json``: what it holds)."""
    models = step_models(args.tflite_dir) if args.tflite_dir else [Path(m) for m in args.model]
    default = args.default
    if default is None and any(m.stem == "step_dynamic" for m in models):
        default = "step_dynamic"
    site = export_web(models, args.out, default=default, litert_js=args.litert_js,
                      top=args.top, mix=getattr(args, "mix", None))
    if args.json:
        print_json(site)
    else:
        mixed = f", suggesting from the mixture of {site['mix']['file']}" if "mix" in site else ""
        print(f"wrote the site to {args.out}: {len(site['models'])} model(s), opens with "
              f"{site['default']}{mixed}. Serve it: keras-seq demo --web --site {args.out}")
    return 0
