"""keras_seq.progress: a tqdm bar only where one shows, and no tqdm import otherwise."""

import io
import subprocess
import sys

from keras_seq.progress import NoBar, progress_bar


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_bar_shows_on_a_terminal_and_nowhere_else():
    shown = progress_bar(total=3, desc="counting", file=_Terminal())
    shown.update(3)
    shown.close()
    assert type(shown).__name__ == "tqdm" and "counting" in shown.fp.getvalue()
    assert isinstance(progress_bar(total=3, desc="x", file=io.StringIO()), NoBar)
    assert isinstance(progress_bar(total=3, desc="x", file=_Terminal(), disable=True), NoBar)


def test_a_small_ngram_run_off_a_terminal_never_imports_tqdm(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat\nthe dog sat\n" * 50, encoding="utf-8")
    code = ("import sys\nfrom keras_seq.cli import main\n"
            f"main(['ngram', 'train', '--data', {str(corpus)!r}, '--split-ratio', '100/0/0', "
            f"'--order', '3', '--out', {str(tmp_path / 'm.arpa')!r}])\n"
            "print('tqdm' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert (tmp_path / "m.arpa").is_file()
    assert run.stdout.strip().splitlines()[-1] == "False"
