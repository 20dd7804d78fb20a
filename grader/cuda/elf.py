"""A minimal reader of cubins (ELF64): the kernels they hold and the initial bytes of a variable.

No GPU and no CUDA tool is needed: the launch contract (:mod:`grader.cuda.launch`) reads a
configuration's constants straight out of the compiled file.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

_NOBITS = 8        # section type of zero-initialised data (no bytes in the file)
_EIATTR_MAX_THREADS = 0x05   # in .nv.info.<kernel>: the block size __launch_bounds__ promised (x, y, z)


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    offset: int
    size: int


class Cubin:
    """Sections and symbols of one cubin."""

    def __init__(self, data: bytes):
        if data[:4] != b"\x7fELF" or data[4] != 2:
            raise ValueError("not a 64-bit ELF file (a cubin)")
        self.data = data
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names = raw[shstrndx]
        self.sections = [_Section(self._string(names[4], r[0]), r[1], r[4], r[5]) for r in raw]
        self._raw = raw

    def _string(self, table_offset: int, at: int) -> str:
        start = table_offset + at
        return self.data[start: self.data.index(b"\0", start)].decode()

    def kernels(self) -> list[str]:
        """Entry functions: the symbols with a ``.nv.info.<name>`` section (kernel parameter info);
        else every ``.text.<name>``."""
        names = [s.name for s in self.sections]
        found = [n[len(".nv.info."):] for n in names if n.startswith(".nv.info.")]
        return found or [n[len(".text."):] for n in names if n.startswith(".text.")]

    def symbols(self) -> dict[str, tuple[int, int, int]]:
        """name -> (section index, value, size) of every symbol in .symtab."""
        symtab = next((i for i, s in enumerate(self.sections) if s.name == ".symtab"), None)
        if symtab is None:
            return {}
        sec = self._raw[symtab]
        strtab_offset = self._raw[sec[6]][4]          # sh_link: the symbol names' string table
        out = {}
        for at in range(sec[4], sec[4] + sec[5], 24):
            st_name, _info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", self.data, at)
            if st_name:
                out[self._string(strtab_offset, st_name)] = (shndx, value, size)
        return out

    def kernel_attributes(self, symbol: str) -> dict[int, bytes]:
        """The ``.nv.info.<symbol>`` records of a kernel: attribute code -> payload."""
        section = next((s for s in self.sections if s.name == f".nv.info.{symbol}"), None)
        if section is None:
            return {}
        data, out, i = self.data[section.offset: section.offset + section.size], {}, 0
        while i + 1 < len(data):
            fmt, attr = data[i], data[i + 1]
            if fmt == 4:                                   # EIFMT_SVAL: a 16-bit size, then the value
                (size,) = struct.unpack_from("<H", data, i + 2)
                out[attr], i = data[i + 4: i + 4 + size], i + 4 + size
            elif fmt in (2, 3):                            # EIFMT_BVAL / HVAL: a value in the next 2 bytes
                out[attr], i = data[i + 2: i + 4], i + 4
            else:                                          # EIFMT_NVAL: no value
                out[attr], i = b"", i + 2
        return out

    def max_threads(self, symbol: str) -> int | None:
        """Threads per block the kernel was compiled for (its __launch_bounds__), or None."""
        raw = self.kernel_attributes(symbol).get(_EIATTR_MAX_THREADS)
        if not raw:
            return None
        x, y, z = struct.unpack("<3I", raw[:12])
        return x * y * z

    def variable_bytes(self, symbol: str) -> bytes:
        """The initial value of a device variable (zeros for zero-initialised data)."""
        found = self.symbols().get(symbol)
        if found is None:
            raise KeyError(f"no symbol {symbol!r} in this cubin")
        shndx, value, size = found
        section = self.sections[shndx]
        if section.type == _NOBITS:
            return bytes(size)
        start = section.offset + value
        return self.data[start: start + size]


def kernels(cubin: bytes) -> list[str]:
    """Names of the kernels (entry functions) in a cubin; [] if it is not one."""
    try:
        return Cubin(cubin).kernels()
    except (ValueError, struct.error, IndexError):
        return []
