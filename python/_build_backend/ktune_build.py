"""A minimal PEP 517 / PEP 660 build backend using only the standard library (no setuptools, no network).

Builds a pure-Python wheel (py3-none-any) of the `ktune` package beside this folder. With KTUNE_WHEEL_BUNDLE=1
it builds a platform wheel instead (py3-none-<platform>) that carries libktune under its SONAME (ktune/_soname.py,
e.g. libktune.so.0.1) and, when built, the LLVM host plugin libktune_host.so in ktune/lib/, where ktune._lib looks
first after $KTUNE_LIBRARY, and the ktune CLI in ktune/bin/ (the worker processes of ktune.warmup(devices=...) run
it; it finds ktune/lib/ by its RPATH); they come from KTUNE_WHEEL_LIBDIR (default <checkout>/build/lib) and its
../bin/, stripped of debug info (`strip`). The metadata below must match pyproject.toml's [project] table (checked
by python/tests/test_packaging.py)."""

import base64
import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import sysconfig
import tarfile
import tempfile
import time
import zipfile

NAME = "ktune"
SUMMARY = "JIT kernel runtime with an autotune cache: Python bindings (ctypes over libktune) with PyTorch custom ops"
REQUIRES_PYTHON = ">=3.8"
EXTRAS = {"numpy": ["numpy"], "torch": ["torch>=2.4"]}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
PKG = os.path.join(ROOT, NAME)


def _string_constant(module, name, value_pattern):
    """NAME = "value" from ktune/<module>.py, read as text: the backend never imports the package."""
    with open(os.path.join(PKG, module + ".py"), encoding="utf-8") as f:
        m = re.search(r'^' + name + r' = "(' + value_pattern + r')"$', f.read(), re.M)
    if not m:
        raise RuntimeError(f"ktune_build: {name} not found in ktune/{module}.py")
    return m.group(1)


def _version():
    return _string_constant("__init__", "__version__", r'[^"]+')


def _soname():
    """The SONAME the package binds (ktune/_soname.py)."""
    return _string_constant("_soname", "SONAME", r'libktune\.so\.[0-9.]+')


def _metadata():
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {_version()}", f"Summary: {SUMMARY}",
             f"Requires-Python: {REQUIRES_PYTHON}"]
    for extra, reqs in EXTRAS.items():
        lines.append(f"Provides-Extra: {extra}")
        for r in reqs:
            lines.append(f'Requires-Dist: {r}; extra == "{extra}"')
    return "\n".join(lines) + "\n"


HOST_PLUGIN = "libktune_host.so"  # optional (no LLVM 19: not built)
# The CLI, for warmup worker processes (beside lib/, where libktune looks for it); optional like the host plugin.
BUNDLED_CLI = ("../bin/ktune", "bin/ktune")


def _bundle():
    return os.environ.get("KTUNE_WHEEL_BUNDLE", "") not in ("", "0")


def _tag():
    if not _bundle():
        return "py3-none-any"
    return "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _wheel_file():
    purelib = "false" if _bundle() else "true"
    return f"Wheel-Version: 1.0\nGenerator: ktune_build\nRoot-Is-Purelib: {purelib}\nTag: {_tag()}\n"


def _bundled_libs():
    """[(arcname, bytes)] of the stripped libraries for ktune/lib/; raises when libktune (by its SONAME, the file
    the CLI's DT_NEEDED names) is missing."""
    libdir = os.environ.get("KTUNE_WHEEL_LIBDIR") or os.path.join(os.path.dirname(ROOT), "build", "lib")
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        soname = _soname()
        for name in (soname, HOST_PLUGIN):
            src = os.path.join(libdir, name)
            if not os.path.exists(src):
                if name == soname:
                    raise RuntimeError(f"ktune_build: KTUNE_WHEEL_BUNDLE=1 but {src} does not exist "
                                       "(build libktune first, or set KTUNE_WHEEL_LIBDIR to its lib/ folder)")
                continue
            dst = os.path.join(tmp, name)
            strip = shutil.which("strip")
            if strip:
                subprocess.run([strip, "--strip-unneeded", "-o", dst, os.path.realpath(src)], check=True)
            else:
                shutil.copyfile(os.path.realpath(src), dst)
            out.append((f"{NAME}/lib/{name}", _read(dst)))
        cli = os.path.join(libdir, BUNDLED_CLI[0])
        if os.path.exists(cli):
            dst = os.path.join(tmp, "ktune")
            strip = shutil.which("strip")
            if strip:
                subprocess.run([strip, "--strip-unneeded", "-o", dst, os.path.realpath(cli)], check=True)
            else:
                shutil.copyfile(os.path.realpath(cli), dst)
            out.append((f"{NAME}/{BUNDLED_CLI[1]}", _read(dst)))
    return out


def _dist_info():
    return f"{NAME}-{_version()}.dist-info"


def _package_files():
    for dirpath, dirnames, filenames in os.walk(PKG):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(dirpath, fn)
            yield full, os.path.relpath(full, ROOT).replace(os.sep, "/")


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory, entries):
    """entries: [(arcname, bytes)]; adds the dist-info files and RECORD."""
    di = _dist_info()
    entries = list(entries) + [(f"{di}/METADATA", _metadata().encode()), (f"{di}/WHEEL", _wheel_file().encode())]
    record = [_record_line(a, d) for a, d in entries] + [f"{di}/RECORD,,"]
    entries.append((f"{di}/RECORD", ("\n".join(record) + "\n").encode()))
    name = f"{NAME}-{_version()}-{_tag()}.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    stamp = (2020, 1, 1, 0, 0, 0)  # reproducible archives
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            info = zipfile.ZipInfo(arc, stamp)
            info.external_attr = (0o755 if re.search(r"\.so(\.[0-9]+)*$", arc) else 0o644) << 16
            if arc == f"{NAME}/{BUNDLED_CLI[1]}":  # pip keeps the executable bit only of a regular file's mode
                info.external_attr = (stat.S_IFREG | 0o755) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- PEP 517 hooks ----
def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    di = os.path.join(metadata_directory, _dist_info())
    os.makedirs(di, exist_ok=True)
    with open(os.path.join(di, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(di, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    return _dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = [(arc, _read(full)) for full, arc in _package_files()
               if not arc.startswith((f"{NAME}/lib/", f"{NAME}/bin/"))]
    if _bundle():
        entries += _bundled_libs()
    return _write_wheel(wheel_directory, entries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # PEP 660: a .pth file that puts python/ on sys.path, so edits in the checkout take effect at once
    return _write_wheel(wheel_directory, [(f"__editable__.{NAME}.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    name = base + ".tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    files = [os.path.join(ROOT, "pyproject.toml"), os.path.join(ROOT, "_build_backend", "ktune_build.py")]
    files += [full for full, _ in _package_files()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for full in files:
            data = _read(full)
            info = tarfile.TarInfo(f"{base}/{os.path.relpath(full, ROOT).replace(os.sep, '/')}")
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            t.addfile(info, io.BytesIO(data))
        pkg_info = _metadata().replace("Metadata-Version: 2.1", "Metadata-Version: 2.1", 1).encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size, info.mtime, info.mode = len(pkg_info), int(time.time()), 0o644
        t.addfile(info, io.BytesIO(pkg_info))
    return name
