"""The engine's IR: nodes (`nodes.py`) and their traversal (`walk.py`), one namespace."""
from .nodes import *  # noqa: F401,F403
from .nodes import Expr, Stmt  # noqa: F401
from .walk import *  # noqa: F401,F403
from .walk import REVERSED_COND  # noqa: F401
