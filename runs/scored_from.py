"""Which answers a run's scores were computed from, so no report mixes old scores with new
answers.

`dutchbook reparse` replaces a run's answers; `scores.parquet` (and `forecasts.parquet`,
`averaged.parquet`) still hold what the old answers scored until `dutchbook score` runs
again. A `dutchbook report` between the two read both: a model whose answers the lenient
parser had just accepted showed coverage 100% beside "no answers" in the same row of the
leaderboard. So scoring records the answers it read (`SCORED_FROM`: the response shards and
any journal segment, by name and size: what a fold, a resume or a re-parse changes) and
`report` refuses scores whose answers have changed since, saying to score first.

A re-parse always writes a new shard, so names and sizes alone called a round trip (strict,
then lenient again) a change, though the answers were those scored. A reparse has the
answers before and after in memory, so it digests both (`engine.reparse.answers_digest`) and
`follow_reparse` keeps the record true: the digest of what was scored is written beside the
names, and when a reparse's answers have that digest the record names their files again.
`report` still compares names and sizes only: no answer is read to check.

A folder scored before this file existed has none, and is reported as before.

The report is of the scores in turn: after a reparse and a `score`, `report/` still showed
the old answers' scores, and once `score` had run nothing said so. The report records the
SHA-256 of each scores file it read (`scores_digests`, summary.json's
`provenance.scores_sha256`), and `status` says when those files have changed since
(`stale_report`). Scoring the same answers again writes the same bytes, so it does not.

`repaired.parquet` (`dutchbook repair`) is of the answers too, and a reparse, a resume or a
`score` after it left it describing answers the folder no longer held, 39 repaired sets of
answers strict had rejected among them, with no word said. Repair records its answers the
same way (`REPAIRED_FROM`), and `status`, `score`, `report` and `reparse` say when
`repaired.parquet` is of other answers (`stale_repairs`), naming the repair to run again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from engine.batch_waits import parse_time
from engine.durable import write_bytes_atomic
from engine.journal import list_segments
from engine.reparse import read_reparses
from engine.scan import JOURNAL, RESPONSES
from engine.shards import shard_id, visible_shards
from runs.damaged_files import check_footers
from runs.report_folder import report_dir

SCORED_FROM = "scored-from.json"
#: The same record for `repaired.parquet`, written by `runs.repair_step.repair_run`.
REPAIRED_FROM = "repaired-from.json"
REPAIRED = "repaired.parquet"
#: The record's keys that name the answers' files; `digest`, when present, is their content;
#: `at`, when present, when the answers were read (`gone_shards`: a reparse after it removed
#: the shards it names; records written before it have none, and their file's time stands in).
_FILES = ("responses", "journal")
#: The files of `dutchbook score` that a report reads, where the folder has them.
SCORES_FILES = ("scores.parquet", "averaged.parquet")


def answers_now(run_dir: Path) -> dict[str, Any]:
    """What the folder's answers are made of now: each file by name and size."""

    def sized(paths: list[Path]) -> list[list[Any]]:
        return [[path.name, path.stat().st_size] for path in sorted(paths)]

    return {
        "responses": sized(visible_shards(run_dir / RESPONSES)),
        "journal": sized([path for _, path in list_segments(run_dir / JOURNAL)]),
    }


def record_scored_from(
    run_dir: Path, answers: dict[str, Any], digest: str | None = None, name: str = SCORED_FROM
) -> None:
    """Note that the folder's scores (or, by `name`, its repairs) were computed from
    `answers` (`answers_now` taken before they were read, now; or a record read back, whose
    time is kept: `_record_at`), whose content has `digest` when known (a reparse's)."""
    at = answers.get("at") if isinstance(answers.get("at"), str) else _now()
    record = {key: answers[key] for key in _FILES} | {"at": at}
    record |= {"digest": digest} if digest else {}
    write_bytes_atomic(run_dir / name, orjson.dumps(record, option=orjson.OPT_INDENT_2))


