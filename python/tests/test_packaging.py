"""The in-tree build backend: its metadata matches pyproject.toml, and the wheel it writes is a valid pure
wheel whose RECORD hashes match its files (what `pip install ./python` installs with no network)."""

import base64
import hashlib
import importlib.util
import os
import re
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load_backend():
    spec = importlib.util.spec_from_file_location("ktune_build", os.path.join(ROOT, "_build_backend", "ktune_build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Packaging(unittest.TestCase):
    def test_metadata_matches_pyproject(self):
        b = load_backend()
        with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
            text = f.read()
        self.assertIn(f'name = "{b.NAME}"', text)
        self.assertIn(f'version = "{b._version()}"', text)
        self.assertIn(f'description = "{b.SUMMARY}"', text)
        self.assertIn(f'requires-python = "{b.REQUIRES_PYTHON}"', text)
        self.assertRegex(text, r"requires = \[\]")  # nothing to download
        for extra, reqs in b.EXTRAS.items():
            self.assertRegex(text, re.escape(extra) + r" = \[" + ", ".join(re.escape(f'"{r}"') for r in reqs) + r"\]")

    def test_wheel_is_complete_and_recorded(self):
        b = load_backend()
        with tempfile.TemporaryDirectory() as d:
            name = b.build_wheel(d)
            self.assertRegex(name, r"^ktune-[0-9.]+-py3-none-any\.whl$")
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = set(z.namelist())
                for mod in ("__init__", "_lib", "_soname", "errors", "runtime", "xqa", "host", "numerics",
                            "torch_ops", "torch_families", "mla", "host_mla", "mxfp4", "engine"):
                    self.assertIn(f"ktune/{mod}.py", names)
                self.assertFalse(any("__pycache__" in n for n in names))
                di = [n for n in names if n.endswith(".dist-info/RECORD")][0].rsplit("/", 1)[0]
                record = z.read(f"{di}/RECORD").decode().splitlines()
                self.assertEqual(len(record), len(names))
                for line in record:
                    path, digest, size = line.rsplit(",", 2)
                    if path.endswith("RECORD"):
                        continue
                    data = z.read(path)
                    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual(digest, f"sha256={want}", path)
                    self.assertEqual(int(size), len(data), path)
                self.assertIn("Root-Is-Purelib: true", z.read(f"{di}/WHEEL").decode())

    def test_bundled_wheel_carries_the_libraries(self):
        # KTUNE_WHEEL_BUNDLE=1: a platform wheel with ktune/lib/ (any ELF stands in for the libraries here)
        import shutil
        import sysconfig
        b = load_backend()
        elf = shutil.which("true") or "/bin/true"
        soname = b._soname()  # the file the CLI's DT_NEEDED names, so bin/ktune finds it by its RPATH
        self.assertRegex(soname, r"^libktune\.so\.[0-9]+(\.[0-9]+)?$")
        with tempfile.TemporaryDirectory() as d:
            libdir = os.path.join(d, "lib")
            os.makedirs(libdir)
            shutil.copyfile(elf, os.path.join(libdir, soname))
            old = {k: os.environ.get(k) for k in ("KTUNE_WHEEL_BUNDLE", "KTUNE_WHEEL_LIBDIR")}
            os.environ.update(KTUNE_WHEEL_BUNDLE="1", KTUNE_WHEEL_LIBDIR=libdir)
            try:
                name = b.build_wheel(os.path.join(d, "out"))
                plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
                self.assertEqual(name, f"ktune-{b._version()}-py3-none-{plat}.whl")
                with zipfile.ZipFile(os.path.join(d, "out", name)) as z:
                    self.assertIn(f"ktune/lib/{soname}", z.namelist())
                    self.assertEqual(z.getinfo(f"ktune/lib/{soname}").external_attr >> 16 & 0o777, 0o755)
                    self.assertNotIn("ktune/lib/libktune_host.so", z.namelist())  # optional: absent here
                    wheel = z.read(f"ktune-{b._version()}.dist-info/WHEEL").decode()
                    self.assertIn("Root-Is-Purelib: false", wheel)
                    self.assertIn(f"Tag: py3-none-{plat}", wheel)
                os.remove(os.path.join(libdir, soname))
                with self.assertRaisesRegex(RuntimeError, f"{soname} does not exist"):
                    b.build_wheel(os.path.join(d, "out2"))
            finally:
                for k, v in old.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v


if __name__ == "__main__":
    unittest.main()
