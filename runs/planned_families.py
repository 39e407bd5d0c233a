"""The question families a run was planned with, read back for its report.

The report's statistics (each family arm's rate on controls apart) and figure 6 (families by
shape) both need each family's shape and control flag; they read them here, from the files the
run recorded, so both agree with what was asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from panels.families import Family


class FamilyInfo(NamedTuple):
    """What the report needs to know of a question family."""

    shape: str
    control: bool


def family_info(run_dir: Path) -> dict[str, FamilyInfo]:
    """Shape and control flag of each family the run asked, from the family files it was
    planned with: those `design.json` records (by their paths then), else the frozen spec's
    `data.families` folder, else the shipped ones.

    The frozen spec alone could not say: a `data.families` path relative to the spec's own
    folder does not resolve from the run folder, and figure 6 drew the shipped families'
    shapes and control flags for the user's (a deadline family as the control bar).

    A family that can no longer be read is simply absent (figure 6 then counts it as shape
    "unknown", and the arm's rates are not split into future and controls); a report never
    fails on it.
    """
    from panels.families import FamilyError

    loaded = _recorded_families(run_dir)
    if loaded is None:
        try:
            loaded = _spec_families(run_dir)
        except (FamilyError, OSError):
            return {}
    return {fid: FamilyInfo(str(f.shape), bool(f.control)) for fid, f in loaded.items()}


def _recorded_files(run_dir: Path) -> list[tuple[str, str, list[Path]]] | None:
    """(label, recorded SHA-256, places to read it from) of each family file `design.json`
    records: its recorded path, then, for a shipped one, this dutchbook's copy; None when it
    records none, or cannot be read."""
    from panels.families import FAMILIES_DIR
    from runs.design import DESIGN_FILE, SHIPPED_FAMILIES, DesignChanged, recorded_design

    try:
        files = recorded_design(run_dir / DESIGN_FILE).get("files", {})
    except DesignChanged:
        return None
    recorded = []
    for label, entry in files.items():
        if not label.startswith("families"):
            continue
        places = [Path(str(entry["path"]))]
        if label.startswith(f"{SHIPPED_FAMILIES}/"):
            places.append(FAMILIES_DIR / Path(label).name)
        recorded.append((label, str(entry["sha256"]), places))
    return recorded or None


def _recorded_families(run_dir: Path) -> dict[str, Family] | None:
    """The families of the files `design.json` records (`_recorded_files`); None when it
    records none, or cannot be read. A place that is no regular file is passed over unopened
    (a FIFO put there hung `dutchbook report` for good)."""
    from panels.families import FamilyError, load_family, refuse_a_pipe

    recorded = _recorded_files(run_dir)
    if recorded is None:
        return None
    found: dict[str, Family] = {}
    for _, _, places in recorded:
        for place in places:
            try:
                refuse_a_pipe(place)
                family = load_family(place)
            except FamilyError:
                continue
            found[family.id] = family
            break
    return found


def changed_family_files(run_dir: Path) -> list[str]:
    """One phrase per family file `design.json` records that is not as it was when the run
    was planned: the report reads each family's shape and control flag from the file as it is
    now, and a file edited since moved families between figure 6's shapes, or between an
    arm's future families and its controls, without a word."""
    from runs.design import input_sha256

    phrases = []
    for label, sha256, places in _recorded_files(run_dir) or []:
        for place in places:
            try:
                now = input_sha256(label, place)
            except (ValueError, OSError):  # gone, unreadable, or no regular file
                continue
            if now != sha256:
                phrases.append(f"{label} ({place}) changed")
            break
        else:
            phrases.append(f"{label} ({places[0]}) cannot be read")
    return phrases


def _spec_families(run_dir: Path) -> dict[str, Family]:
    """The families of the frozen spec's `data.families` folder, else the shipped ones."""
    from panels.families import FAMILIES_DIR, load_families

    folder: Path = FAMILIES_DIR
    frozen = run_dir / "spec.toml"
    if frozen.exists():
        from runs.spec import SpecError, load_spec

        try:
            chosen = load_spec(frozen).data.families
        except (SpecError, OSError):
            chosen = None
        if chosen is not None and chosen.is_dir():
            folder = chosen
    return load_families(folder)