def _now() -> str:
    """The time now as the reparse lines say it (`engine.reparse`), to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _kept_at(run_dir: Path, record: dict[str, Any], name: str) -> dict[str, Any]:
    """`record` as read from `name`, with the time its answers were read: rewritten (its
    digest forgotten or added), a record without one took the time of the rewrite, after
    the reparse that had replaced its shards, and was refused as of shards gone since."""
    at = _record_at(run_dir, record, name)
    return record | ({"at": at.isoformat(timespec="seconds")} if at is not None else {})


def _record_at(run_dir: Path, record: dict[str, Any], name: str) -> datetime | None:
    """When the record's answers were read: its `at`, else (written before it was kept) its
    file's modification time; None where neither can be told."""
    if (at := parse_time(record.get("at"))) is not None:
        return at
    return _modified_at(run_dir / name)


def outputs_at(run_dir: Path, output: str, name: str) -> datetime | None:
    """When `output` (`forecasts.parquet`, `repaired.parquet`) was written: its record's
    (`name`) time where there is one, else the file's modification time; None where neither
    can be read."""
    record = read_scored_from(run_dir, name)
    if record is not None:
        return _record_at(run_dir, record, name)
    return _modified_at(run_dir / output)


def _modified_at(path: Path) -> datetime | None:
    """The file's modification time (UTC), None where it cannot be read."""
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return None


def reparsed_since(run_dir: Path, since: datetime | None) -> bool:
    """Whether a reparse began at `since` or after (its begun line's `at`, or its finished
    line's where a build before the begun lines wrote none). Both times are to the second:
    one begun in the second the record was written counts, as no user deletes shards and
    reparses within it. False where `since` is None: nothing tells the reparse came after.

    One killed after its answers replaced the folder's has a begun line alone and counts:
    its shard is whole (`engine.shards.replace_all`), and the commands say to run it again.
    One that read no reply and found no answer (its finished line says 0 of both: an earlier
    build's, run on a folder whose shards were deleted with their replies) rebuilt nothing,
    so accounts for nothing."""
    if since is None:
        return False
    since = since.replace(microsecond=0)
    reparses: list[tuple[datetime | None, dict[str, Any] | None]] = []  # (begun, finished)
    for line in read_reparses(run_dir):
        if not isinstance(line.get("parser"), str):
            continue  # torn or foreign
        if line.get("begun"):
            reparses.append((parse_time(line.get("at")), None))
        elif reparses and reparses[-1][1] is None and reparses[-1][0] is not None:
            reparses[-1] = (reparses[-1][0], line)
        else:  # a finished line with no begun line before it (an earlier build's)
            reparses.append((parse_time(line.get("at")), line))
    return any(
        start is not None and start >= since and not (end is not None and _read_nothing(end))
        for start, end in reparses
    )


def _read_nothing(line: dict[str, Any]) -> bool:
    """Whether a finished reparse line says it read no reply and found no answer."""
    return line.get("requests_with_replies") == 0 and line.get("accepted_before") == 0


def forget_digest(run_dir: Path, name: str = SCORED_FROM) -> None:
    """Drop the record's `digest` before the files it describes are replaced: they are
    committed one at a time, then the record, so a kill or a full disk between them left
    files of new answers beside the old record and its digest, and a reparse back to that
    digest's answers then called the record current (`follow_reparse`) over scores, or
    repairs, of other answers. Without it the record names the old answers' files only,
    which a reparse never writes again: stale until scored (or repaired) again."""
    record = read_scored_from(run_dir, name)
    if record is not None and "digest" in record:
        record_scored_from(run_dir, _kept_at(run_dir, record, name), name=name)


