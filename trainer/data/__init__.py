"""Training data: synthetic by default, Criteo (TSV or TorchRec .npy) from --dataset_path.

Importing the package costs nothing: ``trainer.prepare``'s worker processes and the workload
layer read small modules of it (``layout``) without loading torch. ``make_source`` comes
from ``trainer.data.source``, which sits above the sources it chooses from (criteo.py,
synthetic.py); what they share, ``BatchSource`` and ``first_step``, is in ``stream.py``.
"""
