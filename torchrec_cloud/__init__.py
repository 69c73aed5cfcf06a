"""The user's command line: check a stack before paying, follow its job from a laptop.

`python -m torchrec_cloud <command> --stack aws|azure|gcp` (or `make check STACK=aws`,
`make status STACK=aws`). Reads the stack file and, for a running stack, the stack's outputs
and the cluster's API with the user's own credentials. Only `submit` and `cancel` write: a
submitted job and its objects (never a resource of the stack's Pulumi state).
"""
