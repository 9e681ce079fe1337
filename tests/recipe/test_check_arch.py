"""recipe/shared/tests/check_arch.py (both packages' arch check): the fat binary parser and CUDA's compatibility rules.

Fabricated fat binaries and ELF files for the parser and the decision logic; a real one from
nvcc (when it is on PATH) to show the parser finds exactly the -gencode images asked for.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tests.recipe.causal_conv1d.recipe_modules import SHARED_TESTS, load_recipe_module

ca = load_recipe_module("check_arch", SHARED_TESTS)
Image = ca.Image


# ---------------------------------------------------------------------------------------------
# Fabricated inputs, laid out as nvcc 13.0 writes them


def entry(kind: int, arch: int, flags: int = 0x11, payload: bytes = b"\x00" * 24, header_size: int = 64) -> bytes:
    head = struct.pack("<HHIQIIHHIIIQ", kind, 0x0101, header_size, len(payload), len(payload), 0,
                       8, 1, arch, 0, 0, flags)
    return head + b"\x00" * (header_size - len(head)) + payload


def fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", ca.FATBIN_MAGIC, 1, 16, len(body)) + body


def elf(sections: dict[str, bytes]) -> bytes:
    """A minimal little-endian ELF64 file with the given sections (plus null and .shstrtab)."""
    names = [""] + list(sections) + [".shstrtab"]
    strtab = b"\0".join(n.encode() for n in names) + b"\0"
    offsets, blob = [], b""
    data_start = 64
    contents = [b""] + list(sections.values()) + [strtab]
    for content in contents:
        offsets.append(data_start + len(blob))
        blob += content + b"\0" * (-len(content) % 8)
    shoff = data_start + len(blob)
    header = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(names), len(names) - 1)
    sh = b""
    name_off = 0
    for name, content, offset in zip(names, contents, offsets, strict=True):
        sh += struct.pack("<IIQQQQIIQQ", name_off, 1 if name else 0, 0, 0, offset, len(content), 0, 0, 8, 0)
        name_off += len(name) + 1
    return header + blob + sh


# ---------------------------------------------------------------------------------------------
# Parsing


def test_parses_sass_ptx_and_variant_flags():
    blob = fatbin(
        entry(ca.KIND_CUBIN, 80),
        entry(ca.KIND_CUBIN, 90, flags=0x11 | ca.FLAG_ARCH_SPECIFIC, header_size=96),
        entry(ca.KIND_CUBIN, 100, flags=0x1000011 | ca.FLAG_FAMILY_SPECIFIC),
        entry(ca.KIND_PTX, 120, flags=0x8011, header_size=80),
    )
    [parsed] = ca.parse_fatbins(blob)
    assert parsed.images == [Image(80, "sass"), Image(90, "sass", "a"), Image(100, "sass", "f"), Image(120, "ptx")]
    assert [i.name for i in parsed.images] == ["sm_80", "sm_90a", "sm_100f", "compute_120"]
    assert ca.describe(parsed.images) == "8.0;9.0a;10.0f;12.0 (PTX only)"
    assert [i.compressed for i in parsed.images] == [False, False, False, True]


def test_line_tables_marks_in_entry_headers():
    """nvcc -lineinfo names the source file in a SASS entry's header and puts --generate-line-info
    among a PTX entry's options (laid out as nvcc 13.0 writes them: offset and length, then text)."""
    def with_name(kind: int, name: bytes, options: bytes = b"") -> bytes:
        header_size = 64 + len(name) + (8 + len(options) if options else 0)
        options_offset = 64 + len(name) if options else 0
        head = struct.pack("<HHIQIIHHIIIQ", kind, 0x0101, header_size, 24, 24, options_offset, 8, 1, 90,
                           64 if name else 0, len(name), 0x8011)
        extra = head + b"\x00" * 16 + name
        if options:
            extra += struct.pack("<II", options_offset + 8, len(options)) + options
        return extra + b"\x00" * 24

    [lines] = ca.parse_fatbins(fatbin(with_name(ca.KIND_CUBIN, b"k.cu\0\0\0\0"),
                                      with_name(ca.KIND_PTX, b"k.cu\0\0\0\0", b" --generate-line-info ")))
    assert [(i.name, i.line_info, i.compressed) for i in lines.images] == [("sm_90", True, True), ("compute_90", True, True)]
    [plain] = ca.parse_fatbins(fatbin(entry(ca.KIND_CUBIN, 90), entry(ca.KIND_PTX, 90)))
    assert [i.line_info for i in plain.images] == [False, False]


