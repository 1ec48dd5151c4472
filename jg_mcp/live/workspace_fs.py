"""A file system of the session's own for its workspace, so that the workspace's size limit holds while commands run.

Why: a quota counted after each command bounds nothing while the command runs (`fallocate -l 100G` takes the space
in one call), and a sandboxed agent filled the file system holding `--runs` up to the blocks ext4 keeps for root:
the next server's sandbox probe, which runs as the unprivileged sandbox uid, then failed. So each session's
workspace and compile cache lie on an ext4 file system in an image file of exactly the quota's size. Its blocks are
reserved up front with fallocate, by the server, before any command runs: what the agent can take of the host is
what was reserved, and a host without the room refuses the session rather than a later write of the server. mkfs
runs without discard (mke2fs would punch the reservation back out of a regular file) and the file system is
mounted without it, nosuid and nodev. A command past the quota gets ENOSPC in its own file system; the host's does
not move, and the server's own writes (transcripts, blobs, the next server's probe) never depend on space the agent
can take. On a copy-on-write host file system (btrfs, zfs) fallocate reserves nothing for later writes: the bound
on the image still holds, the reservation does not.

Layout, beside the workspace W in its parent: `.W.fs/` (0700, the server's) holds `image` and `mnt`, where the image
is mounted; the image holds `ready`, `workspace/` and `cache/`. W is a bind mount of `mnt/workspace` and the
sandbox's compile cache `.W.cache` (jg_mcp.live.bwrap) one of `mnt/cache`, so the paths the sandbox binds do not
change, and the compile cache shares the quota.

After the session (`close`), the workspace's files are copied out into `.W.fs/out` (sparse files stay sparse,
setuid and setgid bits dropped, every file the server's user's: the workspace is given back), everything is
unmounted, the image deleted and `out` renamed onto W: a plain directory again, for `jg-mcp eval --workspace`,
replay and a later session on it. The compile cache goes with the image. A workspace that already holds files (a
resumed one) is moved aside to `.W.fs/in` and copied into the new image before `ready` is written.

Each step leaves a state the next `open` finishes or undoes, so a server killed at any point loses nothing: mounts
still there are unmounted (refused while another live process uses them), an image with `ready` is the workspace
(a partial `out`, or an `in` already copied, is dropped), an image without `ready` is dropped and `in` put back,
and an `out` without its image is the finished copy (renamed onto W). A copy that cannot finish (the host's disk is
full, past the walk's bounds) leaves everything mounted: W still shows the files, and the next `open` takes them up.

It needs root (loop devices, mount); `unavailable` says why it cannot work here, and `jg-mcp serve` then refuses to
start unless the operator runs with `--unbounded-workspace`, which the transcript's header records.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import subprocess
import tempfile
import time
from contextlib import closing
from pathlib import Path

from jg_mcp import log
from jg_mcp.errors import JgError
from jg_mcp.live import safefs
from jg_mcp.live.places import check_own, check_place, make_private_dir
from jg_mcp.live.uids import chown_tree
from jg_mcp.live.walk import walk_of

logger = log.get("jg_mcp.live.workspace_fs")

MOUNT_OPTIONS = "loop,nosuid,nodev,noatime"
"""How the image is mounted: nothing in it runs setuid or opens a device, and reads write nothing."""
MKFS = ("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard")
"""No blocks kept for root (commands never run as root), and no discard: on a regular file mke2fs punches holes."""
TRIAL_BYTES = 16 * 1024 * 1024
"""The size of the image `unavailable` makes, mounts and deletes to find whether the mechanism works here."""
COPY_CHUNK = 1024 * 1024
BUSY_WAIT_S = 2.0
"""How long an unmount is tried again while the mount is busy: a session's last sandboxed processes may still be
dying (their pid namespace torn down) as it closes."""
TOOL_TIMEOUT_S = 60


class WorkspaceFsError(JgError):
    """The workspace's own file system cannot be made, mounted or found in a state this module leaves."""


