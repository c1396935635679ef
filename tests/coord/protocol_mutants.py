#!/usr/bin/env python3
"""Shows that the protocol tests can fail, and that each rule PROTOCOL.md marks [model] is needed: for every mutant
below (one rule removed), a copy of the committed tree is patched, reprise_coord_tests is rebuilt and the protocol
tests must FAIL. Not part of ctest (a few minutes). Run: /usr/bin/python3 tests/coord/protocol_mutants.py
Exit status 0 when every mutant is caught and the unmutated tree passes."""
import os, shutil, subprocess, sys, tempfile

PROTO, SIM = "src/coord/protocol.cpp", "tests/coord/protocol_sim.hpp"
MUTANTS = {  # name: (file, original text, mutated text, the rule it removes)
    "no-barrier-phase": (SIM, "p.core->raise_phase(mx);", "(void)mx;",
                         "the group barrier sets every member's phase to the group maximum"),
    "no-r-owes": (PROTO, "if (p.rolled_back || rolled_back) {", "if (p.rolled_back) {",
                  "rolled-back senders owe survivors from their restored log snapshot"),
    "no-gating": (PROTO, "for (const Item& it : items_) (!low || it.phase <= *low ? out : keep).push_back(it);",
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
    root = subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip()
    work = tempfile.mkdtemp(prefix="reprise-mutants-")
    try:
        src, build = os.path.join(work, "src"), os.path.join(work, "build")
        os.makedirs(src)
        subprocess.run(f"git -C {root} archive HEAD | tar -x -C {src}", shell=True, check=True)
        print(f"[mutants] configuring a copy of HEAD in {work}")
        r = run(["cmake", "-S", src, "-B", build, "-DREPRISE_ENABLE_MPI=OFF", "-DREPRISE_ENABLE_CUDA=OFF",
                 "-DREPRISE_BUILD_BENCH=OFF"], root)
        if r.returncode:
            print(r.stdout[-3000:]); return 2
        pristine = {f: open(os.path.join(src, f)).read() for f in {PROTO, SIM}}
        test = [os.path.join(build, "tests/coord/reprise_coord_tests"), "--gtest_filter=Protocol*"]

        def build_and_test():
            b = run(["cmake", "--build", build, "-j", str(os.cpu_count() or 2), "--target", "reprise_coord_tests"], root)
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
        print(f"[mutants] {caught}/{len(MUTANTS)} mutants caught")
        return 0 if caught == len(MUTANTS) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
