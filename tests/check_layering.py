#!/usr/bin/env python3
"""The layering of ../shared/DESIGN.md section 3, checked on the include lines of every source file.

    interpose -> mpi (its public API);  mpi -> {runtime, protocol};  sim -> protocol;  protocol -> {core, logging};
    runtime -> core;
    {core, logging} -> gpu -> kernels

Each folder may include its own headers and those of the layers it is allowed to use; MPI, CUDA and NCCL headers
only where listed. Prints every violation (file, line, include, the rule) and exits 1 when there is one.
Usage: check_layering.py SOURCE_ROOT
"""
import os
import pathlib
import re
import sys

# folder -> the project folders its files may include (besides the public include/reprise headers)
ALLOWED = {
    "kernels": {"kernels"},
    "src/gpu": {"gpu", "kernels"},
    "src/core": {"core", "gpu", "kernels"},
    "src/logging": {"logging", "core", "gpu"},
    "src/protocol": {"protocol", "logging", "core", "gpu"},
    "src/runtime": {"runtime", "core", "logging", "gpu", "kernels"},
    "src/mpi": {"mpi", "runtime", "protocol", "logging", "core", "gpu", "kernels"},
    "src/sim": {"sim", "protocol", "logging", "core", "gpu"},
    "src/interpose": {"interpose"},  # the runtime through its public headers (include/reprise) only
    "include/reprise": set(),
    "apps": set(),
}
# Exceptions, each with its reason: file -> project folders it may include besides its folder's.
EXCEPTIONS = {
    "apps/reprise_cli.cpp": {"core", "protocol"},  # the `reprise` tool: core's file format, protocol's grouping
    "apps/reprise_sim.cpp": {"sim", "protocol"},  # `reprise-sim`: the simulator, protocol's matrix format
    "apps/tile_kernels_cuda.cpp": {"gpu"},  # the apps' own CUDA tiles use REPRISE_CUDA_CHECK
}
# Only src/mpi and src/interpose run MPI (the apps and tests are programs of their own).
MPI_HEADERS = re.compile(r"^(mpi\.h|mpi-ext\.h)$")
MPI_ALLOWED = {"src/mpi", "src/interpose", "apps"}
# MpiRuntime's, Comm's and the interposition's public API
MPI_FILES = {"include/reprise/mpi.hpp", "include/reprise/comm.hpp", "include/reprise/interpose.hpp"}
# Only src/gpu and kernels talk to CUDA and NCCL (the apps' own tile kernels aside).
GPU_HEADERS = re.compile(r"^(cuda[a-z_]*\.h|cu(blas|solver)[a-zA-Z_]*\.h|nccl\.h)$")
GPU_ALLOWED = {"src/gpu", "kernels"}
GPU_FILES = {"apps/tile_kernels_cuda.cpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def folder_of(rel):
    for f in sorted(ALLOWED, key=len, reverse=True):
        if rel == f or rel.startswith(f + "/"):
            return f
    return None


def sources(root):
    """The C++ files under the folders ALLOWED names, in order. Only those are walked: a build tree (under the root
    or a folder) changes while a build runs beside this test (ctest runs `mpi_programs_built` at the same time), and
    a directory gone between its listing and its reading (build/CMakeFiles/Progress) once failed a fresh clone's CI."""
    for top in sorted({f.split("/")[0] for f in ALLOWED}):
        for dirpath, dirnames, filenames in os.walk(root / top):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("build"))
            for name in sorted(filenames):
                if pathlib.Path(name).suffix in {".cpp", ".hpp", ".cu", ".h"}:
                    yield pathlib.Path(dirpath) / name


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems, files = [], 0
    for path in sources(root):
        rel = path.relative_to(root).as_posix()
        folder = folder_of(rel)
        if folder is None:
            continue
        files += 1
        own = folder.split("/")[-1]
        allowed = ALLOWED[folder] | EXCEPTIONS.get(rel, set()) | {own}
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, name = m.groups()
            if kind == '"' and "/" in name:
                top = name.split("/")[0]
                if top == "reprise":
                    continue  # the public headers: every layer may use them
                if top in {"core", "gpu", "kernels", "logging", "protocol", "runtime", "mpi"} and top not in allowed:
                    problems.append(f"{rel}:{n}: includes {name}: {folder} may use only "
                                    f"{', '.join(sorted(allowed)) or 'the public headers'}")
            elif kind == "<":
                if MPI_HEADERS.match(name) and folder not in MPI_ALLOWED and rel not in MPI_FILES:
                    problems.append(f"{rel}:{n}: includes <{name}>: only src/mpi calls MPI")
                if GPU_HEADERS.match(name) and folder not in GPU_ALLOWED and rel not in GPU_FILES:
                    problems.append(f"{rel}:{n}: includes <{name}>: only src/gpu and kernels include CUDA or NCCL")
    for p in problems:
        print(p)
    if problems:
        print(f"layering: {len(problems)} violation(s) in {files} files")
        return 1
    print(f"layering ok: {files} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