def gone_shards(run_dir: Path) -> dict[str, list[str]]:
    """The response shards that a record (`SCORED_FROM`, `REPAIRED_FROM`) names and the
    folder no longer holds, by record, where nothing accounts for their going; empty when
    none is gone so.

    Only a reparse removes a response shard (`engine.shards.replace_all`: compaction adds
    shards, and folds a segment again under the same name): it says so in
    `logs/reparses.jsonl` before it replaces anything, removes every shard there was, the
    record's among them, and leaves its own, of an id above all of theirs. Shards gone
    otherwise were deleted or moved: with the replies in `attempts/` gone too, `score` read
    no answers at all and wrote 0-row forecasts and scores over a finished run's, the only
    copy of its stated probabilities left (a tester's).

    The reparse must have begun after the record was written and finished
    (`reparsed_since`): any reparse logged, with a shard of a higher id, was taken for one,
    so a reparse that read nothing (the shards deleted with their replies) wrote a shard
    that vouched for the ones gone, and so did a reparse long before the record, once a
    resume had added a shard.

    A shard the record names whose size is not the one it recorded was replaced (another
    run's pair copied over the folder's own, under the same names): it is counted gone too.
    Nothing of the folder's own writes a named shard again with other content: a reparse's
    shard takes a new id, and compaction folds a segment again under the same name only
    after a kill between the shard's rename and the segment's removal, from that same
    sealed segment, so the same rows and bytes (and `score`, which does not compact,
    recorded that shard beside the segment, not a part of it). A shard edited in place
    (its answers damaged, its requests the plan's) is not so counted: the damaged answer's
    own refusal names the reparse that rebuilds it from the replies, as before; only one
    holding answers of requests the plan does not hold (`_foreign_shards`) was replaced.

    A record written before its `at` was kept is dated by no file time here: an earlier
    build rewrote the record after its reparse (the file's time after the reparse's), and a
    folder copied without its times dates every record at the copy, so a healthy folder
    scored and then reparsed read as one whose answers were gone. Any reparse logged (that
    read something) accounts for such a record's shards, as before the `at` was kept."""
    shards = visible_shards(run_dir / RESPONSES)
    now = _shard_ids(path.name for path in shards)
    sizes = _sizes(shards)
    newest = max(now.values(), default=0)
    gone: dict[str, list[str]] = {}
    for name in (SCORED_FROM, REPAIRED_FROM):
        record = read_scored_from(run_dir, name)
        named, recorded = _named_shards(record)
        resized = {
            shard for shard in named
            if shard in now and recorded.get(shard, sizes[shard]) != sizes[shard]
        }  # fmt: skip
        replaced = resized & _foreign_shards(run_dir) if resized else set()
        missing = sorted(shard for shard in named if shard not in now or shard in replaced)
        if record is None or not missing:
            continue
        since = parse_time(record.get("at")) or _EVER
        if (
            len(missing) == len(named)
            and newest > max(named.values())
            and reparsed_since(run_dir, since)
        ):
            continue  # a reparse's: replaced by the shard it wrote
        gone[name] = missing
    return gone


#: The time before every reparse: a record with no `at` of its own (`gone_shards`).
_EVER = datetime.min.replace(tzinfo=UTC)


def _foreign_shards(run_dir: Path) -> set[str]:
    """The response shards holding answers of requests the plan does not hold (another
    run's, copied in: `engine.scan.unplanned_rows`), by name."""
    from engine.scan import unplanned_rows

    held = unplanned_rows(run_dir, answers_only=True).answer_files
    return {name.rsplit("/", 1)[-1] for name in held if name.startswith(f"{RESPONSES}/")}


def _named_shards(record: dict[str, Any] | None) -> tuple[dict[str, int], dict[str, int]]:
    """The response shards a record names, by name, with their ids (`_shard_ids`), and the
    sizes it gives them, by name (an entry without one, in a record edited by hand, gives
    none: its shard is judged by its name alone)."""
    entries = record.get("responses") if record is not None else None
    if not isinstance(entries, list):
        return {}, {}
    listed = [entry for entry in entries if isinstance(entry, list) and entry]
    listed = [entry for entry in listed if isinstance(entry[0], str)]  # a list, hand-edited
    sizes = {
        entry[0]: entry[1] for entry in listed if len(entry) > 1 and isinstance(entry[1], int)
    }
    return _shard_ids(entry[0] for entry in listed), sizes


def _sizes(shards: list[Path]) -> dict[str, int | None]:
    """Each shard's size by name, None where it cannot be read (gone since it was listed)."""
    sizes: dict[str, int | None] = {}
    for path in shards:
        try:
            sizes[path.name] = path.stat().st_size
        except OSError:
            sizes[path.name] = None
    return sizes


def _shard_ids(names: Iterable[object]) -> dict[str, int]:
    """The shards' names among `names`, with their ids (a name that is no shard's, in a
    record edited by hand, is passed over)."""
    return {n: i for n in names if isinstance(n, str) and (i := shard_id(n)) is not None}


