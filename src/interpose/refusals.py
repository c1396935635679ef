#!/usr/bin/env python3
"""Writes refused.cpp: for every function of mpi.h that takes a communicator or a request and that the
interposition does not serve, a definition with the library's own prototype. On a handle of the interposition
(MPI_COMM_WORLD, a communicator derived from it, a request it made) it stops the job with an error naming the
call and why; on any other handle (the runtime's own) it calls the library (PMPI_). So no MPI call of the program
runs unprotected on the program's communicators.

    refusals.py PREPROCESSED_MPI_H OUT_CPP SOURCE...

PREPROCESSED_MPI_H: mpi.h as the compiler preprocessed it (only the declarations this MPI has); SOURCE: the files
whose `extern "C" int MPI_x(` definitions are the served calls.
"""
import re
import sys

# Why a family is refused (the first pattern that matches the name).
WHY = [
    (r"^MPI_(Win|Put|Get|Accumulate|Get_accumulate|Fetch_and_op|Compare_and_swap|Rput|Rget|Raccumulate|"
     r"Rget_accumulate)",
     "one-sided communication is not logged by the protocol, so a rollback could not replay it"),
    (r"^MPI_(Comm_spawn|Comm_connect|Comm_accept|Comm_join)", "new processes and connections between jobs are the "
     "runtime's own (replacements after a failure); intercommunicators within the job are served "
     "(MPI_Intercomm_create)"),
    (r"^MPI_(Comm_create_from_group|Intercomm_create_from_groups)", "the communicators of MPI sessions are not "
     "supported: derive them from MPI_COMM_WORLD"),
    (r"^MPI_Graph", "MPI-1's graph topology (MPI_Graph_create) is not supported: every rank would hold the whole "
     "graph, which grows with the job (MPI_Dist_graph_create, its adjacent form and MPI_Cart_create are served)"),
    (r"^MPI_I?[Nn]eighbor_", "this form of a neighbourhood collective is not supported yet (large counts): the "
     "int-count forms are served (docs/WRAPPING.md)"),
    (r"(?i)^MPI_(I?(barrier|bcast|reduce|allreduce|gather|allgather|scatter|alltoall|scan|exscan|reduce_scatter)"
     r"\w*|\w+_init(_c)?)$", "this form of a collective is not supported yet (large counts): the int-count forms "
     "are served, blocking, non-blocking and persistent (docs/WRAPPING.md)"),
]
GENERIC = "it is not supported on the application's communicators under Reprise (docs/WRAPPING.md lists what is)"
# Refused on MPI_COMM_SELF too (the library's communicator, but the processes or connections they make would be
# outside the protocol; the runtime makes its replacements on communicators of its own).
SELF_TOO = ("MPI_Comm_spawn", "MPI_Comm_spawn_multiple", "MPI_Comm_connect", "MPI_Comm_accept")


def prototypes(header):
    """(name, parameters) of every `int MPI_x(...)` declared in `header` (mpi.h as the compiler preprocessed it:
    only the declarations this MPI really has)."""
    text = open(header).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
    for statement in text.split(";"):
        m = re.search(r"\bint\s+(MPI_\w+)\s*\(", statement)
        if not m:
            continue
        depth, i = 1, m.end()
        while i < len(statement) and depth:
            depth += {"(": 1, ")": -1}.get(statement[i], 0)
            i += 1
        if depth == 0:
            yield m.group(1), " ".join(statement[m.end():i - 1].split())


def reads_requests(name):
    """Whether the call reads the requests it is given (the others' requests are outputs: the library makes them)."""
    return re.match(r"^MPI_(Wait|Test|Cancel|Request_|Start|Grequest_complete|Pready|Parrived)", name) is not None


def split_args(args):
    out, depth, cur = [], 0, ""
    for ch in args:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch in "([" and 1 or 0
        depth -= ch in ")]" and 1 or 0
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def arg_name(arg, i):
    m = re.search(r"(\w+)\s*(\[[^\]]*\])*\s*$", arg)
    name = m.group(1) if m else ""
    known_types = {"int", "void", "char", "MPI_Comm", "MPI_Request", "MPI_Datatype", "MPI_Aint", "MPI_Count"}
    if not name or name in known_types or arg.strip() == name:
        return None
    return name


def main():
    header, out = sys.argv[1:3]
    served = set()
    for source in sys.argv[3:]:
        served |= set(re.findall(r'extern "C" int (MPI_\w+)\(', open(source).read()))
    seen, defs, names = set(), [], []
    for name, args in prototypes(header):
        if name in seen or name in served or name.startswith("MPI_T_") or name in ("MPI_Pcontrol",):
            continue
        seen.add(name)
        parts = [] if args in ("", "void") else split_args(args)
        if any("..." in p for p in parts):
            continue
        comms = [p for p in parts if re.match(r"^MPI_Comm\s+\w+$", p)]
        reads = reads_requests(name)
        reqs = [p for p in parts if reads and re.match(r"^MPI_Request\s*(\*\s*)?\w+$", p)]
        if not comms and not reqs:
            continue
        arg_names = [arg_name(p, i) for i, p in enumerate(parts)]
        if any(a is None for a in arg_names):
            continue  # an unnamed parameter: nothing to forward safely
        why = next((w for pat, w in WHY if re.search(pat, name)), GENERIC)
        checks = []
        for p in comms:
            checks.append("reprise::interpose::ours(%s)" % arg_name(p, 0))
            if name in SELF_TOO:
                checks.append("%s == MPI_COMM_SELF" % arg_name(p, 0))
        for p in reqs:
            n = arg_name(p, 0)
            checks.append("reprise::interpose::ours(%s%s)" % ("*" if "*" in p else "", n))
        if not checks:
            continue
        body = ("  if (reprise::interpose::serving() && (%s))\n    reprise::interpose::refuse(\"%s\", \"%s\");\n"
                "  return P%s(%s);\n") % (" || ".join(checks), name, why.replace('"', '\\"'), name,
                                        ", ".join(arg_names))
        defs.append("extern \"C\" int %s(%s) {\n%s}\n" % (name, args, body))
        names.append(name)
    with open(out, "w") as f:
        f.write("// Generated by src/interpose/refusals.py from %s: do not edit.\n" % header)
        f.write("#include <mpi.h>\n\n#include \"interpose/wrapped.hpp\"\n\n")
        f.write("// (deprecated calls are forwarded as they are: the program chose them)\n")
        f.write("#pragma GCC diagnostic ignored \"-Wdeprecated-declarations\"\n\n")
        f.write("\n".join(defs))
        f.write("\nnamespace reprise::interpose {\nconst char* const kRefused[] = {\n")
        f.write("".join('    "%s",\n' % n for n in names))
        f.write("    nullptr};\n}  // namespace reprise::interpose\n")


if __name__ == "__main__":
    main()