def test_several_fatbins_padding_and_stray_magic():
    stray = struct.pack("<I", ca.FATBIN_MAGIC) + b"\xff" * 12  # the magic number, not a header
    blob = fatbin(entry(ca.KIND_CUBIN, 75)) + b"\0" * 8 + stray + fatbin(entry(ca.KIND_CUBIN, 121), entry(ca.KIND_PTX, 121))
    parsed = ca.parse_fatbins(blob)
    assert [fb.images for fb in parsed] == [[Image(75, "sass")], [Image(121, "sass"), Image(121, "ptx")]]
    assert ca.describe(ca.all_images(parsed)) == "7.5;12.1+PTX"


def test_reads_the_nv_fatbin_section_of_an_elf(tmp_path):
    so = tmp_path / "ext.so"
    # A decoy fat binary outside .nv_fatbin must be ignored when the section exists.
    so.write_bytes(elf({".text": fatbin(entry(ca.KIND_CUBIN, 70)), ".nv_fatbin": fatbin(entry(ca.KIND_CUBIN, 90))}))
    assert [fb.images for fb in ca.read_fatbins(so)] == [[Image(90, "sass")]]


def test_falls_back_to_scanning_without_the_section(tmp_path):
    so = tmp_path / "stripped.so"
    so.write_bytes(elf({".data": b"xx" + fatbin(entry(ca.KIND_CUBIN, 86))}))
    assert [fb.images for fb in ca.read_fatbins(so)] == [[Image(86, "sass")]]


def test_a_windows_extension_is_scanned(tmp_path):
    """A .pyd is a PE file: no ELF section table to read, the scan finds its fat binaries (win-64's packages)."""
    pyd = tmp_path / "causal_conv1d_cuda.cp312-win_amd64.pyd"
    pyd.write_bytes(b"MZ\x90\x00" + bytes(60) + b"PE\x00\x00" + bytes(200) + fatbin(entry(ca.KIND_CUBIN, 90)))
    assert [fb.images for fb in ca.read_fatbins(pyd)] == [[Image(90, "sass")]]


def test_errors(tmp_path):
    (tmp_path / "text.so").write_text("not an elf")
    with pytest.raises(ca.FatbinError, match="not an ELF file \\(nor a PE file\\)"):
        ca.read_fatbins(tmp_path / "text.so")
    with pytest.raises(ca.FatbinError, match="cannot read"):
        ca.read_fatbins(tmp_path / "missing.so")
    with pytest.raises(ValueError, match="not an architecture"):
        ca.parse_arch_list("8.0;sm_90")
    with pytest.raises(ValueError, match="not a compute capability"):
        ca.parse_cc("nine")


# ---------------------------------------------------------------------------------------------
# Deciding


@pytest.mark.parametrize(
    "image, gpu, runs",
    [
        (Image(80, "sass"), (8, 0), True),
        (Image(80, "sass"), (8, 6), True),  # same major, newer minor
        (Image(80, "sass"), (8, 9), True),
        (Image(86, "sass"), (8, 0), False),  # never on an older minor
        (Image(80, "sass"), (9, 0), False),  # never across majors
        (Image(100, "sass"), (10, 3), True),
        (Image(103, "sass"), (10, 0), False),
        (Image(120, "sass"), (12, 1), True),
        (Image(90, "sass", "a"), (9, 0), True),
        (Image(100, "sass", "a"), (10, 3), False),  # arch-specific: that GPU only
        (Image(100, "sass", "f"), (10, 3), True),  # family: same major, newer minor
        (Image(103, "sass", "f"), (10, 0), False),
        (Image(90, "ptx"), (9, 0), True),
        (Image(90, "ptx"), (12, 0), True),  # PTX JIT-compiles forward
        (Image(90, "ptx"), (8, 9), False),
        (Image(90, "ptx", "a"), (10, 0), False),
        (Image(100, "ptx", "f"), (10, 3), True),
        (Image(100, "ptx", "f"), (12, 0), False),
    ],
)
def test_runs_on(image, gpu, runs):
    assert image.runs_on(gpu) is runs


def _fb(*images):
    return [ca.Fatbin(0, list(images))]


