#!/usr/bin/env python3
"""Every MPI call that takes a communicator or reads a request is defined by libreprise_interpose.so (served, or
refused on the program's handles), so none reaches the library unprotected with the program's handles.

    check_coverage.py PREPROCESSED_MPI_H LIBRARY REFUSED_CPP

Prints how many are served and refused; exits 1 naming each call that is neither."""
import os
import re
import subprocess
import sys

# The generator's own reading of mpi.h (which calls exist, which read requests).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "interpose"))
from refusals import prototypes, reads_requests  # noqa: E402


def main():
    header, library, refused_cpp = sys.argv[1:4]
    nm = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=True).stdout
    defined = set(re.findall(r"\sT\s+(MPI_\w+)$", nm, flags=re.M))
    refused = set(re.findall(r'extern "C" int (MPI_\w+)\(', open(refused_cpp).read()))
    needed = set()
    for name, args in prototypes(header):
        if name.startswith("MPI_T_"):
            continue
        if re.search(r"\bMPI_Comm\s+\w", args) or (reads_requests(name) and "MPI_Request" in args):
            needed.add(name)
    missing = sorted(needed - defined)
    served = needed & defined - refused
    print("%d MPI calls take a communicator or read a request: %d served, %d refused on the program's handles, "
          "%d neither" % (len(needed), len(served), len(needed & refused), len(missing)))
    for name in missing:
        print("not covered: %s (the program's handles would reach the library unprotected)" % name)
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
