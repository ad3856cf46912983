"""What the structure checks share: run the check (or its self test) and report."""
import sys


def run(check, self_test, root, label):
    """`--self-test` runs self_test(); otherwise check(root)'s problems are printed, one a line,
    then their count, and the exit code says whether there were any."""
    if "--self-test" in sys.argv[1:]:
        return self_test()
    problems = check(root)
    for p in problems:
        print(p)
    print(f"{label}: {len(problems)} problem(s)")
    return 1 if problems else 0
