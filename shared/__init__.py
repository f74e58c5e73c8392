"""backlog-scaler: the application package (planner, adapters, controller, formats, local tools)."""

import os as _os

if _os.path.exists(_os.path.join(_os.path.dirname(__file__), "_native.json")):
    from shared.native_guard import guard as _guard

    _guard()
