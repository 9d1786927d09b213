"""Public-domain English texts from Debian's packages, for `keras-seq pipeline --data FILE`
on text it was not tuned on (issue 55; docs/export-and-on-device.md, "Other texts").

    python -m tools.public_texts --out texts            # all three
    python -m tools.public_texts --out texts kjv        # one

* ``kjv``, 4.3 MB: the King James Bible as the ``bible`` program of Debian's ``bible-kjv``
  prints it (chapter headings, verse numbers; its data is in ``bible-kjv-text``);
* ``jargon``, 1.4 MB: the Jargon File 4.4.7, from ``dict-jargon`` (dictd's gzip format);
* ``austen``, 4.0 MB: Jane Austen's six novels, from ``r-cran-janeaustenr`` (downloaded,
  not installed: no R needed).

All three are in the public domain (each package's ``copyright`` file says so). A missing
package is installed with ``apt-get`` (root, Debian's registry); each text is written as
UTF-8, one line per line of the source. The R package's novels are read from its lazy-load
database (``data/Rdata.rdb``: zlib-compressed objects in R's XDR serialization), of which
only character vectors are needed (:func:`r_strings`).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

TEXTS = ("kjv", "jargon", "austen")
#: the sha256 of each text as measured (Debian 12's packages); another is said, not refused
SHA256 = {"kjv": "82fa5f3788c6a9a010fb128a0f0bf588984b5888a82058520620eded59b033ea",
          "jargon": "6c8118c277d0b00736d406d4941b77b69932d6ab125f7179ff88fe12939cc19e",
          "austen": "65b434d16a8755142bfa95ba19c5f9abd0d30cf3dffe3b6793e834f9f56dcc96"}
R_CHARSXP, R_STRSXP = 9, 16
JANEAUSTENR_DATA = "usr/lib/R/site-library/janeaustenr/data/Rdata.rdb"


def _apt_install(package: str, command: str | None = None, path: str | None = None) -> None:
    """Install ``package`` unless ``command`` is on PATH or ``path`` exists."""
    if (command and shutil.which(command)) or (path and Path(path).exists()):
        return
    subprocess.run(["apt-get", "install", "-y", "-qq", package], check=True)


def kjv() -> str:
    """The King James Bible, Genesis 1:1 to Revelation 22:21, as the ``bible`` program
    prints it: chapter headings, verse numbers, lines wrapped at 80 columns."""
    _apt_install("bible-kjv", command="bible")
    return subprocess.run(["bible", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                          text=True).stdout


def jargon() -> str:
    """The Jargon File as dictd stores it (gzip)."""
    path = Path("/usr/share/dictd/jargon.dict.dz")
    _apt_install("dict-jargon", path=str(path))
    return gzip.decompress(path.read_bytes()).decode("utf-8")


def austen() -> str:
    """Jane Austen's six novels from ``r-cran-janeaustenr``'s data, in its order."""
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["apt-get", "download", "-qq", "r-cran-janeaustenr"], cwd=scratch,
                       check=True)
        deb = next(Path(scratch).glob("r-cran-janeaustenr_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(Path(scratch) / "x")], check=True)
        data = (Path(scratch) / "x" / JANEAUSTENR_DATA).read_bytes()
    return "".join("\n".join(novel) + "\n" for novel in r_lazy_load_strings(data))


def r_lazy_load_strings(data: bytes) -> list[list[str]]:
    """The character vectors of an R lazy-load database (``*.rdb``): objects one after the
    other, each a 4-byte length and a zlib stream of R's XDR serialization."""
    found, at = [], 0
    while at < len(data):
        inflate = zlib.decompressobj()
        blob = inflate.decompress(data[at + 4:])
        at = len(data) - len(inflate.unused_data)
        strings = r_strings(blob)
        if strings is not None:
            found.append(strings)
    return found


def r_strings(blob: bytes) -> list[str] | None:
    """The strings of a serialized R character vector (format 2 or 3, XDR); None for any
    other object.

    >>> head = b"X\\n" + struct.pack(">iii", 2, 0, 0)
    >>> item = struct.pack(">ii", R_STRSXP, 2) + struct.pack(">ii", R_CHARSXP, 2) + b"hi"
    >>> r_strings(head + item + struct.pack(">ii", R_CHARSXP, -1))
    ['hi', '']
    """
    if blob[:2] != b"X\n":
        raise ValueError(f"not R's XDR serialization (starts {blob[:2]!r})")
    version, = struct.unpack_from(">i", blob, 2)
    at = 14
    if version == 3:  # the native encoding's name follows
        at += 4 + struct.unpack_from(">i", blob, at)[0]
    flags, length = struct.unpack_from(">ii", blob, at)
    if flags & 0xFF != R_STRSXP:
        return None
    at += 8
    strings = []
    for _ in range(length):
        _, size = struct.unpack_from(">ii", blob, at)
        at += 8
        strings.append("" if size < 0 else blob[at:at + size].decode("utf-8", "replace"))
        at += max(size, 0)
    return strings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder the .txt files go to")
    parser.add_argument("texts", nargs="*", metavar="NAME",
                        help=f"any of {', '.join(TEXTS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.texts) - set(TEXTS))
    if unknown:
        parser.error(f"unknown text(s) {', '.join(unknown)}; choose from {', '.join(TEXTS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.texts or TEXTS:
        text = {"kjv": kjv, "jargon": jargon, "austen": austen}[name]()
        path = out / f"{name}.txt"
        path.write_bytes(text.encode("utf-8"))
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        same = ("the text measured" if digest == SHA256[name] else
                f"NOT the text measured (sha256 {SHA256[name][:12]}…): another package version")
        print(f"{path}: {path.stat().st_size:,} bytes, {len(text.split()):,} words, sha256 "
              f"{digest[:12]}…, {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
