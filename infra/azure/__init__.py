"""Azure: AKS with GPU pools on InfiniBand, NetApp Files, Blob checkpoints (issue 5).

The component is infra/azure/component.py (as in every cloud package); this file imports
nothing, so a module of the package never imports back through it and no SDK loads with it.
"""
