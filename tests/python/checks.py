"""The check of every Python test here: a failed one is counted and said on
stderr, and the test goes on to report the others."""
import sys


class Checks:
    def __init__(self, who=""):
        self.who, self.failures = who, 0

    def __call__(self, cond, what):
        if not cond:
            self.failures += 1
            print(f"{self.who}{': ' if self.who else ''}FAIL {what}",
                  file=sys.stderr, flush=True)
        return cond
