"""`fabrikit sites import`, the container: the script's container call becomes `container`
(runtime, image, `--nv`/`--rocm`), and its `--bind`s, `APPTAINER_BIND`/`SINGULARITY_BIND`
entries and `--mount`s become `binds`. A whole system library directory bound over the
container's own (fabric-facts.md, "Recurring failures" 5) becomes `host_libraries`: the
named libraries, bound file by file with their dependency closure.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

from . import profile as schema
from .job_script import BindSpec
from .shell_script import Value
from .site_import_env import BIND_VARIABLES
from .site_import_state import ImportState

# Directories whose wholesale bind shadows the container's own libraries (fabric-facts.md,
# "Recurring failures" 5).
SYSTEM_LIB_DIRS = {"/usr/lib64", "/lib64", "/usr/lib", "/lib", "/usr/lib/x86_64-linux-gnu",
                   "/usr/lib/aarch64-linux-gnu", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr",
                   "/usr/local/lib", "/usr/local/lib64"}
_LIBNAME = re.compile(r"\blib[A-Za-z0-9_+-]*\.so(?:\.\d+)*")
_SONAME = re.compile(r"^lib[A-Za-z0-9_+.-]*\.so(\.\d+)*$")


def map_container(st: ImportState) -> None:
    d = st.draft
    step = st.step
    if step is None:
        d.set(("container", "runtime"), "none", "no srun/apptainer/torchrun line found in the script")
        st.hazard("no-launch", "todo", None, "no line that starts training (torchrun, python, apptainer "
                  "exec) was found; the profile has the Slurm settings only")
        return
    call = step.container
    if call is None:
        d.set(("container", "runtime"), "none", f"line {step.line}: the script runs the launcher on the host")
        if st.js.modules:
            mods = ", ".join(m for m, _ in st.js.modules)
            st.hazard("modules", "todo", st.js.modules[0][1],
                      f"the job uses host modules ({mods}); fabrikit's batch script loads none: "
                      "load them before run-multinode (sbatch passes your environment on) or use an image")
        return
    where = f"line {call.line}: {call.runtime}"
    site_modules = [(m, line) for m, line in st.js.modules
                    if not re.match(r"(apptainer|singularity)(ce)?(/|$)", m, re.I)]
    if site_modules:
        mods = ", ".join(m for m, _ in site_modules)
        st.hazard("modules", "todo", site_modules[0][1],
                  f"the script loads modules ({mods}) whose binds and variables (e.g. SINGULARITY_BIND, "
                  "APPTAINERENV_*) are not visible in it and so not in the profile; load them before "
                  "run-multinode (sbatch passes your environment on) or add what they set")
    if call.runtime not in ("apptainer", "singularity"):
        d.set(("container", "runtime"), "apptainer", f"{where}: fabrikit runs Apptainer images")
        st.hazard("foreign-runtime", "todo", call.line,
                  f"the script uses {call.runtime}"
                  + (f" (image {call.image.text})" if call.image else "")
                  + "; fabrikit runs Apptainer: build or pull a SIF (build-image, or `apptainer pull`) "
                  "and set container.image")
        _placeholder_image(st, "the script's image is not an Apptainer SIF")
    else:
        d.set(("container", "runtime"), call.runtime, f"{where} exec")
        _image(st, call.image, call.image_line)
    names = [o.name for o in call.options]
    foreign = call.runtime not in ("apptainer", "singularity")
    if foreign and st.gpus and (st.evidence.vendor or ("nvidia", ""))[0] == "nvidia":
        d.set(("container", "gpu_flag"), "--nv", f"{where} exposes NVIDIA GPUs itself; Apptainer needs --nv")
    elif foreign:
        d.set(("container", "gpu_flag"), "none", f"{where}: no GPUs requested")
    elif "nv" in names or "nvccli" in names:
        d.set(("container", "gpu_flag"), "--nv", where + " --nv")
        st.evidence.vendor = st.evidence.vendor or ("nvidia", f"line {call.line}: --nv")
    elif "rocm" in names:
        d.set(("container", "gpu_flag"), "--rocm", where + " --rocm")
        st.evidence.vendor = st.evidence.vendor or ("amd", f"line {call.line}: --rocm")
    else:
        d.set(("container", "gpu_flag"), "none", f"{where}: neither --nv nor --rocm")
    for option in call.options if not foreign else ():
        if option.name in ("cleanenv", "containall"):
            st.hazard("cleanenv", "fixed", option.line,
                      f"{option.written} strips the host environment, SLINGSHOT_* (which the cxi provider "
                      "needs) and SLURM_* included; fabrikit passes values as APPTAINERENV_* and never "
                      "uses --cleanenv")
        elif option.name not in ("bind", "mount", "env", "env-file", "nv", "nvccli", "rocm"):
            st.hazard("container-option", "todo", option.line,
                      f"{option.written}: fabrikit's launch line has no place for this {call.runtime} "
                      "option; not carried")
        if option.name == "env-file" and option.value is not None and not any(
                h.how.startswith("--env-file") for h in step.env):
            st.hazard("env-file", "todo", option.line, f"--env-file {option.value.text}: could not be "
                      "read here; copy its variables into env")


def _image(st: ImportState, image: Value | None, line: int) -> None:
    d = st.draft
    if image is None:
        _placeholder_image(st, "no image on the container line")
        return
    text = image.text
    where = f"line {line}"
    if not image.resolved:
        st.hazard("runtime-expansion", "todo", line,
                  f"the image path {text} needs the shell ({', '.join(image.unresolved)}); set container.image")
        _placeholder_image(st, f"{where}: image {text} needs the shell at run time")
        return
    if re.match(r"^[a-z]+://", text):
        st.hazard("image-uri", "todo", line, f"the image {text} is pulled at run time on every node; "
                  f"`apptainer pull` it once and set container.image to the .sif")
        _placeholder_image(st, f"{where}: {text} (pull it once: apptainer pull)")
        return
    if not text.startswith("/"):
        resolved = os.path.normpath(os.path.join(st.js.cwd, os.path.expanduser(text)))
        note = f"{where}: {text}, relative in the script: resolved against {st.js.cwd}"
        text = resolved
    else:
        note = where
    if image.from_environment:
        note += f" (${', $'.join(image.from_environment)} from this shell's environment)"
    if re.fullmatch(schema.ABSOLUTE_PATH, text):
        d.set(("container", "image"), text, note)
        _arch_hint(st, text, line)
    else:
        _placeholder_image(st, f"{where}: {text} contains ',' or ':', which a profile path cannot")


def _placeholder_image(st: ImportState, why: str) -> None:
    path = str(Path(st.js.cwd) / f"{st.name}.sif")
    st.draft.set(("container", "image"), path, f"TODO: placeholder; {why}")


def _arch_hint(st: ImportState, text: str, line: int) -> None:
    low = text.lower()
    if re.search(r"aarch64|arm64|gh200|grace", low):
        st.evidence.arch = st.evidence.arch or ("aarch64", f"line {line}: {PurePosixPath(text).name}")
    if "gh200" in low:
        st.evidence.gh200 = st.evidence.gh200 or f"line {line}: {PurePosixPath(text).name}"
    if "rocm" in low:
        st.evidence.vendor = st.evidence.vendor or ("amd", f"line {line}: rocm in the image name")


def map_binds(st: ImportState) -> None:
    step = st.step
    if step is None or step.container is None:
        return
    specs: list[BindSpec] = []
    for name in BIND_VARIABLES:
        if name in st.env:
            value, line, how = st.env[name]
            for part in value.text.split(","):
                unresolved = value.unresolved if "$" in part else ()
                if unresolved and re.fullmatch(r"\$\{?(APPTAINER|SINGULARITY)_BIND(PATH)?\}?", part):
                    continue  # `X_BIND="/a,$X_BIND"`: the caller's own list
                if part.strip():
                    specs.append(BindSpec(Value(part, unresolved, value.from_environment), line, name))
    specs.extend(step.binds)
    hostlibs: dict[str, tuple[list[str], int, str]] = {}
    seen_targets: set[str] = set()
    for spec in specs:
        _bind(st, spec, hostlibs, seen_targets)
    for source_dir, (names, line, written) in hostlibs.items():
        _host_libraries(st, source_dir, names, line, written)


def _bind(st: ImportState, spec: BindSpec, hostlibs: dict, seen_targets: set[str]) -> None:
    d = st.draft
    where = f"line {spec.line}: {spec.how} {spec.spec.text}"
    parts = spec.spec.text.split(":")
    source, target = parts[0], parts[1] if len(parts) > 1 and parts[1] else parts[0]
    options = parts[2] if len(parts) > 2 else ""
    if not spec.spec.resolved:
        d.append_todo(("binds",), f"{where}: needs the shell ({', '.join(spec.spec.unresolved)}); give the "
                      "host path", {"source": source, "target": target})
        st.hazard("runtime-expansion", "todo", spec.line,
                  f"bind {spec.spec.text} needs the shell at run time ({', '.join(spec.spec.unresolved)}); "
                  "left as a TODO")
        return
    notes = [where]
    if spec.spec.from_environment:
        notes.append(f"${', $'.join(spec.spec.from_environment)} from this shell's environment")
    if not source.startswith("/"):
        source = os.path.normpath(os.path.join(st.js.cwd, os.path.expanduser(source)))
        notes.append(f"relative: resolved against {st.js.cwd}")
        if not target.startswith("/"):
            target = source
    source, target = source.rstrip("/") or "/", target.rstrip("/") or "/"
    if not (re.fullmatch(schema.ABSOLUTE_PATH, source) and re.fullmatch(schema.ABSOLUTE_PATH, target)):
        d.append_todo(("binds",), f"{where}: not an absolute path fabrikit can bind")
        return
    if target in SYSTEM_LIB_DIRS:
        if source in SYSTEM_LIB_DIRS:
            names = _library_hints(st, spec.line)
            entry = hostlibs.setdefault(source, ([], spec.line, spec.spec.text))
            entry[0].extend(n for n in names if n not in entry[0])
            return
        new_target = "/opt/fabrikit/bind/" + re.sub(r"[^A-Za-z0-9_.-]+", "-", source.strip("/"))
        st.hazard("bind-over-system-dir", "fixed", spec.line,
                  f"--bind {source}:{target} hides the container's own {target}; bound at {new_target} "
                  "and put on the library path instead")
        d.append(("library_path",), new_target, f"line {spec.line}: was bound over {target}")
        notes.append(f"was bound over the container's {target}")
        target = new_target
    if target in seen_targets:
        return
    seen_targets.add(target)
    entry: dict[str, Any] = {"source": source}
    if target != source:
        entry["target"] = target
    entry["readonly"] = "ro" in options.split(",")
    d.append(("binds",), entry, "; ".join(notes))
    st.carried["binds"] += 1


def _library_hints(st: ImportState, line: int) -> list[str]:
    """Library names a comment near a whole-directory bind says it is for."""
    names: list[str] = []
    for text, where in st.js.comments:
        if line - 4 <= where <= line + 1:
            names.extend(n for n in _LIBNAME.findall(text) if n not in names)
    return names


def _host_libraries(st: ImportState, source_dir: str, names: list[str], line: int, written: str) -> None:
    d = st.draft
    fabric = st.evidence.fabric_guess()
    how = "named in a comment beside the bind" if names else ""
    if not names and fabric == "slingshot":
        names, how = ["libcxi.so.1"], "the CXI library Slingshot's libfabric needs (fabric-facts.md)"
    names = [n for n in names if _SONAME.match(n) and not re.search(r"[,:]", n)]
    if not names:
        d.todo(("host_libraries", "names"), f"line {line}: the script bound all of {source_dir}; name the "
               "libraries the job needs from it (e.g. [libcxi.so.1]); doctor then binds their closure", [])
        st.hazard("whole-dir-bind", "todo", line,
                  f"--bind {written} binds the whole {source_dir} over the container's own libraries "
                  "(glibc/ABI clashes); dropped: name the libraries it was for in host_libraries.names")
        return
    current = d.get(("host_libraries", "names")) or []
    d.set(("host_libraries", "names"), [*current, *[n for n in names if n not in current]],
          f"line {line}: instead of binding all of {source_dir} ({how})")
    paths = d.get(("host_libraries", "search_path")) or []
    if source_dir not in paths:
        d.set(("host_libraries", "search_path"), [*paths, source_dir], f"line {line}")
    st.hazard("whole-dir-bind", "fixed", line,
              f"--bind {written} binds the whole {source_dir} over the container's own libraries; replaced by "
              f"host_libraries.names {names} (bound file by file with their dependency closure)")
