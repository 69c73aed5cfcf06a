"""GCP: GKE with GPU pools, compact placement, Filestore and a Cloud Storage checkpoint bucket.

The component is infra/gcp/component.py (as in every cloud package); this file imports
nothing, so a module of the package never imports back through it and no SDK loads with it.
"""
