"""Old import path, kept so notebooks and modules written before the move keep working: the
simulator, the FedAST / Sync schedulers and the FedAST trainer now live in :mod:`flkit.asyncfl`.
Import from there; this module goes once nothing imports it."""
from flkit.asyncfl import *  # noqa: F403
from flkit.asyncfl import __all__  # noqa: F401
