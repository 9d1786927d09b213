"""What a built keras-seq wheel declares and carries (scripts/package_check.sh).

``python scripts/wheel_contents.py WHEEL`` checks that the wheel's METADATA lists the
dependencies and extras of pyproject.toml, that the core (no extra) leaves out the
packages that only an extra's features need, and that the package data is inside (the
bundled corpus, the browser page's sources, the console script); exits 1 naming what is
wrong.
``--extra NAME`` prints that extra's requirements instead, one per word, markers removed.
"""

from __future__ import annotations

import argparse
import email.parser
import re
import sys
import zipfile

PACKAGE_DATA = ("keras_seq/data/corpora/tinyshakespeare.txt.xz", "keras_seq/web/index.html",
                "keras_seq/web/app.js", "keras_seq/web/lm.js", "keras_seq/web/tokenizer.js",
                "keras_seq/web/style.css", "keras_seq/web/package.json",
                "keras_seq/web/package-lock.json")
CORE = ("tensorflow", "keras", "numpy", "ai-edge-litert")
# only in extras: a plain `pip install keras-seq` (layers, training, export) goes without them
NOT_CORE = ("matplotlib", "sacrebleu", "conllu", "tensorboard", "tensorflow-text")
EXTRAS = ("plot", "seq2seq", "conllu", "tensorboard", "subword", "litert", "quantize", "serve",
          "jax", "torch", "web", "all", "test", "dev")


def metadata(wheel: zipfile.ZipFile):
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    return email.parser.Parser().parsestr(wheel.read(name).decode())


def extra_requirements(meta, extra: str) -> list[str]:
    """The requirements of ``extra`` (``Requires-Dist: X; extra == "litert"``), no marker."""
    found = []
    for line in meta.get_all("Requires-Dist") or []:
        requirement, _, marker = line.partition(";")
        if re.search(rf"extra\s*==\s*['\"]{re.escape(extra)}['\"]", marker):
            found.append(requirement.strip().replace(" ", ""))
    return found


def problems(wheel: zipfile.ZipFile) -> list[str]:
    meta, names = metadata(wheel), set(wheel.namelist())
    requires = meta.get_all("Requires-Dist") or []
    core = {re.split(r"[<>=!~; \[]", r, maxsplit=1)[0].lower() for r in requires
            if "extra ==" not in r}
    found = [f"no dependency on {name}" for name in CORE if name not in core]
    found += [f"{name} is a core dependency (it belongs in an extra)" for name in NOT_CORE
              if name in core]
    extras = set(meta.get_all("Provides-Extra") or [])
    found += [f"no extra {name!r}" for name in EXTRAS if name not in extras]
    found += [f"{path} is not in the wheel" for path in PACKAGE_DATA if path not in names]
    scripts = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    if not scripts or "keras-seq = keras_seq.cli:main" not in wheel.read(scripts[0]).decode():
        found.append("no keras-seq console script")
    if any("node_modules" in n for n in names):
        found.append("node_modules is in the wheel (LiteRT.js is installed apart, 38 MB)")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel")
    parser.add_argument("--extra", help="print this extra's requirements and exit")
    args = parser.parse_args(argv)
    with zipfile.ZipFile(args.wheel) as wheel:
        if args.extra:
            print(" ".join(extra_requirements(metadata(wheel), args.extra)))
            return 0
        found = problems(wheel)
        meta = metadata(wheel)
    if found:
        print("the wheel is incomplete:\n  " + "\n  ".join(found))
        return 1
    print(f"{args.wheel}: {len(meta.get_all('Requires-Dist'))} requirements, extras "
          f"{', '.join(meta.get_all('Provides-Extra'))}; package data present")
    return 0


if __name__ == "__main__":
    sys.exit(main())
