"""JSON files and log lines of a run directory (shared by the `tfktopic.runs` modules)."""

import json
import pathlib

from tfktopic.errors import TfktopicError
from tfktopic.atomic import write_json

__all__ = ["jsonable", "write_json", "read_json", "say"]


def jsonable(value):
    """Tuples -> lists, numpy scalars -> Python, recursively (JSON round trip)."""
    return json.loads(json.dumps(value, default=lambda v: v.item() if hasattr(v, "item")
                                 else list(v) if isinstance(v, (tuple, set)) else str(v)))




def read_json(path, what):
    path = pathlib.Path(path)
    if not path.exists():
        raise TfktopicError(f"{path}: no such file ({what})")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise TfktopicError(f"{path}: not valid JSON ({what}): {error}") from None
    if not isinstance(payload, dict):
        raise TfktopicError(f"{path}: expected a JSON object ({what}), found "
                            f"{type(payload).__name__}")
    return payload


def say(log, message=""):
    if log is not None:
        log(message)
