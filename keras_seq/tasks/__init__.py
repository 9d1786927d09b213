"""Task shapes (LM, seq2seq, classify, tag, conditioned LM) plugged into the shared trainer."""
