"""`engine.mountinfo`: the super options of the mount holding a path, read from mountinfo text
(proc(5)'s format), and whether they say the file system refuses writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import engine.durable
import engine.mountinfo
from engine.mountinfo import super_options, super_read_only

#: A mount table as Linux writes it: optional fields (none, one, two) before the `-`; the
#: super options after the type and the source; a space in a mount point as `\040`; two
#: mounts on one point, the later on top; ext4 turned read-only by an error showing
#: `emergency_ro` while its superblock still says `rw`.
SAMPLE = "\n".join([
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro",
    "30 22 8:17 / /srv/data rw,relatime shared:5 master:2 - ext4 /dev/sdb1 "
    "rw,emergency_ro,errors=remount-ro",
    "31 22 8:33 / /mnt/usb\\040disk rw,nosuid - vfat /dev/sdc1 ro,fmask=0022",
    "32 22 0:40 / /mnt/stack rw - tmpfs first ro",
    "33 22 0:41 / /mnt/stack rw - tmpfs second rw,size=1024k",
    "34 22 0:42 / /mnt/back\\134slash rw - tmpfs tmpfs ro",
])  # fmt: skip


@pytest.mark.parametrize(
    ("path", "options"),
    [
        ("/home/me/runs/x", {"rw", "errors=remount-ro"}),  # `remount-ro` is no `ro`
        ("/srv/data", {"rw", "emergency_ro", "errors=remount-ro"}),
        ("/srv/data/out/run", {"rw", "emergency_ro", "errors=remount-ro"}),
        ("/srv/database/run", {"rw", "errors=remount-ro"}),  # by whole names: not /srv/data's
        ("/mnt/usb disk/run", {"ro", "fmask=0022"}),
        ("/mnt/usb\\040disk/run", {"rw", "errors=remount-ro"}),  # a name that holds `\040`
        ("/mnt/stack/run", {"rw", "size=1024k"}),  # the mount on top
        ("/mnt/back\\slash/run", {"ro"}),
    ],
)
def test_the_longest_mount_point_holding_the_path_gives_its_super_options(
    path: str, options: set[str]
) -> None:
    assert super_options(path, SAMPLE) == frozenset(options)


def test_text_that_holds_no_mount_of_the_path_has_no_opinion() -> None:
    assert super_options("/srv/data/run", "") is None
    assert super_options("/srv/data/run", "not a mount table\n22 1 8:1 / / rw") is None
    assert super_options("/home/run", SAMPLE.split("\n", 1)[1]) is None  # no `/` listed


def test_the_folder_is_resolved_and_only_ro_or_emergency_ro_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder named through a symbolic link is read at its real place; a mountinfo that
    cannot be read (not Linux) has no opinion."""
    real = tmp_path / "real dir"
    (real / "run").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    point = os.path.realpath(real).replace(" ", "\\040")
    table = tmp_path / "mountinfo"
    monkeypatch.setattr(engine.mountinfo, "MOUNTINFO", table)
    assert super_read_only(tmp_path / "link" / "run") is None  # no file
    # Devices no file here is on (majors run to 4095): the folder found by its path.
    for options, said in [("rw,emergency_ro", True), ("ro", True), ("rw,errors=remount-ro", False)]:
        table.write_text(f"1 0 4095:1 / / rw - ext4 /dev/a rw\n2 1 4095:2 / {point} rw - ext4 "
                         f"/dev/b {options}\n", encoding="utf-8")  # fmt: skip
        assert super_read_only(tmp_path / "link" / "run") is said, options
    # The folder's own device, listed at another mount point, is what is read.
    device = os.stat(real).st_dev
    table.write_text(f"1 0 4095:1 / / rw - ext4 /dev/a rw\n2 1 4095:2 / {point} rw - ext4 "
                     f"/dev/b rw\n3 1 {os.major(device)}:{os.minor(device)} / /elsewhere rw - "
                     "ext4 /dev/c rw,emergency_ro\n", encoding="utf-8")  # fmt: skip
    assert super_read_only(tmp_path / "link" / "run") is True


def test_a_mount_over_a_parent_hides_a_deeper_one_the_device_names_the_holder() -> None:
    """`/a/b` read-only, then `/a` mounted over it: `/a/b/run` is on `/a`'s file system
    (its `st_dev`), which the longest mount point holding the path (`/a/b`) is not."""
    table = "\n".join([
        "1 0 8:1 / / rw - ext4 /dev/sda1 rw",
        "2 1 8:2 / /a/b rw - ext4 /dev/sdb1 rw,emergency_ro",
        "3 1 8:3 / /a rw - ext4 /dev/sdc1 rw",
    ])  # fmt: skip
    assert super_options("/a/b/run", table, "8:3") == frozenset({"rw"})
    assert super_options("/a/b/run", table, "8:2") == frozenset({"rw", "emergency_ro"})
    assert super_options("/a/b/run", table) == frozenset({"rw", "emergency_ro"})  # by path
    assert super_options("/a/b/run", table, "0:99") == frozenset({"rw", "emergency_ro"})


def test_a_mount_read_only_by_its_super_options_alone_is_mounted_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`statvfs` reads the folder writable here; its super options decide (None: no opinion)."""
    assert not os.statvfs(tmp_path).f_flag & os.ST_RDONLY, "a read-only tmp: proves nothing"
    for said, read_only in [(True, True), (False, False), (None, False)]:
        monkeypatch.setattr(engine.mountinfo, "super_read_only", lambda folder, s=said: s)
        assert engine.durable.mounted_read_only(tmp_path) is read_only
