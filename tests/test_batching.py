import numpy as np
import pytest

from keras_seq.data.batching import (
    StreamLayout,
    pad_sequences,
    padded_batches,
    stream_arrays,
    stream_dataset,
)
from keras_seq.errors import DataError


@pytest.mark.parametrize("n,batch,bptt", [(1000, 4, 7), (1001, 3, 10), (64, 1, 5), (37, 2, 3)])
def test_rows_continue_across_batches(n, batch, bptt):
    ids = np.arange(n)
    x, y = stream_arrays(ids, batch, bptt)
    layout = StreamLayout(n, batch, bptt)
    assert x.shape == y.shape == (layout.num_batches * batch, bptt)
    batches = x.reshape(layout.num_batches, batch, bptt)
    for k in range(layout.num_batches - 1):
        # row i of batch k+1 starts right after row i of batch k ends
        np.testing.assert_array_equal(batches[k + 1][:, 0], batches[k][:, -1] + 1)
    np.testing.assert_array_equal(y, x + 1)  # targets are inputs shifted by one


@pytest.mark.parametrize("n,batch,bptt", [(1000, 4, 7), (1001, 3, 10), (97, 5, 2)])
def test_no_token_dropped_or_duplicated_except_remainder(n, batch, bptt):
    ids = np.arange(n)
    x, _ = stream_arrays(ids, batch, bptt)
    layout = StreamLayout(n, batch, bptt)
    served = np.sort(x.reshape(-1))
    assert len(np.unique(served)) == served.size  # nothing twice
    assert served.size == n - layout.unused_tokens
    row_len = n // batch
    expected_unused = n % batch + batch * (row_len - layout.num_batches * bptt)
    assert layout.unused_tokens == expected_unused
    assert layout.unused_tokens < batch * (bptt + 1) + batch


def test_stream_dataset_yields_same_batches():
    ids = np.arange(500)
    x, y = stream_arrays(ids, 4, 10)
    got = list(stream_dataset(ids, 4, 10))  # a PyDataset: batch k continues batch k - 1
    assert len(got) == len(x) // 4
    np.testing.assert_array_equal(got[3][0], x[12:16])
    np.testing.assert_array_equal(got[3][1], y[12:16])
    assert len(stream_dataset(ids, 4, 10, max_batches=2)) == 2


@pytest.mark.parametrize("batch,bptt,match", [(0, 5, "batch_size"), (2, 0, "bptt"),
                                               (50, 5, "too short.*Lower --batch-size")])
def test_bad_layouts(batch, bptt, match):
    with pytest.raises(DataError, match=match):
        stream_arrays(np.arange(100), batch, bptt)


def test_pad_sequences_right_and_left():
    ids, mask = pad_sequences([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert mask.tolist() == [[True, True, True], [True, False, False]]
    ids, mask = pad_sequences([[5, 6, 7], [8]], side="left", max_len=4)
    assert ids.tolist() == [[0, 5, 6, 7], [0, 0, 0, 8]]
    assert mask.sum() == 4
    with pytest.raises(DataError, match="empty"):
        pad_sequences([[1], []])
    with pytest.raises(DataError, match="max_len=2"):
        pad_sequences([[1, 2, 3]], max_len=2)


def test_padded_batches_cover_every_sequence_once():
    rng = np.random.default_rng(0)
    seqs = [list(range(1, rng.integers(2, 20))) for _ in range(53)]
    seen, padding = 0, 0
    for ids, mask in padded_batches(seqs, batch_size=8, bucket=True):
        assert ids.shape == mask.shape and ids.shape[0] <= 8
        seen += ids.shape[0]
        padding += (~mask).sum()
        assert (ids[~mask] == 0).all()
    assert seen == 53
    plain = sum((~m).sum() for _, m in padded_batches(seqs, batch_size=8, bucket=False))
    assert padding <= plain  # bucketing never wastes more padding