def _run(*argv: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkspaceFsError(f"{argv[0]} failed: {exc}") from None
    if done.returncode != 0:
        raise WorkspaceFsError(f"{' '.join(argv)}: {(done.stderr or done.stdout).strip()[:300]}")


def _unescape(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mount_points() -> list[str]:
    """Every mount point of this process's mount namespace, in mount order (one per mount: stacked ones repeat)."""
    with open("/proc/self/mountinfo") as f:
        return [_unescape(line.split()[4]) for line in f if len(line.split()) > 4]


def unmount_all(path: Path) -> None:
    """Unmount whatever is mounted at `path` (stacked mounts too; a link there is refused, never followed);
    WorkspaceFsError when one stays (a live process uses it)."""
    if os.path.islink(path):
        raise WorkspaceFsError(f"{path} is a symbolic link")
    where = os.path.join(os.path.realpath(path.parent), path.name)
    deadline = time.monotonic() + BUSY_WAIT_S
    while where in mount_points():
        try:
            _run("umount", where)
        except WorkspaceFsError as exc:
            if time.monotonic() > deadline:
                raise WorkspaceFsError(f"{where} is in use (by another server's session?): {exc}") from None
            time.sleep(0.1)


def make_image(image: Path, size: int) -> None:
    """A new ext4 image of `size` bytes at `image` (which must not exist), every block reserved on the host."""
    fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.posix_fallocate(fd, 0, size)
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        image.unlink()
        raise WorkspaceFsError(
            f"could not reserve {size} bytes for the workspace's file system in {image.parent}: {exc.strerror}; "
            "free disk space there, end other sessions or lower --max-workspace-bytes"
        ) from None
    os.close(fd)
    try:
        _run(*MKFS, str(image))
    except WorkspaceFsError:
        image.unlink()  # not a file system: nothing in it to keep
        raise


def _check_mine(path: Path, what: str, regular: bool = False) -> None:
    """`path` is ours: a real directory (or a regular file), owned by this server's uid; else WorkspaceFsError."""
    st = os.lstat(path)
    kind_ok = stat.S_ISREG(st.st_mode) if regular else stat.S_ISDIR(st.st_mode)
    if not kind_ok or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise WorkspaceFsError(f"{path} ({what}) is not a {'file' if regular else 'directory'} of this server's alone")


def copy_tree(src: Path, dst: Path) -> list[str]:
    """Copy the tree under the directory `src` into the new directory `dst` (made 0700), through a bounded `Walk`
    (no link followed): directories, regular files (holes kept, hard links kept as links, modes without setuid,
    setgid or sticky bits, times kept) and symbolic links as links; nothing else. Everything made is this process's
    user's. Returns what the walk could not see, one sentence each (empty: everything was copied); OSError when the
    copy fails (a full disk)."""
    os.mkdir(dst, 0o700)
    out = os.open(dst, safefs.DIR_FLAGS)
    copied: dict[int, str] = {}
    """Where each file (by inode) was copied first: its other hard links are linked to that copy, so the copy
    takes no more space than the tree (a file of the quota's size with 10,000 links would otherwise be copied
    10,000 times onto the host's disk)."""
    try:
        walk = walk_of(src)
        with closing(walk.entries()) as entries:
            for dfd, name, rel, st in entries:
                if stat.S_ISDIR(st.st_mode):
                    os.mkdir(rel, 0o700, dir_fd=out)
                    os.chmod(rel, stat.S_IMODE(st.st_mode) & 0o777 | 0o700, dir_fd=out)
                elif stat.S_ISLNK(st.st_mode):
                    os.symlink(os.readlink(name, dir_fd=dfd), rel, dir_fd=out)
                elif stat.S_ISREG(st.st_mode) and st.st_ino in copied:
                    os.link(copied[st.st_ino], rel, src_dir_fd=out, dst_dir_fd=out, follow_symlinks=False)
                elif stat.S_ISREG(st.st_mode) and _copy_file(dfd, name, rel, out):
                    copied[st.st_ino] = rel
        return walk.missed
    finally:
        os.close(out)


def _copy_file(dfd: int, name: str, rel: str, out: int) -> bool:
    """Copy the regular file `name` of `dfd` to `rel` under `out`; False when it was no longer there to copy."""
    try:
        fd, st = safefs.open_regular(dfd, name, rel)
    except (JgError, FileNotFoundError):  # swapped for something else, or gone: nothing to copy
        return False
    try:
        new = os.open(rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=out)
        try:
            _copy_data(fd, new, st.st_size)
            os.ftruncate(new, st.st_size)
            os.fchmod(new, stat.S_IMODE(st.st_mode) & 0o777)
            os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(new)
    finally:
        os.close(fd)
    return True


def _copy_data(fd: int, new: int, size: int) -> None:
    """The data of `fd` up to `size` into `new` at the same offsets, holes skipped (SEEK_DATA, SEEK_HOLE)."""
    offset = 0
    while offset < size:
        try:
            offset = os.lseek(fd, offset, os.SEEK_DATA)
            end = min(os.lseek(fd, offset, os.SEEK_HOLE), size)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but a hole to the end
                return
            if exc.errno != errno.EINVAL:
                raise
            end = size  # a file system that cannot say where its holes are: copied whole
        while offset < end:
            chunk = os.pread(fd, min(COPY_CHUNK, end - offset), offset)
            if not chunk:
                return
            os.pwrite(new, chunk, offset)
            offset += len(chunk)


def _empty(path: Path) -> bool:
    with os.scandir(path) as entries:
        return next(entries, None) is None


class WorkspaceFs:
    """The file system of one workspace: `open` mounts it (made, resumed or recovered), `close` copies the files
    back to a plain directory and takes it down. See the module docstring for the states and why."""

    def __init__(self, workspace: Path, cache: Path):
        self.workspace = Path(os.path.abspath(workspace))
        self.cache = Path(os.path.abspath(cache))
        self.home = self.workspace.parent / f".{self.workspace.name}.fs"
        self.image, self.mnt = self.home / "image", self.home / "mnt"
        self.incoming, self.outgoing = self.home / "in", self.home / "out"
        self.size: int | None = None
        """The file system's size in bytes, once `open`."""

    def open(self, size: int) -> None:
        """Mount the workspace's file system of `size` bytes at the workspace (its files, if it had any, inside),
        after finishing or undoing what an earlier server left. WorkspaceFsError (or UsageError for a workspace
        another user could plant) when it cannot."""
        make_private_dir(self.home, "workspace's file system directory")
        self.recover()
        make_private_dir(self.workspace, "workspace")
        if not self.image.exists():
            self._make(size)
        if not self.mnt.exists():
            os.mkdir(self.mnt, 0o700)
        _check_mine(self.mnt, "the image's mount point")
        _run("mount", "-t", "ext4", "-o", MOUNT_OPTIONS, str(self.image), str(self.mnt))
        try:
            self._bind()
        except BaseException:
            self.recover()  # unmounted again, the image kept (it has `ready`)
            raise
        self.size = self.image.stat().st_size  # a resumed image keeps the size it was made with
        logger.info("workspace on a file system of its own", workspace=str(self.workspace), bytes=self.size)

    def _bind(self) -> None:
        """Give the image's directories back to the server's user (a killed server left them its sandbox uid's),
        then bind them at the workspace and the compile cache."""
        inside = [self.mnt / "workspace", self.mnt / "cache"]
        for d in inside:
            _check_mine(d.parent, "the image's mount point")
            if missed := chown_tree(d, os.geteuid()):
                raise WorkspaceFsError(f"{d} could not be given back whole: {'; '.join(missed)}")
            _check_mine(d, "a directory of the workspace's file system")
        if not self.cache.exists():
            os.mkdir(self.cache, 0o700)
        check_own(self.cache, "workspace's compile cache", os.lstat(self.cache))
        for d, target in zip(inside, (self.workspace, self.cache), strict=True):
            _run("mount", "--bind", "-o", "nosuid,nodev", str(d), str(target))

    def _make(self, size: int) -> None:
        """A new image holding the workspace's files, if it had any (moved aside to `in` while they are copied)."""
        make_image(self.image, size)
        if not _empty(self.workspace):
            os.rename(self.workspace, self.incoming)
            os.mkdir(self.workspace, 0o700)
        if not self.mnt.exists():
            os.mkdir(self.mnt, 0o700)
        _run("mount", "-t", "ext4", "-o", MOUNT_OPTIONS, str(self.image), str(self.mnt))
        try:
            os.mkdir(self.mnt / "cache", 0o700)
            if self.incoming.exists():
                missed = copy_tree(self.incoming, self.mnt / "workspace")
            else:
                missed = []
                os.mkdir(self.mnt / "workspace", 0o700)
            if not missed:
                os.close(os.open(self.mnt / "ready", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        except OSError as exc:
            missed = [f"they do not fit its {size} bytes ({exc.strerror}): raise --max-workspace-bytes or remove files"]
        finally:
            unmount_all(self.mnt)
        if missed:
            self.recover()  # the image, without `ready`, is dropped, and the files put back
            raise WorkspaceFsError(
                f"the workspace's files could not all be copied into its own file system: {'; '.join(missed)}"
            )
        if self.incoming.exists():
            shutil.rmtree(self.incoming)

    def recover(self) -> None:
        """Finish or undo what an earlier server on this workspace left (see the module docstring)."""
        for path in (self.workspace, self.cache, self.mnt):
            unmount_all(path)
        if self.image.exists():
            _check_mine(self.image, "the workspace's image", regular=True)
            self._check_ready()
        if self.outgoing.exists():
            if self.image.exists():
                shutil.rmtree(self.outgoing)
            else:
                os.rename(self.outgoing, self.workspace)
        if self.incoming.exists():
            if self.image.exists():
                shutil.rmtree(self.incoming)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.rmdir(self.workspace)
                os.rename(self.incoming, self.workspace)
        if self.image.exists() and self.workspace.is_dir() and not _empty(self.workspace):
            raise WorkspaceFsError(
                f"{self.workspace} holds files, and {self.image} holds the workspace an earlier session left: move "
                "one of them away"
            )

    def _check_ready(self) -> None:
        """Drop an image whose making did not finish (no `ready`): its files are still in `in`."""
        if not self.mnt.exists():
            os.mkdir(self.mnt, 0o700)
        _run("mount", "-t", "ext4", "-o", MOUNT_OPTIONS, str(self.image), str(self.mnt))
        try:
            ready = os.path.lexists(self.mnt / "ready")
        finally:
            unmount_all(self.mnt)
        if not ready:
            self.image.unlink()

    def close(self) -> list[str]:
        """Copy the files out to a plain directory at the workspace, given to this server's user, and take the file
        system down. Returns sentences saying why it stays mounted, when it could not: its files are still shown
        at the workspace, and the next `open` takes them up."""
        try:
            missed = copy_tree(self.mnt / "workspace", self.outgoing)
        except OSError as exc:
            missed = [f"copying the files out failed: {exc.strerror or exc}"]
        if missed:
            shutil.rmtree(self.outgoing, ignore_errors=True)
            return [f"the workspace stays on its own file system, mounted ({'; '.join(missed)})"]
        try:
            for path in (self.workspace, self.cache, self.mnt):
                unmount_all(path)
        except WorkspaceFsError as exc:
            return [f"the workspace's file system could not be unmounted ({exc}); its files stay shown there"]
        self.image.unlink()
        os.rename(self.outgoing, self.workspace)
        for d in (self.mnt, self.home, self.cache):
            with contextlib.suppress(OSError):
                os.rmdir(d)
        return []


def take_down_left(workspace: Path, cache: Path) -> None:
    """Finish or undo what a server killed while serving `workspace` left (its mounts taken down, the files kept in
    its image for the next `open`), so that the workspace can be checked as a plain directory of this server's
    before a session takes it up. Nothing is done where no such server was."""
    fs = WorkspaceFs(workspace, cache)
    if os.path.lexists(fs.home):
        check_place(fs.home, "workspace's file system directory")
        fs.recover()


def unavailable(where: Path) -> str | None:
    """Why a workspace cannot have a file system of its own under `where`, else None: tried once, with a small
    image made, mounted, written and taken down."""
    if os.geteuid() != 0:
        return "the workspace's own file system needs root (loop devices and mount), and this server is not root"
    missing = [tool for tool in ("mkfs.ext4", "mount", "umount") if not shutil.which(tool)]
    if missing:
        return f"{', '.join(missing)} not found (e2fsprogs, util-linux)"
    Path(where).mkdir(parents=True, exist_ok=True)
    trial = Path(tempfile.mkdtemp(prefix=".workspace-fs-probe-", dir=where))
    try:
        make_image(trial / "image", TRIAL_BYTES)
        os.mkdir(trial / "mnt")
        _run("mount", "-t", "ext4", "-o", MOUNT_OPTIONS, str(trial / "image"), str(trial / "mnt"))
        try:
            (trial / "mnt" / "probe").write_text("ok")
        finally:
            unmount_all(trial / "mnt")
    except (OSError, WorkspaceFsError) as exc:
        return f"the workspace's own file system cannot be made here: {exc}"
    finally:
        shutil.rmtree(trial, ignore_errors=True)
    return None
