"""Training: the run's setup, its state on disk, the loop, validation, and the hardware helpers."""