def _of_answers_now(run_dir: Path, record: Any) -> bool:
    """Whether a record read from its file (`record_scored_from`'s) names the answers'
    files as they are now."""
    return isinstance(record, dict) and {k: record.get(k) for k in _FILES} == answers_now(run_dir)


def stale_repairs(run_dir: Path) -> str | None:
    """A line saying `repaired.parquet` is of answers the folder no longer holds as they
    were, with the repair that writes it again; None when it is of these (or there is none,
    or no record of what it was computed from: a folder repaired before the record). A
    damaged record is said so too: read as none, the repairs' staleness went unsaid."""
    if not (run_dir / REPAIRED).is_file():
        return None
    try:
        record = orjson.loads((run_dir / REPAIRED_FROM).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError):
        return (
            f"{run_dir / REPAIRED_FROM} is damaged, so {run_dir / REPAIRED} cannot be matched "
            f"to the answers: `{rerun_command(run_dir, 'repair')}` writes both again"
        )
    if _of_answers_now(run_dir, record):
        return None
    return (
        f"{run_dir / REPAIRED} was computed from answers the folder no longer holds as they "
        f"were (a reparse or a resume since): `{rerun_command(run_dir, 'repair')}` writes it "
        "again"
    )


def read_scored_from(run_dir: Path, name: str = SCORED_FROM) -> dict[str, Any] | None:
    """The record (the scores', or by `name` the repairs'), None when there is none or it
    is damaged."""
    try:
        scored = orjson.loads((run_dir / name).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    return scored if isinstance(scored, dict) and all(k in scored for k in _FILES) else None


def follow_reparse(
    run_dir: Path, scored: dict[str, Any] | None, fresh: bool, before: str, after: str,
    name: str = SCORED_FROM,
) -> bool:
    """After a reparse whose answers' digests were `before` and `after`, keep the record
    (`scored`, read before it; `fresh`: its scores matched those answers) true; return
    whether the scores now match the answers. Fresh, the scores were of `before`: that digest
    is written beside their files' names, so a later reparse back to them is known. When
    `after` is the digest of the scored answers, the record names the files now. `name`
    (`REPAIRED_FROM`) keeps the repairs' record so: a reparse back to the repaired answers
    was said to leave `repaired.parquet` of other answers."""
    if scored is None:
        return False  # never scored, or before the record: as before
    digest = before if fresh else scored.get("digest")
    if digest == after:
        record_scored_from(run_dir, answers_now(run_dir), after, name=name)
        return True
    if fresh:
        record_scored_from(run_dir, _kept_at(run_dir, scored, name), before, name=name)
    return False


def stale_scores(run_dir: Path) -> str | None:
    """Why the folder's scores no longer match its answers, or None when they do (or when
    the folder predates the record). Raises polars' error for a damaged answers file."""
    path = run_dir / SCORED_FROM
    # A damaged answers file changes size too: read their footers first, so that polars'
    # error for it is named as damage (`runs.damaged_files`, by the caller's error handling)
    # with the reparse that rebuilds the answers, not taken for answers that changed, which
    # sent a tester to `score`, and `score` then failed on the same file.
    check_footers(visible_shards(run_dir / RESPONSES))
    try:
        scored = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError:
        return f"{path} is damaged, so the scores cannot be matched to the answers"
    if not _of_answers_now(run_dir, scored):
        return (
            "its answers changed after it was scored (a `dutchbook reparse`, or a resumed run "
            "that did not finish)"
        )
    return None


def scores_digests(run_dir: Path) -> dict[str, str]:
    """The SHA-256 of each scores file the folder has (`SCORES_FILES`), by name."""
    digests = {}
    for name in SCORES_FILES:
        try:
            with (run_dir / name).open("rb") as handle:
                digests[name] = hashlib.file_digest(handle, "sha256").hexdigest()
        except FileNotFoundError:
            continue
    return digests


def stale_report(run_dir: Path) -> bool:
    """Whether the folder's report (its `report/summary.json`) was written from scores files
    other than the folder's now. False when it cannot be told: no report, a damaged summary
    (`untold_report` says so), or one written before the report recorded its scores."""
    summary, _ = _report_summary(run_dir)
    if not isinstance(summary, dict):
        return False
    provenance = summary.get("provenance")
    recorded = provenance.get("scores_sha256") if isinstance(provenance, dict) else None
    return isinstance(recorded, dict) and recorded != scores_digests(run_dir)


def untold_report(run_dir: Path) -> str | None:
    """Why a report the folder has cannot be matched to its scores: its `summary.json`, which
    records them, is missing or does not read as JSON (said by `status`, which otherwise
    said nothing of such a report, however stale). None when there is no report, or it
    reads."""
    if not has_report(run_dir):
        return None
    summary, why = _report_summary(run_dir)
    if why is not None:
        return why
    return None if isinstance(summary, dict) else "its summary.json is not the report's record"


def rerun_command(run_dir: Path, command: str = "score") -> str:
    """`dutchbook score DIR` (or `repair`) as advice, with `--spec` where the folder's own
    spec names a `[data]` path relative to the spec the run was started with: the command
    cannot resolve it from the frozen copy (`local.toml`'s families), and the advice led to
    that refusal (`runs.commands.score._frozen` says the same when it refuses)."""
    if not frozen_spec_resolves(run_dir):
        return f"dutchbook {command} {run_dir} --spec <the spec it was started with>"
    return f"dutchbook {command} {run_dir}"


def resume_command(run_dir: Path, *, rehearse: bool = False, capped: bool = False) -> str:
    """`dutchbook run SPEC --out DIR` as advice to resume the folder: SPEC is the spec it was
    started with, or its frozen copy `DIR/spec.toml` where that resolves its `[data]` paths
    (a relative one names a file beside the spec the run was started with). `rehearse`: a
    rehearsal's folder, which a run without `--rehearse` refuses; `capped`: the spend cap
    stopped a lane, and the cap counts what earlier runs spent, so the command needs a
    higher `--max-cost` (without one, none holds at all). A reviewer found both left out."""
    spec = run_dir / "spec.toml"
    flags = (" --rehearse" if rehearse else "") + (" --max-cost USD" if capped else "")
    said = f"`dutchbook run SPEC --out {run_dir}{flags}` resumes it, SPEC the spec it was "
    said += "started with"
    if capped:
        said += ", USD above the cap that stopped it (the cap counts what earlier runs spent)"
    if frozen_spec_resolves(run_dir):
        return f"{said} (or {spec}, the folder's copy)"
    return f"{said} ({spec}, the folder's copy, names a relative [data] path it cannot resolve)"


def frozen_spec_resolves(run_dir: Path) -> bool:
    """Whether the folder's own spec resolves its `[data]` paths; a spec that does not read
    otherwise counts as resolving (the command it is given to says what it cannot read)."""
    from runs.spec import SpecError, load_spec

    try:
        load_spec(run_dir / "spec.toml")
    except SpecError as exc:
        return not exc.key.startswith("data.")
    except OSError:
        pass
    return True


def has_report(run_dir: Path) -> bool:
    """Whether the folder has a report at all: a `report/` folder with anything in it (a
    report is written beside it and moved in whole, so a stop while it is written leaves
    none, or the one before)."""
    folder = report_dir(run_dir)
    return folder.is_dir() and any(folder.iterdir())


def report_summary(run_dir: Path) -> Any:
    """The folder's `report/summary.json` as read, or None where it does not read."""
    return _report_summary(run_dir)[0]


def _report_summary(run_dir: Path) -> tuple[Any, str | None]:
    """The folder's `report/summary.json` as read, and None; or None and why it could not be
    read ("its summary.json is missing", "... does not read": what `untold_report` says)."""
    try:
        return orjson.loads((report_dir(run_dir) / "summary.json").read_bytes()), None
    except FileNotFoundError:
        return None, "its summary.json is missing"
    except (OSError, orjson.JSONDecodeError):
        return None, "its summary.json does not read"


__all__ = [
    "REPAIRED_FROM",
    "SCORED_FROM",
    "SCORES_FILES",
    "answers_now",
    "follow_reparse",
    "forget_digest",
    "gone_shards",
    "has_report",
    "outputs_at",
    "read_scored_from",
    "record_scored_from",
    "reparsed_since",
    "report_summary",
    "rerun_command",
    "scores_digests",
    "stale_repairs",
    "stale_report",
    "stale_scores",
    "untold_report",
]
