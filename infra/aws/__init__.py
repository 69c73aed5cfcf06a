"""AWS: EKS with GPU managed node groups, EFA, FSx for Lustre and an S3 checkpoint bucket.

The component is infra/aws/component.py (as in every cloud package); this file imports
nothing, so a module of the package never imports back through it and no SDK loads with it.
"""