def test_check_prefers_sass_then_ptx():
    fatbins = _fb(Image(80, "sass"), Image(90, "sass"), Image(90, "ptx"))
    assert ca.check(fatbins, (8, 6)).image == Image(80, "sass")
    assert ca.check(fatbins, (9, 0)).image == Image(90, "sass")
    jit = ca.check(fatbins, (12, 0))
    assert jit.ok and jit.image == Image(90, "ptx") and "JIT" in jit.message


def test_check_failure_message():
    verdict = ca.check(_fb(Image(80, "sass"), Image(90, "sass")), (12, 0), what="causal_conv1d_cuda.so")
    assert not verdict.ok and verdict.image is None
    assert "built for 8.0;9.0, this GPU is 12.0" in verdict.message
    assert "rebuild with --arch 12.0 (ssm-conda build --arch native)" in verdict.message


def test_check_flags_a_translation_unit_without_code_for_the_gpu():
    fatbins = [ca.Fatbin(0, [Image(80, "sass"), Image(90, "sass")]), ca.Fatbin(1, [Image(80, "sass")])]
    assert ca.check(fatbins, (8, 0)).ok
    verdict = ca.check(fatbins, (9, 0))
    assert not verdict.ok and "1 of its 2 fat binaries" in verdict.message


def test_compare_expected():
    fatbins = _fb(Image(75, "sass"), Image(80, "sass"), Image(121, "sass"), Image(121, "ptx"))
    assert ca.compare_expected(fatbins, "7.5;8.0;12.1+PTX") == []
    assert ca.compare_expected(fatbins, "7.5;8.0;9.0;12.1") == ["missing sm_90", "unexpected compute_121"]
    assert ca.parse_arch_list("9.0a+PTX 10.0f") == {Image(90, "sass", "a"), Image(90, "ptx", "a"), Image(100, "sass", "f")}


def test_cli_on_fabricated_file(tmp_path, capsys):
    so = tmp_path / "ext.so"
    so.write_bytes(elf({".nv_fatbin": fatbin(entry(ca.KIND_CUBIN, 80), entry(ca.KIND_CUBIN, 90))}))
    assert ca.main(["--so", str(so), "--gpu", "8.9", "--gpu", "9.0", "--expect", "8.0;9.0"]) == 0
    assert ca.main(["--so", str(so), "--gpu", "12.0"]) == 1
    assert "this GPU is 12.0: no kernel image" in capsys.readouterr().out
    assert ca.main(["--so", str(so), "--expect", "8.0"]) == 1
    assert ca.main(["--so", str(tmp_path / "nope.so")]) == 2
    assert "no such file" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# A real fat binary from nvcc

KERNEL = """
__global__ void add_one(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }
extern "C" void launch(float *x, int n) { add_one<<<(n + 255) / 256, 256>>>(x, n); }
"""


@pytest.fixture(scope="module")
def nvcc_build(tmp_path_factory):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    directory = tmp_path_factory.mktemp("nvcc")
    (directory / "k.cu").write_text(KERNEL)

    def build(name: str, *gencodes: str, options: tuple[str, ...] = ()) -> Path:
        out = directory / name
        cmd = [nvcc, "-shared", "-Xcompiler", "-fPIC", *options, "-o", str(out), str(directory / "k.cu")]
        for gencode in gencodes:
            cmd += ["-gencode", gencode]
        subprocess.run(cmd, check=True, capture_output=True, timeout=600)
        return out

    return build


def test_real_fatbin_two_gencodes(nvcc_build):
    so = nvcc_build("two.so", "arch=compute_80,code=sm_80", "arch=compute_90,code=compute_90")
    fatbins = ca.read_fatbins(so)
    assert set(ca.all_images(fatbins)) == {Image(80, "sass"), Image(90, "ptx")}
    assert ca.describe(ca.all_images(fatbins)) == "8.0;9.0 (PTX only)"
    assert ca.check(fatbins, (8, 6)).image == Image(80, "sass")
    assert ca.check(fatbins, (10, 0)).image == Image(90, "ptx")
    assert not ca.check(fatbins, (7, 5)).ok


def test_real_fatbin_variant_flags(nvcc_build):
    so = nvcc_build("variants.so", "arch=compute_90a,code=sm_90a", "arch=compute_100f,code=sm_100f",
                    "arch=compute_120f,code=compute_120f")
    assert set(ca.all_images(ca.read_fatbins(so))) == {Image(90, "sass", "a"), Image(100, "sass", "f"), Image(120, "ptx", "f")}


