"""Trainer processes started from a warm interpreter, so the suite pays torch's import once.

A trainer process spends ~4.5 s of CPU importing torch, TorchRec and fbgemm before its first
step, and the suite starts a few hundred of them (gangs, restarts, resumes, torchrun's ranks):
that import was most of `make test`'s CPU. Here one server per pytest process imports them once
(server.py) and forks a child for each `python -m trainer|trainer.launch|torch.distributed.run`
the tests or torchrun's agent start (popen.py: a `subprocess.Popen` whose child comes from the
server). The child is still a separate process running the real entry point with its own argv,
environment, working directory, standard streams, session and signals, as `python -m` would
run it; only the import is shared. Anything else (another interpreter or module, a changed
PYTHONPATH, LD_PRELOAD, other PYTHON* settings, more than one OpenMP thread) is started the
ordinary way, as is an entry point the child could not import from its own working directory
and PYTHONPATH, or a Popen with close_fds=False. `site/sitecustomize.py` carries the same into
processes a shell starts (the gang pods' `sh -c`), so their torchrun ranks are forked too.

What a forked child shares with the server, unlike a fresh process (none of it is a setting a
test varies today; a test that does must start its process the ordinary way):
- the str hash secret (every child iterates a set of strings in the same order);
- resource limits, user, CPU affinity and the dispositions of signals other than SIGHUP,
  SIGINT, SIGQUIT and SIGTERM (those are the requester's, as exec would leave them);
- the process group, unless start_new_session asks for a session of its own;
- its end: `os._exit` after atexit, without the interpreter's finalisation (the trainer leaves
  by `os._exit` itself).
WARM_PYTHON=0 turns the server off; WARM_PYTHON_DEBUG=1 has it print each refusal and why.
"""
