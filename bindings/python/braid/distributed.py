"""braid as a torch.distributed backend.

    import braid.distributed          # registers the backend "braid"
    torch.distributed.init_process_group("braid")

all_reduce, reduce_scatter, all_gather, broadcast and barrier then run
through braid's dispatcher (CPU tensors).  Each process group meets through
the Store torch gives it, so init_method env://, tcp:// and file:// and
new_group() all work; under torchrun nothing needs to be set.
"""
import torch.distributed as _dist  # before the extension: its types

from . import _torch_backend

BACKEND = "braid"

if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND,
                                   _torch_backend.create_process_group)
