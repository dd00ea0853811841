#!/usr/bin/env python3
"""
The structure figures of issue 26, for a tree (default: this checkout),
so that a change can report them before and after:

  fields      members of BDRVDrbdState, DrbdConnection and DrbdPeer
  lock sites  qemu_mutex_lock(&s->lock) and the lock guards on s->lock
  one-stmt    critical sections on s->lock of a single statement
  long fns    functions of block/drbd/*.c over 60 lines
  helpers     lines of the drbd iotests outside their test methods
              (module level and setUp/tearDown/helpers of the classes)

usage: metrics.py [TREE]    (TREE: a checkout, e.g. a `git worktree`)
"""

import os
import re
import sys
from typing import Dict, List


def struct_fields(text: str, name: str) -> int:
    """Members of struct @name (lines ending in ';' at its top level)"""
    m = re.search(r'(typedef )?struct ' + name + r' \{', text)
    if not m:
        m = re.search(r'struct ' + name + r' \{', text)
    if not m:
        return -1
    depth = 0
    count = 0
    i = text.index('{', m.start())
    line = ''
    for ch in text[i:]:
        if ch == '{':
            depth += 1
        elif ch == '}':
            depth -= 1
            if depth == 0:
                break
        if ch == '\n':
            s = re.sub(r'/\*.*?\*/', '', line).strip()
            if depth == 1 and s.endswith(';') and not s.startswith('*'):
                count += 1
            line = ''
        else:
            line += ch
    return count


def c_functions(text: str) -> Dict[str, int]:
    """Function name -> lines, for top-level function bodies"""
    out: Dict[str, int] = {}
    lines = text.split('\n')
    i = 0
    while i < len(lines):
        if lines[i] == '{':
            # the name: the last identifier before '(' in the lines above
            j = i - 1
            head = ''
            while j >= 0 and lines[j] and not lines[j].startswith(('}', '#')):
                head = lines[j] + ' ' + head
                if re.match(r'^[A-Za-z_]', lines[j]):
                    break
                j -= 1
            m = re.search(r'(\w+)\s*\(', head)
            k = i + 1
            while k < len(lines) and lines[k] != '}':
                k += 1
            if m and '=' not in head.split('(')[0]:
                out[m.group(1)] = k - i + 1
            i = k
        i += 1
    return out


def lock_sites(text: str) -> List[int]:
    """[sites, one-statement sections] on s->lock"""
    sites = len(re.findall(r'qemu_mutex_lock\(&(s|peer->s|\w+->s)->lock\)',
                           text))
    sites += len(re.findall(r'QEMU_LOCK_GUARD\(&(s|\w+->s)->lock\)', text))
    one = len(re.findall(
        r'qemu_mutex_lock\(&\w+(->s)?->lock\);\n[^\n;{}]*;\n\s*'
        r'qemu_mutex_unlock\(&\w+(->s)?->lock\);', text))
    return [sites, one]


def iotest_helper_lines(path: str) -> int:
    """Lines of an iotest that are not inside a test_* method"""
    n = 0
    in_test = False
    for line in open(path, encoding='utf-8'):
        if re.match(r'    def test_', line):
            in_test = True
        elif re.match(r'    (def |@)|\S', line):
            in_test = False
        if not in_test and line.strip() and \
                not line.lstrip().startswith('#'):
            n += 1
    return n


def main() -> None:
    tree = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.join(os.path.dirname(__file__), '..')
    drbd = os.path.join(tree, 'block', 'drbd')
    hdr = open(os.path.join(drbd, 'drbd-int.h'), encoding='utf-8').read()
    for name in ('BDRVDrbdState', 'DrbdConnection', 'DrbdPeer'):
        print(f'fields {name}: {struct_fields(hdr, name)}')
    sites = one = 0
    long_fns = []
    for f in sorted(os.listdir(drbd)):
        if not f.endswith('.c'):
            continue
        text = open(os.path.join(drbd, f), encoding='utf-8').read()
        s, o = lock_sites(text)
        sites += s
        one += o
        for fn, n in c_functions(text).items():
            if n > 60:
                long_fns.append((n, f'{f}:{fn}'))
    print(f'lock sites on s->lock: {sites}')
    print(f'one-statement critical sections: {one}')
    print(f'functions over 60 lines: {len(long_fns)}')
    for n, fn in sorted(long_fns, reverse=True):
        print(f'  {n:4} {fn}')
    tests = os.path.join(tree, 'tests', 'qemu-iotests', 'tests')
    total = 0
    for f in sorted(os.listdir(tests)):
        if f.startswith('drbd') and not f.endswith('.out'):
            total += iotest_helper_lines(os.path.join(tests, f))
    print(f'iotest lines outside test methods: {total}')


if __name__ == '__main__':
    main()
