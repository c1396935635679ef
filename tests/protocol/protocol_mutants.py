#!/usr/bin/env python3
"""Shows that the protocol tests can fail, and that each rule PROTOCOL.md marks [model] is needed: for every mutant
below (one rule removed), a copy of the source tree is patched, reprise_protocol_tests is rebuilt and the protocol
tests must FAIL. The ctest protocol_mutants_are_caught runs it (a few minutes: one build of the library, then one
file per mutant). Run: python3 tests/protocol/protocol_mutants.py [SOURCE_ROOT [WORK_DIR]]
The copy holds the files git tracks or would track (committed or not). WORK_DIR (default: a temporary folder,
removed at the end) keeps the copy's build between runs. Exit status 0 when every mutant is caught and the
unmutated tree passes."""
import os, shutil, subprocess, sys, tempfile

PROTO, COORD, SIM = "src/protocol/process.cpp", "src/protocol/coordinator.cpp", "tests/protocol/protocol_sim.hpp"
MUTANTS = {  # name: (file, original text, mutated text, the rule it removes)
    "no-barrier-phase": (SIM, "p.core->raise_phase(mx);", "(void)mx;",
                         "the group barrier sets every member's phase to the group maximum"),
    "no-r-owes": (PROTO, "if (p.rolled_back || rolled_back) {", "if (p.rolled_back) {",
                  "rolled-back senders owe survivors from their restored log snapshot"),
    "no-gating": (COORD, "for (const Item& it : items_) (!low || it.phase <= *low ? out : keep).push_back(it);",
                  "for (const Item& it : items_) out.push_back(it);\n  (void)low;",
                  "release rule: nothing at a phase above an outstanding orphan's"),
    "no-captured-orphan-record": (PROTO, "  orphan_record_ = c.orphan_record;\n", "  orphan_record_.clear();\n",
                                  "the orphan record is part of the capture"),
    "no-exchange-view": (PROTO, "    if (rolled_back) apply_view(p.peer, p.committed);\n", "",
                         "the restart exchange carries committed views (GC, invariant 5)"),
    "repair-loses-survivor-traffic": (SIM, "if (a != b && (R.count(a) || R.count(b))) {", "if (a != b) {",
                                      "survivor-to-survivor messages in flight are delivered exactly once"),
    "no-orphan-suppression": (PROTO, "  r.orphan = limit != orphan_limit_.end() && seq <= limit->second;",
                              "  r.orphan = false;\n  (void)limit;",
                              "re-executed sends already delivered are notified, not sent"),
}


def run(cmd, cwd):
    return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main():
    root = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else subprocess.check_output(
        ["git", "rev-parse", "--show-toplevel"], text=True).strip()
    keep = len(sys.argv) > 2
    work = os.path.abspath(sys.argv[2]) if keep else tempfile.mkdtemp(prefix="reprise-mutants-")
    try:
        src, build = os.path.join(work, "src"), os.path.join(work, "build")
        files = subprocess.check_output(["git", "-C", root, "ls-files", "-co", "--exclude-standard", "-z"],
                                        text=True).split("\0")
        for f in filter(None, files):
            s, d = os.path.join(root, f), os.path.join(src, f)
            if not os.path.isfile(s):
                continue
            os.makedirs(os.path.dirname(d), exist_ok=True)
            if not os.path.exists(d) or open(s, "rb").read() != open(d, "rb").read():
                shutil.copy2(s, d)  # unchanged files keep their time stamps: the kept build stays valid
        print(f"[mutants] configuring a copy of {root} in {work}")
        r = run(["cmake", "-S", src, "-B", build, "-DREPRISE_ENABLE_MPI=OFF", "-DREPRISE_ENABLE_CUDA=OFF",
                 "-DREPRISE_ENABLE_KOKKOS=OFF", "-DREPRISE_BUILD_BENCH=OFF",
                 # -O1 without debug information: only pass or fail matters here, and the build is most of the time
                 "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG"],
                root)
        if r.returncode:
            print(r.stdout[-3000:]); return 2
        pristine = {f: open(os.path.join(src, f)).read() for f in {PROTO, COORD, SIM}}
        test = [os.path.join(build, "tests/protocol/reprise_protocol_tests"), "--gtest_filter=Protocol*"]

        def build_and_test():
            b = run(["cmake", "--build", build, "-j", str(os.cpu_count() or 2), "--target", "reprise_protocol_tests"],
                    root)
            if b.returncode:
                return None, b.stdout[-2000:]
            t = run(test, root)
            failed = sorted({l.split()[3] for l in t.stdout.splitlines() if l.startswith("[  FAILED  ] Protocol")})
            return t.returncode == 0, failed

        ok, detail = build_and_test()
        print(f"[mutants] unmutated: {'pass' if ok else 'FAIL'}")
        if not ok:
            print(detail); return 1
        caught = 0
        for name, (f, old, new, rule) in MUTANTS.items():
            text = pristine[f]
            if old not in text:
                print(f"[mutants] {name}: the text to mutate is gone from {f}; update this script"); return 2
            for g, t in pristine.items():
                open(os.path.join(src, g), "w").write(t)
            open(os.path.join(src, f), "w").write(text.replace(old, new, 1))
            passed, detail = build_and_test()
            if passed is None:
                print(f"[mutants] {name}: does not build:\n{detail}"); return 2
            caught += not passed
            print(f"[mutants] {name:32s} {'caught' if not passed else 'NOT CAUGHT'}  ({rule})"
                  + (f"\n            failing: {', '.join(detail)}" if not passed else ""))
        for g, t in pristine.items():  # the copy as it was, for the next run
            open(os.path.join(src, g), "w").write(t)
        print(f"[mutants] {caught}/{len(MUTANTS)} mutants caught")
        return 0 if caught == len(MUTANTS) else 1
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
