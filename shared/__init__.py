"""backlog-scaler: the application package (planner, adapters, controller, formats, local tools)."""

import os as _os

# The package's processes (the functions, the CLI) load no pydantic plugin: pydantic looks for them
# by reading the entry points of every installed distribution when its first model is built (~14 ms
# of a `plan` process, bench/plan_bench.py), and nothing here uses one. pydantic's own switch
# (pydantic/plugin/_loader.py, get_plugins); a value already in the environment is kept, and the
# processes these start inherit it.
_os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

if _os.path.exists(_os.path.join(_os.path.dirname(__file__), "_native.json")):
    from shared.native_guard import guard as _guard

    _guard()
