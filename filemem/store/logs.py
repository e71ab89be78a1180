"""The store's logger (``filemem``), with :mod:`logging` imported when something is logged:
a read that warns of nothing never loads it (it is a tenth of a cold read's imports)."""

from __future__ import annotations

from typing import Any, Final


class LazyLogger:
    """Forwards ``warning`` (and any other logger method) to ``logging.getLogger(name)``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        import logging

        return getattr(logging.getLogger(self.name), attr)

    def warning(self, msg: str, *args: Any) -> None:
        import logging

        logging.getLogger(self.name).warning(msg, *args, stacklevel=2)


log: Final = LazyLogger("filemem")
