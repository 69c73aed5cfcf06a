"""Training data: synthetic by default, Criteo (TSV or TorchRec .npy) from --dataset_path."""

from trainer.data.source import BatchSource, make_source

__all__ = ["BatchSource", "make_source"]
