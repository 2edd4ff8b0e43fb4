"""The Transformer, its training loss, and the checkpoint file that rebuilds it."""
