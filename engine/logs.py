"""The engine's structured log: every event as a JSON line in `run_dir/logs/engine.jsonl`,
and the ones a person watching needs (lane stopped, paused, cap changed) concisely on stderr.

Loggers are built per run with `structlog.wrap_logger` rather than by configuring structlog
globally, so two runs (or a test and a run) in one process never write into each other's file.
Secrets are scrubbed by a processor before any renderer sees the event: fields whose names
look like credentials are masked, and every string goes through `providers.secrets.redact`
(the adapters' declared credential values, and anything shaped like a key), so the log and
the ledger hide secrets the same way, behind the same mask.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, MutableMapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, ClassVar, Literal

import orjson
import structlog

from providers.secrets import MASK, Secret, redact

_SECRET_FIELD = re.compile(r"(api[_-]?key|authorization|secret|password|token$|credential)", re.I)
#: Secret values to mask: fixed, or asked for at each event (credentials that appear mid-run).
Secrets = Iterable[str | Secret] | Callable[[], Iterable[str | Secret]]


class Redactor:
    """structlog processor: masks secret-named fields, and secret values anywhere, recursively
    (`providers.secrets.redact`: known values and credential shapes, one mask)."""

    def __init__(self, secrets: Secrets = ()) -> None:
        self._source = secrets if callable(secrets) else None
        self._fixed: tuple[str | Secret, ...] = () if callable(secrets) else tuple(secrets)

    def _clean(self, value: Any, secrets: tuple[str | Secret, ...]) -> Any:
        if isinstance(value, str):
            return redact(value, secrets)
        if isinstance(value, dict):
            return {
                k: MASK if _SECRET_FIELD.search(str(k)) else self._clean(v, secrets)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple | set | frozenset):  # a set too: a JSON array
            return [self._clean(v, secrets) for v in value]
        return value

    def current(self) -> tuple[str | Secret, ...]:
        """The secret values to mask now."""
        return self._fixed if self._source is None else tuple(self._source())

    def __call__(
        self, logger: Any, name: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        secrets = self.current()
        for key in list(event):
            event[key] = MASK if _SECRET_FIELD.search(key) else self._clean(event[key], secrets)
        return event


def _timestamp(logger: Any, name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    event["ts"] = datetime.now(UTC).isoformat(timespec="milliseconds")
    event["level"] = name
    return event


def _json_line(logger: Any, name: str, event: MutableMapping[str, Any]) -> str:
    return orjson.dumps(event, default=str).decode()


#: The field of an event that says it to a person: the console shows that sentence alone
#: (the file keeps every field), where `event key=value ...` would read as a log's spelling.
SAY = "say"


def _concise(logger: Any, name: str, event: MutableMapping[str, Any]) -> str:
    head = event.pop("event", "")
    event.pop("ts", None)
    event.pop("level", None)
    if isinstance(event.get(SAY), str):
        return f"dutchbook {name}: {event[SAY]}"
    # Without a sentence, the event in words ("lane stopped: model m, reason ..."), where
    # "lane_stopped model=m reason=..." read as a log file's spelling on a person's console.
    rest = ", ".join(f"{k.replace('_', ' ')} {_words(v)}" for k, v in event.items())
    said = str(head).replace("_", " ")
    return f"dutchbook {name}: {said}: {rest}" if rest else f"dutchbook {name}: {said}"


def _words(value: Any) -> str:
    """A field's value as written to a person: a list as its items, comma-joined."""
    if isinstance(value, list | tuple | set | frozenset):
        return " and ".join(str(v) for v in value)
    return str(value)


class _LineWriter:
    """The minimal logger structlog needs: `msg(str)` per level, one line each, flushed."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._broken = False

    def msg(self, line: str) -> None:
        if self._broken:
            return
        try:
            self._stream.write(line + "\n")
            self._stream.flush()
        except OSError:  # a full disk: logging must never be what stops a run
            self._broken = True

    debug = info = warning = error = critical = msg


#: How many times one event of one model is echoed to the console; later ones go only to the
#: file. Some warnings are per request: a model whose every answer is refused by the parser
#: printed 11,792 `answer_retries_stopped` lines in one run.
CONSOLE_REPEATS = 5


class EngineLog:
    """The run's logger: `log.info("event", field=...)` goes to the file, and to stderr when
    the level is at least `console_level` (warning by default: quiet unless something is wrong).
    Each event of each model reaches the console at most `CONSOLE_REPEATS` times, then once
    more saying that the rest are only in the file.
    """

    _LEVELS: ClassVar[dict[str, int]] = {
        "debug": 10,
        "info": 20,
        "warning": 30,
        "error": 40,
        "critical": 50,
    }

    def __init__(
        self,
        run_dir: Path | None,
        *,
        console: IO[str] | Literal["stderr"] | None = "stderr",
        console_level: str = "warning",
        secrets: Secrets = (),
    ) -> None:
        if console == "stderr":
            console = sys.stderr  # looked up per log, so a redirected stderr is honoured
        redactor = self._redactor = Redactor(secrets)
        self._file: IO[str] | None = None
        self._to_file: Any = None
        if run_dir is not None:
            path = Path(run_dir) / "logs" / "engine.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")
            self._to_file = structlog.wrap_logger(
                _LineWriter(self._file), processors=[redactor, _timestamp, _json_line]
            )
        self._to_console: Any = (
            structlog.wrap_logger(_LineWriter(console), processors=[redactor, _timestamp, _concise])
            if console is not None
            else None
        )
        self._console_level = self._LEVELS[console_level]
        self._echoed: Counter[tuple[str, str]] = Counter()

    def redact(self, text: str) -> str:
        """`text` masked as the log masks its fields: for words that leave the engine other
        than by the log (a lane's stop reason, which the summary prints and lanes.json keeps)."""
        return redact(text, self._redactor.current())

    def _emit(self, level: str, event: str, fields: dict[str, Any], echo: bool = True) -> None:
        if self._to_file is not None:
            getattr(self._to_file, level)(event, **fields)
        if echo and self._to_console is not None and self._LEVELS[level] >= self._console_level:
            key = (event, str(fields.get("model", "")))
            self._echoed[key] += 1
            if self._echoed[key] <= CONSOLE_REPEATS:
                getattr(self._to_console, level)(event, **fields)
            elif self._echoed[key] == CONSOLE_REPEATS + 1:
                shown = {"model": fields["model"]} if "model" in fields else {}
                more = (
                    f"more {event} events go only to logs/engine.jsonl"
                    if self._to_file is not None
                    else f"more {event} events are not shown"
                )
                getattr(self._to_console, level)(more, **shown)

    def debug(self, event: str, **fields: Any) -> None:
        self._emit("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._emit("info", event, fields)

    def warning(self, event: str, *, echo: bool = True, **fields: Any) -> None:
        """A warning; `echo=False` keeps it off the console (see `error`)."""
        self._emit("warning", event, fields, echo)

    def error(self, event: str, *, echo: bool = True, **fields: Any) -> None:
        """An error; `echo=False` keeps it off the console, for one the caller states
        itself (the CLI's one line for a full disk: said twice, it was two lines)."""
        self._emit("error", event, fields, echo)

    def close(self) -> None:
        """Close the log file. Its last flush may fail as its lines may (a full disk, one
        turned read-only): the log must never be what stops a run, nor what is said instead
        of the error that did."""
        if self._file is not None:
            file, self._file = self._file, None
            self._to_file = None
            with contextlib.suppress(OSError):
                file.close()
