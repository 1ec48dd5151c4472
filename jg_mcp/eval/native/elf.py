"""An ELF64 file read as the dynamic loader reads it: its program headers and dynamic segment only (never the
section headers, which the loader ignores and a file may strip or forge), for what the loader binds by name: the
libraries it needs and the symbols its relocations bind. `jg_mcp.eval.native.native` judges a candidate's native code by
them. Every read is bounded by the file's own bytes: a malformed file raises ElfError, never anything else."""

from __future__ import annotations

import struct
from dataclasses import dataclass

MAX_RELOCATIONS = 1 << 22
"""Relocations per table the harness reads (a candidate's library has thousands; libtorch_python 7900 symbols)."""


class ElfError(ValueError):
    """A file the harness cannot read as the dynamic loader would (its code is then not judged: a finding)."""


@dataclass(frozen=True)
class Elf:
    """What the dynamic loader binds for one ELF file."""

    dynamic: bool
    """It has a dynamic segment (a shared library or a dynamically linked executable)."""
    needed: tuple[str, ...]
    """The libraries it names for the loader (DT_NEEDED, and the filters DT_FILTER and DT_AUXILIARY)."""
    bound: tuple[str, ...]
    """The symbols its relocations have the loader find by name: the undefined ones, and its own definitions that
    another library can preempt (global or weak, default visibility: the loader searches the global scope first)."""


_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_SYM = struct.Struct("<IBBHQQ")
_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NEEDED, _DT_PLTRELSZ, _DT_STRTAB, _DT_SYMTAB, _DT_RELA, _DT_RELASZ, _DT_RELAENT = 1, 2, 5, 6, 7, 8, 9
_DT_STRSZ, _DT_SYMENT, _DT_REL, _DT_RELSZ, _DT_RELENT, _DT_PLTREL, _DT_JMPREL = 10, 11, 17, 18, 19, 20, 23
_DT_FILTERS = (0x7FFFFFFD, 0x7FFFFFFF)
_RELOC_SIZE = {_DT_RELA: 24, _DT_REL: 16}


class _Image:
    """The file's loadable segments as the loader maps them, read by virtual address (where segments overlap, the
    last one wins, as the later of two fixed mappings does). Only what the file holds is read: the loader's tables
    never lie in a segment's zero-filled tail."""

    def __init__(self, data: bytes, loads: list[tuple[int, int, int]]):
        self.data = data
        self.loads = loads
        if any(offset + filesz > len(data) for _, offset, filesz in loads):
            raise ElfError("a loadable segment reaches past the end of the file")

    def read(self, vaddr: int, size: int) -> bytes:
        for start, offset, filesz in reversed(self.loads):
            if start <= vaddr and vaddr + size <= start + filesz:
                return self.data[offset + vaddr - start : offset + vaddr - start + size]
        raise ElfError(f"{size} bytes at {vaddr:#x} lie outside what its loadable segments hold")


def read_elf(data: bytes) -> Elf:
    """Parse a little-endian ELF64 file as the dynamic loader reads it: its program headers, the dynamic segment at
    its address in the loaded image, the string and symbol tables and relocations that segment names. Never its
    section headers, which the loader ignores (a file can carry a misleading set). ElfError when it cannot."""
    if len(data) < _EHDR.size or data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01":
        raise ElfError("not a little-endian ELF64 file")
    _, e_type, _, _, _, phoff, _, _, _, phentsize, phnum, *_ = _EHDR.unpack_from(data)
    if e_type not in (2, 3):
        raise ElfError(f"ELF type {e_type} is neither an executable nor a shared object")
    if phentsize != _PHDR.size or phoff + phnum * phentsize > len(data):
        raise ElfError("its program headers do not fit the file")
    headers = [_PHDR.unpack_from(data, phoff + i * phentsize) for i in range(phnum)]
    loads = [(h[3], h[2], h[5]) for h in headers if h[0] == _PT_LOAD]
    dynamic = [h for h in headers if h[0] == _PT_DYNAMIC]
    if not dynamic:
        return Elf(dynamic=False, needed=(), bound=())
    if len(dynamic) > 1:
        raise ElfError("more than one dynamic segment")
    image = _Image(data, loads)
    tags, needed = _dynamic_entries(image, dynamic[0][3], dynamic[0][5])
    strings = image.read(tags.get(_DT_STRTAB, 0), tags.get(_DT_STRSZ, 0)) if _DT_STRTAB in tags else b""

    def name(offset: int) -> str:
        end = strings.find(b"\0", offset)
        if offset >= len(strings) or end < 0:
            raise ElfError(f"a name at {offset} lies outside its string table")
        return strings[offset:end].decode("utf-8", "backslashreplace")

    if tags.get(_DT_SYMENT, _SYM.size) != _SYM.size:
        raise ElfError("an unusual symbol size")
    bound: dict[str, None] = {}
    for index in _relocated_symbols(image, tags):
        st_name, st_info, st_other, st_shndx, _, _ = _SYM.unpack(image.read(tags[_DT_SYMTAB] + index * _SYM.size, 24))
        preemptible = st_info >> 4 in (1, 2, 10) and st_other & 3 == 0
        if st_name and (st_shndx == 0 or preemptible):
            bound[name(st_name)] = None
    return Elf(dynamic=True, needed=tuple(name(n) for n in needed), bound=tuple(bound))


def _dynamic_entries(image: _Image, vaddr: int, size: int) -> tuple[dict[int, int], list[int]]:
    """The dynamic array up to DT_NULL: the last value of each tag (as the loader keeps it) and the library names'
    string offsets."""
    tags: dict[int, int] = {}
    needed: list[int] = []
    for tag, value in struct.iter_unpack("<qQ", image.read(vaddr, size - size % 16)):
        if tag == 0:
            return tags, needed
        if tag == _DT_NEEDED or tag in _DT_FILTERS:
            needed.append(value)
        tags[tag] = value
    raise ElfError("its dynamic array has no end")


def _relocated_symbols(image: _Image, tags: dict[int, int]) -> set[int]:
    """The symbol indices every relocation table of the file names."""
    tables = [(_DT_RELA, tags.get(_DT_RELA), tags.get(_DT_RELASZ, 0), tags.get(_DT_RELAENT, 24))]
    tables.append((_DT_REL, tags.get(_DT_REL), tags.get(_DT_RELSZ, 0), tags.get(_DT_RELENT, 16)))
    kind = tags.get(_DT_PLTREL, _DT_RELA)
    tables.append((kind, tags.get(_DT_JMPREL), tags.get(_DT_PLTRELSZ, 0), _RELOC_SIZE.get(kind, 0)))
    indices: set[int] = set()
    for kind, start, size, entry in tables:
        if start is None or not size:
            continue
        if entry != _RELOC_SIZE.get(kind) or size % entry:
            raise ElfError("a relocation table of an unusual layout")
        if size // entry > MAX_RELOCATIONS:
            raise ElfError(f"more than {MAX_RELOCATIONS} relocations in one table")
        raw = image.read(start, size)
        indices |= {struct.unpack_from("<Q", raw, i + 8)[0] >> 32 for i in range(0, size, entry)}
    indices.discard(0)
    if indices and _DT_SYMTAB not in tags:
        raise ElfError("relocations name symbols but it has no symbol table")
    return indices
