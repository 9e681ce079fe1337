# ruff: noqa: UP031
# Run by the doctor inside the interpreter it checks (`python -c <this text>`): any Python 3 with any (or a broken)
# torch, so it imports nothing of ssm_conda, keeps to old syntax and catches everything (a broken torch must not take
# the doctor down). Each finding is one `@@doctor {json}` line keyed by the doctor's dataclasses' fields, flushed at
# once, so a crash still leaves what came before it. argv[1], as JSON: {"import_torch": bool, "packages": [{"name",
# "module", "extensions"}, ...]} (ssm_conda.project).
import importlib.util
import json
import os
import sys

if sys.path and sys.path[0] in ("", os.getcwd()):
    sys.path.pop(0)
ASKED = json.loads(sys.argv[1])


def emit(**kw):
    print("@@doctor " + json.dumps(kw), flush=True)


def dist(md, *names):
    for name in names:
        try:
            found = md.distribution(name)
        except Exception:
            continue
        out = {"version": found.version, "installer": None, "url": None}
        try:  # read_text is None for a missing file; a malformed one leaves what was read
            out["installer"] = (found.read_text("INSTALLER") or "").strip() or None
            out["url"] = json.loads(found.read_text("direct_url.json") or "{}").get("url")
        except Exception:
            pass
        return out
    return None


emit(stage="python", version="%d.%d.%d" % tuple(sys.version_info[:3]), executable=sys.executable, prefix=sys.prefix)
try:
    import importlib.metadata as metadata

    found = dict((p["module"], dist(metadata, p["module"], p["name"])) for p in ASKED["packages"])
    emit(stage="dists", torch=dist(metadata, "torch"), **found)
except ImportError:  # before Python 3.8
    pass
if importlib.util.find_spec("torch") is None or not ASKED["import_torch"]:
    sys.exit(0)
try:
    import torch

    emit(stage="torch", version=str(torch.__version__), cuda=torch.version.cuda,
         cxx11_abi=bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False)))
except BaseException as exc:
    emit(stage="torch", import_error="%s: %s" % (type(exc).__name__, exc))
    sys.exit(0)
for name in [e for p in ASKED["packages"] for e in p["extensions"]]:
    if importlib.util.find_spec(name) is None:
        continue
    emit(stage="extension", name=name, crashed=True)  # stands if the import takes the interpreter down
    try:
        importlib.import_module(name)
        emit(stage="extension", name=name, error=None)
    except BaseException as exc:
        emit(stage="extension", name=name, error="%s: %s" % (type(exc).__name__, exc))