@pytest.mark.parametrize(("mode", "compressed"), [("size", {"sass": True, "ptx": True}),
                                                  ("none", {"sass": False, "ptx": False})])
def test_real_fatbin_compression(nvcc_build, mode, compressed):
    """What the build script's --compress-mode=size does to the images, as the reader sees it."""
    so = nvcc_build(f"compress-{mode}.so", "arch=compute_90,code=[sm_90,compute_90]", options=(f"--compress-mode={mode}",))
    images = ca.all_images(ca.read_fatbins(so))
    assert {i.kind: i.compressed for i in images} == compressed


def cuobjdump() -> str | None:
    """NVIDIA's wheel (requirements-dev.txt) or one on PATH."""
    import sysconfig

    for root in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for candidate in Path(root).glob("nvidia/cu*/bin/cuobjdump"):
            return str(candidate)
    return shutil.which("cuobjdump")


@pytest.mark.parametrize("mode", ["size", "none"])
@pytest.mark.parametrize("lineinfo", [True, False])
def test_real_fatbin_line_tables(nvcc_build, lineinfo, mode):
    """The reader sees -lineinfo in compressed fat binaries too, and agrees with cuobjdump, which
    decompresses the cubin and lists its line-table sections."""
    options = (f"--compress-mode={mode}", *(["-lineinfo"] if lineinfo else []))
    so = nvcc_build(f"lines-{lineinfo}-{mode}.so", "arch=compute_90,code=[sm_90,compute_90]", options=options)
    images = ca.all_images(ca.read_fatbins(so))
    assert {(i.kind, i.line_info) for i in images} == {("sass", lineinfo), ("ptx", lineinfo)}
    tool = cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump to compare with (pip install -r requirements-dev.txt)")
    sections = subprocess.run([tool, "-elf", str(so)], capture_output=True, text=True, check=True).stdout
    assert (".nv_debug_line_sass" in sections) is lineinfo


# ---------------------------------------------------------------------------------------------
# The installed library: found without importing it, and read for any use of Python


def test_find_extension_takes_a_library_inside_a_package_or_a_top_level_module(tmp_path, monkeypatch):
    """causal_conv1d/_C.abi3.so (the kernels since the torch-library patch) and a top-level extension alike, found on
    sys.path without importing them or their package (whose __init__ here would fail)."""
    (tmp_path / "causal_conv1d").mkdir()
    (tmp_path / "causal_conv1d" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (tmp_path / "causal_conv1d" / "_C.abi3.so").write_bytes(b"\x7fELF")
    (tmp_path / "old_ext.abi3.so").write_bytes(b"\x7fELF")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert ca.find_extension("causal_conv1d._C") == tmp_path / "causal_conv1d" / "_C.abi3.so"
    assert ca.find_extension("old_ext") == tmp_path / "old_ext.abi3.so"
    with pytest.raises(ca.FatbinError, match=r"^the extension module mamba_ssm\._C is not installed"):
        ca.find_extension("mamba_ssm._C")


def _shared_library(tmp_path: Path, name: str, source: str, *link: str) -> Path:
    (tmp_path / f"{name}.c").write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / f"{name}.so"), str(tmp_path / f"{name}.c"),
                    f"-L{tmp_path}", *link], check=True)
    return tmp_path / f"{name}.so"


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to link real ELF libraries")
def test_python_references_finds_libpython_and_python_symbols(tmp_path):
    """What test_library_uses_no_python reads: a library linked to a libpython and calling the C API is caught, by the
    library it needs and by each undefined Py symbol; one that only does arithmetic says nothing."""
    _shared_library(tmp_path, "libpython3.12", "int Py_IsInitialized(void) { return 1; }\n")
    clean = _shared_library(tmp_path, "clean", "int twice(int x) { return 2 * x; }\n")
    assert ca.python_references(clean.read_bytes()) == []
    binding = _shared_library(tmp_path, "binding", "extern int Py_IsInitialized(void), twice(int), _Py_Count;\n"
                              "int f(void) { return Py_IsInitialized() + _Py_Count + twice(1); }\n", "-lpython3.12",
                              "-l:clean.so")
    found = ca.python_references(binding.read_bytes())
    assert found[0] == "libpython3.12.so" and sorted(found[1:]) == ["Py_IsInitialized", "_Py_Count"]  # not twice, clean.so
