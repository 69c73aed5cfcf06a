"""Training data: synthetic by default, Criteo (TSV or TorchRec .npy) from --dataset_path.

Importing the package costs nothing: ``trainer.prepare``'s worker processes and the workload
layer read small modules of it (``layout``) without loading torch. ``make_source`` and
``BatchSource`` come from ``trainer.data.source``.
"""
