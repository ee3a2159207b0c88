"""The files tracekit itself wrote into a bundle folder, told apart from those the captured script wrote.

The script runs with the bundle folder in reach: it may write ``OUT/meta.json`` or
``OUT/trace.json.gz`` itself. Such a file must never stand in for tracekit's own. Each file tracekit
writes is remembered by (device, inode, size, modification time); before tracekit writes a name, and
after the script ended, a file of that name that does not match is the script's: it is moved aside to
``script-<name>`` (kept, as every user file is) and a warning says so on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable


def _signature(st) -> tuple:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class OwnFiles:
    """Signatures of the files tracekit wrote into ``folder``; ``warn`` says what was moved aside."""

    def __init__(self, folder: Path, warn: Callable[[str], None]):
        self.folder, self.warn = Path(folder), warn
        self.written: dict[str, tuple] = {}

    def owns(self, name: str) -> bool:
        return name in self.written

    def claim(self, name: str) -> None:
        """Before tracekit writes ``name``: a file of that name it did not write is moved aside."""
        path = self.folder / name
        try:
            st = path.lstat()
        except OSError:
            return
        if self.written.get(name) == _signature(st):
            return
        aside, n = self.folder / f"script-{name}", 1
        while aside.exists() or aside.is_symlink():
            n += 1
            aside = self.folder / f"script{n}-{name}"
        path.rename(aside)
        self.written.pop(name, None)
        self.warn(f"warning: the script wrote {name} into the bundle folder: moved to {aside.name} "
                  "(tracekit writes its own)")

    def mark(self, name: str) -> None:
        """``name`` was just written by tracekit."""
        try:
            self.written[name] = _signature((self.folder / name).lstat())
        except OSError:
            self.written.pop(name, None)

    def check(self) -> None:
        """After the script: each file tracekit wrote earlier is still tracekit's (else moved aside, said);
        a bundle folder the script removed is made again (an OSError when that cannot be)."""
        if not self.folder.is_dir():
            self.folder.mkdir(parents=True)
            self.written.clear()
            self.warn("warning: the script removed the bundle folder; tracekit made it again for the bundle")
            return
        for name in list(self.written):
            path = self.folder / name
            if not path.exists() and not path.is_symlink():
                self.written.pop(name)
                self.warn(f"warning: the script removed {name}, which tracekit wrote into the bundle")
                continue
            if self.written[name] != _signature(path.lstat()):
                self.claim(name)                 # the script replaced it: moved aside, said
