"""The package builds with python3 -m build --no-isolation (Debian's
python3-build, setuptools, no network) from a copy of this tree, and the
wheel it makes imports on its own."""

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def test_build_sdist_and_wheel(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", ".pytest_cache"))
    out = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = list(out.glob("paddock_sdk-*.whl"))
    sdists = list(out.glob("paddock-sdk-*.tar.gz")) + list(out.glob("paddock_sdk-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, os.listdir(out)
    names = zipfile.ZipFile(wheels[0]).namelist()
    for want in ("paddock/__init__.py", "paddock/types.py", "paddock/client.py", "paddock/aio.py", "paddock/py.typed"):
        assert want in names, names
    assert not [n for n in names if n.startswith("tests/") or "examples" in n]
    meta = [n for n in names if n.endswith("METADATA")][0]
    text = zipfile.ZipFile(wheels[0]).read(meta).decode()
    assert "Name: paddock-sdk" in text and "Requires-Dist: httpx" in text
    with tarfile.open(sdists[0]) as tf:
        assert any(n.endswith("/pyproject.toml") for n in tf.getnames())
    # The wheel on its own (zip import), away from this tree.
    r = subprocess.run([sys.executable, "-c", "import paddock, paddock.types as t; print(paddock.__file__, len(t.SCHEMAS))"],
                       capture_output=True, text=True, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(wheels[0])))
    assert r.returncode == 0 and str(wheels[0]) in r.stdout, r.stderr
